"""Process signals of EvalAct/PCAR and ARR, as small pure functions.

Equation numbers refer to ../shared/papers/evalact-process-rewards.txt (sections marked
"EvalAct") and ../shared/papers/arr-reasoner-verifier.txt (sections marked "ARR"). Group
normalisation (EvalAct eq. 5, ARR §4.2.1's A^α_{i,t}) is ``rewards.group_advantages``; it is
re-exported here under the paper's name rather than written twice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from pipeline.agents.rewards import contains, group_advantages, token_f1
from pipeline.llm.entropy import token_entropy as token_entropy  # re-exported
from pipeline.llm.entropy import token_entropy_topk as token_entropy_topk

# ---- EvalAct: Evaluate feedback and PCAR (eqs. 5-8, 11) ----------------------------------

LAMBDA_BASE = 0.1  # §3.2: (λ_base, λ_max) = (0.1, 0.5)
LAMBDA_MAX = 0.5
DELTA = 1e-6  # eq. 8's clamp floor, "δ = 10⁻⁶ in all experiments"


def outcome_advantages(rewards: Sequence[float], eps: float = 1e-6) -> list[float]:
    """A_i = (r_i − μ_group) / (σ_group + ε) over one input's G rollouts (EvalAct eq. 5).

    σ is the population standard deviation; a group whose rewards all tie gets 0.
    """
    return group_advantages(rewards, eps=eps)


def gated_outcome_reward(f1: float, compliant: bool) -> float:
    """G(y, y*) = F1(y_ans, y*) if the rollout kept the format, else 0 (EvalAct eq. 4)."""
    return f1 if compliant else 0.0


def feedback_tier(z: float) -> Literal["low", "mid", "high"]:
    """Φ(z): the three-tier cue the environment returns after Evaluate (EvalAct eq. 11)."""
    if not 0.0 <= z <= 10.0:
        raise ValueError(f"z must lie in [0, 10], got {z}")
    if z <= 3.0:
        return "low"
    if z <= 7.0:
        return "mid"
    return "high"


def standardized_reliability(zs: Sequence[float], eps: float = 1e-6) -> list[float]:
    """z̃_{i,k} = (z_{i,k} − μ_i) / (σ_i + ε) within one trajectory (EvalAct eq. 6).

    μ_i, σ_i: mean and population standard deviation of that trajectory's scores. One segment,
    or constant scores, give z̃ = 0 exactly — the paper's "suppress trivial constant scoring".
    """
    if not zs:
        return []
    vals = [float(z) for z in zs]
    if max(vals) == min(vals):
        return [0.0] * len(vals)
    mean = math.fsum(vals) / len(vals)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in vals) / len(vals))
    return [(v - mean) / (std + eps) for v in vals]


def pcar_gain(z: float, lambda_base: float = LAMBDA_BASE, lambda_max: float = LAMBDA_MAX) -> float:
    """λ_{i,k} = λ_base + (λ_max − λ_base)·z/10 (EvalAct eq. 7): confident segments move more."""
    return lambda_base + (lambda_max - lambda_base) * z / 10.0


def pcar_multiplier(z_tilde: float, gain: float, delta: float = DELTA) -> float:
    """clamp(1 + λ·z̃, δ, ∞) (EvalAct eq. 8): δ > 0 keeps a segment's advantage from flipping."""
    return max(delta, 1.0 + gain * z_tilde)


@dataclass(frozen=True)
class PcarSegment:
    """One Search→Evaluate segment's PCAR terms; advantage = A_i · multiplier (eq. 8's Â)."""

    z: float
    z_tilde: float
    gain: float
    multiplier: float
    advantage: float


def pcar_segments(
    zs: Sequence[float],
    outcome_advantage: float,
    lambda_base: float = LAMBDA_BASE,
    lambda_max: float = LAMBDA_MAX,
    delta: float = DELTA,
    eps: float = 1e-6,
) -> list[PcarSegment]:
    """Eqs. 6-8 for one trajectory's segment scores, given its outcome advantage A_i."""
    out = []
    for z, zt in zip(zs, standardized_reliability(zs, eps), strict=True):
        g = pcar_gain(z, lambda_base, lambda_max)
        m = pcar_multiplier(zt, g, delta)
        out.append(PcarSegment(float(z), zt, g, m, outcome_advantage * m))
    return out


# ---- token entropy from log-probabilities (ARR §3.2's H_{a_t}) ----------------------------
# Per-token entropy (exact, top-k) lives beside the backends that compute it, in
# pipeline/llm/entropy.py; it is imported here so that reward code has one place to look.


def mean_token_entropy(entropies: Sequence[float]) -> float | None:
    """H_{a_t} = (1/|a_t|) Σ_j H_j, the mean over an action's tokens; None for an empty action."""
    if not entropies:
        return None
    return math.fsum(entropies) / len(entropies)


# ---- ARR: entropy trajectories (§3.2, Figure 2) -------------------------------------------

Pattern = Literal["D", "ID", "F", "DI", "I"]
PATTERN_SCORE: dict[str, float] = {"D": 1.0, "ID": 0.8, "F": 0.6, "DI": 0.4, "I": 0.2}


