"""Per-row sampling for the decode loop: each row draws from its own seeded generator, so a
row's tokens depend on its own prompt, seed and sample index, never on its batch neighbours."""

from __future__ import annotations

import hashlib

import torch

from pipeline.llm.base import SamplingParams

# Candidates sorted for nucleus (top_p) sampling before falling back to a full sort.
NUCLEUS_CANDIDATES = 1024


def row_generator(seed: int, prompt: str, occurrence: int, sample: int) -> torch.Generator:
    digest = hashlib.sha256(f"{seed}|{occurrence}|{sample}|{prompt}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "big") >> 1)


def sample_next(logits: torch.Tensor, params: SamplingParams, rngs: list | None) -> torch.Tensor:
    """Next token per row: argmax, or temperature + nucleus (top_p) sampling by inverse CDF.

    Each row draws one uniform number from its own generator (global RNG without a seed), so
    its choice depends on its own logits only.
    """
    if params.temperature <= 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits / params.temperature, dim=-1)
    order = None
    if params.top_p < 1.0:
        # The nucleus almost always lies within the most likely few hundred tokens: sorting
        # only those (top-k) picks the same token as sorting the whole vocabulary.
        k = min(NUCLEUS_CANDIDATES, probs.shape[-1])
        top, order = probs.topk(k, dim=-1)
        if k < probs.shape[-1] and bool((top.sum(-1) < params.top_p).any()):
            top, order = probs.sort(dim=-1, descending=True)
        probs = top
        # Keep the smallest set of most likely tokens whose mass reaches top_p (at least one).
        probs = probs * ((probs.cumsum(-1) - probs) < params.top_p)
    cdf = probs.cumsum(-1)
    if rngs is None:
        u = torch.rand(len(probs))
    else:
        u = torch.cat([torch.rand(1, generator=g) for g in rngs])
    pick = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).clamp(
        max=cdf.shape[1] - 1
    )
    if order is not None:
        pick = order.gather(1, pick)
    return pick[:, 0]
