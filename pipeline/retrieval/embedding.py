"""Passage/query embedding with sentence-transformers, written as fixed-size resumable shards.

Shards are memory-mapped `.npy` files listed in a manifest; a rebuild skips every shard whose
file exists with the recorded checksum, so an interrupted build resumes at the first gap and
peak memory is one shard regardless of corpus size. Each shard is one unit of an executor
(`EmbedStep`): in this process, or on Ray workers (one per GPU) that each load the model once;
the caller alone writes the manifest, after each shard arrives.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from pipeline.core.config import PipelineConfig
from pipeline.core.contracts import read_shard
from pipeline.core.io import atomic_path, sha256_file, write_parquet_atomic
from pipeline.core.model_refs import resolve_embedder
from pipeline.executors.base import Executor, LocalExecutor, WorkerStatus
from pipeline.llm.cancel import checkpoint
from schemas.tables import EMBEDDINGS_MANIFEST

log = logging.getLogger(__name__)

# Texts per encode call inside a shard: large enough to keep batches full, small enough that
# the progress bar moves every few seconds on a CPU.
PROGRESS_CHUNK = 4096


def _cancel_point(module, args) -> None:
    checkpoint()


class Embedder:
    """A sentence-transformers model with the per-model query/passage prompts."""

    def __init__(
        self,
        model: str,
        query_prompt: str = "",
        passage_prompt: str = "",
        batch_size: int = 64,
        max_length: int = 256,
        normalize: bool = True,
        device: str = "cpu",
        devices: Sequence[str] = (),
    ) -> None:
        from sentence_transformers import SentenceTransformer

        self.model_ref = model
        self.query_prompt = query_prompt
        self.passage_prompt = passage_prompt
        self.batch_size = batch_size
        self.max_length = max_length
        self.normalize = normalize
        self.device = device
        self.model = SentenceTransformer(resolve_embedder(model), device=device)
        self.model.max_seq_length = max_length
        self.dim = int(self.model.get_embedding_dimension())
        # The retrieval server cancels an abandoned search at the next transformer layer
        # (pipeline.llm.cancel; a no-op for every other caller).
        for name, module in self.model.named_modules():
            if re.search(r"\.layers?\.\d+$", name):
                module.register_forward_pre_hook(_cancel_point)
        # Several devices (GPUs, or CPU processes) -> a sentence-transformers process pool.
        self.devices = list(devices)
        self._pool = None

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> Embedder:
        e = cfg.embedding
        return cls(
            e.model,
            e.query_prompt,
            e.passage_prompt,
            e.batch_size,
            e.max_length,
            e.normalize,
            e.device,
        )

    def spec(self) -> dict[str, Any]:
        """The constructor arguments: what a worker needs to load the same embedder."""
        return {
            "model": self.model_ref,
            "query_prompt": self.query_prompt,
            "passage_prompt": self.passage_prompt,
            "batch_size": self.batch_size,
            "max_length": self.max_length,
            "normalize": self.normalize,
            "device": self.device,
        }

    def _encode(
        self, texts: Sequence[str], prompt: str, progress: bool, pool: bool = False
    ) -> np.ndarray:
        if pool and len(self.devices) > 1 and self._pool is None:
            self._pool = self.model.start_multi_process_pool(target_devices=self.devices)
        vecs = self.model.encode(
            list(texts),
            prompt=prompt or None,
            batch_size=self.batch_size,
            normalize_embeddings=self.normalize,
            convert_to_numpy=True,
            show_progress_bar=progress,
            pool=self._pool if pool else None,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def close(self) -> None:
        if self._pool is not None:
            self.model.stop_multi_process_pool(self._pool)
            self._pool = None

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        return self._encode(queries, self.query_prompt, progress=False)

    def encode_passages(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Bulk corpus encoding: uses the multi-process pool when several devices are set."""
        return self._encode(texts, self.passage_prompt, progress=progress, pool=True)


def passage_text(title: str, text: str) -> str:
    """What gets embedded for a passage: title and body, as in FlashRAG's wiki-18 index."""
    return f"{title}\n{text}" if title else text


def corpus_fingerprint(passages_path: Path) -> str:
    """Content hash of the passages table (ids, titles, texts in order), at buffer speed.

    Each batch is hashed as its values' UTF-8 bytes plus their lengths, so the result does not
    depend on how Arrow chunked the file.
    """
    h = hashlib.sha256()
    pf = pq.ParquetFile(passages_path)
    for batch in pf.iter_batches(columns=["id", "title", "text"], batch_size=65_536):
        for col in batch.columns:
            arr = pa.concat_arrays([col.cast(pa.large_string())])  # offset 0, 64-bit offsets
            offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[: len(arr) + 1]
            h.update(np.diff(offsets).tobytes())
            data = arr.buffers()[2]
            if data is not None:
                h.update(memoryview(data)[offsets[0] : offsets[-1]])
    return h.hexdigest()[:16]


@dataclass
class EmbedResult:
    shards: list[Path]
    dim: int
    rows: int
    embedded_shards: int  # how many shards were computed in this call (rest reused)


@dataclass(frozen=True)
class EmbedShard:
    """Rows [start, end) of the passages table -> emb-NNNNN.npy."""

    shard: int
    start: int
    end: int

    @property
    def name(self) -> str:
        return f"emb-{self.shard:05d}"


