"""Each run's rows of the whole-history views the audits read, materialised at every
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
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from pipeline.store.run_index import (
    Identity,
    attach_index,
    changed_runs,
    detach_index,
    drop_runs,
    file_identity,
    index_version,
    transaction,
)
from pipeline.store.scoping import scope_to_runs, view_select

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
# The quality tables the checks write a file per run of, named after it (quality_path(table,
# run)): a run's results read only its own. A benchmark_matches file named after a benchmark
# (an older release's) may hold any run's rows: every run reads it. One named after neither
# is a run no longer in the catalog (a prune leaves the quality files), whose rows no run
# in it reads.
PER_RUN_QUALITY = ("benchmark_matches", "question_minhash")
# The view several of them read, computed once a batch (a temporary table of its name, which
# the views read in its place as they read scoping's temporary views).
VERDICTS = "record_verdicts"
# Runs computed per scope: a first build over a year of nights binds 32 nights at a time.
BATCH_RUNS = 32


def materialise_run_results(
    con: duckdb.DuckDBPyConnection,
    root: Path | None,
    files: Mapping[str, Sequence[Path]],
    quality: Mapping[str, Sequence[Path]],
    depends: Mapping[str, Any],
) -> None:
    """`run_results.<view>` for every view of VIEWS on `con` (a catalog being built, its
    catalog_files written): from the index under `root`, synced first. `files`: each run's
    own files (its shards, its run record); `quality`: the files of PER_RUN_QUALITY tables;
    `depends`: what else the rows depend on (views.sql's text)."""
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    source = "main"
    if root is not None and _synced(con, root, _inputs(con, files, quality), depends):
        source = ALIAS
    try:
        for view in VIEWS:
            con.execute(f"CREATE OR REPLACE TABLE {SCHEMA}.{view} AS SELECT * FROM {source}.{view}")
    finally:
        if source == ALIAS:
            detach_index(con, ALIAS)


def _inputs(
    con: duckdb.DuckDBPyConnection,
    files: Mapping[str, Sequence[Path]],
    quality: Mapping[str, Sequence[Path]],
) -> dict[str, dict[str, list[Path]]]:
    """Each run's inputs by table ("" for its own files): what it is known by, and what a
    batch's quality views read."""
    sql = "SELECT DISTINCT benchmark FROM benchmark_checks"
    benchmarks = {b for (b,) in con.execute(sql).fetchall()}
    shared = [p for p in quality.get("benchmark_matches", ()) if p.stem in benchmarks]
    inputs = {run: {"": list(own), "benchmark_matches": list(shared)} for run, own in files.items()}
    for table in PER_RUN_QUALITY:
        for p in quality.get(table, ()):
            if p.stem in inputs and p not in shared:
                inputs[p.stem].setdefault(table, []).append(p)
    return inputs


def _synced(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    inputs: Mapping[str, Mapping[str, list[Path]]],
    depends: Mapping[str, Any],
) -> bool:
    """Attach the index and sync it; False (logged, unscoped, detached) where it cannot be
    written or a batch fails: the caller then computes every run from every file."""
    path = root / PATH
    try:
        empty = {view: f"SELECT * FROM {view}" for view in VIEWS}
        attach_index(con, path, ALIAS, index_version({**depends, "tables": VIEWS}), empty)
        _sync(con, root, inputs)
    except (OSError, duckdb.Error) as exc:
        log.warning("run results index %s not used (%s): computing every run", path, exc)
        _unscope(con)
        detach_index(con, ALIAS)
        return False
    return True


def _identities(
    con: duckdb.DuckDBPyConnection, root: Path, inputs: Mapping[str, Mapping[str, list[Path]]]
) -> dict[str, set[Identity]]:
    """Each run's inputs as the index knows them: (path, size, mtime) of each of its files,
    and a (table#digest, 0, 0) for its rows of each spanning table. The digest is of the
    set of its rows (count, sum and xor of their hashes), a few numbers a run whatever the
    table holds: question_duplicates grows with the history (125k rows at 365 bench nights,
    where an md5 of each run's sorted rows as text took 0.4 s and 140 MB every refresh)."""
    want = {
        run: {file_identity(p, root) for paths in tables.values() for p in paths}
        for run, tables in inputs.items()
    }
    for table in SPANNING:
        rows = con.execute(
            f"SELECT run_id, count(*), sum(hash(t))::HUGEINT, bit_xor(hash(t)) "
            f"FROM {table} t GROUP BY run_id"
        ).fetchall()
        for run, *digest in rows:
            if run in want:
                want[run].add((f"{table}#{'.'.join(map(str, digest))}", 0, 0))
    return want


def _sync(
    con: duckdb.DuckDBPyConnection, root: Path, inputs: Mapping[str, Mapping[str, list[Path]]]
) -> None:
    """Drop the rows of runs whose inputs are not those indexed (or that are gone), then
    compute the others' a batch of runs at a time, each batch in its own transaction (a kill
    keeps the batches committed; the next refresh computes the rest)."""
    want = _identities(con, root, inputs)
    stale, new = changed_runs(con, ALIAS, want)
    if stale:
        with transaction(con):
            drop_runs(con, ALIAS, VIEWS, stale)
    for batch in _batches(new):
        try:
            _scope(con, batch, inputs)  # temporary objects, outside the index's transaction
            with transaction(con):
                for view in VIEWS:
                    con.execute(f"INSERT INTO {ALIAS}.{view} BY NAME SELECT * FROM {view}")
                con.executemany(
                    f"INSERT INTO {ALIAS}.files VALUES (?, ?, ?, ?)",
                    [(r, *f) for r in batch for f in sorted(want[r])],
                )
        finally:
            _unscope(con)
    if stale or new:
        log.info(
            "run results index: %d runs dropped, %d computed",
            len(stale),
            len(new),
            extra={"computed": new},
        )


def _scope(
    con: duckdb.DuckDBPyConnection,
    batch: list[str],
    inputs: Mapping[str, Mapping[str, list[Path]]],
) -> None:
    """The base views over the batch's files (scope_to_runs), its quality files only, and its
    verdicts computed once."""
    scope_to_runs(con, batch)
    for table in PER_RUN_QUALITY:
        paths = sorted({p for run in batch for p in inputs[run].get(table, ())})
        con.execute(f"CREATE OR REPLACE TEMP VIEW {table} AS {view_select(table, paths, False)}")
    con.execute(f"CREATE TEMP TABLE {VERDICTS} AS SELECT * FROM main.{VERDICTS}")


def _unscope(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"DROP TABLE IF EXISTS temp.{VERDICTS}")
    for table in PER_RUN_QUALITY:
        con.execute(f"DROP VIEW IF EXISTS temp.{table}")
    scope_to_runs(con, None)


def _batches(runs: list[str]) -> Iterator[list[str]]:
    for i in range(0, len(runs), BATCH_RUNS):
        yield runs[i : i + BATCH_RUNS]


__all__ = ["PATH", "SCHEMA", "VIEWS", "materialise_run_results"]
