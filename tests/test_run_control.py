"""Store run lock, graceful stop on signals, catalog refresh under readers, CLI error lines."""

import functools
import os
import signal
import subprocess
import sys
import time

import duckdb
import pytest

from pipeline.core.run_control import RunInProgressError, StopRequest, store_run_lock
from pipeline.store.store import Store
from tests.conftest import ROOT, run_cli


def test_second_run_on_a_store_is_refused_naming_the_holder(tmp_path):
    with store_run_lock(tmp_path, "night-1"):
        refused = pytest.raises(RunInProgressError, match=r"'night-1' \(pid \d+")
        with refused as err, store_run_lock(tmp_path, "night-2"):
            pytest.fail("two runs held the lock")
        assert "'night-2' was not started" in str(err.value)
    with store_run_lock(tmp_path, "night-2"):  # released with the first holder
        pass


def test_lock_of_a_killed_process_is_released(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from pipeline.core.run_control import store_run_lock\n"
            "with store_run_lock(Path(sys.argv[1]), 'crashy'):\n"
            "    print('held', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        refused = pytest.raises(RunInProgressError, match=f"'crashy' \\(pid {holder.pid} ")
        with refused, store_run_lock(tmp_path, "next"):
            pass
    finally:
        holder.kill()  # SIGKILL: no cleanup code runs, the OS drops the lock
        holder.wait()
    with store_run_lock(tmp_path, "next"):
        pass


def test_first_signal_requests_a_stop_second_aborts():
    stop = StopRequest()
    before = signal.getsignal(signal.SIGTERM)
    with stop.installed():
        assert not stop.requested()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # the handler runs in the main thread at the next bytecode boundary
        assert stop.requested()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
    assert signal.getsignal(signal.SIGTERM) is before


def test_catalog_refresh_while_another_process_reads_it(tmp_path):
    store = Store(tmp_path / "out", tmp_path / "out" / "catalog.duckdb")
    catalog = store.refresh_catalog()
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, duckdb\n"
            "con = duckdb.connect(sys.argv[1], read_only=True)\n"
            "print(con.execute('SELECT count(*) FROM curriculum').fetchone()[0], flush=True)\n"
            "sys.stdin.readline()\n"
            "print(con.execute('SELECT count(*) FROM funnel').fetchone()[0], flush=True)",
            str(catalog),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout.readline().strip() == "0"
        # DuckDB would refuse to open a file another process has open; the refresh builds a
        # new file and renames it over the old one, so both sides carry on.
        store.refresh_catalog()
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "0"
    finally:
        reader.kill()
        reader.wait()
    with duckdb.connect(str(catalog), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM evidence_check").fetchone() == (0,)
    assert not list(catalog.parent.glob(".*.tmp*"))


_cli = functools.partial(run_cli, timeout=120)


def test_unexpected_error_is_one_line_with_a_hint_and_traceback_behind_debug(tmp_path):
    # A DuckDB file whose blocks were damaged after it was written (storage, not the user's
    # input: a file that is not a catalog at all is bad input, exit 2, tests/test_hostile_input).
    catalog = tmp_path / "catalog.duckdb"
    with duckdb.connect(str(catalog)) as con:
        con.execute("CREATE TABLE t AS SELECT 1 AS x")
    data = catalog.read_bytes()
    catalog.write_bytes(data[:12] + b"x" * (len(data) - 12))  # DuckDB's header kept
    args = ["sql", "SELECT 1", "--set", f"store.catalog={catalog}"]
    plain = _cli(*args)
    assert plain.returncode == 1
    lines = plain.stderr.strip().splitlines()
    assert lines[0].startswith("error: Error: Corrupt database file"), plain.stderr
    assert lines[1].startswith("hint: rerun with `curriculum --debug")
    assert "Traceback" not in plain.stderr
    debug = _cli("--debug", *args)
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr


def test_sql_error_is_the_sql_error_alone(tmp_path):
    """A query the catalog cannot answer is the user's input, not a bug: DuckDB's one line,
    exit 2, and no `--debug` hint (nor any other)."""
    catalog = Store(tmp_path / "out", tmp_path / "out" / "catalog.duckdb").refresh_catalog()
    res = _cli("sql", "SELECT * FROM no_such_table", "--set", f"store.catalog={catalog}")
    assert res.returncode == 2
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("error: query: statement 1: Catalog Error: ") and "no_such_table" in line


def test_sql_command_refuses_statements_that_write(tmp_path):
    catalog = Store(tmp_path / "out", tmp_path / "out" / "catalog.duckdb").refresh_catalog()
    target = tmp_path / "leak.csv"
    res = _cli("sql", f"COPY (SELECT 1) TO '{target}'", "--set", f"store.catalog={catalog}")
    assert res.returncode == 2
    assert "statement 1 is COPY" in res.stderr
    assert not target.exists()
    ok = _cli("sql", "SELECT count(*) AS n FROM curriculum", "--set", f"store.catalog={catalog}")
    assert ok.returncode == 0 and "0" in ok.stdout


def test_only_transient_failures_are_retried():
    from pipeline.core.run_control import is_transient
    from pipeline.llm.http_backend import LLMConnectionError, LLMServerError

    url = "http://127.0.0.1:1/v1/completions"
    assert is_transient(LLMConnectionError(url, TimeoutError("read"), 4))
    assert is_transient(LLMServerError(url, 503, "overloaded", 4))
    assert is_transient(LLMServerError(url, 429, "slow down", 4))
    assert not is_transient(LLMServerError(url, 400, "bad request"))
    assert is_transient(ConnectionResetError())
    assert not is_transient(ValueError("run exists with another config"))
    assert not is_transient(FileNotFoundError("corpus.jsonl"))
    assert not is_transient(None)
