"""Hostile input round two: each class on inputs the test generates (Hypothesis),
asserting the one-line error (exit 2) or the exact output, and that nothing is written
outside the store.

1. identifiers that become paths   2. values printed as markup   4. profiles as untrusted
input   5. exit-1 paths for bad input. (3: tests/test_sql_limits.py and below; 6: the servers'
tests; 7: below.)
"""

from __future__ import annotations

import datetime as dt
import os
import string
from pathlib import Path

import duckdb
import pytest
import typer
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cli.main import app
from pipeline.core.display import display_text, escape_text, undisplay
from pipeline.core.identifiers import (
    MAX_IDENTIFIER_LENGTH,
    BadIdentifierError,
    check_identifier,
    is_identifier,
)
from pipeline.core.io import PathEscapeError, atomic_write_bytes, path_within
from pipeline.store.store import Store

FAST = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
NAME_CHARS = string.ascii_letters + string.digits + "._-"


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def one_line_error(res, *names: str) -> str:
    """Exit 2, exactly one `error:` line (naming `names`), no traceback."""
    errors = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert res.exit_code == 2, res.output[-2000:]
    assert len(errors) == 1, res.output[-2000:]
    assert all(n in errors[0] for n in names), errors[0]
    assert "Traceback" not in res.output
    assert isinstance(res.exception, SystemExit | type(None)), res.exception
    return errors[0]


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


# ---- 1. identifiers that become paths --------------------------------------------------------

hostile_ids = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=NAME_CHARS + "/\\\x00\n ~$", max_size=40),
    st.sampled_from(["..", ".", "../../../escaped", "/tmp/abs", "a/../../b", "~root", "x" * 129]),
    st.builds(lambda a, b: f"{a}/{b}", st.text(NAME_CHARS, max_size=8), st.text(max_size=8)),
)


@given(hostile_ids)
@example("../../../escaped")
@example("a..b")
@example("x" * MAX_IDENTIFIER_LENGTH)
@FAST
def test_identifier_rule_never_lets_a_name_leave_its_folder(value):
    root = Path("/store/root")
    if is_identifier(value):
        assert check_identifier(value) == value
        assert 1 <= len(value) <= MAX_IDENTIFIER_LENGTH
        assert "/" not in value and "\\" not in value and value not in (".", "..")
        assert ".." not in value and not value.startswith((".", "-", "_"))
        assert value.isascii() and value.isprintable()
        # the one component it names stays inside the store, directly under runs/
        assert path_within(root, "runs", value).parent == root / "runs"
    else:
        with pytest.raises(BadIdentifierError) as err:
            check_identifier(value, "run id")
        msg = str(err.value)
        assert "\n" not in msg and "\r" not in msg and msg.isprintable() and msg.isascii()
        assert msg.startswith("run id ") and len(msg) < 300


@given(st.text(NAME_CHARS, min_size=1, max_size=MAX_IDENTIFIER_LENGTH))
@FAST
def test_identifier_rule_accepts_the_names_it_describes(value):
    assume(value[0].isalnum() and ".." not in value)
    assert check_identifier(value) == value


@given(st.lists(st.sampled_from(["..", ".", "a", "/", "b", "/tmp"]), min_size=1, max_size=6))
@FAST
def test_io_layer_refuses_writes_that_resolve_outside_the_store(tmp_path, parts):
    root = tmp_path / "store"
    root.mkdir(exist_ok=True)
    before = tree(tmp_path)
    target = root.joinpath(*parts) / "f.txt"
    inside = os.path.normpath(target).startswith(str(root) + os.sep)
    if inside:
        atomic_write_bytes(target, b"x", within=root)
        assert target.exists()
    else:
        with pytest.raises(PathEscapeError):
            atomic_write_bytes(target, b"x", within=root)
        assert tree(tmp_path) == before  # nothing written anywhere


@given(hostile_ids.filter(lambda v: not is_identifier(v)))
@FAST
def test_store_refuses_run_ids_that_are_not_names(tmp_path, run_id):
    store = Store(tmp_path / "out")
    before = tree(tmp_path)
    with pytest.raises(BadIdentifierError):
        store.run_dir(run_id)
    with pytest.raises(BadIdentifierError):
        store.shard_relpath("curriculum", run_id, dt.date(2026, 11, 25), "00000")
    with pytest.raises(BadIdentifierError):
        store.write_run({"run_id": run_id})
    assert tree(tmp_path) == before


