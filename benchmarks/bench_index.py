"""IVF vs exact (Flat) FAISS search: recall@10 and queries/s over an nprobe sweep.

Builds both indexes with the project's `build_faiss_index` (factory "auto", i.e. IVF{K},Flat with
K = ivf_lists(N) for N >= 200k, and "Flat") from memory-mapped .npy shards of synthetic
L2-normalised vectors with cluster structure: a two-level Gaussian mixture (topics -> clusters
-> points), each cluster spread over its own low-rank subspace, so nearest neighbours are graded
and clusters overlap as in text embeddings. Held-out queries come from the same distribution;
ground truth is the exact top-k of the Flat index. All timings are measured side by side in one
run (best of --repeats, interleaved):
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_index.py [--n 500000] [--threads 2]
Prints build times, recall@10 and QPS per nprobe, the IVF/Flat QPS ratio, and the smallest
nprobe reaching --target-recall with its speed-up over Flat (target: >= 10x).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import faiss
import numpy as np

from pipeline.retrieval.faiss_index import META_FILE, build_faiss_index, choose_factory

OUT = Path(__file__).resolve().parent.parent / "data" / "out" / "bench" / "index"


class Mixture:
    """Topics -> clusters -> points; cluster sizes and spreads vary like real corpora.

    A point is its cluster centroid plus a low-rank offset (a random `local_dim`-dimensional
    subspace per cluster, so neighbours inside a cluster are graded, not equidistant) plus
    isotropic noise, then L2-normalised.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        rng = np.random.default_rng(args.seed)
        dim, clusters, r = args.dim, args.clusters, args.local_dim
        topic = _unit(rng.standard_normal((args.topics, dim), dtype=np.float32))
        parent = rng.integers(0, args.topics, clusters)
        offset = _unit(rng.standard_normal((clusters, dim), dtype=np.float32))
        self.centroids = _unit(topic[parent] + offset)  # clusters of a topic share ~0.5 cosine
        gauss = rng.standard_normal((clusters, dim, r), dtype=np.float32)
        self.basis = np.linalg.qr(gauss)[0].transpose(0, 2, 1) * (args.local_noise / np.sqrt(r))
        weights = rng.lognormal(0.0, 1.0, clusters)  # uneven cluster sizes
        self.p = weights / weights.sum()
        self.spread = rng.uniform(0.7, 1.3, clusters).astype(np.float32)
        self.iso = args.noise / np.sqrt(dim)
        self.dim, self.r = dim, r

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        label = rng.choice(len(self.p), size=n, p=self.p)
        x = np.empty((n, self.dim), dtype=np.float32)
        order = np.argsort(label, kind="stable")
        for rows in np.split(order, np.flatnonzero(np.diff(label[order])) + 1):
            c, m = label[rows[0]], len(rows)
            local = rng.standard_normal((m, self.r), dtype=np.float32) @ self.basis[c]
            iso = rng.standard_normal((m, self.dim), dtype=np.float32) * self.iso
            x[rows] = self.centroids[c] + self.spread[c] * (local + iso)
        return _unit(x)


def _unit(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def write_shards(mix: Mixture, n: int, shard_size: int, out: Path, seed: int) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, start in enumerate(range(0, n, shard_size)):
        rows = min(shard_size, n - start)
        path = out / f"vec-{i:05d}.npy"
        mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, mix.dim))
        mm[:] = mix.sample(rows, np.random.default_rng([seed, i]))
        mm.flush()
        del mm
        paths.append(path)
    return paths


def timed_build(paths, dim, factory, out, args) -> tuple[faiss.Index, str, float]:
    start = time.perf_counter()
    path = build_faiss_index(
        paths,
        dim,
        factory,
        out,
        meta={"model": "synthetic", "query_prompt": ""},
        threads=args.threads,
        train_per_list=args.train_per_list,
        seed=args.seed,
    )
    seconds = time.perf_counter() - start
    chosen = json.loads((out / META_FILE).read_text())["factory"]
    return faiss.read_index(str(path)), chosen, seconds


