"""Reward math of the EVE-Agent paper (and helpers it relies on), as small pure functions.

Equation numbers refer to ../shared/papers/eve-agent-evidence-verifier.txt unless a section
says otherwise: the waypoint coverage reward follows kg-paths-waypoint-coverage.txt and the
step-level signals follow evo-rag-step-rewards.txt.
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


def verifier_pmi(
    logp_with: float, logp_without: float, answer_tokens: int
) -> tuple[float, float, float]:
    """Teacher-forced V in log space: tanh of the answer's pointwise mutual information with
    the evidence per answer token, (log P(a|q,e) − log P(a|q)) / |a|; returns the per-token
    (geometric-mean) probabilities p₊, p₋ and V ∈ (−1, 1).

    Why: for a small model a multi-token answer has P(a|q) ~ e^-25, so the paper's
    P₊ − P₋ is ~0 for every record and does not separate real from shuffled evidence (the
    verifier controls), while the log ratio keeps the evidence's effect. Per token, so long
    answers do not dominate; tanh, so V keeps the paper's bounded range in R_pro."""
    if answer_tokens < 1:
        raise ValueError("the answer must have at least one token")
    p_pos, p_neg = math.exp(logp_with / answer_tokens), math.exp(logp_without / answer_tokens)
    return p_pos, p_neg, math.tanh((logp_with - logp_without) / answer_tokens)


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
    """R_sol = EM(â, a) + λ_E·F1_tok(ê, e); a missing ê or e earns no evidence credit (token_f1
    scores two empty strings as 1, which would reward a solver for emitting no span)."""
    if not normalize(evidence_pred) or not normalize(evidence):
        return float(exact_match(predicted, target))
    return float(exact_match(predicted, target)) + lambda_e * token_f1(evidence_pred, evidence)


# ---- hop-grouped advantages (eq. 5) --------------------------------------------------------


def hop_grouped_advantages(
    rewards: Sequence[float], hops: Sequence[int], eps: float = 1e-6, ddof: int = 0
) -> list[float]:
    """A_{i,h} = (R_i − E_{j∈I_h}[R_j]) / (√Var_{j∈I_h}[R_j] + δ₀), I_h = {i : h_i = h} (eq. 5).

    HRPO samples one proposer output per document, so rewards are standardised only against
    rollouts with the same prescribed hop count. Var is the population variance (ddof=0, the
    eq.-5 moment over I_h); ddof=1 gives verl/torch.std's unbiased variant. δ₀ = ``eps`` is
    not given in the paper. A singleton group, or a group whose rewards are all equal, has a
    zero numerator and so gets advantage 0 (no learning signal), never a division by zero.
    """
    if len(rewards) != len(hops):
        raise ValueError(f"{len(rewards)} rewards but {len(hops)} hop counts")
    groups: dict[int, list[int]] = {}
    for i, h in enumerate(hops):
        groups.setdefault(h, []).append(i)
    out = [0.0] * len(rewards)
    for idx in groups.values():
        vals = [float(rewards[i]) for i in idx]
        if max(vals) == min(vals) or len(vals) <= ddof:
            continue  # singleton or tied group: exactly 0, not round-off / δ₀
        mean = math.fsum(vals) / len(vals)
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in vals) / (len(vals) - ddof))
        for i, v in zip(idx, vals, strict=True):
            out[i] = (v - mean) / (std + eps)
    return out


def group_advantages(rewards: Sequence[float], eps: float = 1e-6, ddof: int = 0) -> list[float]:
    """GRPO's A_j = (r_j − r̄) / (σ̂ + δ₀) over one question's rollouts (eq. 7's advantage;
    KG-paths eqs. 3 and 10 with r_i replaced by the WCR reward R_i)."""
    return hop_grouped_advantages(rewards, [0] * len(rewards), eps, ddof)


# ---- waypoint coverage reward (KG-paths paper eqs. 5-6) -----------------------------------
# Equation numbers in this section refer to ../shared/papers/kg-paths-waypoint-coverage.txt.

_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL | re.IGNORECASE)


