"""Evidence verifier: does the span raise the solver's chance of producing the answer?

Monte Carlo (eq. 14): m single-turn, search-disabled answers with the evidence and m without,
all prompts of a batch in one generate call. Teacher forced: log P(answer | prompt) for both
prompts in one score call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.agents.prompts import ANSWER_STOP, FewShot, answer_prompt
from pipeline.agents.rewards import (
    exact_match,
    verifier_mc,
    verifier_pmi,
    verifier_teacher_forced,
)
from pipeline.llm import usage
from pipeline.llm.base import Generator, SamplingParams
from pipeline.llm.chat import Render, plain


@dataclass(frozen=True)
class VerifierItem:
    record_id: str
    question: str
    answer: str
    evidence: str


@dataclass
class VerifierResult:
    p_pos: float
    p_neg: float
    v: float
    method: str
    m: int
    samples: list[dict]  # rows for the verifier_samples table (without run/time columns)


def verify_mc(
    gen: Generator,
    items: Sequence[VerifierItem],
    shots: Sequence[FewShot],
    m: int,
    temperature: float,
    top_p: float,
    max_tokens: int,
    seed: int,
    render: Render = plain,
    baseline: Sequence[VerifierResult] | None = None,
) -> list[VerifierResult]:
    """V̂ per item. With `baseline` (one earlier result per item, same question and answer)
    only the with-evidence condition is sampled and p₋ is the baseline's: the verifier
    controls swap the evidence, and a control must differ from the real V in p₊ alone."""
    conds = ("with_evidence",) if baseline is not None else ("with_evidence", "without_evidence")
    prompts = []
    for it in items:
        prompts.append(render(answer_prompt(it.question, shots, context=it.evidence)))
        if baseline is None:
            prompts.append(render(answer_prompt(it.question, shots, context=None)))
    params = SamplingParams(
        n=m,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        stop=ANSWER_STOP,
        seed=seed,
    )
    with usage.owned(prompts, [it.record_id for it in items for _ in conds]):
        outs = gen.generate(prompts, params)
    results = []
    for j, it in enumerate(items):
        rows, correct = [], {"with_evidence": [], "without_evidence": []}
        for off, cond in enumerate(conds):
            k = len(conds) * j + off
            for s, raw in enumerate(outs[k]):
                pred = raw.strip()
                ok = exact_match(pred, it.answer)
                correct[cond].append(ok)
                rows.append(
                    {
                        "sample_id": f"{it.record_id}:mc:{cond[:-9]}:{s}",
                        "record_id": it.record_id,
                        "condition": cond,
                        "sample": s,
                        "method": "mc",
                        "prompt": prompts[k],
                        "raw_output": raw,
                        "predicted_answer": pred,
                        "correct": ok,
                        "logprob": None,
                    }
                )
        if baseline is not None:
            p_pos, _, _ = verifier_mc(correct["with_evidence"], [False])
            p_neg = baseline[j].p_neg
            v = p_pos - p_neg
        else:
            p_pos, p_neg, v = verifier_mc(correct["with_evidence"], correct["without_evidence"])
        results.append(VerifierResult(p_pos, p_neg, v, "mc", m, rows))
    return results


def verify_teacher_forced(
    gen: Generator,
    items: Sequence[VerifierItem],
    shots: Sequence[FewShot],
    render: Render = plain,
    baseline: Sequence[VerifierResult] | None = None,
) -> list[VerifierResult]:
    """V per item from one score call; with `baseline` only the with-evidence prompts are
    scored and log P(a | q) is the baseline's (see verify_mc)."""
    contexts = (True,) if baseline is not None else (True, False)
    prompts, conts = [], []
    for it in items:
        for with_ev in contexts:
            ctx = it.evidence if with_ev else None
            prompts.append(render(answer_prompt(it.question, shots, context=ctx)))
            conts.append(" " + it.answer.strip())
    with usage.owned(prompts, [it.record_id for it in items for _ in contexts]):
        logps = gen.score(prompts, conts)
    results = []
    w = len(contexts)
    for j, it in enumerate(items):
        lw = logps[w * j]
        lo = logps[w * j + 1] if baseline is None else _logp_without(baseline[j])
        p_pos, p_neg, v = verifier_teacher_forced(lw, lo)
        rows = [
            {
                "sample_id": f"{it.record_id}:tf:{cond[:-9]}",
                "record_id": it.record_id,
                "condition": cond,
                "sample": 0,
                "method": "teacher_forced",
                "prompt": prompts[w * j + off],
                "raw_output": None,
                "predicted_answer": conts[w * j + off].strip(),
                "correct": None,
                "logprob": lp,
            }
            for off, (cond, lp) in enumerate((("with_evidence", lw), ("without_evidence", lo)))
            if off < w
        ]
        results.append(VerifierResult(p_pos, p_neg, v, "teacher_forced", 0, rows))
    return results


def pmi_from_teacher_forced(
    results: Sequence[VerifierResult],
    answer_tokens: Sequence[int],
    baseline: Sequence[VerifierResult] | None = None,
) -> list[VerifierResult]:
    """The `teacher_forced_pmi` estimator from teacher-forced results: the same score call's
    log-probabilities (no second model call), V = tanh(PMI per answer token). Results scored
    with a `baseline` (the controls) hold the with-evidence row only: log P(a|q) is the
    baseline's."""
    out = []
    for j, (res, n) in enumerate(zip(results, answer_tokens, strict=True)):
        lw = next(r["logprob"] for r in res.samples if r["condition"] == "with_evidence")
        lo = _logp_without(baseline[j] if baseline is not None else res)
        p_pos, p_neg, v = verifier_pmi(lw, lo, n)
        rows = [{**r, "method": "teacher_forced_pmi", "sample_id": r["sample_id"] + ":pmi"}
                for r in res.samples]  # fmt: skip
        out.append(VerifierResult(p_pos, p_neg, v, "teacher_forced_pmi", 0, rows))
    return out


def answer_tokens(gen: Generator, answer: str) -> int:
    """Tokens of the continuation verify_teacher_forced scores (" " + answer), at least 1."""
    return max(1, gen.count_tokens(" " + answer.strip()))


def _logp_without(res: VerifierResult) -> float:
    return next(r["logprob"] for r in res.samples if r["condition"] == "without_evidence")
