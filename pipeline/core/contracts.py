"""Tables checked against their contracts (schemas/tables.py) on the way in and out: a row
missing a field, a mistyped column or a file of an incompatible schema version is an error
naming the file and fields, never a silent cast or a guess."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.tables import SCHEMA_VERSION, schema_for


class SchemaMismatchError(ValueError):
    """A Parquet file whose schema differs from its table contract."""


def build_row(table: str, *parts: Mapping[str, Any]) -> dict[str, Any]:
    """One row of `table`, in its contract's field order, from parts that each own some of its
    columns (the record's identity, the proposal, the solver's summary, ...).

    A field no part provides, one provided twice, or a key that is no field of the table is an
    error naming it: a new column cannot be forgotten, nor a renamed one silently dropped."""
    names = schema_for(table).names
    row: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if key in row:
                raise SchemaMismatchError(f"{table}: column {key!r} provided twice")
            row[key] = value
    missing = [n for n in names if n not in row]
    extra = sorted(set(row) - set(names))
    if missing or extra:
        raise SchemaMismatchError(
            f"{table} row: missing columns {missing}, unknown columns {extra}"
            f" (contract v{SCHEMA_VERSION})"
        )
    return {n: row[n] for n in names}


def conform(table: str, data: pa.Table | list[dict[str, Any]]) -> pa.Table:
    """Cast rows to the table contract; a missing or mistyped field is an error, not a guess."""
    schema = schema_for(table)
    if isinstance(data, list):
        for i, row in enumerate(data):
            missing = [fld.name for fld in schema if fld.name not in row]
            if missing:
                raise SchemaMismatchError(f"{table} row {i}: lacks fields {missing}")
        return pa.Table.from_pylist(data, schema=schema)
    check_schema(table, data.schema, where=f"<in-memory {table}>")
    return data.cast(schema)


def check_schema(table: str, actual: pa.Schema, where: str) -> None:
    """Raise a SchemaMismatchError naming the file and each differing field."""
    expected = schema_for(table)
    exp = {fld.name: fld.type for fld in expected}
    act = {fld.name: fld.type for fld in actual}
    problems = [f"missing field {n!r}" for n in exp if n not in act]
    problems += [f"unexpected field {n!r}" for n in act if n not in exp]
    problems += [
        f"field {n!r} is {act[n]}, contract says {t}"
        for n, t in exp.items()
        if n in act and act[n] != t
    ]
    version = (actual.metadata or {}).get(b"schema_version", b"?").decode()
    if version != "?" and version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        problems.append(f"schema_version {version} incompatible with {SCHEMA_VERSION}")
    if problems:
        raise SchemaMismatchError(
            f"{where}: does not match the '{table}' contract v{SCHEMA_VERSION}: "
            + "; ".join(problems)
        )


def read_shard(path: str | Path, table: str) -> pa.Table:
    """Read one shard, refusing it if it does not match the table contract."""
    path = Path(path)
    check_schema(table, pq.read_schema(path), where=str(path))
    return pq.read_table(path)


__all__ = ["SchemaMismatchError", "build_row", "check_schema", "conform", "read_shard"]
