"""Hostile input, round three: the record browser is a local app. It answers only requests
addressed to its own names (a web page that rebinds its name to 127.0.0.1 reads nothing and
forges no review), listens beyond loopback only when told to and then only to its token,
refuses a bad host or port with one line and exit 2, never follows a link out of the store,
answers hostile parameters and stored NULLs with a page or a 400 (never a 500), and bounds
what a client may submit. Over the synthetic store of tests/test_hostile_store.py."""

from __future__ import annotations

import base64
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import orjson
import pyarrow as pa
import pytest

from pipeline.browse.app import MAX_REVIEWS_PER_MINUTE, create_browse_app
from pipeline.browse.catalog_reader import FOLD_AT
from pipeline.store.reviews import COMPACTED_PREFIX, REVIEWS_DIR, Verdict, review_files
from pipeline.store.reviews import write_reviews as write_review_file
from pipeline.store.store import Store, connect_readonly
from tests.conftest import ROOT, free_port, needs, start_server
from tests.test_hostile_store import build, copy_of

LOCAL = "http://127.0.0.1"


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("history") / "out").root


def client_of(store: Store, base: str = LOCAL, **kw):
    from fastapi.testclient import TestClient

    app = create_browse_app(store.catalog_path, **kw)
    return TestClient(app, base_url=base, raise_server_exceptions=False)


def files_in(root: Path) -> list[str]:
    return sorted(p.name for p in (root / REVIEWS_DIR).glob("*.parquet"))


def a_record(store: Store) -> str:
    with connect_readonly(store.catalog_path) as con:
        return con.execute(
            "SELECT record_id FROM curriculum WHERE question IS NOT NULL ORDER BY record_id"
        ).fetchone()[0]


def csrf_of(page: str) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', page)[1]


# ---- the Host and the Origin --------------------------------------------------------------


def test_the_browser_answers_only_its_own_host(history, tmp_path):
    store = copy_of(history, tmp_path / "out")
    client = client_of(store)
    rid = a_record(store)
    for path in ("/", "/records", f"/records/{rid}", "/health", "/static/style.css"):
        for host in ("other.example", "rebind.example:8765", "127.0.0.1.nip.io", "0"):
            r = client.get(path, headers={"host": host})
            assert r.status_code == 421, (path, host, r.status_code)
            assert rid not in r.text and "bench-" not in r.text
        for host in ("", "a b", "x@127.0.0.1", "127.0.0.1:port"):
            assert client.get(path, headers={"host": host}).status_code == 400, (path, host)
    for host in ("127.0.0.1:8765", "localhost:1", "LOCALHOST", "[::1]:8765", "127.0.0.1"):
        assert client.get("/records", headers={"host": host}).status_code == 200, host
    # a page of another origin fetching ours: refused even with our Host
    r = client.get("/records", headers={"origin": "http://evil.example"})
    assert r.status_code == 403


def test_a_rebinding_page_can_neither_read_records_nor_forge_a_review(history, tmp_path):
    """DNS rebinding: the attacker's name resolves to 127.0.0.1, so the browser's requests
    carry Host: rebind.example and a matching Origin, with the cookies of that name."""
    store = copy_of(history, tmp_path / "out")
    rid = a_record(store)
    before = files_in(store.root)
    evil = client_of(store, "http://rebind.example:8765")
    page = evil.get(f"/records/{rid}")
    assert page.status_code == 421 and 'name="csrf"' not in page.text
    # even with a token the page got from our own origin
    own = client_of(store)
    csrf = csrf_of(own.get(f"/records/{rid}").text)
    evil.cookies.update(own.cookies)
    posted = evil.post(
        "/reviews",
        data={"csrf": csrf, "verdict": "reject", "reason": "other", "record_id": rid,
              "reviewer": "mallory"},
        headers={"origin": "http://rebind.example:8765"}, follow_redirects=False,
    )  # fmt: skip
    assert posted.status_code == 421
    assert files_in(store.root) == before


# ---- what the pages read ------------------------------------------------------------------


