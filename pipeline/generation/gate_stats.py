"""Pure statistics of the generation-time gates: shortcut and uniqueness
flags, the controls' derangement, and the AUC of real vs control verifier scores.

No model, no I/O: `pipeline.generation.gates` feeds them the solver's and verifier's outputs,
and tests feed them hand-made numbers.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

from sklearn.metrics import roc_auc_score

from pipeline.agents.rewards import contains, normalize


def accuracy(correct: Sequence[bool]) -> float | None:
    """Share of correct samples; None for no samples (not checked, not 0)."""
    return sum(map(bool, correct)) / len(correct) if correct else None


def is_shortcut(
    hop_count: int, closed_book: float | None, one_search: float | None, threshold: float
) -> bool | None:
    """A multi-hop record (h >= 2) that a closed-book or one-search solver answers with
    accuracy >= threshold does not need its hops. None: single-hop, or nothing measured."""
    if hop_count < 2:
        return None
    accs = [a for a in (closed_book, one_search) if a is not None]
    if not accs:
        return None
    return max(accs) >= threshold


def verdict(enabled: bool, applies: bool, answerable: bool, failed: bool | None) -> str:
    """One gate's verdict for one record: `off` (switched off), `not_applicable` (e.g. the
    shortcut gate on a one-hop record), `undetermined` (no rollout answered correctly even
    with the gold evidence, so a failure to answer proves nothing), else `fail` or `pass`. A
    gate never passes a record because nothing could be measured."""
    if not enabled:
        return "off"
    if not applies:
        return "not_applicable"
    if not answerable or failed is None:
        return "undetermined"
    return "fail" if failed else "pass"


def answer_candidates(
    predictions: Sequence[str | None],
    supported: Sequence[bool | None],
    min_support: int,
) -> list[str]:
    """Distinct Norm(answers) that >= min_support rollouts give *and* found in the passages
    they retrieved. Two or more of them: the rollouts converge on several answers the corpus
    backs, a sign of an ambiguous question; an unsupported answer is only a solver error."""
    counts = Counter(
        normalize(p) for p, ok in zip(predictions, supported, strict=True) if ok and normalize(p)
    )
    return sorted(a for a, c in counts.items() if c >= min_support)


def is_unique(candidates: Sequence[str]) -> bool:
    return len(candidates) < 2


def derangement(n: int, seed: int) -> list[int]:
    """A permutation with no fixed point (n >= 2): item i takes item out[i]'s evidence. A
    seeded shuffle, then each position takes the next one's item (a single cycle), so every
    record gets another record's evidence whatever the order."""
    if n < 2:
        raise ValueError("a derangement needs at least two items")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    out = [0] * n
    for k, i in enumerate(order):
        out[i] = order[(k + 1) % n]
    return out


def in_sample(record_id: str, share: float) -> bool:
    """Whether a record belongs to the controls' sample: a hash of its id below `share`, so
    the sample does not depend on shard size or order and a rerun draws the same records."""
    if share >= 1.0:
        return True
    return int(record_id[:8], 16) / 0xFFFFFFFF < share if _is_hex(record_id[:8]) else False


def _is_hex(s: str) -> bool:
    try:
        int(s, 16)
    except ValueError:
        return False
    return len(s) == 8


def auc_real_vs_control(real: Sequence[float], control: Sequence[float]) -> float | None:
    """ROC AUC of the verifier separating real evidence (positives) from a control (negatives):
    the chance that a random real V exceeds a random control V, ties counted half. 0.5 is no
    separation (a degenerate verifier with V = 0 everywhere scores exactly 0.5). None when
    either side is empty."""
    if not real or not control:
        return None
    labels = [1] * len(real) + [0] * len(control)
    return float(roc_auc_score(labels, [*real, *control]))


def leakage_share(real: Sequence[float], answer_only: Sequence[float]) -> float | None:
    """Share of records whose V with the answer string alone is >= their real V: the verifier
    rewarding answer leakage rather than evidence. Pairs by position (same record)."""
    if not real:
        return None
    return sum(a >= r for r, a in zip(real, answer_only, strict=True)) / len(real)


def connectedness(
    full: float, without_each_hop: Sequence[float], redundant: Sequence[bool]
) -> tuple[bool, str] | None:
    """Connected reasoning (MuSiQue): (disconnected, decided_by) of a chain. A hop does not
    matter when its sentence can be left out without lowering log P(answer | question,
    evidence) -- `full` with every hop, `without_each_hop` without each in turn -- *and* the
    other sentences still state its link (`redundant`, `redundant_hops`). A small model's
    scores often ignore the early hops of a chain that needs them (the final sentence holds
    the answer); where the text shows such a hop is the only link, the scores cannot decide
    and the rule does ("rules"); "teacher_forced" where the scores decided (every hop lowers
    P(answer), or a hop that does not is redundant in the text too). None: fewer than two
    hops, nothing to compare."""
    if len(without_each_hop) < 2:
        return None
    lowered = [lp < full for lp in without_each_hop]
    disconnected = any(not low and red for low, red in zip(lowered, redundant, strict=True))
    return disconnected, "teacher_forced" if all(lowered) or disconnected else "rules"


def redundant_hops(links: Sequence[tuple[Sequence[str], Sequence[str], str]]) -> list[bool]:
    """Per hop, whether another hop's sentence also names both its subject and its object:
    with that hop left out, the chain still states its link (two hops read off one sentence,
    or a final sentence that names the start entity). `links`: (subject forms, object forms,
    sentence) per hop."""
    out = []
    for j, (subject, obj, _) in enumerate(links):
        others = [text for k, (_, _, text) in enumerate(links) if k != j]
        out.append(any(_names(t, subject) and _names(t, obj) for t in others))
    return out


def _names(text: str, forms: Sequence[str]) -> bool:
    return any(contains(text, f) for f in forms if f)


def leaks_in_top_k(passages: Sequence[str], wanted: Sequence[Sequence[str]], found) -> bool:
    """Search necessity (InfoSeek): one search's passages hold every one of `wanted` (each a
    group of accepted forms: the answer's, or for a comparison each compared value's);
    `found(text, forms)` says whether a text holds any of the forms."""
    return bool(wanted) and all(any(found(p, forms) for p in passages) for forms in wanted)
