"""A crash-safe response cache in front of any Generator.

Keys are fingerprints of *what was asked*, never of code: sha256 of the canonical orjson of
("generate", model id, prompt, sampling params incl. n, stop and seed[, occurrence]) or
("score", model id, prompt, continuation). An interrupted run therefore re-uses every
generation that finished before it died, and a code change does not invalidate the cache
(change the model id or delete the file to start over).

Semantics worth knowing:
- Sampling with `seed=None` and `temperature > 0` is cached too: a re-run returns the samples
  the first run drew instead of new ones. That is the point (resume reproduces the run); to
  draw fresh samples use another seed or disable `llm.cache`.
- A prompt that appears k times in one sampled batch gets k distinct entries (the occurrence
  number is part of the key), so duplicates stay independent samples and a re-run reproduces
  each of them. Greedy duplicates (temperature 0) share one entry and go to the model once.
- Storage is one SQLite file in WAL mode; each generate/score batch is one transaction
  committed before the call returns, so killing the process (even `kill -9`) loses at most the
  batch in flight. Several processes may share the file (writers wait up to 60 s for the lock).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import orjson

from pipeline.core.config import PipelineConfig
from pipeline.llm.base import (
    Completion,
    Generator,
    SamplingParams,
    check_guides,
    generate_with_guides,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key     TEXT PRIMARY KEY,   -- sha256 of the canonical request
    kind    TEXT NOT NULL,      -- generate | score
    model   TEXT NOT NULL,
    value   BLOB NOT NULL,      -- orjson: list[str] (generate) or float (score)
    created REAL NOT NULL
)
"""
_IN_CHUNK = 500  # bound SQL parameter counts per lookup


def _key(parts: list) -> str:
    return hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)).hexdigest()


def generate_keys(
    model_id: str,
    prompts: Sequence[str],
    params: SamplingParams,
    guides: Sequence[str | None] | None = None,
) -> list[str]:
    """One cache key per prompt; sampled duplicates within a batch are numbered.

    A guided prompt's key holds its regex (an unguided key is unchanged by guides existing).
    """
    p = params.to_dict()
    seen: dict[tuple, int] = {}
    keys = []
    for i, prompt in enumerate(prompts):
        guide = guides[i] if guides else None
        k = seen.get((prompt, guide), 0)
        seen[(prompt, guide)] = k + 1
        parts: list = ["generate", model_id, prompt, p]
        if guide is not None:
            parts.append({"guided_regex": guide})
        if k and params.temperature > 0:
            parts.append(k)
        keys.append(_key(parts))
    return keys


def score_key(model_id: str, prompt: str, continuation: str) -> str:
    return _key(["score", model_id, prompt, continuation])


def default_cache_path(cfg: PipelineConfig, out_dir: Path) -> Path:
    """llm.cache_path (relative to the repo), or llm_cache/responses.sqlite under the store's
    root `out_dir` (`Store.root`)."""
    if cfg.llm.cache_path:
        return cfg.resolve_path(cfg.llm.cache_path)
    return out_dir / "llm_cache" / "responses.sqlite"