def think_text(response: str | None) -> str:
    """𝒯⁽ⁱ⁾: "the concatenated text inside the <think>⋯</think> span[s]" of a solver rollout.

    Spans are joined with newlines; an unclosed final <think> runs to the end of the text.
    """
    return "\n".join(m.group(1).strip() for m in _THINK.finditer(response or ""))


_PUNCT_SPACE = str.maketrans({c: " " for c in string.punctuation + "‘’“”–—"})


def _spaced(text: str) -> str:
    """Norm with punctuation read as a word break, so "Einstein's" still contains "Einstein"."""
    return normalize(text.translate(_PUNCT_SPACE))


def waypoint_coverage(
    waypoints: Sequence[str | Sequence[str]], texts: str | Sequence[str]
) -> float:
    """g_i(q) = |{v ∈ 𝒲(q) : Match(d(v), 𝒯⁽ⁱ⁾) = 1}| / |𝒲(q)| (eq. 5).

    𝒲(q) = {v₀, …, v_{K−1}}: every path node *including the seed v₀* and excluding the answer
    v_K — which is what subgraph records store as ``waypoints``; pass them, not the full path.
    Each waypoint is a label or a list of surface forms (label + aliases); it is matched if
    any form is contained in any of ``texts`` (unordered set coverage; each entry counts once
    even when visited repeatedly). The paper matches the canonical title as an exact substring
    of the <think> text only (see ``think_text``) — not queries or retrieved documents; here
    Match is ``contains`` (Norm-ed, word-boundary) or the same with punctuation read as a
    space (possessives, "AC/DC" vs "AC DC"), and aliases are an extension. A question without
    waypoints gets g = 0 (no partial credit).
    """
    if not waypoints:
        return 0.0
    hay = [texts] if isinstance(texts, str) else list(texts)
    padded = [(f" {normalize(t)} ", f" {_spaced(t)} ") for t in hay]
    matched = 0
    for w in waypoints:
        forms = [(normalize(f), _spaced(f)) for f in ([w] if isinstance(w, str) else w)]
        if any(
            (n and f" {n} " in h) or (s and f" {s} " in hs) for n, s in forms for h, hs in padded
        ):
            matched += 1
    return matched / len(waypoints)


def group_normalised_coverage(gs: Sequence[float]) -> list[float]:
    """g̃_i(q) = g_i(q) / g_max(q), g_max(q) = max_{1≤j≤G} g_j(q); 0 when all coverages are 0.

    Normalised within the G rollouts of one question (correct and invalid ones included), so
    the best-covering rollout gets g̃ = 1 whatever the question's path length: max-scaling, not
    min-max or z-score.
    """
    if any(g < 0 for g in gs):
        raise ValueError(f"coverages must be >= 0, got {list(gs)}")
    g_max = max(gs, default=0.0)
    if g_max <= 0:
        return [0.0] * len(gs)
    return [g / g_max for g in gs]


def wcr_reward(correct: float | bool, valid: bool, g_tilde: float, alpha: float = 0.3) -> float:
    """R_i = c_i + α(1 − c_i)·z_i^val·g̃_i(q), α ∈ (0, 1), α = 0.3 (eq. 6, §4.1).

    Partial credit goes to incorrect but valid (format followed, answer parseable) rollouts
    only; a correct answer gets exactly c = 1 whatever its path.
    """
    c = float(correct)
    return c + alpha * (1.0 - c) * float(bool(valid)) * g_tilde


def wcr_rewards(
    correct: Sequence[float | bool],
    valid: Sequence[bool],
    coverages: Sequence[float],
    alpha: float = 0.3,
) -> list[float]:
    """Eq. 6 for one question's rollout group: g → g̃ (group max) → R_i."""
    if not len(correct) == len(valid) == len(coverages):
        raise ValueError("correct, valid and coverages must have one entry per rollout")
    g_tilde = group_normalised_coverage(coverages)
    return [wcr_reward(c, v, g, alpha) for c, v, g in zip(correct, valid, g_tilde, strict=True)]


# ---- the solver reward a trainer computes (the export's reward.py) -----------------------
# A trainer sees only the response text: the answer, the turns and the tool responses are read
# from the Search-R1 tags of the transcript, as the rollout engine writes it. The export copies
# these functions (and those they call) into reward.py verbatim: keep them standard-library.

