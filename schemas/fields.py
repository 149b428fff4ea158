"""The building blocks of a table contract: the schema version every contract carries, the
column types tables share, and the helpers that declare a contract and its documented columns.
The contracts themselves are gathered in schemas/tables.py.

Bump SCHEMA_VERSION when a field changes meaning or type; readers refuse shards whose schema
does not match the contract, so an old shard never silently mixes into a new view.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = "3.0.0"

TS = pa.timestamp("us", tz="UTC")
_NAMED = pa.struct([("id", pa.string()), ("label", pa.string())])
KG_PATH = pa.struct([("nodes", pa.list_(_NAMED)), ("relations", pa.list_(_NAMED))])
EVIDENCE_CHAIN = pa.list_(
    pa.struct(
        [
            ("hop", pa.int8()),
            ("passage_id", pa.string()),
            ("char_start", pa.int32()),
            ("char_end", pa.int32()),
            ("text", pa.string()),
            ("subject", pa.string()),
            ("relation", pa.string()),
            ("object", pa.string()),
            ("source", pa.string()),
        ]
    )
)

DOCS: dict[str, str] = {}  # table -> its one-line description (schemas.tables.table_doc)


def contract(name: str, doc: str, fields: list[pa.Field]) -> pa.Schema:
    DOCS[name] = doc
    return pa.schema(fields, metadata={"table": name, "schema_version": SCHEMA_VERSION})


def f(name: str, type_: pa.DataType, nullable: bool = True, doc: str = "") -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={"doc": doc} if doc else None)
