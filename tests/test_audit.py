"""Audits over the real landed run: evidence re-check, leakage, summaries, runs, the CLI."""

from __future__ import annotations

import json
import shutil
import sys
import unicodedata
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from cli.audit import audit
from pipeline.agents.rewards import contains, normalize
from pipeline.catalog.audit import AUDITS, AuditError, list_audits, run_audit, run_sql_file
from pipeline.catalog.readonly_sql import UnsafeSQLError, connect_audit
from pipeline.core.contracts import read_shard
from pipeline.core.io import write_parquet_atomic
from pipeline.store.store import Store

# ---- helpers: a private copy of the landed run with a freshly built catalog --------------


def rebuild_catalog(out: Path) -> Path:
    """Recreate the catalog of a copied output dir (passages now live under the copy)."""
    passages = sorted(out.glob("index/*/passages.parquet"))
    assert len(passages) == 1, f"expected one passages table under {out}/index: {passages}"
    return Store(out, out / "catalog.duckdb").refresh_catalog({"passages": passages})


def copy_landed(landed_run, dest: Path) -> Path:
    out = dest / "out"
    shutil.copytree(
        landed_run.out,
        out,
        ignore=shutil.ignore_patterns("catalog.*", "llm_cache", "*.tmp-*"),
    )
    rebuild_catalog(out)
    return out


def curriculum_shards(out: Path) -> list[Path]:
    return sorted(out.glob("shards/curriculum/**/[!.]*.parquet"))  # shards or compacted


def rewrite_record(out: Path, record_id: str, **changes) -> dict:
    """Change fields of one record in its shard on disk (same contract); return the original."""
    for path in curriculum_shards(out):
        tbl = read_shard(path, "curriculum")
        rows = tbl.to_pylist()
        for row in rows:
            if row["record_id"] == record_id:
                original = dict(row)
                row.update(changes)
                write_parquet_atomic(path, pa.Table.from_pylist(rows, schema=tbl.schema))
                return original
    raise AssertionError(f"record {record_id} not found under {out}")


def all_records(out: Path) -> list[dict]:
    return [r for p in curriculum_shards(out) for r in read_shard(p, "curriculum").to_pylist()]


def passages_text(out: Path) -> dict[str, str]:
    tbl = pq.read_table(next(out.glob("index/*/passages.parquet")), columns=["id", "text"])
    return dict(zip(tbl["id"].to_pylist(), tbl["text"].to_pylist(), strict=True))


@pytest.fixture(scope="module")
def clean(landed_run, tmp_path_factory) -> Path:
    """The landed run copied once, catalog rebuilt with this checkout's views.sql."""
    return copy_landed(landed_run, tmp_path_factory.mktemp("audit-clean"))


@pytest.fixture(scope="module")
def verbatim(clean) -> list[dict]:
    recs = [r for r in all_records(clean) if r["is_verbatim"]]
    if not recs:
        pytest.fail(
            "the landed run has no verbatim records: the evidence audit would pass vacuously"
        )
    return recs


# ---- evidence ---------------------------------------------------------------------------


def test_evidence_audit_passes_on_the_landed_run(clean, verbatim):
    res = run_audit(clean / "catalog.duckdb", "evidence")
    assert res.passed is True and res.exit_code == 0, res.message
    mismatches, checked = res.tables
    assert mismatches.rows == []
    assert checked.records() == [
        {
            "run_id": "landed-a",
            "verbatim_records": len(verbatim),
            "matching": len(verbatim),
            "mismatches": 0,
        }
    ]
    # The SQL slice means what Python's offsets mean: text[start:end] is the span.
    texts = passages_text(clean)
    for r in verbatim:
        text = texts[r["evidence_passage_id"]]
        assert text[r["evidence_char_start"] : r["evidence_char_end"]] == r["evidence"]


