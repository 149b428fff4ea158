"""Near-duplicate questions across runs.

Two kinds of edge between records, then connected components:

- lexical: MinHash LSH over the word set of Norm(question), so questions that differ only by
  word order, case or punctuation have Jaccard 1: datasketch's MinHash and its choice of
  bands, each band's bucket kept as a 64-bit key (`band_keys`), so a record's keys can be
  stored once and a later night's questions looked up against them. LSH only proposes
  candidates; an edge is kept when the true Jaccard of the two word sets reaches the
  threshold, so LSH's false positives never merge clusters (its misses are measured in
  benchmarks/bench_quality.py against brute force).
- semantic: cosine of the run's embedder between questions, exact nearest neighbours (FAISS
  flat inner product), at or above a stricter threshold.

A cluster is named by its smallest record_id, which stays the same when the catalog grows
unless a smaller id joins it. `merge_clusters` adds new records and their edges to clusters
computed before, with the result `cluster` gives over everything. Pure functions over
questions and vectors.
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


def lsh_shape(threshold: float, num_perm: int) -> tuple[int, int]:
    """(bands, rows per band): datasketch's MinHashLSH choice for the threshold (its
    false-positive / false-negative optimum), 9 bands of 13 at 0.8 and 128 permutations."""
    from datasketch import MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    return lsh.b, lsh.r


_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, a bijection of 64-bit words (arithmetic wraps)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _MIX1
    x = x ^ (x >> np.uint64(27))
    x = x * _MIX2
    return x ^ (x >> np.uint64(31))


def band_keys(sets: Sequence[frozenset[str]], threshold: float, num_perm: int) -> np.ndarray:
    """The LSH bucket of each (non-empty) word set in each band, as an int64 key: (n, bands).

    The MinHash is datasketch's (seed MINHASH_SEED); each band's `rows` hash values are
    hashed to 64 bits together with the band's number, so two sets share a key exactly when
    MinHashLSH would put them in the same bucket of that band (up to 64-bit collisions, which
    only add candidates: an edge still needs the true Jaccard). Keys are plain integers, so
    they are stored per run and joined in DuckDB instead of rebuilding an LSH index."""
    from datasketch import MinHash

    bands, rows = lsh_shape(threshold, num_perm)
    if not sets:
        return np.empty((0, bands), np.int64)
    hashes = MinHash.bulk(
        ([w.encode("utf-8") for w in s] for s in sets), num_perm=num_perm, seed=MINHASH_SEED
    )
    values = np.stack([m.hashvalues for m in hashes]).astype(np.uint64)
    keys = np.empty((len(sets), bands), np.uint64)
    with np.errstate(over="ignore"):
        for band in range(bands):
            h = _mix(np.full(len(sets), band + 1, np.uint64))
            for col in range(band * rows, (band + 1) * rows):
                h = _mix(h ^ values[:, col])
            keys[:, band] = h
    return keys.view(np.int64)


def shared_key_pairs(keys: np.ndarray) -> set[tuple[int, int]]:
    """Row pairs (i < j) that share a key in at least one band: the LSH candidates."""
    pairs: set[tuple[int, int]] = set()
    for band in range(keys.shape[1]):
        col = keys[:, band]
        order = np.argsort(col, kind="stable")
        ordered = col[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        sizes = np.diff(np.r_[starts, len(col)])
        for start, size in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist(), strict=True):
            group = sorted(order[start : start + size].tolist())
            pairs.update((a, b) for k, a in enumerate(group) for b in group[k + 1 :])
    return pairs


def minhash_edges(
    questions: Sequence[str | None], threshold: float, num_perm: int = 128
) -> list[Edge]:
    """Pairs whose word-set Jaccard >= threshold, among the LSH candidates of `band_keys`."""
    sets = [word_set(q) for q in questions]
    live = [i for i, s in enumerate(sets) if s]
    keys = band_keys([sets[i] for i in live], threshold, num_perm)
    edges = []
    for a, b in sorted(shared_key_pairs(keys)):
        i, j = live[a], live[b]
        if (score := jaccard(sets[i], sets[j])) >= threshold:
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


def _better(cand: tuple[float, str, str], best: tuple[float, str, str] | None) -> bool:
    """`cluster`'s choice of a record's strongest edge: the higher score, then the smaller
    record_id (its position in record_id order); a tie on both keeps the first."""
    return best is None or cand[0] > best[0] or (cand[0] == best[0] and cand[1] < best[1])


def merge_clusters(
    old: Sequence[Clustered],
    new_ids: Sequence[str],
    edges: Sequence[tuple[str, str, str, float]],
) -> list[Clustered]:
    """Clusters after adding records to a clustering computed before, by record id.

    `old`: the rows of every member of each earlier cluster that `edges` touch (the rest of
    the earlier clustering does not change); `new_ids`: the added records; `edges`: (a, b,
    method, score) with at least one added end, every such edge. Returns the rows of `old`
    and of `new_ids`, as `cluster` over all records and all edges would give them: merged
    components named by their smallest record_id, sizes summed, each record's strongest edge
    the better of its earlier one and its new ones."""
    ids = [r.record_id for r in old] + list(new_ids)
    pos = {rid: k for k, rid in enumerate(ids)}
    if len(pos) != len(ids):
        raise ValueError("a record is both old and new, or given twice")
    # Earlier clusters stay connected: each member linked to the member naming its cluster.
    a = [pos[r.record_id] for r in old] + [pos[e[0]] for e in edges]
    b = [pos[r.cluster_id] for r in old] + [pos[e[1]] for e in edges]
    n = len(ids)
    graph = coo_matrix((np.ones(len(a)), (a, b)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    name: dict[int, str] = {}
    size: dict[int, int] = {}
    for rid, lab in zip(ids, labels, strict=True):
        name[lab] = min(name.get(lab, rid), rid)
        size[lab] = size.get(lab, 0) + 1
    best: dict[str, tuple[float, str, str] | None] = {rid: None for rid in new_ids}
    for r in old:
        known = r.nearest_record_id is not None and r.score is not None and r.method
        best[r.record_id] = (r.score, r.nearest_record_id, r.method) if known else None
    for x, y, method, score in edges:
        for p, q in ((x, y), (y, x)):
            if _better((score, q, method), best[p]):
                best[p] = (score, q, method)
    out = []
    for rid, lab in zip(ids, labels, strict=True):
        near = best[rid]
        out.append(
            Clustered(
                rid,
                name[lab],
                size[lab],
                near[1] if near else None,
                near[2] if near else None,
                near[0] if near else None,
            )
        )
    return out


__all__ = [
    "Clustered",
    "Edge",
    "band_keys",
    "brute_force_edges",
    "cluster",
    "jaccard",
    "lsh_shape",
    "merge_clusters",
    "minhash_edges",
    "semantic_edges",
    "shared_key_pairs",
    "word_set",
]
