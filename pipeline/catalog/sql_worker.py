"""The one bounded execution path for user-supplied SQL (`curriculum sql`, `audit`, `audit
--sql`, `export --where`): a read-only catalog connection in a worker process whose address
space is capped by the OS.

DuckDB's `memory_limit` covers its buffer manager, not every allocation: `SELECT
length(repeat('a', 2000000000))` peaked at 3.9 GB under a 500MB limit in-process. The worker
sets RLIMIT_AS to its own size after connecting plus `sql.memory_limit` plus a fixed headroom
(the rows it converts and sends back), so such an allocation fails at once inside DuckDB
(`Out of Memory Error`) and is reported like any query past the limit, naming
`sql.memory_limit`. Everything else (read-only statements, locked settings, the timer of
`sql.timeout_s`, rows cut at `sql.max_rows`) is `connect_audit` + `fetch_table`, run in the
worker; the parent also kills a worker that overruns its time limit by a margin.

Protocol: length-prefixed pickles over the worker's stdin / stdout, one reply per request.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pipeline.catalog.bounded_sql import SQLLimitError, Table
from pipeline.core.config import PROJECT_ROOT, SQLConfig
from pipeline.core.machine import physical_memory, size_bytes

# Address space allowed beyond the worker's size after connecting and sql.memory_limit: the
# Python rows of one result (at most sql.max_rows) and their pickle.
HEADROOM_BYTES = 256 * 2**20
# The parent's own backstop beyond sql.timeout_s (the worker's timer stops a statement first).
KILL_MARGIN_S = 15.0
# ---- the parent's side -----------------------------------------------------------------------


class SQLWorkerError(RuntimeError):
    """The worker ended without answering (killed, crashed)."""


class BoundedSQL:
    """A session of read-only statements on `catalog` under `limits`, run by one worker
    process. Errors arrive as the exceptions the in-process code raises: SQLLimitError,
    duckdb.Error subclasses (DuckDB's message), StoreError (no or not a catalog)."""

    def __init__(self, catalog: str | Path, limits: SQLConfig) -> None:
        from pipeline.store.store import check_catalog_file

        check_catalog_file(Path(catalog))  # no process started for a missing or bad catalog
        self.limits = limits
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT_ROOT), *sys.path])}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline.catalog.sql_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=PROJECT_ROOT,
        )
        try:
            self._call(("open", str(catalog), limits.model_dump()), "opening the catalog")
        except BaseException:
            self.close()
            raise

    def fetch(
        self,
        title: str,
        sql: str,
        params: dict[str, Any] | None = None,
        where: str | None = None,
    ) -> Table:
        """fetch_table in the worker: the statement's first sql.max_rows rows."""
        return self._call(("fetch", title, sql, params, where), where or title)

    def filter_column(
        self, view: str, predicate: str | None, column: str, run_ids: Sequence[str] = ()
    ) -> list[Any]:
        """`column` of every row of `view` matching a user predicate (one boolean expression,
        see readonly_sql.filter_relation), all rows (of `run_ids` when given), under the time
        and memory limits."""
        request = ("filter", view, predicate, column, sorted(set(run_ids)))
        return self._call(request, f"filter over {view}")

    def scope(self, run_ids: Sequence[str]) -> None:
        """The session's later statements read the own files of `run_ids` for the per-run
        tables (store.scope_to_runs): a reader of one run pays for one night, not the
        history."""
        self._call(("scope", list(run_ids)), f"scoping to runs {', '.join(run_ids)}")

    def _call(self, request: tuple, where: str) -> Any:
        proc = self._proc
        data = pickle.dumps(request)
        try:
            proc.stdin.write(struct.pack("<Q", len(data)) + data)
            proc.stdin.flush()
        except BrokenPipeError:
            raise self._died(where) from None
        deadline = time.monotonic() + self.limits.timeout_s + KILL_MARGIN_S
        reply = _read_message(proc.stdout, deadline)
        if reply is None:
            if proc.poll() is None:  # still running past the backstop: stop it
                proc.kill()
                proc.wait()
                raise SQLLimitError(
                    f"{where}: stopped at the SQL time limit of {self.limits.timeout_s:g} s "
                    "(sql.timeout_s)",
                    hint="narrow the query, or raise the limit: --set sql.timeout_s=SECONDS",
                )
            raise self._died(where)
        status, payload = reply
        if status == "ok":
            return payload
        raise _rebuild(payload)

    def _died(self, where: str) -> SQLLimitError:
        code = self._proc.wait()
        return SQLLimitError(
            f"{where}: the query's worker process ended (exit status {code}), most likely past "
            f"the SQL memory limit of {self.limits.memory_limit} (sql.memory_limit)",
            hint="narrow the query, or raise the limit: --set sql.memory_limit=8GB",
        )

    def close(self) -> None:
        proc = self._proc
        if proc.poll() is None:
            try:
                proc.stdin.close()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        if proc.stdout:
            proc.stdout.close()

    def __enter__(self) -> BoundedSQL:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def bounded_filter(
    connect: Callable[[], Any],
    catalog: str | Path,
    view: str,
    predicate: str | None,
    limits: SQLConfig | None,
    run_batches: Sequence[Sequence[str]],
) -> Iterator[tuple[Any, Any]]:
    """Per batch of runs, a connection of `connect()`'s and `view` on it narrowed to the
    batch's rows whose `record_id` matches a user predicate (`export --where`), the predicate
    evaluated by a worker under `limits` (default: the sql: section's defaults) over the
    batch's runs; an empty predicate keeps every row. Batch by batch, so that neither side
    holds more than a batch of a year of records; each connection and relation is valid until
    the next is asked for.

    The connection reads the batch's own files (store.scope_to_runs: not 365 files a table
    per query) and is the batch's alone: DuckDB keeps state for each query a connection ran
    (a year of nights' batches on one connection held 40 MB more than one batch), so the
    caller must not hold another connection to the catalog meanwhile (they would share the
    database and its state). The worker is not scoped: a user's predicate may read other
    runs (a subquery)."""
    import duckdb
    import pyarrow as pa

    from pipeline.store.store import scope_to_runs

    con = None

    def runs_of(batch: Sequence[str]) -> tuple[Any, Any]:
        nonlocal con
        if con is not None:
            con.close()
        con = connect()
        scope_to_runs(con, batch)
        values = (duckdb.ConstantExpression(r) for r in batch)
        return con, con.table(view).filter(duckdb.ColumnExpression("run_id").isin(*values))

    try:
        if predicate is None or not predicate.strip():
            for batch in run_batches:
                yield runs_of(batch)
            return
        with BoundedSQL(catalog, limits or SQLConfig()) as session:
            for batch in run_batches:
                ids = session.filter_column(view, predicate, "record_id", batch)
                bcon, rel = runs_of(batch)
                # a semi join with the ids as a table: an IN list of 100k constants took
                # longer to build and evaluate than the query, and 300 MB
                bcon.register("_matched_ids", pa.table({"record_id": pa.array(ids, pa.string())}))
                yield bcon, rel.join(bcon.table("_matched_ids"), "record_id", how="semi")
    finally:
        if con is not None:
            con.close()


