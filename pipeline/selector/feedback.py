"""Between-iteration feedback for the selector bandits (EVE-Agent appendix F, eqs. 32-33).

Pure functions: per-sample quality proxy Q_i, per-sample reward r_i = R_run * Q_i, and the
selector reward R_sel = R_div + lambda_u * R_util fed back to one bandit. Where the paper is
ambiguous, the choice made is stated in the docstring of the function that makes it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

LAMBDA_U = 0.5  # utility weight lambda_u (appendix F)
EPSILON = 1e-8  # log smoothing epsilon (appendix F)


def q_len(length: int) -> float:
    """Question-length factor: 1 if 20 <= |q| <= 220 characters, else 0.65."""
    return 1.0 if 20 <= length <= 220 else 0.65


def q_ans(length: int) -> float:
    """Answer-length factor: 1 if 1 <= |a| <= 80 characters, else 0.55."""
    return 1.0 if 1 <= length <= 80 else 0.55


def duplicate_counts(prompts: Sequence[str]) -> np.ndarray:
    """D_i: how many rows of the batch carry exactly the prompt string of row i (itself included,
    so D_i >= 1 as the paper requires). Exact string equality, no normalisation."""
    counts = Counter(prompts)
    return np.array([counts[p] for p in prompts], dtype=np.int64)


def quality(question_len: int, answer_len: int, duplicates: int) -> float:
    """Q_i = q_len(|q_i|) * q_ans(|a_i|) / sqrt(max(D_i, 1)) (eq. 32), in [0, 1]."""
    return q_len(question_len) * q_ans(answer_len) / math.sqrt(max(duplicates, 1))


def sample_rewards(
    questions: Sequence[str],
    answers: Sequence[str],
    run_score: float,
    prompts: Sequence[str] | None = None,
) -> np.ndarray:
    """r_i = R_run * Q_i for one batch (one iteration's feedback rows).

    Lengths are character counts of the whitespace-stripped strings (|q| and |a| in the paper
    are string lengths; stripping keeps a trailing newline of the model output from counting).
    `prompts` is the string whose duplicates are counted; the paper counts duplicates of "the
    prompt string" of the solver-training samples, whose prompt is the question, so the
    question is used when `prompts` is None.
    """
    if not 0.0 <= run_score <= 1.0:
        raise ValueError(f"run_score must lie in [0, 1], got {run_score}")
    if len(questions) != len(answers) or (prompts is not None and len(prompts) != len(answers)):
        raise ValueError("questions, answers and prompts must have one entry per sample")
    keys = list(questions) if prompts is None else list(prompts)
    dups = duplicate_counts(keys)
    q = np.array(
        [
            quality(len(qq.strip()), len(aa.strip()), int(d))
            for qq, aa, d in zip(questions, answers, dups, strict=True)
        ],
        dtype=np.float64,
    )
    return run_score * q


def selector_rewards(
    arms: np.ndarray,
    rewards: np.ndarray,
    pulls: np.ndarray,
    reward_sums: np.ndarray,
    lambda_u: float = LAMBDA_U,
    eps: float = EPSILON,
) -> np.ndarray:
    """R_sel_i = -log(N_k(i) / N_tot + eps) + lambda_u * (r_i - rbar_k(i)^prev) (eq. 33).

    All statistics are the bandit's pre-update values: every sample of the batch sees the same
    N_k, N_tot (virtual pulls included) and rbar_k. rbar_k^prev is read as the bandit's own
    empirical mean S_k / max(N_k, 1), the "its mean reward" of the appendix sentence that also
    defines N_k; it is the same quantity as the first term of U_k in eq. 30 and needs no extra
    state. (The alternative reading, a separate running mean of the r_i, averages the utility
    term to zero per arm and so would never prefer clusters that keep producing better samples.)
    """
    arms = np.asarray(arms, dtype=np.int64)
    n = np.asarray(pulls, dtype=np.float64)
    s = np.asarray(reward_sums, dtype=np.float64)
    n_tot = max(float(n.sum()), 1.0)
    r_div = -np.log(n[arms] / n_tot + eps)
    r_bar = s[arms] / np.maximum(n[arms], 1.0)
    return r_div + lambda_u * (np.asarray(rewards, dtype=np.float64) - r_bar)


def proposer_reward_range(lambda_v: float = 0.5, lambda_b: float = 0.1) -> tuple[float, float]:
    """Bounds of R_pro = 1/2 F_fmt + R_DZ + lambda_V V + lambda_B B (F_fmt in [1/4, 1],
    R_DZ in [0, 1], V in [-1, 1], B in [0, 1])."""
    return 0.125 - lambda_v, 0.5 + 1.0 + lambda_v + lambda_b


def solver_reward_range(lambda_e: float = 0.3) -> tuple[float, float]:
    """Bounds of R_sol = EM + lambda_E F1 (both in [0, 1])."""
    return 0.0, 1.0 + lambda_e


def run_score(
    proposer_mean: float,
    solver_mean: float | None,
    proposer_range: tuple[float, float] | None = None,
    solver_range: tuple[float, float] | None = None,
) -> float:
    """R_run in [0, 1]: the mean of the proposer and solver mean rewards, each min-max
    normalised by its reward's range first (our rewards are not in [0, 1] as the paper's R_run
    must be). With no solver reward (None) the normalised proposer mean alone is used.
    """
    plo, phi = proposer_range or proposer_reward_range()
    parts = [(proposer_mean - plo) / (phi - plo)]
    if solver_mean is not None:
        slo, shi = solver_range or solver_reward_range()
        parts.append((solver_mean - slo) / (shi - slo))
    return float(min(max(sum(parts) / len(parts), 0.0), 1.0))


__all__ = [
    "EPSILON",
    "LAMBDA_U",
    "duplicate_counts",
    "proposer_reward_range",
    "q_ans",
    "q_len",
    "quality",
    "run_score",
    "sample_rewards",
    "selector_rewards",
    "solver_reward_range",
]
