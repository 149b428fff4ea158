"""pipeline.catalog.readonly_sql: only queries reach the catalog; filters stay one expression."""

from __future__ import annotations

import duckdb
import pytest

from pipeline.catalog.readonly_sql import (
    UnsafeSQLError,
    connect_audit,
    filter_relation,
    read_only_statements,
)
from pipeline.store.store import Store, StoreError


@pytest.fixture(scope="module")
def empty_catalog(tmp_path_factory):
    return Store(tmp_path_factory.mktemp("ro") / "out").refresh_catalog()


REFUSED = [
    ("COPY curriculum TO '{d}/c.parquet'", "COPY"),
    ("COPY (SELECT 1) TO '{d}/c.csv'", "COPY"),
    ("EXPLAIN ANALYZE COPY (SELECT 1) TO '{d}/c.csv'", "EXPLAIN of a statement"),
    ("EXPLAIN (ANALYZE, FORMAT json) COPY (SELECT 1) TO '{d}/c.csv'", "EXPLAIN of a statement"),
    ("/* hidden */ EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1", "EXPLAIN of a statement"),
    ("ATTACH '{d}/other.duckdb' AS o", "ATTACH"),
    ("DETACH o", "DETACH"),
    ("CREATE TABLE t (i INTEGER)", "CREATE"),
    ("CREATE OR REPLACE VIEW funnel AS SELECT 1", "CREATE"),
    ("CREATE MACRO m(x) AS x", "CREATE"),
    ("CREATE SECRET s (TYPE s3)", "CREATE"),
    ("INSERT INTO curriculum SELECT * FROM curriculum", "INSERT"),
    ("UPDATE curriculum SET run_id = 'x'", "UPDATE"),
    ("DELETE FROM curriculum", "DELETE"),
    ("DROP VIEW funnel", "DROP"),
    ("ALTER VIEW funnel RENAME TO f", "ALTER"),
    ("SET threads = 1", "SET"),
    ("RESET threads", "SET"),
    ("USE memory", "SET"),
    ("INSTALL httpfs", "LOAD"),
    ("LOAD httpfs", "LOAD"),
    ("UPDATE EXTENSIONS", "unknown type"),
    ("PRAGMA version", "PRAGMA"),
    ("CALL pragma_version()", "CALL"),
    ("CHECKPOINT", "CALL"),
    ("VACUUM", "VACUUM"),
    ("BEGIN TRANSACTION", "TRANSACTION"),
    ("EXPORT DATABASE '{d}/exp'", "EXPORT"),
    ("IMPORT DATABASE '{d}/exp'", "PRAGMA"),
    ("PREPARE p AS SELECT 1", "PREPARE"),
    ("EXECUTE p", "EXECUTE"),
]


@pytest.mark.parametrize(("sql", "kind"), REFUSED, ids=[s for s, _ in REFUSED])
def test_statements_that_could_write_are_refused(sql, kind, tmp_path):
    sql = sql.format(d=tmp_path)
    with pytest.raises(UnsafeSQLError) as exc:
        read_only_statements(sql, where="checks.sql")
    msg = str(exc.value)
    assert msg.startswith("checks.sql: statement 1 is ")
    assert kind in msg
    assert "\n" not in msg  # one line: file, statement number and kind


def test_a_batch_is_refused_whole_before_anything_runs(tmp_path, empty_catalog):
    target = tmp_path / "leak.csv"
    sql = f"SELECT 1;\nSELECT count(*) FROM curriculum;\nCOPY (SELECT 42) TO '{target}'"
    with pytest.raises(UnsafeSQLError, match=r"^audit\.sql: statement 3 is COPY"):
        read_only_statements(sql, where="audit.sql")
    assert not target.exists()


def test_explain_analyze_of_a_copy_would_write_without_the_check(tmp_path, empty_catalog):
    """Why EXPLAIN is inspected: a read-only connection alone lets EXPLAIN ANALYZE write."""
    target = tmp_path / "written.csv"
    sql = f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{target}'"
    from pipeline.store.store import connect_readonly

    with connect_readonly(empty_catalog) as con:
        con.execute(sql)
    assert target.exists()
    target.unlink()
    with pytest.raises(UnsafeSQLError, match="EXPLAIN of a statement that is not a SELECT"):
        read_only_statements(sql)
    # Second line of defence: the audit connection cannot write files even if a check failed.
    with connect_audit(empty_catalog) as con, pytest.raises(duckdb.PermissionException):
        con.execute(sql)
    assert not target.exists()