def _read_exact(fh, n: int, deadline: float | None) -> bytes | None:
    out = bytearray()
    fd = fh.fileno()
    while len(out) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
        chunk = os.read(fd, min(n - len(out), 1 << 20))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def _read_message(fh, deadline: float | None) -> Any:
    head = _read_exact(fh, 8, deadline)
    if head is None:
        return None
    body = _read_exact(fh, struct.unpack("<Q", head)[0], None)
    return None if body is None else pickle.loads(body)


def _rebuild(payload: tuple) -> BaseException:
    """The worker's exception, as the class the in-process code would have raised."""
    kind, name, message, hint = payload
    if kind == "limit":
        return SQLLimitError(message, hint=hint)
    if kind == "duckdb":
        import duckdb

        cls = getattr(duckdb, name, None)
        if not (isinstance(cls, type) and issubclass(cls, duckdb.Error)):
            cls = duckdb.Error
        return cls(message)
    if kind == "store":
        from pipeline.store import store

        return getattr(store, name, store.StoreError)(message)
    if kind == "unsafe":
        from pipeline.catalog.readonly_sql import UnsafeSQLError

        return UnsafeSQLError(message, hint=hint)
    return SQLWorkerError(f"{name}: {message}")


# ---- the worker's side ----------------------------------------------------------------------


