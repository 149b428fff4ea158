"""The retrieval server as trainers use it: a real process on 127.0.0.1, a real HTTP client."""

import os
import sys

import httpx
import pytest

from tests.conftest import free_port, needs, start_server

MAX_BODY = 8192


@pytest.fixture(scope="module")
@needs("server")
def server(tmp_path_factory, sample_index):
    out = sample_index.out  # the server only reads the index
    sets = [f"store.out_dir={out}", "retrieval.max_topk=10", "retrieval.max_queries=4"]
    sets.append(f"retrieval.max_body_bytes={MAX_BODY}")
    port = free_port()
    cmd = [sys.executable, "-m", "cli", "index", "serve", "--port", str(port)]
    for s in sets:
        cmd += ["--set", s]
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    log = tmp_path_factory.mktemp("srv") / "server.log"
    proc = start_server(cmd, base, log, env, timeout=180)
    yield base
    proc.terminate()
    proc.wait(timeout=30)


def test_health(server):
    body = httpx.get(f"{server}/health").json()
    assert body["status"] == "ok" and body["count"] >= 400 and body["factory"] == "Flat"


def test_search_r1_request_shape_with_scores(server):
    req = {
        "queries": ["Where was Albert Einstein born?", "Which river flows through Vienna?"],
        "topk": 3,
        "return_scores": True,
    }
    res = httpx.post(f"{server}/retrieve", json=req, timeout=60)
    assert res.status_code == 200
    result = res.json()["result"]
    assert len(result) == 2 and all(len(r) == 3 for r in result)
    first = result[0]
    assert set(first[0]) == {"document", "score"} and set(first[0]["document"]) == {
        "id",
        "contents",
    }
    assert [d["score"] for d in first] == sorted((d["score"] for d in first), reverse=True)
    assert first[0]["document"]["contents"].startswith('"')  # "Title"\ntext as in the corpus
    titles = [d["document"]["contents"].split("\n", 1)[0].strip('"') for d in first]
    assert "Albert Einstein" in titles or "Ulm" in titles


def test_without_scores_and_default_topk(server):
    res = httpx.post(f"{server}/retrieve", json={"queries": ["Mozart"]}, timeout=60)
    docs = res.json()["result"][0]
    assert res.status_code == 200 and len(docs) == 3 and set(docs[0]) == {"id", "contents"}


@pytest.mark.parametrize(
    "body, needle",
    [
        ({"queries": ["x"], "topk": 0}, "topk"),
        ({"queries": ["x"], "topk": 11}, "topk"),
        ({"queries": []}, "queries"),
        ({"queries": ["a", "b", "c", "d", "e"]}, "queries"),
        ({"queries": ["x" * 5000]}, "limit is 2048"),
        ({"queries": ["   "]}, "query 0 is empty"),
        ({"topk": 3}, "queries"),
        ({"queries": "not a list"}, "queries"),
        ({"queries": ["x"], "nprobe": 1}, "nprobe"),
    ],
)
def test_bad_requests_get_4xx_with_a_message(server, body, needle):
    res = httpx.post(f"{server}/retrieve", json=body, timeout=30)
    assert 400 <= res.status_code < 500
    assert needle in res.json()["error"]


def test_malformed_json_is_a_4xx(server):
    res = httpx.post(
        f"{server}/retrieve", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert 400 <= res.status_code < 500


@pytest.mark.parametrize(
    "raw, field",
    [
        (rb'{"queries": ["Vienna \ud800"]}', "queries.0"),
        (rb'{"queries": ["ok", "\udfff"], "topk": 2}', "queries.1"),
        (b'{"queries": ["raw \xed\xa0\x80 bytes"]}', "queries.0"),  # UTF-8-encoded surrogate
    ],
)
def test_lone_surrogates_are_a_422_naming_the_query(server, raw, field):
    res = httpx.post(
        f"{server}/retrieve", content=raw, headers={"content-type": "application/json"}
    )
    assert res.status_code == 422
    assert res.json()["error"].startswith(f"{field}: ") and "surrogate" in res.json()["error"]


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"topk": "3"}, "topk"),
        ({"topk": True}, "topk"),
        ({"topk": 3.0}, "topk"),
        ({"return_scores": "yes"}, "return_scores"),
        ({"return_scores": 1}, "return_scores"),
        ({"queries": "Mozart"}, "queries"),
    ],
)
def test_loosely_typed_fields_are_refused_not_coerced(server, extra, field):
    res = httpx.post(f"{server}/retrieve", json={"queries": ["Mozart"], **extra}, timeout=30)
    assert res.status_code == 422 and res.json()["error"].startswith(f"{field}: ")


def test_a_body_over_the_limit_is_a_413_naming_the_setting(server):
    # 4 queries of 2,030 characters: within max_queries and max_query_chars, not in bytes
    body = {"queries": ["Zürich " * 290] * 4}
    res = httpx.post(f"{server}/retrieve", json=body, timeout=30)
    assert res.status_code == 413
    assert f"limit of {MAX_BODY} bytes (retrieval.max_body_bytes)" in res.json()["error"]
    chunks = (b" " * 1024 for _ in range(MAX_BODY // 1024 + 2))  # chunked: no Content-Length
    res = httpx.post(
        f"{server}/retrieve", content=chunks, headers={"content-type": "application/json"}
    )
    assert res.status_code == 413 and "retrieval.max_body_bytes" in res.json()["error"]
