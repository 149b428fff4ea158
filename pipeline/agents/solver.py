"""Solver (foundation version): one batched search per question, then n sampled answers.

The multi-turn Search-R1 rollout engine replaces this; the difficulty reward it feeds
(k correct of n) keeps the same meaning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.agents.prompts import ANSWER_STOP, FewShot, solver_prompt
from pipeline.index import Retriever, format_docs
from pipeline.llm.base import Generator, SamplingParams
from pipeline.rewards import exact_match


@dataclass
class SolverResult:
    n: int
    k: int
    rollouts: list[dict]  # rows for the solver_rollouts table (without run/time columns)


def solve(
    gen: Generator,
    retriever: Retriever,
    record_ids: Sequence[str],
    questions: Sequence[str],
    answers: Sequence[str],
    shots: Sequence[FewShot],
    n: int,
    topk: int,
    max_doc_tokens: int,
    temperature: float,
    max_tokens: int,
    seed: int,
) -> list[SolverResult]:
    hits = retriever.search(list(questions), topk)  # all searches of the turn in one batch
    prompts = [
        solver_prompt(q, format_docs(h, gen.count_tokens, max_doc_tokens), shots)
        for q, h in zip(questions, hits, strict=True)
    ]
    params = SamplingParams(
        n=n, temperature=temperature, max_tokens=max_tokens, stop=ANSWER_STOP, seed=seed
    )
    outs = gen.generate(prompts, params)
    results = []
    for rid, q, a, h, prompt, samples in zip(
        record_ids, questions, answers, hits, prompts, outs, strict=True
    ):
        rows = []
        for s, raw in enumerate(samples):
            pred = raw.strip()
            rows.append(
                {
                    "rollout_id": f"{rid}:sol:{s}",
                    "record_id": rid,
                    "sample": s,
                    "prompt": prompt,
                    "raw_output": raw,
                    "predicted_answer": pred,
                    "think": None,
                    "searches": [q],
                    "retrieved_ids": [x.id for x in h],
                    "turns": 1,
                    "correct": exact_match(pred, a),
                }
            )
        results.append(SolverResult(n, sum(r["correct"] for r in rows), rows))
    return results
