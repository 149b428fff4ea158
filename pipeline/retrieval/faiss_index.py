"""FAISS index over embedding shards, and the Retriever every agent searches with.

The index directory holds the index file, the passages table (row = vector id) and a metadata
document (model, prompts, dim, factory, count, corpus fingerprint); a retriever refuses to
answer with a query model that differs from the one the index was built with.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.core.io import atomic_path, atomic_write_text
from pipeline.retrieval.embedding import Embedder, load_shards

log = logging.getLogger(__name__)

INDEX_FILE = "index.faiss"
META_FILE = "index_meta.json"
PASSAGES_FILE = "passages.parquet"


class IndexMismatchError(RuntimeError):
    pass


def set_threads(threads: int = 0) -> int:
    """FAISS threads, set explicitly (0 = all cores): its OpenMP default may not match the
    container's CPU quota."""
    n = threads or os.cpu_count() or 1
    faiss.omp_set_num_threads(n)
    return n


def ivf_lists(n: int) -> int:
    """IVF list count: the power of two nearest 8*sqrt(N), kept within [4, 16]*sqrt(N)."""
    root = math.sqrt(max(n, 1))
    k = 1 << max(0, round(math.log2(8 * root)))
    return int(min(max(k, math.ceil(4 * root)), math.floor(16 * root)))


def choose_factory(factory: str, n: int, ivf_threshold: int = 200_000) -> str:
    """`auto`: Flat below `ivf_threshold` vectors, else IVF{K},Flat; other strings pass through."""
    if factory != "auto":
        return factory
    return "Flat" if n < ivf_threshold else f"IVF{ivf_lists(n)},Flat"