def cursor(*value) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(list(value))).decode().rstrip("=")


def test_mistyped_cursors_are_a_400_never_a_500(history, tmp_path):
    store = copy_of(history, tmp_path / "out")
    client = client_of(store)
    cursors = [
        cursor("v", True, "x"), cursor("v", False, "x"), cursor("v", 1.0, "x" * 300),
        cursor("v", "0.5", "x"), cursor("v", [1], "x"), cursor("v", None, "x"),
        cursor("time", 5, "x"), cursor("time", "not a time", "x"), "not base64!",
    ]  # fmt: skip
    for after in cursors:
        sort = "time" if after.startswith(cursor("time")[:8]) else "v"
        r = client.get("/records", params={"after": after, "sort": sort})
        assert r.status_code == 400, (after, r.status_code, r.text[:200])
        assert "bad parameter 'after'" in r.text


def test_a_kg_path_with_null_labels_draws_instead_of_failing(history, tmp_path):
    from synthetic_store import Corpus, artifacts, night_tables, write_night

    store = copy_of(history, tmp_path / "out")
    c = Corpus(np.random.default_rng(11), 200)
    groups = night_tables(c, 2, 10, 10, 3)
    tables = dict(groups[0])
    rows = tables["curriculum"].to_pylist()
    hit = next(r for r in rows if r["kg_path"] and r["question"])
    hit["kg_path"]["nodes"][1]["label"] = None
    hit["kg_path"]["relations"][0]["label"] = None
    hit["kg_path"]["nodes"][-1]["id"] = None
    schema = tables["curriculum"].schema
    groups[0] = [(t, pa.Table.from_pylist(rows, schema=schema) if t == "curriculum" else tbl)
                 for t, tbl in groups[0]]  # fmt: skip
    write_night(store, c, 2, 10, 10, 3, groups=groups)
    store.refresh_catalog(artifacts(store.root))
    page = client_of(store).get(f"/records/{hit['record_id']}")
    assert page.status_code == 200, page.text[:500]
    assert 'id="kg-path"' in page.text


def test_a_report_linked_out_of_the_store_is_not_followed(tmp_path):
    store = build(tmp_path / "out")
    client = client_of(store)
    secret = tmp_path / "secret.md"
    secret.write_text("SECRET-OUTSIDE")
    run_a, run_b = store.run_ids()[:2]
    (store.run_dir(run_a) / "report").mkdir()
    (store.run_dir(run_a) / "report" / "report.md").symlink_to(secret)
    r = client.get(f"/runs/{run_a}/report")
    assert r.status_code == 404 and "SECRET-OUTSIDE" not in r.text
    (store.run_dir(run_b) / "report").symlink_to(tmp_path)  # the folder, linked out
    (tmp_path / "report.md").write_text("SECRET-OUTSIDE")
    r = client.get(f"/runs/{run_b}/report")
    assert r.status_code == 404 and "SECRET-OUTSIDE" not in r.text
    (store.run_dir(run_a) / "report" / "report.md").unlink()
    (store.run_dir(run_a) / "report" / "report.md").write_text("# inside")
    assert client.get(f"/runs/{run_a}/report").status_code == 200


# ---- what a client may submit -------------------------------------------------------------


def test_review_submissions_are_bounded(history, tmp_path):
    store = copy_of(history, tmp_path / "out")
    client = client_of(store)
    rid = a_record(store)
    csrf = csrf_of(client.get(f"/records/{rid}").text)
    form = {"csrf": csrf, "verdict": "accept", "record_id": rid, "reviewer": "alice"}
    origin = {"origin": LOCAL}
    r = client.post("/reviews", data={**form, "note": "n" * 2001}, headers=origin)
    assert r.status_code == 400 and "note" in r.text
    r = client.post("/reviews", data={**form, "note": "n" * 300_000}, headers=origin)
    assert r.status_code == 413
    codes = [
        client.post("/reviews", data=form, headers=origin, follow_redirects=False).status_code
        for _ in range(MAX_REVIEWS_PER_MINUTE + 1)
    ]
    assert codes == [303] * MAX_REVIEWS_PER_MINUTE + [429]
    assert len(files_in(store.root)) <= MAX_REVIEWS_PER_MINUTE + 3


