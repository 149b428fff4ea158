"""Data contracts: Arrow schemas, JSON Schema export and DuckDB views."""

from schemas.tables import SCHEMA_VERSION, TABLES, schema_for

__all__ = ["SCHEMA_VERSION", "TABLES", "schema_for"]