class CachedGenerator:
    """Generator wrapper: look up every request, send only the misses (in one inner call)."""

    def __init__(self, inner: Generator, path: str | Path) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # isolation_level=None: no implicit transactions; each batch is an explicit one.
        self._db = sqlite3.connect(
            self.path, timeout=60, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a committed batch survives any process crash (only an OS crash or
        # power loss can drop the last commits, never corrupt the file).
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)
        self.hits = 0
        self.misses = 0
        self.score_hits = 0
        self.score_misses = 0

    def __getattr__(self, name: str):
        # Extra backend methods (token_logprobs, generate_guided, tokenizer...) pass through
        # uncached.
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    def stats(self) -> dict[str, int]:
        return {
            "hits": self.hits,
            "misses": self.misses,
            "score_hits": self.score_hits,
            "score_misses": self.score_misses,
        }

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> CachedGenerator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- storage ---------------------------------------------------------------------------

    def _get_many(self, keys: Sequence[str]) -> dict[str, object]:
        found: dict[str, object] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for i in range(0, len(unique), _IN_CHUNK):
                chunk = unique[i : i + _IN_CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, value FROM responses WHERE key IN ({marks})", chunk
                ).fetchall()
                for k, v in rows:
                    try:
                        found[k] = orjson.loads(v)
                    except orjson.JSONDecodeError:
                        continue  # unreadable entry: recompute and overwrite it
        return found

    def _put_many(self, kind: str, items: dict[str, object]) -> None:
        now = time.time()
        rows = [(k, kind, self.model_id, orjson.dumps(v), now) for k, v in items.items()]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO responses (key, kind, model, value, created) "
                    "VALUES (?, ?, ?, ?, ?)",
                    rows,
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # -- Generator -------------------------------------------------------------------------

    def _lookup(self, keys: list[str], kind: str, usable, compute) -> tuple[list, int]:
        """Values for `keys` in order: cached ones that are `usable`, the rest from one
        `compute(indices)` call over the first index asking for each missing key."""
        found = {k: v for k, v in self._get_many(keys).items() if usable(v)}
        todo: dict[str, int] = {}  # key -> first index asking for it
        for i, k in enumerate(keys):
            if k not in found:
                todo.setdefault(k, i)
        n_miss = sum(k not in found for k in keys)
        if todo:
            send = list(todo.values())
            fresh = {keys[i]: v for i, v in zip(send, compute(send), strict=True)}
            self._put_many(kind, fresh)
            found.update(fresh)
        return [found[k] for k in keys], n_miss

    def generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        guides: Sequence[str | None] | None = None,
    ) -> list[list[str]]:
        guides = check_guides(prompts, guides)

        def compute(send: list[int]) -> list[list[str]]:
            sub_guides = [guides[i] for i in send] if guides else None
            outs = generate_with_guides(self.inner, [prompts[i] for i in send], params, sub_guides)
            return [list(o) for o in outs]

        keys = generate_keys(self.model_id, prompts, params, guides)
        vals, n_miss = self._lookup(
            keys, "generate", lambda v: isinstance(v, list) and len(v) == params.n, compute
        )
        self.hits += len(keys) - n_miss
        self.misses += n_miss
        return [list(v) for v in vals]

    def generate_with_entropy(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        guides: Sequence[str | None] | None = None,
        top_k: int = 5,
    ) -> list[list[Completion]]:
        """As `generate`, cached under keys of their own (the entropies and their k are part of
        the value), so ARR dialogues rerun and resume from the cache like every other call."""
        guides = check_guides(prompts, guides)

        def compute(send: list[int]) -> list[list]:
            sub_guides = [guides[i] for i in send] if guides else None
            outs = self.inner.generate_with_entropy(  # type: ignore[attr-defined]
                [prompts[i] for i in send], params, sub_guides, top_k=top_k
            )
            return [[[c.text, list(c.token_entropies), c.exact, c.top_k] for c in o] for o in outs]

        keys = [
            _key(["entropy", top_k, k])
            for k in generate_keys(self.model_id, prompts, params, guides)
        ]
        vals, n_miss = self._lookup(
            keys, "entropy", lambda v: isinstance(v, list) and len(v) == params.n, compute
        )
        self.hits += len(keys) - n_miss
        self.misses += n_miss
        return [[Completion(t, tuple(h), exact=e, top_k=k) for t, h, e, k in v] for v in vals]

    def score(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[float]:
        if len(prompts) != len(continuations):
            raise ValueError("score() needs one continuation per prompt")
        keys = [score_key(self.model_id, p, c) for p, c in zip(prompts, continuations, strict=True)]
        vals, n_miss = self._lookup(
            keys,
            "score",
            lambda v: isinstance(v, int | float),
            lambda send: [
                float(v)
                for v in self.inner.score(
                    [prompts[i] for i in send], [continuations[i] for i in send]
                )
            ],
        )
        self.score_hits += len(keys) - n_miss
        self.score_misses += n_miss
        return [float(v) for v in vals]

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)
