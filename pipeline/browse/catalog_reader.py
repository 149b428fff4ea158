"""Read-only connections for a long-lived reader of the catalog (the record browser).

A nightly's landing rebuilds the catalog under a temporary name and renames it over the old
file. A connection opened before keeps reading the old file, so the reader answers
throughout; the next request after the rename opens the new file. Every request gets its own
cursor with the review files on disk now (`attach_reviews`), so a review written a moment ago,
even during a rebuild, is seen at once.

The records page's index is the browser's own: the catalog's `record_index` view (each run's
record_facts joined with the verdicts) stored once per catalog refresh in a DuckDB file beside
the catalog (`<catalog>.browse.<refresh>.duckdb`), sorted by V so that a page reads its first
row groups only, with the filters' values (`record_facets`) and each run's funnel
(`run_funnel`, the runs page). The first request after a refresh builds it (seconds at a
million records); landing does not pay for it, and a store nobody browses never
builds it. Each refresh's index has a file name of its own: DuckDB registers an attached path
process-wide, and attaching a path that an earlier connection (still answering a request)
has attached under the same name can spin forever in DuckDB 2.0's ATTACH.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import glob
import logging
import os
import threading
from pathlib import Path

import duckdb

from pipeline.core.io import atomic_path
from pipeline.core.parquet_sql import sql_string
from pipeline.store.reviews import (
    COMPACTED_PREFIX,
    attach_reviews,
    compact_reviews,
    review_files,
)
from pipeline.store.store import connect_readonly, settle_catalog

log = logging.getLogger(__name__)

# The browser's copy of record_index: what a records page filters, sorts and searches on.
INDEX_SQL = "SELECT * FROM record_index ORDER BY v_key DESC, record_id DESC"
# Small tables stored beside it: the catalog's view each is read from.
SMALL_TABLES = {"record_facets": "record_facets", "run_funnel": "funnel"}
FOLD_AT = 64  # review files not folded yet, past which a page folds them (compact_reviews)


def index_path(catalog: Path, refreshed_at: dt.datetime) -> Path:
    """The browser's index of the catalog refreshed at `refreshed_at`."""
    stamp = refreshed_at.astimezone(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return catalog.with_name(f"{catalog.name}.browse.{stamp}.duckdb")


def remove_others(catalog: Path, keep: Path, *patterns: str) -> None:
    """The files beside the catalog named `<catalog><pattern>` but `keep` (an open connection
    keeps reading its file)."""
    for pattern in patterns:
        for path in catalog.parent.glob(glob.escape(catalog.name) + pattern):
            if path != keep:
                path.unlink(missing_ok=True)


def snapshot_link(catalog: Path, ino: int) -> Path:
    """`<catalog>.browse-<inode>.duckdb`, a hard link to the catalog file of that inode (made
    now unless it exists); the links of earlier files are removed (an open connection keeps
    reading its file)."""
    link = catalog.with_name(f"{catalog.name}.browse-{ino}.duckdb")
    if not link.exists():
        with contextlib.suppress(FileExistsError):
            os.link(catalog, link)
    remove_others(catalog, link, ".browse-*.duckdb")  # earlier catalog files' links
    return link


def _index_refreshed_at(path: Path) -> object:
    """The refresh the index at `path` was built for (None: none, or one built by a release
    that stored fewer tables)."""
    try:
        with duckdb.connect(str(path), read_only=True) as con:
            con.execute(f"SELECT 1 FROM {', '.join(SMALL_TABLES)} LIMIT 0").fetchall()
            ((at,),) = con.execute("SELECT refreshed_at FROM index_info").fetchall()
            return at
    except (duckdb.Error, ValueError):
        return None


def build_index(
    con: duckdb.DuckDBPyConnection, path: Path, refreshed_at: object, memory_limit: str
) -> None:
    """The catalog's record_index (read on `con`) stored at `path` for the catalog refreshed
    at `refreshed_at`, streamed in record batches, with the SMALL_TABLES, and renamed into
    place whole; the writing side under the reader's own memory limit."""
    con.execute("SET enable_progress_bar = false")  # a server's log, not a terminal
    config = {"memory_limit": memory_limit, "threads": 1}
    with atomic_path(path) as tmp, duckdb.connect(str(tmp), config=config) as out:
        tables = {"record_index": INDEX_SQL} | {
            name: f"SELECT * FROM {view}" for name, view in SMALL_TABLES.items()
        }
        for name, sql in tables.items():
            out.register("_rows", con.sql(sql).to_arrow_reader(20_000))
            out.execute(f"CREATE TABLE {name} AS SELECT * FROM _rows")
            out.unregister("_rows")
        sql = "CREATE TABLE index_info AS SELECT ?::TIMESTAMPTZ AS refreshed_at"
        out.execute(sql, [refreshed_at])
        out.execute("CHECKPOINT")


class CatalogNotReadyError(RuntimeError):
    """The catalog lacks what the browser reads (built before it existed, or no run yet)."""


class CatalogReader:
    def __init__(self, catalog: Path, memory_limit: str = "512MB", threads: int = 2) -> None:
        self.catalog = Path(catalog)
        self.memory_limit = memory_limit
        self.threads = threads
        self._lock = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._ident: tuple[int, int, int] | None = None
        self.store_root: Path | None = None

    def _open(self, ino: int) -> duckdb.DuckDBPyConnection:
        # DuckDB hands a second connect() to an open path the instance it already has (the
        # file as it was): the current file is opened under a name of its own, a hard link
        # named by its inode, which also keeps it readable after the next rebuild.
        link = snapshot_link(self.catalog, ino)
        con = connect_readonly(link)
        con.execute(f"SET memory_limit = '{self.memory_limit}'")  # config value, not a request's
        con.execute(f"SET threads = {int(self.threads)}")
        try:
            ((root, at),) = con.execute(
                "SELECT store_root, refreshed_at FROM catalog_info"
            ).fetchall()
            con.execute("SELECT 1 FROM record_index, record_facets LIMIT 0")
        except duckdb.CatalogException:
            con.close()
            raise CatalogNotReadyError(
                f"{self.catalog} was built before the record browser; land it again to add "
                "the browser's index (`curriculum nightly --run-id <a finished run>` redoes no "
                "work and rebuilds the catalog)"
            ) from None
        self.store_root = Path(root)
        index = index_path(self.catalog, at)
        if _index_refreshed_at(index) != at:
            build_index(con, index, at, self.memory_limit)
        # the indexes of earlier refreshes, and the one of releases that named no refresh
        remove_others(self.catalog, index, ".browse.*.duckdb", ".browse.duckdb")
        con.execute(f"ATTACH {sql_string(index)} AS browse_index (READ_ONLY)")
        return con

    def _current(self) -> tuple[duckdb.DuckDBPyConnection, Path]:
        """The connection to the current catalog file (reopened after a rebuild replaced it)
        and the store's root it names."""

        def ident() -> tuple[int, int, int]:
            try:
                st = self.catalog.stat()
            except FileNotFoundError:
                raise CatalogNotReadyError(
                    f"no catalog at {self.catalog}: run the nightly first"
                ) from None
            return (st.st_ino, st.st_mtime_ns, st.st_size)

        now = ident()
        with self._lock:
            if self._con is None or now != self._ident:
                # a catalog copied or moved with its store is rebuilt over this store's files
                # before it is read: the browser never shows nor writes the other store's
                if settle_catalog(self.catalog):
                    now = ident()
                self._con, self._ident = self._open(now[0]), now
            return self._con, self.store_root

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor on the current catalog file, with the reviews on disk now and the
        browser's index standing in for the catalog's record_index and record_facets views
        (and giving the runs page its run_funnel)."""
        con, root = self._current()
        cur = con.cursor()
        attach_reviews(cur, root, self._reviews(root))
        for name in ("record_index", *SMALL_TABLES):
            cur.execute(f"CREATE TEMP VIEW {name} AS SELECT * FROM browse_index.{name}")
        return cur

    def _reviews(self, root: Path) -> list[Path]:
        """The live review files, folded first when more than FOLD_AT are not (a page binds
        each file it lists: a flood of submissions would slow every page)."""
        files = review_files(root)
        if sum(not p.name.startswith(COMPACTED_PREFIX) for p in files) > FOLD_AT:
            try:
                compact_reviews(root)
            except OSError as exc:  # a read-only store: pages read the files as they are
                log.warning("cannot fold the review files of %s: %s", root, exc)
                return files
            files = review_files(root)
        return files

    def root(self) -> Path:
        """The store's root, as the current catalog names it (reviews and reports live there)."""
        return self._current()[1]
