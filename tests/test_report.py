"""Run report: Markdown + PNG plots from the catalog of a real landed run, an empty run, the
`curriculum report` command and the Prefect artifacts the report task publishes."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import numpy as np
import orjson
import pytest
import typer
from typer.testing import CliRunner

from pipeline.catalog.report import PLOT_NAMES, RunReport, write_run_report
from pipeline.core.config import load_config
from pipeline.store.store import Store
from schemas.tables import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parent.parent
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FUNNEL_ROWS = {
    "generated": "generated",
    "posed": "posed (answer and evidence found)",
    "valid": "valid",
    "verbatim": "valid + verbatim",
    "above_v_threshold": "V above the controls' threshold",
    "not_contaminated": "not contaminated",
    "not_shortcut": "shortcut gate passed",
    "unique_answer": "uniqueness gate passed",
    "connected": "every hop matters",
    "needs_search": "one search is not enough",
    "accepted": "accepted (no duplicate, within the single-hop cap)",
}
NOT_POSED = ("no_supporting_passage", "no_answer_span", "many_valued_relation", "duplicate_target")


def expected_funnel(con, run_id: str) -> dict[str, int]:
    """The funnel recomputed in Python from the raw columns: the nearest-rank quantile of the
    run's shuffled/off-topic control V under the run's method, then each stage in order, then
    one record per normalised question (highest V, then smallest id)."""
    import math

    from pipeline.agents.rewards import normalize

    rows = con.execute(
        "SELECT record_id, question, is_valid, invalid_reason, is_verbatim, verifier_v, "
        "verifier_method, v_threshold_quantile, shortcut_verdict, uniqueness_verdict, "
        "gate_verdicts FROM curriculum WHERE run_id = ?", [run_id],
    ).fetchall()  # fmt: skip
    cols = ("id", "q", "valid", "reason", "verbatim", "v", "method", "quantile", "sc", "un", "g")
    recs = [dict(zip(cols, r, strict=True)) for r in rows]
    method = next((r["method"] for r in recs if r["method"]), None)
    ctl = sorted(
        v for (v,) in con.execute(
            "SELECT v FROM control_scores WHERE run_id = ? AND method = ? "
            "AND control IN ('shuffled', 'off_topic')", [run_id, method],
        ).fetchall()
    )  # fmt: skip
    q = recs[0]["quantile"] if recs else 0.0
    bar = ctl[max(1, math.ceil(q * len(ctl))) - 1] if ctl else 0.0
    stages = [
        ("posed", lambda r: r["reason"] not in NOT_POSED),
        ("valid", lambda r: r["valid"]),
        ("verbatim", lambda r: r["verbatim"]),
        ("above_v_threshold", lambda r: r["v"] is not None and r["v"] > bar),
        ("not_contaminated", lambda r: True),  # no benchmark checked in these runs
        ("not_shortcut", lambda r: r["sc"] not in ("fail", "undetermined")),
        ("unique_answer", lambda r: r["un"] not in ("fail", "undetermined")),
        ("connected", lambda r: _gate_passed(r, "connected")),
        ("needs_search", lambda r: _gate_passed(r, "one_search")),
    ]
    out, alive = {"generated": len(recs)}, recs
    for name, keep in stages:
        alive = [r for r in alive if keep(r)]
        out[name] = len(alive)
    # a custom gate (gates.custom) after the built-in ones keeps a record out of `accepted`
    alive = [r for r in alive if all(g["rejected_by"] is None for g in r["g"] or [])]
    best: dict[str, dict] = {}
    for r in sorted(alive, key=lambda r: (-(r["v"] if r["v"] is not None else -9), r["id"])):
        best.setdefault(normalize(r["q"]), r)
    out["accepted"] = len(best)
    return out


def _gate_passed(r: dict, gate: str) -> bool:
    return all(g["rejected_by"] is None for g in r["g"] or [] if g["gate"] == gate)


def funnel_from_markdown(md: str) -> dict[str, int]:
    out = {}
    for key, label in FUNNEL_ROWS.items():
        m = re.search(rf"^\| {re.escape(label)} \| (\d+) \|", md, re.M)
        assert m, f"no funnel row {label!r} in the report"
        out[key] = int(m.group(1))
    return out


def table_rows(md: str, heading: str) -> list[list[str]]:
    """Body rows of the first Markdown table after `heading`."""
    section = md.split(heading, 1)[1]
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip("|").split(" | ")])
        elif rows:
            break
    return rows[2:]  # header and separator


def blue_pixels(path: Path) -> int:
    """Pixels in matplotlib's first colour (C0 = #1f77b4): the bars of a chart."""
    import matplotlib.image as mpimg

    img = mpimg.imread(path)[..., :3]
    return int((np.abs(img - np.array([0x1F, 0x77, 0xB4]) / 255).max(axis=-1) < 0.02).sum())


