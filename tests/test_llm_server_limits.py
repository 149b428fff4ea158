"""The OpenAI-compatible server under hostile input: a real server process on 127.0.0.1 with
small limits, a real HTTP client, the real embedded model. Every class of bad request gets the
named 4xx/5xx, and work a client abandons or that overruns its time limit stops."""

import os
import sys
import time

import httpx
import pytest

from tests.conftest import free_port, needs, start_server

pytestmark = pytest.mark.slow

MAX_PROMPT_TOKENS = 64
TIMEOUT_S = 10  # long enough for any small request here, short enough to wait out once
MAX_BODY = 65536
# A request that runs for minutes: 16 sampled rows of up to 1024 tokens (all 16 reached 150
# tokens without EOS when tried; a decode step of 16 rows takes 50 ms to 1 s on 2 cores).
LONG = {
    "prompt": "Once upon a time, in a small village by the sea,",
    "n": 16,
    "max_tokens": 1024,
    "temperature": 1.0,
    "seed": 0,
}
QUICK = {"prompt": "Paris is the capital of", "max_tokens": 1, "temperature": 0}


@pytest.fixture(scope="module")
@needs("server")
def server(tmp_path_factory):
    port = free_port()
    cmd = [sys.executable, "-m", "pipeline.llm.openai_server", "--config", "configs/embedded.yaml"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    for s in (
        "llm.backend=transformers",  # cancellation checkpoints are the transformers backend's
        f"llm.serve.max_prompt_tokens={MAX_PROMPT_TOKENS}",
        f"llm.serve.request_timeout_s={TIMEOUT_S}",
        f"llm.serve.max_body_bytes={MAX_BODY}",
    ):
        cmd += ["--set", s]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    log = tmp_path_factory.mktemp("llm_limits") / "server.log"
    proc = start_server(cmd, f"http://127.0.0.1:{port}", log, env, timeout=240)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=30)


def _error(res: httpx.Response, status: int) -> str:
    assert res.status_code == status, res.text
    err = res.json()["error"]
    assert err["code"] == status
    return err["message"]


@pytest.mark.parametrize(
    "path, raw, field",
    [
        ("/v1/completions", rb'{"prompt": "Vienna \ud800", "max_tokens": 1}', "prompt.0"),
        ("/v1/completions", rb'{"prompt": ["ok", "x\udfff"], "max_tokens": 1}', "prompt.1"),
        ("/v1/completions", rb'{"prompt": "ok", "max_tokens": 1, "stop": "\ud83d"}', "stop.0"),
        ("/v1/completions", b'{"prompt": "bytes \xed\xa0\x80", "max_tokens": 1}', "prompt.0"),
        ("/tokenize", rb'{"prompt": "a\udc00b"}', "prompt"),
    ],
)
def test_lone_surrogates_are_a_400_naming_the_field(server, path, raw, field):
    res = httpx.post(f"{server}{path}", content=raw, headers={"content-type": "application/json"})
    msg = _error(res, 400)
    assert msg.startswith(f"{field}: ") and "unpaired surrogate" in msg


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"n": "2"}, "n"),
        ({"n": True}, "n"),
        ({"max_tokens": 1.0}, "max_tokens"),
        ({"echo": "yes"}, "echo"),
        ({"echo": 1}, "echo"),
        ({"logprobs": "1"}, "logprobs"),
        ({"temperature": "0.5"}, "temperature"),
        ({"seed": "7"}, "seed"),
        ({"structured_outputs": {"regex": 5}}, "structured_outputs.regex"),
    ],
)
def test_loosely_typed_fields_are_refused_not_coerced(server, extra, field):
    res = httpx.post(f"{server}/v1/completions", json={**QUICK, **extra}, timeout=60)
    assert _error(res, 400).startswith(f"{field}: ")


def test_a_body_over_the_limit_is_a_413_naming_the_setting(server):
    big = {**QUICK, "prompt": "x" * (MAX_BODY + 10)}
    msg = _error(httpx.post(f"{server}/v1/completions", json=big), 413)
    assert f"limit of {MAX_BODY} bytes" in msg and "llm.serve.max_body_bytes" in msg
    chunks = (b" " * 4096 for _ in range(MAX_BODY // 4096 + 2))  # no Content-Length: chunked
    res = httpx.post(
        f"{server}/v1/completions", content=chunks, headers={"content-type": "application/json"}
    )
    assert "llm.serve.max_body_bytes" in _error(res, 413)


def test_a_prompt_over_the_token_limit_is_a_400_naming_the_limit(server):
    long_prompt = "The river flows. " * 40  # ~160 tokens, far below the character limit
    for body in (
        {"prompt": long_prompt, "max_tokens": 1},
        {"prompt": ["short", long_prompt], "max_tokens": 0, "echo": True, "logprobs": 0},
    ):
        msg = _error(httpx.post(f"{server}/v1/completions", json=body, timeout=60), 400)
        assert f"the limit is {MAX_PROMPT_TOKENS} (llm.serve.max_prompt_tokens)" in msg
    res = httpx.post(f"{server}/tokenize", json={"prompt": long_prompt}, timeout=60)
    assert "llm.serve.max_prompt_tokens" in _error(res, 400)
    ok = httpx.post(f"{server}/tokenize", json={"prompt": "The river flows."}, timeout=60)
    assert ok.status_code == 200 and ok.json()["count"] <= MAX_PROMPT_TOKENS


def _abandon(server: str, after_s: float) -> None:
    """Send LONG and hang up after `after_s` (the client's read timeout)."""
    client = httpx.Client(timeout=httpx.Timeout(after_s, connect=10))
    with client, pytest.raises(httpx.ReadTimeout):
        client.post(f"{server}/v1/completions", json=LONG)


def test_a_disconnected_clients_work_is_cancelled_and_frees_the_model(server):
    before = httpx.get(f"{server}/health").json()["cancelled"]["client disconnected"]
    _abandon(server, after_s=1.5)
    t = time.monotonic()
    res = httpx.post(f"{server}/v1/completions", json=QUICK, timeout=60)
    waited = time.monotonic() - t
    assert res.status_code == 200 and res.json()["choices"][0]["text"]
    # Left running, LONG would hold the model until its time limit (8.5 s from here).
    assert waited < TIMEOUT_S / 2, f"the next request waited {waited:.1f} s"
    after = httpx.get(f"{server}/health").json()["cancelled"]["client disconnected"]
    assert after == before + 1


def test_a_request_over_the_time_limit_is_a_504_and_stops(server):
    t = time.monotonic()
    res = httpx.post(f"{server}/v1/completions", json=LONG, timeout=TIMEOUT_S * 5)
    took = time.monotonic() - t
    msg = _error(res, 504)
    assert f"limit of {TIMEOUT_S} s (llm.serve.request_timeout_s)" in msg
    assert TIMEOUT_S <= took < TIMEOUT_S + 5
    # the model is free again: a 1-token request is served, well within the limit
    t = time.monotonic()
    quick = httpx.post(f"{server}/v1/completions", json=QUICK, timeout=60)
    assert quick.status_code == 200 and time.monotonic() - t < TIMEOUT_S / 2
    assert httpx.get(f"{server}/health").json()["cancelled"]["time limit"] >= 1
