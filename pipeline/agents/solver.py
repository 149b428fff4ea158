"""Solver: n multi-turn search rollouts per valid question, scored as in the papers.

Each rollout is rewarded with EM (difficulty counts k of n), R_sol = EM + λ_E·F1(ê, e) (EVE eq.
19; our solver emits no evidence span, so ê is empty and the F1 term is 0 unless it does), WCR
on the think text against the question's KG waypoints (KG-paths eqs. 5-6, group-normalised over
the n rollouts), and EVO-RAG step signals (evidence-passage hit, sub-query redundancy, steps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.agents.prompts import SOLVER_STOP, FewShot, solver_prompt
from pipeline.agents.proposer import tag
from pipeline.agents.rewards import (
    answer_correctness,
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
from pipeline.agents.rollout import RolloutConfig, run_rollouts
from pipeline.llm.base import Generator, SamplingParams
from pipeline.llm.chat import Render, plain
from pipeline.retrieval.base import RetrieverBackend


@dataclass(frozen=True)
class SolverTask:
    record_id: str
    question: str
    answer: str
    evidence: str | None
    evidence_passage_id: str | None
    waypoints: list[list[str]]  # surface forms per waypoint v0..v_{K-1}; empty without a KG path


@dataclass
class SolverResult:
    n: int
    k: int
    rollouts: list[dict]  # rows for the solver_rollouts table (without run/time columns)


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


def solve(
    gen: Generator,
    retriever: RetrieverBackend,
    tasks: Sequence[SolverTask],
    shots: Sequence[FewShot],
    s: SolverSettings,
    render: Render = plain,
) -> list[SolverResult]:
    prompts = [render(solver_prompt(t.question, shots)) for t in tasks]
    params = SamplingParams(n=s.n, temperature=s.temperature, max_tokens=s.max_tokens, seed=s.seed)
    cfg = RolloutConfig(
        "<answer>",
        "</answer>",
        s.max_turns,
        s.topk,
        s.max_doc_tokens,
        True,
        SOLVER_STOP,
        "<answer>" if s.force_final else None,
    )
    groups = run_rollouts(gen, retriever, prompts, params, cfg)
    results = []
    for t, prompt, group in zip(tasks, prompts, groups, strict=True):
        preds = [r.final for r in group]
        correct = [exact_match(p, t.answer) for p in preds]
        thinks = [think_text(r.transcript) for r in group]
        cover = [waypoint_coverage(t.waypoints, th) if t.waypoints else 0.0 for th in thinks]
        # The rollout is valid for WCR when it finished with a parsable answer.
        valid = [r.stop_reason == "final" and bool(p) for r, p in zip(group, preds, strict=True)]
        wcr = wcr_rewards(correct, valid, cover, s.wcr_alpha)
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
                    "answer_f1": token_f1(preds[i], t.answer),
                    "evidence_f1": token_f1(ev_pred, t.evidence) if ev_pred else 0.0,
                    "solver_reward": solver_reward(
                        preds[i], t.answer, ev_pred, t.evidence, s.lambda_e
                    ),
                    "wcr_coverage": cover[i] if t.waypoints else None,
                    "wcr_reward": wcr[i],
                    "evidence_hit_step": (
                        retrieval_hit(r.retrieved_ids, t.evidence_passage_id)
                        if t.evidence_passage_id
                        else None
                    ),
                    "query_redundancy": redundancy,
                    "step_rewards": steps,
                }
            )
        results.append(SolverResult(len(group), sum(correct), rows))
    return results
