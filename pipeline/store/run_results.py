"""Each run's rows of the whole-history views the audits read (issue 28), materialised at every
refresh in the catalog's schema `run_results` (`run_results.funnel` is the `funnel` view's
rows, and so on): a whole-history audit then reads a few rows a run from one table instead of
binding and scanning a year of nights' files, whose every row group DuckDB holds state for
while it scans (benchmarks/bench_row_groups.py: ~0.06 MB each).

Every view named here is per run: each row is one run's, computed from that run's files
(scoping them to the run gives its rows) and its rows of the tables that span runs. So the
store keeps them run by run in a run index (`<store>/cache/run_results.duckdb`, the layout of
run_index.py), and a refresh computes only the runs whose inputs changed: a run is known by
the identity of every file of its own (its shards, its run record, its quality files, which
the checks name after it) and a digest of its rows in the tables that span runs (the
duplicate ranking's losers, the near-duplicate clusters): a new night that demotes an old
record recomputes the old record's run, from that run's files. Without a store root, or where
the index cannot be written, the tables are the views over every file, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from pipeline.store.run_index import (
    attach_index,
    detach_index,
    file_identity,
    index_version,
    transaction,
)

log = logging.getLogger(__name__)

SCHEMA = "run_results"
PATH = f"cache/{SCHEMA}.duckdb"  # relative to the store root
ALIAS = f"{SCHEMA}_index"
# The views materialised per run (schemas/views.sql): what the whole-history audits read.
VIEWS = (
    "funnel",
    "invalid_reasons",
    "verifier_histogram",
    "cluster_summary",
    "task_summary",
    "hop_summary",
    "wcr_by_coverage",
    "wcr_correctness",
    "run_overview",
    "run_quality",
    "shortcut_summary",
    "verifier_controls",
    "answer_leakage",
)
# The tables that span runs whose rows (each naming its run) a run's results depend on.
SPANNING = ("record_duplicates", "question_duplicates")
# The view several of them read, computed once a batch (a temporary table of its name, which
# the views read in its place as they read scoping's temporary views).
SHARED = "record_verdicts"
# Runs computed per scope: a first build over a year of nights binds 32 nights at a time.
BATCH_RUNS = 32

Scope = Callable[[duckdb.DuckDBPyConnection, Sequence[str] | None], None]


def materialise_run_results(
    con: duckdb.DuckDBPyConnection,
    root: Path | None,
    files: Mapping[str, Sequence[Path]],
    depends: Mapping[str, Any],
    scope: Scope,
) -> None:
    """`run_results.<view>` for every view of VIEWS on `con` (a catalog being built, its
    catalog_files written): from the index under `root`, synced first with `files` (each run
    of the catalog, its own files) and the spanning tables; `depends` is what else the rows
    depend on (views.sql's text). `scope` narrows the base views to some runs
    (scoping.scope_to_runs)."""
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    source = "main"
    if root is not None and _synced(con, root, files, depends, scope):
        source = ALIAS
    try:
        for view in VIEWS:
            con.execute(f"CREATE OR REPLACE TABLE {SCHEMA}.{view} AS SELECT * FROM {source}.{view}")
    finally:
        if source == ALIAS:
            detach_index(con, ALIAS)


def _synced(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    files: Mapping[str, Sequence[Path]],
    depends: Mapping[str, Any],
    scope: Scope,
) -> bool:
    """Attach the index and sync it; False (logged, detached) where it cannot be written."""
    path = root / PATH
    try:
        empty = {view: f"SELECT * FROM {view}" for view in VIEWS}
        attach_index(con, path, ALIAS, index_version({**depends, "tables": VIEWS}), empty)
        _sync(con, root, files, scope)
    except (OSError, duckdb.Error) as exc:
        log.warning("run results index %s not used (%s): computing every run", path, exc)
        detach_index(con, ALIAS)
        return False
    return True


def _identities(
    con: duckdb.DuckDBPyConnection, root: Path, files: Mapping[str, Sequence[Path]]
) -> dict[str, set[tuple[str, int, int]]]:
    """Each run's inputs as the index knows them: (path, size, mtime) of each of its files,
    and a (table#digest, 0, 0) for its rows of each spanning table."""
    want = {run: {file_identity(p, root) for p in paths} for run, paths in files.items()}
    for table in SPANNING:
        rows = con.execute(
            f"SELECT run_id, md5(string_agg(t::VARCHAR, '|' ORDER BY t::VARCHAR)) "
            f"FROM {table} t GROUP BY run_id"
        ).fetchall()
        for run, digest in rows:
            if run in want:
                want[run].add((f"{table}#{digest}", 0, 0))
    return want


def _sync(
    con: duckdb.DuckDBPyConnection, root: Path, files: Mapping[str, Sequence[Path]], scope: Scope
) -> None:
    """Drop the rows of runs whose inputs are not those indexed (or that are gone), then
    compute the others' a batch of runs at a time, each batch in its own transaction (a kill
    keeps the batches committed; the next refresh computes the rest)."""
    want = _identities(con, root, files)
    have: dict[str, set[tuple[str, int, int]]] = {}
    sql = f"SELECT run_id, path, size, mtime_ns FROM {ALIAS}.files"
    for run, *known in con.execute(sql).fetchall():
        have.setdefault(run, set()).add(tuple(known))
    stale = [r for r in have if have[r] != want.get(r)]
    new = sorted(r for r in want if want[r] != have.get(r))
    if stale:
        with transaction(con):
            for table in (*VIEWS, "files"):
                con.execute(f"DELETE FROM {ALIAS}.{table} WHERE list_contains(?, run_id)", [stale])
    for batch in _batches(new):
        scope(con, batch)  # temporary views, outside the index's transaction
        # the batch's verdicts once, for the funnel and the three summaries that read them
        con.execute(f"CREATE TEMP TABLE {SHARED} AS SELECT * FROM main.{SHARED}")
        try:
            with transaction(con):
                for view in VIEWS:
                    con.execute(f"INSERT INTO {ALIAS}.{view} SELECT * FROM {view}")
                con.executemany(
                    f"INSERT INTO {ALIAS}.files VALUES (?, ?, ?, ?)",
                    [(r, *f) for r in batch for f in sorted(want[r])],
                )
        finally:
            con.execute(f"DROP TABLE temp.{SHARED}")
            scope(con, None)
    if stale or new:
        log.info(
            "run results index: %d runs dropped, %d computed",
            len(stale),
            len(new),
            extra={"computed": new},
        )


def _batches(runs: list[str]) -> Iterator[list[str]]:
    for i in range(0, len(runs), BATCH_RUNS):
        yield runs[i : i + BATCH_RUNS]


__all__ = ["PATH", "SCHEMA", "VIEWS", "materialise_run_results"]
