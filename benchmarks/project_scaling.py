"""Project a production night on N GPUs from what an embedded run measured.

Reads a landed catalog's cost rows (`step_costs`, the runner's account of every committed
shard: the engine's own generated-token counts per step) and scales each step's
generated tokens per record to the production settings (`configs/production.yaml`) by the
ratio of its caps (samples x turns x tokens per turn) — the embedded run's fill of its caps
kept — and, as the worst case, every cap full. Divided by a per-GPU decode throughput this
gives GPU-hours for the production night's sources and wall hours on N GPUs (one Ray worker
each). Prefill is left out of the GPU time: with vLLM's prefix caching a turn re-reads its
transcript from the cache (`prompt_tokens_cached` says how much), and fresh tokens prefill at
tens of thousands of tokens/s (bench_gpu_shapes.py). A run whose calls the response cache
answered reports no tokens for them: project from a run landed with an empty cache.

    .venv/bin/python benchmarks/project_scaling.py --catalog data/out/curriculum.duckdb \
        [--run-id ID] [--decode-tok-s 10000] [--gpus 1 8 64]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import duckdb
import yaml

from pipeline.core.config import PipelineConfig, load_config
from pipeline.core.variants import load

ROOT = Path(__file__).resolve().parent.parent


def caps(c: PipelineConfig) -> dict[str, float]:
    """Per record, the most tokens each step may generate under config `c`."""
    g, r, v, q = c.generation, c.rewards, c.verifier, c.gates
    estimators = load("verifier method", v.method).estimators
    mc, tf = "mc" in estimators, "teacher_forced" in estimators
    # a teacher-forced score is a forward pass; vLLM samples one token per scored prompt
    return {
        "propose": g.question_attempts * g.proposer_max_tokens,
        "solve": r.n_solver * g.max_turns * g.solver_max_tokens,
        "verify": (2 * v.m * g.answer_max_tokens if mc else 0) + (2 if tf else 0),
        "gold_evidence": q.gold_n * g.answer_max_tokens,
        "shortcut": 2 * q.shortcut_n * min(g.max_turns, 3) * g.solver_max_tokens * q.shortcut,
        "controls": 3 * (v.m * g.answer_max_tokens if mc else 1) * q.controls,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--catalog", type=Path, default=ROOT / "data/out/curriculum.duckdb")
    ap.add_argument("--run-id", default=None)
    ap.add_argument(
        "--decode-tok-s",
        type=float,
        default=10_000.0,
        help="generated tokens/s one GPU sustains for the production model",
    )
    ap.add_argument("--gpus", type=int, nargs="+", default=[1, 8, 64])
    args = ap.parse_args()

    con = duckdb.connect(str(args.catalog), read_only=True)
    run_id = (
        args.run_id
        or con.execute("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()[0]
    )
    (config_yaml,) = con.execute(
        "SELECT config_yaml FROM runs WHERE run_id = ?", [run_id]
    ).fetchone()
    run_cfg = PipelineConfig.model_validate(yaml.safe_load(config_yaml))
    n_rec, accepted = con.execute(
        "SELECT records, accepted FROM run_costs WHERE run_id = ?", [run_id]
    ).fetchone()
    steps = {
        step: (gen, calls)
        for step, gen, calls in con.execute(
            "SELECT step, generated_tokens, llm_calls FROM step_costs WHERE run_id = ?", [run_id]
        ).fetchall()
    }
    if not steps or all(gen is None for gen, _ in steps.values()):
        raise SystemExit(f"run {run_id} has no token counts (a backend that does not report "
                         "them, or a run landed before the cost rows)")  # fmt: skip
    emb = caps(run_cfg)
    print(f"run {run_id}: {n_rec} records, {accepted} accepted; generated tokens per record "
          "by step, as the engine reported them:")  # fmt: skip
    per_step = {}
    for step, (gen, calls) in sorted(steps.items()):
        per_step[step] = (gen or 0) / max(n_rec, 1)
        fill = f", {per_step[step] / emb[step]:.0%} of its caps" if emb.get(step) else ""
        print(f"  {step:>14}: {per_step[step]:8.1f} tokens/record, {calls} calls{fill}")
    measured = sum(per_step.values())
    print(f"  {'all steps':>14}: {measured:8.1f} tokens/record "
          f"({measured * n_rec / max(accepted, 1):,.0f} per accepted record)")  # fmt: skip

    prod = load_config(ROOT / "configs" / "production.yaml")
    pg, pr, pv = prod.generation, prod.rewards, prod.verifier
    full = caps(prod)
    # Each step's tokens scale with its caps; a step the embedded run capped at 0 stays 0.
    kept = sum(per_step.get(s, 0.0) * full[s] / emb[s] for s in full if emb[s])
    worst = sum(full.values())
    sources = pg.num_sources
    print(f"\nproduction ({sources:,} sources, n={pr.n_solver}, m={pv.m}, {pg.max_turns} turns, "
          f"{pg.proposer_max_tokens}/{pg.solver_max_tokens} tokens per turn), "
          f"at {args.decode_tok_s:,.0f} generated tokens/s per GPU:")  # fmt: skip
    for label, per in (("embedded fill kept", kept), ("every cap full", worst)):
        total = per * sources
        gpu_h = total / args.decode_tok_s / 3600
        walls = ", ".join(f"{n} GPUs {gpu_h / n:.1f} h" for n in args.gpus)
        print(f"  {label:>19}: {per:,.0f} tokens/record, {total / 1e9:.2f} B tokens, "
              f"{gpu_h:,.1f} GPU-hours -> {walls}")  # fmt: skip


if __name__ == "__main__":
    main()