_ANSWER_SPAN = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.DOTALL)
_INFORMATION = re.compile(r"<information>(.*?)</information>", re.DOTALL)
_SEARCH_QUERY = re.compile(r"<search>(.*?)(?:</search>|$)", re.DOTALL)


def extract_answer(response: str | None) -> str | None:
    """â: the text inside the response's last <answer>…</answer>, stripped (an unclosed final
    <answer> runs to the end, as the rollout engine reads a turn cut at </answer>); None when
    there is no <answer> tag. An empty "" is an answer tag without an answer (not valid)."""
    spans = _ANSWER_SPAN.findall(response or "")
    return spans[-1].strip() if spans else None


def exact_match_any(prediction: str | None, answers: str | Sequence[str] | None) -> bool:
    """EM against every accepted surface form of the answer (the target and its aliases): the
    maximum of EM over the forms, so an alias scores exactly as the label does."""
    forms = [answers] if isinstance(answers, str) else list(answers or ())
    return any(exact_match(prediction, a) for a in forms)


def covers_any(
    prediction: str | None, answers: str | Sequence[str] | None, max_tokens: int
) -> bool:
    """EM, or a short prediction (at most `max_tokens` normalized words) that holds an accepted
    form on word boundaries ("the state of Saxony" covers "Saxony"): cover-EM, as RAG
    evaluations score answerability. The gates use it to ask whether the solver *found* the
    answer; a weak model's wordy reply is not evidence that the question cannot be answered.
    The training reward stays EM."""
    forms = [answers] if isinstance(answers, str) else list(answers or ())
    if exact_match_any(prediction, forms):
        return True
    short = 0 < len(normalize(prediction).split()) <= max_tokens
    return short and any(contains(prediction or "", a) for a in forms)


@dataclass(frozen=True)
class TranscriptCounts:
    assistant_turns: int  # texts between tool responses that hold anything
    planning_turns: int  # of those, the ones opening with <think>
    valid_tool_calls: int  # non-empty <search> queries
    tool_responses: int  # <information> blocks
    tool_text: str  # the tool responses' text, joined by newlines


def transcript_counts(response: str | None) -> TranscriptCounts:
    """F_fmt's counts of a Search-R1 transcript: assistant turns are the texts between the
    <information> blocks the environment inserted (what `run_rollouts` appends after a search)."""
    parts = _INFORMATION.split(response or "")
    turns = [t for t in parts[0::2] if t.strip()]
    queries = [q for t in turns for q in _SEARCH_QUERY.findall(t) if q.strip()]
    return TranscriptCounts(
        assistant_turns=len(turns),
        planning_turns=sum(t.lstrip().startswith("<think>") for t in turns),
        valid_tool_calls=len(queries),
        tool_responses=len(parts) // 2,
        tool_text="\n".join(parts[1::2]),
    )


def transcript_format_score(
    question: str | None, response: str | None, evidence: str | None, hops: int
) -> FormatScore:
    """F_fmt (eq. 9) of a solver transcript: T_think, T_ass, T_tc and the responses from its
    tags, Σ = the gold evidence and every tool response, the answer from `extract_answer`."""
    c = transcript_counts(response)
    context = (evidence or "") + "\n" + c.tool_text
    return format_score(
        question,
        extract_answer(response),
        context,
        hops,
        c.planning_turns,
        c.assistant_turns,
        c.valid_tool_calls,
        c.tool_responses,
    )


@dataclass(frozen=True)
class TrainerScore:
    score: float  # R = c + α(1 − c)·valid·g̃ + format_weight·F_fmt
    correct: bool  # c: EM of â against the target or an alias
    valid: bool  # a non-empty <answer>
    coverage: float  # g: share of the waypoints matched in the <think> text (0 without any)
    wcr: float  # eq. 6's R (c included)
    format: float  # F_fmt


