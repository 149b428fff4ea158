"""The store's run indexes: what views.sql's macros give of each compacted run,
kept night by night in a DuckDB file under `<store>/cache/`, so that a refresh reads a year
of nights' results instead of recomputing them from a year of files.

Two of them. The duplicate ranking's (`DUPLICATE_KEYS`): the records that pass their own
run's gates, with their question keys' hashes, from each run's record_facts file, so the
ranking groups integers and a few hundred rows instead of re-reading 730k questions. The
evidence check's (`EVIDENCE`): each run's verbatim records counted by whether their span is
their passage's recorded slice, and the rows that are not, so the `evidence` audit reads
per-run results instead of joining every verbatim record of the history with the corpus.

An index is a cache, and nothing else: its rows are a function of the compacted files the
catalog lists (each named by a hash of what it holds, and known by path, size and mtime, so
that a file rewritten by hand is read again), of views.sql, and of whatever else its version
names (the evidence index: the passages files, by path, size and mtime).
Each refresh syncs it with that listing in one transaction: the runs whose files changed or
went (a compaction, a prune) lose their rows, and the newly listed files are read. A kill
leaves it at its last committed sync; a file DuckDB cannot open, or one written for another
version, is rebuilt from the files. It is changed in place only while no other name links
it: a store snapshotted with hard links (`cp -al`, `rsync --link-dest`) gets its own copy
first, as every other file of the store is replaced by rename. The audits' per-run tables
(run_results.py) are kept in a third index of the same layout (attach_index, transaction).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from pipeline.core.io import atomic_path, content_key
from pipeline.core.parquet_sql import path_list, sql_string
from schemas.tables import SCHEMA_VERSION

log = logging.getLogger(__name__)

# How an index knows an input of a run: (path, size, mtime_ns) of a file (file_identity).
Identity = tuple[str, int, int]


@dataclass(frozen=True)
class RunIndex:
    name: str  # its file is <store>/cache/<name>.duckdb; attached as <name>_index
    source: str  # the table whose compacted runs' files it reads
    full: str  # the relation over every run: what the index's rows plus `live` stand in for
    live: str  # the relation over the runs it does not hold, computed at each refresh
    # (table in the index, views.sql table macro over a relation's name) pairs
    tables: tuple[tuple[str, str], ...]
    # A views.sql table macro that turns the new files into the relation the tables' macros
    # read, computed once a sync (the evidence check: one join with the corpus, not one a
    # table); None: they read the files.
    over: str | None = None

    @property
    def path(self) -> str:
        """Its file, relative to the store root."""
        return f"cache/{self.name}.duckdb"

    @property
    def alias(self) -> str:
        return f"{self.name}_index"


DUPLICATE_KEYS = RunIndex(
    "duplicate_keys",
    "record_facts",
    "record_facts",
    "record_facts_computed",
    (("keys", "duplicate_keys_of"),),
)
# Live: the runs without record_facts files, i.e. those not compacted (build_catalog):
# views.sql's evidence_check_live.
EVIDENCE = RunIndex(
    "evidence",
    "curriculum",
    "evidence_check",
    "evidence_check_live",
    (("counts", "evidence_counts_of"), ("mismatches", "evidence_mismatches_of")),
    over="evidence_results_of",
)
INDEXES = (DUPLICATE_KEYS, EVIDENCE)


@contextlib.contextmanager
def indexed(
    con: duckdb.DuckDBPyConnection,
    root: Path | None,
    index: RunIndex,
    files: list[tuple[str, Path]],
    depends: Mapping[str, Any],
) -> Iterator[dict[str, str]]:
    """Inside: each of the index's tables as a SELECT over every run (views.sql run on
    `con`): the compacted runs' rows from the index under `root`, synced first with `files`
    ((run_id, path) of every listed file of `index.source` of a compacted run), and the
    other runs' computed live. `depends` is what the rows depend on besides the files
    (views.sql's text, the passages files): another value rebuilds the index. Without a
    root, or where the index cannot be written (a read-only store), each SELECT is the macro
    over `index.full`: every file, as before the index."""
    if root is None or not _synced(con, root, index, files, depends):
        yield {t: f"SELECT * FROM {m}('{index.full}')" for t, m in index.tables}
        return
    try:
        yield {
            t: f"SELECT * FROM {index.alias}.{t} UNION ALL SELECT * FROM {m}('{index.live}')"
            for t, m in index.tables
        }
    finally:
        detach_index(con, index.alias)


def _synced(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    index: RunIndex,
    files: list[tuple[str, Path]],
    depends: Mapping[str, Any],
) -> bool:
    """Attach the index and sync it with `files`; False (logged, detached) where it cannot be
    written."""
    path = root / index.path
    try:
        empty = {t: f"SELECT * FROM {m}('{index.live}')" for t, m in index.tables}
        attach_index(con, path, index.alias, index_version(depends), empty)
        _sync(con, root, index, files)
    except (OSError, duckdb.Error) as exc:
        log.warning("%s index %s not used (%s): reading every file", index.name, path, exc)
        detach_index(con, index.alias)
        return False
    return True


def index_version(depends: Mapping[str, Any]) -> str:
    """What the rows depend on besides the files: `depends`, the contract, DuckDB's release
    (its `hash`, for one, may change with it) and the index's own layout."""
    return content_key(
        {**depends, "schema_version": SCHEMA_VERSION, "duckdb": duckdb.__version__, "layout": 2}
    )


def attach_index(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    alias: str,
    version: str,
    tables: Mapping[str, str],
) -> None:
    """Attach an index file as `alias`, rebuilt empty when it cannot be read or is of another
    version: `meta`, `files` (run_id, path, size, mtime_ns) and each of `tables` (name ->
    a SELECT whose columns it takes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    files = (path, path.with_name(path.name + ".wal"))
    for p in files:
        if p.exists() and os.stat(p).st_nlink > 1:
            _unshare(p)
    if path.exists():
        try:
            con.execute(f"ATTACH {sql_string(path)} AS {alias}")
            rows = con.execute(f"SELECT version FROM {alias}.meta").fetchall()
            if rows == [(version,)]:
                return
            log.info("index %s is of another version: rebuilding it", path)
        except duckdb.Error as exc:
            # another process has it open (a lock): not ours to delete
            if isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower():
                raise
            log.warning("index %s unreadable (%s): rebuilding it", path, exc)
        detach_index(con, alias)
    for p in files:
        p.unlink(missing_ok=True)
    con.execute(f"ATTACH {sql_string(path)} AS {alias}")
    with transaction(con):
        con.execute(f"CREATE TABLE {alias}.meta (version VARCHAR)")
        con.execute(f"INSERT INTO {alias}.meta VALUES (?)", [version])
        con.execute(
            f"CREATE TABLE {alias}.files "
            "(run_id VARCHAR, path VARCHAR, size BIGINT, mtime_ns BIGINT)"
        )
        for table, select in tables.items():
            con.execute(f"CREATE TABLE {alias}.{table} AS {select} LIMIT 0")


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """BEGIN ... COMMIT, rolled back on any error (the connection stays usable for the
    fallback), the error itself raised."""
    con.execute("BEGIN")
    try:
        yield
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise


def _unshare(path: Path) -> None:
    """Give `path` a copy of its own (renamed over it), leaving the other links' file as is."""
    with atomic_path(path) as tmp:
        shutil.copyfile(path, tmp)


def _sync(
    con: duckdb.DuckDBPyConnection, root: Path, index: RunIndex, files: list[tuple[str, Path]]
) -> None:
    """One transaction: drop the rows of runs whose listed files are not those indexed, and
    read the files of the runs not indexed. A file is known by its path, size and mtime: a
    compacted file is never rewritten under its name, but a hand edit (or a restore) is then
    read again rather than trusted."""
    alias = index.alias
    want: dict[str, set[Identity]] = {}
    for run_id, p in files:
        want.setdefault(run_id, set()).add(file_identity(p, root))
    stale, changed = changed_runs(con, alias, want)
    new = [(r, *f) for r in changed for f in sorted(want[r])]
    if not stale and not new:
        return
    rows = "_new_rows" if index.over else "_new_files"
    if new:  # temporary objects are written outside the index's transaction
        paths = path_list(root / f[1] for f in new)
        con.execute(
            "CREATE OR REPLACE TEMP VIEW _new_files AS SELECT * FROM "
            f"read_parquet({paths}, hive_partitioning = false, union_by_name = true)"
        )
        if index.over:
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE {rows} AS SELECT * FROM {index.over}('_new_files')"
            )
    try:
        with transaction(con):
            drop_runs(con, alias, [t for t, _ in index.tables], stale)
            if new:
                for table, macro in index.tables:
                    con.execute(f"INSERT INTO {alias}.{table} SELECT * FROM {macro}('{rows}')")
                con.executemany(f"INSERT INTO {alias}.files VALUES (?, ?, ?, ?)", new)
    finally:
        con.execute("DROP VIEW IF EXISTS temp._new_files")
        con.execute("DROP TABLE IF EXISTS temp._new_rows")
    log.info("%s index: %d runs dropped, %d files read", index.name, len(stale), len(new))


