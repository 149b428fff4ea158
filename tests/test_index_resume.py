"""Kill a real `curriculum index build` mid-embedding; the rerun embeds only missing shards."""

import os
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT, corpus_head

pytestmark = pytest.mark.slow


def test_killed_embedding_resumes_at_missing_shards(tmp_path, realdata):
    out = tmp_path / "out"
    # 8 shards of 25 real passages
    corpus = corpus_head(realdata / "wiki18_sample_1000.jsonl", 200, tmp_path / "wiki18.jsonl")
    shards = 8
    build = [
        sys.executable, "-m", "cli", "index", "build",
        "--set", f"corpus.path={corpus}",
        "--set", f"store.out_dir={out}",
        "--set", "embedding.shard_size=25",
    ]  # fmt: skip
    # Batches of 2: slow enough to be killed between shards. The batch size is not part of
    # the index's identity, so the reruns take the default and find the same index.
    cmd = [*build, "--set", "embedding.batch_size=2"]
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    manifest = None
    deadline = time.time() + 600
    done_before = 0
    while time.time() < deadline and proc.poll() is None:
        found = list(out.glob("index/*/emb/embeddings_manifest.parquet"))
        if found:
            manifest = found[0]
            try:
                done_before = pq.read_metadata(manifest).num_rows
            except OSError:  # being replaced right now
                done_before = 0
            if done_before >= 3:
                break
        time.sleep(0.05)
    assert proc.poll() is None, "index build finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = pq.read_metadata(manifest).num_rows
    assert 3 <= done_before < shards
    kept = {p.name: p.stat().st_mtime_ns for p in manifest.parent.glob("emb-*.npy")}
    rows = pq.read_table(manifest).to_pylist()

    res = subprocess.run(build, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"built ({shards - done_before} shards embedded)" in res.stdout
    for r in rows:  # shards committed before the kill were not recomputed
        assert (manifest.parent / r["path"]).stat().st_mtime_ns == kept[r["path"]]
    assert pq.read_metadata(manifest).num_rows == shards

    again = subprocess.run(build, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0 and "unchanged, reused" in again.stdout