def assert_real_pngs(rep: RunReport) -> None:
    import matplotlib.image as mpimg

    assert set(rep.plots) == set(PLOT_NAMES)
    for path in rep.plots.values():
        data = path.read_bytes()
        assert data[:8] == PNG_MAGIC, path
        assert len(data) > 5_000, f"{path} is suspiciously small ({len(data)} bytes)"
        h, w, _ = mpimg.imread(path).shape
        assert h >= 300 and w >= 600, (path, h, w)
    leftovers = [p.name for p in rep.dir.iterdir() if ".tmp-" in p.name]
    assert not leftovers, leftovers


def assert_links_resolve(rep: RunReport) -> None:
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", rep.markdown)
    assert sorted(links) == sorted(PLOT_NAMES.values())
    for link in links:
        assert not link.startswith("/"), link  # relative, so the directory can be moved
        assert (rep.markdown_path.parent / link).is_file()


@pytest.fixture(scope="module")
def landed_report(landed_run, tmp_path_factory) -> RunReport:
    before = landed_run.catalog.stat().st_mtime_ns
    run_dir = tmp_path_factory.mktemp("report") / "runs" / landed_run.run_id
    rep = write_run_report(landed_run.catalog, run_dir, landed_run.run_id)
    assert landed_run.catalog.stat().st_mtime_ns == before, "the report must not write"
    return rep


def test_landed_report_funnel_matches_sql(landed_run, landed_report):
    rep = landed_report
    assert rep.dir == rep.markdown_path.parent and rep.dir.name == "report"
    assert rep.markdown_path.read_text(encoding="utf-8") == rep.markdown
    with duckdb.connect(str(landed_run.catalog), read_only=True) as con:
        sql = """
            SELECT count(*),
                   sum(CASE WHEN is_valid THEN 1 ELSE 0 END),
                   sum(CASE WHEN is_valid AND is_verbatim THEN 1 ELSE 0 END),
                   avg(verifier_v), avg(proposer_reward)
            FROM curriculum WHERE run_id = ?
        """
        g, v, vb, mean_v, mean_r = con.execute(sql, [landed_run.run_id]).fetchone()
        run = con.execute(
            "SELECT status, profile, config_hash FROM runs WHERE run_id = ?", [landed_run.run_id]
        ).fetchone()
        fps = con.execute(
            "SELECT DISTINCT index_fingerprint FROM curriculum WHERE run_id = ?",
            [landed_run.run_id],
        ).fetchall()
        reasons = con.execute(
            "SELECT invalid_reason, count(*) FROM curriculum "
            "WHERE run_id = ? AND NOT is_valid GROUP BY ALL",
            [landed_run.run_id],
        ).fetchall()
        hops = con.execute(
            "SELECT hop_count, count(*) FROM curriculum WHERE run_id = ? GROUP BY ALL",
            [landed_run.run_id],
        ).fetchall()
        rejects = con.execute(
            "SELECT count(*) FROM rejects WHERE run_id = ?", [landed_run.run_id]
        ).fetchone()[0]
        drawn = con.execute(
            "SELECT count(DISTINCT cluster_id) FROM curriculum WHERE run_id = ?",
            [landed_run.run_id],
        ).fetchone()[0]
        (k,) = con.execute(
            "SELECT DISTINCT k FROM clusters WHERE iteration = "
            "(SELECT max(iteration) FROM run_plan WHERE run_id = ?)",
            [landed_run.run_id],
        ).fetchall()
        rollouts, correct = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE correct) FROM solver_rollouts "
            "WHERE run_id = ?",
            [landed_run.run_id],
        ).fetchone()

    with duckdb.connect(str(landed_run.catalog), read_only=True) as con:
        expected = expected_funnel(con, landed_run.run_id)
        (accepted,) = con.execute(
            "SELECT count(*) FROM accepted WHERE run_id = ?", [landed_run.run_id]
        ).fetchone()
    assert expected["valid"] == (v or 0) and expected["verbatim"] == (vb or 0)
    assert expected["accepted"] == accepted
    assert g == 6  # generation.num_sources=6 in LANDED_SETTINGS
    assert funnel_from_markdown(rep.markdown) == expected
    assert rep.funnel == expected
    md = rep.markdown
    assert f"# Run report: {landed_run.run_id}" in md
    status, profile, config_hash = run
    assert rep.status == status == "completed"
    assert f"| status | {status} |" in md
    assert f"| profile | {profile} |" in md
    assert f"`{config_hash}`" in md
    assert fps and all(f"`{fp}`" in md for (fp,) in fps)
    assert f"Mean V: {mean_v:+.3f}" in md
    assert f"R_pro: {mean_r:.3f}" in md
    for reason, n in reasons:
        assert f"| {reason} | {n} |" in md
    hop_rows = {int(r[0]): int(r[1]) for r in table_rows(md, "### Hop counts")}
    assert {h: n for h, n in hop_rows.items() if n} == {int(h): n for h, n in hops}
    assert set(hop_rows) >= {1, 2, 3, 4}  # every configured hop count, zeros included
    task_rows = table_rows(md, "### Task types")
    assert sum(int(r[1]) for r in task_rows) == g
    assert {r[0] for r in task_rows} >= {"factual", "comparison", "causal", "temporal"}
    assert f"## Rejects: {rejects}" in md
    assert f"### Clusters: {drawn} of {k[0]} drawn" in md
    assert f"{rollouts} rollouts over" in md
    wcr_rows = table_rows(md, "## Solver rollouts and WCR")
    assert sum(int(r[1]) for r in wcr_rows) == rollouts > 0
    assert sum(int(r[2]) for r in wcr_rows) == correct


