"""Time, memory and row limits on auditors' queries (`curriculum sql`, `curriculum audit`).

A read-only connection still lets one query run for hours, take most of the machine's memory
(DuckDB's default is 80 % of RAM) and return more rows than any terminal can show. The limits
come from the `sql:` config section: DuckDB's own `memory_limit`, `max_temp_directory_size`
and `threads` settings, a timer that interrupts the statement past `sql.timeout_s` (DuckDB has
no statement timeout of its own), and results fetched in batches of which at most
`sql.max_rows` rows are kept. A query past a limit fails with the limit's value and key named.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb

from pipeline.core.config import SQLConfig
from pipeline.core.errors import HintedError, first_line

# Rows converted to Python per fetch: DuckDB streams a query's result in chunks of 2048 rows.
BATCH_ROWS = 2048


class SQLLimitError(HintedError, RuntimeError):
    """A query stopped by one of the `sql.*` limits; the message names the limit and its key."""


@dataclass(frozen=True)
class Table:
    """One query result; `truncated` when the query returned more than the rows kept."""

    title: str
    columns: list[str]
    rows: list[tuple]
    truncated: bool = False

    def records(self) -> list[dict[str, Any]]:
        """Rows as dicts; a repeated column name (`SELECT * FROM a, b`) gets a `_2`, `_3`
        suffix so no value is dropped."""
        seen: dict[str, int] = {}
        keys = []
        for c in self.columns:
            seen[c] = seen.get(c, 0) + 1
            keys.append(c if seen[c] == 1 else f"{c}_{seen[c]}")
        return [dict(zip(keys, r, strict=True)) for r in self.rows]

    def column(self, name: str) -> list[Any]:
        i = self.columns.index(name)
        return [r[i] for r in self.rows]


def apply_limits(con: duckdb.DuckDBPyConnection, limits: SQLConfig) -> None:
    """Cap DuckDB's memory, spill space and threads (before the configuration is locked)."""
    con.execute("SET memory_limit = ?", [limits.memory_limit])
    con.execute("SET max_temp_directory_size = ?", [limits.max_temp_size])
    if limits.threads:
        con.execute("SET threads = ?", [limits.threads])


@contextlib.contextmanager
def statement_deadline(
    con: duckdb.DuckDBPyConnection, limits: SQLConfig, where: str
) -> Iterator[None]:
    """Interrupt the connection's statement after `limits.timeout_s`; a query past its time
    or memory limit becomes a SQLLimitError naming the limit."""
    fired, finished, lock = threading.Event(), threading.Event(), threading.Lock()

    def interrupt() -> None:
        with lock:  # never interrupt a later statement (or a closed connection) by mistake
            if finished.is_set():
                return
            fired.set()
            con.interrupt()

    timer = threading.Timer(limits.timeout_s, interrupt)
    timer.daemon = True
    timer.start()
    try:
        yield
    except duckdb.InterruptException as exc:
        if not fired.is_set():
            raise
        raise SQLLimitError(
            f"{where}: stopped at the SQL time limit of {limits.timeout_s:g} s (sql.timeout_s)",
            hint="narrow the query, or raise the limit: --set sql.timeout_s=SECONDS",
        ) from exc
    except duckdb.OutOfMemoryException as exc:
        raise SQLLimitError(
            f"{where}: over the SQL memory limit of {limits.memory_limit} (sql.memory_limit; "
            f"spill to disk up to {limits.max_temp_size}, sql.max_temp_size): {first_line(exc)}",
            hint="narrow the query, or raise the limit: --set sql.memory_limit=8GB",
        ) from exc
    finally:
        with lock:
            finished.set()
        timer.cancel()


def fetch_table(
    con: duckdb.DuckDBPyConnection,
    title: str,
    sql: str,
    limits: SQLConfig,
    params: dict[str, Any] | None = None,
    where: str | None = None,
) -> Table:
    """Run one statement under the limits; keep its first `limits.max_rows` rows.

    Rows are fetched in batches from DuckDB's streaming result and fetching stops one row
    past the cap, so a huge result is never materialised (nor computed further). `where`
    names the statement in a limit's error (default: the title)."""
    with statement_deadline(con, limits, where or title):
        cur = con.execute(sql, params) if params else con.execute(sql)
        if cur.description is None:  # e.g. an EXPLAIN with nothing to show
            return Table(title, [], [])
        columns = [d[0] for d in cur.description]
        rows: list[tuple] = []
        while len(rows) <= limits.max_rows:
            batch = cur.fetchmany(min(BATCH_ROWS, limits.max_rows + 1 - len(rows)))
            if not batch:
                break
            rows.extend(batch)
    truncated = len(rows) > limits.max_rows
    return Table(title, columns, rows[: limits.max_rows], truncated)


__all__ = ["BATCH_ROWS", "SQLLimitError", "Table", "apply_limits", "fetch_table"]
