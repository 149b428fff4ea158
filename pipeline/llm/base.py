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

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[list[str]]:
        """Return `params.n` completions per prompt, each cut before its first stop string."""
        ...

    def score(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[float]:
        """Return log P(continuation | prompt) (natural log, summed over tokens)."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` under this model's tokenizer (no special tokens)."""
        ...


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """Truncate before the earliest stop string (backends may overshoot by a few tokens)."""
    cut = len(text)
    for s in stop:
        if s:
            i = text.find(s)
            if i != -1:
                cut = min(cut, i)
    return text[:cut]