@given(hostile_ids.filter(lambda v: not is_identifier(v) and v and not v.startswith("-")))
@settings(max_examples=25, deadline=None)
def test_cli_run_ids_are_checked_before_anything_is_written(run_id):
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        for args in (
            ["nightly", "--run-id", run_id],
            ["report", "--run-id", run_id],
            ["audit", "funnel", "--run-id", run_id],
            ["export", str(Path(tmp) / "exp"), "--run-id", run_id],
        ):
            res = invoke(*args, "--set", f"store.out_dir={out}")
            assert "is not a valid name" in one_line_error(res, "run id")
        assert tree(Path(tmp)) == set()  # not even the store folder


def test_nightly_flow_parameter_is_checked_before_anything_is_loaded(tmp_path):
    from flows.land import land
    from flows.nightly import nightly

    out = tmp_path / "out"
    for flow in (nightly, land):
        with pytest.raises(BadIdentifierError, match=r"run id '\.\./\.\./\.\./escaped'"):
            flow.fn(overrides=[f"store.out_dir={out}"], run_id="../../../escaped")
    assert tree(tmp_path) == set()


def test_profile_name_follows_the_identifier_rule():
    res = invoke("config", "show", "--set", "profile=../../x")
    one_line_error(res, "profile")


# ---- 2. values printed as markup --------------------------------------------------------------

hostile_text = st.one_of(
    st.text(),
    st.text(alphabet="[]/=\\\x1b\x9b\x07\r\n\t\u202e\u2028 abc:;", max_size=40),
    st.sampled_from(
        [
            "[/x]",
            "[bold red]RED[/bold red] [link=file:///etc/passwd]click[/link]",
            "\x1b[31mred\x1b[0m",
            "\x1b]8;;file:///etc/passwd\x1b\\click\x1b]8;;\x1b\\",
            ":smile: [red]",
        ]
    ),
)


@given(hostile_text)
@FAST
def test_display_text_is_one_plain_line_and_reversible(value):
    shown = display_text(value)
    assert undisplay(shown) == value  # exactly what is stored, nothing lost
    assert escape_text(shown, backslash=False) == shown  # nothing left to escape
    assert "\n" not in shown and "\x1b" not in shown and "\r" not in shown
    assert all(ch.isprintable() or ch == " " or ch in "\u200d\u00ad" or ord(ch) > 0x9F
               for ch in shown)  # fmt: skip
    if value.isascii() and value.isprintable() and "\\" not in value:
        assert shown == value  # plain text is shown as it is


def _catalog(tmp: Path, values: list[str]) -> Path:
    path = tmp / "catalog.duckdb"
    path.unlink(missing_ok=True)
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t (i INTEGER, v VARCHAR)")
        con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(values)))
    return path


def _printed(values: list[str], fmt: str) -> str:
    import contextlib
    import io

    from cli.sql_output import Format, print_tables
    from pipeline.catalog.bounded_sql import Table

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_tables([Table("t", ["v"], [(v,) for v in values])], Format(fmt))
    return buf.getvalue()


def _check_printed(values: list[str], fmt: str, out: str) -> None:
    import csv
    import io
    import json

    assert "\x1b" not in out and "\x9b" not in out and "\r" not in out
    if fmt == "json":
        assert [r["v"] for r in json.loads(out)["rows"]] == values
    elif fmt == "csv":
        rows = list(csv.reader(io.StringIO(out)))
        assert [undisplay(r[0]) for r in rows[1:]] == values
        assert out.count("\n") == len(values) + 1  # one line per value
    else:
        for v in values:
            if len(display_text(v)) < 60:  # a longer one is folded over lines
                assert display_text(v) in out


@given(st.lists(hostile_text, min_size=1, max_size=5), st.sampled_from(["table", "csv", "json"]))
@settings(max_examples=150, deadline=None)
def test_query_results_print_exactly_what_is_stored(values, fmt):
    _check_printed(values, fmt, _printed(values, fmt))


