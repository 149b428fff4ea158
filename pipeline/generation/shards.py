"""The generate stage: propose, check, solve, verify, reward and land each shard of a plan.

A run's plan (pipeline.selector.run_plan) is drawn once and stored, so a rerun of the same run
id skips every committed shard and regenerates only the rest with the same per-shard seeds.
Record ids hash (run id, plan slot, passage id) and never repeat.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace

from pipeline.agents.arr import ArrSettings
from pipeline.agents.prompts import FewShot, KGShot
from pipeline.agents.proposer import ProposerSettings, ProposerTask, propose
from pipeline.agents.rewards import brevity, difficulty, format_score, proposer_reward
from pipeline.agents.solver import SolverSettings, SolverTask, solve
from pipeline.agents.targets import Target, kg_targets, passage_target
from pipeline.agents.verifier import (
    VerifierItem,
    VerifierResult,
    answer_tokens,
    pmi_from_teacher_forced,
    verify_mc,
    verify_teacher_forced,
)
from pipeline.core.io import utcnow
from pipeline.generation.gates import (
    SHORTCUT_COLUMNS,
    GateResult,
    VerifierRun,
    control_subjects,
    gold_evidence_check,
    set_verdicts,
    shortcut_check,
    uniqueness,
    verifier_controls,
)
from pipeline.generation.records import Provenance, Scored, curriculum_row, proposer_row
from pipeline.llm.base import Generator
from pipeline.llm.chat import Render, plain
from pipeline.retrieval.base import RetrieverBackend
from pipeline.selector.run_plan import PlanItem, load_plan
from pipeline.store.store import Store

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
    retriever: RetrieverBackend
    run_id: str
    run_date: dt.date
    embedder_model: str
    shots: list[FewShot] = field(default_factory=list)
    kg_shots: list[KGShot] = field(default_factory=list)  # worked KG questions
    # KG subgraphs by id (from the kg stage), offered to the proposer when linked.
    subgraphs: dict[str, dict] = field(default_factory=dict)
    # First prompt of every call -> what the model sees (plain text or its chat template).
    render: Render = plain
    # cluster id -> passage rows of the run's plan, for the off-topic verifier control; None:
    # read from the run's stored plan on first use (the shard's own items if there is none).
    cluster_rows: dict[int, list[int]] | None = None


@dataclass
class ShardOutput:
    """One shard's rows, one field per sharded table (the field name is the table name), so
    a step that adds a table adds a field here and the shard is written and committed whole."""

    curriculum: list[dict]
    proposer_rollouts: list[dict]
    solver_rollouts: list[dict]
    verifier_samples: list[dict]
    evalact_segments: list[dict] = field(default_factory=list)  # solver.protocol=evalact
    arr_turns: list[dict] = field(default_factory=list)  # solver.protocol=arr
    gate_rollouts: list[dict] = field(default_factory=list)  # gates.shortcut
    control_scores: list[dict] = field(default_factory=list)  # gates.controls
    shard_steps: list[dict] = field(default_factory=list)  # wall time per step

    def tables(self) -> dict[str, list[dict]]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def build_targets(
    ctx: GenerationContext,
    items: Sequence[PlanItem],
    graphs: Sequence[dict | None],
    passages: Sequence[tuple[str, str, str]],
    rids: Sequence[str],
) -> list[Target]:
    """Each slot's answer and evidence before any question: the KG path's end entity where a
    subgraph is linked (one search batch for the shard), else a span of the source passage
    chosen by task type and a hash of the record id."""
    kg_idx = [i for i, sg in enumerate(graphs) if sg is not None]
    kg = kg_targets(
        ctx.retriever,
        [(graphs[i], items[i].hop_count, passages[i]) for i in kg_idx],
        [graphs[i].get("answer_aliases") or [] for i in kg_idx],
        ctx.cfg.generation.evidence_topk,
    )
    by_slot = dict(zip(kg_idx, kg, strict=True))
    seen: set[tuple[str | None, str | None, str | None]] = set()
    out = []
    for i, it in enumerate(items):
        t = by_slot.get(i) or passage_target(
            passages[i], it.task_type, stable_int(rids[i], "answer")
        )
        key = (t.facts or t.answer, t.passage_id, t.evidence)
        if t.posed and key in seen:  # one subgraph linked to several slots: ask it once
            t = replace(t, reason="duplicate_target")
        seen.add(key)
        out.append(t)
    return out


def process_shard(ctx: GenerationContext, shard: int, items: Sequence[PlanItem]) -> ShardOutput:
    """Everything for one shard of the plan, batched: one generate call per step."""
    cfg, gen = ctx.cfg, ctx.generator
    g, v, r, gates = cfg.generation, cfg.verifier, cfg.rewards, cfg.gates
    steps: list[tuple[str, float, int]] = []  # (step, seconds, items)
    clock = time.perf_counter()

    def lap(step: str, n_items: int) -> None:
        nonlocal clock
        now_ = time.perf_counter()
        steps.append((step, now_ - clock, n_items))
        clock = now_

    seed = stable_int(cfg.seed, ctx.run_id, shard)
    rows = [it.passage_row for it in items]
    pids, titles, texts = map(list, zip(*ctx.retriever.passages.get(rows), strict=True))
    if pids != [it.passage_id for it in items]:
        raise RuntimeError("the plan's passage ids do not match the index; was it rebuilt?")
    rids = [record_id(ctx.run_id, it.slot, it.passage_id) for it in items]

    graphs = [ctx.subgraphs.get(it.subgraph_id) if it.subgraph_id else None for it in items]
    targets = build_targets(ctx, items, graphs, list(zip(pids, titles, texts, strict=True)), rids)
    pro_settings = ProposerSettings(
        temperature=g.proposer_temperature,
        top_p=g.proposer_top_p,
        max_tokens=g.proposer_max_tokens,
        seed=seed,
        attempts=g.question_attempts,
        guided=g.guided_proposer,
        max_answer_tokens=g.max_answer_tokens,
        template_fallback=g.template_fallback,
        passage_questions=g.passage_questions,
        kg_questions=g.kg_questions,
    )
    pro_tasks = [
        ProposerTask(pid, t, x, it.hop_count, it.task_type, tg)
        for pid, t, x, it, tg in zip(pids, titles, texts, items, targets, strict=True)
    ]
    gold_seed = seed + 3

    def answerable(pairs: Sequence[tuple[Target, str]]) -> list[bool]:
        """Round trip: the gold-evidence check on candidate questions, sampled exactly as the
        gate samples it, so the gate's call for the kept question is a response-cache hit."""
        items_ = [VerifierItem(f"candidate:{k}", q, t.answer, t.evidence)
                  for k, (t, q) in enumerate(pairs)]  # fmt: skip
        res = gold_evidence_check(gen, items_, [t.aliases for t, _ in pairs], ctx.shots,
                                  gates.gold_n, v.temperature, g.answer_max_tokens, gold_seed,
                                  ctx.render, g.max_answer_tokens)  # fmt: skip
        return [bool(r.columns["gold_correct"]) for r in res]

    proposed = propose(
        gen, ctx.retriever, pro_tasks, ctx.shots, ctx.kg_shots, pro_settings, ctx.render,
        gen.count_tokens, answerable if g.roundtrip else None,
    )  # fmt: skip
    proposals = [res.proposal for res in proposed]
    checks = [(res.valid, res.invalid_reason) for res in proposed]
    lap("propose", len(items))

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
                [[w] for w in targets[i].waypoints],
                targets[i].aliases,
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
            protocol=cfg.solver.protocol,
            pcar_lambda_base=cfg.solver.pcar_lambda_base,
            pcar_lambda_max=cfg.solver.pcar_lambda_max,
            pcar_delta=cfg.solver.pcar_delta,
            arr=ArrSettings(
                max_rounds=cfg.arr.max_rounds,
                topk=cfg.retrieval.topk,
                max_doc_tokens=cfg.retrieval.max_tokens_per_response,
                force_final=g.force_final,
                entropy_top_k=cfg.arr.entropy_top_k,
                adversarial_lambda=cfg.arr.adversarial_lambda,
                f1_buckets=cfg.arr.f1_buckets,
                entropy_delta=cfg.arr.entropy_delta,
                monitored_actions=tuple(cfg.arr.monitored_actions),
                critique_actions=tuple(cfg.arr.critique_actions),
            ),
        )
        res = solve(gen, ctx.retriever, tasks, ctx.shots, settings, ctx.render)
        solved = dict(zip(solve_idx, res, strict=True))
    lap("solve", len(solve_idx))
    ver_idx = [i for i in solve_idx if proposals[i].evidence_status == "verbatim"]
    ver_items = [
        VerifierItem(rids[i], proposals[i].question, proposals[i].answer, proposals[i].evidence)
        for i in ver_idx
    ]
    verified, extra_samples = {}, []
    by_method: dict[str, list[VerifierResult]] = {}
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
            by_method["mc"] = mc
        if v.method in ("teacher_forced", "teacher_forced_pmi", "both"):
            tf = verify_teacher_forced(gen, ver_items, ctx.shots, ctx.render)
            by_method["teacher_forced"] = tf
            # the same score call gives the log-space estimator (the controls compare both)
            by_method["teacher_forced_pmi"] = pmi_from_teacher_forced(
                tf, [answer_tokens(gen, it.answer) for it in ver_items]
            )
            if v.method != "both":
                verified = dict(zip(ver_idx, by_method[v.method], strict=True))
            else:
                extra_samples = [row for res in tf for row in res.samples]

    lap("verify", len(ver_items))
    now = utcnow()
    gate_res: dict[int, GateResult] = {i: GateResult() for i in range(len(items))}
    # Gold evidence first: the shortcut and uniqueness gates only judge records the solver
    # can answer when handed their evidence (the others are `undetermined`).
    gold = gold_evidence_check(
        gen, ver_items, [targets[i].aliases for i in ver_idx], ctx.shots, gates.gold_n,
        v.temperature, g.answer_max_tokens, gold_seed, ctx.render, g.max_answer_tokens,
    )  # fmt: skip
    for i, res_i in zip(ver_idx, gold, strict=True):
        gate_res[i] = res_i
    lap("gold_evidence", len(ver_idx))
    answerable = [i for i in ver_idx if gate_res[i].columns["gold_correct"]]
    if gates.shortcut and answerable:
        # the question's own hops: a KG sub-path's relations (a passage span is one hop)
        multi = [i for i in answerable if targets[i].hops >= 2]
        pos = {i: k for k, i in enumerate(solve_idx)}
        shortcut = shortcut_check(
            gen, ctx.retriever, [tasks[pos[i]] for i in multi],
            [targets[i].hops for i in multi], ctx.shots, settings,
            gates.shortcut_n, gates.shortcut_threshold, ctx.render, g.max_answer_tokens,
        )  # fmt: skip
        for i, res_i in zip(multi, shortcut, strict=True):
            gate_res[i].columns.update({k: res_i.columns[k] for k in SHORTCUT_COLUMNS})
            gate_res[i].rollouts += res_i.rollouts
        lap("shortcut", len(multi))
    if gates.uniqueness:
        for i, sol in solved.items():
            gate_res[i].columns.update(uniqueness(sol, gates.unique_min_support))
    for i in range(len(items)):
        set_verdicts(gate_res[i], gates.shortcut, gates.uniqueness, targets[i].hops,
                     i in solved)  # fmt: skip
    if gates.controls and ver_items:
        # the record's own method first: it fills the curriculum's v_* columns
        order = (v.method, "mc", "teacher_forced", "teacher_forced_pmi")
        methods = tuple(dict.fromkeys(m for m in order if m in by_method))
        subjects = control_subjects(
            ver_items,
            [items[i].cluster_id for i in ver_idx],
            [{m: by_method[m][k] for m in methods} for k in range(len(ver_idx))],
            gates.controls_share,
        )
        vr = VerifierRun(
            methods, v.m, v.temperature, v.top_p, g.answer_max_tokens, seed + 2
        )  # the same seed as the verifier: a control differs only in its evidence
        controls = verifier_controls(
            gen, subjects, ver_items, _off_topic_picker(ctx, items), ctx.shots, vr,
            ctx.render, now, ctx.run_id,
        )  # fmt: skip
        for i in ver_idx:
            c = controls.get(rids[i])
            if c is not None:
                gate_res[i].columns.update(
                    {k: val for k, val in c.columns.items() if k.startswith("v_")}
                )
                gate_res[i].controls = c.controls
        lap("controls", len(subjects))
    provenance = Provenance(
        run_id=ctx.run_id,
        shard=shard,
        created_at=now,
        model=ctx.generator.model_id,
        embedder_model=ctx.embedder_model,
        index_fingerprint=ctx.retriever.fingerprint,
        config_hash=cfg.config_hash(),
    )
    curriculum, pro_rows, rollouts, samples, segments, turns = [], [], [], [], [], []
    for i, p in enumerate(proposals):
        ok = checks[i][0]
        roll = proposed[i].rollout
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
            items[i], graphs[i], targets[i], rids[i], titles[i], proposed[i], fmt,
            sol, ver, ev_tokens, b, r_dz, reward, gates.v_quantile,
        )  # fmt: skip
        curriculum.append(curriculum_row(scored, provenance, gate_res[i].columns))
        pro_rows.append(proposer_row(scored, pro_settings, ctx.run_id, now))
        if sol:
            rollouts += [{**row, "run_id": ctx.run_id, "created_at": now} for row in sol.rollouts]
            segments += [{**row, "run_id": ctx.run_id} for row in sol.segments]
            turns += [{**row, "run_id": ctx.run_id} for row in sol.turns]
        if ver:
            samples += [{**row, "run_id": ctx.run_id, "created_at": now} for row in ver.samples]
    samples += [{**row, "run_id": ctx.run_id, "created_at": now} for row in extra_samples]
    gate_rows = [
        {**row, "run_id": ctx.run_id, "created_at": now}
        for res_i in gate_res.values()
        for row in res_i.rollouts
    ]
    control_rows = [row for res_i in gate_res.values() for row in res_i.controls]
    lap("rows", len(items))
    step_rows = [
        {"run_id": ctx.run_id, "shard": shard, "step": name, "seconds": sec, "items": n,
         "created_at": now}
        for name, sec, n in steps
    ]  # fmt: skip
    return ShardOutput(
        curriculum=curriculum,
        proposer_rollouts=pro_rows,
        solver_rollouts=rollouts,
        verifier_samples=samples,
        evalact_segments=segments,
        arr_turns=turns,
        gate_rollouts=gate_rows,
        control_scores=control_rows,
        shard_steps=step_rows,
    )


