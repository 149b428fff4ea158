"""One UCB1 bandit: named arms with pull counts and reward sums (EVE-Agent appendix F).

A thin stateful wrapper over the pure functions in `ucb` and `feedback`; the selector runs two
of them side by side (clusters and task types).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.selector.feedback import EPSILON, LAMBDA_U, selector_rewards
from pipeline.selector.ucb import VIRTUAL_PULLS, inherit_split, pick_arms, ucb_scores


@dataclass
class UCB1Bandit:
    name: str
    arms: list[str]
    pulls: np.ndarray  # N_k, virtual pull included (float64, integer-valued)
    reward_sums: np.ndarray  # S_k
    beta: float = 1.0

    @classmethod
    def fresh(cls, name: str, arms: Sequence[str], beta: float = 1.0) -> UCB1Bandit:
        """Every arm with one virtual pull and zero reward, so U_k is finite from round 1."""
        n = len(arms)
        if n == 0:
            raise ValueError(f"bandit {name!r} needs at least one arm")
        if len(set(arms)) != n:
            raise ValueError(f"bandit {name!r} has duplicate arms: {list(arms)}")
        return cls(name, list(arms), np.full(n, VIRTUAL_PULLS), np.zeros(n), beta)

    @property
    def total_pulls(self) -> float:
        return float(self.pulls.sum())

    def scores(self) -> np.ndarray:
        return ucb_scores(self.pulls, self.reward_sums, self.beta)

    def pick(self, n: int, rng: np.random.Generator, mask: np.ndarray | None = None) -> np.ndarray:
        """Arm indices for n draws: argmax for one, softmax(U / std U) for a batch."""
        return pick_arms(self.scores(), n, rng, mask)

    def feedback(
        self,
        arms: np.ndarray,
        sample_rewards: np.ndarray,
        lambda_u: float = LAMBDA_U,
        eps: float = EPSILON,
    ) -> np.ndarray:
        """Turn one batch of per-sample rewards r_i into R_sel (pre-update statistics) and
        record them: N_k += samples of arm k, S_k += their R_sel. Returns R_sel per sample."""
        arms = np.asarray(arms, dtype=np.int64)
        if len(arms) and (arms.min() < 0 or arms.max() >= len(self.arms)):
            raise ValueError(f"bandit {self.name!r}: arm index out of range 0..{len(self.arms)}")
        r_sel = selector_rewards(arms, sample_rewards, self.pulls, self.reward_sums, lambda_u, eps)
        k = len(self.arms)
        self.pulls = self.pulls + np.bincount(arms, minlength=k).astype(np.float64)
        self.reward_sums = self.reward_sums + np.bincount(arms, weights=r_sel, minlength=k)
        return r_sel

    def split(self, parent_of: np.ndarray, arms: Sequence[str]) -> UCB1Bandit:
        """A bandit over new arms whose statistics are inherited from parents (see
        `ucb.inherit_split`); `parent_of[i]` is the index of new arm i's parent arm."""
        pulls, sums = inherit_split(parent_of, self.pulls, self.reward_sums)
        return UCB1Bandit(self.name, list(arms), pulls, sums, self.beta)

    def with_arms(self, arms: Sequence[str]) -> UCB1Bandit:
        """Same statistics keyed by arm name; arms new to this bandit start fresh."""
        fresh = UCB1Bandit.fresh(self.name, arms, self.beta)
        where = {a: i for i, a in enumerate(self.arms)}
        for j, a in enumerate(fresh.arms):
            if a in where:
                fresh.pulls[j] = self.pulls[where[a]]
                fresh.reward_sums[j] = self.reward_sums[where[a]]
        return fresh


__all__ = ["UCB1Bandit"]
