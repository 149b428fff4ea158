"""Run the quality checks over the landed catalog and commit their tables, a night at a time.

Both checks remember what they have checked, so a pass reads and compares only the records of
runs it has not seen, and leaves the tables a full recheck would; `full=True`
(`--full`) recomputes everything from the catalog.

- `decontaminate_catalog`: per benchmark file, the runs checked with the same file (sha256)
  and settings (`state/decontamination_runs/<benchmark>.parquet`); a run not among them, or
  whose record count changed, is checked now. A run's matches, every benchmark's, are one
  file, `benchmark_matches/<run_id>.parquet` (none when nothing matched);
  `benchmark_checks/<benchmark>.parquet` sums the checked runs up as one row. Another file or
  other settings recheck every run.
- `cluster_catalog` (pipeline/quality/cluster_check.py): near-duplicate clusters, a run's
  questions MinHashed once and a new night's joined with them.

Files are written atomically under `<out>/quality/`, where every catalog refresh picks the
tables up (`Store.refresh_catalog`); the caller refreshes. A benchmark added later is checked
against every existing record without regenerating anything.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.config import PipelineConfig
from pipeline.core.errors import BadInputError
from pipeline.core.io import utcnow, write_parquet_atomic
from pipeline.quality.benchmarks import Benchmark, BenchmarkError, load_benchmark
from pipeline.quality.decontamination import METHODS, Match, decontaminate
from pipeline.quality.state import (
    file_settings,
    quality_lock,
    same_settings,
    state_path,
    write_rows,
)
from pipeline.store.scoping import scoped_to_runs
from pipeline.store.store import Store, StoreError, connect_readonly
from schemas.tables import schema_for

Encode = Callable[[list[str]], np.ndarray]

# What the checks read of each record; the evidence passage's title comes from `passages`.
RECORDS_SQL = """
SELECT c.record_id, c.run_id, c.question, c.answer, c.evidence,
       coalesce(p.title, CASE WHEN c.evidence_passage_id = c.source_passage_id
                              THEN c.source_title END) AS evidence_title
FROM curriculum c LEFT JOIN passages p ON p.id = c.evidence_passage_id
{where}
ORDER BY c.record_id
"""
QUESTIONS_SQL = "SELECT record_id, run_id, question FROM curriculum c {where} ORDER BY record_id"


@contextlib.contextmanager
def open_catalog(catalog: str | Path) -> Iterator[duckdb.DuckDBPyConnection]:
    try:
        con = connect_readonly(catalog)
    except StoreError as exc:
        raise BadInputError(str(exc), "run `curriculum nightly` first") from exc
    with con:
        yield con


def select_runs(
    con: duckdb.DuckDBPyConnection, sql: str, run_ids: Sequence[str] | None
) -> list[dict[str, Any]]:
    """Rows of `sql` (a `{where}` slot over curriculum `c`) for `run_ids` (None: every run)."""
    if run_ids is None:
        return con.sql(sql.format(where="")).to_arrow_table().to_pylist()
    if not run_ids:
        return []
    query = sql.format(where="WHERE list_contains(?, c.run_id)")
    with scoped_to_runs(con, run_ids):  # their files alone, not a year of nights' (the
        # filter stays: a catalog from before lists no files to scope by)
        return con.sql(query, params=[list(run_ids)]).to_arrow_table().to_pylist()


def catalog_records(
    catalog: str | Path | duckdb.DuckDBPyConnection, run_ids: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """The records of the catalog (of `run_ids` only, when given) with the fields the checks
    compare, by record_id (read-only)."""
    if isinstance(catalog, duckdb.DuckDBPyConnection):
        return select_runs(catalog, RECORDS_SQL, run_ids)
    with open_catalog(catalog) as con:
        return select_runs(con, RECORDS_SQL, run_ids)


def run_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Records per run in the catalog: a checked run whose count changed is checked again.
    Counted from the manifests (catalog_files' rows), not by reading every night's files."""
    try:
        rows = con.execute(
            "SELECT run_id, sum(rows)::BIGINT FROM catalog_files WHERE view = 'curriculum' "
            "GROUP BY run_id"
        ).fetchall()
    except duckdb.CatalogException:  # a catalog from before that table
        rows = con.sql("SELECT run_id, count(*) FROM curriculum GROUP BY run_id").fetchall()
    return dict(sorted(rows))