def test_landed_report_examples_are_the_top_valid_records(landed_run, landed_report):
    with duckdb.connect(str(landed_run.catalog), read_only=True) as con:
        top = con.execute(
            "SELECT question, answer, verifier_v FROM curriculum "
            "WHERE run_id = ? AND is_valid AND is_verbatim "
            "ORDER BY verifier_v DESC NULLS LAST, proposer_reward DESC NULLS LAST, record_id",
            [landed_run.run_id],
        ).fetchall()
    md = landed_report.markdown
    shown = re.findall(r"^### \d+\. V ", md, re.M)
    assert len(shown) == min(3, len(top))
    # (a run without any: test_empty_run_gets_a_report_with_no_data_plots)
    assert top, "the landed run has no valid verbatim record: nothing to show"
    question, answer, v = top[0]
    first = md.split("### 1. V ", 1)[1]
    assert first.startswith(f"{v:+.3f}" if v is not None else "n/a")
    flat_q = " ".join(question.split()).replace("|", "\\|")
    assert f"**Question:** {flat_q[:400]}" in first
    flat_a = " ".join(answer.split()).replace("|", "\\|")
    assert f"**Answer:** {flat_a[:150]}" in first


def test_landed_report_files_are_real_pngs_with_bars(landed_report):
    assert_real_pngs(landed_report)
    assert_links_resolve(landed_report)
    assert blue_pixels(landed_report.plots["funnel"]) > 500  # six generated records: a bar


def test_report_is_reproducible_and_artifact_links_are_absolute(landed_run, landed_report):
    again = write_run_report(landed_run.catalog, landed_report.dir.parent, landed_run.run_id)
    assert again.markdown == landed_report.markdown
    art = again.artifact_markdown()
    assert "](funnel.png)" not in art
    for path in again.plots.values():
        assert f"`{path}`" in art


def _run_record(run_id: str, cfg) -> dict:
    t0 = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    return {
        "run_id": run_id,
        "run_date": t0.date(),
        "profile": cfg.profile,
        "config_hash": cfg.config_hash(),
        "config_yaml": cfg.to_yaml(),
        "started_at": t0,
        "finished_at": t0 + dt.timedelta(minutes=7),
        "status": "completed",
        "shards_planned": 1,
        "shards_completed": 1,
        "schema_version": SCHEMA_VERSION,
    }


def test_empty_run_gets_a_report_with_no_data_plots(tmp_path):
    cfg = load_config(None, [])
    store = Store(tmp_path / "out")
    store.write_run(_run_record("empty-run", cfg))
    catalog = store.refresh_catalog()  # no shards: every view empty

    rep = write_run_report(catalog, store.run_dir("empty-run"), "empty-run")
    assert rep.dir == store.run_dir("empty-run") / "report"
    assert rep.funnel == dict.fromkeys(FUNNEL_ROWS, 0)
    assert rep.mean_v is None and rep.status == "completed"
    md = rep.markdown
    assert funnel_from_markdown(md) == dict.fromkeys(FUNNEL_ROWS, 0)
    assert f"`{cfg.config_hash()}`" in md
    assert "2026-01-02 03:04:05 UTC" in md and "(7.0 min)" in md
    assert f"`{cfg.llm.model}`" in md  # models from the run's config when no record names them
    assert "Mean V: n/a" in md
    assert "_none: no valid record" in md
    assert "## Rejects: 0" in md
    assert "## EvalAct" not in md and "## ARR" not in md  # no such rollouts: no sections
    assert_real_pngs(rep)
    assert_links_resolve(rep)
    for path in rep.plots.values():
        assert blue_pixels(path) == 0, f"{path.name} draws bars without data"

    # A run id the catalog has never seen still gets a page that says so, not a crash.
    ghost = write_run_report(catalog, store.run_dir("ghost"), "ghost")
    assert "is not in the catalog's `runs` view" in ghost.markdown
    assert ghost.status is None
    assert_real_pngs(ghost)


