"""Records scored per minute: the batched engine vs a per-record sequential loop.

Same backend (the embedded CPU model), same records (the same plan items with the same seeds),
same run: `process_shard` over all N records at once (one generate call per turn for all
rollouts, one search batch per turn) against `process_shard` called once per record. The
order alternates each round so neither mode always runs on a warmer machine. Response caching
is off so both modes really generate.

Both modes do the same work: the transformers backend seeds every sampled row from (seed,
prompt text, occurrence, sample index), so a record's proposer, solver and verifier outputs do
not depend on which other records share its batch. The script checks that (records whose
outputs agree in both modes) and also prints per-unit-of-work rates (prompt and generated
tokens per second), plus where the time went (prefill, decode, everything else) from the
backend's counters. Wall and CPU time are both reported: the machine may be shared.
Also reports the teacher-forced vs Monte-Carlo verifier: cost ratio and Spearman agreement of
V over the same records:
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_generation.py [--n 8] [--rounds 1]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from generation_setup import load_engine, plan_items
from scipy.stats import spearmanr

from pipeline.agents.verifier import VerifierItem, verify_mc, verify_teacher_forced
from pipeline.core.config import load_config
from pipeline.generation.shards import process_shard

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "out" / "bench" / "generation"
_COMPARED = ("question", "answer", "evidence", "solver_k", "solver_n", "verifier_v")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8, help="records per mode")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--solver-n", type=int, default=5)
    ap.add_argument("--m", type=int, default=5)
    ap.add_argument("--verifier-records", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=None, help="llm.batch_size override")
    args = ap.parse_args()

    cfg = load_config(
        None,
        [
            f"store.out_dir={OUT}",
            "llm.backend=transformers",  # batched vs naive calls of our own decode loop
            f"rewards.n_solver={args.solver_n}",
            f"verifier.m={args.m}",
            "llm.cache=false",
            *([f"llm.batch_size={args.batch_size}"] if args.batch_size else []),
        ],
    )
    engine = load_engine(cfg)
    gen = engine.generator
    ctx = engine.context(cfg)
    items = plan_items(engine.retriever, args.n)

    backend = getattr(gen, "inner", gen)
    stats = getattr(backend, "stats", None)
    times = {"batched": [], "sequential": []}
    cpu = {"batched": [], "sequential": []}
    work: dict[str, dict] = {}
    outs = {}
    for rnd in range(args.rounds):
        order = ("batched", "sequential") if rnd % 2 == 0 else ("sequential", "batched")
        for mode in order:
            before = dict(stats) if stats is not None else {}
            t0, c0 = time.perf_counter(), time.process_time()
            if mode == "batched":
                recs = process_shard(ctx, 0, items).curriculum
            else:
                # Each record alone; the shard number fixes the seed, so use the same one.
                recs = [process_shard(ctx, 0, [it]).curriculum[0] for it in items]
            times[mode].append(time.perf_counter() - t0)
            cpu[mode].append(time.process_time() - c0)
            if stats is not None:
                work[mode] = {k: stats[k] - before[k] for k in stats}
                work[mode]["wall_s"] = times[mode][-1]
            outs[mode] = recs
    best = {m: min(t) for m, t in times.items()}
    best_cpu = {m: min(t) for m, t in cpu.items()}
    print(
        f"records={args.n} solver_n={args.solver_n} m={args.m} model={gen.model_id} "
        f"rounds={args.rounds} batch_size={cfg.llm.batch_size} "
        f"torch_threads={torch.get_num_threads()}"
    )
    same = sum(
        all(a[k] == b[k] for k in _COMPARED)
        for a, b in zip(outs["batched"], outs["sequential"], strict=True)
    )
    print(
        f"identical work: {same}/{args.n} records have the same question, answer, evidence, "
        f"solver k/n and verifier V in both modes"
    )
    for mode in ("sequential", "batched"):
        recs = outs[mode]
        valid = sum(r["is_valid"] for r in recs)
        rollouts = sum(r["solver_n"] or 0 for r in recs)
        print(
            f"{mode:<10} best wall {best[mode]:7.1f} s  cpu {best_cpu[mode]:7.1f} s  "
            f"records/min {60 * args.n / best[mode]:6.2f} (per cpu-min "
            f"{60 * args.n / best_cpu[mode]:6.2f})  valid {valid}/{args.n}  "
            f"solver rollouts {rollouts}"
        )
    print(
        f"speed-up batched vs sequential: wall {best['sequential'] / best['batched']:.2f}x, "
        f"cpu {best_cpu['sequential'] / best_cpu['batched']:.2f}x"
    )
    if work:
        print("where the time went (last round, backend counters):")
        for mode in ("sequential", "batched"):
            w = work[mode]
            other = w["wall_s"] - w["prefill_s"] - w["decode_s"]
            saved = 1 - w["prefill_tokens"] / max(w["prompt_tokens"], 1)
            waste = 1 - w["row_steps"] / max(w["padded_row_steps"], 1)
            print(
                f"  {mode:<10} prefill {w['prefill_s']:6.1f} s ({w['prefill_tokens']:.0f} of "
                f"{w['prompt_tokens']:.0f} prompt tokens computed, {saved:.0%} shared)  "
                f"decode {w['decode_s']:6.1f} s ({w['decode_steps']:.0f} steps, "
                f"{w['row_steps']:.0f} row-steps; run-to-slowest-row would be "
                f"{w['padded_row_steps']:.0f}, {waste:.0%} saved by dropping finished rows)  "
                f"other {other:5.1f} s"
            )
            print(
                f"  {'':<10} {w['rows']:.0f} generation rows, {w['generated_tokens']:.0f} "
                f"generated tokens: {w['generated_tokens'] / max(w['decode_s'], 1e-9):.1f} "
                f"tok/s decode, {w['prompt_tokens'] / max(w['prefill_s'], 1e-9):.0f} prompt "
                f"tok/s prefill (effective)"
            )

    # Verifier: teacher-forced vs Monte-Carlo on the same (q, a, e) triples.
    triples = [
        VerifierItem(r["record_id"] + f":{i}", r["question"], r["answer"], r["evidence"])
        for i, r in enumerate(outs["batched"])
        if r["is_valid"] and r["is_verbatim"]
    ][: args.verifier_records]
    if len(triples) < 3:
        print(f"verifier comparison skipped: only {len(triples)} valid verbatim records")
        return
    v = cfg.verifier
    t0 = time.perf_counter()
    mc = verify_mc(gen, triples, ctx.shots, args.m, v.temperature, v.top_p, 12, 1)
    t_mc = time.perf_counter() - t0
    t0 = time.perf_counter()
    tf = verify_teacher_forced(gen, triples, ctx.shots)
    t_tf = time.perf_counter() - t0
    rho = spearmanr([x.v for x in mc], [x.v for x in tf]).statistic
    print(
        f"verifier on {len(triples)} records: MC(m={args.m}) {t_mc:.1f} s, teacher-forced "
        f"{t_tf:.1f} s, cost ratio MC/TF {t_mc / t_tf:.1f}x, Spearman(V_mc, V_tf) {rho:.3f}"
    )


if __name__ == "__main__":
    main()