def embedder_encode(cfg: PipelineConfig) -> tuple[Encode, str]:
    """The run's embedder on the query side, L2-normalised whatever `embedding.normalize` says
    (thresholds are cosines); loaded once per command."""
    from pipeline.retrieval.embedding import Embedder

    embedder = Embedder.from_config(cfg)

    def encode(texts: list[str]) -> np.ndarray:
        v = embedder.encode_queries(texts)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    return encode, embedder.model_ref


def _write(store: Store, table: str, name: str, rows: list[dict[str, Any]]) -> Path:
    path = store.quality_path(table, name)
    write_parquet_atomic(path, pa.Table.from_pylist(rows, schema=schema_for(table)))
    return path


# ---- decontamination ------------------------------------------------------------------


@dataclass
class BenchmarkResult:
    benchmark: Benchmark
    matches: list[Match]  # found by this pass, in the records it checked
    flagged: list[str]  # record ids this pass flagged
    by_method: dict[str, int] = field(default_factory=dict)  # records flagged per method
    records_checked: int = 0  # records this pass checked
    runs_checked: list[str] = field(default_factory=list)  # runs this pass checked
    records_flagged: int = 0  # records with a match in every run checked, this pass or before
    full: bool = True  # every run was checked (new file or settings, or --full)


@dataclass
class _BenchPlan:
    bench: Benchmark
    settings: dict[str, Any]
    todo: list[str]  # runs to check now
    kept: dict[str, dict[str, Any]]  # runs checked before that stay as they are
    replace: set[str]  # runs whose matches of this benchmark are replaced (or dropped)
    full: bool


def _plan(
    store: Store, bench: Benchmark, settings: dict[str, Any], counts: dict[str, int], full: bool
) -> _BenchPlan:
    path = state_path(store.root, "decontamination_runs", bench.name)
    before: dict[str, dict[str, Any]] = {}
    same = False
    if path.exists():
        _, was = file_settings(path)
        before = {r["run_id"]: r for r in pq.read_table(path).to_pylist()}
        same = not full and same_settings(was, settings)
    done = before if same else {}
    todo = [r for r, n in counts.items() if (done.get(r) or {}).get("records") != n]
    kept = {r: row for r, row in done.items() if r in counts and r not in todo}
    replace = set(todo) | (set(before) - set(counts))  # gone runs lose this benchmark's rows
    return _BenchPlan(bench, settings, todo, kept, replace, not done)


