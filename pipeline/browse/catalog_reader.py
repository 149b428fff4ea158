"""Read-only connections for a long-lived reader of the catalog (the record browser).

A nightly's landing rebuilds the catalog under a temporary name and renames it over the old
file. A connection opened before keeps reading the old file (its shards are never rewritten),
so the reader answers throughout; the next request after the rename opens the new file. Every
request gets its own cursor with the review files on disk now (`attach_reviews`), so a review
written a moment ago, even during a rebuild, is seen at once.
"""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb

from pipeline.store.reviews import attach_reviews
from pipeline.store.store import connect_readonly


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

    def _open(self) -> duckdb.DuckDBPyConnection:
        con = connect_readonly(self.catalog)
        con.execute(f"SET memory_limit = '{self.memory_limit}'")  # config value, not a request's
        con.execute(f"SET threads = {int(self.threads)}")
        try:
            ((root,),) = con.execute("SELECT store_root FROM catalog_info").fetchall()
            con.execute("SELECT 1 FROM record_index, record_facets LIMIT 0")
        except duckdb.CatalogException:
            con.close()
            raise CatalogNotReadyError(
                f"{self.catalog} was built before the record browser; land it again to add "
                "the browser's index (`curriculum nightly --run-id <a finished run>` redoes no "
                "work and rebuilds the catalog)"
            ) from None
        self.store_root = Path(root)
        return con

    def _current(self) -> tuple[duckdb.DuckDBPyConnection, Path]:
        """The connection to the current catalog file (reopened after a rebuild replaced it)
        and the store's root it names."""
        try:
            st = self.catalog.stat()
        except FileNotFoundError:
            raise CatalogNotReadyError(
                f"no catalog at {self.catalog}: run the nightly first"
            ) from None
        ident = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            if self._con is None or ident != self._ident:
                self._con, self._ident = self._open(), ident
            return self._con, self.store_root

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor on the current catalog file, with the reviews on disk now."""
        con, root = self._current()
        cur = con.cursor()
        attach_reviews(cur, root)
        return cur

    def root(self) -> Path:
        """The store's root, as the current catalog names it (reviews and reports live there)."""
        return self._current()[1]