def _off_topic_picker(
    ctx: GenerationContext, items: Sequence[PlanItem]
) -> Callable[[str, int], tuple[str, str, int] | None]:
    """(record id, cluster) -> a passage of another cluster of the run's plan, chosen by a
    hash of the record id: the off-topic control's evidence, on a subject the record's own
    cluster does not cover."""
    if ctx.cluster_rows is None:
        plan = load_plan(ctx.store, ctx.run_id)
        ctx.cluster_rows = rows_by_cluster(plan.items if plan else items)
    flat = sorted((c, row) for c, rows in ctx.cluster_rows.items() for row in rows)

    def pick(record_id: str, cluster: int) -> tuple[str, str, int] | None:
        start = stable_int(record_id, "off_topic") % len(flat) if flat else 0
        for k in range(len(flat)):  # the first entry of another cluster from a hashed start
            c, row = flat[(start + k) % len(flat)]
            if c != cluster:
                pid, title, text = ctx.retriever.passages.get([row])[0]
                return (f"{title}: {text}" if title else text), pid, c
        return None  # one cluster only: no off-topic control

    return pick


def rows_by_cluster(items: Sequence[PlanItem]) -> dict[int, list[int]]:
    """The plan's passage rows by cluster (the off-topic control draws from other clusters)."""
    out: dict[int, list[int]] = {}
    for it in items:
        out.setdefault(it.cluster_id, [])
        if it.passage_row not in out[it.cluster_id]:
            out[it.cluster_id].append(it.passage_row)
    return out
