"""Where an export may be written (`curriculum export OUT`): never inside the store but its
`exports/` folder (the store would read a Parquet file under reviews/ as reviews, and its
housekeeping would delete what lies under .trash/), and over an existing folder only with
--overwrite and only when an export of ours wrote it and it holds nothing else, so an export
never destroys what it did not make."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import orjson

from pipeline.catalog.export_selection import ExportError
from pipeline.store.store import StoreError, settle_catalog, store_root

MANIFEST = "manifest.json"

# The manifest's mark of a folder an export of ours wrote: --overwrite replaces only such a
# folder, and only while it holds nothing but the files its manifest lists.
WRITTEN_BY = "curriculum export"
STORE_EXPORTS = "exports"  # the store's own folder for exports (the one place in it allowed)


def check_target(out: Path, overwrite: bool) -> None:
    """An existing target is replaced only with `overwrite`, and only when an export of ours
    wrote it (WRITTEN_BY in its manifest) and it holds nothing else: a user's files beside
    an export, or a folder that merely holds a manifest.json, are never deleted."""
    if not out.exists() and not out.is_symlink():
        return
    if not overwrite:
        raise ExportError(f"{out} already exists", "pass --overwrite to replace that export")
    if (why := _not_ours(out)) is not None:
        raise ExportError(
            f"{out} exists and is not a curriculum export ({why}); not replacing it",
            "choose another output directory (or move those files away first)",
        )


def _not_ours(out: Path) -> str | None:
    """Why the folder `out` is not an export of ours holding only its own files (None: it is
    one, or it is empty)."""
    if out.is_symlink() or not out.is_dir():
        return "not a folder"
    manifest = out / MANIFEST
    if not manifest.exists() and not manifest.is_symlink():
        return None if not any(out.iterdir()) else f"no {MANIFEST}"
    try:
        if manifest.is_symlink() or manifest.stat().st_size > 64 * 2**20:
            return f"{MANIFEST} is not an export's"
        m = orjson.loads(manifest.read_bytes())
        listed = {str(f["path"]) for f in m["files"]} | {MANIFEST}
        ours = m.get("written_by") == WRITTEN_BY
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return f"its {MANIFEST} is not an export's"
    if not ours:
        return f"its {MANIFEST} was not written by {WRITTEN_BY}"
    foreign = sorted(
        str(p.relative_to(out))
        for p in out.rglob("*")
        if p.is_symlink() or (p.is_file() and str(p.relative_to(out)) not in listed)
    )
    if foreign:
        shown = ", ".join(foreign[:5]) + (
            f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        )
        return f"it holds files the export did not write: {shown}"
    return None


def check_outside_store(out: Path, catalog: str | Path) -> None:
    """An export inside the store would be read as the store's own files (a Parquet file
    under reviews/ as reviews) or deleted by its housekeeping (.trash/): refused, but under
    the store's exports/ folder."""
    try:
        settle_catalog(catalog)  # a copied store's catalog names the copy from here on
        with duckdb.connect(str(catalog), read_only=True) as con:
            root = store_root(con)
    except StoreError as exc:
        raise ExportError(str(exc), exc.hint) from None
    except (duckdb.Error, OSError):
        return  # no catalog (yet): the selection says so, naming it
    if root is None:
        return
    root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(out))
    exports = root / STORE_EXPORTS
    if real == root or (real.is_relative_to(root) and not real.is_relative_to(exports)):
        raise ExportError(
            f"{out} is inside the store {root}: the store would read or delete it as its own",
            f"export outside the store, or under {exports}/",
        )
    if real == exports or root.is_relative_to(real):
        raise ExportError(
            f"{out} holds the store {root} (or its exports folder): not an export's folder",
            f"name a folder of its own, e.g. {exports}/<name>",
        )


__all__ = ["MANIFEST", "STORE_EXPORTS", "WRITTEN_BY", "check_outside_store", "check_target"]
