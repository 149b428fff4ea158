"""A real two-node Ray cluster on the loopback range, and the loss of one of its nodes.

Two raylets on this machine (`ray start --head` at 127.0.0.2, `ray start --address` at
127.0.0.3, one CPU each, token authentication as Ray defaults to). Ray resolves 127.0.0.1 to
the machine's outward address, other loopback addresses stay as given, so every connection
of a test stays on 127.0.0.0/8. `conftest.ray_cluster` starts one per module that uses it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import psutil

RAY = str(Path(sys.executable).with_name("ray"))
HEAD, NODE2 = "127.0.0.2", "127.0.0.3"
# Columns that differ between two runs of the same plan by design (wall-clock times).
TIMES = {"created_at", "started_at", "finished_at", "committed_at"}


def cluster_env(token: str) -> dict[str, str]:
    # One torch thread everywhere: a Ray worker with num_cpus=1 gets OMP_NUM_THREADS=1, and
    # float reductions must run alike in a local run for the records to be comparable.
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
    }


def _cluster_processes(token: str) -> list[psutil.Process]:
    """Every process the cluster's `ray start` left running (they carry its token)."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("RAY_AUTH_TOKEN") == token:
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


def two_nodes(port: int) -> Iterator[dict]:
    """Start the head and the second node; yield the address, the env the runs get and the
    token; kill every process of the cluster after."""
    token = secrets.token_hex(16)
    env = cluster_env(token)
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


def ray_flags(cluster: dict, workers: int = 2) -> list[str]:
    """The CLI settings that run a command's shards on `cluster`."""
    flags = []
    for setting in ("executor.kind=ray", f"executor.address={cluster['address']}",
                    f"executor.workers={workers}"):  # fmt: skip
        flags += ["--set", setting]
    return flags


def _node_processes(token: str, ip: str) -> list[psutil.Process]:
    """The raylet of the node at `ip` and the processes it started (its workers)."""
    raylets = [
        p
        for p in _cluster_processes(token)
        if p.name() == "raylet" and f"--node_ip_address={ip}" in " ".join(p.cmdline())
    ]
    return [proc for r in raylets for proc in (r, *r.children(recursive=True))]


def lose_node2_mid_shard(proc: subprocess.Popen, progress: Path, cluster: dict) -> str:
    """Once `proc` (a run on `cluster`) has committed a shard and the second node's worker
    is inside another, lose that node: SIGKILL its raylet and its worker, as a crashed
    machine would go. Returns the unit the lost worker held."""
    deadline = time.time() + 900
    while proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
        try:
            doc = orjson.loads(progress.read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            continue
        busy = [w for w in doc["workers"] if w["node"] == NODE2 and w["state"] == "running"]
        if doc["shards_committed"] >= 1 and busy:
            victims = _node_processes(cluster["token"], NODE2)
            assert any(p.pid == busy[0]["pid"] for p in victims), "worker not under node 2"
            for p in victims:
                p.send_signal(signal.SIGKILL)
            return busy[0]["unit"]
    raise AssertionError("the run never had a shard in flight on the second node")


def run_rows(out: Path, table: str, run_id: str) -> list[dict]:
    """A run's rows of `table`, in a stable order, without the columns that are times."""
    from pipeline.store.store import Store

    rows = Store(out).read_run_table(run_id, table).to_pylist()
    rows = [{k: v for k, v in r.items() if k not in TIMES} for r in rows]
    return sorted(rows, key=lambda r: orjson.dumps(r, default=str, option=orjson.OPT_SORT_KEYS))