class EmbedStep:
    """One embedding shard per unit. In this process it uses the embedder it was given; on a
    worker it loads the same model (`Embedder.spec`) once, in `setup()`."""

    def __init__(
        self,
        embedder: Embedder,
        passages_path: Path,
        out_dir: Path,
        fingerprint: str,
        on_chunk: Callable[[int], None] | None = None,
    ) -> None:
        self.spec = embedder.spec()
        self.embedder: Embedder | None = embedder
        self.passages_path, self.out_dir, self.fingerprint = passages_path, out_dir, fingerprint
        self.on_chunk = on_chunk  # the caller's progress bar (in this process only)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "embedder": None, "on_chunk": None}

    def setup(self) -> None:
        if self.embedder is None:
            self.embedder = Embedder(**self.spec)

    def run(self, unit: EmbedShard) -> dict:
        assert self.embedder is not None, "setup() first"
        texts = read_passage_texts(self.passages_path, unit.start, unit.end)
        parts = []
        for i in range(0, len(texts), PROGRESS_CHUNK):  # chunked so the bar shows rate and ETA
            parts.append(self.embedder.encode_passages(texts[i : i + PROGRESS_CHUNK]))
            if self.on_chunk:
                self.on_chunk(len(parts[-1]))
        vecs = np.concatenate(parts)
        name = f"{unit.name}.npy"
        with atomic_path(self.out_dir / name) as tmp:
            np.save(tmp, vecs)
        return {
            "shard": unit.shard,
            "path": name,
            "row_start": unit.start,
            "row_end": unit.end,
            "dim": int(vecs.shape[1]),
            "model": self.spec["model"],
            "passage_prompt": self.spec["passage_prompt"],
            "normalized": self.spec["normalize"],
            "sha256": sha256_file(self.out_dir / name),
            "corpus_fingerprint": self.fingerprint,
            "created_at": dt.datetime.now(dt.UTC),
        }

    def close(self) -> None:
        if self.embedder is not None:
            self.embedder.close()


def embed_corpus(
    embedder: Embedder,
    passages_path: Path,
    out_dir: Path,
    shard_size: int,
    fingerprint: str,
    progress: bool = True,
    executor: Executor | None = None,
) -> EmbedResult:
    """Embed the passages table into shard files under out_dir, resuming finished shards;
    the missing shards run on `executor` (this process by default)."""
    executor = executor or LocalExecutor()
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = out_dir / "embeddings_manifest.parquet"
    done: dict[int, dict] = {}
    rows = pq.ParquetFile(passages_path).metadata.num_rows
    if manifest_path.exists():
        for row in read_shard(manifest_path, "embeddings_manifest").to_pylist():
            start = row["shard"] * shard_size
            ok = (
                (row["row_start"], row["row_end"]) == (start, min(rows, start + shard_size))
                and row["model"] == embedder.model_ref
                and row["passage_prompt"] == embedder.passage_prompt
                and row["corpus_fingerprint"] == fingerprint
                and (out_dir / row["path"]).exists()
                and sha256_file(out_dir / row["path"]) == row["sha256"]
            )
            if ok:
                done[row["shard"]] = row
    n_shards = (rows + shard_size - 1) // shard_size
    todo = [
        EmbedShard(k, k * shard_size, min(rows, (k + 1) * shard_size))
        for k in range(n_shards)
        if k not in done
    ]
    total = sum(u.end - u.start for u in todo)
    bar = tqdm(total=total, unit="passage", desc="embedding", disable=not progress or not total)
    local = executor.kind == "local"
    step = EmbedStep(embedder, passages_path, out_dir, fingerprint, bar.update if local else None)

    def commit(unit: EmbedShard, row: dict, worker: WorkerStatus) -> None:
        done[unit.shard] = row
        if not local:
            bar.update(unit.end - unit.start)
            log.info("embedding shard %d/%d done (worker %d on %s)",
                     unit.shard + 1, n_shards, worker.worker, worker.node)  # fmt: skip
        # Rewrite the manifest after every shard so a crash loses at most the shards in flight.
        entries = [done[k] for k in sorted(done)]
        write_parquet_atomic(
            manifest_path, pa.Table.from_pylist(entries, schema=EMBEDDINGS_MANIFEST)
        )

    try:
        computed = executor.map(step, todo, commit)
    finally:
        bar.close()
    log.info("embeddings: %d shards computed, %d reused", computed, n_shards - computed)
    return EmbedResult(
        [out_dir / done[k]["path"] for k in range(n_shards)], embedder.dim, rows, computed
    )


def read_passage_texts(passages_path: Path, start: int, end: int) -> list[str]:
    """The embedded texts of rows [start, end), reading only the row groups that hold them
    (the corpus loader writes groups of at most 50k rows), so a worker reads about a shard."""
    pf = pq.ParquetFile(passages_path)
    texts: list[str] = []
    first = 0
    for g in range(pf.metadata.num_row_groups):
        n = pf.metadata.row_group(g).num_rows
        lo, hi = max(start, first), min(end, first + n)
        if lo < hi:
            tbl = pf.read_row_group(g, columns=["title", "text"]).slice(lo - first, hi - lo)
            titles, bodies = tbl.column(0).to_pylist(), tbl.column(1).to_pylist()
            texts += [passage_text(t, x) for t, x in zip(titles, bodies, strict=True)]
        first += n
        if first >= end:
            break
    return texts


def load_shards(paths: Sequence[Path]) -> list[np.ndarray]:
    """Memory-map embedding shards (no copy into RAM)."""
    return [np.load(p, mmap_mode="r") for p in paths]
