"""Reward math of the EVE-Agent paper (and helpers it relies on), as small pure functions.

Equation numbers refer to ../shared/papers/eve-agent-evidence-verifier.txt.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation + "‘’“”–—")


def normalize(text: str | None) -> str:
    """Norm: lowercase, strip punctuation and articles, collapse whitespace (SQuAD style)."""
    if not text:
        return ""
    t = text.lower().translate(_PUNCT)
    t = _ARTICLES.sub(" ", t)
    return " ".join(t.split())


def contains(haystack: str, needle: str) -> bool:
    """Norm(needle) ⊆ Norm(haystack) on word boundaries ("1" is not inside "1879")."""
    n, h = normalize(needle), normalize(haystack)
    return bool(n) and f" {n} " in f" {h} "


def exact_match(prediction: str | None, target: str | None) -> bool:
    return bool(normalize(target)) and normalize(prediction) == normalize(target)


def token_f1(prediction: str | None, target: str | None) -> float:
    """Token-level F1 between normalized strings (used for the solver's evidence reward)."""
    p, t = normalize(prediction).split(), normalize(target).split()
    if not p or not t:
        return float(p == t)
    common = sum((Counter(p) & Counter(t)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(t)
    return 2 * precision * recall / (precision + recall)


def validity(question: str | None, answer: str | None) -> tuple[bool, str | None]:
    """Valid iff q ≠ ∅, a ≠ ∅ and Norm(a) ⊄ Norm(q); returns (valid, reason if not)."""
    if not normalize(question):
        return False, "empty_question"
    if not normalize(answer):
        return False, "empty_answer"
    if contains(question, answer):
        return False, "answer_in_question"
    return True, None


# ---- format reward (eq. 9, appendix D) ---------------------------------------------------


def f_think(planning_turns: int, assistant_turns: int) -> float:
    """F_think = T_think / max(1, T_ass)."""
    return planning_turns / max(1, assistant_turns)


def f_tool(hops: int, valid_tool_calls: int, tool_responses: int) -> float:
    """F_tool(h) = 1 if h = 1; min((1 + T_tc)/h, 1) if T_tc equals the responses; else 0."""
    if hops <= 1:
        return 1.0
    if valid_tool_calls == tool_responses:
        return min((1 + valid_tool_calls) / hops, 1.0)
    return 0.0


def f_answer(answer: str | None, context: str) -> float:
    """F_ans ∈ {0, ½, 1}: short and found in the source document + tool responses (Σ)."""
    a = normalize(answer)
    if a in ("yes", "no"):
        return 1.0
    if not a or not contains(context, a):
        return 0.0
    words = len(a.split())
    if words <= 5:
        return 1.0
    if words <= 10:
        return 0.5
    return 0.0


@dataclass(frozen=True)
class FormatScore:
    total: float
    think: float
    tool: float
    answer: float


def format_score(
    question: str | None,
    answer: str | None,
    context: str,
    hops: int,
    planning_turns: int,
    assistant_turns: int,
    valid_tool_calls: int,
    tool_responses: int,
) -> FormatScore:
    """F_fmt = ¼(1 + F_think + F_tool(h) + F_ans); 0 when q or a is empty."""
    if not normalize(question) or not normalize(answer):
        return FormatScore(0.0, 0.0, 0.0, 0.0)
    th = f_think(planning_turns, assistant_turns)
    to = f_tool(hops, valid_tool_calls, tool_responses)
    an = f_answer(answer, context)
    return FormatScore(0.25 * (1 + th + to + an), th, to, an)


# ---- difficulty (eqs. 2-4) ----------------------------------------------------------------


def difficulty(k: int, n: int) -> float:
    """R_DZ = 1{0<k<n} (n−k)/(n−1)."""
    if n < 2 or not 0 <= k <= n:
        raise ValueError(f"need n >= 2 and 0 <= k <= n, got k={k}, n={n}")
    return (n - k) / (n - 1) if 0 < k < n else 0.0


def expected_difficulty(p: float, n: int) -> float:
    """φ_n(p) = n/(n−1) (1−p) (1 − (1−p)^(n−1)), the mean of R_DZ for k ~ Bin(n, p)."""
    return n / (n - 1) * (1 - p) * (1 - (1 - p) ** (n - 1))


# ---- evidence verifier (eqs. 10-14) --------------------------------------------------------


def verifier_mc(
    with_evidence_correct: Sequence[bool], without_evidence_correct: Sequence[bool]
) -> tuple[float, float, float]:
    """V̂ = mean 1{â₊ = a} − mean 1{â₋ = a}; returns (p₊, p₋, V̂)."""
    if not with_evidence_correct or not without_evidence_correct:
        raise ValueError("the Monte-Carlo verifier needs at least one sample per condition")
    p_pos = sum(map(bool, with_evidence_correct)) / len(with_evidence_correct)
    p_neg = sum(map(bool, without_evidence_correct)) / len(without_evidence_correct)
    return p_pos, p_neg, p_pos - p_neg


def verifier_teacher_forced(logp_with: float, logp_without: float) -> tuple[float, float, float]:
    """V = P(a | q, e) − P(a | q) from the answer's summed token log-probabilities."""
    p_pos, p_neg = math.exp(logp_with), math.exp(logp_without)
    return p_pos, p_neg, p_pos - p_neg


# ---- brevity and the proposer reward (eqs. 15-16) -----------------------------------------


def brevity(evidence_tokens: int, l_max: int = 256) -> float:
    """B(e) = max(0, 1 − |e| / L_max)."""
    return max(0.0, 1.0 - evidence_tokens / l_max)


def proposer_reward(
    fmt: float,
    valid: bool,
    r_dz: float,
    v: float,
    b: float,
    lambda_v: float = 0.5,
    lambda_b: float = 0.1,
) -> float:
    """R_pro = ½F_fmt + R_DZ + λ_V·V + λ_B·B; invalid rollouts get ½F_fmt only."""
    if not valid:
        return 0.5 * fmt
    return 0.5 * fmt + r_dz + lambda_v * v + lambda_b * b


def solver_reward(
    predicted: str | None,
    target: str | None,
    evidence_pred: str | None,
    evidence: str | None,
    lambda_e: float = 0.3,
) -> float:
    """R_sol = EM(â, a) + λ_E·F1_tok(ê, e)."""
    return float(exact_match(predicted, target)) + lambda_e * token_f1(evidence_pred, evidence)