def test_evidence_audit_reports_exactly_the_corrupted_record(landed_run, verbatim, tmp_path):
    out = copy_landed(landed_run, tmp_path)
    victim = verbatim[-1]["record_id"]
    original = rewrite_record(out, victim, evidence=verbatim[-1]["evidence"][:-1] + "#")
    rebuild_catalog(out)
    catalog = out / "catalog.duckdb"

    res = run_audit(catalog, "evidence")
    assert res.passed is False and res.exit_code == 1
    assert victim in res.message
    mismatches, checked = res.tables
    assert mismatches.records() == [
        {
            "record_id": victim,
            "run_id": "landed-a",
            "passage_id": original["evidence_passage_id"],
            "char_start": original["evidence_char_start"],
            "char_end": original["evidence_char_end"],
            "problem": "span_differs",
            "span": original["evidence"][:-1] + "#",
            "recorded_slice": original["evidence"],
        }
    ]
    assert checked.column("mismatches") == [1]
    assert checked.column("matching") == [len(verbatim) - 1]
    # Same through the CLI: the record is named and the exit code is 1.
    cli = invoke("audit", "evidence", "--set", f"store.catalog={catalog}")
    assert cli.exit_code == 1, cli.output
    assert victim in cli.output and "FAIL evidence" in cli.output
    as_json = invoke("audit", "evidence", "-f", "json", "--set", f"store.catalog={catalog}")
    assert as_json.exit_code == 1
    doc = json.loads(as_json.stdout)
    assert [r["record_id"] for r in doc[0]["rows"]] == [victim]


def test_chain_audit_reports_exactly_the_corrupted_hop(landed_run, verbatim, tmp_path):
    """Every hop of a chain is re-checked: a record whose first hop's sentence no longer is
    its passage's slice fails the chain audit at that hop alone."""
    out = copy_landed(landed_run, tmp_path)
    record = verbatim[0]
    chain = record["evidence_chain"]
    bad = [{**h, "text": h["text"][:-1] + "#"} if h["hop"] == 1 else h for h in chain]
    rewrite_record(out, record["record_id"], evidence_chain=bad)
    rebuild_catalog(out)
    res = run_audit(out / "catalog.duckdb", "chain")
    assert res.passed is False and record["record_id"] in res.message
    mismatches, checked = res.tables
    assert [(r["record_id"], r["hop"], r["span"]) for r in mismatches.records()] == [
        (record["record_id"], 1, bad[0]["text"])
    ]
    assert mismatches.records()[0]["recorded_slice"] == chain[0]["text"]
    assert sum(checked.column("hops")) - sum(checked.column("matching")) == 1


def test_evidence_problems_are_told_apart(landed_run, verbatim, tmp_path):
    if len(verbatim) < 2:
        pytest.fail(f"the landed run has {len(verbatim)} verbatim records; this test needs two")
    out = copy_landed(landed_run, tmp_path)
    moved, lost = verbatim[0], verbatim[1]
    rewrite_record(out, moved["record_id"], evidence_char_end=10**6)
    rewrite_record(out, lost["record_id"], evidence_passage_id="no-such-passage")
    rebuild_catalog(out)
    res = run_audit(out / "catalog.duckdb", "evidence", run_id="landed-a")
    problems = {r["record_id"]: r["problem"] for r in res.tables[0].records()}
    assert problems == {
        moved["record_id"]: "offsets_out_of_range",
        lost["record_id"]: "passage_not_found",
    }
    assert res.exit_code == 1


# ---- leakage and the SQL norm() ----------------------------------------------------------

TRICKY = [
    "The Beatles' “White” Album",
    "A Tale of Two Cities",
    "a a a the an",
    "theatre anthem, then: a-b",
    "Ångström — the unit (Å)",
    "l'Hôpital's rule",
    "ΟΔΟΣ ΣΑΣ. ΑΣ",
    "İstanbul IS THE city",
    "x\u00a0y\u3000z\u2009w\x0bv\x1ct\u2028u",
    "tab\tand\nnewline  \r\n",
    "under_score the_end a_b",
    "éthe théa thé",
    "1879 vs 1,879.0 vs #1",
    "naïve café",
    "Straße STRASSE",
    "ǅemal Ǆ",
    "東京 the 東京",
    "",
    "   ",
    "!!!",
    None,
]


