"""Solver: n multi-turn search rollouts per valid question, scored as in the papers.

Each rollout is rewarded with EM (difficulty counts k of n), R_sol = EM + λ_E·F1(ê, e) (EVE eq.
19; our solver emits no evidence span, so ê is empty and the F1 term is 0 unless it does), WCR
on the think text against the question's KG waypoints (KG-paths eqs. 5-6, group-normalised over
the n rollouts), and EVO-RAG step signals (evidence-passage hit, sub-query redundancy, steps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipeline.agents.arr import ArrSettings, Dialogue, run_dialogues
from pipeline.agents.arr_scoring import score_dialogues
from pipeline.agents.process_rewards import (
    gated_outcome_reward,
    outcome_advantages,
    pcar_segments,
)
from pipeline.agents.prompts import (
    SOLVER_STOP,
    FewShot,
    arr_reasoner_prompt,
    arr_verifier_prompt,
    solver_prompt,
)
from pipeline.agents.proposer import tag
from pipeline.agents.rewards import (
    answer_correctness,
    contains,
    evo_rag_step_rewards,
    exact_match,
    query_redundancy,
    retrieval_bonus,
    retrieval_hit,
    solver_reward,
    think_text,
    token_f1,
    waypoint_coverage,
    wcr_rewards,
)
from pipeline.agents.rollout import Rollout, RolloutConfig, run_rollouts
from pipeline.llm import usage
from pipeline.llm.base import Generator, SamplingParams
from pipeline.llm.chat import Render, plain
from pipeline.retrieval.base import RetrieverBackend

if TYPE_CHECKING:
    from pipeline.core.config import PipelineConfig


@dataclass(frozen=True)
class SolverTask:
    record_id: str
    question: str
    answer: str
    evidence: str | None
    evidence_passage_id: str | None
    waypoints: list[list[str]]  # surface forms per waypoint v0..v_{K-1}; empty without a KG path
    aliases: tuple[str, ...] = ()  # other accepted forms of the answer (EM against any)


@dataclass
class SolverResult:
    n: int
    k: int
    rollouts: list[dict]  # rows for the solver_rollouts table (without run/time columns)
    segments: list[dict] = field(default_factory=list)  # evalact_segments rows (EvalAct only)
    turns: list[dict] = field(default_factory=list)  # arr_turns rows (ARR only)


@dataclass(frozen=True)
class SolverSettings:
    n: int
    temperature: float
    max_tokens: int  # per assistant turn
    seed: int
    max_turns: int = 5
    topk: int = 3
    max_doc_tokens: int = 512
    lambda_e: float = 0.3
    wcr_alpha: float = 0.3
    force_final: bool = True  # open <answer> on the last allowed turn
    protocol: str = "search_r1"  # search_r1 | evalact | arr
    # EvalAct/PCAR (eqs. 7-8): λ_base, λ_max and the clamp floor δ.
    pcar_lambda_base: float = 0.1
    pcar_lambda_max: float = 0.5
    pcar_delta: float = 1e-6
    # ARR: the dialogue engine and its rewards (its max_rounds replaces max_turns).
    arr: ArrSettings = field(default_factory=ArrSettings)
    # Quality gates (pipeline.generation.gates): search=False is the closed-book solver (a
    # <search> is ignored and <answer> opened), search_budget=1 the one-search solver.
    search: bool = True
    search_budget: int | None = None

    @classmethod
    def from_config(cls, cfg: PipelineConfig, seed: int = 0) -> SolverSettings:
        """The run's solver: the retrieval and turn settings its agents share (ARR's too)."""
        g, s = cfg.generation, cfg.solver
        return cls(
            n=cfg.rewards.n_solver,
            temperature=cfg.verifier.temperature,
            max_tokens=g.solver_max_tokens,
            seed=seed,
            max_turns=g.max_turns,
            topk=cfg.retrieval.topk,
            max_doc_tokens=cfg.retrieval.max_tokens_per_response,
            lambda_e=cfg.rewards.lambda_e,
            wcr_alpha=cfg.rewards.wcr_alpha,
            force_final=g.force_final,
            protocol=s.protocol,
            pcar_lambda_base=s.pcar_lambda_base,
            pcar_lambda_max=s.pcar_lambda_max,
            pcar_delta=s.pcar_delta,
            arr=ArrSettings.from_config(cfg),
        )


def solve(
    gen: Generator,
    retriever: RetrieverBackend,
    tasks: Sequence[SolverTask],
    shots: Sequence[FewShot],
    s: SolverSettings,
    render: Render = plain,
) -> list[SolverResult]:
    evalact, arr = s.protocol == "evalact", s.protocol == "arr"
    if s.protocol not in ("search_r1", "evalact", "arr"):
        raise ValueError(f"solver.protocol {s.protocol!r} is not implemented")
    params = SamplingParams(n=s.n, temperature=s.temperature, max_tokens=s.max_tokens, seed=s.seed)
    if arr:
        prompts = [render(arr_reasoner_prompt(t.question, shots)) for t in tasks]
        verifier_prompts = [render(arr_verifier_prompt(t.question, shots)) for t in tasks]
        ids = [t.record_id for t in tasks]
        with usage.owned(prompts + verifier_prompts, ids + ids):
            dialogues = run_dialogues(gen, retriever, prompts, verifier_prompts, params, s.arr)
        return [_results(t, p, g, s) for t, p, g in zip(tasks, prompts, dialogues, strict=True)]
    prompts = [render(solver_prompt(t.question, shots, evalact)) for t in tasks]
    cfg = RolloutConfig(
        "<answer>",
        "</answer>",
        # EvalAct: each search's Evaluate is a turn of its own, so the same number of
        # search/answer turns fits in 2·max_turns − 1.
        2 * s.max_turns - 1 if evalact else s.max_turns,
        s.topk,
        s.max_doc_tokens,
        s.search,
        SOLVER_STOP,
        "<answer>" if s.force_final else None,
        evaluate=evalact,
    )
    budgets = [s.search_budget] * len(prompts) if s.search_budget is not None else None
    with usage.owned(prompts, [t.record_id for t in tasks]):
        groups = run_rollouts(gen, retriever, prompts, params, cfg, budgets)
    return [_results(t, p, g, s) for t, p, g in zip(tasks, prompts, groups, strict=True)]


def _results(
    t: SolverTask, prompt: str, group: Sequence[Rollout] | Sequence[Dialogue], s: SolverSettings
) -> SolverResult:
    """One question's rollouts (or ARR dialogues) as rows, with every protocol's columns."""
    evalact, arr = s.protocol == "evalact", s.protocol == "arr"
    preds = [r.final for r in group]
    # Each prediction is scored against the accepted form it matches (the answer otherwise).
    golds = [next((a for a in t.aliases if exact_match(p, a)), t.answer) for p in preds]
    correct = [exact_match(p, gold) for p, gold in zip(preds, golds, strict=True)]
    thinks = [think_text(r.transcript) for r in group]
    cover = [waypoint_coverage(t.waypoints, th) if t.waypoints else 0.0 for th in thinks]
    # The rollout is valid for WCR when it finished with a parsable answer.
    valid = [r.stop_reason == "final" and bool(p) for r, p in zip(group, preds, strict=True)]
    wcr = wcr_rewards(correct, valid, cover, s.wcr_alpha)
    f1s = [token_f1(p, gold) for p, gold in zip(preds, golds, strict=True)]
    gated, advantages = [None] * len(group), [None] * len(group)
    if evalact:
        compliant = [_compliant(r) for r in group]
        gated = [gated_outcome_reward(f, c) for f, c in zip(f1s, compliant, strict=True)]
        advantages = outcome_advantages(gated)
    arr_cols: list[dict] = [dict.fromkeys(ARR_ROLLOUT_COLUMNS) for _ in group]
    arr_turns: list[list[dict]] = [[] for _ in group]
    if arr:
        arr_cols, arr_turns = score_dialogues(group, t.answer, s.arr)
    rows = []
    for i, r in enumerate(group):
        ev_pred = tag(r.transcript, "evidence")
        redundancy = query_redundancy(r.query_vectors)
        steps = None
        if t.evidence_passage_id and r.retrieved_ids:
            steps = evo_rag_step_rewards(
                retrieval_bonus(r.retrieved_ids, t.evidence_passage_id),
                redundancy,
                t_max=s.max_turns,
                answer_score=answer_correctness(preds[i], t.answer) if preds[i] else None,
            )
        rows.append(
            {
                "rollout_id": f"{t.record_id}:sol:{i}",
                "record_id": t.record_id,
                "sample": i,
                "prompt": prompt,
                "raw_output": r.transcript,
                "predicted_answer": preds[i],
                "think": r.think or None,
                "searches": r.searches,
                "retrieved_ids": r.retrieved_ids,
                "turns": r.turns,
                "planning_turns": r.planning_turns,
                "invalid_tool_calls": r.invalid_tool_calls,
                "stop_reason": r.stop_reason,
                "forced_final": r.forced_final,
                "correct": correct[i],
                "answer_f1": f1s[i],
                "evidence_f1": token_f1(ev_pred, t.evidence) if ev_pred else 0.0,
                "solver_reward": solver_reward(preds[i], golds[i], ev_pred, t.evidence, s.lambda_e),
                "wcr_coverage": cover[i] if t.waypoints else None,
                "wcr_reward": wcr[i],
                "answer_in_retrieved": _answer_in_retrieved(preds[i], r),
                "evidence_hit_step": (
                    retrieval_hit(r.retrieved_ids, t.evidence_passage_id)
                    if t.evidence_passage_id
                    else None
                ),
                "query_redundancy": redundancy,
                "step_rewards": steps,
                "protocol": s.protocol,
                "protocol_violations": _violations(r, s.protocol),
                "outcome_reward": gated[i],
                "outcome_advantage": advantages[i],
                "verifier_output": r.verifier_log if arr else None,
                **arr_cols[i],  # ARR: its outcome_reward/advantage are the reasoner's r^r, A^r
            }
        )
    segments, turns = [], []
    for i, r in enumerate(group):
        if evalact:
            segments += _segment_rows(t, i, r, advantages[i], s)
        if arr:
            rid = f"{t.record_id}:sol:{i}"
            turns += [
                {"turn_id": f"{rid}:act:{j}", "rollout_id": rid, "record_id": t.record_id,
                 "sample": i, "action_index": j, **row}
                for j, row in enumerate(arr_turns[i])
            ]  # fmt: skip
    return SolverResult(len(group), sum(correct), rows, segments, turns)


# solver_rollouts columns only ARR fills (outcome_reward/advantage are shared with EvalAct).
ARR_ROLLOUT_COLUMNS = (
    "verifier_answer",
    "verifier_answer_f1",
    "verifier_reward",
    "verifier_advantage",
    "entropy_pattern",
    "behavior_impact",
)


def _violations(r: Rollout | Dialogue, protocol: str) -> list[str] | None:
    """Protocol violations with their reasons; None under search_r1 (no protocol to break)."""
    if protocol == "evalact":
        return [e.violation for e in r.evaluations if e.violation]
    if protocol == "arr":
        return list(r.violations)
    return None


def _compliant(r: Rollout) -> bool:
    """EvalAct eq. 4's I_fmt (ii): every search was immediately followed by a valid Evaluate.

    Part (i), reasoning inside <think> tags, is not checked: our transcripts keep untagged text.
    """
    return len(r.evaluations) == len(r.searches) and all(not e.violation for e in r.evaluations)


def _segment_rows(
    t: SolverTask, i: int, r: Rollout, advantage: float, s: SolverSettings
) -> list[dict]:
    """One row per Search→Evaluate segment with PCAR's z̃, λ and multiplier (eqs. 6-8).

    z̃ standardises over the segments that reported a score; a violating segment has none.
    """
    scored = [k for k, e in enumerate(r.evaluations) if e.z is not None]
    pcar = pcar_segments(
        [r.evaluations[k].z for k in scored],
        advantage,
        s.pcar_lambda_base,
        s.pcar_lambda_max,
        s.pcar_delta,
    )
    by_k = dict(zip(scored, pcar, strict=True))
    rows = []
    for k, ev in enumerate(r.evaluations):
        ids = r.retrieved_ids[k] if k < len(r.retrieved_ids) else []
        seg = by_k.get(k)
        rows.append(
            {
                "segment_id": f"{t.record_id}:sol:{i}:seg:{k}",
                "rollout_id": f"{t.record_id}:sol:{i}",
                "record_id": t.record_id,
                "sample": i,
                "segment": k,
                "query": r.searches[k] if k < len(r.searches) else None,
                "retrieved_ids": ids,
                "assessment": ev.assessment,
                "z": ev.z,
                "violation": ev.violation,
                "evidence_hit": (t.evidence_passage_id in ids) if t.evidence_passage_id else None,
                "z_tilde": seg.z_tilde if seg else None,
                "pcar_gain": seg.gain if seg else None,
                "pcar_multiplier": seg.multiplier if seg else None,
                "outcome_advantage": advantage,
                "calibrated_advantage": seg.advantage if seg else None,
            }
        )
    return rows


def _answer_in_retrieved(pred: str | None, r: Rollout | Dialogue) -> bool | None:
    """Norm(prediction) occurs in a passage this rollout retrieved (None: no answer, or no
    search): the uniqueness gate counts only answers the retrieval supports."""
    if not pred or not r.hits:
        return None
    return any(contains(f"{h.title} {h.text}", pred) for hits in r.hits for h in hits)
