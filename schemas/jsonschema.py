"""Export the Arrow contracts as JSON Schema (draft 2020-12) for consumers outside Python.

Regenerate with `python -m schemas.jsonschema`; a test fails when the committed files drift.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

from schemas.tables import SCHEMA_VERSION, TABLES, table_doc

OUT_DIR = Path(__file__).resolve().parent / "jsonschema"


def _type(t: pa.DataType) -> dict[str, Any]:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return {"type": "string"}
    if pa.types.is_boolean(t):
        return {"type": "boolean"}
    if pa.types.is_integer(t):
        return {"type": "integer"}
    if pa.types.is_floating(t):
        return {"type": "number"}
    if pa.types.is_timestamp(t):
        return {"type": "string", "format": "date-time"}
    if pa.types.is_date(t):
        return {"type": "string", "format": "date"}
    if pa.types.is_list(t):
        return {"type": "array", "items": _field(t.value_field)}
    if pa.types.is_struct(t):
        return _object(list(t))
    raise TypeError(f"no JSON Schema mapping for Arrow type {t}")


def _field(field: pa.Field) -> dict[str, Any]:
    out = _type(field.type)
    if field.nullable:
        out = {"anyOf": [out, {"type": "null"}]}
    doc = (field.metadata or {}).get(b"doc")
    if doc:
        out["description"] = doc.decode()
    return out


def _object(fields: list[pa.Field]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {fld.name: _field(fld) for fld in fields},
        "required": [fld.name for fld in fields],
        "additionalProperties": False,
    }


def to_json_schema(table: str) -> dict[str, Any]:
    schema = TABLES[table]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:evidence-curriculum:{table}:{SCHEMA_VERSION}",
        "title": table,
        "description": table_doc(table),
        "x-schema-version": SCHEMA_VERSION,
        **_object(list(schema)),
    }


def render(table: str) -> str:
    return json.dumps(to_json_schema(table), indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    OUT_DIR.mkdir(exist_ok=True)
    for table in TABLES:
        (OUT_DIR / f"{table}.schema.json").write_text(render(table), encoding="utf-8")
    print(f"wrote {len(TABLES)} JSON Schema files to {OUT_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
