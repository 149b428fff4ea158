"""Selector benchmarks: streamed clustering of >= 1M x 384 float32 vectors, and draw throughput.

    .venv/bin/python benchmarks/bench_selector.py [--rows 1000000] [--dim 384] [--k 10]
                                                  [--draws 100000] [--dir DIR] [--keep]

1. generate: writes rows x dim float32 vectors (a mixture of 100 unit-norm directions plus
   noise, L2-normalised like E5 embeddings) as 50k-row .npy shards, as the index stage does;
2. cluster:  `cluster_embeddings` over those shards (streamed partial_fit + streamed assignment
   pass writing the CLUSTERS Parquet): wall time and peak RSS;
3. select:   `Selector` over that clustering: time to draw N (cluster, task, document, hop)
   tuples and to feed N feedback rows back.
Each phase runs in a fresh child process, so the peak RSS (ru_maxrss) it reports is its own
and not inflated by the generator. The shards were just written, so they are in the page
cache (a warm read); page cache is not part of RSS because the reader uses plain reads.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHARD_ROWS = 50_000


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def generate(out: Path, rows: int, dim: int, seed: int) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(100, dim)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    t0, paths = time.perf_counter(), []
    for shard, start in enumerate(range(0, rows, SHARD_ROWS)):
        n = min(SHARD_ROWS, rows - start)
        x = centers[rng.integers(0, len(centers), n)]
        x += rng.standard_normal((n, dim), dtype=np.float32) * np.float32(0.04)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        path = out / f"emb-{shard:05d}.npy"
        with path.open("wb") as fh:  # header + raw rows: no memory map, no full-array copy
            header = {"descr": "<f4", "fortran_order": False, "shape": (n, dim)}
            np.lib.format.write_array_header_1_0(fh, header)
            x.tofile(fh)
        paths.append(str(path))
    return {
        "phase": "generate",
        "shards": len(paths),
        "bytes": rows * dim * 4,
        "seconds": time.perf_counter() - t0,
        "peak_rss_mb": _peak_mb(),
    }


def cluster(out: Path, k: int, seed: int, batch_size: int, epochs: int) -> dict:
    from sklearn.cluster import MiniBatchKMeans  # noqa: F401  (import cost outside the timing)

    from pipeline.selector import cluster_embeddings

    paths = sorted((out / "emb").glob("emb-*.npy"))
    base = _rss_mb()
    t0 = time.perf_counter()
    res = cluster_embeddings(
        paths, None, k, seed, out / "clusters", batch_size=batch_size, epochs=epochs, reuse=False
    )
    seconds = time.perf_counter() - t0
    return {
        "phase": "cluster",
        "rows": res.n_rows,
        "dim": int(res.centroids.shape[1]),
        "k": res.k,
        "seconds": seconds,
        "rows_per_s": res.n_rows / seconds,
        "baseline_rss_mb": base,
        "peak_rss_mb": _peak_mb(),
        "inertia_per_row": res.inertia / res.n_rows,
        "cluster_sizes_min_max": [int(res.sizes().min()), int(res.sizes().max())],
        "dir": str(res.dir),
    }


def select(cluster_dir: Path, draws: int, seed: int) -> dict:
    from pipeline.core.config import SelectorConfig
    from pipeline.selector import ClusterResult, Feedback, Selector

    t0 = time.perf_counter()
    clusters = ClusterResult.load(cluster_dir)
    load_s = time.perf_counter() - t0
    sel = Selector.fresh(clusters, SelectorConfig(), seed)
    t0 = time.perf_counter()
    out = sel.draw(draws)
    draw_s = time.perf_counter() - t0
    feedback = [
        Feedback(d.cluster_id, d.task_type, f"What does passage {d.passage_id} describe?", "x")
        for d in out
    ]
    t0 = time.perf_counter()
    sel.update(feedback, run_score=0.5)
    update_s = time.perf_counter() - t0
    used = int((sel.uses > 0).sum())
    return {
        "phase": "select",
        "draws": draws,
        "load_clusters_s": load_s,
        "draw_s": draw_s,
        "draws_per_s": draws / draw_s,
        "update_s": update_s,
        "distinct_documents": used,
        "max_uses": int(sel.uses.max()),
        "peak_rss_mb": _peak_mb(),
    }


def _child(args: list[str]) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), *args]
    proc = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--draws", type=int, default=100_000)
    ap.add_argument("--batch-size", type=int, default=4096)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", type=Path, default=None, help="work dir (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the generated shards")
    ap.add_argument("--phase", choices=["generate", "cluster", "select"], help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.phase == "generate":
        print(json.dumps(generate(args.dir / "emb", args.rows, args.dim, args.seed)))
        return
    if args.phase == "cluster":
        print(json.dumps(cluster(args.dir, args.k, args.seed, args.batch_size, args.epochs)))
        return
    if args.phase == "select":
        print(json.dumps(select(args.dir, args.draws, args.seed)))
        return

    work = args.dir or Path(tempfile.mkdtemp(prefix="bench-selector-"))
    common = ["--dir", str(work), "--seed", str(args.seed)]
    try:
        gen = _child(
            ["--phase", "generate", "--rows", str(args.rows), "--dim", str(args.dim), *common]
        )
        opts = ["--k", str(args.k), "--batch-size", str(args.batch_size)]
        clu = _child(["--phase", "cluster", *opts, "--epochs", str(args.epochs), *common])
        sel = _child(["--phase", "select", "--draws", str(args.draws), "--dir", clu["dir"]])
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    gib = gen["bytes"] / 2**30
    print(f"vectors: {args.rows:,} x {args.dim} float32 = {gib:.2f} GiB in {gen['shards']} shards")
    print(
        f"cluster (K={clu['k']}, batch {args.batch_size}, {args.epochs} epochs): "
        f"{clu['seconds']:.1f} s ({clu['rows_per_s']:,.0f} rows/s), "
        f"peak RSS {clu['peak_rss_mb']:.0f} MB (after imports {clu['baseline_rss_mb']:.0f} MB; "
        f"vectors {gen['bytes'] / 2**20:.0f} MB), cluster sizes {clu['cluster_sizes_min_max']}"
    )
    print(
        f"select: {sel['draws']:,} draws in {sel['draw_s']:.2f} s "
        f"({sel['draws_per_s']:,.0f}/s), update of {sel['draws']:,} rows {sel['update_s']:.2f} s, "
        f"{sel['distinct_documents']:,} distinct documents (max uses {sel['max_uses']}), "
        f"peak RSS {sel['peak_rss_mb']:.0f} MB"
    )
    print(json.dumps({"generate": gen, "cluster": clu, "select": sel}, indent=2))


if __name__ == "__main__":
    main()