def _cap_address_space(limits: SQLConfig) -> None:
    import resource

    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
    except OSError:  # not Linux: no /proc to size the process by, DuckDB's own limit only
        return
    now = pages * os.sysconf("SC_PAGE_SIZE")
    cap = now + min(size_bytes(limits.memory_limit), physical_memory()) + HEADROOM_BYTES
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _serve() -> None:  # pragma: no cover - runs in the worker process
    import duckdb

    from pipeline.catalog.bounded_sql import fetch_table
    from pipeline.catalog.readonly_sql import UnsafeSQLError, connect_audit, filter_relation
    from pipeline.store.store import StoreError, scope_to_runs

    # The protocol gets its own copy of fd 1; fd 1 itself (anything DuckDB or a library might
    # print) goes to stderr, so nothing else can ever write into the protocol's stream.
    stdin, stdout = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    con, limits = None, None

    def reply(status: str, payload: Any) -> None:
        data = pickle.dumps((status, payload))
        stdout.write(struct.pack("<Q", len(data)) + data)
        stdout.flush()

    while (request := _read_message(stdin, None)) is not None:
        op, *args = request
        try:
            if op == "open":
                limits = SQLConfig.model_validate(args[1])
                con = connect_audit(args[0], limits)
                _cap_address_space(limits)
                result = None
            elif op == "fetch":
                title, sql, params, where = args
                result = fetch_table(con, title, sql, limits, params, where)
            elif op == "scope":
                scope_to_runs(con, args[0])
                result = None
            elif op == "filter":
                from pipeline.catalog.bounded_sql import statement_deadline

                view, predicate, column, run_ids = args
                with statement_deadline(con, limits, f"filter over {view}"):
                    rel = filter_relation(con, predicate, view)
                    if run_ids:  # bound values, never SQL text
                        values = (duckdb.ConstantExpression(r) for r in run_ids)
                        rel = rel.filter(duckdb.ColumnExpression("run_id").isin(*values))
                    rel = rel.select(column)
                    result = [r[0] for r in rel.fetchall()]
            else:
                raise ValueError(f"unknown request {op!r}")
            reply("ok", result)
        except SQLLimitError as exc:
            reply("err", ("limit", "", str(exc), exc.hint))
        except MemoryError:
            where = args[-1] if op == "fetch" and args[-1] else "query"
            msg = f"{where}: over the SQL memory limit of {limits.memory_limit} (sql.memory_limit)"
            reply("err", ("limit", "", msg, "narrow the query, or raise --set sql.memory_limit"))
        except UnsafeSQLError as exc:
            reply("err", ("unsafe", "", str(exc), exc.hint))
        except duckdb.Error as exc:
            reply("err", ("duckdb", type(exc).__name__, str(exc), None))
        except StoreError as exc:
            reply("err", ("store", type(exc).__name__, str(exc), None))
        except Exception as exc:
            reply("err", ("other", type(exc).__name__, str(exc), None))
    # Closed before the interpreter exits: a connection left to shutdown makes nanobind print
    # "leaked instances" warnings to the user's terminal, now and then.
    if con is not None:
        con.close()


if __name__ == "__main__":
    _serve()


__all__ = ["BoundedSQL", "SQLWorkerError", "bounded_filter", "physical_memory", "size_bytes"]
