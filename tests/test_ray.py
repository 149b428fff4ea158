"""executor.kind=ray on a real two-node Ray cluster on the loopback range.

Two raylets on this machine (`ray start --head` at 127.0.0.2, `ray start --address` at
127.0.0.3, one CPU each, token authentication as Ray defaults to): the nightly run's
embedding and generation shards on two workers, one of them killed with its node mid-shard,
must land exactly the records of a local run of the same plan. Ray resolves 127.0.0.1 to the
machine's outward address, other loopback addresses stay as given, so every connection of
the test stays on 127.0.0.0/8.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import orjson
import psutil
import pytest

from tests.conftest import ROOT, SAMPLE_CORPUS, corpus_head, free_port, needs

pytestmark = pytest.mark.slow

RAY = str(Path(sys.executable).with_name("ray"))
HEAD, NODE2 = "127.0.0.2", "127.0.0.3"
# Small but real: 3 embedding shards and 3 generation shards over 2 workers (the fewest that
# still leave node 2 busy after a first commit, whichever worker commits first), every step of
# a shard (multi-turn proposer with search, solver, verifier) on the transformers backend, over
# the first 150 sample passages; the KG stage is off (it runs on the driver whichever executor
# is chosen).
CORPUS_LINES = 150
SETTINGS = [
    "llm.backend=transformers",
    "generation.num_sources=3",
    "generation.shard_size=1",
    "generation.max_turns=2",
    "verifier.m=2",
    "rewards.n_solver=2",
    "kg.nightly=false",
    "embedding.shard_size=50",
    "gates.shortcut_n=1",  # the LLM quality gates run inside each shard too, on fewer samples
]
# Columns that differ between two runs of the same plan by design (wall-clock times).
TIMES = {"created_at", "started_at", "finished_at", "committed_at"}


def _env(token: str) -> dict[str, str]:
    # One torch thread everywhere: a Ray worker with num_cpus=1 gets OMP_NUM_THREADS=1, and
    # float reductions must run alike in the local run for the records to be comparable.
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
    }


def _cluster_processes(token: str) -> list[psutil.Process]:
    """Every process this test's `ray start` left running (they carry its token)."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("RAY_AUTH_TOKEN") == token:
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


@pytest.fixture(scope="module")
@needs("cluster")
def ray_cluster(tmp_path_factory, prefect_api):
    """Two raylets; the env they and the runs get is taken after `prefect_api` has named the
    session's Prefect server in it."""
    token = secrets.token_hex(16)
    env = _env(token)
    port = free_port()
    common = ["--num-cpus", "1", "--disable-usage-stats"]
    head = [RAY, "start", "--head", "--port", str(port), "--node-ip-address", HEAD]
    head += ["--include-dashboard=false", *common]
    node2 = [RAY, "start", "--address", f"{HEAD}:{port}", "--node-ip-address", NODE2, *common]
    try:
        for cmd in (head, node2):
            res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
            assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        yield {"address": f"{HEAD}:{port}", "env": env, "token": token}
    finally:
        for p in _cluster_processes(token):
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()


def _nightly(out: Path, run_id: str, env: dict, *extra: str) -> list[str]:
    corpus = out.parent / "corpus.jsonl"  # one path for both runs (it is in the config hash)
    if not corpus.exists():
        corpus_head(SAMPLE_CORPUS, CORPUS_LINES, corpus)
    cmd = [sys.executable, "-m", "cli", "nightly", "--run-id", run_id]
    store = [f"store.out_dir={out}", f"store.catalog={out / 'catalog.duckdb'}"]
    for s in (*store, f"corpus.path={corpus}", *SETTINGS):
        cmd += ["--set", s]
    return [*cmd, *extra]


def _rows(out: Path, table: str, run_id: str) -> list[dict]:
    from pipeline.store.store import Store

    rows = Store(out).read_run_table(run_id, table).to_pylist()
    rows = [{k: v for k, v in r.items() if k not in TIMES} for r in rows]
    return sorted(rows, key=lambda r: orjson.dumps(r, default=str, option=orjson.OPT_SORT_KEYS))


def _node_processes(token: str, ip: str) -> list[psutil.Process]:
    """The raylet of the node at `ip` and the processes it started (its workers)."""
    raylets = [
        p
        for p in _cluster_processes(token)
        if p.name() == "raylet" and f"--node_ip_address={ip}" in " ".join(p.cmdline())
    ]
    return [proc for r in raylets for proc in (r, *r.children(recursive=True))]


