"""The LLM quality gates of a shard, run right after the verifier.

Both reuse the agents rather than copying them: the shortcut check is `solve()` with the
search tool disabled (closed book) and with a search budget of 1, the controls are
`verify_mc()` / `verify_teacher_forced()` on substituted evidence. Each step is one batched
call for the whole shard, like the verifier, so the gates are resumable with the shard and run
wherever it runs. The statistics are pure functions in `pipeline.generation.gate_stats`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pipeline.agents.prompts import ANSWER_STOP, FewShot, answer_prompt
from pipeline.agents.rewards import covers_any
from pipeline.agents.solver import SolverResult, SolverSettings, SolverTask, solve
from pipeline.agents.verifier import (
    VerifierItem,
    VerifierResult,
    answer_tokens,
    pmi_from_teacher_forced,
    verify_mc,
    verify_teacher_forced,
)
from pipeline.generation.gate_stats import (
    accuracy,
    answer_candidates,
    derangement,
    in_sample,
    is_shortcut,
    is_unique,
)
from pipeline.llm import usage
from pipeline.llm.base import Generator, SamplingParams
from pipeline.llm.chat import Render
from pipeline.retrieval.base import RetrieverBackend

CHECKS = ("closed_book", "one_search")
CONTROLS = ("shuffled", "answer_only", "off_topic")
_V_COLUMN = {"shuffled": "v_shuffled", "answer_only": "v_answer_only", "off_topic": "v_off_topic"}


@dataclass
class GateResult:
    """One record's gate outcomes: curriculum columns plus the rows of the gates' tables."""

    columns: dict[str, Any] = field(default_factory=lambda: dict.fromkeys(GATE_COLUMNS))
    rollouts: list[dict] = field(default_factory=list)  # gate_rollouts rows
    controls: list[dict] = field(default_factory=list)  # control_scores rows


GATE_COLUMNS = (
    "gold_n",
    "gold_correct",
    "gold_decided_by",
    "closed_book_accuracy",
    "one_search_accuracy",
    "shortcut",
    "shortcut_verdict",
    "answer_candidates",
    "unique_answer",
    "uniqueness_verdict",
    "one_search_answerable",
    "one_search_verdict",
    "hop_drop_logprobs",
    "disconnected",
    "connected_decided_by",
    "connected_verdict",
    "v_shuffled",
    "v_answer_only",
    "v_off_topic",
)


SHORTCUT_COLUMNS = ("closed_book_accuracy", "one_search_accuracy", "shortcut")


def gold_evidence_check(
    gen: Generator,
    items: Sequence[VerifierItem],
    aliases: Sequence[Sequence[str]],
    shots: Sequence[FewShot],
    n: int,
    temperature: float,
    max_tokens: int,
    seed: int,
    render: Render,
    answer_words: int,
) -> list[GateResult]:
    """Can the solver answer at all when handed the gold evidence? `n` single-turn answers
    per record with its evidence as context (greedy for n = 1), each scored by cover-EM
    against any accepted form of the answer (`covers_any`, replies of at most `answer_words`
    words). A record none of them answers gives the shortcut and uniqueness gates nothing to
    measure: their verdict is `undetermined`, never a pass."""
    params = SamplingParams(
        n=n, temperature=temperature if n > 1 else 0.0, max_tokens=max_tokens,
        stop=ANSWER_STOP, seed=seed,
    )  # fmt: skip
    prompts = [render(answer_prompt(it.question, shots, context=it.evidence)) for it in items]
    with usage.owned(prompts, [it.record_id for it in items]):
        outs = gen.generate(prompts, params) if items else []
    results = []
    for it, forms, prompt, group in zip(items, aliases, prompts, outs, strict=True):
        res = GateResult()
        for k, raw in enumerate(group):
            pred = raw.strip()
            ok = covers_any(pred, (it.answer, *forms), answer_words)
            res.rollouts.append(
                {
                    "rollout_id": f"{it.record_id}:gold_evidence:{k}",
                    "record_id": it.record_id,
                    "check": "gold_evidence",
                    "sample": k,
                    "prompt": prompt,
                    "raw_output": raw,
                    "predicted_answer": pred or None,
                    "searches": [],
                    "retrieved_ids": [],
                    "turns": 1,
                    "stop_reason": "final",
                    "forced_final": False,
                    "correct": ok,
                }
            )
        res.columns["gold_n"] = len(group)
        res.columns["gold_correct"] = sum(r["correct"] for r in res.rollouts)
        results.append(res)
    return results


def shortcut_check(
    gen: Generator,
    retriever: RetrieverBackend,
    tasks: Sequence[SolverTask],
    hops: Sequence[int],
    shots: Sequence[FewShot],
    base: SolverSettings,
    n: int,
    threshold: float,
    render: Render,
    answer_words: int,
) -> list[GateResult]:
    """Closed-book and one-search solver accuracy per multi-hop task, and the shortcut flag.
    Scored by cover-EM like the gold-evidence check, so a wordy right answer counts the same
    on both sides of the comparison.

    Closed book: two turns with the search tool off (a <search> is ignored and <answer>
    opened). One search: a budget of 1, at most three turns (search, answer; a refused second
    search gets <answer> opened). Always the Search-R1 protocol: the gate measures answers."""
    plain = replace(base, n=n, protocol="search_r1")
    closed = replace(plain, search=False, max_turns=2, seed=base.seed + 101)
    one = replace(plain, search_budget=1, max_turns=min(max(base.max_turns, 2), 3))
    one = replace(one, seed=base.seed + 102)
    out = {check: solve(gen, retriever, tasks, shots, s, render) if tasks else []
           for check, s in (("closed_book", closed), ("one_search", one))}  # fmt: skip
    results = []
    for j, (t, h) in enumerate(zip(tasks, hops, strict=True)):
        res = GateResult()
        accs = {}
        for check in CHECKS:
            sol: SolverResult = out[check][j]
            rows = [_gate_rollout(row, check, t.record_id) for row in sol.rollouts]
            for row in rows:
                row["correct"] = covers_any(
                    row["predicted_answer"], (t.answer, *t.aliases), answer_words
                )
            accs[check] = accuracy([row["correct"] for row in rows])
            res.rollouts += rows
        res.columns["closed_book_accuracy"] = accs["closed_book"]
        res.columns["one_search_accuracy"] = accs["one_search"]
        res.columns["shortcut"] = is_shortcut(h, accs["closed_book"], accs["one_search"], threshold)
        results.append(res)
    return results


def _gate_rollout(row: dict, check: str, record_id: str) -> dict:
    keep = ("prompt", "raw_output", "predicted_answer", "searches", "retrieved_ids", "turns")
    return {
        "rollout_id": f"{record_id}:{check}:{row['sample']}",
        "record_id": record_id,
        "check": check,
        "sample": row["sample"],
        **{k: row[k] for k in keep},
        "stop_reason": row["stop_reason"],
        "forced_final": row["forced_final"],
        "correct": row["correct"],
    }


def uniqueness(sol: SolverResult, min_support: int) -> dict[str, Any]:
    """The uniqueness columns from the record's (full-search) solver rollouts."""
    cands = answer_candidates(
        [r["predicted_answer"] for r in sol.rollouts],
        [r["answer_in_retrieved"] for r in sol.rollouts],
        min_support,
    )
    return {"answer_candidates": cands, "unique_answer": is_unique(cands)}


