"""In-cluster document draws and hop counts (EVE-Agent appendix F, eq. 31).

P(d | k) is proportional to ||z_d - mu_k|| / (1 + u_d): boundary documents first, and a soft
sampling-without-replacement through the usage count u_d. Because u_d changes after every draw,
each cluster keeps a Fenwick (binary indexed) tree of its scores, so one draw plus its usage
update costs O(log |C_k|) instead of a pass over the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def doc_scores(distances: np.ndarray, uses: np.ndarray) -> np.ndarray:
    """Unnormalised in-cluster draw weights delta_d / (1 + u_d)."""
    return np.asarray(distances, dtype=np.float64) / (1.0 + np.asarray(uses, dtype=np.float64))


def draw_probabilities(distances: np.ndarray, uses: np.ndarray) -> np.ndarray:
    """P(d | k) over one cluster's documents; uniform when every score is zero (eq. 31)."""
    w = doc_scores(distances, uses)
    if len(w) == 0:
        raise ValueError("cannot draw from an empty cluster")
    total = w.sum()
    return w / total if total > 0 else np.full(len(w), 1.0 / len(w))


def hop_pmf(weights: Mapping[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """(hop counts, probabilities) from relative weights, e.g. {1: 4, 2: 3, 3: 2, 4: 1}."""
    hops = np.array(sorted(weights), dtype=np.int64)
    w = np.array([float(weights[h]) for h in hops], dtype=np.float64)
    if len(w) == 0 or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"hop weights must be non-negative with a positive sum: {dict(weights)}")
    return hops, w / w.sum()


class FenwickSampler:
    """Draw index i with probability w_i / sum(w) and change single weights, both O(log n).

    The tree is built vectorised from a cumulative sum (tree[i] = cs[i] - cs[i - lowbit(i)]),
    so building a cluster of a million documents is one NumPy pass.
    """

    def __init__(self, weights: np.ndarray) -> None:
        w = np.asarray(weights, dtype=np.float64)
        if (w < 0).any() or not np.isfinite(w).all():
            raise ValueError("weights must be finite and non-negative")
        self.n = len(w)
        self.w = w.copy()
        cs = np.concatenate([[0.0], np.cumsum(w)])
        idx = np.arange(1, self.n + 1)
        self.tree = np.concatenate([[0.0], cs[idx] - cs[idx - (idx & -idx)]])
        self.total = float(cs[-1])
        self._top = 1 << (self.n.bit_length() - 1) if self.n else 0

    def find(self, target: float) -> int:
        """Smallest i with w_0 + ... + w_i > target (zero-weight entries are never returned)."""
        tree, pos, step, n = self.tree, 0, self._top, self.n
        while step:
            nxt = pos + step
            if nxt <= n:
                t = tree.item(nxt)
                if t <= target:
                    pos = nxt
                    target -= t
            step >>= 1
        if pos >= n or self.w.item(pos) <= 0.0:  # float drift at the right edge
            pos = int(np.flatnonzero(self.w > 0)[-1])
        return pos

    def sample(self, u: float) -> int:
        """Index for a uniform variate u in [0, 1)."""
        return self.find(u * self.total)

    def set(self, i: int, value: float) -> None:
        delta = value - self.w.item(i)
        self.w[i] = value
        self.total += delta
        tree, j, n = self.tree, i + 1, self.n
        while j <= n:
            tree[j] += delta
            j += j & -j


__all__ = ["FenwickSampler", "doc_scores", "draw_probabilities", "hop_pmf"]
