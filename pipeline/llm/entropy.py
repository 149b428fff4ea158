"""Per-token entropy from log-probabilities, shared by every backend (pure functions).

The transformers backend has each position's full distribution (exact entropy); vLLM and
OpenAI-compatible servers return only the k most likely log-probs (an approximation).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def token_entropy(logprobs: Sequence[float]) -> float:
    """Exact H = −Σ p log p (nats) from one position's full log-softmax over the vocabulary."""
    return -math.fsum(math.exp(lp) * lp for lp in logprobs if lp > -math.inf)


def token_entropy_topk(top_logprobs: Sequence[float]) -> float:
    """Approximate H from the k largest log-probs of one position (what vLLM/OpenAI return).

    The unseen tail mass m = 1 − Σ_top p is counted as one lumped outcome, −m log m. Lumping
    tokens together never raises entropy, so this is a lower bound of the exact entropy, equal to
    it when the top k hold all the mass; the gap shrinks as k grows. m is floored at 0 because
    provider log-probs can sum a hair above 1.
    """
    head = [math.exp(lp) for lp in top_logprobs if lp > -math.inf]
    h = -math.fsum(p * math.log(p) for p in head if p > 0.0)
    tail = max(0.0, 1.0 - math.fsum(head))
    if tail > 0.0:
        h -= tail * math.log(tail)
    return h
