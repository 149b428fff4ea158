"""Both servers on a real socket (uvicorn in a thread, a real HTTP client):
strict request models (an unknown field is a 4xx naming it), the bound on sampled tokens per
request and in flight, and abandoned work that stops instead of holding up the next request.
The generator and retriever are stand-ins whose work passes `checkpoint()` the way the real
backends' layers do (the real model's numbers: benchmarks/bench_hostile_input.py)."""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np
import pytest
import uvicorn
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.config import LLMServeConfig, RetrievalConfig
from pipeline.llm.cancel import checkpoint
from pipeline.llm.openai_server import create_completions_app
from pipeline.retrieval.faiss_index import Hit
from pipeline.retrieval.server import create_retrieval_app
from tests.conftest import free_port, needs

SLOW = "slow"


class SlowGenerator:
    """Prompt "slow": 30 s of 'decode steps' of 10 ms, each a cancellation point."""

    model_id = "stand-in"

    def __init__(self) -> None:
        self.stopped = threading.Event()

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, prompts, params, guides=None):
        if SLOW in prompts:
            try:
                for _ in range(3000):
                    checkpoint()
                    time.sleep(0.01)
            finally:
                self.stopped.set()
        return [["x"] * params.n for _ in prompts]


class SlowRetriever:
    def __init__(self) -> None:
        self.meta = {"fingerprint": "f", "count": 1, "model": "m", "query_prompt": "", "dim": 2}
        self.stopped = threading.Event()

    def search_with_vectors(self, queries, k):
        if SLOW in queries:
            try:
                for _ in range(3000):
                    checkpoint()
                    time.sleep(0.01)
            finally:
                self.stopped.set()
        hits = [[Hit("1", "T", "text", 0.5, 0)] for _ in queries]
        return hits, np.zeros((len(queries), 2), dtype=np.float32)


@pytest.fixture(scope="module")
@needs("server")
def servers():
    gen, ret = SlowGenerator(), SlowRetriever()
    limits = LLMServeConfig(max_request_tokens=1000, max_tokens_in_flight=1500)
    apps = {
        "llm": create_completions_app(gen, "stand-in", limits),
        "retrieval": create_retrieval_app(ret, RetrievalConfig()),
    }
    bases, running = {}, []
    for name, app in apps.items():
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        running.append((server, thread))
        bases[name] = f"http://127.0.0.1:{port}"
        deadline = time.time() + 30
        while not server.started and time.time() < deadline:
            time.sleep(0.05)
    yield bases, gen, ret
    for server, thread in running:
        server.should_exit = True
        thread.join(timeout=10)


QUICK = {"prompt": "Paris is", "max_tokens": 1, "temperature": 0}
KNOWN = {"model", "prompt", "n", "temperature", "top_p", "max_tokens", "stop", "seed", "echo"}
KNOWN |= {"logprobs", "stream", "best_of", "suffix", "structured_outputs", "guided_regex"}


@given(
    st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=20).filter(
        lambda k: k not in KNOWN
    ),
    st.one_of(st.integers(), st.text(max_size=5), st.booleans(), st.none()),
)
@settings(max_examples=25, deadline=None)
def test_unknown_completion_fields_are_a_400_naming_them(servers, field, value):
    bases, *_ = servers
    res = httpx.post(f"{bases['llm']}/v1/completions", json={**QUICK, field: value}, timeout=30)
    assert res.status_code == 400, res.text
    err = res.json()["error"]
    assert err["param"] == field and field in err["message"]


@pytest.mark.parametrize("field", ["logit_bias", "foo", "presence_penalty", "user"])
def test_unknown_fields_are_refused_by_both_servers(servers, field):
    bases, *_ = servers
    llm = httpx.post(f"{bases['llm']}/v1/completions", json={**QUICK, field: {}}, timeout=30)
    assert llm.status_code == 400 and field in llm.json()["error"]["message"]
    tok = httpx.post(f"{bases['llm']}/tokenize", json={"prompt": "x", field: 1}, timeout=30)
    assert tok.status_code == 400 and field in tok.json()["error"]["message"]
    ret = httpx.post(f"{bases['retrieval']}/retrieve", json={"queries": ["x"], field: 1})
    assert ret.status_code == 422 and ret.json()["error"].startswith(f"{field}: ")


@given(st.integers(1, 64), st.integers(1, 4096), st.integers(1, 4))
@settings(max_examples=25, deadline=None)
def test_sampled_tokens_per_request_are_bounded(servers, n, max_tokens, prompts):
    bases, *_ = servers
    body = {"prompt": ["a b"] * prompts, "n": n, "max_tokens": max_tokens}
    res = httpx.post(f"{bases['llm']}/v1/completions", json=body, timeout=30)
    if prompts * n * max_tokens > 1000:
        assert res.status_code == 400
        assert "(llm.serve.max_request_tokens)" in res.json()["error"]["message"]
    else:
        assert res.status_code == 200, res.text


def _abandon(url: str, body: dict, after_s: float = 1.0) -> None:
    client = httpx.Client(timeout=httpx.Timeout(after_s, connect=10))
    with client, pytest.raises(httpx.ReadTimeout):
        client.post(url, json=body)


def test_abandoned_sampling_stops_and_tokens_in_flight_are_bounded(servers):
    bases, gen, _ = servers
    url = f"{bases['llm']}/v1/completions"
    gen.stopped.clear()
    slow = {"prompt": SLOW, "n": 1, "max_tokens": 900}
    # While the slow request runs, 900 tokens are in flight: one more of 900 is a 429.
    thread = threading.Thread(target=_abandon, args=(url, slow, 2.0))
    thread.start()
    time.sleep(0.7)
    busy = httpx.post(url, json={**QUICK, "max_tokens": 900}, timeout=30)
    assert busy.status_code == 429, busy.text
    assert "(llm.serve.max_tokens_in_flight)" in busy.json()["error"]["message"]
    thread.join()
    assert gen.stopped.wait(2.0), "the abandoned request kept running"
    t = time.monotonic()
    res = httpx.post(url, json=QUICK, timeout=30)
    assert res.status_code == 200 and time.monotonic() - t < 2
    health = httpx.get(f"{bases['llm']}/health").json()
    assert health["cancelled"]["client disconnected"] >= 1


def test_abandoned_search_stops(servers):
    bases, _, ret = servers
    url = f"{bases['retrieval']}/retrieve"
    ret.stopped.clear()
    _abandon(url, {"queries": [SLOW]})
    assert ret.stopped.wait(2.0), "the abandoned search kept running"
    t = time.monotonic()
    res = httpx.post(url, json={"queries": ["Vienna"]}, timeout=30)
    assert res.status_code == 200 and time.monotonic() - t < 2