def entropy_trend(prev: float, cur: float, delta: float) -> Literal["I", "D", "F"]:
    """Increase if ΔH > δ, Decrease if ΔH < −δ, Flat otherwise (ARR §3.2)."""
    d = cur - prev
    if d > delta:
        return "I"
    if d < -delta:
        return "D"
    return "F"


def entropy_pattern(entropies: Sequence[float], delta: float) -> Pattern | None:
    """f_e: the last three action entropies → one of D, ID, F, DI, I (ARR §3.2, Figure 2).

    The paper names the five patterns but not how a Flat step combines with a rising or falling
    one; here Flat steps are dropped and the remaining trends read in order: none → F, one or two
    equal → that direction, I then D → ID, D then I → DI. Fewer than two entropies → None (no
    trend; the paper's Figure 2 only counts dialogues with ≥ 3 turns). δ is not given in the paper.
    """
    last = [float(h) for h in entropies][-3:]
    if len(last) < 2:
        return None
    trends = [entropy_trend(a, b, delta) for a, b in pairwise(last)]
    moves = [t for t in trends if t != "F"]
    if not moves:
        return "F"
    if all(m == moves[0] for m in moves):
        return "D" if moves[0] == "D" else "I"
    return "ID" if moves[0] == "I" else "DI"


# ---- ARR: adversarial outcome reward (eq. 5) ----------------------------------------------


def f1_bin(diff: float, buckets: int) -> float:
    """bin(·): a difference of F1 scores floored (toward 0) to a multiple of 1/n.

    F1 ∈ [0, 1] is cut into n buckets so that differences under one bucket width count as a tie
    ("filtering minor differences"); the paper does not fix n.
    """
    if buckets < 1:
        raise ValueError(f"need at least one bucket, got {buckets}")
    return math.copysign(math.floor(abs(diff) * buckets + 1e-9) / buckets, diff)


def adversarial_reward(f1_self: float, f1_other: float, lam: float, buckets: int) -> float:
    """r^α = F1(y^α, y_gold) + λ·max[bin(r_out^α − r_out^ᾱ), 0] (ARR eq. 5)."""
    return f1_self + lam * max(f1_bin(f1_self - f1_other, buckets), 0.0)


def adversarial_rewards(
    reasoner_answer: str | None,
    verifier_answer: str | None,
    gold: str | None,
    lam: float,
    buckets: int,
) -> tuple[float, float]:
    """(r^reasoner, r^verifier) of one dialogue: each agent's F1 plus its bonus over the other."""
    fr, fv = token_f1(reasoner_answer, gold), token_f1(verifier_answer, gold)
    return adversarial_reward(fr, fv, lam, buckets), adversarial_reward(fv, fr, lam, buckets)


# ---- ARR: the verifier's process-aware advantage (eqs. 6-9) -------------------------------


def verifier_clarity(
    verifier_entropy: float, gold_in_documents: bool, gold_in_action: bool
) -> float:
    """A_clarity = exp(−H^v) · 1[y_gold in d_t] · (2·1[y_gold in a^v_t] − 1) (ARR eq. 7).

    Confident critiques score higher; no credit or blame when retrieval missed the answer; a
    critique that drops the gold answer from its response is penalised.
    """
    if not gold_in_documents:
        return 0.0
    return math.exp(-verifier_entropy) * (1.0 if gold_in_action else -1.0)


def verifier_clarity_text(
    verifier_entropy: float, gold: str, documents: str, action_text: str
) -> float:
    """Eq. 7 with "in" read as normalized word-boundary containment (``rewards.contains``)."""
    return verifier_clarity(
        verifier_entropy, contains(documents, gold), contains(action_text, gold)
    )


def behavior_impact(
    reasoner_entropies: Mapping[str, Sequence[float]], delta: float
) -> float | None:
    """A_impact = mean over monitored reasoner actions of score(f_e([H_{a_1}, …, H_{a_n}])) (eq. 8).

    ``reasoner_entropies`` maps each monitored action (e.g. think, verify) to its per-step mean
    entropies in dialogue order. Actions with fewer than two steps have no pattern and are left
    out; None when no action has one.
    """
    scores = []
    for hs in reasoner_entropies.values():
        p = entropy_pattern(hs, delta)
        if p is not None:
            scores.append(PATTERN_SCORE[p])
    if not scores:
        return None
    return math.fsum(scores) / len(scores)


def process_advantage(reasoner_f1: float, clarity: float, impact: float) -> float:
    """A^v_proc = F1(y^r, y_gold) · A_clarity · A_impact (ARR eq. 6)."""
    return reasoner_f1 * clarity * impact


def verifier_token_advantage(
    outcome_advantage: float, proc_advantage: float, in_critique: bool
) -> float:
    """Â^v_{i,t} = A^v_{i,t} + 1[token in a critique action]·A^v_proc (ARR eq. 9)."""
    return outcome_advantage + (proc_advantage if in_critique else 0.0)