@given(st.lists(hostile_text.filter(lambda s: "\x00" not in s), min_size=1, max_size=5))
@settings(max_examples=4, deadline=None)
def test_sql_command_prints_exactly_what_is_stored(values):
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cat = _catalog(Path(tmp), values)
        for fmt in ("table", "csv", "json"):
            sql = "SELECT v FROM t ORDER BY i"
            res = invoke("sql", sql, "--set", f"store.catalog={cat}", "--format", fmt)
            assert res.exit_code == 0, res.output
            _check_printed(values, fmt, res.stdout)


def test_audit_sql_shows_markup_literally_and_keeps_the_verdict(tmp_path):
    cat = _catalog(tmp_path, ["[/x]", "[bold red]RED[/bold red] [link=file:///etc/passwd]x[/link]"])
    sql = tmp_path / "q.sql"
    sql.write_text("SELECT v FROM t ORDER BY i;")
    res = invoke("audit", "--sql", str(sql), "--set", f"store.catalog={cat}")
    assert res.exit_code == 0, res.output
    assert "[/x]" in res.stdout
    assert "[bold red]RED[/bold red] [link=file:///etc/passwd]x[/link]" in res.stdout


# ---- 4. profiles are untrusted input ----------------------------------------------------------


def alias_bomb(width: int, depth: int) -> str:
    lines = ["a0: &a0 [" + ", ".join(['"lol"'] * width) + "]"]
    for i in range(1, depth + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + f"\nsql: {{threads: *a{depth}}}\n"


@given(st.integers(5, 12), st.integers(6, 10))
@settings(max_examples=15, deadline=None)
def test_nested_alias_profile_is_one_line_and_exit_2(width, depth):
    import tempfile

    assume(width**depth > 200_000)
    with tempfile.TemporaryDirectory() as tmp:
        prof = Path(tmp) / "bomb.yaml"
        prof.write_text(alias_bomb(width, depth))
        res = invoke("config", "show", "--profile", str(prof))
        one_line_error(res, str(prof), "expands to more than")


@given(st.binary(min_size=1, max_size=300))
@FAST
def test_binary_profile_is_one_line_and_exit_2(tmp_path, raw):
    try:
        raw.decode("utf-8")
        assume(False)
    except UnicodeDecodeError:
        pass
    prof = tmp_path / "bin.yaml"
    prof.write_bytes(raw)
    res = invoke("config", "show", "--profile", str(prof))
    one_line_error(res, str(prof), "not UTF-8 text")


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: p.write_text("x: " + "[" * 500 + "]" * 500), "nested deeper"),
        (lambda p: p.write_text("a: [1, 2\nb: {"), "not valid YAML"),
        (lambda p: p.write_text("sql: {threads: 1}\x00"), "NUL"),
        (
            lambda p: p.write_text("\n".join(["a: &a [1]", "b: &b [*a, *a]", "c: *b"])),
            "Extra inputs",
        ),
    ],
)
def test_bad_profile_files_are_one_line_and_exit_2(tmp_path, make, message):
    prof = tmp_path / "p.yaml"
    make(prof)
    one_line_error(invoke("config", "show", "--profile", str(prof)), message)


def test_alias_bomb_in_an_override_is_refused():
    bomb = "[" + ", ".join(["&a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"] + ["*a"] * 20) + "]"
    one_line_error(invoke("config", "show", "--set", f"sql.threads={bomb}"), "sql.threads")


# ---- 5. exit-1 paths for bad input ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["text", "directory", "binary"])
def test_catalog_that_is_not_a_catalog_is_one_line_for_every_command(tmp_path, kind):
    cat = tmp_path / "catalog.duckdb"
    if kind == "directory":
        cat.mkdir()
    else:
        cat.write_bytes(b"hello\n" if kind == "text" else os.urandom(4096))
    before = cat.read_bytes() if cat.is_file() else None
    sets = ["--set", f"store.catalog={cat}", "--set", f"store.out_dir={tmp_path / 'out'}"]
    sql = tmp_path / "q.sql"
    sql.write_text("SELECT 1;")
    for args in (
        ["sql", "SELECT 1"],
        ["audit", "funnel"],
        ["audit", "--sql", str(sql)],
        ["report"],
        ["export", str(tmp_path / "exp")],
        ["nightly", "--run-id", "r1"],
    ):
        one_line_error(invoke(*args, *sets), "store.catalog", str(cat))
    if before is not None:
        assert cat.read_bytes() == before  # never replaced
    assert not (tmp_path / "exp").exists()


