"""A hint names the fix for the error it follows, not for another error the
same command can raise. Each case runs the real CLI on input generated here."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cli.audit import audit
from pipeline.store.store import Store
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent


cli = functools.partial(run_cli, timeout=300)


def error_and_hint(stderr: str) -> tuple[str, str | None]:
    lines = [ln for ln in stderr.splitlines() if ln.startswith(("error:", "hint:"))]
    errors = [ln for ln in lines if ln.startswith("error:")]
    hints = [ln for ln in lines if ln.startswith("hint:")]
    assert len(errors) == 1 and len(hints) <= 1, stderr
    return errors[0], (hints[0] if hints else None)


def test_missing_dump_hint_does_not_suggest_the_error_budget(tmp_path):
    missing = tmp_path / "nowhere.json"
    res = cli(
        "kg", "ingest", "--set", f"kg.dump_path={missing}", "--set", f"store.out_dir={tmp_path}"
    )
    assert res.returncode == 2
    error, hint = error_and_hint(res.stderr)
    assert str(missing) in error
    assert hint and "error_budget" not in hint and "kg.dump_path" in hint


def test_dump_over_its_error_budget_hints_at_the_budget(tmp_path):
    dump = tmp_path / "broken.json"
    dump.write_text("[\n" + '{"not": "an entity"},\n' * 40 + "]\n")
    res = cli("kg", "ingest", "--set", f"kg.dump_path={dump}", "--set", f"store.out_dir={tmp_path}")
    assert res.returncode == 2
    error, hint = error_and_hint(res.stderr)
    assert "over the error budget" in error and str(dump) in error
    assert hint and "kg.error_budget" in hint


def test_corpus_bad_line_in_raise_mode_hints_at_reject_mode(tmp_path):
    from pipeline.retrieval.corpus import CorpusError, load_corpus

    src = tmp_path / "c.jsonl"
    src.write_text('{"id": "1", "title": "T", "text": "x"}\nnot json\n')
    with pytest.raises(CorpusError) as err:
        load_corpus(src, tmp_path / "p.parquet", on_error="raise")
    assert "corpus.on_error=reject" in err.value.hint
    with pytest.raises(CorpusError) as err:
        load_corpus(src, tmp_path / "q.parquet", on_error="reject", error_budget=0.0)
    assert "corpus.error_budget" in err.value.hint


# ---- audits: only an unknown audit name hints at --list ----------------------------------

_app = typer.Typer()
_app.command("audit")(audit)


@_app.callback()
def _root() -> None:
    """Stand-in for the `curriculum` app."""


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> str:
    """An empty store's catalog, built once: the audits only read it."""
    out = tmp_path_factory.mktemp("hints") / "out"
    return f"store.catalog={Store(out, out / 'catalog.duckdb').refresh_catalog()}"


def audit_cli(*args: str) -> tuple[int, str, str | None]:
    res = CliRunner().invoke(_app, ["audit", *args])
    return (res.exit_code, *error_and_hint(res.stderr))


def test_unknown_audit_hints_at_the_list(catalog):
    code, error, hint = audit_cli("nope", "--set", catalog)
    assert code == 2 and "unknown audit 'nope'" in error
    assert hint and "curriculum audit --list" in hint


def test_failing_audit_query_prints_only_the_sql_error(catalog, tmp_path):
    f = tmp_path / "q.sql"
    f.write_text("SELECT 1;\nSELECT no_such_column FROM curriculum;\n")
    code, error, hint = audit_cli("--sql", str(f), "--set", catalog)
    assert code == 2 and f"{f}: statement 2: Binder Error" in error
    assert hint is None


def test_sql_that_does_not_parse_gets_no_read_only_hint(catalog, tmp_path):
    f = tmp_path / "typo.sql"
    f.write_text("SELEC 1;\n")
    code, error, hint = audit_cli("--sql", str(f), "--set", catalog)
    assert code == 2 and "does not parse" in error and hint is None
    f.write_text("DROP VIEW curriculum;\n")
    code, error, hint = audit_cli("--sql", str(f), "--set", catalog)
    assert code == 2 and "statement 1 is DROP" in error
    assert hint and "SELECT / EXPLAIN" in hint


def test_unknown_run_does_not_hint_at_the_audit_list(catalog):
    code, error, hint = audit_cli("funnel", "--run-id", "nope", "--set", catalog)
    assert code == 2 and "no run 'nope'" in error
    assert hint is None or "--list" not in hint
