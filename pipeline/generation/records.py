"""The rows one generated record lands as: a curriculum row and a proposer-rollout row.

A curriculum row is assembled from parts, each owned by the step that produced it (the plan
slot, the proposal, the format score, the solver's and the verifier's summaries, the run's
provenance), and checked against the table contract by `build_row`: the schema's field list
decides the row, so a column added to schemas/tables.py without a producer fails loudly.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.agents.proposer import Proposal, ProposerResult, ProposerSettings
from pipeline.agents.rewards import FormatScore
from pipeline.agents.rollout import Rollout
from pipeline.agents.solver import SolverResult
from pipeline.agents.targets import Target
from pipeline.agents.verifier import VerifierResult
from pipeline.core.contracts import build_row
from pipeline.selector.run_plan import PlanItem
from schemas.tables import SCHEMA_VERSION


@dataclass(frozen=True)
class Scored:
    """Everything known about one proposer output once it has been checked and scored."""

    item: PlanItem
    subgraph: dict | None
    target: Target
    record_id: str
    title: str
    proposed: ProposerResult
    fmt: FormatScore
    solver: SolverResult | None
    verifier: VerifierResult | None
    evidence_tokens: int | None
    brevity: float | None
    difficulty: float | None
    reward: float
    v_threshold_quantile: float
    single_hop_share: float

    @property
    def proposal(self) -> Proposal:
        return self.proposed.proposal

    @property
    def rollout(self) -> Rollout:
        return self.proposed.rollout

    @property
    def prompt(self) -> str:
        return self.proposed.prompt


@dataclass(frozen=True)
class Provenance:
    """What every record of one shard shares: where, when and by what it was made."""

    run_id: str
    shard: int
    created_at: dt.datetime
    model: str
    embedder_model: str
    index_fingerprint: str
    config_hash: str


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def plan_columns(s: Scored) -> dict[str, Any]:
    item, sg, t = s.item, s.subgraph, s.target
    return {
        "record_id": s.record_id,
        "slot": item.slot,
        "source_passage_id": item.passage_id,
        "source_title": s.title,
        "cluster_id": item.cluster_id,
        "task_type": item.task_type,
        "hop_count": t.hops,
        "planned_hops": item.hop_count,
        "subgraph_id": sg["subgraph_id"] if sg else None,
        "kg_path": t.path,
        "waypoints": t.waypoints or None,
    }


# How each kind of target fixed its answer (the curriculum's evidence_mode).
EVIDENCE_MODES = {
    "kg": "kg_path",
    "passage": "passage_span",
    "bridge": "passage_bridge",
    "comparison": "passage_comparison",
}


def chain_rows(t: Target) -> list[dict[str, Any]] | None:
    """The evidence chain as the curriculum stores it (null for a task not posed)."""
    if not t.chain:
        return None
    return [
        {
            "hop": k,
            "passage_id": h.passage_id,
            "char_start": h.start,
            "char_end": h.end,
            "text": h.text,
            "subject": h.subject,
            "relation": h.relation,
            "object": h.object,
            "source": h.source,
        }
        for k, h in enumerate(t.chain, 1)
    ]


def target_columns(s: Scored) -> dict[str, Any]:
    t, pr = s.target, s.proposed
    return {
        "evidence_mode": EVIDENCE_MODES[t.kind],
        "evidence_chain": chain_rows(t) if t.posed else None,
        "question_style": t.style if t.posed else None,
        "missing_hop": t.missing_hop,
        "answer_aliases": list(t.aliases),
        "answer_span_kind": t.span_kind,
        "question_source": pr.question_source,
        "question_attempts": pr.attempts,
    }


def proposal_columns(p: Proposal) -> dict[str, Any]:
    return {
        "question": p.question,
        "answer": p.answer,
        "evidence": p.evidence,
        "evidence_source": p.evidence_source,
        "evidence_status": p.evidence_status,
        "evidence_passage_id": p.evidence_passage_id,
        "evidence_char_start": p.evidence_start,
        "evidence_char_end": p.evidence_end,
        "is_verbatim": p.evidence_status == "verbatim",
        "raw_proposer_output": p.raw,
    }


def format_columns(fmt: FormatScore, rollout: Rollout) -> dict[str, Any]:
    return {
        "format_score": fmt.total,
        "f_think": fmt.think,
        "f_tool": fmt.tool,
        "f_answer": fmt.answer,
        "proposer_turns": rollout.turns,
        "proposer_searches": len(rollout.searches),
    }


def solver_columns(sol: SolverResult | None) -> dict[str, Any]:
    wcr = [x["wcr_coverage"] for x in sol.rollouts if x["wcr_coverage"] is not None] if sol else []
    return {
        "solver_n": sol.n if sol else None,
        "solver_k": sol.k if sol else None,
        "solver_reward_mean": _mean([x["solver_reward"] for x in sol.rollouts]) if sol else None,
        "wcr_coverage_mean": _mean(wcr) if sol else None,
    }


def verifier_columns(ver: VerifierResult | None) -> dict[str, Any]:
    return {
        "verifier_p_pos": ver.p_pos if ver else None,
        "verifier_p_neg": ver.p_neg if ver else None,
        "verifier_v": ver.v if ver else None,
        "verifier_method": ver.method if ver else None,
        "verifier_m": ver.m if ver else None,
    }


def reward_columns(s: Scored) -> dict[str, Any]:
    return {
        "is_valid": s.proposed.valid,
        "invalid_reason": s.proposed.invalid_reason,
        "difficulty": s.difficulty,
        "evidence_tokens": s.evidence_tokens,
        "brevity": s.brevity,
        "proposer_reward": s.reward,
        "v_threshold_quantile": s.v_threshold_quantile,
        "single_hop_share": s.single_hop_share,
        "prompt": s.prompt,
    }


def provenance_columns(pv: Provenance) -> dict[str, Any]:
    return {
        "run_id": pv.run_id,
        "shard": pv.shard,
        "created_at": pv.created_at,
        "proposer_model": pv.model,
        "solver_model": pv.model,
        "embedder_model": pv.embedder_model,
        "index_fingerprint": pv.index_fingerprint,
        "config_hash": pv.config_hash,
        "schema_version": SCHEMA_VERSION,
    }


def curriculum_row(s: Scored, pv: Provenance, gates: Mapping[str, Any]) -> dict[str, Any]:
    """One curriculum row (schemas.tables.CURRICULUM), in the contract's field order; `gates`
    are the LLM quality gates' columns (pipeline.generation.gates.GATE_COLUMNS, None when a
    gate is off or does not apply)."""
    return build_row(
        "curriculum",
        gates,
        plan_columns(s),
        target_columns(s),
        proposal_columns(s.proposal),
        format_columns(s.fmt, s.rollout),
        solver_columns(s.solver),
        verifier_columns(s.verifier),
        reward_columns(s),
        provenance_columns(pv),
    )


def proposer_row(s: Scored, settings: ProposerSettings, run_id: str, now: dt.datetime) -> dict:
    """One proposer_rollouts row: the proposer's whole rollout, for audit and training."""
    r = s.rollout
    return build_row(
        "proposer_rollouts",
        {
            "record_id": s.record_id,
            "run_id": run_id,
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
            "temperature": settings.temperature,
            "seed": settings.seed,
            "created_at": now,
        },
    )
