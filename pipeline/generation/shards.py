"""The generate stage: propose, check, solve, verify, reward and land each shard of a plan.

A run's plan (pipeline.selector.run_plan) is drawn once and stored, so a rerun of the same run
id skips every committed shard and regenerates only the rest with the same per-shard seeds.
Record ids hash (run id, plan slot, passage id) and never repeat.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tqdm import tqdm

from pipeline.agents.prompts import (
    PROPOSER_STOP,
    FewShot,
    load_few_shot,
    proposer_prompt,
    render_path,
)
from pipeline.agents.proposer import Proposal, copies_example, parse_proposal, proposer_guide
from pipeline.agents.rewards import (
    FormatScore,
    brevity,
    difficulty,
    format_score,
    proposer_reward,
    validity,
)
from pipeline.agents.rollout import Rollout, RolloutConfig, run_rollouts
from pipeline.agents.solver import SolverResult, SolverSettings, SolverTask, solve
from pipeline.agents.verifier import (
    VerifierItem,
    VerifierResult,
    verify_mc,
    verify_teacher_forced,
)
from pipeline.catalog.store import ShardFile, Store, utcnow
from pipeline.llm.base import Generator, SamplingParams
from pipeline.llm.chat import Render, plain
from pipeline.retrieval.faiss_index import Retriever
from pipeline.selector.run_plan import Plan, PlanItem
from schemas.tables import SCHEMA_VERSION

log = logging.getLogger(__name__)


def stable_int(*parts: object) -> int:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def record_id(run_id: str, slot: int, passage_id: str) -> str:
    return hashlib.sha256(f"{run_id}|{slot}|{passage_id}".encode()).hexdigest()[:24]


@dataclass
class GenerationContext:
    cfg: object
    store: Store
    generator: Generator
    retriever: Retriever
    run_id: str
    run_date: dt.date
    embedder_model: str
    shots: list[FewShot] = field(default_factory=list)
    # KG subgraphs by id (from the kg stage), offered to the proposer when linked.
    subgraphs: dict[str, dict] = field(default_factory=dict)
    # First prompt of every call -> what the model sees (plain text or its chat template).
    render: Render = plain


@dataclass
class ShardOutput:
    curriculum: list[dict]
    proposer_rollouts: list[dict]
    solver_rollouts: list[dict]
    verifier_samples: list[dict]


def _waypoints(subgraph: dict | None) -> list[list[str]]:
    """Surface forms of the waypoints v0..v_{K-1} (labels, else ids) of a linked subgraph."""
    if not subgraph or not subgraph.get("waypoints"):
        return []
    labels = {n["id"]: n.get("label") for n in subgraph["target_path"]["nodes"]}
    return [[labels.get(w) or w] for w in subgraph["waypoints"]]


def process_shard(ctx: GenerationContext, shard: int, items: Sequence[PlanItem]) -> ShardOutput:
    """Everything for one shard of the plan, batched: one generate call per step."""
    cfg, gen = ctx.cfg, ctx.generator
    g, v, r = cfg.generation, cfg.verifier, cfg.rewards
    seed = stable_int(cfg.seed, ctx.run_id, shard)
    rows = [it.passage_row for it in items]
    pids, titles, texts = map(list, zip(*ctx.retriever.passages.get(rows), strict=True))
    if pids != [it.passage_id for it in items]:
        raise RuntimeError("the plan's passage ids do not match the index; was it rebuilt?")
    rids = [record_id(ctx.run_id, it.slot, it.passage_id) for it in items]

    graphs = [ctx.subgraphs.get(it.subgraph_id) if it.subgraph_id else None for it in items]
    facts = [render_path(sg["target_path"]) if sg else None for sg in graphs]
    prompts = [
        ctx.render(proposer_prompt(t, x, ctx.shots, g.evidence_mode, f, it.hop_count, it.task_type))
        for t, x, f, it in zip(titles, texts, facts, items, strict=True)
    ]
    params = SamplingParams(
        n=1,
        temperature=g.proposer_temperature,
        top_p=g.proposer_top_p,
        max_tokens=g.proposer_max_tokens,
        seed=seed,
    )
    rcfg = RolloutConfig(
        "<evidence>",
        "</evidence>",
        g.max_turns,
        cfg.retrieval.topk,
        cfg.retrieval.max_tokens_per_response,
        g.proposer_search,
        PROPOSER_STOP,
        "<question>" if g.force_final else None,
    )
    budgets = [max(it.hop_count - 1, 0) if g.force_final else None for it in items]
    guides = [proposer_guide(g.evidence_mode, x) for x in texts] if g.guided_proposer else None
    groups = run_rollouts(gen, ctx.retriever, prompts, params, rcfg, budgets, guides)
    pro = [grp[0] for grp in groups]
    proposals = []
    for roll, pid, text in zip(pro, pids, texts, strict=True):
        snippets = roll.retrieved_passages()  # full texts of the hits, not the cut tool docs
        proposals.append(parse_proposal(roll.transcript, pid, text, g.evidence_mode, snippets))
    checks = [_check(p, ctx.shots) for p in proposals]

    # Solver (difficulty) on every valid question; verifier on valid, verbatim ones.
    solve_idx = [i for i, (ok, _) in enumerate(checks) if ok]
    solved = {}
    if solve_idx:
        tasks = [
            SolverTask(
                rids[i],
                proposals[i].question,
                proposals[i].answer,
                proposals[i].evidence if proposals[i].evidence_status == "verbatim" else None,
                proposals[i].evidence_passage_id,
                _waypoints(graphs[i]),
            )
            for i in solve_idx
        ]
        settings = SolverSettings(
            n=r.n_solver,
            temperature=v.temperature,
            max_tokens=g.solver_max_tokens,
            seed=seed + 1,
            max_turns=g.max_turns,
            topk=cfg.retrieval.topk,
            max_doc_tokens=cfg.retrieval.max_tokens_per_response,
            lambda_e=r.lambda_e,
            wcr_alpha=r.wcr_alpha,
            force_final=g.force_final,
        )
        res = solve(gen, ctx.retriever, tasks, ctx.shots, settings, ctx.render)
        solved = dict(zip(solve_idx, res, strict=True))
    ver_idx = [i for i in solve_idx if proposals[i].evidence_status == "verbatim"]
    ver_items = [
        VerifierItem(rids[i], proposals[i].question, proposals[i].answer, proposals[i].evidence)
        for i in ver_idx
    ]
    verified, extra_samples = {}, []
    if ver_items:
        if v.method in ("mc", "both"):
            mc = verify_mc(
                gen,
                ver_items,
                ctx.shots,
                v.m,
                v.temperature,
                v.top_p,
                g.answer_max_tokens,
                seed + 2,
                ctx.render,
            )
            verified = dict(zip(ver_idx, mc, strict=True))
        if v.method in ("teacher_forced", "both"):
            tf = verify_teacher_forced(gen, ver_items, ctx.shots, ctx.render)
            if v.method == "teacher_forced":
                verified = dict(zip(ver_idx, tf, strict=True))
            else:
                extra_samples = [row for res in tf for row in res.samples]

    now = utcnow()
    curriculum, pro_rows, rollouts, samples = [], [], [], []
    for i, p in enumerate(proposals):
        ok, reason = checks[i]
        roll = pro[i]
        # Σ for F_ans: the source document and every tool response the proposer received.
        context = texts[i] + "\n" + roll.transcript
        fmt = format_score(
            p.question,
            p.answer,
            context,
            items[i].hop_count,
            roll.planning_turns,
            roll.turns,
            roll.valid_tool_calls,
            roll.tool_responses,
        )
        sol = solved.get(i)
        ver = verified.get(i)
        ev_tokens = gen.count_tokens(p.evidence) if p.evidence_status == "verbatim" else None
        b = brevity(ev_tokens, r.l_max) if ev_tokens is not None else None
        r_dz = difficulty(sol.k, sol.n) if sol else None
        # Protocol failures (invalid q/a or evidence that is not verbatim) earn ½F_fmt only.
        complete = ok and ver is not None and r_dz is not None and b is not None
        reward = proposer_reward(
            fmt.total,
            complete,
            r_dz or 0.0,
            ver.v if ver else 0.0,
            b or 0.0,
            r.lambda_v,
            r.lambda_b,
        )
        scored = Scored(
            items[i], graphs[i], rids[i], titles[i], prompts[i], p, ok, reason, fmt,
            sol, ver, ev_tokens, b, r_dz, reward, roll,
        )  # fmt: skip
        curriculum.append(_record(ctx, shard, scored, now))
        pro_rows.append(_proposer_row(ctx, scored, params, now))
        if sol:
            rollouts += [{**row, "run_id": ctx.run_id, "created_at": now} for row in sol.rollouts]
        if ver:
            samples += [{**row, "run_id": ctx.run_id, "created_at": now} for row in ver.samples]
    samples += [{**row, "run_id": ctx.run_id, "created_at": now} for row in extra_samples]
    return ShardOutput(curriculum, pro_rows, rollouts, samples)


def _proposer_row(ctx: GenerationContext, s: Scored, params: SamplingParams, now) -> dict:
    r = s.rollout
    return {
        "record_id": s.record_id,
        "run_id": ctx.run_id,
        "prompt": s.prompt,
        "raw_output": r.transcript,
        "think": r.think or None,
        "searches": r.searches,
        "retrieved_ids": r.retrieved_ids,
        "turns": r.turns,
        "planning_turns": r.planning_turns,
        "tool_calls": r.valid_tool_calls,
        "tool_responses": r.tool_responses,
        "stop_reason": r.stop_reason,
        "refused_searches": r.refused_searches,
        "forced_final": r.forced_final,
        "temperature": params.temperature,
        "seed": params.seed,
        "created_at": now,
    }


def _check(p: Proposal, shots: list[FewShot]) -> tuple[bool, str | None]:
    """The paper's validity filter, plus rejecting copies of our own few-shot examples."""
    ok, reason = validity(p.question, p.answer)
    if ok and copies_example(p.question, shots):
        return False, "copies_few_shot_example"
    return ok, reason


