"""UCB1 arithmetic of the corpus selector (EVE-Agent §3.3, appendix F): pure functions only.

Every function takes and returns plain numbers or NumPy arrays and touches no state, so the tests
recompute the paper's formulas by hand and the bandit classes stay thin.
"""

from __future__ import annotations

import math

import numpy as np

VIRTUAL_PULLS = 1.0  # every arm starts with one virtual pull and zero virtual reward (eq. 30)


def cluster_count(k0: int, alpha: float, iteration: int) -> int:
    """Granularity schedule K_t = K0 + floor(alpha * t) (eq. 29)."""
    if k0 < 1 or alpha < 0 or iteration < 0:
        raise ValueError(f"need k0 >= 1, alpha >= 0, t >= 0 (got {k0}, {alpha}, {iteration})")
    return int(k0 + math.floor(alpha * iteration))


def ucb_scores(pulls: np.ndarray, reward_sums: np.ndarray, beta: float = 1.0) -> np.ndarray:
    """U_k = S_k / max(N_k, 1) + beta * sqrt(log max(N_tot, 1) / max(N_k, 1)) (eq. 30).

    N_tot is the sum of the pulls of the arms passed in (virtual pulls included).
    """
    n = np.maximum(np.asarray(pulls, dtype=np.float64), 1.0)
    s = np.asarray(reward_sums, dtype=np.float64)
    n_tot = max(float(np.sum(pulls)), 1.0)
    return s / n + beta * np.sqrt(math.log(n_tot) / n)


def batch_probabilities(scores: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Softmax over U rescaled by the empirical standard deviation of the U values.

    p_k = exp((U_k - max U) / sigma) / sum_j exp((U_j - max U) / sigma), with sigma the
    population standard deviation (ddof = 0) of U over the eligible arms (`mask`, default all).
    Dividing by sigma makes the batch spread independent of the reward scale: an arm one
    standard deviation above another is e times as likely. sigma = 0 (all U equal, or a single
    eligible arm) gives the uniform distribution over the eligible arms. Ineligible arms get 0.
    """
    u = np.asarray(scores, dtype=np.float64)
    ok = np.ones(u.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if not ok.any():
        raise ValueError("no eligible arm to draw from")
    p = np.zeros(u.shape, dtype=np.float64)
    sigma = float(np.std(u[ok]))
    if not math.isfinite(sigma) or sigma <= 1e-12:
        p[ok] = 1.0 / ok.sum()
        return p
    z = (u[ok] - u[ok].max()) / sigma
    e = np.exp(z)
    p[ok] = e / e.sum()
    return p


def pick_arms(
    scores: np.ndarray, n: int, rng: np.random.Generator, mask: np.ndarray | None = None
) -> np.ndarray:
    """n arm indices: deterministic argmax for n = 1, else i.i.d. from `batch_probabilities`.

    Ties in the argmax go to the lowest index. The batch draw is with replacement, so n may
    exceed the number of arms.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    u = np.asarray(scores, dtype=np.float64)
    if n == 1:
        masked = u if mask is None else np.where(np.asarray(mask, dtype=bool), u, -np.inf)
        if not np.isfinite(masked).any():
            raise ValueError("no eligible arm to draw from")
        return np.array([int(np.argmax(masked))], dtype=np.int64)
    p = batch_probabilities(u, mask)
    return rng.choice(len(u), size=n, p=p).astype(np.int64)


def nearest_parents(old_centroids: np.ndarray, new_centroids: np.ndarray) -> np.ndarray:
    """For every new centroid, the index of the nearest old centroid (Euclidean; ties -> lowest)."""
    old = np.asarray(old_centroids, dtype=np.float64)
    new = np.asarray(new_centroids, dtype=np.float64)
    if old.ndim != 2 or new.ndim != 2 or old.shape[1] != new.shape[1]:
        raise ValueError(f"centroid shapes do not match: {old.shape} vs {new.shape}")
    d2 = np.sum(new**2, axis=1)[:, None] - 2.0 * new @ old.T + np.sum(old**2, axis=1)[None, :]
    return np.argmin(d2, axis=1).astype(np.int64)


def inherit_split(
    parent_of: np.ndarray, parent_pulls: np.ndarray, parent_sums: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Split parent statistics over their children (appendix F, "Adaptive clustering").

    A parent j with N_j pulls and reward sum S_j that has c_j children gives each child
    max(floor(N_j / c_j), 1) pulls and S_j / c_j reward. Parents without children drop out;
    every child has exactly one parent (`parent_of[child] = j`).
    """
    parent_of = np.asarray(parent_of, dtype=np.int64)
    n_par = np.asarray(parent_pulls, dtype=np.float64)
    s_par = np.asarray(parent_sums, dtype=np.float64)
    children = np.bincount(parent_of, minlength=len(n_par)).astype(np.float64)
    c = children[parent_of]
    pulls = np.maximum(np.floor(n_par[parent_of] / c), 1.0)
    sums = s_par[parent_of] / c
    return pulls, sums


__all__ = [
    "VIRTUAL_PULLS",
    "batch_probabilities",
    "cluster_count",
    "inherit_split",
    "nearest_parents",
    "pick_arms",
    "ucb_scores",
]
