"""Is `sql.timeout_s` honoured? Measured stop time of runaway cross joins vs the setting.

Writes a real DuckDB file with a passages-shaped table (N rows, default 50k: a self cross
join is 2.5 billion pairs, minutes of work), opens it the way `curriculum sql` / `audit --sql`
do (`connect_audit` with the `sql:` limits) and runs two runaway queries through the same
`fetch_table` the commands use, for each setting:
  aggregate  the whole join inside DuckDB before the first row (interrupted in execute)
  streaming  a join whose rare matching rows stream out (interrupted while fetching)
It prints, per setting and query, the measured time from the call to the SQLLimitError
(median and worst of --repeats) and the worst relative error; the target is within 10 %:
    .venv/bin/python benchmarks/bench_sql_timeout.py [--rows 50000] [--settings 0.5 1 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.catalog.bounded_sql import SQLLimitError, fetch_table  # noqa: E402
from pipeline.catalog.readonly_sql import connect_audit  # noqa: E402
from pipeline.core.config import SQLConfig  # noqa: E402

QUERIES = {
    "aggregate": "SELECT count(*) FROM passages a, passages b WHERE a.text < b.text",
    "streaming": "SELECT a.id, b.id FROM passages a, passages b "
    "WHERE a.text || b.text LIKE '%abcdef%'",
}


def write_catalog(path: Path, rows: int) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE passages AS SELECT range AS id, md5(range::VARCHAR) AS text "
            f"FROM range({rows})"
        )


def time_to_stop(catalog: Path, sql: str, timeout_s: float) -> float:
    # Past sql.max_rows' bound (1,000,000) on purpose, so only the time limit stops a
    # streaming join; model_copy does not validate.
    limits = SQLConfig(timeout_s=timeout_s).model_copy(update={"max_rows": 10_000_000})
    with connect_audit(catalog, limits) as con:
        start = time.perf_counter()
        try:
            fetch_table(con, "bench", sql, limits)
        except SQLLimitError:
            return time.perf_counter() - start
    raise SystemExit(f"query finished within {timeout_s} s; use more --rows")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--settings", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        catalog = Path(tmp) / "catalog.duckdb"
        write_catalog(catalog, args.rows)
        print(f"duckdb {duckdb.__version__}, {args.rows} rows, {args.repeats} runs each")
        print(f"{'query':<10} {'setting s':>9} {'median s':>9} {'worst s':>8} {'worst err':>9}")
        worst_overall = 0.0
        for name, sql in QUERIES.items():
            for setting in args.settings:
                runs = [time_to_stop(catalog, sql, setting) for _ in range(args.repeats)]
                err = max(abs(r - setting) / setting for r in runs)
                worst_overall = max(worst_overall, err)
                print(
                    f"{name:<10} {setting:>9.2f} {statistics.median(runs):>9.3f} "
                    f"{max(runs):>8.3f} {err:>8.1%}"
                )
        verdict = "within" if worst_overall <= 0.10 else "NOT within"
        print(f"worst relative error {worst_overall:.1%}: {verdict} the 10 % target")


if __name__ == "__main__":
    main()