def test_a_flood_of_review_files_is_folded_so_pages_bind_a_few(history, tmp_path):
    store = copy_of(history, tmp_path / "out")
    rid = a_record(store)
    run = store.run_ids()[0]
    for _ in range(3 * FOLD_AT):
        write_review_file(store.root, Verdict("accept", "bot"), [(rid, run)])
    client = client_of(store)
    assert client.get("/records").status_code == 200
    live = review_files(store.root)
    assert sum(not p.name.startswith(COMPACTED_PREFIX) for p in live) <= FOLD_AT
    assert len(live) <= 4
    with connect_readonly(store.catalog_path) as con:
        assert con.execute("SELECT count(*) FROM reviews").fetchone()[0] == 6 + 3 * FOLD_AT


def test_an_exposed_browser_answers_only_with_its_token(history, tmp_path):
    store = copy_of(history, tmp_path / "out")
    token = "t0ken-" + "x" * 20
    client = client_of(store, "http://10.0.0.5:8765", hosts=("10.0.0.5",), access_token=token)
    assert client.get("/records").status_code == 401
    assert client.get("/records", params={"token": "wrong" * 5}).status_code == 401
    assert client.get("/records", headers={"authorization": f"Bearer {token}"}).status_code == 200
    r = client.get("/records", params={"token": token, "sort": "v"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/records?sort=v"
    assert client.get("/records").status_code == 200  # the cookie it set
    assert client.get("/records", headers={"host": "evil.example"}).status_code == 421


# ---- how it listens -----------------------------------------------------------------------


def browse(store: Store, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    sets = ["--set", f"store.out_dir={store.root}", "--set", f"store.catalog={store.catalog_path}"]
    return subprocess.run(
        [sys.executable, "-m", "cli", "browse", *args, *sets],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "CURRICULUM_BROWSE_TOKEN": "", **(env or {})},
    )  # fmt: skip


def test_a_bad_host_or_port_is_one_line_and_exit_2(history, tmp_path):
    store = copy_of(history, tmp_path / "out")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = held.getsockname()[1]
        cases = [
            (["--host", ""], "--host"),
            (["--port", "70000"], "--port 70000"),
            (["--port", "0"], "--port 0"),
            (["--host", "no-such-host.invalid"], "no-such-host.invalid"),
            (["--host", "0.0.0.0"], "not a loopback address"),
            (["--host", "0.0.0.0", "--expose"], "access token"),
            (["--port", str(busy)], f"cannot listen on 127.0.0.1:{busy}"),
        ]
        for args, said in cases:
            res = browse(store, *args)
            errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
            assert res.returncode == 2, (args, res.stderr[-1500:])
            assert len(errors) == 1 and said in errors[0], (args, res.stderr[-1500:])
            assert "Traceback" not in res.stderr


@pytest.fixture(scope="module")
@needs("server")
def served(history, tmp_path_factory):
    store = copy_of(history, tmp_path_factory.mktemp("served") / "out")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    sets = ["--set", f"store.out_dir={store.root}", "--set", f"store.catalog={store.catalog_path}"]
    cmd = [sys.executable, "-m", "cli", "browse", "--port", str(port), *sets]
    log = store.root.parent / "browse.log"
    proc = start_server(cmd, base, log, dict(os.environ), 120)
    yield store, base
    proc.terminate()
    proc.wait(timeout=30)


def test_the_served_browser_refuses_another_host(served):
    """What `curl -H "Host: other.example" http://127.0.0.1:PORT/records` does."""
    _, base = served
    refused = httpx.get(f"{base}/records", headers={"host": "other.example"})
    assert refused.status_code == 421 and "bench-" not in refused.text
    assert httpx.get(f"{base}/records").status_code == 200
    assert httpx.get(f"{base}/records", headers={"host": "localhost"}).status_code == 200