@given(st.sampled_from(["/nonexistent/model", "./nope", "~/nope/x", "a/b/c", "m.gguf", "a b"]))
@settings(max_examples=10, deadline=None)
def test_llm_model_naming_a_missing_path_is_one_line(ref):
    from pipeline.core.model_refs import ModelNotFoundError, resolve_llm

    with pytest.raises(ModelNotFoundError, match=r"llm\.model"):
        resolve_llm(ref, "/nonexistent-cache")
    res = invoke("nightly", "--set", f"llm.model={ref}", "--set", "store.out_dir=/nonexistent/o")
    one_line_error(res, "llm.model", "no such file or directory")


def test_hub_ids_and_registry_refs_pass_the_path_check():
    from pipeline.core.model_refs import check_model_ref

    for ref in ("Qwen/Qwen2.5-3B-Instruct", "intfloat/e5-base-v2", "gpt2", "registry:x-y"):
        check_model_ref(ref, "llm.model")


def test_directory_as_dump_path_is_one_line(tmp_path):
    from pipeline.core.config import load_config
    from pipeline.kg.dump import DumpError
    from pipeline.kg.extract import KGInputs, ingest_dir

    cfg = load_config(None, [f"kg.dump_path={tmp_path}", f"store.out_dir={tmp_path / 'o'}"])
    with pytest.raises(DumpError, match=r"is a directory; kg\.dump_path must"):
        ingest_dir(cfg, KGInputs.from_config(cfg).dump, tmp_path / "o")
    out = f"store.out_dir={tmp_path / 'o'}"
    res = invoke("kg", "ingest", "--set", f"kg.dump_path={tmp_path}", "--set", out)
    one_line_error(res, str(tmp_path), "is a directory")


def test_typer_is_the_cli():  # the in-process runner drives the real `curriculum` app
    assert isinstance(app, typer.Typer)


# ---- 3. limits that cannot be bypassed or configured away -------------------------------------


def test_memory_limit_holds_for_allocations_duckdb_does_not_count(tmp_path):
    cat = _catalog(tmp_path, ["x"])
    sets = ["--set", f"store.catalog={cat}", "--set", "sql.memory_limit=500MB"]
    bomb = "SELECT length(repeat('a', 2000000000))"
    one_line_error(invoke("sql", bomb, *sets), "sql.memory_limit", "500MB")
    q = tmp_path / "bomb.sql"
    q.write_text(bomb + ";")
    one_line_error(invoke("audit", "--sql", str(q), *sets), "sql.memory_limit", "500MB")


def test_export_where_runs_under_the_sql_limits(tmp_path):
    from pipeline.catalog.export import ExportError, select_records
    from pipeline.core.config import SQLConfig

    cat = tmp_path / "catalog.duckdb"
    with duckdb.connect(str(cat)) as con:
        con.execute("CREATE TABLE curriculum AS SELECT 'r1' AS record_id, 'a' AS run_id")
    where = "length(repeat('a', 2000000000)) > 0"
    with pytest.raises(ExportError, match=r"sql\.memory_limit"):
        select_records(cat, where, limits=SQLConfig(memory_limit="500MB"), on_batch=print)


@given(
    st.one_of(
        st.builds(lambda n: f"sql.threads={n}", st.integers(8 * (os.cpu_count() or 1) + 1)),
        st.sampled_from(["inf", "-inf", "nan", "1e300", "0", "-1"]).map(
            lambda v: f"sql.timeout_s={v}"
        ),
        st.builds(lambda n: f"sql.max_rows={n}", st.integers(1_000_001)),
        st.builds(lambda n: f"llm.serve.max_n={n}", st.integers(1025)),
        st.builds(lambda n: f"retrieval.max_topk={n}", st.integers(10_001)),
        st.sampled_from(["inf", "nan"]).map(lambda v: f"llm.serve.request_timeout_s={v}"),
    )
)
@settings(max_examples=40, deadline=None)
def test_limits_cannot_be_configured_away(override):
    key = override.split("=")[0]
    res = invoke("sql", "SELECT 1", "--set", override, "--set", "store.catalog=/nonexistent")
    one_line_error(res, key, "invalid configuration")


