"""Guided vs unguided proposer: what guided decoding costs and what it buys, side by side.

Same backend, same plan items and seeds, same run: `process_shard` over N records with
`generation.guided_proposer` off and on (order alternating per round). Prints wall time,
records/min, how many questions pass the validity rules (the answer and evidence are fixed
before the question, so guidance shapes only the question: an interrogative opener for the
answer's kind, the subject named) and why the rest failed, and the backend's decode counters:
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_guided_proposer.py [--n 16]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from generation_setup import load_engine, plan_items

from pipeline.core.config import load_config
from pipeline.generation.shards import process_shard
from pipeline.llm.base import SamplingParams

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "out" / "bench" / "guided"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16, help="records per mode")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--set", action="append", default=[], help="extra config overrides")
    args = ap.parse_args()
    # The transformers backend (its guided rows are masked by llguidance in our decode loop);
    # --set llm.backend=vllm measures vLLM's guided decoding instead.
    base = [f"store.out_dir={OUT}", "llm.backend=transformers", "llm.cache=false", *args.set]
    cfgs = {
        mode: load_config(None, [*base, f"generation.guided_proposer={mode == 'guided'}"])
        for mode in ("free", "guided")
    }
    cfg = cfgs["free"]
    engine = load_engine(cfg)
    gen = engine.generator
    items = plan_items(engine.retriever, args.n)
    backend = getattr(gen, "inner", gen)
    gen.generate(["warm-up"], SamplingParams(max_tokens=1))
    times: dict[str, list[float]] = {"free": [], "guided": []}
    outs, work = {}, {}
    for rnd in range(args.rounds):
        order = ("free", "guided") if rnd % 2 == 0 else ("guided", "free")
        for mode in order:
            ctx = engine.context(cfgs[mode])
            before = dict(backend.stats)
            t0 = time.perf_counter()
            outs[mode] = process_shard(ctx, 0, items)
            times[mode].append(time.perf_counter() - t0)
            work[mode] = {k: backend.stats[k] - before[k] for k in backend.stats}
    print(f"records={args.n} model={gen.model_id} attempts={cfg.generation.question_attempts}")
    for mode in ("free", "guided"):
        recs, pro = outs[mode].curriculum, outs[mode].proposer_rollouts
        best = min(times[mode])
        valid = sum(r["is_valid"] for r in recs)
        verbatim = sum(r["is_valid"] and r["is_verbatim"] for r in recs)
        reasons = Counter(r["invalid_reason"] for r in recs if not r["is_valid"])
        evidence = Counter(r["evidence_status"] for r in recs)
        turns = sum(p["turns"] for p in pro) / len(pro)
        w = work[mode]
        print(
            f"{mode:<7} wall {best:6.1f} s  records/min {60 * args.n / best:5.2f}  "
            f"valid {valid}/{args.n}  valid+verbatim {verbatim}/{args.n}  "
            f"proposer turns/record {turns:.2f}"
        )
        print(f"        evidence {dict(evidence)}  invalid because {dict(reasons)}")
        print(
            f"        decode {w['decode_s']:.1f} s for {w['generated_tokens']:.0f} tokens, "
            f"prefill {w['prefill_s']:.1f} s"
        )
    print(f"guided/free wall: {min(times['guided']) / min(times['free']):.2f}x")


if __name__ == "__main__":
    main()