def _row(table: str, **values) -> dict:
    """A contract-conforming row with neutral defaults, overridden by `values`."""
    import pyarrow as pa

    from schemas.tables import schema_for

    def default(t):
        if pa.types.is_string(t):
            return "x"
        if pa.types.is_boolean(t):
            return False
        if pa.types.is_integer(t):
            return 0
        if pa.types.is_floating(t):
            return 0.0
        if pa.types.is_list(t):
            return []
        if pa.types.is_timestamp(t):
            return dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
        return None

    row = {fld.name: default(fld.type) for fld in schema_for(table)}
    if table == "curriculum":
        row["single_hop_share"] = 1.0  # no cap on one-hop records unless a test sets one
    return {**row, **values}


def test_synthetic_run_bins_wcr_and_escapes_examples(tmp_path):
    """The landed run has no KG-linked records, so cover the WCR bins and Markdown escaping of
    model text with a small hand-made shard."""
    cfg = load_config(None, [])
    store = Store(tmp_path / "out")
    store.write_run(_run_record("syn", cfg))
    common = {"run_id": "syn", "task_type": "factual", "evidence_status": "verbatim"}
    records = [
        _row("curriculum", **common, record_id="a", hop_count=2, cluster_id=3, is_valid=True,
             is_verbatim=True, question="Which | pipe\nsplits?", answer="It", evidence="ev",
             verifier_v=0.6, proposer_reward=0.9, shortcut=False, unique_answer=True,
             shortcut_verdict="pass", uniqueness_verdict="pass"),
        _row("curriculum", **common, record_id="b", hop_count=1, cluster_id=3, is_valid=False,
             invalid_reason="empty_answer", is_verbatim=False, verifier_v=None),
    ]  # fmt: skip
    coverages = [(0.0, False), (0.2, True), (0.25, False), (0.5, True), (1.0, True), (None, False)]
    rollouts = [
        _row("solver_rollouts", run_id="syn", record_id="a", rollout_id=f"r{i}", sample=i,
             wcr_coverage=g, correct=ok)
        for i, (g, ok) in enumerate(coverages)
    ]  # fmt: skip
    day = dt.date(2026, 1, 2)
    files = [
        store.write_shard("curriculum", "syn", day, "00000", records),
        store.write_shard("solver_rollouts", "syn", day, "00000", rollouts),
    ]
    store.commit("syn", "00000", files)
    rep = write_run_report(store.refresh_catalog(), store.run_dir("syn"), "syn")

    md = rep.markdown
    assert rep.funnel == {
        "generated": 2,
        "posed": 2,
        "valid": 1,
        "verbatim": 1,
        "above_v_threshold": 1,
        "not_contaminated": 1,
        "not_shortcut": 1,
        "unique_answer": 1,
        "connected": 1,
        "needs_search": 1,
        "accepted": 1,
    }
    # no control scores: the bar is V > 0, and the report says where it came from
    assert "V > +0.000 (x), the 0.00 quantile of 0 control scores" in md
    assert "(source: none: no control scores, V > 0;" in md
    assert "| empty_answer | 1 |" in md
    assert "**Question:** Which \\| pipe splits?" in md  # one line, pipe escaped
    assert "### 1. V +0.600, R_pro 0.900 — 2-hop factual" in md
    wcr = {r[0]: (int(r[1]), int(r[2])) for r in table_rows(md, "## Solver rollouts and WCR")}
    assert wcr == {
        "0": (1, 0),
        "(0, .25]": (2, 1),
        "(.25, .5]": (1, 1),
        "(.5, .75]": (0, 0),
        "(.75, 1]": (1, 1),
        "no KG path": (1, 0),
    }
    assert "### Clusters: 1 of ? drawn" in md  # no run_plan view: K unknown
    assert_real_pngs(rep)
    assert blue_pixels(rep.plots["wcr_vs_correct"]) > 200  # the correct rollouts' bars


