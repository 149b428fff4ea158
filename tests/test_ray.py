"""executor.kind=ray on a real two-node Ray cluster on the loopback range (tests/ray_cluster.py).

The index's embedding shards on the cluster's two workers give the vectors of the local
index; a cluster that cannot run what was asked is one line and exit 2. The nightly run's
generation shards on the cluster, one node lost mid-shard, land exactly the records of the
same night run locally: `test_nightly`'s second night runs on both.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.retrieval.embedding import load_shards
from tests.conftest import ROOT, SAMPLE_CORPUS, corpus_head, free_port
from tests.ray_cluster import HEAD, ray_flags

pytestmark = pytest.mark.slow


def _vectors(index_dir) -> dict[str, np.ndarray]:
    """An index's passage vectors by passage id (its shards in order are its rows)."""
    emb = np.concatenate(load_shards(sorted((index_dir / "emb").glob("emb-*.npy"))))
    ids = pq.read_table(index_dir / "passages.parquet", columns=["id"]).column("id").to_pylist()
    assert len(ids) == len(emb)
    return dict(zip(ids, emb, strict=True))


def test_index_embedded_on_the_cluster_has_the_local_vectors(tmp_path, ray_cluster, sample_index):
    """The first 150 sample passages in 3 embedding shards over the cluster's 2 workers: every
    shard committed by the driver, each vector the one the local index holds."""
    corpus = corpus_head(SAMPLE_CORPUS, 150, tmp_path / "corpus.jsonl")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "cli", "index", "build", "--verbose", *ray_flags(ray_cluster)]
    for setting in (f"store.out_dir={out}", f"corpus.path={corpus}", "embedding.shard_size=50"):
        cmd += ["--set", setting]
    env = {**ray_cluster["env"], "PREFECT_HOME": str(tmp_path / "prefect")}
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "150 passages, built (3 shards embedded)" in res.stdout
    log = res.stdout + res.stderr  # --verbose: the executor's lines on the console too
    for shard in (1, 2, 3):
        assert f"embedding shard {shard}/3 done (worker" in log, log[-3000:]
    assert "127.0.0.3" in log  # the second node took shards too

    (built,) = (out / "index").iterdir()
    ray, local = _vectors(built), _vectors(sample_index.dir)
    assert len(ray) == 150
    for pid, vec in ray.items():
        np.testing.assert_allclose(vec, local[pid], atol=1e-6)


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
