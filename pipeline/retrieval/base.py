"""What the agents and the generate stage need of a retriever, whichever backend serves it.

Two backends satisfy it: `faiss_index.Retriever` (the index in this process) and
`http_retriever.HTTPRetriever` (one shared `curriculum index serve`). Both return the same
hits for the same queries, so a run's records do not depend on the backend. `passages` (the
plan's source passages, by row) is read from the index folder in both: the folder is the
driver's, and workers elsewhere see it on shared storage like the store itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from pipeline.retrieval.faiss_index import Hit, PassageTable


class RetrieverBackend(Protocol):
    @property
    def fingerprint(self) -> str:
        """The index fingerprint every record carries."""
        ...

    @property
    def passages(self) -> PassageTable:
        """Passage id/title/text by row (= vector id)."""
        ...

    def search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        """Top-k hits per query, best first."""
        ...

    def search_with_vectors(
        self, queries: Sequence[str], k: int = 3
    ) -> tuple[list[list[Hit]], np.ndarray]:
        """Hits plus the embedded queries (float32, one row per query), as one batch."""
        ...


__all__ = ["Hit", "RetrieverBackend"]
