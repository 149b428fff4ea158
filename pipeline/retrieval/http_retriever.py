"""Search through one shared `/retrieve` server instead of loading the index in every worker.

At 21M passages the index is tens of GB; a node runs one `curriculum index serve` and its
generation workers use this client (`retrieval.backend: http`). The searches of one rollout
turn stay one batch: one request per turn, split only where the batch is over the server's
`max_queries`, the parts sent at most `retrieval.concurrency` at a time. Transport, retries
and error classes are `pipeline.core.http`'s, shared with the LLM HTTP backend.

The client asks for the server's opt-in extensions (`return_passages`, `return_vectors`), so
its hits carry the same rows, titles, texts and scores as an in-process search and the query
vectors are the server's own encoding; a run's records are the same with either backend. On
connecting it compares the server's `/health` (index fingerprint, embedder model and query
prompt) with the index this run expects and refuses a mismatch with one line.

Queries longer than the server's `max_query_chars` are cut to it before sending: the embedder
reads at most `embedding.max_length` tokens (256 by default), which a 2,048-character prefix
covers for any text of ordinary words, so the encoding does not change.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.config import PipelineConfig
from pipeline.core.http import RetryingClient, ServerError
from pipeline.core.wire import valid_unicode
from pipeline.retrieval.faiss_index import (
    META_FILE,
    PASSAGES_FILE,
    Hit,
    IndexMismatchError,
    PassageTable,
)

log = logging.getLogger(__name__)


class HTTPRetriever:
    """The Retriever interface over a `curriculum index serve` at `url`."""

    def __init__(
        self,
        url: str,
        index_dir: Path,
        *,
        model: str,
        query_prompt: str = "",
        concurrency: int = 4,
        timeout_s: float = 60.0,
        retries: int = 5,
        retry_backoff_s: float = 1.0,
    ) -> None:
        self.index_dir = Path(index_dir)
        self.meta = json.loads((self.index_dir / META_FILE).read_text())
        if (self.meta["model"], self.meta["query_prompt"]) != (model, query_prompt):
            raise IndexMismatchError(
                f"index {self.index_dir} was built with model {self.meta['model']!r} (query "
                f"prompt {self.meta['query_prompt']!r}); the configuration embeds queries "
                f"with {model!r} (prompt {query_prompt!r})"
            )
        self._http = RetryingClient(
            url,
            max_concurrency=concurrency,
            timeout_s=timeout_s,
            max_retries=retries,
            retry_backoff_s=retry_backoff_s,
            setting="retrieval.url",
        )
        self.url = self._http.base_url
        health = self._http.get("/health")
        self._check_health(health)
        limits = health.get("limits") or {}
        self.max_queries = int(limits.get("max_queries", 256))
        self.max_topk = int(limits.get("max_topk", 50))
        self.max_query_chars = int(limits.get("max_query_chars", 2048))
        self._passages: PassageTable | None = None

    @classmethod
    def from_config(cls, cfg: PipelineConfig, index_dir: Path) -> HTTPRetriever:
        r, e = cfg.retrieval, cfg.embedding
        return cls(
            r.url,
            index_dir,
            model=e.model,
            query_prompt=e.query_prompt,
            concurrency=r.concurrency,
            timeout_s=r.timeout_s,
            retries=r.retries,
            retry_backoff_s=r.retry_backoff_s,
        )

    def _check_health(self, health: Any) -> None:
        """The server must serve this run's index with this run's query embedder."""
        where = f"{self.url}/health"
        if not isinstance(health, dict) or "index" not in health:
            raise IndexMismatchError(
                f"{where} does not answer like `curriculum index serve` "
                f"(got {str(health)[:120]!r}); is retrieval.url right?"
            )
        want = (self.meta["fingerprint"], self.meta["model"], self.meta["query_prompt"])
        got = (health.get("index"), health.get("model"), health.get("query_prompt"))
        if got != want:
            raise IndexMismatchError(
                f"{self.url} serves index {got[0]!r} (model {got[1]!r}, query prompt "
                f"{got[2]!r}); this run needs index {want[0]!r} (model {want[1]!r}, query "
                f"prompt {want[2]!r}): start `curriculum index serve` with the run's profile "
                "and --set flags, or point retrieval.url at the server that has it"
            )

    @property
    def fingerprint(self) -> str:
        return self.meta["fingerprint"]

    @property
    def passages(self) -> PassageTable:
        """Opened on first use: a worker that only searches never reads the table."""
        if self._passages is None:
            self._passages = PassageTable(self.index_dir / PASSAGES_FILE)
        return self._passages

    def close(self) -> None:
        self._http.close()

    def search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        return self.search_with_vectors(queries, k)[0]

    def search_with_vectors(
        self, queries: Sequence[str], k: int = 3
    ) -> tuple[list[list[Hit]], np.ndarray]:
        """One request per batch (split over the server's max_queries), hits in query order."""
        if not queries:
            return [], np.zeros((0, self.meta["dim"]), dtype=np.float32)
        if k > self.max_topk:
            raise ValueError(
                f"{k} passages per search asked of {self.url}, whose retrieval.max_topk is "
                f"{self.max_topk}; lower retrieval.topk or raise the server's max_topk"
            )
        for i, q in enumerate(queries):  # the server would refuse it; say so before sending
            try:
                valid_unicode(q)
            except ValueError as exc:
                raise ValueError(f"search query {i}: {exc}") from None
        qs = [q[: self.max_query_chars] for q in queries]
        parts = [qs[i : i + self.max_queries] for i in range(0, len(qs), self.max_queries)]
        bodies = [
            {
                "queries": part,
                "topk": k,
                "return_scores": True,
                "return_passages": True,
                "return_vectors": True,
            }
            for part in parts
        ]
        hits: list[list[Hit]] = []
        vecs: list[np.ndarray] = []
        for part, answer in zip(parts, self._http.post_many("/retrieve", bodies), strict=True):
            h, v = self._parse(answer, len(part))
            hits += h
            vecs.append(v)
        return hits, np.concatenate(vecs)

    def _parse(self, answer: Any, n: int) -> tuple[list[list[Hit]], np.ndarray]:
        url = f"{self.url}/retrieve"
        try:
            result, vectors = answer["result"], answer["query_vectors"]
            if len(result) != n or len(vectors) != n:
                raise ValueError(f"{len(result)} results for {n} queries")
            hits = [
                [
                    Hit(
                        str(d["document"]["id"]),
                        d["document"]["title"],
                        d["document"]["text"],
                        float(d["score"]),
                        int(d["document"]["row"]),
                    )
                    for d in per_query
                ]
                for per_query in result
            ]
            vecs = np.asarray(vectors, dtype=np.float32).reshape(n, -1)
        except (KeyError, TypeError, ValueError) as exc:
            raise ServerError(url, 200, f"not a /retrieve answer with passages: {exc}") from exc
        return hits, vecs


__all__ = ["HTTPRetriever"]