def trainer_rewards(
    responses: Sequence[str],
    answers: str | Sequence[str],
    waypoints: Sequence[str | Sequence[str]] | None,
    question: str | None = None,
    evidence: str | None = None,
    hops: int = 1,
    alpha: float = 0.3,
    format_weight: float = 0.0,
) -> list[TrainerScore]:
    """One question's group of responses scored as the solver scores its rollouts: c = EM of the
    extracted answer (any accepted form), valid = a non-empty answer, g = waypoint coverage of
    the think text (g = 0 for a question without waypoints), WCR over the group (g̃ = g / max
    g; a group of one gets g̃ = 1 whenever g > 0), plus format_weight·F_fmt (0: F_fmt is only
    reported)."""
    preds = [extract_answer(r) for r in responses]
    correct = [exact_match_any(p, answers) for p in preds]
    valid = [bool(p) for p in preds]
    cover = [waypoint_coverage(waypoints, think_text(r)) if waypoints else 0.0 for r in responses]
    wcr = wcr_rewards(correct, valid, cover, alpha)
    fmt = [transcript_format_score(question, r, evidence, hops).total for r in responses]
    return [
        TrainerScore(w + format_weight * f, c, v, g, w, f)
        for w, c, v, g, f in zip(wcr, correct, valid, cover, fmt, strict=True)
    ]


# ---- EVO-RAG step-level signals (§3.3, §3.6, Table 2, appendix A) --------------------------
# Section numbers here refer to ../shared/papers/evo-rag-step-rewards.txt (its equations are
# unnumbered). Steps are SEARCH actions, indexed from 0 in lists and t = 1.. in the paper.


def retrieval_hit(
    retrieved_ids_per_step: Sequence[Sequence[str]], evidence_passage_id: str
) -> int | None:
    """0-based index of the first SEARCH step whose results contain the evidence's source
    passage (EVO-RAG's D_t ∩ D* ≠ ∅ with D* = {that passage}); None if never retrieved."""
    for i, ids in enumerate(retrieved_ids_per_step):
        if evidence_passage_id in ids:
            return i
    return None


def retrieval_bonus(
    retrieved_ids_per_step: Sequence[Sequence[str]], gold_ids: str | Sequence[str]
) -> list[int]:
    """r_ret(s_t, a_t) = +1 if a_t = SEARCH ∧ D_t ∩ D* ≠ ∅, −1 if D_t ∩ D* = ∅ (§3.3)."""
    gold = {gold_ids} if isinstance(gold_ids, str) else set(gold_ids)
    return [1 if gold.intersection(ids) else -1 for ids in retrieved_ids_per_step]


def _cosine(u: Sequence[float], v: Sequence[float]) -> float:
    if len(u) != len(v):
        raise ValueError(f"vectors of different dimension: {len(u)} vs {len(v)}")
    nu = math.sqrt(math.fsum(x * x for x in u))
    nv = math.sqrt(math.fsum(x * x for x in v))
    if nu == 0 or nv == 0:
        return 0.0  # a zero vector has no direction: treated as unrelated
    return math.fsum(x * y for x, y in zip(u, v, strict=True)) / (nu * nv)


def query_redundancy(query_vectors: Sequence[Sequence[float]]) -> list[float]:
    """max_{j<t} cos(q_t, q_j) per sub-query, 0 for the first; r_dup = −this (§3.3).

    Vectors need not be normalised. Not clipped: a query pointing away from every earlier one
    has a negative maximum (so r_dup > 0), as in the paper's formula.
    """
    out: list[float] = []
    for t, q in enumerate(query_vectors):
        out.append(max((_cosine(q, query_vectors[j]) for j in range(t)), default=0.0))
    return out


def step_count(retrieved_ids_per_step: Sequence[Sequence[str]]) -> int:
    """Number of SEARCH steps of a rollout (a search returning nothing still counts); each
    step costs r_step = −1 (§3.3), and the terminal ANSWER step is one more step."""
    return len(retrieved_ids_per_step)


def answer_correctness(predicted: str | None, target: str | None) -> float:
    """r_ans(s_T, a_T) = ½[EM(A_T, A*) + F1(A_T, A*)] (§3.3)."""
    return 0.5 * (float(exact_match(predicted, target)) + token_f1(predicted, target))


def progress_ratio(t: int, t_max: int) -> float:
    """p(t) = (t − 1)/(T_max − 1) ∈ [0, 1] for steps t = 1..T_max (§3.6; T_max = 20 in A.2).

    T_max = 1 has a single step and p = 0 (the early endpoint).
    """
    if t_max < 1 or not 1 <= t <= t_max:
        raise ValueError(f"need 1 <= t <= t_max, got t={t}, t_max={t_max}")
    return 0.0 if t_max == 1 else (t - 1) / (t_max - 1)