def test_v_threshold_from_controls_decides_the_accepted_set(tmp_path):
    """Authored control scores -> the run's V bar -> the accepted set, which the funnel, the
    summary and the export's default selection all read."""
    from pipeline.catalog.export import export_curriculum

    cfg = load_config(None, [])
    store = Store(tmp_path / "out")
    store.write_run(_run_record("thr", cfg))
    ok = {"run_id": "thr", "task_type": "factual", "evidence_status": "verbatim",
          "is_valid": True, "is_verbatim": True, "verifier_method": "teacher_forced_pmi",
          "v_threshold_quantile": 0.75, "shortcut_verdict": "pass",
          "uniqueness_verdict": "pass", "answer": "Bonn"}  # fmt: skip
    vs = {"a": 0.9, "b": 0.35, "c": 0.2, "d": 0.5, "e": 0.6, "f": 0.8, "g": 0.7}
    records = [
        _row("curriculum", **ok, record_id=rid, source_passage_id=f"p{rid}",
             question=f"Which city is record {rid} about?", verifier_v=v)
        for rid, v in vs.items()
    ]  # fmt: skip
    records[3]["shortcut_verdict"] = "undetermined"  # d: no gold-evidence answer was correct
    records[4]["uniqueness_verdict"] = "fail"  # e: ambiguous
    records[5]["question"] = records[0]["question"].upper()  # f: a duplicate of a, lower V
    # g: a record of a run with a custom gate (gates.custom), which failed it; its verdicts
    # list stands for the two built-in gates' columns too
    records[6]["gate_verdicts"] = [
        {"gate": "shortcut", "verdict": "not_applicable", "rejected_by": None, "detail": None},
        {"gate": "uniqueness", "verdict": "pass", "rejected_by": None, "detail": None},
        {"gate": "long_question", "verdict": "fail", "rejected_by": "long_question",
         "detail": "14 words"},
    ]  # fmt: skip
    records[6]["shortcut_verdict"] = "not_applicable"
    # 8 control V under the run's method (4 shuffled, 4 off-topic) + another method's, ignored
    ctl = [0.1, -0.2, 0.3, 0.0, 0.25, 0.4, -0.1, 0.05]
    controls = [
        _row("control_scores", run_id="thr", record_id=f"k{i}", method="teacher_forced_pmi",
             control="shuffled" if i % 2 else "off_topic", v=v)
        for i, v in enumerate(ctl)
    ] + [_row("control_scores", run_id="thr", record_id="z", method="mc", control="shuffled",
              v=5.0), _row("control_scores", run_id="thr", record_id="a",
              method="teacher_forced_pmi", control="answer_only", v=5.0)]  # fmt: skip
    day = dt.date(2026, 1, 2)
    files = [
        store.write_shard("curriculum", "thr", day, "00000", records),
        store.write_shard("control_scores", "thr", day, "00000", controls),
    ]
    store.commit("thr", "00000", files)
    catalog = store.refresh_catalog()
    with duckdb.connect(str(catalog), read_only=True) as con:
        t = con.execute("SELECT * FROM verifier_thresholds").fetchone()
        cols = [d[0] for d in con.description]
        t = dict(zip(cols, t, strict=True))
        # nearest rank: ceil(0.75 * 8) = 6th of the sorted 8 control V (0.25)
        assert (t["control_scores"], t["v_threshold"], t["quantile"]) == (8, 0.25, 0.75)
        verdicts = dict(
            con.execute("SELECT record_id, rejected_by FROM curriculum_verdicts").fetchall()
        )
        assert expected_funnel(con, "thr")["accepted"] == 2
        gates = con.execute(
            "SELECT gate, position, judged, passed, failed, undetermined, rejected "
            "FROM gate_funnel WHERE run_id = 'thr' ORDER BY position"
        ).fetchall()
    # every record that reached the gates (a, b, d, e, f, g), each gate in its place
    assert gates == [("shortcut", 1, 5, 4, 0, 1, 1), ("uniqueness", 2, 6, 5, 1, 0, 1),
                     ("long_question", 3, 1, 0, 1, 0, 1)]  # fmt: skip
    assert verdicts == {
        "a": None, "b": None, "c": "below_v_threshold", "d": "shortcut_undetermined",
        "e": "ambiguous", "f": "duplicate_question", "g": "long_question",
    }  # fmt: skip
    rep = write_run_report(catalog, store.run_dir("thr"), "thr")
    assert rep.funnel["above_v_threshold"] == 6 and rep.funnel["accepted"] == 2
    assert "the 0.75 quantile of 8 control scores" in rep.markdown
    assert "it dropped 1 valid verbatim record(s)" in rep.markdown
    assert "Undetermined (no answer correct even with the gold evidence; not accepted): " \
           "shortcut gate 1" in rep.markdown  # fmt: skip
    res = export_curriculum(catalog, tmp_path / "exp", formats=["jsonl"], validation_fraction=0)
    assert res.counts["exported"] == 2
    assert sorted(r["record_id"] for r in _jsonl_rows(tmp_path / "exp")) == ["a", "b"]
    dropped = [
        orjson.loads(x) for x in (tmp_path / "exp" / "dropped.jsonl").read_bytes().splitlines()
    ]
    assert {d["record_id"]: d["reason"] for d in dropped} == {
        "c": "below_v_threshold",
        "d": "undetermined",
        "e": "ambiguous_answer",
        "f": "duplicate_question",
        "g": "long_question",
    }  # fmt: skip  (every view rejection listed with its reason, whatever the model did)
    wide = export_curriculum(catalog, tmp_path / "exp2", formats=["jsonl"],
                             validation_fraction=0, include_undetermined=True)  # fmt: skip
    assert sorted(r["record_id"] for r in _jsonl_rows(tmp_path / "exp2")) == ["a", "b", "d"]
    assert wide.manifest["llm_gates"]["undetermined_excluded"] is False


