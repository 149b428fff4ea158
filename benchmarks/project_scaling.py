"""Project a production night on N GPUs from what an embedded run measured (issue 15).

Reads a landed catalog and counts, per record, the model calls and tokens each role used
(proposer turns, solver rollouts and turns, verifier samples), with the run's own tokenizer:
generated tokens from the raw outputs, and the tokens each call had to read. It then scales
the counts to the production settings (`configs/production.yaml`: n = 5 solver rollouts,
m = 5 verifier samples each way, up to 5 turns, 1024/512 tokens per proposer/solver turn)
in two ways — the embedded run's fill of its per-turn caps kept, and every cap full (the
worst case) — and divides by a per-GPU decode throughput to give GPU-hours for 50,000
sources, and wall hours on N GPUs (one Ray worker each). Prefill is left out of the GPU time:
with vLLM's prefix caching a turn re-reads its transcript from the cache, and fresh tokens
(tool responses) prefill at tens of thousands of tokens/s (bench_gpu_shapes.py).

    .venv/bin/python benchmarks/project_scaling.py --catalog data/out/curriculum.duckdb \
        [--run-id ID] [--decode-tok-s 10000] [--gpus 1 8 64]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import duckdb
import yaml

from pipeline.core.config import load_config

ROOT = Path(__file__).resolve().parent.parent


def tokenizer(llm: dict):
    from transformers import AutoTokenizer

    from pipeline.core.model_refs import resolve_llm

    return AutoTokenizer.from_pretrained(resolve_llm(llm["model"], llm["cache_dir"]))


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
    run_cfg = yaml.safe_load(
        con.execute("SELECT config_yaml FROM runs WHERE run_id = ?", [run_id]).fetchone()[0]
    )
    g = run_cfg["generation"]
    tok = tokenizer(run_cfg["llm"])

    def ntok(text: str | None) -> int:
        return len(tok(text or "", add_special_tokens=False)["input_ids"])

    records = con.execute("SELECT count(*) FROM curriculum WHERE run_id = ?", [run_id]).fetchone()
    n_rec = records[0]
    pro = con.execute(
        "SELECT raw_output, turns FROM proposer_rollouts WHERE run_id = ?", [run_id]
    ).fetchall()
    sol = con.execute(
        "SELECT raw_output, turns FROM solver_rollouts WHERE run_id = ?", [run_id]
    ).fetchall()
    ver = con.execute(
        "SELECT raw_output FROM verifier_samples WHERE run_id = ?", [run_id]
    ).fetchall()
    valid = con.execute(
        "SELECT count(*) FILTER (WHERE is_valid), count(*) FILTER (WHERE is_valid AND "
        "is_verbatim) FROM curriculum WHERE run_id = ?",
        [run_id],
    ).fetchone()
    # Generated tokens per turn, and the share of the per-turn cap that it filled.
    pro_turn = [ntok(o) / max(t, 1) for o, t in pro]
    sol_turn = [ntok(o) / max(t, 1) for o, t in sol]
    ver_tok = [ntok(o) for (o,) in ver]
    pro_turns = statistics.mean(t for _, t in pro)
    sol_turns = statistics.mean(t for _, t in sol) if sol else 0.0
    fill_pro = statistics.mean(pro_turn) / g["proposer_max_tokens"]
    fill_sol = statistics.mean(sol_turn) / g["solver_max_tokens"] if sol else 0.0
    print(f"run {run_id}: {n_rec} records, {valid[0]} valid, {valid[1]} valid+verbatim")
    print(f"  proposer: {pro_turns:.2f} turns, {statistics.mean(pro_turn):.1f} tokens/turn "
          f"({fill_pro:.0%} of {g['proposer_max_tokens']})")  # fmt: skip
    if sol:
        print(f"  solver: {len(sol) / max(valid[0], 1):.2f} rollouts per valid record, "
              f"{sol_turns:.2f} turns, {statistics.mean(sol_turn):.1f} tokens/turn "
              f"({fill_sol:.0%} of {g['solver_max_tokens']})")  # fmt: skip
    if ver:
        print(f"  verifier: {len(ver) / max(valid[1], 1):.1f} samples per verified record, "
              f"{statistics.mean(ver_tok):.1f} tokens each")  # fmt: skip
    measured = (
        len(pro) * pro_turns * statistics.mean(pro_turn)
        + sum(ntok(o) for o, _ in sol)
        + sum(ver_tok)
    ) / n_rec
    print(f"  generated tokens per record at the run's settings: {measured:,.0f}")

    prod = load_config(ROOT / "configs" / "production.yaml")
    pg, pr, pv = prod.generation, prod.rewards, prod.verifier
    valid_share = valid[0] / n_rec if n_rec else 0.0
    verbatim_share = valid[1] / n_rec if n_rec else 0.0
    # Turn counts scale with the cap on turns; tokens per turn with the cap per turn.
    turn_scale = pg.max_turns / g["max_turns"]
    kept = (
        pro_turns * turn_scale * fill_pro * pg.proposer_max_tokens
        + valid_share * pr.n_solver * sol_turns * turn_scale * fill_sol * pg.solver_max_tokens
        + verbatim_share * 2 * pv.m * (statistics.mean(ver_tok) if ver else 0.0)
    )
    worst = (
        pg.max_turns * pg.proposer_max_tokens
        + pr.n_solver * pg.max_turns * pg.solver_max_tokens
        + 2 * pv.m * pg.answer_max_tokens
    )
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
