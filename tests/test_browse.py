"""The record browser: `curriculum browse` over a copy of the landed run, driven in a
real headless Chromium (Debian's, through Playwright), with a run authored beside it whose
records sit at known offsets of real passages, one of them hostile (script/HTML injection in
question, answer and evidence)."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import httpx
import orjson
import pytest

from tests.conftest import free_port, landed_copy, needs, run_cli, start_server

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = Path(__file__).resolve().parents[1] / "docs" / "browse"
RUN = "browse-b"
HOSTILE = {
    "question": "Who wrote <script>window.__xss='question'</script> the "
    "<img src=x onerror=\"window.__xss='img'\"> letter?",
    "answer": "<img src=x onerror=alert('answer')>",
    "evidence": "<a href=\"javascript:alert('evidence')\">click</a><svg onload=alert(3)>",
}


def _authored_records(con, cfg_hash: str) -> tuple[list[dict], dict]:
    """Four accepted records (V > 0 with no control scores, every gate passed) whose evidence
    is a sentence in the middle of a real passage, the first on a real KG subgraph's path; and
    the hostile one."""
    from schemas.tables import schema_for

    passages = con.execute(
        "SELECT id, title, text FROM passages WHERE length(text) > 300 ORDER BY row LIMIT 4"
    ).fetchall()
    sg = con.execute(
        "SELECT subgraph_id, target_path, waypoints FROM subgraphs ORDER BY node_count DESC LIMIT 1"
    ).fetchone()
    cur = con.execute("SELECT * FROM curriculum ORDER BY record_id LIMIT 1")
    landed = dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))
    base = {f.name: landed[f.name] for f in schema_for("curriculum")}  # every field filled
    t0 = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    rows = []
    for i, (pid, title, text) in enumerate(passages):
        start = text.index(". ") + 2  # the second sentence: offsets well inside the passage
        end = text.index(".", start) + 1
        evidence = text[start:end]
        answer = evidence.split()[-1].strip(".")
        rows.append(
            {
                **base,
                "record_id": f"authored{i}",
                "run_id": RUN,
                "shard": 0,
                "slot": i,
                "created_at": t0 + dt.timedelta(minutes=i),
                "source_passage_id": pid,
                "source_title": title,
                "task_type": "factual",
                "hop_count": 1,
                "question": f"According to {title}, what ends the sentence of record {i}?",
                "answer": answer,
                "answer_aliases": [],
                "evidence": evidence,
                "evidence_status": "verbatim",
                "evidence_passage_id": pid,
                "evidence_char_start": start,
                "evidence_char_end": end,
                "evidence_chain": [
                    {
                        "hop": 1,
                        "passage_id": pid,
                        "char_start": start,
                        "char_end": end,
                        "text": evidence,
                        "subject": title,
                        "relation": "name",
                        "object": answer,
                        "source": "source",
                    }
                ],
                "evidence_mode": "passage_span",
                "question_style": "plain",
                "is_valid": True,
                "is_verbatim": True,
                "verifier_v": 0.9 - i / 10,
                "difficulty": 0.5,
                "verifier_method": "teacher_forced_pmi",
                "question_source": "template",
                "shortcut_verdict": "pass",
                "uniqueness_verdict": "pass",
                "one_search_answerable": False,
                "one_search_verdict": "pass",
                "disconnected": False,
                "connected_verdict": "not_applicable",
                "single_hop_share": 1.0,  # a run without the one-hop cap
                "gate_verdicts": [],
                "waypoints": [],
                "kg_path": None,
                "subgraph_id": None,
                "invalid_reason": None,
                "config_hash": cfg_hash,
                "raw_proposer_output": f"<answer>{answer}</answer>",
            }
        )
    if sg is not None:  # the first record follows the landed KG's largest subgraph, its
        # chain a sentence of the second record's passage, then its own
        chain = [
            {**rows[1]["evidence_chain"][0], "hop": 1},
            {**rows[0]["evidence_chain"][0], "hop": 2},
        ]
        rows[0] |= {
            "subgraph_id": sg[0],
            "kg_path": sg[1],
            "waypoints": sg[2],
            "hop_count": 2,
            "evidence_chain": chain,
            "evidence_mode": "kg_path",
            "connected_verdict": "pass",
        }
    hostile = {**rows[3], **HOSTILE, "record_id": "hostile0", "slot": 9, "verifier_v": 0.3}
    hostile["evidence_char_start"] = hostile["evidence_char_end"] = None
    return [*rows, hostile], {"kg": rows[0] if sg is not None else None}


@pytest.fixture(scope="module")
@needs("run", "server")
def browsed(landed_run, tmp_path_factory):
    """A copy of the landed store with the authored run, landed again, and `curriculum
    browse` serving it on 127.0.0.1."""
    import duckdb

    from pipeline.core.config import load_config
    from pipeline.stages import refresh_catalog
    from pipeline.store.store import Store
    from schemas.tables import SCHEMA_VERSION

    base = tmp_path_factory.mktemp("browse")
    out, settings = landed_copy(landed_run, base)
    cfg = load_config(None, settings)
    store = Store.from_config(cfg)
    with duckdb.connect(str(landed_run.catalog), read_only=True) as con:
        records, extra = _authored_records(con, cfg.config_hash())
    t0 = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    store.write_run(
        {
            "run_id": RUN, "run_date": t0.date(), "profile": cfg.profile,
            "config_hash": cfg.config_hash(), "config_yaml": cfg.to_yaml(), "started_at": t0,
            "finished_at": t0 + dt.timedelta(minutes=7), "status": "completed",
            "shards_planned": 1, "shards_completed": 1, "schema_version": SCHEMA_VERSION,
        }
    )  # fmt: skip
    store.commit(RUN, "00000", [store.write_shard("curriculum", RUN, t0.date(), "00000", records)])
    refresh_catalog(cfg, store)
    port = free_port()
    sets = [x for s in settings if s.startswith("store.") for x in ("--set", s)]
    cmd = [sys.executable, "-m", "cli", "browse", *sets, "--port", str(port)]
    cmd += ["--reviewer", "auditor"]
    url = f"http://127.0.0.1:{port}"
    proc = start_server(cmd, url, base / "browse.log", landed_run.env, timeout=60)
    yield SimpleNamespace(
        url=url, out=out, cfg=cfg, store=store, settings=settings, records=records, **extra
    )
    proc.terminate()
    proc.wait(timeout=30)


def _latest_reviews(browsed) -> dict[str, str]:
    from pipeline.store.store import connect_readonly

    with connect_readonly(browsed.store.catalog_path) as con:
        return dict(con.execute("SELECT record_id, verdict FROM review_latest").fetchall())


@pytest.mark.slow
def test_auditor_browses_reviews_and_the_export_honours_it(browsed, tmp_path):
    from playwright.sync_api import sync_playwright

    good = {r["record_id"]: r for r in browsed.records if r["record_id"].startswith("authored")}
    shots = tmp_path / "shots"
    shots.mkdir()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

        # Runs page: both runs with their funnels; the authored run's 5 records all accepted.
        page.goto(browsed.url + "/")
        runs = page.locator("#runs tbody tr")
        assert runs.count() == 2
        row = runs.filter(has_text=RUN)
        assert re.search(r"\b5\b", row.locator("td").nth(13).inner_text())
        page.screenshot(path=str(shots / "runs.png"), full_page=True)

        page.goto(browsed.url + "/records")  # every run's records, best V first
        page.screenshot(path=str(shots / "records.png"), full_page=True)

        # Records page: the run's link, then filters applied through the form.
        page.goto(browsed.url + "/")
        runs.filter(has_text=RUN).locator("td").first.locator("a").click()
        assert page.locator("#records tbody tr").count() == 5
        page.select_option("select[name=status]", "accepted")
        page.select_option("select[name=sort]", "time")
        page.select_option("select[name=order]", "asc")
        page.click("#apply")
        ids = [
            page.locator("#records tbody tr").nth(i).locator("input").get_attribute("value")
            for i in range(page.locator("#records tbody tr").count())
        ]
        assert ids == ["authored0", "authored1", "authored2", "authored3", "hostile0"]
        word = good["authored2"]["evidence"].split()[2].lower()
        page.fill("input[name=q]", word)
        page.click("#apply")
        found = page.locator("#records tbody input").evaluate_all("es => es.map(e => e.value)")
        assert "authored2" in found and all(
            word in (r["question"] + r["answer"] + r["evidence"]).lower()
            for r in browsed.records
            if r["record_id"] in found
        )

        # Record page: the evidence marked at its stored offsets, the KG path drawn.
        first = good["authored0"]
        page.goto(f"{browsed.url}/records/authored0")
        assert page.locator("mark#evidence").inner_text() == first["evidence"]
        before = page.evaluate(
            "() => { const r = document.createRange();"
            " r.setStart(document.getElementById('passage'), 0);"
            " r.setEndBefore(document.getElementById('evidence')); return r.toString().length; }"
        )
        assert before == first["evidence_char_start"] > 0
        if browsed.kg is not None:
            # each hop of the chain marked in its own passage, in hop order
            for h in browsed.kg["evidence_chain"]:
                assert page.locator(f"#hop-{h['hop']} mark").inner_text() == h["text"]
            nodes = browsed.kg["kg_path"]["nodes"]
            svg = page.locator("svg#kg-path")
            for kind, node in (("answer", nodes[-1]), ("seed", nodes[0])):
                title = svg.locator(f".node-{kind} title").text_content()
                assert title == f"{node['label']} ({node['id']})"
            assert svg.locator("line.edge").count() == len(nodes) - 1
        page.screenshot(path=str(shots / "record.png"), full_page=True)

        # Review: accept one record, reject another with a reason, from their pages.
        page.goto(f"{browsed.url}/records/authored1")
        page.click("#accept")
        assert "accept by auditor" in page.locator("#review-history").inner_text()
        page.goto(f"{browsed.url}/records/authored2")
        page.select_option("#review-form select[name=reason]", "answer_not_in_evidence")
        page.fill("#review-form input[name=note]", "the answer is not what the span says")
        page.click("#reject")
        assert "reject (answer_not_in_evidence)" in page.locator("#review-history").inner_text()
        # ... and in bulk from the table.
        page.goto(f"{browsed.url}/records?run_id={RUN}&review=unreviewed")
        page.check("input[value=authored3]")
        page.check("input[value=authored0]")
        page.click("#bulk button[value=accept]")
        assert page.locator("#records input[value=authored3]").count() == 0  # now reviewed

        # The hostile record renders as text: no dialog, no script run, nothing injected.
        for path in ("/records/hostile0", f"/records?run_id={RUN}&q=script"):
            page.goto(browsed.url + path)
            assert page.evaluate("window.__xss") is None
            assert page.locator("main script, main img, main [onerror], main [onload]").count() == 0
            assert page.locator("a[href^='javascript']").count() == 0
        page.goto(f"{browsed.url}/records/hostile0")
        assert page.locator("#question").inner_text() == HOSTILE["question"]
        assert page.locator("#answer").inner_text() == HOSTILE["answer"]
        assert HOSTILE["evidence"] in page.locator("main").inner_text()
        assert dialogs == []
        browser.close()

    assert _latest_reviews(browsed) == {
        "authored0": "accept",
        "authored1": "accept",
        "authored2": "reject",
        "authored3": "accept",
    }
    if os.environ.get("UPDATE_SCREENSHOTS"):  # committed once, for the documentation
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        for png in shots.glob("*.png"):
            shutil.copy(png, SCREENSHOTS / png.name)

    # `curriculum export` leaves the rejected record out; --reviewed-only keeps the accepted.
    sets = [x for s in browsed.settings if s.startswith("store.") for x in ("--set", s)]
    for flag, want in (([], {"authored0", "authored1", "authored3", "hostile0"}),
                       (["--reviewed-only"], {"authored0", "authored1", "authored3"})):  # fmt: skip
        out = tmp_path / f"export{len(flag)}"
        res = run_cli("export", str(out), *sets, "--run-id", RUN, "--format", "jsonl",
                      "--validation-fraction", "0", *flag)  # fmt: skip
        assert res.returncode == 0, res.stderr
        lines = (out / "jsonl" / "train.jsonl").read_bytes().splitlines()
        assert {orjson.loads(x)["record_id"] for x in lines} == want


@pytest.mark.slow
def test_browser_answers_through_a_rebuild_and_keeps_a_review_made_during_it(browsed):
    """Landing rebuilds the catalog under a temporary name and renames it over the old one:
    every request meanwhile answers, and a review posted during a rebuild is kept."""
    from pipeline.stages import refresh_catalog

    client = httpx.Client(base_url=browsed.url, timeout=30)
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', client.get("/records").text)[1]
    origin = {"origin": browsed.url}
    done = threading.Event()
    errors: list[BaseException] = []

    def rebuild() -> None:
        try:
            for _ in range(3):
                refresh_catalog(browsed.cfg, browsed.store)
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=rebuild)
    thread.start()
    codes, posted = [], False
    while not done.is_set() or not posted:
        for path in ("/", f"/records?run_id={RUN}", "/records/authored0", "/records?sort=time"):
            codes.append(client.get(path).status_code)
        if not posted:
            form = {"csrf": token, "verdict": "reject", "record_id": "hostile0",
                    "reviewer": "auditor", "reason": "other",
                    "note": "during the rebuild"}  # fmt: skip
            codes.append(client.post("/reviews", data=form, headers=origin).status_code)
            posted = True
    thread.join()
    assert not errors, errors
    assert len(codes) > 5 and set(codes) <= {200, 303}, codes
    assert _latest_reviews(browsed)["hostile0"] == "reject"
    assert "during the rebuild" in client.get("/records/hostile0").text


@pytest.mark.slow
def test_reviews_need_a_same_origin_post_with_the_session_token(browsed):
    client = httpx.Client(base_url=browsed.url, timeout=30)
    page = client.get("/records/authored0")
    assert "script-src" not in page.headers["content-security-policy"]  # no script at all
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)[1]
    form = {"csrf": token, "verdict": "accept", "record_id": "authored0", "reviewer": "x"}
    assert client.post("/reviews", data=form).status_code == 403  # no Origin or Referer
    evil = {"origin": "http://evil.example"}
    assert client.post("/reviews", data=form, headers=evil).status_code == 403
    same = {"origin": browsed.url}
    other = httpx.Client(base_url=browsed.url, timeout=30)  # another session: its own token
    other.get("/")
    assert other.post("/reviews", data=form, headers=same).status_code == 403
    bad = {**form, "verdict": "reject"}  # a rejection without a reason
    res = client.post("/reviews", data=bad, headers=same)
    assert res.status_code == 400 and "reason" in res.text
    for query, name in (("v_min=abc", "v_min"), ("q=" + "a" * 201, "q"), ("sort=drop", "sort"),
                        ("after=!!", "after"), ("hop_count=-1", "hop_count")):  # fmt: skip
        res = client.get(f"/records?{query}")
        assert res.status_code == 400 and repr(name) in res.text, (query, res.text)
    assert client.get("/records/..%2F..%2Fetc").status_code in (400, 404)
    assert client.get("/runs/..%2Fx/report").status_code in (400, 404)