@dataclass(frozen=True)
class Scored:
    """Everything known about one proposer output once it has been checked and scored."""

    item: PlanItem
    subgraph: dict | None
    record_id: str
    title: str
    prompt: str
    proposal: Proposal
    valid: bool
    invalid_reason: str | None
    fmt: FormatScore
    solver: SolverResult | None
    verifier: VerifierResult | None
    evidence_tokens: int | None
    brevity: float | None
    difficulty: float | None
    reward: float
    rollout: Rollout


def _record(ctx: GenerationContext, shard: int, s: Scored, now) -> dict:
    """One curriculum row (schemas.tables.CURRICULUM)."""
    item, subgraph, p, sol, ver, fmt = s.item, s.subgraph, s.proposal, s.solver, s.verifier, s.fmt
    cfg = ctx.cfg
    return {
        "record_id": s.record_id,
        "run_id": ctx.run_id,
        "shard": shard,
        "slot": item.slot,
        "created_at": now,
        "source_passage_id": item.passage_id,
        "source_title": s.title,
        "cluster_id": item.cluster_id,
        "task_type": item.task_type,
        "hop_count": item.hop_count,
        "subgraph_id": subgraph["subgraph_id"] if subgraph else None,
        "question": p.question,
        "answer": p.answer,
        "evidence": p.evidence,
        "evidence_mode": cfg.generation.evidence_mode,
        "evidence_source": p.evidence_source,
        "evidence_status": p.evidence_status,
        "evidence_passage_id": p.evidence_passage_id,
        "evidence_char_start": p.evidence_start,
        "evidence_char_end": p.evidence_end,
        "kg_path": subgraph["target_path"] if subgraph else None,
        "waypoints": subgraph["waypoints"] if subgraph else None,
        "is_valid": s.valid,
        "invalid_reason": s.invalid_reason,
        "is_verbatim": p.evidence_status == "verbatim",
        "format_score": fmt.total,
        "f_think": fmt.think,
        "f_tool": fmt.tool,
        "f_answer": fmt.answer,
        "proposer_turns": s.rollout.turns,
        "proposer_searches": len(s.rollout.searches),
        "solver_n": sol.n if sol else None,
        "solver_k": sol.k if sol else None,
        "solver_reward_mean": _mean([x["solver_reward"] for x in sol.rollouts]) if sol else None,
        "wcr_coverage_mean": (
            _mean([x["wcr_coverage"] for x in sol.rollouts if x["wcr_coverage"] is not None])
            if sol
            else None
        ),
        "difficulty": s.difficulty,
        "verifier_p_pos": ver.p_pos if ver else None,
        "verifier_p_neg": ver.p_neg if ver else None,
        "verifier_v": ver.v if ver else None,
        "verifier_method": ver.method if ver else None,
        "verifier_m": ver.m if ver else None,
        "evidence_tokens": s.evidence_tokens,
        "brevity": s.brevity,
        "proposer_reward": s.reward,
        "proposer_model": ctx.generator.model_id,
        "solver_model": ctx.generator.model_id,
        "embedder_model": ctx.embedder_model,
        "index_fingerprint": ctx.retriever.fingerprint,
        "config_hash": cfg.config_hash(),
        "prompt": s.prompt,
        "raw_proposer_output": p.raw,
        "schema_version": SCHEMA_VERSION,
    }


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