def search_seconds(index: faiss.Index, queries: np.ndarray, k: int):
    start = time.perf_counter()
    _, ids = index.search(queries, k)
    return time.perf_counter() - start, ids


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500_000, help="indexed vectors")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--clusters", type=int, default=2_000)
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--local-dim", type=int, default=16, help="rank of within-cluster spread")
    ap.add_argument("--local-noise", type=float, default=1.0, help="low-rank offset norm")
    ap.add_argument("--noise", type=float, default=0.5, help="isotropic noise norm")
    ap.add_argument("--queries", type=int, default=1_000)
    ap.add_argument("--shard-size", type=int, default=100_000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--nprobe", default="1,2,4,8,16,32,64,128")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--train-per-list", type=int, default=64)
    ap.add_argument("--target-recall", type=float, default=0.95)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", action="store_true", help=f"keep scratch files under {OUT}")
    args = ap.parse_args()
    faiss.omp_set_num_threads(args.threads)
    nprobes = [int(p) for p in args.nprobe.split(",")]
    t_total = time.perf_counter()
    shutil.rmtree(OUT, ignore_errors=True)

    start = time.perf_counter()
    mix = Mixture(args)
    paths = write_shards(mix, args.n, args.shard_size, OUT / "shards", args.seed)
    queries = mix.sample(args.queries, np.random.default_rng([args.seed, 10**6]))  # held out
    gen_s = time.perf_counter() - start

    ivf, ivf_factory, ivf_build = timed_build(paths, args.dim, "auto", OUT / "ivf", args)
    flat, _, flat_build = timed_build(paths, args.dim, "Flat", OUT / "flat", args)
    assert ivf_factory == choose_factory("auto", args.n), ivf_factory
    ivf_core = faiss.extract_index_ivf(ivf)

    flat_s, recall, ivf_s = [], {}, {p: [] for p in nprobes}
    truth = scores = None
    for _ in range(args.repeats):  # interleave Flat and every nprobe in each round
        seconds, ids = search_seconds(flat, queries, args.k)
        flat_s.append(seconds)
        if truth is None:
            truth = ids
            scores, _ = flat.search(queries, args.k)
        for p in nprobes:
            ivf_core.nprobe = p
            seconds, ids = search_seconds(ivf, queries, args.k)
            ivf_s[p].append(seconds)
            hits = [len(set(a) & set(b)) for a, b in zip(ids, truth, strict=True)]
            recall[p] = sum(hits) / truth.size

    rand = np.einsum("ij,ij->i", queries[1:], queries[:-1])
    nq = len(queries)
    print(
        f"vectors={args.n:,} dim={args.dim} shards={len(paths)} queries={nq} k={args.k} "
        f"threads={args.threads} clusters={args.clusters} topics={args.topics}"
    )
    print(
        f"query->neighbour cosine: top-1 {scores[:, 0].mean():.3f}  "
        f"top-{args.k} {scores[:, -1].mean():.3f}  random pair {rand.mean():.3f}"
    )
    n_train = min(args.n, args.train_per_list * ivf_core.nlist)
    print(f"data generation + shard writes: {gen_s:6.1f} s")
    print(
        f"build {ivf_factory:<14}: {ivf_build:6.1f} s  "
        f"(train_per_list={args.train_per_list}, {n_train:,} training vectors)"
    )
    print(f"build {'Flat':<14}: {flat_build:6.1f} s")
    print()
    flat_qps = nq / min(flat_s)
    print(f"{'index':<16} {'nprobe':>6} {'recall@' + str(args.k):>10} {'QPS':>10} {'IVF/Flat':>9}")
    print(f"{'Flat':<16} {'-':>6} {1.0:>10.4f} {flat_qps:>10.1f} {1.0:>8.2f}x")
    best = None
    for p in nprobes:
        qps = nq / min(ivf_s[p])
        print(f"{ivf_factory:<16} {p:>6} {recall[p]:>10.4f} {qps:>10.1f} {qps / flat_qps:>8.2f}x")
        if best is None and recall[p] >= args.target_recall:
            best = (p, recall[p], qps / flat_qps)
    print()
    if best:
        print(
            f"smallest nprobe with recall@{args.k} >= {args.target_recall}: {best[0]} "
            f"(recall {best[1]:.4f}), speed-up over Flat: {best[2]:.1f}x"
        )
    else:
        print(f"no nprobe in {nprobes} reached recall@{args.k} >= {args.target_recall}")
    print(f"total runtime: {time.perf_counter() - t_total:.0f} s")
    if not args.keep:
        shutil.rmtree(OUT, ignore_errors=True)


if __name__ == "__main__":
    main()
