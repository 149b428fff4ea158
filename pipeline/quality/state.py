"""What the quality checks remember between passes, and the helpers their
per-run files share: state files live under `<out>/quality/state/<table>/<name>.parquet`,
outside the catalog (the refresh lists only the quality tables); a catalog table's file or a
state file may carry the settings it was made with in its Parquet metadata (`settings`,
JSON), so a pass reads a footer, not the data, to know whether it can build on the file.
Contracts in schemas/quality_tables.py.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.identifiers import check_identifier
from pipeline.core.io import exclusive_lock, path_within, write_parquet_atomic
from schemas.tables import schema_for

STATE_DIR = "state"
SETTINGS_KEY = b"settings"


def state_path(root: Path, table: str, name: str) -> Path:
    schema_for(table)  # a table with a contract
    name = check_identifier(name, "name")
    return path_within(root, "quality", STATE_DIR, table, f"{name}.parquet")


def parquet_files(folder: Path) -> list[Path]:
    """The committed Parquet files of a folder (not the dot-named leftovers of a killed write)."""
    return sorted(p for p in folder.glob("*.parquet") if not p.name.startswith("."))


def write_rows(
    path: Path, table: str, rows: list[dict[str, Any]] | pa.Table, settings: Any = None
) -> Path:
    """`rows` under `table`'s contract, atomically; `settings` (JSON-able) in the metadata."""
    schema = schema_for(table)
    if settings is not None:
        meta = {**(schema.metadata or {}), SETTINGS_KEY: json.dumps(settings, sort_keys=True)}
        schema = schema.with_metadata(meta)
    if isinstance(rows, pa.Table):
        data = rows.select(schema.names).cast(schema)
    else:
        data = pa.Table.from_pylist(rows, schema=schema)
    write_parquet_atomic(path, data)
    return path


def file_settings(path: Path) -> tuple[int, Any]:
    """(rows, settings) of a state file, from its footer; settings None when absent."""
    meta = pq.read_metadata(path)
    raw = (meta.metadata or {}).get(SETTINGS_KEY)
    return meta.num_rows, json.loads(raw) if raw else None


def same_settings(a: Any, b: Any) -> bool:
    """Equal once both went through JSON (tuples and lists, int and float keys alike)."""
    return json.loads(json.dumps(a, sort_keys=True)) == json.loads(json.dumps(b, sort_keys=True))


@contextlib.contextmanager
def quality_lock(root: Path) -> Iterator[None]:
    """One writer of the quality tables and their state per store at a time (a nightly's
    quality step and a `curriculum quality ...` read-modify-write the same per-run files)."""
    with exclusive_lock(path_within(root, "quality", ".lock")):
        yield


__all__ = [
    "file_settings",
    "parquet_files",
    "quality_lock",
    "same_settings",
    "state_path",
    "write_rows",
]