@dataclass
class GenerationReport:
    shards_planned: int
    shards_done_before: int
    shards_written: int


def shard_name(shard: int) -> str:
    return f"{shard:05d}"


def run_generation(
    ctx: GenerationContext,
    plan: Plan,
    on_shard: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> GenerationReport:
    """Process every shard of the plan that is not yet committed; commit each atomically.

    A stop request (or Ctrl-C) between shards keeps every committed shard; an interrupted
    shard is never committed and is redone by the next run with the same run id.
    """
    cfg = ctx.cfg
    ctx.shots = ctx.shots or load_few_shot(cfg.resolve_path(cfg.generation.few_shot))
    size = cfg.generation.shard_size
    n_shards = (len(plan.items) + size - 1) // size
    planned = {shard_name(i) for i in range(n_shards)}
    done = ctx.store.completed_shards(ctx.run_id) & planned
    written = 0
    # Records of this run, committed shard by shard (on a terminal; tqdm skips non-TTYs).
    bar = tqdm(total=len(plan.items), unit=" records", desc="generation", disable=None)
    bar.update(min(len(done) * size, len(plan.items)))
    for shard in range(n_shards):
        if shard_name(shard) in done:
            continue
        if should_stop and should_stop():
            log.info("stop requested; %d shards left for the next run", n_shards - shard)
            break
        out = process_shard(ctx, shard, plan.items[shard * size : (shard + 1) * size])
        files: list[ShardFile] = []
        for table, rows in (
            ("curriculum", out.curriculum),
            ("proposer_rollouts", out.proposer_rollouts),
            ("solver_rollouts", out.solver_rollouts),
            ("verifier_samples", out.verifier_samples),
        ):
            files.append(
                ctx.store.write_shard(table, ctx.run_id, ctx.run_date, shard_name(shard), rows)
            )
        ctx.store.commit(ctx.run_id, shard_name(shard), files)
        bar.update(len(out.curriculum))
        written += 1
        if on_shard:
            on_shard(shard, n_shards)
    bar.close()
    return GenerationReport(n_shards, len(done), written)
