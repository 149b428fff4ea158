"""Executors side by side: what Ray costs, and what a second worker buys.

1. Overhead: the same generation shards (same plan items, seeds, backend, response cache off)
   through `run_generation` on the local executor and on a Ray executor with one worker (a
   local cluster started by this script, the worker holding both cores like the local run's
   torch does). Wall and CPU time, CPU counting every process involved (this one, and for Ray
   the worker, raylet and GCS). Model loading counts on both sides (a worker loads its own);
   the cluster's start is reported apart (production connects to a running cluster). Also
   checks that both executors wrote the same records.
2. Scaling: the index's embedding pass over a synthetic corpus with 1 and 2 Ray workers, one
   core and one torch thread each, plus the local executor on one thread as the reference.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_executor.py \
        [--shards 4] [--shard-size 2] [--rounds 2] [--passages 4000] [--embed-shard 500]
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import psutil
from synthetic_corpus import write_synthetic_corpus

from pipeline.core.config import PipelineConfig, load_config
from pipeline.executors import LocalExecutor
from pipeline.executors.ray_executor import RayExecutor
from pipeline.generation.run import GenerationStep, ShardDone, run_generation
from pipeline.retrieval.corpus import locate_corpus
from pipeline.retrieval.embedding import Embedder, corpus_fingerprint, embed_corpus
from pipeline.retrieval.index_build import ensure_index
from pipeline.selector.run_plan import Plan
from pipeline.store.store import Store

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "out" / "bench" / "executor"
TASKS = ("factual", "comparison", "causal", "temporal", "aggregation")


class TimedStep(GenerationStep):
    """The generation step, reporting the CPU seconds its own process spent in setup and in
    each shard (a Ray worker's CPU is otherwise lost when the worker is killed at the end)."""

    def setup(self) -> None:
        t = time.process_time()
        super().setup()
        self.setup_cpu = time.process_time() - t

    def run(self, unit):
        t = time.process_time()
        done = super().run(unit)
        cpu = time.process_time() - t + getattr(self, "setup_cpu", 0.0)
        self.setup_cpu = 0.0  # counted once, with the worker's first shard
        return TimedDone(done.files, done.records, cpu)


@dataclass(frozen=True)
class TimedDone(ShardDone):
    cpu: float = 0.0


class Recording:
    """An executor that keeps the results it hands to the caller (the workers' CPU)."""

    def __init__(self, inner) -> None:
        self.inner, self.kind, self.results = inner, inner.kind, []

    def map(self, step, units, on_result, should_stop=None, on_progress=None) -> int:
        def keep(unit, result, worker) -> None:
            self.results.append(result)
            on_result(unit, result, worker)

        return self.inner.map(step, units, keep, should_stop, on_progress)

    def close(self) -> None:
        pass


def daemons_cpu() -> dict[int, float]:
    """CPU seconds of this process's long-lived descendants (a local Ray cluster's GCS,
    raylet, agents), by pid; workers come and go and are counted by TimedStep instead."""
    out = {}
    for p in psutil.Process().children(recursive=True):
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
        except psutil.NoSuchProcess:
            continue
    return out


def plan_for(cfg: PipelineConfig, index_dir: Path, n: int) -> Plan:
    from pipeline.retrieval.faiss_index import PassageTable

    table = PassageTable(index_dir / "passages.parquet")
    step = max(len(table) // n, 1)
    rows = [i * step for i in range(n)]
    ids = [pid for pid, _, _ in table.get(rows)]
    from pipeline.selector.run_plan import PlanItem

    items = [
        PlanItem(i, r, pid, 0, TASKS[i % len(TASKS)], 1 + i % 4)
        for i, (r, pid) in enumerate(zip(rows, ids, strict=True))
    ]
    return Plan("bench", 1, items)


def records(store: Store, run_id: str) -> list[tuple]:
    rows = store.read_run_table(run_id, "curriculum").to_pylist()
    keep = ("record_id", "question", "answer", "evidence", "solver_k", "verifier_v")
    return sorted(tuple(r[k] for k in keep) for r in rows)


def overhead(args) -> None:
    print("== 1. executor overhead: generation, local vs Ray with one worker ==")
    cfg = load_config(
        None,
        [
            f"store.out_dir={OUT / 'gen'}",
            "llm.backend=transformers",
            "llm.cache=false",
            f"generation.shard_size={args.shard_size}",
            f"generation.num_sources={args.shards * args.shard_size}",
            "executor.num_cpus=2",
            # The overhead is per shard and per worker, not per token: small shards (one
            # search turn, n = 2, m = 2) make it as visible as it can be.
            f"generation.max_turns={args.max_turns}",
            f"rewards.n_solver={args.solver_n}",
            f"verifier.m={args.m}",
        ],
    )
    art = ensure_index(cfg, progress=False, corpus=locate_corpus(cfg), out_dir=OUT / "gen")
    plan = plan_for(cfg, art.dir, args.shards * args.shard_size)
    t = time.perf_counter()
    ray_exec = RayExecutor(cfg.executor)
    ray_exec.connect()  # the cluster's start, timed apart
    cluster_s = time.perf_counter() - t
    times = {"local": [], "ray": []}
    recs = {}
    # Rounds alternate the order, so neither executor always runs on a warmer (or busier)
    # machine; each round starts from empty shard folders with the response cache off.
    for rnd in range(args.rounds):
        for kind in ("local", "ray") if rnd % 2 == 0 else ("ray", "local"):
            run_id = "bench"  # one id: record ids and per-shard seeds derive from it
            store = Store(OUT / "gen" / kind)
            shutil.rmtree(store.root / "runs", ignore_errors=True)
            shutil.rmtree(store.root / "shards", ignore_errors=True)
            step = TimedStep(cfg, store, run_id, _today(), art.dir)
            executor = Recording(LocalExecutor() if kind == "local" else ray_exec)
            before, driver = daemons_cpu(), time.process_time()
            t = time.perf_counter()
            rep = run_generation(
                step, Plan(run_id, 1, plan.items), executor, lambda s, n: None, None
            )
            wall = time.perf_counter() - t
            after = daemons_cpu()
            daemons = sum(after[p] - before[p] for p in after if p in before)
            # A Ray worker's own CPU comes back with its shards (in-process, the driver's).
            workers = sum(r.cpu for r in executor.results) if kind == "ray" else 0.0
            cpu = time.process_time() - driver + daemons + workers
            times[kind].append((wall, cpu))
            recs[kind] = records(store, run_id)
            print(f"round {rnd} {kind:>5}: {rep.shards_written} shards, wall {wall:7.1f} s, "
                  f"CPU {cpu:7.1f} s")  # fmt: skip
    ray_exec.close()
    lw, lc = (sum(x) for x in zip(*times["local"], strict=True))
    rw, rc = (sum(x) for x in zip(*times["ray"], strict=True))
    print(f"Ray cluster start (not counted): {cluster_s:.1f} s")
    print(f"ratio ray/local over {args.rounds} rounds: wall {rw / lw:.3f}x, CPU {rc / lc:.3f}x "
          "(target <= 1.10x)")  # fmt: skip
    same = recs["local"] == recs["ray"]
    print(f"same records from both executors: {'yes' if same else 'NO'} ({len(recs['ray'])})")


def _today():
    import datetime as dt

    return dt.datetime.now(dt.UTC).date()


def scaling(args) -> None:
    print("== 2. scaling: the embedding pass, 1 vs 2 Ray workers (1 core, 1 thread each) ==")
    corpus = OUT / "corpus.jsonl"
    write_synthetic_corpus(ROOT / "data" / "sample" / "corpus.jsonl", args.passages, corpus, 100)
    cfg = load_config(None, [f"store.out_dir={OUT / 'embed'}", f"corpus.path={corpus}"])
    from pipeline.retrieval.corpus import load_corpus

    passages = OUT / "embed" / "passages.parquet"
    load_corpus(corpus, passages)
    fp = corpus_fingerprint(passages)
    embedder = Embedder.from_config(cfg)
    times = {}
    for label, workers in (("local, 1 thread", 0), ("ray, 1 worker", 1), ("ray, 2 workers", 2)):
        out_dir = OUT / "embed" / f"emb-{workers}"
        shutil.rmtree(out_dir, ignore_errors=True)
        if workers:
            ex_cfg = cfg.executor.model_copy(update={"kind": "ray", "workers": workers})
            executor = RayExecutor(ex_cfg, env={"OMP_NUM_THREADS": "1"})
        else:
            import torch

            torch.set_num_threads(1)
            executor = LocalExecutor()
        if workers:
            executor.connect()
        t = time.perf_counter()
        embed_corpus(embedder, passages, out_dir, args.embed_shard, fp, False, executor)
        times[label] = time.perf_counter() - t
        executor.close()
        print(f"{label:>16}: {times[label]:6.1f} s ({args.passages / times[label]:.0f} passages/s)")
    one, two = times["ray, 1 worker"], times["ray, 2 workers"]
    print(f"speed-up 2 workers / 1 worker: {one / two:.2f}x (ideal 2.00x on 2 cores)")
    print(f"Ray 1 worker vs local 1 thread: {one / times['local, 1 thread']:.3f}x wall")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--shard-size", type=int, default=2)
    ap.add_argument("--passages", type=int, default=4000)
    ap.add_argument("--embed-shard", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-turns", type=int, default=1)
    ap.add_argument("--solver-n", type=int, default=2)
    ap.add_argument("--m", type=int, default=2)
    ap.add_argument("--only", choices=("overhead", "scaling"), default=None)
    args = ap.parse_args()
    if args.only in (None, "overhead"):
        overhead(args)
    if args.only in (None, "scaling"):
        scaling(args)


if __name__ == "__main__":
    main()
