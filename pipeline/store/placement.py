"""Where a catalog belongs: the store it was built from, recorded in it, and the store it
lies in now. A catalog copied or moved with its store (`cp -a out backup/`) still lists the
files of the store it was built from; `store.settle_catalog` rebuilds such a catalog over
the files of its own store before anything reads it, from what is recorded here: the store's
root and the catalog's path as built (`catalog_info`) and the artifacts the refresh was given,
named relative to the store (`catalog_artifacts`)."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

import duckdb
import pyarrow as pa

# The catalog's table of the artifacts its refresh was given (record_artifacts).
_ARTIFACTS_TABLE = "catalog_artifacts"


def record_artifacts(
    con: duckdb.DuckDBPyConnection, root: Path, artifacts: dict[str, list[Path]],
    listed: Collection[str],
) -> None:  # fmt: skip
    """The artifacts a refresh was given (but the `listed` tables, which a refresh lists from
    the store itself), each named relative to the store root where it lies inside it."""
    rows = []
    for table, paths in artifacts.items():
        if table in listed:
            continue
        for p in paths:
            p = Path(p).absolute()
            rows.append({"table": table, "path": str(p.relative_to(root))
                         if p.is_relative_to(root) else str(p)})  # fmt: skip
    schema = pa.schema([("table", pa.string()), ("path", pa.string())])
    con.register("_artifacts_arrow", pa.Table.from_pylist(rows, schema=schema))
    con.execute(f"CREATE OR REPLACE TABLE {_ARTIFACTS_TABLE} AS SELECT * FROM _artifacts_arrow")
    con.unregister("_artifacts_arrow")


def built_for(
    catalog: Path, con: duckdb.DuckDBPyConnection | None = None
) -> tuple[Path, Path, dict[str, list[str]]] | None:
    """(store root, catalog path, artifacts) a catalog was built for, read on `con` (a
    connection to it) or a read-only one of its own; None for a catalog from before it
    recorded them."""
    try:
        db = duckdb.connect(str(catalog), read_only=True) if con is None else con
        try:
            ((root, built),) = db.execute(
                "SELECT store_root, catalog_path FROM catalog_info"
            ).fetchall()
            rows = db.execute(f'SELECT "table", path FROM {_ARTIFACTS_TABLE}').fetchall()
        finally:
            if con is None:
                db.close()
    except (duckdb.Error, OSError, ValueError):  # none recorded, or not a catalog: the
        return None  # reader's own connect says what is wrong with it
    artifacts: dict[str, list[str]] = {}
    for table, path in rows:
        artifacts.setdefault(table, []).append(path)
    return Path(root), Path(built), artifacts


def store_of(catalog: Path, root: Path, built: Path) -> Path | None:
    """The store a catalog lies in now: the folder that holds it as the store it was built
    for (`root`) held it at `built` (None: it was built outside its store, so its place says
    nothing about which store it belongs to)."""
    here = Path(os.path.realpath(catalog)).parent
    if not built.parent.is_relative_to(root):
        return None
    depth = len(built.parent.relative_to(root).parts)
    if depth >= len(here.parts):
        return None
    return here.parents[depth - 1] if depth else here


_SETTLED: set[tuple[str, int, int, int]] = set()  # catalog files found in their own store


def moved_catalog(
    catalog: Path, con: duckdb.DuckDBPyConnection | None = None
) -> tuple[Path, Path, dict[str, list[Path]]] | None:
    """(the store it was built for, the store it lies in, its artifacts there) for a catalog
    that lies in another store than it was built for; None when it lies in its own (or was
    built outside its store, or before it recorded where). Read on `con` when the caller
    has the catalog open; a catalog file found in its own store is not read again (a
    rebuild is a new file)."""
    try:
        st = catalog.stat()
    except OSError:
        return None
    ident = (str(catalog.absolute()), st.st_ino, st.st_size, st.st_mtime_ns)
    if ident in _SETTLED:
        return None
    built = built_for(catalog, con)
    here = store_of(catalog, *built[:2]) if built is not None else None
    if built is None or here is None or here == Path(os.path.realpath(built[0])):
        _SETTLED.add(ident)
        return None
    files = {
        table: [Path(n) if Path(n).is_absolute() else here / n for n in names]
        for table, names in built[2].items()
    }
    return built[0], here, files


__all__ = ["built_for", "moved_catalog", "record_artifacts", "store_of"]