def norm_sql(con, texts: list[str | None]) -> list[str]:
    con.register("_texts", pa.table({"i": range(len(texts)), "s": pa.array(texts, pa.string())}))
    return [r[0] for r in con.execute("SELECT norm(s) FROM _texts ORDER BY i").fetchall()]


@pytest.fixture(scope="module")
def empty_catalog(tmp_path_factory) -> Path:
    return Store(tmp_path_factory.mktemp("audit-empty") / "out").refresh_catalog()


def test_sql_norm_equals_python_norm_on_tricky_strings(empty_catalog):
    with connect_audit(empty_catalog) as con:
        assert norm_sql(con, TRICKY) == [normalize(s) for s in TRICKY]


def test_sql_norm_equals_python_norm_for_every_character(empty_catalog):
    """Each assigned code point as punctuation, word character or space around articles."""
    chars = [
        chr(c)
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) not in ("Cn", "Cs")
    ]
    texts = [f"{c}The{c}a{c}Xan{c}the{c}İ{c}" for c in chars]
    with connect_audit(empty_catalog) as con:
        got = norm_sql(con, texts)
    bad = [
        (hex(ord(c)), g, normalize(t))
        for c, t, g in zip(chars, texts, got, strict=True)
        if g != normalize(t)
    ]
    assert bad == []


def test_answer_leaks_matches_python_contains(empty_catalog):
    pairs = [
        ("Who wrote The Origin of Species?", "the origin of species"),
        ("In which year, 1879 or 1880?", "1879"),
        ("What is 1879 plus one?", "1"),
        ("Which option is right? (D) Josiah Wedgwood", "D"),
        ("Who founded the city?", "The"),
        ("Who was Charles Darwin's father?", "Charles Darwin"),
        ("Who was Charles Darwin's father?", "Darwins"),
        ("What?", ""),
        (None, "x"),
    ]
    with connect_audit(empty_catalog) as con:
        got = [con.execute("SELECT answer_leaks(?, ?)", [q, a]).fetchall()[0][0] for q, a in pairs]
    assert got == [contains(q or "", a) for q, a in pairs]
    assert got.count(True) >= 3  # the pairs exercise both outcomes


def test_leakage_audit_on_the_landed_run_agrees_with_python(clean):
    res = run_audit(clean / "catalog.duckdb", "leakage")
    listed = set(res.tables[0].column("record_id"))
    expected = {r["record_id"] for r in all_records(clean) if contains(r["question"], r["answer"])}
    assert listed == expected
    # The generator already rejected these, so the audit passes.
    assert res.passed is True
    assert all(r["invalid_reason"] == "answer_in_question" for r in res.tables[0].records())


def test_leakage_audit_fails_on_a_valid_record_that_leaks(landed_run, tmp_path):
    out = copy_landed(landed_run, tmp_path)
    victim = next(r for r in all_records(out) if r["is_valid"] and normalize(r["answer"]))
    leaky = f"{victim['question']} (hint: THE {victim['answer'].upper()}!)"
    rewrite_record(out, victim["record_id"], question=leaky)
    rebuild_catalog(out)
    res = run_audit(out / "catalog.duckdb", "leakage")
    assert res.passed is False and res.exit_code == 1
    valid_listed = [r["record_id"] for r in res.tables[0].records() if r["is_valid"]]
    assert valid_listed == [victim["record_id"]]


# ---- summaries, runs, every audit --------------------------------------------------------


def test_summaries_agree_with_the_shards(clean):
    recs = all_records(clean)
    with connect_audit(clean / "catalog.duckdb") as con:
        for view, key in [
            ("cluster_summary", "cluster_id"),
            ("task_summary", "task_type"),
            ("hop_summary", "hop_count"),
        ]:
            cur = con.execute(
                f"SELECT {key}, records, valid, verbatim, mean_v, solver_accuracy FROM {view}"
            )
            rows = {r[0]: r[1:] for r in cur.fetchall()}
            assert set(rows) == {r[key] for r in recs}, view
            for value, (n, valid, verb, mean_v, acc) in rows.items():
                group = [r for r in recs if r[key] == value]
                assert n == len(group)
                assert valid == sum(r["is_valid"] for r in group)
                assert verb == sum(r["is_valid"] and r["is_verbatim"] for r in group)
                vs = [r["verifier_v"] for r in group if r["verifier_v"] is not None]
                assert mean_v == (pytest.approx(sum(vs) / len(vs)) if vs else None)
                k = sum(r["solver_k"] or 0 for r in group)
                n_sol = sum(r["solver_n"] or 0 for r in group)
                assert acc == (pytest.approx(k / n_sol) if n_sol else None)