def _jsonl_rows(export_dir: Path) -> list[dict]:
    rows = []
    for path in sorted(export_dir.rglob("*.jsonl")):
        if path.name != "dropped.jsonl":
            rows += [json.loads(line) for line in path.read_text().splitlines() if line]
    return rows


def test_process_signals_in_report_and_export(tmp_path):
    """EvalAct's z calibration and ARR's entropy patterns vs correctness in the report, and
    the per-rollout process signals an export carries (solver_process), on hand-made shards."""
    from pipeline.catalog.export_process import attach_solver_process
    from pipeline.catalog.readonly_sql import connect_audit

    cfg = load_config(None, [])
    store = Store(tmp_path / "out")
    store.write_run(_run_record("proc", cfg))
    rec = {"run_id": "proc", "is_valid": True}
    records = [_row("curriculum", **rec, record_id=r) for r in ("a", "b", "c")]
    arr = {"run_id": "proc", "record_id": "a", "protocol": "arr"}
    rollouts = [
        _row("solver_rollouts", **arr, rollout_id="a:sol:0", sample=0, correct=True,
             answer_f1=1.0, predicted_answer="Paris", verifier_answer="Paris",
             outcome_reward=1.0, verifier_reward=1.0, verifier_advantage=1.0,
             entropy_pattern="D", protocol_violations=[]),
        _row("solver_rollouts", **arr, rollout_id="a:sol:1", sample=1, correct=False,
             predicted_answer="Lyon", verifier_answer="Paris", verifier_reward=0.5,
             verifier_advantage=-1.0, entropy_pattern="I",
             protocol_violations=["verifier:missing_response", "reasoner:no_action"]),
        _row("solver_rollouts", run_id="proc", record_id="b", rollout_id="b:sol:0",
             protocol="evalact", outcome_advantage=1.0, protocol_violations=["malformed_json"]),
        _row("solver_rollouts", run_id="proc", record_id="c", rollout_id="c:sol:0",
             protocol="search_r1"),
    ]  # fmt: skip
    turns = [
        _row("arr_turns", run_id="proc", record_id="a", rollout_id="a:sol:0", turn_id="t0",
             action_index=2, turn=1, role="verifier", action="response", critique=True,
             mean_entropy=0.5, process_advantage=0.6, advantage=1.6),
        _row("arr_turns", run_id="proc", record_id="a", rollout_id="a:sol:0", turn_id="t1",
             action_index=0, turn=0, role="reasoner", action="think", critique=False),
        _row("arr_turns", run_id="proc", record_id="a", rollout_id="a:sol:1", turn_id="t2",
             action_index=1, turn=1, role="verifier", action="verify", critique=True,
             mean_entropy=1.5, process_advantage=None, advantage=-1.0),
    ]  # fmt: skip
    seg = {"run_id": "proc", "record_id": "b", "rollout_id": "b:sol:0"}
    segments = [
        _row("evalact_segments", **seg, segment_id="s0", segment=0, z=8.0, evidence_hit=True,
             violation=None, pcar_multiplier=1.2, calibrated_advantage=1.2),
        _row("evalact_segments", **seg, segment_id="s1", segment=1, z=2.0, evidence_hit=False,
             violation=None, pcar_multiplier=0.8, calibrated_advantage=0.8),
        _row("evalact_segments", **seg, segment_id="s2", segment=2, z=None, evidence_hit=False,
             violation="malformed_json", pcar_multiplier=None, calibrated_advantage=None),
    ]  # fmt: skip
    day = dt.date(2026, 1, 2)
    files = [
        store.write_shard("curriculum", "proc", day, "00000", records),
        store.write_shard("solver_rollouts", "proc", day, "00000", rollouts),
        store.write_shard("arr_turns", "proc", day, "00000", turns),
        store.write_shard("evalact_segments", "proc", day, "00000", segments),
    ]
    store.commit("proc", "00000", files)
    catalog = store.refresh_catalog()
    md = write_run_report(catalog, store.run_dir("proc"), "proc").markdown

    assert table_rows(md, "## EvalAct: z calibration") == [
        ["hit the evidence passage", "1", "8.000"],
        ["missed it", "1", "2.000"],
    ]
    assert "3 Search→Evaluate segments, 2 with a score z, 1 protocol violations" in md
    assert "| malformed_json | 1 |" in md
    assert table_rows(md, "vs correctness:") == [
        ["D", "1", "0.500", "1.000", "1.000"],
        ["I", "1", "0.500", "0.000", "0.000"],
    ]
    assert "answers agree 0.500" in md
    assert "critique entropy when the reasoner was right 0.500, wrong 1.500" in md
    assert "| verifier | missing_response | 1 |" in md and "| reasoner | no_action | 1 |" in md

    with connect_audit(catalog) as con:  # what an export's second pass attaches to its rows
        views = {v for (v,) in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
        rows = [{"record_id": r} for r in ("a", "b", "c")]
        attach_solver_process(con, rows, views)
    proc = {r["record_id"]: r["solver_process"] for r in rows}
    assert proc["c"] is None  # search_r1: nothing to carry
    (b,) = proc["b"]
    assert b["pcar_multipliers"] == [1.2, 0.8, None]
    assert b["calibrated_advantages"] == [1.2, 0.8, None]
    a0, a1 = proc["a"]
    assert (a0["sample"], a0["critique_turns"], a0["process_advantages"]) == (0, [1], [0.6])
    assert (a0["critique_advantages"], a0["entropy_pattern"]) == ([1.6], "D")
    assert (a1["verifier_advantage"], a1["process_advantages"]) == (-1.0, [None])


def test_cell_escaping_keeps_tables_intact():
    from pipeline.catalog.report import _cell

    assert _cell("a | b\nc") == "a \\| b c"
    assert _cell("x" * 50, 10) == "x" * 9 + "…"
    assert _cell(None) == "–" and _cell(0.12345) == "0.123"


def test_artifact_keys_are_valid_and_distinct():
    from flows.report import artifact_key

    assert artifact_key("landed-a") == "run-report-landed-a"
    keys = {artifact_key(r) for r in ("Run_A", "run-a", "run_a", "20261122-embedded-e1deb3f4")}
    assert len(keys) == 4
    for key in [*keys, artifact_key("___"), artifact_key("x", "funnel")]:
        assert re.fullmatch(r"[a-z0-9-]+", key), key


def _cli_app() -> typer.Typer:
    from cli.report import report

    app = typer.Typer()
    app.callback()(lambda: None)  # keep `report` a subcommand, as in cli/main.py
    app.command("report")(report)
    return app


def test_cli_reports_the_newest_run_and_fails_clearly(landed_run, tmp_path):
    out = tmp_path / "out"
    sets = ["--set", f"store.out_dir={out}", "--set", f"store.catalog={landed_run.catalog}"]
    runner = CliRunner()
    res = runner.invoke(_cli_app(), ["report", *sets])
    assert res.exit_code == 0, res.output
    path = out / "runs" / landed_run.run_id / "report" / "report.md"
    assert f"run report: {path}" in res.output
    assert path.is_file()

    res = runner.invoke(_cli_app(), ["report", "--run-id", "nope", *sets])
    assert res.exit_code == 2
    assert "error: run 'nope' is not in the catalog" in res.output
    assert f"hint: known runs (newest last): {landed_run.run_id}" in res.output
    assert not (out / "runs" / "nope").exists()

    missing = ["--set", f"store.out_dir={out}", "--set", f"store.catalog={tmp_path / 'x.duckdb'}"]
    res = runner.invoke(_cli_app(), ["report", *missing])
    assert res.exit_code == 2
    assert "error: no catalog at" in res.output and "hint:" in res.output


PREFECT_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from pipeline.core.config import load_config
    from pipeline.run_context import RunContext
    from pipeline.store.store import Store
    from flows.report import artifact_key, report_task

    out, catalog, run_id = sys.argv[1:4]

    @flow(name="report-only")
    def report_only():
        cfg = load_config(None, [f"store.out_dir={out}", f"store.catalog={catalog}"])
        return report_task(RunContext.open(cfg, run_id, Store.from_config(cfg)))

    state = report_only(return_state=True)
    rep, flow_run_id = state.result(), state.state_details.flow_run_id
    keys = [artifact_key(run_id, "report"), artifact_key(run_id, "funnel")]
    with get_client(sync_client=True) as client:  # the session's server holds other runs' too
        flt = ArtifactFilter(key=ArtifactFilterKey(any_=keys))
        arts = [a for a in client.read_artifacts(artifact_filter=flt)
                if a.flow_run_id == flow_run_id]
    print(json.dumps({
        "markdown_path": str(rep.markdown_path),
        "artifacts": [
            {"key": a.key, "type": a.type, "data": a.data, "flow_run_id": str(a.flow_run_id)}
            for a in arts
        ],
    }))
    """
)


def test_report_task_publishes_prefect_artifacts(landed_run, tmp_path):
    out = tmp_path / "out"
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    }
    done = subprocess.run(
        [sys.executable, "-c", PREFECT_SCRIPT, str(out), str(landed_run.catalog),
         landed_run.run_id],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    res = json.loads(done.stdout.strip().splitlines()[-1])
    md_path = Path(res["markdown_path"])
    assert md_path == out / "runs" / landed_run.run_id / "report" / "report.md"
    arts = {a["key"]: a for a in res["artifacts"]}
    md_art = arts[f"run-report-{landed_run.run_id}"]
    assert md_art["type"] == "markdown" and md_art["flow_run_id"] != "None"
    assert md_art["data"].startswith(f"# Run report: {landed_run.run_id}")
    funnel = funnel_from_markdown(md_path.read_text(encoding="utf-8"))
    assert funnel_from_markdown(md_art["data"]) == funnel
    assert f"`{md_path.parent / 'funnel.png'}`" in md_art["data"]  # absolute plot paths
    table = arts[f"run-funnel-{landed_run.run_id}"]
    assert table["type"] == "table"
    rows = json.loads(table["data"])
    assert [r["records"] for r in rows] == [funnel[k] for k in FUNNEL_ROWS]


def test_one_hop_records_are_capped_at_their_share_of_what_is_accepted(tmp_path):
    """gates.single_hop_share: of a run's records that pass everything else, one-hop questions
    may be at most that share of the accepted; the rest, lowest V first, are single_hop_cap,
    which the funnel counts and the accepted view leaves out."""
    cfg = load_config(None, [])
    store = Store(tmp_path / "out")
    store.write_run(_run_record("cap", cfg))
    ok = {
        "run_id": "cap",
        "task_type": "factual",
        "evidence_status": "verbatim",
        "is_valid": True,
        "is_verbatim": True,
        "verifier_method": "teacher_forced_pmi",
        "shortcut_verdict": "pass",
        "uniqueness_verdict": "pass",
        "answer": "Bonn",
        "single_hop_share": 0.2,
    }
    hops = {"m1": 2, "m2": 3, "m3": 2, "m4": 4, "s1": 1, "s2": 1, "s3": 1}
    vs = {"m1": 0.9, "m2": 0.8, "m3": 0.7, "m4": 0.6, "s1": 0.5, "s2": 0.95, "s3": 0.4}
    records = [
        _row(
            "curriculum",
            **ok,
            record_id=rid,
            source_passage_id=f"p{rid}",
            hop_count=h,
            question=f"Which city is record {rid} about?",
            verifier_v=vs[rid],
        )
        for rid, h in hops.items()
    ]
    store.commit(
        "cap",
        "00000",
        [store.write_shard("curriculum", "cap", dt.date(2026, 1, 2), "00000", records)],
    )
    catalog = store.refresh_catalog()
    with duckdb.connect(str(catalog), read_only=True) as con:
        verdicts = dict(
            con.execute("SELECT record_id, rejected_by FROM record_verdicts").fetchall()
        )
        accepted = {r for (r,) in con.execute("SELECT record_id FROM accepted").fetchall()}
        (capped,) = con.execute("SELECT single_hop_capped FROM funnel").fetchone()
    # four multi-hop records accepted: one one-hop record fits 20 % (1 of 5), the best by V
    assert accepted == {"m1", "m2", "m3", "m4", "s2"}
    assert verdicts["s1"] == verdicts["s3"] == "single_hop_cap" and capped == 2
