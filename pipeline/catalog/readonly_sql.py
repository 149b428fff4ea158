"""Read-only SQL against the catalog for auditors and export filters.

A read-only DuckDB connection already refuses writes to the catalog file, but it still runs
`COPY ... TO`, `ATTACH`, `INSTALL`/`LOAD` and `SET`, which write files or change what later
statements see. Auditors run ad-hoc SQL files, so statements are checked by DuckDB's own
parser before anything runs, and only queries are let through.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import duckdb

from pipeline.catalog.bounded_sql import apply_limits
from pipeline.core.config import SQLConfig
from pipeline.core.errors import HintedError, first_line
from pipeline.store.store import connect_readonly, store_root

# Statement types that only read. DESCRIBE / SHOW / SUMMARIZE parse as SELECT.
READ_ONLY_TYPES = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})

# `EXPLAIN [ANALYZE | (options)]` before the explained statement, after any leading comments.
# EXPLAIN ANALYZE executes what it explains (`EXPLAIN ANALYZE COPY ... TO` writes the file),
# so the explained statement must itself be a SELECT.
_EXPLAIN_PREFIX = re.compile(
    r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*EXPLAIN\b(?:\s+ANALY[SZ]E\b|\s*\([^)]*\))?",
    re.IGNORECASE | re.DOTALL,
)


class UnsafeSQLError(HintedError, ValueError):
    """A statement that could write, or SQL that does not parse; the message names it (a
    parse error's message is DuckDB's own, so only a refused statement carries a hint)."""


WRITE_HINT = (
    "the catalog is only read here: use SELECT / EXPLAIN (and WITH ... SELECT); "
    "`curriculum export` writes datasets"
)


def read_only_statements(sql: str, where: str = "<sql>") -> list[str]:
    """Split `sql` into statements and refuse the batch if any one of them could write."""
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as exc:  # undecodable bytes from argv arrive as surrogates
        raise UnsafeSQLError(f"{where}: not valid UTF-8 (character {exc.start + 1})") from None
    parser = duckdb.connect()  # in-memory, only its parser is used
    try:
        try:
            statements = parser.extract_statements(sql)
        except duckdb.Error as exc:
            raise UnsafeSQLError(f"{where}: does not parse: {exc}") from exc
        if not statements:
            raise UnsafeSQLError(f"{where}: no SQL statement found")
        out = []
        for i, st in enumerate(statements, 1):
            problem = _write_risk(st, parser)
            if problem:
                raise UnsafeSQLError(
                    f"{where}: statement {i} is {problem} ({st.query.strip()[:60]!r}); "
                    "only SELECT / EXPLAIN queries run against the catalog",
                    hint=WRITE_HINT,
                )
            out.append(st.query)
        return out
    finally:
        parser.close()


def _statement_type(st) -> duckdb.StatementType | None:
    try:
        return st.type
    except ValueError:  # a type this duckdb's Python enum lacks (e.g. UPDATE EXTENSIONS)
        return None


def _write_risk(st, parser: duckdb.DuckDBPyConnection) -> str | None:
    """None for a query that only reads, else what kind of statement it is."""
    kind = _statement_type(st)
    if kind is None:
        return "a statement of unknown type"
    if kind not in READ_ONLY_TYPES:
        return kind.name
    if kind is duckdb.StatementType.EXPLAIN:
        m = _EXPLAIN_PREFIX.match(st.query)
        try:
            inner = parser.extract_statements(st.query[m.end() :]) if m else []
        except duckdb.Error:
            inner = []
        if len(inner) != 1 or _statement_type(inner[0]) is not duckdb.StatementType.SELECT:
            return "EXPLAIN of a statement that is not a SELECT"
    return None


def filter_relation(
    con: duckdb.DuckDBPyConnection, predicate: str | None, view: str = "curriculum"
) -> duckdb.DuckDBPyRelation:
    """`view` filtered by a user predicate that must be exactly one boolean expression.

    DuckDB parses the predicate as an expression (not spliced into a query string), so text
    that closes a parenthesis to append `UNION ...` or a second statement does not parse.
    """
    rel = con.table(view)
    if predicate is None or not predicate.strip():
        return rel
    try:
        filtered = rel.filter(predicate)
        # a number, a string or a column would be cast to a truth value (`42` kept every row)
        types = [str(t) for t in rel.project(predicate).types]
    except duckdb.Error as exc:
        raise UnsafeSQLError(f"filter {predicate!r} over {view}: {first_line(exc)}") from exc
    if types != ["BOOLEAN"]:
        raise UnsafeSQLError(
            f"filter {predicate!r} over {view}: not a boolean expression (it is "
            f"{', '.join(types)}); write a condition, e.g. verifier_v > 0.5"
        )
    return filtered


def connect_audit(
    catalog: str | Path, limits: SQLConfig | None = None, reviews: Sequence[Path] | None = None
) -> duckdb.DuckDBPyConnection:
    """A read-only catalog connection whose settings a query cannot change afterwards;
    `limits` caps its memory, spill space and threads (see pipeline.catalog.bounded_sql);
    `reviews`: the review files its `reviews` reads (default: those on disk now)."""
    con = connect_readonly(catalog, reviews)
    if limits is not None:
        apply_limits(con, limits)
    # A query naming an https:// or s3:// file would otherwise download and install httpfs.
    con.execute("SET autoinstall_known_extensions = false")
    # The views read Parquet files under a few directories; nothing else on the machine
    # (read_text('/etc/passwd'), someone's home directory) is readable from an audit query.
    dirs = _view_directories(con)
    if dirs:
        con.execute("SET allowed_directories = ?", [dirs])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


_QUOTED_PARQUET = re.compile(r"'((?:[^']|'')+?\.parquet)'")


def _view_directories(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Directories of the Parquet files the catalog's views read (trailing slash included);
    within the store, each top folder as one (`<store>/shards/`, `<store>/runs/`): a year of
    nights is thousands of partition folders, and DuckDB checks every path it opens against
    the list one entry at a time."""
    rows = con.execute("SELECT sql FROM duckdb_views() WHERE NOT internal").fetchall()
    paths = {m.replace("''", "'") for (sql,) in rows for m in _QUOTED_PARQUET.findall(sql or "")}
    dirs = {p.rpartition("/")[0] + "/" for p in paths}
    store = store_root(con)  # where the store is (a catalog from before does not say)
    if store is None:
        return sorted(dirs)
    root = str(store).rstrip("/") + "/"
    return sorted({root + d[len(root) :].partition("/")[0] + "/" if d.startswith(root) else d
                   for d in dirs})  # fmt: skip


__all__ = [
    "READ_ONLY_TYPES",
    "UnsafeSQLError",
    "connect_audit",
    "filter_relation",
    "read_only_statements",
]