def decontaminate_catalog(
    cfg: PipelineConfig,
    store: Store,
    benchmarks: Sequence[str | Path],
    encode: Encode | None = None,
    embedder_model: str | None = None,
    full: bool = False,
) -> list[BenchmarkResult]:
    """Check the catalog's records against each benchmark and commit the matches: only runs
    not yet checked with this file and these settings, unless `full`. The caller refreshes
    the catalog."""
    q = cfg.quality
    loaded = [load_benchmark(p) for p in benchmarks]
    names = [b.name for b in loaded]
    if dupes := sorted({n for n in names if names.count(n) > 1}):
        raise BenchmarkError(
            f"two benchmark files are both named {dupes[0]!r}",
            "a benchmark is named by its file name: rename one of them",
        )
    use_embedding = q.embedding and encode is not None
    methods = [m for m in METHODS if use_embedding or m != "embedding"]
    with quality_lock(store.root):
        with open_catalog(store.catalog_path) as con:
            counts = run_counts(con)
            plans = []
            for bench in loaded:
                settings = {
                    "sha256": bench.sha256,
                    "methods": methods,
                    "ngram_n": q.ngram_n,
                    "ngram_threshold": q.ngram_threshold,
                    "embedding_threshold": q.embedding_threshold if use_embedding else None,
                    "embedder_model": embedder_model if use_embedding else None,
                }
                plans.append(_plan(store, bench, settings, counts, full))
            need = sorted({r for p in plans for r in p.todo})
            records = catalog_records(con, need)
        by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for rec in records:
            by_run[rec["run_id"]].append(rec)
        found: dict[str, list[dict[str, Any]]] = defaultdict(list)  # run -> new match rows
        results = []
        for p in plans:
            checked_at = utcnow()
            recs = sorted((r for run in p.todo for r in by_run[run]), key=lambda r: r["record_id"])
            matches = decontaminate(
                recs,
                p.bench,
                q.ngram_n,
                q.ngram_threshold,
                q.embedding_threshold if use_embedding else None,
                encode if use_embedding else None,
            )
            flagged_by_run: dict[str, set[str]] = defaultdict(set)
            for m in matches:
                found[m.run_id].append({**m.__dict__, "checked_at": checked_at})
                flagged_by_run[m.run_id].add(m.record_id)
            state = {r: p.kept[r] for r in p.kept}
            for run in p.todo:
                state[run] = {
                    "benchmark": p.bench.name,
                    "run_id": run,
                    "records": counts[run],
                    "records_flagged": len(flagged_by_run[run]),
                    "checked_at": checked_at,
                }
            p.kept = dict(sorted(state.items()))
            flagged = sorted({m.record_id for m in matches})
            results.append(
                BenchmarkResult(
                    p.bench,
                    matches,
                    flagged,
                    {m: len({x.record_id for x in matches if x.method == m}) for m in METHODS},
                    len(recs),
                    p.todo,
                    sum(r["records_flagged"] for r in p.kept.values()),
                    p.full,
                )
            )
        _write_matches(store, plans, found, counts)
        for p, res in zip(plans, results, strict=True):
            state_rows = list(p.kept.values())
            path = state_path(store.root, "decontamination_runs", p.bench.name)
            if p.todo or p.replace or not path.exists():
                write_rows(path, "decontamination_runs", state_rows, p.settings)
            check = {
                "benchmark": p.bench.name,
                "path": str(p.bench.path),
                "sha256": p.bench.sha256,
                "items": len(p.bench.items),
                "records_checked": sum(r["records"] for r in state_rows),
                "run_ids": [r["run_id"] for r in state_rows],
                "methods": methods,
                "ngram_n": q.ngram_n,
                "ngram_threshold": q.ngram_threshold,
                "embedding_threshold": p.settings["embedding_threshold"],
                "embedder_model": p.settings["embedder_model"],
                "records_flagged": res.records_flagged,
                "checked_at": utcnow(),
            }
            _write(store, "benchmark_checks", p.bench.name, [check])
            # A check from before per-run files kept one matches file per benchmark.
            legacy = store.quality_path("benchmark_matches", p.bench.name)
            if p.bench.name not in counts:
                legacy.unlink(missing_ok=True)
    return results


_ORDER = {m: k for k, m in enumerate(METHODS)}


def _write_matches(
    store: Store,
    plans: list[_BenchPlan],
    found: dict[str, list[dict[str, Any]]],
    counts: dict[str, int],
) -> None:
    """Each touched run's matches file: its other benchmarks' rows kept, the rechecked
    benchmarks' replaced; removed when nothing is left (or the run left the catalog)."""
    replaced: dict[str, set[str]] = defaultdict(set)
    for p in plans:
        for run in p.replace:
            replaced[run].add(p.bench.name)
    for run, benches in sorted(replaced.items()):
        path = store.quality_path("benchmark_matches", run)
        rows = []
        if path.exists():
            rows = [
                r
                for r in pq.read_table(path).to_pylist()
                if r["run_id"] == run and r["benchmark"] not in benches
            ]
        rows += found.get(run, [])
        if rows and run in counts:
            rows.sort(key=lambda r: (r["record_id"], r["benchmark"], _ORDER[r["method"]]))
            _write(store, "benchmark_matches", run, rows)
        else:
            path.unlink(missing_ok=True)


__all__ = [
    "QUESTIONS_SQL",
    "BenchmarkResult",
    "Encode",
    "catalog_records",
    "decontaminate_catalog",
    "embedder_encode",
    "open_catalog",
    "run_counts",
    "select_runs",
]
