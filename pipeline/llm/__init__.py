"""LLM backends behind one Generator interface."""

from __future__ import annotations

import logging
from pathlib import Path

from pipeline.core.variants import load
from pipeline.llm.base import Generator, SamplingParams, cut_at_stop

log = logging.getLogger(__name__)


def make_backend(llm, seed: int = 0) -> Generator:
    """Build the configured backend, uncached: the class registered for `llm.backend` in
    pipeline/core/variants.py, imported now (heavy dependencies load only for the one chosen).

    `seed` seeds vLLM's engine; per-request seeds come from SamplingParams.seed.
    """
    return load("llm backend", llm.backend).from_config(llm, seed=seed)


def make_generator(llm, cache_path: str | Path | None = None, seed: int = 0) -> Generator:
    """The configured backend, wrapped in the response cache when `llm.cache` is on.

    The cache file is `cache_path` if given (callers holding the whole config and the store
    pass `pipeline.llm.cache.default_cache_path(cfg, store.root)`), else `llm.cache_path`;
    with neither, the backend is returned uncached.
    """
    gen = make_backend(llm, seed=seed)
    if not llm.cache:
        return gen
    path = cache_path if cache_path is not None else llm.cache_path
    if path is None:
        log.debug("llm.cache is on but no cache path was given; generating uncached")
        return gen
    from pipeline.core.config import PROJECT_ROOT
    from pipeline.llm.cache import CachedGenerator

    p = Path(path).expanduser()
    p = p if p.is_absolute() else PROJECT_ROOT / p
    log.info("LLM response cache: %s", p)
    return CachedGenerator(gen, p)


__all__ = ["Generator", "SamplingParams", "cut_at_stop", "make_backend", "make_generator"]