def test_runs_audit_shows_the_run_and_its_config(clean, landed_run):
    run = Store(clean).read_run(landed_run.run_id)
    res = run_audit(clean / "catalog.duckdb", "runs", run_id=landed_run.run_id)
    assert res.passed is True
    [row] = res.tables[0].records()
    assert row["run_id"] == landed_run.run_id
    assert row["config_hash"] == run["config_hash"]
    assert row["status"] == run["status"] == "completed"
    assert row["records"] == len(all_records(clean))
    with connect_audit(clean / "catalog.duckdb") as con:
        yaml_ = con.execute("SELECT config_yaml FROM run_config(?)", [landed_run.run_id]).fetchall()
        recs = con.execute("SELECT count(*) FROM record(?)", ["no-such-record"]).fetchall()
    assert yaml_ == [(run["config_yaml"],)]
    assert "num_sources: 6" in yaml_[0][0]
    assert recs == [(0,)]


def test_runs_audit_fails_when_records_carry_another_config(landed_run, tmp_path):
    out = copy_landed(landed_run, tmp_path)
    victim = all_records(out)[0]["record_id"]
    rewrite_record(out, victim, config_hash="0000000000000000")
    rebuild_catalog(out)
    res = run_audit(out / "catalog.duckdb", "runs")
    assert res.exit_code == 1
    assert res.tables[0].column("foreign_config_records") == [1]


@pytest.mark.parametrize("name", list(AUDITS))
def test_every_audit_runs_on_the_landed_and_on_an_empty_catalog(name, clean, empty_catalog):
    res = run_audit(clean / "catalog.duckdb", name, run_id="landed-a")
    assert res.exit_code == 0, res.message
    assert all(t.columns for t in res.tables)
    if name not in ("rejects", "leakage", "evidence", "chain"):  # these list problems only
        assert all(t.rows for t in res.tables), name
    empty = run_audit(empty_catalog, name)
    assert empty.exit_code == 0
    assert all(t.rows == [] for t in empty.tables)


def test_funnel_audit_matches_the_funnel_view(clean):
    res = run_audit(clean / "catalog.duckdb", "funnel")
    [row] = res.tables[0].records()
    recs = all_records(clean)
    assert row["generated"] == len(recs)
    assert row["valid"] == sum(r["is_valid"] for r in recs)
    assert row["verbatim"] == sum(r["is_valid"] and r["is_verbatim"] for r in recs)
    assert row["valid_rate"] == round(row["valid"] / row["generated"], 3)


def test_unknown_audit_or_run_is_an_error(clean):
    with pytest.raises(AuditError, match="unknown audit 'nope'; known: evidence"):
        run_audit(clean / "catalog.duckdb", "nope")
    with pytest.raises(AuditError, match=r"no run 'other' .*runs: landed-a"):
        run_audit(clean / "catalog.duckdb", "evidence", run_id="other")


def test_a_catalog_without_the_audit_views_gets_a_refresh_hint(tmp_path):
    import duckdb

    cat = tmp_path / "old.duckdb"
    with duckdb.connect(str(cat)) as con:
        con.execute("CREATE VIEW runs AS SELECT 'r' AS run_id")
        con.execute("CREATE VIEW curriculum AS SELECT 'r' AS run_id")
    with pytest.raises(AuditError, match="built before this audit's views existed"):
        run_audit(cat, "evidence")


# ---- ad-hoc SQL files ---------------------------------------------------------------------


