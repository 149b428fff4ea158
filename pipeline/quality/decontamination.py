"""Benchmark decontamination sized for short questions.

Four methods, each a reason on its own to hold a record out of training:

- `exact`: Norm(question) equals a benchmark question's (re-punctuated, re-cased copies).
- `ngram`: word n-grams of Norm(question), n = `quality.ngram_n` (5): the share of the shorter
  question's n-grams found in the other reaches `quality.ngram_threshold`. Containment in the
  shorter one, so a benchmark question copied into a longer one, or cut short, still counts;
  13-grams (datatrove) cannot fire on questions of 8 normalised words.
- `embedding`: cosine of the run's embedder (query side) at or above
  `quality.embedding_threshold`: paraphrases that share few words.
- `answer_evidence`: Norm(answer) equals a gold answer of an item that carries passages, and
  the record's evidence passage is one of them (same title) or contains the evidence span.

Pure functions over plain record dicts (record_id, run_id, question, answer, evidence,
evidence_title) and `BenchmarkItem`s; the embedding method takes the vectors, so the logic is
tested without a model and the caller decides which embedder to run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.agents.rewards import normalize
from pipeline.quality.benchmarks import Benchmark

METHODS = ("exact", "ngram", "embedding", "answer_evidence")
# Queries per FAISS search call: bounds the distance buffer at any catalog size.
SEARCH_BLOCK = 8192


@dataclass(frozen=True)
class Match:
    record_id: str
    run_id: str
    benchmark: str
    item_id: str
    method: str
    score: float
    benchmark_question: str


def word_ngrams(question: str | None, n: int) -> set[str]:
    """Word n-grams of Norm(question); a question shorter than n words is one gram (itself)."""
    tokens = normalize(question).split()
    if len(tokens) <= n:
        return {" ".join(tokens)} if tokens else set()
    return {" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


class LexicalIndex:
    """Exact, n-gram and answer lookups over one benchmark, built once per check."""

    def __init__(self, bench: Benchmark, n: int) -> None:
        self.bench = bench
        self.n = n
        self.exact: dict[str, int] = {}
        self.postings: dict[str, list[int]] = {}
        self.sizes: list[int] = []
        self.by_answer: dict[str, list[int]] = {}
        for i, item in enumerate(bench.items):
            self.exact.setdefault(normalize(item.question), i)
            grams = word_ngrams(item.question, n)
            self.sizes.append(len(grams))
            for g in grams:
                self.postings.setdefault(g, []).append(i)
            if item.titles or item.texts:
                for a in {normalize(a) for a in item.answers} - {""}:
                    self.by_answer.setdefault(a, []).append(i)

    def match_of(self, rec: dict[str, Any], i: int, method: str, score: float) -> Match:
        item = self.bench.items[i]
        return Match(
            rec["record_id"],
            rec["run_id"],
            self.bench.name,
            item.item_id,
            method,
            float(score),
            item.question,
        )

    def exact_match(self, rec: dict[str, Any]) -> Match | None:
        key = normalize(rec.get("question"))
        i = self.exact.get(key) if key else None
        return None if i is None else self.match_of(rec, i, "exact", 1.0)

    def ngram_match(self, rec: dict[str, Any], threshold: float) -> Match | None:
        """The item with the highest containment (ties: the first item), if >= threshold."""
        grams = word_ngrams(rec.get("question"), self.n)
        if not grams:
            return None
        shared: Counter[int] = Counter()
        for g in grams:
            shared.update(self.postings.get(g, ()))
        best, best_score = -1, 0.0
        for i, k in shared.items():
            score = k / min(len(grams), self.sizes[i])
            if score > best_score or (score == best_score and i < best):
                best, best_score = i, score
        return self.match_of(rec, best, "ngram", best_score) if best_score >= threshold else None

    def answer_evidence_match(self, rec: dict[str, Any]) -> Match | None:
        """Same answer and the same evidence passage (by title, or the span in its text)."""
        cands = self.by_answer.get(normalize(rec.get("answer")), ())
        title, span = normalize(rec.get("evidence_title")), normalize(rec.get("evidence"))
        for i in cands:
            item = self.bench.items[i]
            if title and title in {normalize(t) for t in item.titles}:
                return self.match_of(rec, i, "answer_evidence", 1.0)
            if span and any(f" {span} " in f" {normalize(t)} " for t in item.texts):
                return self.match_of(rec, i, "answer_evidence", 1.0)
        return None


def nearest(queries: np.ndarray, base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index and inner product of each query's nearest base vector (exact, FAISS flat IP)."""
    import faiss

    index = faiss.IndexFlatIP(base.shape[1])
    index.add(np.ascontiguousarray(base, dtype=np.float32))
    scores, ids = [], []
    for start in range(0, len(queries), SEARCH_BLOCK):
        d, i = index.search(np.ascontiguousarray(queries[start : start + SEARCH_BLOCK]), 1)
        scores.append(d[:, 0])
        ids.append(i[:, 0])
    if not scores:
        return np.empty(0, np.int64), np.empty(0, np.float32)
    return np.concatenate(ids), np.concatenate(scores)


def decontaminate(
    records: Sequence[dict[str, Any]],
    bench: Benchmark,
    ngram_n: int,
    ngram_threshold: float,
    embedding_threshold: float | None = None,
    encode: Callable[[list[str]], np.ndarray] | None = None,
) -> list[Match]:
    """Every method that fires for each record against one benchmark (best item per method).

    `encode` maps questions to L2-normalised vectors (the run's embedder, query side); without
    it, or without a threshold, the embedding method is skipped."""
    index = LexicalIndex(bench, ngram_n)
    out: list[Match] = []
    for rec in records:
        for m in (
            index.exact_match(rec),
            index.ngram_match(rec, ngram_threshold),
            index.answer_evidence_match(rec),
        ):
            if m is not None:
                out.append(m)
    if encode is not None and embedding_threshold is not None:
        asked = [r for r in records if normalize(r.get("question"))]
        if asked:
            rec_vecs = encode([r["question"] for r in asked])
            bench_vecs = encode([item.question for item in bench.items])
            ids, scores = nearest(rec_vecs, bench_vecs)
            for rec, i, s in zip(asked, ids, scores, strict=True):
                if s >= embedding_threshold:
                    out.append(index.match_of(rec, int(i), "embedding", min(float(s), 1.0)))
    order = {m: k for k, m in enumerate(METHODS)}
    out.sort(key=lambda m: (m.record_id, order[m.method]))
    return out


__all__ = ["METHODS", "LexicalIndex", "Match", "decontaminate", "nearest", "word_ngrams"]
