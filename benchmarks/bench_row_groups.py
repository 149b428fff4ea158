"""A year of nights: what a whole-history read holds per Parquet row group, and whether month
files (fewer, larger row groups) would stop its peak memory growing.

With every run compacted, whole-history audits still peaked 15-35 MB higher at 365 bench nights
than at 10 (bench_history.py). A compacted bench night is one file of one row group per
table; this measures, side by side in one run, a table's history read as it is (one file a
night) and rewritten into one file per month at several row-group sizes (the same rows;
run_date becomes a column, which only adds to the month files' footers), to tell whether the
files or the row groups cost the memory; and the nightly files rewritten without min/max
statistics, and with five of their columns, to tell what of a row group's footer entry the
state is per (each against its own 10-night figure):

  count      SELECT count(*): metadata only
  narrow     a per-run aggregate over two narrow columns (a few hundred groups)
  bulky      avg(length(<the table's widest text column>)): every page of a bulky column

Each (layout, query) runs in a fresh subprocess (the file list on its stdin) with DuckDB's
default threads, printed: a bulky scan buffers column chunks per thread. Its figure is that
process's VmHWM, one sample (the interpreter with duckdb imported is the floor, printed).
The N-night store is bench_history.py's cache (`<N>-compacted`, built by its first run);
the 10-night store is the reference every ratio is taken to. The month files are written under
data/out/bench/row-groups/ once and kept (about 3 GB per table at 365 nights, minutes to
write; delete the folder after rebuilding the stores with other options).

    .venv/bin/python benchmarks/bench_row_groups.py --nights 365 --table curriculum
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "data/out/bench"
BULKY = {"curriculum": "prompt", "solver_rollouts": "raw_output", "proposer_rollouts": "prompt"}


def nightly_files(n: int, records: int, seed: int, table: str) -> list[Path]:
    """The N-night store's files of `table`, one a night (bench_history.py builds the store:
    this script measures a layout, it does not build a history)."""
    store = BENCH / f"history-{records}-{seed}/{n}-compacted"
    files = sorted(store.glob(f"shards/{table}/run_date=*/run_id=*/*.parquet"))
    if len(files) != n:
        raise SystemExit(f"{store}: {len(files)} {table} files, not {n}; run bench_history.py "
                         f"--nights {n} --records-per-night {records} first")  # fmt: skip
    return files


def month_files(files: list[Path], table: str, rows: int | None, out: Path) -> list[Path]:
    """`files` rewritten as one file per month, row groups of `rows` (None: each night's row
    group kept as it is, to separate the files' cost from the row groups'); cached, renamed
    into place once complete so a killed run leaves no half file under the final name."""
    folder = out / f"{table}-{rows or 'nightly'}"
    by_month: dict[str, list[Path]] = collections.defaultdict(list)
    for f in files:
        by_month[re.search(r"run_date=(\d{4}-\d{2})", str(f))[1]].append(f)
    written = []
    for month, group in sorted(by_month.items()):
        path = folder / f"{month}.parquet"
        written.append(path)
        if path.exists():
            continue
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with pq.ParquetWriter(tmp, _with_date(pq.read_table(group[0]), group[0]).schema,
                              compression="zstd", compression_level=3) as w:  # fmt: skip
            if rows is None:
                for f in group:
                    w.write_table(_with_date(pq.read_table(f), f))
            else:
                w.write_table(pa.concat_tables(_with_date(pq.read_table(f), f) for f in group),
                              rows)  # fmt: skip
        tmp.rename(path)
    return written


def nightly_rewritten(files: list[Path], table: str, how: str, out: Path) -> list[Path]:
    """`files` rewritten one for one, to tell what of a footer DuckDB's state is per: "no
    stats" without min/max statistics (a bulky text column's run to kilobytes), "5 columns"
    with the first five columns only (the same row groups, a fifteenth of the column chunks);
    cached like month_files."""
    folder = out / f"{table}-nightly-{how.replace(' ', '-')}"
    written = []
    for f in files:
        path = folder / f"{f.parent.parent.name}-{f.parent.name}.parquet"
        written.append(path)
        if path.exists():
            continue
        folder.mkdir(parents=True, exist_ok=True)
        tbl, tmp = pq.read_table(f), path.with_suffix(".tmp")
        if how == "5 columns":
            pq.write_table(tbl.select(tbl.column_names[:5]), tmp, compression="zstd")
        else:
            pq.write_table(tbl, tmp, compression="zstd", write_statistics=False)
        tmp.rename(path)
    return written


def _with_date(tbl: pa.Table, path: Path) -> pa.Table:
    """A month file's rows keep their night: run_date from the night's folder, as a column."""
    day = re.search(r"run_date=(\d{4}-\d{2}-\d{2})", str(path))[1]
    return tbl.append_column("run_date", pa.array([day] * tbl.num_rows).cast(pa.date32()))


def shape(files: list[Path]) -> tuple[int, int]:
    """(row groups, footer bytes) over `files`: what DuckDB's reader holds state for."""
    metas = [pq.ParquetFile(f).metadata for f in files]
    return sum(m.num_row_groups for m in metas), sum(m.serialized_size for m in metas)


