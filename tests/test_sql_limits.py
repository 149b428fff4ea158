"""Auditors' SQL runs under a time limit, a memory cap and a row cap, each
named in its error, on a real DuckDB file generated here."""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

import duckdb
import orjson
import pytest

from pipeline.catalog.audit import AuditError, run_sql_file
from pipeline.catalog.bounded_sql import SQLLimitError, fetch_table
from pipeline.catalog.readonly_sql import connect_audit
from pipeline.core.config import SQLConfig
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
ROWS = 20_000
# 400M row pairs, each concatenated twice: ~20 s of work, far past any limit set below. (A plain
# `a.text < b.text` is a range join DuckDB sorts: 0.5 s here, a race with the 0.5 s limit.)
CROSS_JOIN = "SELECT count(*) FROM passages a, passages b WHERE a.text || b.text < b.text || a.text"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sql-limits") / "catalog.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(
            f"CREATE TABLE passages AS SELECT range AS id, md5(range::VARCHAR) AS text "
            f"FROM range({ROWS})"
        )
    return path


cli = functools.partial(run_cli, timeout=120)


def test_a_statement_past_its_time_limit_is_interrupted_naming_the_limit(catalog):
    limits = SQLConfig(timeout_s=0.5)
    with connect_audit(catalog, limits) as con:
        start = time.perf_counter()
        with pytest.raises(SQLLimitError, match=r"time limit of 0\.5 s \(sql\.timeout_s\)"):
            fetch_table(con, "cross join", CROSS_JOIN, limits)
        elapsed = time.perf_counter() - start
        assert 0.5 <= elapsed < 1.5, elapsed
        # The connection is usable again for the next statement.
        assert fetch_table(con, "after", "SELECT 42 AS x", limits).rows == [(42,)]


def test_a_query_past_its_memory_cap_fails_naming_the_limit(catalog):
    limits = SQLConfig(memory_limit="50MB", max_temp_size="60MB", timeout_s=120)
    hog = (
        "SELECT a.id, string_agg(b.text, ',') FROM passages a, "
        "(FROM passages LIMIT 3000) b GROUP BY 1"
    )
    with connect_audit(catalog, limits) as con:
        settings = con.execute(
            "SELECT current_setting('memory_limit'), current_setting('max_temp_directory_size')"
        ).fetchone()
        assert settings[0].endswith("MiB") and float(settings[0].split()[0]) < 50
        with pytest.raises(SQLLimitError, match=r"memory limit of 50MB \(sql\.memory_limit"):
            fetch_table(con, "hog", hog, limits)


def test_limits_cannot_be_lifted_by_the_query(catalog):
    with connect_audit(catalog, SQLConfig(threads=1)) as con:
        assert con.execute("SELECT current_setting('threads')").fetchone() == (1,)
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute("SET memory_limit = '100GB'")


def test_rows_are_capped_without_materialising_the_result(catalog):
    limits = SQLConfig(max_rows=5, timeout_s=30)
    with connect_audit(catalog, limits) as con:
        start = time.perf_counter()
        t = fetch_table(con, "pairs", "SELECT a.id, b.id FROM passages a, passages b", limits)
        assert time.perf_counter() - start < 5  # 400M rows were not computed
        assert len(t.rows) == 5 and t.truncated
        exact = fetch_table(con, "five", "SELECT * FROM passages LIMIT 5", limits)
        assert len(exact.rows) == 5 and not exact.truncated


def test_sql_file_statements_run_under_the_limits(catalog, tmp_path):
    f = tmp_path / "slow.sql"
    f.write_text(f"SELECT 1 AS fine;\n{CROSS_JOIN};\n")
    with pytest.raises(SQLLimitError, match=rf"{f}: statement 2: stopped at the SQL time limit"):
        run_sql_file(catalog, f, SQLConfig(timeout_s=0.3))


def test_non_utf8_sql_file_is_one_error_naming_the_file(catalog, tmp_path):
    f = tmp_path / "latin1.sql"
    f.write_bytes("SELECT 'café' AS x;\n".encode("latin-1"))
    with pytest.raises(AuditError, match=rf"{f}: not UTF-8 text"):
        run_sql_file(catalog, f)
    res = cli("audit", "--sql", str(f), "--set", f"store.catalog={catalog}")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"error: {f}: not UTF-8 text (invalid byte at offset 11)"
    ]


def test_cli_names_the_time_limit_and_notes_the_row_cap(catalog):
    cat = f"store.catalog={catalog}"
    slow = cli("sql", CROSS_JOIN, "--set", cat, "--set", "sql.timeout_s=0.5")
    assert slow.returncode == 2
    lines = slow.stderr.strip().splitlines()
    assert (
        lines[0]
        == "error: query: statement 1: stopped at the SQL time limit of 0.5 s (sql.timeout_s)"
    )
    assert lines[1].startswith("hint:") and "sql.timeout_s" in lines[1] and len(lines) == 2

    capped = cli(
        "sql", "SELECT id FROM passages ORDER BY id", "--set", cat, "-f", "csv", "--limit", "3"
    )
    assert capped.returncode == 0, capped.stderr
    assert capped.stdout.splitlines() == ["id", "0", "1", "2"]  # the note stays off stdout
    assert "showing the first 3 rows" in capped.stderr and "sql.max_rows" in capped.stderr

    # A later failing statement keeps the earlier ones' results; repeated column names keep
    # every value in JSON.
    two = "SELECT a.id, b.id FROM passages a, passages b WHERE a.id = 1 AND b.id = 2; SELECT nope"
    partial = cli("sql", two, "--set", cat, "-f", "json")
    assert partial.returncode == 2 and "statement 2" in partial.stderr
    assert orjson.loads(partial.stdout)["rows"] == [{"id": 1, "id_2": 2}]

    undecodable = os.fsdecode(b"SELECT '\xff'")  # what a non-UTF-8 argument becomes
    bad = cli("sql", undecodable, "--set", cat)
    assert bad.returncode == 2 and "not valid UTF-8" in bad.stderr


def test_a_cut_audit_listing_keeps_its_verdict_and_counts_at_least(tmp_path):
    from pipeline.catalog.audit import AUDITS, run_audit
    from pipeline.catalog.bounded_sql import Table

    cut = Table("evidence mismatches", ["record_id"], [("r1",), ("r2",)], truncated=True)
    assert AUDITS["evidence"].rule([cut]).startswith("at least 2 verbatim record(s)")
    whole = Table("evidence mismatches", ["record_id"], [("r1",), ("r2",)])
    assert AUDITS["evidence"].rule([whole]).startswith("2 verbatim record(s)")
    # Every named audit runs under the limits (an empty real catalog).
    from pipeline.store.store import Store

    catalog = Store(tmp_path / "out", tmp_path / "out" / "c.duckdb").refresh_catalog()
    for name in AUDITS:
        assert run_audit(catalog, name, limits=SQLConfig(max_rows=1, timeout_s=30)).exit_code == 0
