"""The duplicate ranking's index (issue 28): views.sql's `duplicate_keys` rows of every compacted
run, kept night by night in a DuckDB file under the store, so that a refresh ranks a year of
nights from integers and a few hundred rows instead of re-reading 730k questions.

A cache, and nothing else: its rows are a function of the compacted `record_facts` files the
catalog lists (each named by a hash of what it holds, never rewritten in place) and of
views.sql. Each refresh syncs it with that listing in one transaction: the runs whose files
changed or went (a compaction, a prune) lose their rows, and the newly listed files are read.
A kill leaves it at its last committed sync; a file DuckDB cannot open, or one written for
another views.sql or contract, is rebuilt from the files. It is changed in place only while
no other name links it: a store snapshotted with hard links (`cp -al`, `rsync --link-dest`)
gets its own copy first, as every other file of the store is replaced by rename.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb

from pipeline.core.io import atomic_path, content_key
from pipeline.core.parquet_sql import path_list, sql_string
from schemas.tables import SCHEMA_VERSION

log = logging.getLogger(__name__)

INDEX_PATH = "cache/duplicate_keys.duckdb"  # under the store root
ALIAS = "duplicate_index"


@contextlib.contextmanager
def indexed_duplicate_keys(
    con: duckdb.DuckDBPyConnection, root: Path, facts: list[tuple[str, Path]], views: str
) -> Iterator[None]:
    """Inside: a temporary `duplicate_keys` on `con` (views.sql run) that reads the compacted
    runs' rows from the store's index, synced first with `facts` ((run_id, path) of every
    listed record_facts file), and computes the other runs' live. `views` is views.sql's text:
    the index holds what it defines. Where the index cannot be written (a read-only store),
    the view stays the live one and the ranking reads every file, as before the index."""
    path = root / INDEX_PATH
    try:
        _attach(con, path, _version(views))
        _sync(con, root, facts)
    except (OSError, duckdb.Error) as exc:
        log.warning("duplicate index %s not used (%s): ranking from every file", path, exc)
        _detach(con)
        indexed = False
    else:
        con.execute(
            f"CREATE OR REPLACE TEMP VIEW duplicate_keys AS SELECT * FROM {ALIAS}.keys "
            "UNION ALL SELECT * FROM duplicate_keys_of('record_facts_computed')"
        )
        indexed = True
    try:
        yield
    finally:
        if indexed:
            con.execute("DROP VIEW IF EXISTS temp.duplicate_keys")
            _detach(con)


def _version(views: str) -> str:
    """What the rows depend on besides the files: their SQL, the contract, and DuckDB's
    `hash`, which a DuckDB release may change."""
    return content_key(
        {"views": views, "schema_version": SCHEMA_VERSION, "duckdb": duckdb.__version__}
    )


def _attach(con: duckdb.DuckDBPyConnection, path: Path, version: str) -> None:
    """Attach the index, rebuilt empty when it cannot be read or is of another version (its
    rows' columns are the macro's own, as views.sql defines them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    files = (path, path.with_name(path.name + ".wal"))
    for p in files:
        if p.exists() and os.stat(p).st_nlink > 1:
            _unshare(p)
    if path.exists():
        try:
            con.execute(f"ATTACH {sql_string(path)} AS {ALIAS}")
            rows = con.execute(f"SELECT version FROM {ALIAS}.meta").fetchall()
            if rows == [(version,)]:
                return
            log.info("duplicate index %s is of another version: rebuilding it", path)
        except duckdb.Error as exc:
            log.warning("duplicate index %s unreadable (%s): rebuilding it", path, exc)
        _detach(con)
    for p in files:
        p.unlink(missing_ok=True)
    con.execute(f"ATTACH {sql_string(path)} AS {ALIAS}")
    con.execute("BEGIN")
    con.execute(f"CREATE TABLE {ALIAS}.meta (version VARCHAR)")
    con.execute(f"INSERT INTO {ALIAS}.meta VALUES (?)", [version])
    con.execute(f"CREATE TABLE {ALIAS}.files (run_id VARCHAR, path VARCHAR)")
    con.execute(
        f"CREATE TABLE {ALIAS}.keys AS "
        "SELECT * FROM duplicate_keys_of('record_facts_computed') LIMIT 0"
    )
    con.execute("COMMIT")


def _unshare(path: Path) -> None:
    """Give `path` a copy of its own (renamed over it), leaving the other links' file as is."""
    with atomic_path(path) as tmp:
        shutil.copyfile(path, tmp)


def _sync(con: duckdb.DuckDBPyConnection, root: Path, facts: list[tuple[str, Path]]) -> None:
    """One transaction: drop the rows of runs whose listed files are not those indexed, and
    read the files of the runs not indexed."""
    want: dict[str, set[str]] = {}
    for run_id, p in facts:
        want.setdefault(run_id, set()).add(p.relative_to(root).as_posix())
    have: dict[str, set[str]] = {}
    for run_id, rel in con.execute(f"SELECT run_id, path FROM {ALIAS}.files").fetchall():
        have.setdefault(run_id, set()).add(rel)
    stale = [r for r in have if have[r] != want.get(r)]
    new = [(r, rel) for r in want if want[r] != have.get(r) for rel in sorted(want[r])]
    if not stale and not new:
        return
    if new:  # a temporary view is written outside the index's transaction
        paths = path_list(root / rel for _, rel in new)
        con.execute(
            "CREATE OR REPLACE TEMP VIEW _new_record_facts AS SELECT * FROM "
            f"read_parquet({paths}, hive_partitioning = false, union_by_name = true)"
        )
    con.execute("BEGIN")
    try:
        for table in ("keys", "files"):
            con.execute(f"DELETE FROM {ALIAS}.{table} WHERE list_contains(?, run_id)", [stale])
        if new:
            con.execute(
                f"INSERT INTO {ALIAS}.keys SELECT * FROM duplicate_keys_of('_new_record_facts')"
            )
            con.executemany(f"INSERT INTO {ALIAS}.files VALUES (?, ?)", new)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        con.execute("DROP VIEW IF EXISTS temp._new_record_facts")
    log.info("duplicate index: %d runs dropped, %d files read", len(stale), len(new))


def _detach(con: duckdb.DuckDBPyConnection) -> None:
    with contextlib.suppress(duckdb.Error):
        con.execute(f"CHECKPOINT {ALIAS}")
    with contextlib.suppress(duckdb.Error):
        con.execute(f"DETACH {ALIAS}")


__all__ = ["INDEX_PATH", "indexed_duplicate_keys"]
