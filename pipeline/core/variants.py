"""One registry per kind of variant: the names a setting or a CLI choice may take, each with
where its implementation lives ("module:attribute", imported on first use, like an entry
point). The config's Literal types and the CLI's choices are built from these keys and the
dispatch sites resolve a name with `load`, so adding a variant is its implementation plus one
entry here. Paths are strings so that core (config.py) imports nothing above it.
"""

from __future__ import annotations

import importlib
from typing import Any, Literal

# llm.backend: a Generator class (pipeline/llm/base.py) with `from_config(llm, seed=0)`.
LLM_BACKENDS: dict[str, str | None] = {
    # In-process transformers: its own batched decode loop, CPU or GPU, no engine to start.
    "transformers": "pipeline.llm.transformers_backend:TransformersGenerator",
    # The offline vLLM engine in-process (CPU build in .venv, CUDA build on GPU hosts).
    "vllm": "pipeline.llm.vllm_backend:VLLMGenerator",
    # An OpenAI-compatible completions server (`vllm serve`, SGLang, TGI or
    # `python -m pipeline.llm.openai_server`) at llm.base_url.
    "http": "pipeline.llm.http_backend:HTTPGenerator",
}

# verifier.method: a VerifierMethod (pipeline/generation/builtin_steps.py), the estimators the
# Verify step runs and the method whose V the record keeps.
VERIFIER_METHODS: dict[str, str | None] = {
    # The paper's Monte-Carlo V (eq. 14): m sampled answers with the evidence, m without.
    "mc": "pipeline.generation.builtin_steps:MC",
    # P(a|q,e) − P(a|q) from one teacher-forced score call.
    "teacher_forced": "pipeline.generation.builtin_steps:TEACHER_FORCED",
    # tanh of (log P(a|q,e) − log P(a|q)) per answer token, from the same score call.
    "teacher_forced_pmi": "pipeline.generation.builtin_steps:TEACHER_FORCED_PMI",
    # mc and teacher_forced scored together: mc is the record's V (primary), teacher_forced
    # (and _pmi) are stored too.
    "both": "pipeline.generation.builtin_steps:BOTH",
}

# `curriculum export --format` (names in lower case: the option is read case-blind): an
# ExportFormat (pipeline/catalog/export_formats.py) that writes <export>/<name>/. In this order
# the chosen formats' files are written and listed in the manifest.
EXPORT_FORMATS: dict[str, str | None] = {
    "verl": "pipeline.catalog.export_formats:VERL",  # verl / Search-R1 Parquet
    "hf": "pipeline.catalog.export_formats:HF",  # a datasets.DatasetDict on disk
    "jsonl": "pipeline.catalog.export_formats:JSONL",  # trainer-neutral rows, one per line
}

REGISTRIES: dict[str, dict[str, str | None]] = {
    "llm backend": LLM_BACKENDS,
    "verifier method": VERIFIER_METHODS,
    "export format": EXPORT_FORMATS,
}

# The config's types: a value outside the registry fails validation, naming the choices.
LLMBackend = Literal[tuple(LLM_BACKENDS)]
VerifierMethod = Literal[tuple(VERIFIER_METHODS)]


class UnknownVariant(ValueError):
    """A name that is not in its kind's registry, or has no implementation registered."""


def names(kind: str) -> tuple[str, ...]:
    """The registered names of one kind, in registry order."""
    return tuple(_registry(kind))


def load(kind: str, name: str) -> Any:
    """The implementation registered for `name`, imported now. An unknown name is an
    UnknownVariant naming the kind and the known names; a failing import (a missing optional
    dependency such as vLLM) raises as it is."""
    registry = _registry(kind)
    if name not in registry:
        raise UnknownVariant(f"unknown {kind} {name!r} (known: {', '.join(registry)})")
    target = registry[name]
    if target is None:
        raise UnknownVariant(f"{kind} {name!r} has no implementation registered to load")
    module, _, attribute = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attribute.split("."):
        obj = getattr(obj, part)
    return obj


def _registry(kind: str) -> dict[str, str | None]:
    try:
        return REGISTRIES[kind]
    except KeyError:
        raise UnknownVariant(
            f"unknown kind of variant {kind!r} ({', '.join(REGISTRIES)})"
        ) from None