# Table 2 endpoints (Start, Mid, End): Discovery interpolates Start→Mid, Refinement Mid→End.
EVO_RAG_WEIGHTS: dict[str, tuple[float, float, float]] = {
    "retrieval": (2.0, 1.0, 0.5),  # β, r_ret
    "retrieval_action": (1.5, 0.8, 0.4),  # λ, r_act
    "overlap": (0.1, 0.5, 1.2),  # γ, r_dup
    "backtrack": (0.3, 0.5, 1.0),  # δ, r_bt
    "refusal": (0.5, 0.5, 0.5),  # ρ, r_ref
    "step": (0.02, 0.05, 0.10),  # η, r_step
    "answer": (0.05, 0.10, 1.00),  # κ, r_ans
}


def scheduled_weight(component: str, t: int, t_max: int, stage: int = 2) -> float:
    """w_k(t) = (1 − p(t))·w_k^early + p(t)·w_k^late with stage endpoints from Table 2 (§3.6).

    stage 1 (Discovery): early = Start, late = Mid; stage 2 (Refinement): Mid → End.
    """
    if stage not in (1, 2):
        raise ValueError(f"stage must be 1 (Discovery) or 2 (Refinement), got {stage}")
    start, mid, end = EVO_RAG_WEIGHTS[component]
    early, late = (start, mid) if stage == 1 else (mid, end)
    p = progress_ratio(t, t_max)
    return (1 - p) * early + p * late


def retrieval_action_penalty(redundancy: float, p: float) -> float:
    """r_act = 0 for a SEARCH at p(t) < 0.3, else −1[r_dup < 0] = −1 iff max cos > 0 (§3.3)."""
    return -1.0 if p >= 0.3 and redundancy > 0 else 0.0


def evo_rag_step_rewards(
    r_ret: Sequence[int],
    redundancies: Sequence[float],
    t_max: int,
    stage: int = 2,
    answer_score: float | None = None,
) -> list[float]:
    """R_t = Σ_k w_k(t)·r_k(s_t, a_t) for a rollout's SEARCH steps t = 1..n (§3.3, §3.6).

    A SEARCH step earns w_β·r_ret + w_λ·r_act + w_γ·r_dup + w_η·r_step (r_step = −1). With
    ``answer_score`` (r_ans, e.g. ``answer_correctness``) a terminal ANSWER step t = n + 1
    follows, earning w_κ·r_ans + w_η·r_step. ``r_ret`` is ``retrieval_bonus`` (±1 per step;
    booleans are refused since −1 would read as a hit) and ``redundancies`` is
    ``query_redundancy``. BACKTRACK and REFUSE (r_bt, r_ref) are not actions of this
    pipeline's solver and are not modelled.
    """
    if len(r_ret) != len(redundancies):
        raise ValueError(f"{len(r_ret)} retrieval bonuses but {len(redundancies)} redundancies")
    if any(isinstance(r, bool) or r not in (1, -1) for r in r_ret):
        raise ValueError(f"r_ret must be +1/-1 per step (see retrieval_bonus), got {list(r_ret)}")
    n = len(r_ret)
    if n + (answer_score is not None) > t_max:
        raise ValueError(f"{n} searches (+ answer) exceed the episode cap T_max = {t_max}")
    out = []
    for t, (ret, red) in enumerate(zip(r_ret, redundancies, strict=True), start=1):
        w = {k: scheduled_weight(k, t, t_max, stage) for k in EVO_RAG_WEIGHTS}
        r_act = retrieval_action_penalty(red, progress_ratio(t, t_max))
        out.append(
            w["retrieval"] * ret
            + w["retrieval_action"] * r_act
            + w["overlap"] * -red
            + w["step"] * -1.0
        )
    if answer_score is not None:
        t = n + 1
        out.append(
            scheduled_weight("answer", t, t_max, stage) * answer_score
            - scheduled_weight("step", t, t_max, stage)
        )
    return out
