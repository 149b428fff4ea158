"""What the LLM engine spent, as the backend reports it: calls, prompt tokens computed and
served from its prefix cache, generated tokens, and the generated tokens of each record.

Backends report each engine call through `report()`; nothing is estimated from a price table
or re-tokenized afterwards, and a field a backend does not report stays None. A call the
response cache answers never reaches the backend and costs nothing. The caller opens a
`Meter` around a piece of work (`metered()`), and an agent names, for the prompts it is about
to send, the record each one serves (`owned()`): a backend's report then credits each prompt's
generated tokens to its record. Both are context variables, so they follow the work through
nested calls without a parameter on every Generator method, and a backend that reports from a
worker thread must report from the caller's thread after gathering (they do).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

UNOWNED = ""  # generated tokens no record was named for (the KG stage's calls, a warm-up)


def _plus(a: int | None, b: int | None) -> int | None:
    """Sum of two reported counts; None only when neither was reported."""
    if a is None:
        return b
    return a if b is None else a + b


@dataclass
class Usage:
    """Totals of the engine calls of one piece of work (a step of a shard, a shard, a run)."""

    llm_calls: int = 0
    prompt_tokens_computed: int | None = None
    prompt_tokens_cached: int | None = None
    generated_tokens: int | None = None

    def add(self, other: Usage) -> None:
        self.llm_calls += other.llm_calls
        for f in ("prompt_tokens_computed", "prompt_tokens_cached", "generated_tokens"):
            setattr(self, f, _plus(getattr(self, f), getattr(other, f)))


@dataclass
class Meter:
    usage: Usage = field(default_factory=Usage)
    # record id -> generated tokens credited to it (UNOWNED: prompts no record was named for)
    by_record: dict[str, int] = field(default_factory=dict)


_METER: ContextVar[Meter | None] = ContextVar("llm_meter", default=None)
_OWNERS: ContextVar[dict[str, str] | None] = ContextVar("llm_owners", default=None)


@contextmanager
def metered() -> Iterator[Meter]:
    """Count every engine call made inside the block (nested meters: the innermost counts and
    hands its totals to the one outside when it closes)."""
    outer = _METER.get()
    meter = Meter()
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)
        if outer is not None:
            outer.usage.add(meter.usage)
            for k, v in meter.by_record.items():
                outer.by_record[k] = outer.by_record.get(k, 0) + v


@contextmanager
def owned(prompts: Sequence[str], records: Sequence[str]) -> Iterator[None]:
    """The calls inside the block serve `records[i]` with `prompts[i]` (the exact text sent):
    a backend's report credits each prompt's generated tokens to its record. A prompt shared
    by two records goes to the first; the response cache sends a prompt once anyway."""
    owners = dict(_OWNERS.get() or {})
    for p, r in zip(prompts, records, strict=True):
        owners.setdefault(p, r)
    token = _OWNERS.set(owners)
    try:
        yield
    finally:
        _OWNERS.reset(token)


def report(
    generated: Sequence[tuple[str, int | None]],
    prompt_tokens_computed: int | None,
    prompt_tokens_cached: int | None,
    generated_total: int | None = None,
) -> None:
    """One engine call: (prompt, generated tokens over its completions) per prompt sent, and
    the call's prompt tokens computed and served from the engine's prefix cache.
    `generated_total`, for an engine that reports tokens per call and not per prompt (an
    OpenAI server's `usage`): the part no prompt was given is credited to UNOWNED."""
    meter = _METER.get()
    if meter is None:
        return
    owners = _OWNERS.get() or {}
    credited: int | None = None
    for prompt, n in generated:
        if n is None:
            continue
        credited = (credited or 0) + n
        rec = owners.get(prompt, UNOWNED)
        meter.by_record[rec] = meter.by_record.get(rec, 0) + n
    total = credited if generated_total is None else generated_total
    if total is not None and total != (credited or 0):
        meter.by_record[UNOWNED] = meter.by_record.get(UNOWNED, 0) + total - (credited or 0)
    meter.usage.add(Usage(1, prompt_tokens_computed, prompt_tokens_cached, total))


def report_openai(prompts: Sequence[str], response: dict) -> None:
    """One request to an OpenAI-compatible server, from its `usage` (None where it has none;
    `prompt_tokens_details.cached_tokens` where the server reports its prefix cache)."""
    u = response.get("usage") or {}
    cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens")
    prompt, completion = u.get("prompt_tokens"), u.get("completion_tokens")
    computed = None if prompt is None else prompt - (cached or 0)
    one = completion if len(prompts) == 1 else None  # per prompt only when it is alone
    report([(p, one) for p in prompts], computed, cached, completion)


@contextmanager
def continued(roots: Sequence[str], prompts: Sequence[str]) -> Iterator[None]:
    """`prompts[i]` continues `roots[i]` (a rollout's next turn: its prompt and transcript so
    far) and serves the same record."""
    owners = _OWNERS.get() or {}
    pairs = [(p, owners[r]) for r, p in zip(roots, prompts, strict=True) if r in owners]
    with owned([p for p, _ in pairs], [o for _, o in pairs]):
        yield