def test_ray_run_equals_the_local_run_and_survives_a_lost_node(tmp_path, ray_cluster):
    run_id = "ray-vs-local"
    env = {**ray_cluster["env"], "PREFECT_HOME": str(tmp_path / "prefect")}
    # Both runs use one store path (it is part of the config hash every record carries): the
    # local run's store is moved aside, LLM response cache included, before the Ray run.
    ray_out, local_out = tmp_path / "out", tmp_path / "local"
    local = subprocess.run(
        _nightly(ray_out, run_id, env),
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr[-3000:]
    ray_out.rename(local_out)

    ray_flags = [
        "--set",
        "executor.kind=ray",
        "--set",
        f"executor.address={ray_cluster['address']}",
    ]
    ray_flags += ["--set", "executor.workers=2"]
    log = (tmp_path / "ray.log").open("w")
    proc = subprocess.Popen(
        _nightly(ray_out, run_id, env, *ray_flags),
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    # Once a shard is committed and the second node's worker is inside another, lose that
    # node: SIGKILL its raylet and its worker, as a crashed machine would go.
    progress = ray_out / "runs" / run_id / "progress.json"
    killed, deadline = None, time.time() + 900
    while killed is None and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
        try:
            doc = orjson.loads(progress.read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            continue
        busy = [w for w in doc["workers"] if w["node"] == NODE2 and w["state"] == "running"]
        if doc["shards_committed"] >= 1 and busy:
            victims = _node_processes(ray_cluster["token"], NODE2)
            assert any(p.pid == busy[0]["pid"] for p in victims), "worker not under node 2"
            for p in victims:
                p.send_signal(signal.SIGKILL)
            killed = busy[0]["unit"]
    assert killed is not None, "the run never had a shard in flight on the second node"
    assert proc.wait(timeout=1200) == 0, (tmp_path / "ray.log").read_text()[-4000:]
    # What the executor did goes to the run's log file (the console gets a line per stage).
    run_log = (ray_out / "runs" / run_id / "nightly.log").read_text()
    assert "died" in run_log and f"unit {killed} re-queued" in run_log

    # Every planned shard committed exactly once, by the driver, after the loss.
    manifest = [orjson.loads(x) for x in (ray_out / "runs" / run_id / "manifest.jsonl").open()]
    shards = [e["shard"] for e in manifest if e["shard"] not in ("corpus", "compacted")]
    assert sorted(shards) == ["00000", "00001", "00002"]
    assert manifest[-1]["shard"] == "compacted"  # landing compacted the finished run
    doc = orjson.loads(progress.read_bytes())
    assert doc["shards_committed"] == 3 and doc["executor"] == "ray"
    assert sum(doc["shards_by_worker"].values()) == 3

    # The same records, rollouts and verifier samples as the local run, field by field.
    for table in ("curriculum", "proposer_rollouts", "solver_rollouts", "verifier_samples"):
        a, b = _rows(local_out, table, run_id), _rows(ray_out, table, run_id)
        assert a and len(a) == len(b), table
        assert a == b, f"{table} differs between the local and the Ray run"
    ids = [r["record_id"] for r in _rows(ray_out, "curriculum", run_id)]
    assert len(ids) == len(set(ids)) == 3

    # The embedding pass ran on the cluster too and produced the local vectors.
    (local_idx,) = (local_out / "index").iterdir()
    (ray_idx,) = (ray_out / "index").iterdir()
    assert local_idx.name == ray_idx.name
    for a in sorted((local_idx / "emb").glob("emb-*.npy")):
        np.testing.assert_allclose(np.load(a), np.load(ray_idx / "emb" / a.name), atol=1e-6)
    assert "embedding shard" in run_log and "(worker" in run_log


def test_cluster_errors_are_one_line(tmp_path, ray_cluster):
    """No cluster at the address; a cluster without the GPUs asked for: exit 2, one line."""
    env = {**ray_cluster["env"], "PREFECT_HOME": str(tmp_path / "prefect")}
    base = [sys.executable, "-m", "cli", "index", "build"]
    base += ["--set", f"store.out_dir={tmp_path / 'out'}", "--set", "executor.kind=ray"]
    closed = f"{HEAD}:{free_port()}"
    down = subprocess.run(
        [sys.executable, "-m", "cli", "nightly", "--set", "executor.kind=ray", "--set",
         f"executor.address={closed}", "--set", f"store.out_dir={tmp_path / 'out2'}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert down.returncode == 2, down.stderr[-2000:]
    assert f"error: cannot reach the Ray cluster at {closed}" in down.stderr
    assert "Traceback" not in down.stderr and "ray start --head" in down.stderr

    no_gpu = subprocess.run(
        [*base, "--set", f"executor.address={ray_cluster['address']}",
         "--set", "executor.num_gpus=1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert no_gpu.returncode == 2, no_gpu.stderr[-2000:]
    assert "error: the Ray cluster has 0 GPUs" in no_gpu.stderr
    assert "executor.num_gpus=1 needs 1" in no_gpu.stderr
    assert "Traceback" not in no_gpu.stderr