@dataclass(frozen=True)
class ControlSubject:
    """A verified record in the controls' sample, with what its substitutes are drawn from."""

    item: VerifierItem
    cluster_id: int
    verified: dict[str, VerifierResult]  # method -> its real result
    hops: int = 1  # the off-topic control's chain has as many sentences as the record's


@dataclass(frozen=True)
class VerifierRun:
    """How the run's verifier samples (the controls use the same settings and seed)."""

    methods: tuple[str, ...]
    m: int
    temperature: float
    top_p: float
    max_tokens: int
    seed: int


def control_subjects(
    items: Sequence[VerifierItem],
    clusters: Sequence[int],
    verified: Sequence[dict[str, VerifierResult]],
    share: float,
    hops: Sequence[int] | None = None,
) -> list[ControlSubject]:
    hops = hops or [1] * len(items)
    return [
        ControlSubject(it, c, v, h)
        for it, c, v, h in zip(items, clusters, verified, hops, strict=True)
        if in_sample(it.record_id, share)
    ]


def verifier_controls(
    gen: Generator,
    subjects: Sequence[ControlSubject],
    pool: Sequence[VerifierItem],
    off_topic: Callable[[str, int, int], tuple[str, str, int] | None],
    shots: Sequence[FewShot],
    vr: VerifierRun,
    render: Render,
    now: dt.datetime,
    run_id: str,
) -> dict[str, GateResult]:
    """V of each subject again with (a) another record's evidence chain, (b) the answer alone
    and (c) an off-topic chain (a sentence of another cluster's passage per hop), per verifier
    method, with p₋ (or log P(a|q)) reused from the
    real run so a control differs from the real V only through the evidence.

    `teacher_forced_pmi` is derived from the teacher-forced control scores (each subject's
    `verified` then holds "teacher_forced" too, as the Controls step gives it). `pool` is every
    verified record of the shard: the shuffled evidence follows a derangement
    of it, so with two or more verified records every subject gets another record's evidence.
    `off_topic(record_id, cluster_id, hops)` returns (text, first passage id, its cluster):
    one sentence of each of `hops` passages of other clusters, or None when the run has only
    one cluster."""
    shuffle = derangement(len(pool), vr.seed) if len(pool) >= 2 else None
    pos = {it.record_id: k for k, it in enumerate(pool)}
    jobs: list[tuple[ControlSubject, str, VerifierItem, dict]] = []
    for s in subjects:
        it = s.item
        other = _shuffled_partner(pool, shuffle, pos[it.record_id]) if shuffle else None
        if other is not None:
            jobs.append(
                (s, "shuffled", replace(it, evidence=other.evidence),
                 {"evidence_record_id": other.record_id})
            )  # fmt: skip
        jobs.append((s, "answer_only", replace(it, evidence=it.answer), {}))
        far = off_topic(it.record_id, s.cluster_id, s.hops)
        if far is not None:
            text, pid, cluster = far
            jobs.append(
                (s, "off_topic", replace(it, evidence=text),
                 {"evidence_passage_id": pid, "evidence_cluster_id": cluster})
            )  # fmt: skip
    out: dict[str, GateResult] = {s.item.record_id: GateResult() for s in subjects}
    for s in subjects:
        for method, real in s.verified.items():
            out[s.item.record_id].controls.append(
                control_row(s.item, method, "real", s.item.evidence, real, {}, run_id, now)
            )
    items = [item for _, _, item, _ in jobs]
    tf: list[VerifierResult] | None = None  # one score call serves teacher_forced and _pmi
    tf_base = [s.verified.get("teacher_forced") for s, _, _, _ in jobs]
    for method in vr.methods:
        if not items:
            break
        if method == "mc":
            base = [s.verified["mc"] for s, _, _, _ in jobs]
            res = verify_mc(
                gen, items, shots, vr.m, vr.temperature, vr.top_p, vr.max_tokens,
                vr.seed, render, baseline=base,
            )  # fmt: skip
        else:
            if tf is None:
                tf = verify_teacher_forced(gen, items, shots, render, baseline=tf_base)
            res = tf
            if method == "teacher_forced_pmi":
                ntok = [answer_tokens(gen, it.answer) for it in items]
                res = pmi_from_teacher_forced(tf, ntok, baseline=tf_base)
        for (s, control, item, extra), r in zip(jobs, res, strict=True):
            g = out[s.item.record_id]
            g.controls.append(
                control_row(item, method, control, item.evidence, r, extra, run_id, now)
            )
            if method == vr.methods[0]:  # the run's primary method fills the curriculum columns
                g.columns[_V_COLUMN[control]] = r.v
    return out


def _shuffled_partner(
    pool: Sequence[VerifierItem], shuffle: Sequence[int], k: int
) -> VerifierItem | None:
    """The record whose evidence item k gets: its derangement partner, or, when that record
    has the very same evidence (two slots with one target), the next one along the cycle that
    does not; None when every other record shares it (no shuffled control then)."""
    j = shuffle[k]
    for _ in range(len(pool) - 1):
        if pool[j].evidence != pool[k].evidence:
            return pool[j]
        j = shuffle[j]
    return None


def control_row(
    item: VerifierItem,
    method: str,
    control: str,
    evidence: str,
    r: VerifierResult,
    extra: dict,
    run_id: str,
    now: dt.datetime,
) -> dict:
    return {
        "record_id": item.record_id,
        "run_id": run_id,
        "method": method,
        "control": control,
        "evidence": evidence,
        "evidence_record_id": extra.get("evidence_record_id"),
        "evidence_passage_id": extra.get("evidence_passage_id"),
        "evidence_cluster_id": extra.get("evidence_cluster_id"),
        "dropped_hop": extra.get("dropped_hop"),
        "p_pos": r.p_pos,
        "p_neg": r.p_neg,
        "v": r.v,
        "m": r.m,
        "created_at": now,
    }