CHILD = """
import re, sys, time
from pathlib import Path
import duckdb
def hwm():
    return int(re.search(r"VmHWM:\\s+(\\d+)", Path("/proc/self/status").read_text())[1]) / 1024
files, sql = sys.stdin.read().split("\\n"), sys.argv[1]
con = duckdb.connect()
if sql == "floor":
    print(con.execute("SELECT current_setting('threads')").fetchall()[0][0], hwm()); sys.exit()
con.execute("SET enable_progress_bar = false")
listing = "[" + ", ".join(repr(f) for f in files) + "]"
con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet({listing}, hive_partitioning = false)")
t = time.perf_counter()
con.execute(sql).fetchall()
print(time.perf_counter() - t, hwm())
"""


def measure(files: list[Path], sql: str) -> tuple[float, float]:
    """(seconds, peak MB) of `sql` over `files` in a fresh process, so no query inherits
    another's allocations (for "floor": DuckDB's threads and the bare process's MB)."""
    p = subprocess.run([sys.executable, "-c", CHILD, sql], input="\n".join(map(str, files)),
                       capture_output=True, text=True)  # fmt: skip
    if p.returncode:
        why = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        raise SystemExit(f"{sql}: {why}")
    out = p.stdout.split()
    return float(out[-2]), float(out[-1])


def main() -> None:
    """Every layout against every query, the 10-night files first (the ratios' reference)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nights", type=int, default=365)
    ap.add_argument("--records-per-night", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--table", default="curriculum", choices=sorted(BULKY))
    ap.add_argument("--row-groups", default="8192,16384,65536", help="month files' rows/group")
    a = ap.parse_args()
    t0, table = time.perf_counter(), a.table
    queries = {
        "count": "SELECT count(*) FROM t",
        "narrow": "SELECT run_id, count(*), max(length(record_id)) FROM t GROUP BY run_id",
        "bulky": f"SELECT avg(length({BULKY[table]})) FROM t",
    }
    base = nightly_files(10, a.records_per_night, a.seed, table)
    history = nightly_files(a.nights, a.records_per_night, a.seed, table)
    out = BENCH / f"row-groups/history-{a.records_per_night}-{a.seed}-{a.nights}"
    # label -> (files, the 10-night layout its ratios are taken to)
    first = "10 nights, nightly files"
    layouts = {first: (base, first), f"{a.nights} nights, nightly files": (history, first)}
    layouts[f"{a.nights}, month files, nightly groups"] = (
        month_files(history, table, None, out), first)  # fmt: skip
    for rows in map(int, a.row_groups.split(",")):
        layouts[f"{a.nights}, month files, {rows:,}-row groups"] = (
            month_files(history, table, rows, out), first)  # fmt: skip
    for how in ("no stats", "5 columns"):  # the same files' footers, smaller
        ref = f"10 nights, nightly files, {how}"
        layouts[ref] = (nightly_rewritten(base, table, how, out), ref)
        layouts[f"{a.nights} nights, nightly files, {how}"] = (
            nightly_rewritten(history, table, how, out), ref)  # fmt: skip
    threads, floor = measure(base[:1], "floor")
    print(f"{table}: peak MB of one query in a fresh process (floor {floor:.0f} MB: python "
          f"+ duckdb; {threads:.0f} DuckDB threads); x = over the same layout's 10-night "
          "figure\n")  # fmt: skip
    head = f"{'layout':44} {'files':>5} {'groups':>6} {'footers MB':>10}"
    print(head + "".join(f" {q:>14}" for q in queries))
    got: dict[str, dict[str, float]] = {}
    for label, (files, ref) in layouts.items():
        groups, footers = shape(files)
        cells = []
        for q, sql in queries.items():
            if label.endswith("5 columns") and q == "bulky":  # not among the five
                cells.append("-")
                continue
            _, mb = measure(files, sql)
            got.setdefault(label, {})[q] = mb
            cells.append(f"{mb:6.0f} ({mb / got[ref][q]:4.2f}x)")
        print(f"{label:44} {len(files):5} {groups:6} {footers / 1e6:10.1f}" + " ".join(
            f" {c:>14}" for c in cells))  # fmt: skip
    print(f"\n{time.perf_counter() - t0:.0f} s in all")


if __name__ == "__main__":
    main()
