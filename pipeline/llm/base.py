"""The Generator interface every LLM backend implements.

Callers hand over whole batches; a backend decides how to split them (padding buckets on CPU,
continuous batching in vLLM, concurrent requests over HTTP).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class SamplingParams:
    n: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 64
    stop: tuple[str, ...] = field(default_factory=tuple)
    seed: int | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d


@runtime_checkable
class Generator(Protocol):
    model_id: str

    def generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        guides: Sequence[str | None] | None = None,
    ) -> list[list[str]]:
        """Return `params.n` completions per prompt, each cut before its first stop string.

        `guides[i]`, when given and not None, is a regular expression prompt i's completions
        must match (guided decoding); generation ends when the expression is complete. A
        completion cut short by `max_tokens` or a stop string is a prefix of a match.
        """
        ...

    def score(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[float]:
        """Return log P(continuation | prompt) (natural log, summed over tokens)."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` under this model's tokenizer (no special tokens)."""
        ...


@dataclass(frozen=True)
class Completion:
    """One completion with the policy's entropy (nats) at each sampled token.

    `exact` is True when each entropy is −Σ p log p over the full vocabulary (temperature 1,
    before any guide's mask); False when it is the top-`top_k` approximation of
    `process_rewards.token_entropy_topk` (the unseen tail lumped into one outcome: a lower
    bound). Entropies are per generated token, EOS excluded; the transformers backend also
    counts the tokens of a stop string cut from `text`, servers report only the returned text's.
    """

    text: str
    token_entropies: tuple[float, ...]
    exact: bool
    top_k: int | None = None

    @property
    def mean_entropy(self) -> float | None:
        """H_a: the mean over the completion's tokens (ARR §3.2), None without tokens."""
        h = self.token_entropies
        return sum(h) / len(h) if h else None


def check_guides(prompts: Sequence[str], guides: Sequence[str | None] | None) -> list | None:
    """`guides` as a list aligned with `prompts`, or None when no prompt is guided."""
    if guides is None:
        return None
    guides = list(guides)
    if len(guides) != len(prompts):
        raise ValueError(f"{len(guides)} guides for {len(prompts)} prompts")
    return guides if any(g is not None for g in guides) else None


def generate_with_guides(
    gen: Generator,
    prompts: Sequence[str],
    params: SamplingParams,
    guides: Sequence[str | None] | None,
) -> list[list[str]]:
    """`gen.generate`, passing `guides` only when there are some, so a Generator without
    guided decoding still serves every unguided call."""
    if guides is None:
        return gen.generate(prompts, params)
    return gen.generate(prompts, params, guides)


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """Truncate before the earliest stop string (backends may overshoot by a few tokens)."""
    cut = len(text)
    for s in stop:
        if s:
            i = text.find(s)
            if i != -1:
                cut = min(cut, i)
    return text[:cut]
