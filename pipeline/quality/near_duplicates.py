"""Near-duplicate questions across runs (issue 17, item 2).

Two kinds of edge between records, then connected components:

- lexical: MinHash LSH (datasketch) over the word set of Norm(question), so questions that
  differ only by word order, case or punctuation have Jaccard 1. LSH only proposes candidates;
  an edge is kept when the true Jaccard of the two word sets reaches the threshold, so LSH's
  false positives never merge clusters (its misses are measured in
  benchmarks/bench_quality.py against brute force).
- semantic: cosine of the run's embedder between questions, exact nearest neighbours (FAISS
  flat inner product), at or above a stricter threshold.

A cluster is named by its smallest record_id, which stays the same when the catalog grows
unless a smaller id joins it. Pure functions over questions and vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from pipeline.agents.rewards import normalize
from pipeline.quality.decontamination import SEARCH_BLOCK

MINHASH_SEED = 1


@dataclass(frozen=True)
class Edge:
    i: int
    j: int
    method: str  # minhash | embedding
    score: float


def word_set(question: str | None) -> frozenset[str]:
    return frozenset(normalize(question).split())


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def minhash_edges(
    questions: Sequence[str | None], threshold: float, num_perm: int = 128
) -> list[Edge]:
    """Pairs whose word-set Jaccard >= threshold, found through MinHash LSH candidates."""
    from datasketch import MinHash, MinHashLSH

    sets = [word_set(q) for q in questions]
    live = [i for i, s in enumerate(sets) if s]
    hashes = MinHash.bulk(
        ([w.encode("utf-8") for w in sets[i]] for i in live), num_perm=num_perm, seed=MINHASH_SEED
    )
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    with lsh.insertion_session() as session:
        for i, mh in zip(live, hashes, strict=True):
            session.insert(i, mh, check_duplication=False)
    edges = []
    for i, mh in zip(live, hashes, strict=True):
        for j in lsh.query(mh):
            if j > i and (score := jaccard(sets[i], sets[j])) >= threshold:
                edges.append(Edge(i, j, "minhash", score))
    return edges


def brute_force_edges(questions: Sequence[str | None], threshold: float) -> list[Edge]:
    """Every pair with Jaccard >= threshold, by exhaustive comparison: the reference LSH is
    measured against (benchmarks/bench_quality.py). Vectorised over a word-incidence matrix,
    one block of rows at a time; quadratic in the number of questions."""
    sets = [word_set(q) for q in questions]
    vocab: dict[str, int] = {}
    rows, cols = [], []
    for i, s in enumerate(sets):
        for w in s:
            rows.append(i)
            cols.append(vocab.setdefault(w, len(vocab)))
    n = len(sets)
    x = coo_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n, len(vocab))).tocsr()
    sizes = np.array([len(s) for s in sets], np.float32)
    xt = x.T.tocsc()
    edges = []
    for start in range(0, n, 1024):
        stop = min(start + 1024, n)
        inter = (x[start:stop] @ xt).toarray()
        union = sizes[start:stop, None] + sizes[None, :] - inter
        with np.errstate(divide="ignore", invalid="ignore"):
            jac = np.where(union > 0, inter / union, 0.0)
        ii, jj = np.nonzero(jac >= threshold)
        for a, j in zip(ii + start, jj, strict=True):
            if j > a:
                edges.append(Edge(int(a), int(j), "minhash", float(jac[a - start, j])))
    return edges


def semantic_edges(vectors: np.ndarray, threshold: float, neighbours: int = 10) -> list[Edge]:
    """Pairs among each question's `neighbours` nearest (cosine of L2-normalised vectors)."""
    import faiss

    n = len(vectors)
    if n < 2:
        return []
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    k = min(neighbours + 1, n)
    edges = []
    for start in range(0, n, SEARCH_BLOCK):
        d, ids = index.search(np.ascontiguousarray(vectors[start : start + SEARCH_BLOCK]), k)
        for row, (ds, js) in enumerate(zip(d, ids, strict=True)):
            i = start + row
            for s, j in zip(ds, js, strict=True):
                if j >= 0 and j != i and s >= threshold:
                    edges.append(Edge(min(i, int(j)), max(i, int(j)), "embedding", float(s)))
    return sorted(set(edges), key=lambda e: (e.i, e.j, e.method))


@dataclass(frozen=True)
class Clustered:
    record_id: str
    cluster_id: str
    cluster_size: int
    nearest_record_id: str | None
    method: str | None
    score: float | None


def cluster(record_ids: Sequence[str], edges: Sequence[Edge]) -> list[Clustered]:
    """Connected components of the edges; per record its cluster, and its strongest edge."""
    n = len(record_ids)
    if n == 0:
        return []
    a = np.array([e.i for e in edges], np.int64)
    b = np.array([e.j for e in edges], np.int64)
    graph = coo_matrix((np.ones(len(edges)), (a, b)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    name: dict[int, str] = {}
    size: dict[int, int] = {}
    for i, lab in enumerate(labels):
        name[lab] = min(name.get(lab, record_ids[i]), record_ids[i])
        size[lab] = size.get(lab, 0) + 1
    best: dict[int, tuple[float, int, str]] = {}
    for e in edges:
        for x, y in ((e.i, e.j), (e.j, e.i)):
            cand = (e.score, y, e.method)
            if x not in best or (cand[0], -cand[1]) > (best[x][0], -best[x][1]):
                best[x] = cand
    out = []
    for i, rid in enumerate(record_ids):
        lab = labels[i]
        near = best.get(i)
        out.append(
            Clustered(
                rid,
                name[lab],
                size[lab],
                record_ids[near[1]] if near else None,
                near[2] if near else None,
                near[0] if near else None,
            )
        )
    return out


__all__ = [
    "Clustered",
    "Edge",
    "brute_force_edges",
    "cluster",
    "jaccard",
    "minhash_edges",
    "semantic_edges",
    "word_set",
]