def changed_runs(
    con: duckdb.DuckDBPyConnection, alias: str, want: Mapping[str, set[Identity]]
) -> tuple[list[str], list[str]]:
    """(the indexed runs whose inputs are not `want`'s, or that are gone: their rows go; the
    runs of `want` not indexed as they are: their rows are computed), from the index's
    `files` table (run_id, path, size, mtime_ns)."""
    have: dict[str, set[Identity]] = {}
    sql = f"SELECT run_id, path, size, mtime_ns FROM {alias}.files"
    for run_id, *known in con.execute(sql).fetchall():
        have.setdefault(run_id, set()).add(tuple(known))
    stale = [r for r in have if have[r] != want.get(r)]
    return stale, sorted(r for r in want if want[r] != have.get(r))


def drop_runs(
    con: duckdb.DuckDBPyConnection, alias: str, tables: Iterable[str], runs: list[str]
) -> None:
    """Delete `runs`' rows from the index's `tables` and its `files` (inside the caller's
    transaction)."""
    for table in (*tables, "files"):
        con.execute(f"DELETE FROM {alias}.{table} WHERE list_contains(?, run_id)", [runs])


def file_identity(path: Path, root: Path) -> Identity:
    """How an index knows a file: its path (relative to the store root where it is inside
    it, so a moved or hard-linked copy of the store keeps its index), size and mtime. Both
    paths are resolved first: a corpus named relative to the working directory one night and
    absolute the next is the same file, not a reason to recheck every run. The store's own
    files (absolute, under its resolved root) skip the resolving: 0.1 s a refresh at 365
    nights."""
    st = path.stat()
    if not (path.is_absolute() and root.is_absolute() and path.is_relative_to(root)):
        path, root = path.resolve(), root.resolve()
    rel = path.relative_to(root) if path.is_relative_to(root) else path
    return rel.as_posix(), st.st_size, st.st_mtime_ns


def detach_index(con: duckdb.DuckDBPyConnection, alias: str) -> None:
    with contextlib.suppress(duckdb.Error):
        con.execute(f"CHECKPOINT {alias}")
    with contextlib.suppress(duckdb.Error):
        con.execute(f"DETACH {alias}")


__all__ = [
    "DUPLICATE_KEYS",
    "EVIDENCE",
    "INDEXES",
    "Identity",
    "RunIndex",
    "attach_index",
    "changed_runs",
    "detach_index",
    "drop_runs",
    "file_identity",
    "index_version",
    "indexed",
    "transaction",
]