READS = [
    "SELECT count(*) FROM curriculum",
    "WITH x AS (SELECT run_id FROM curriculum) SELECT * FROM x",
    "FROM funnel",
    "SELECT 1 UNION ALL SELECT 2",
    "VALUES (1), (2)",
    "DESCRIBE curriculum",
    "SUMMARIZE SELECT 1 AS x",
    "SHOW TABLES",
    "EXPLAIN SELECT * FROM curriculum",
    "EXPLAIN ANALYZE SELECT * FROM curriculum",
    "explain analyse select 1",
    "EXPLAIN (FORMAT json) SELECT 1",
    "-- a comment\nEXPLAIN ANALYZE\nFROM curriculum",
    "SELECT * FROM query('SELECT 42')",
]


@pytest.mark.parametrize("sql", READS)
def test_queries_pass_and_run_on_the_audit_connection(sql, empty_catalog):
    stmts = read_only_statements(sql)
    assert len(stmts) == 1
    with connect_audit(empty_catalog) as con:
        con.execute(stmts[0]).fetchall()


def test_statements_are_split_by_the_parser_not_by_semicolons():
    stmts = read_only_statements("SELECT 'a;b' AS s; -- trailing; comment\nSELECT 2")
    assert len(stmts) == 2
    assert "'a;b'" in stmts[0]


@pytest.mark.parametrize(
    ("sql", "match"),
    [
        ("SELEC 1", "does not parse"),
        ("SELECT 'unterminated", "does not parse"),
        ("", "no SQL statement"),
        ("-- only a comment", "no SQL statement"),
        ("EXPLAIN EXPLAIN SELECT 1", "does not parse"),
    ],
)
def test_unparseable_or_empty_sql_is_an_error(sql, match):
    with pytest.raises(UnsafeSQLError, match=match):
        read_only_statements(sql, where="q.sql")


def test_the_audit_connection_is_read_only_and_its_settings_locked(empty_catalog):
    with connect_audit(empty_catalog) as con:
        with pytest.raises(duckdb.Error):
            con.execute("CREATE TABLE t (i INTEGER)")
        with pytest.raises(duckdb.Error, match="lock"):
            con.execute("SET threads = 1")
        row = con.execute(
            "SELECT current_setting('lock_configuration'), "
            "current_setting('autoinstall_known_extensions')"
        ).fetchall()[0]
    assert row == (True, False)


def test_no_catalog_is_a_store_error(tmp_path):
    with pytest.raises(StoreError, match="no catalog"):
        connect_audit(tmp_path / "missing.duckdb")


# ---- filters over the real landed run ---------------------------------------------------


def test_a_filter_is_one_expression_over_the_view(landed_run):
    with connect_audit(landed_run.catalog) as con:
        total = con.execute("SELECT count(*) FROM curriculum").fetchall()[0][0]
        valid = con.execute("SELECT count(*) FROM curriculum WHERE is_valid").fetchall()[0][0]
        assert total > 0
        assert len(filter_relation(con, None).fetchall()) == total
        assert len(filter_relation(con, "  ").fetchall()) == total
        assert len(filter_relation(con, "is_valid").fetchall()) == valid
        rel = filter_relation(con, f"run_id = '{landed_run.run_id}' AND hop_count >= 1")
        assert len(rel.fetchall()) == total
        assert filter_relation(con, "run_id = 'no-such-run'").fetchall() == []


@pytest.mark.parametrize(
    "predicate",
    [
        "true) UNION SELECT * FROM curriculum --",
        "true) UNION ALL (SELECT * FROM curriculum",
        "is_valid; DROP VIEW funnel",
        "is_valid; COPY curriculum TO 'x.parquet'",
        "no_such_column > 0",
    ],
)
def test_a_filter_cannot_smuggle_a_second_query(landed_run, predicate):
    with connect_audit(landed_run.catalog) as con:
        with pytest.raises(UnsafeSQLError) as exc:
            filter_relation(con, predicate).fetchall()
        assert repr(predicate) in str(exc.value)
        assert "\n" not in str(exc.value)
        # Nothing changed: the view is still there with all its rows.
        assert con.execute("SELECT count(*) FROM funnel").fetchall()[0][0] >= 1


def test_audit_queries_read_only_the_files_behind_the_views(landed_run, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("not for auditors\n")
    with connect_audit(landed_run.catalog) as con:
        # Every view still works: their Parquet directories are allowed...
        assert con.execute("SELECT count(*) FROM curriculum").fetchone()[0] > 0
        assert con.execute("SELECT count(*) FROM passages").fetchone()[0] > 0
        assert con.execute("SELECT count(*) FROM evidence_mismatches").fetchone() == (0,)
        # ...and nothing else on the machine is.
        with pytest.raises(duckdb.PermissionException):
            con.execute(f"SELECT * FROM read_text('{outside}')").fetchall()
        with pytest.raises(duckdb.Error):
            con.execute("SET enable_external_access = true")