def build_faiss_index(
    shard_paths: Sequence[Path],
    dim: int,
    factory: str,
    out_dir: Path,
    meta: dict,
    threads: int = 0,
    train_per_list: int = 64,
    seed: int = 0,
    ivf_threshold: int = 200_000,
) -> Path:
    """Build, save and describe an inner-product index from memory-mapped shards.

    IVF indexes train on `train_per_list` x K vectors (FAISS wants 30-256 per list), sampled
    uniformly from the shards without loading them whole.
    """
    if not 30 <= train_per_list <= 256:
        raise ValueError("train_per_list must be within 30..256 vectors per inverted list")
    set_threads(threads)
    shards = load_shards(shard_paths)
    n = sum(s.shape[0] for s in shards)
    factory = choose_factory(factory, n, ivf_threshold)
    index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        nlist = faiss.extract_index_ivf(index).nlist
        n_train = min(n, train_per_list * nlist)
        rng = np.random.default_rng(seed)
        rows = np.sort(rng.choice(n, size=n_train, replace=False))
        log.info("training %s on %d vectors", factory, n_train)
        index.train(_gather(shards, rows))
    for s in shards:
        for i in range(0, s.shape[0], 65_536):
            index.add(np.ascontiguousarray(s[i : i + 65_536], dtype=np.float32))
    with atomic_path(out_dir / INDEX_FILE) as tmp:
        faiss.write_index(index, str(tmp))
    meta = {**meta, "factory": factory, "dim": dim, "count": int(index.ntotal), "metric": "ip"}
    atomic_write_text(out_dir / META_FILE, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return out_dir / INDEX_FILE


def _gather(shards: list[np.ndarray], rows: np.ndarray) -> np.ndarray:
    out, offset = [], 0
    for s in shards:
        sel = rows[(rows >= offset) & (rows < offset + s.shape[0])] - offset
        if sel.size:
            out.append(np.asarray(s[sel], dtype=np.float32))
        offset += s.shape[0]
    return np.ascontiguousarray(np.concatenate(out))


class PassageTable:
    """Passage id/title/text by row (= vector id), kept as one Arrow table, not Python lists:
    21M passages as Python strings would cost several times the text size."""

    def __init__(self, path: Path) -> None:
        self.table = pq.read_table(path, columns=["id", "title", "text"], memory_map=True)

    def __len__(self) -> int:
        return self.table.num_rows

    def get(self, rows: Sequence[int]) -> list[tuple[str, str, str]]:
        return self._rows(self.table.take(pa.array(rows, type=pa.int64())))

    def by_ids(self, ids: Sequence[str]) -> dict[str, tuple[str, str, str]]:
        """(id, title, text) of the passages with these ids (an entity's own article): one
        vectorised scan of the id column, no id -> row dictionary of the whole corpus."""
        if not ids:
            return {}
        mask = pc.is_in(self.table["id"], value_set=pa.array(sorted(set(ids)), pa.string()))
        return {row[0]: row for row in self._rows(self.table.filter(mask))}

    @staticmethod
    def _rows(t: pa.Table) -> list[tuple[str, str, str]]:
        return list(
            zip(t["id"].to_pylist(), t["title"].to_pylist(), t["text"].to_pylist(), strict=True)
        )


@dataclass(frozen=True)
class Hit:
    id: str
    title: str
    text: str
    score: float
    row: int


class Retriever:
    """Batched dense search: `search(queries, k)` -> per query a list of Hits."""

    def __init__(
        self,
        index_dir: Path,
        embedder: Embedder,
        nprobe: int = 64,
        mmap: bool = True,
        threads: int = 0,
    ):
        set_threads(threads)
        self.index_dir = Path(index_dir)
        self.meta = json.loads((self.index_dir / META_FILE).read_text())
        if (self.meta["model"], self.meta["query_prompt"]) != (
            embedder.model_ref,
            embedder.query_prompt,
        ):
            raise IndexMismatchError(
                f"index {self.index_dir} was built with model {self.meta['model']!r} "
                f"(query prompt {self.meta['query_prompt']!r}); refusing queries embedded with "
                f"{embedder.model_ref!r} (prompt {embedder.query_prompt!r})"
            )
        flags = faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY if mmap else 0
        try:
            self.index = faiss.read_index(str(self.index_dir / INDEX_FILE), flags)
        except RuntimeError:  # some index types cannot be memory-mapped
            self.index = faiss.read_index(str(self.index_dir / INDEX_FILE))
        if hasattr(self.index, "nprobe"):
            self.index.nprobe = nprobe
        else:
            with contextlib.suppress(RuntimeError):  # RuntimeError: not an IVF index
                faiss.extract_index_ivf(self.index).nprobe = nprobe
        self.embedder = embedder
        self.passages = PassageTable(self.index_dir / PASSAGES_FILE)

    @property
    def fingerprint(self) -> str:
        return self.meta["fingerprint"]

    def search_vectors(self, vecs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.index.search(np.ascontiguousarray(vecs, dtype=np.float32), k)

    def search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        return self.search_with_vectors(queries, k)[0]

    def search_with_vectors(
        self, queries: Sequence[str], k: int = 3
    ) -> tuple[list[list[Hit]], np.ndarray]:
        """Hits plus the query vectors (agents score sub-query redundancy with them)."""
        if not queries:
            return [], np.zeros((0, self.meta["dim"]), dtype=np.float32)
        vecs = self.embedder.encode_queries(queries)
        scores, rows = self.search_vectors(vecs, k)
        flat = [int(r) for r in rows.ravel() if r >= 0]
        found = dict(zip(flat, self.passages.get(flat), strict=True))
        hits = [
            [
                Hit(*found[int(r)], float(s), int(r))
                for s, r in zip(srow, rrow, strict=True)
                if r >= 0
            ]
            for srow, rrow in zip(scores, rows, strict=True)
        ]
        return hits, vecs


def format_docs(hits: Sequence[Hit], count_tokens, max_tokens: int = 512) -> str:
    """The agent-facing tool response: `Doc i(Title: t) text`, cut to a token budget."""
    lines = [f"Doc {i}(Title: {h.title}) {h.text}" for i, h in enumerate(hits, 1)]
    out = "\n".join(lines)
    if count_tokens(out) <= max_tokens:
        return out
    words = out.split(" ")
    lo, hi = 0, len(words)
    while lo < hi:  # longest word prefix within the budget
        mid = (lo + hi + 1) // 2
        if count_tokens(" ".join(words[:mid])) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])