def test_sql_file_runs_every_query(clean, tmp_path):
    f = tmp_path / "checks.sql"
    f.write_text(
        "-- verbatim records per run\n"
        "SELECT run_id, count(*) AS n FROM evidence_check GROUP BY run_id;\n"
        "SELECT count(*) AS leaks FROM answer_leakage WHERE is_valid;\n"
    )
    tables = run_sql_file(clean / "catalog.duckdb", f)
    assert [t.columns for t in tables] == [["run_id", "n"], ["leaks"]]
    assert tables[0].rows[0][0] == "landed-a" and tables[0].rows[0][1] >= 1
    assert tables[1].rows == [(0,)]


def test_sql_file_that_writes_runs_nothing(clean, tmp_path):
    target = tmp_path / "dump.parquet"
    f = tmp_path / "sneaky.sql"
    f.write_text(f"SELECT 1;\nCOPY curriculum TO '{target}';\n")
    with pytest.raises(UnsafeSQLError, match=r"sneaky\.sql: statement 2 is COPY"):
        run_sql_file(clean / "catalog.duckdb", f)
    assert not target.exists()


# ---- the command line --------------------------------------------------------------------

_app = typer.Typer()
_app.command("audit")(audit)


@_app.callback()
def _root() -> None:
    """Stand-in for the `curriculum` app."""


def invoke(*args: str):
    return CliRunner().invoke(_app, list(args))


def test_cli_lists_the_audits():
    for args in (["audit", "--list"], ["audit", "list"]):
        res = invoke(*args)
        assert res.exit_code == 0
        names = [line.split()[0] for line in res.stdout.splitlines() if line.strip()]
        assert names == [n for n, _ in list_audits()]
    assert {"evidence", "leakage", "funnel", "histogram", "clusters", "tasks", "hops"} <= set(
        AUDITS
    )
    assert {"wcr", "runs"} <= set(AUDITS)


def test_cli_named_audit_and_formats(clean):
    cat = f"store.catalog={clean / 'catalog.duckdb'}"
    res = invoke("audit", "evidence", "--set", cat)
    assert res.exit_code == 0, res.output
    assert "PASS evidence" in res.stdout
    csv_ = invoke("audit", "hops", "--run-id", "landed-a", "--format", "csv", "--set", cat)
    assert csv_.exit_code == 0
    lines = csv_.stdout.splitlines()
    assert lines[0].startswith("run_id,hop_count,records,")
    assert all(line.startswith("landed-a,") for line in lines[1:]) and len(lines) > 1
    bad_run = invoke("audit", "funnel", "--run-id", "nope", "--set", cat)
    assert bad_run.exit_code == 2
    assert "error: no run 'nope'" in bad_run.output


def test_cli_sql_file_and_refusal(clean, tmp_path):
    cat = f"store.catalog={clean / 'catalog.duckdb'}"
    good = tmp_path / "good.sql"
    good.write_text("SELECT count(*) AS n FROM curriculum")
    res = invoke("audit", "--sql", str(good), "-f", "json", "--set", cat)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["rows"] == [{"n": len(all_records(clean))}]

    target = tmp_path / "x.csv"
    bad = tmp_path / "bad.sql"
    bad.write_text(f"SELECT 1 AS ran;\nEXPLAIN ANALYZE COPY (SELECT 1) TO '{target}'")
    res = invoke("audit", "--sql", str(bad), "--set", cat)
    assert res.exit_code == 2
    first = res.output.splitlines()[0]
    assert first.startswith(f"error: {bad}: statement 2 is EXPLAIN of a statement")
    assert "ran" not in res.stdout
    assert not target.exists()


def test_cli_usage_errors(tmp_path):
    assert invoke("audit").exit_code == 2
    assert invoke("audit", "nope", "--set", f"store.catalog={tmp_path}/c.duckdb").exit_code == 2
    missing = invoke("audit", "evidence", "--set", f"store.catalog={tmp_path}/c.duckdb")
    assert missing.exit_code == 2
    assert "no catalog" in missing.output and "hint:" in missing.output
    both = invoke("audit", "evidence", "--sql", "x.sql")
    assert both.exit_code == 2 and "not both" in both.output
