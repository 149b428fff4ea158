"""LLM backends behind one Generator interface."""

from __future__ import annotations

from pipeline.llm.base import Generator, SamplingParams, cut_at_stop


def make_generator(llm) -> Generator:
    """Build the configured backend (imports heavy dependencies lazily)."""
    if llm.backend == "transformers":
        from pipeline.llm.transformers_backend import TransformersGenerator

        return TransformersGenerator.from_config(llm)
    raise NotImplementedError(
        f"LLM backend {llm.backend!r} is not available yet in this build; "
        "use backend: transformers (vLLM and HTTP backends land with the generation engine)"
    )


__all__ = ["Generator", "SamplingParams", "cut_at_stop", "make_generator"]