def test_limit_option_is_bounded():
    res = invoke("sql", "SELECT 1", "--limit", "1000000000000")
    assert res.exit_code == 2 and "--limit" in res.output


# ---- 7. counts that agree with the rows stored ------------------------------------------------

SAMPLE_DUMP = Path(__file__).resolve().parent.parent / "data" / "sample" / "wikidata_sample.json"


@given(st.lists(st.integers(1, 200), min_size=1, max_size=4), st.integers(1, 3))
@settings(max_examples=4, deadline=None)
def test_kg_ingest_summary_counts_every_reject_row(picks, chunk_lines_k):
    import re
    import tempfile

    import pyarrow.parquet as pq

    lines = SAMPLE_DUMP.read_text().splitlines()
    entity_lines = [ln for ln in lines if ln.startswith("{")]
    dups = [entity_lines[i % len(entity_lines)].rstrip(",") for i in picks]
    body = [ln.rstrip(",") for ln in entity_lines] + dups + ["this is not json"]
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "dump.json"
        dump.write_text("[\n" + ",\n".join(body) + "\n]\n")
        out = Path(tmp) / "out"
        res = invoke(
            "kg", "ingest",
            "--set", f"kg.dump_path={dump}", "--set", f"store.out_dir={out}",
            "--set", f"kg.chunk_lines={50 * chunk_lines_k}", "--set", "kg.error_budget=0.5",
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        said = int(re.search(r"(\d+) rejects \(", res.output).group(1))
        parts = list(out.glob("kg/*/rejects/part-*.parquet"))
        stored = sum(pq.read_metadata(p).num_rows for p in parts)
        assert said == stored, res.output
        assert f"{len(set(picks))} duplicate entit" in res.output or len(set(picks)) != len(picks)


@given(st.lists(st.text(max_size=20), min_size=1, max_size=8))
@FAST
def test_nul_characters_in_passages_are_removed_and_counted(tmp_path, texts):
    import json
    from collections import Counter

    from pipeline.retrieval.corpus import iter_corpus

    corpus = tmp_path / "c.jsonl"
    rows = [{"id": str(i), "title": f"T{i}", "text": f"x{t}"} for i, t in enumerate(texts)]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    counts: Counter = Counter()
    out = list(iter_corpus(corpus, "plain", counts))
    passages = [p for p in out if hasattr(p, "text")]
    assert all("\x00" not in p.text and "\x00" not in p.title for p in passages)
    with_nul = sum("\x00" in t for t in texts)
    assert counts["NUL characters removed"] == with_nul
    assert len(out) == len(texts)  # every line is a passage or a counted reject


def test_export_where_is_still_one_expression_on_the_bounded_path(tmp_path):
    from pipeline.catalog.export import ExportError, select_records

    cat = tmp_path / "catalog.duckdb"
    with duckdb.connect(str(cat)) as con:
        con.execute("CREATE TABLE curriculum AS SELECT 'r1' AS record_id, 'a' AS run_id")
    for where in ("true) UNION SELECT 1 --", "1; COPY curriculum TO 'x.csv'", "no_such_col"):
        with pytest.raises(ExportError) as err:
            select_records(cat, where, on_batch=print)
        assert "\n" not in str(err.value) and "--where" in (err.value.hint or "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog.duckdb"]


# ---- the README's exit-code promise, for every command it lists -------------------------------

COMMANDS = [
    ["nightly"], ["index", "build"], ["index", "search", "x"], ["index", "serve"],
    ["kg", "ingest"], ["kg", "extract"], ["cluster"], ["sql", "SELECT 1"], ["audit", "funnel"],
    ["report"], ["export", "/nonexistent/exp"], ["config", "show"], ["selector", "show"],
    ["quality", "near-duplicates"], ["llm", "serve"], ["runs", "prune", "--keep-days", "1"],
]  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_every_command_answers_a_bad_profile_with_one_line_and_exit_2(tmp_path, command):
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00 not yaml")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb(9, 9))
    for bad in (
        ["--profile", str(binary)],
        ["--profile", str(tmp_path)],
        ["--profile", str(bomb)],
        ["--set", "sql.threads=100000"],
        ["--set", "llm.serve.request_timeout_s=inf"],
    ):
        one_line_error(invoke(*command, *bad))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin.yaml", "bomb.yaml"]
