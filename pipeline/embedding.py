"""Passage/query embedding with sentence-transformers, written as fixed-size resumable shards.

Shards are memory-mapped `.npy` files listed in a manifest; a rebuild skips every shard whose
file exists with the recorded checksum, so an interrupted build resumes at the first gap and
peak memory is one shard regardless of corpus size.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.models import resolve_embedder
from pipeline.store import read_shard, sha256_file, write_parquet_atomic
from schemas.tables import EMBEDDINGS_MANIFEST

log = logging.getLogger(__name__)


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
    ) -> None:
        from sentence_transformers import SentenceTransformer

        self.model_ref = model
        self.query_prompt = query_prompt
        self.passage_prompt = passage_prompt
        self.batch_size = batch_size
        self.normalize = normalize
        self.model = SentenceTransformer(resolve_embedder(model), device=device)
        self.model.max_seq_length = max_length
        self.dim = int(self.model.get_embedding_dimension())

    @classmethod
    def from_config(cls, cfg) -> Embedder:
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

    def _encode(self, texts: Sequence[str], prompt: str, progress: bool) -> np.ndarray:
        vecs = self.model.encode(
            list(texts),
            prompt=prompt or None,
            batch_size=self.batch_size,
            normalize_embeddings=self.normalize,
            convert_to_numpy=True,
            show_progress_bar=progress,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        return self._encode(queries, self.query_prompt, progress=False)

    def encode_passages(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        return self._encode(texts, self.passage_prompt, progress=progress)


def passage_text(title: str, text: str) -> str:
    """What gets embedded for a passage: title and body, as in FlashRAG's wiki-18 index."""
    return f"{title}\n{text}" if title else text


def corpus_fingerprint(passages_path: Path) -> str:
    """Content hash of the passages table: ids, titles and texts in order."""
    h = hashlib.sha256()
    pf = pq.ParquetFile(passages_path)
    for batch in pf.iter_batches(columns=["id", "title", "text"], batch_size=65_536):
        for col in batch.columns:
            for v in col.to_pylist():
                h.update(v.encode("utf-8"))
                h.update(b"\x00")
    return h.hexdigest()[:16]


@dataclass
class EmbedResult:
    shards: list[Path]
    dim: int
    rows: int
    embedded_shards: int  # how many shards were computed in this call (rest reused)


def embed_corpus(
    embedder: Embedder,
    passages_path: Path,
    out_dir: Path,
    shard_size: int,
    fingerprint: str,
    progress: bool = True,
) -> EmbedResult:
    """Embed the passages table into shard files under out_dir, resuming finished shards."""
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
    computed = 0
    for shard, start, end, texts in _shard_texts(passages_path, shard_size, skip=set(done)):
        log.info("embedding shard %d/%d (rows %d-%d)", shard + 1, n_shards, start, end)
        vecs = embedder.encode_passages(texts, progress=progress)
        name = f"emb-{shard:05d}.npy"
        tmp = out_dir / f".{name}.tmp-{os.getpid()}.npy"
        np.save(tmp, vecs)
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, out_dir / name)
        done[shard] = {
            "shard": shard,
            "path": name,
            "row_start": start,
            "row_end": end,
            "dim": int(vecs.shape[1]),
            "model": embedder.model_ref,
            "passage_prompt": embedder.passage_prompt,
            "normalized": embedder.normalize,
            "sha256": sha256_file(out_dir / name),
            "corpus_fingerprint": fingerprint,
            "created_at": dt.datetime.now(dt.UTC),
        }
        computed += 1
        # Rewrite the manifest after every shard so a crash loses at most the shard in flight.
        entries = [done[k] for k in sorted(done)]
        write_parquet_atomic(
            manifest_path, pa.Table.from_pylist(entries, schema=EMBEDDINGS_MANIFEST)
        )
    return EmbedResult(
        [out_dir / done[k]["path"] for k in range(n_shards)], embedder.dim, rows, computed
    )


def _shard_texts(passages_path: Path, shard_size: int, skip: set[int]):
    """Stream (shard, start, end, texts) in exact shard_size chunks; one shard in memory."""
    pf = pq.ParquetFile(passages_path)
    buf: list[str] = []
    start = 0
    for batch in pf.iter_batches(columns=["title", "text"], batch_size=min(shard_size, 65_536)):
        titles, bodies = batch.column(0).to_pylist(), batch.column(1).to_pylist()
        for t, x in zip(titles, bodies, strict=True):
            shard = (start + len(buf)) // shard_size
            buf.append("" if shard in skip else passage_text(t, x))
            if len(buf) == shard_size:
                if shard not in skip:
                    yield shard, start, start + len(buf), buf
                start += len(buf)
                buf = []
    if buf:
        shard = start // shard_size
        if shard not in skip:
            yield shard, start, start + len(buf), buf


def load_shards(paths: Sequence[Path]) -> list[np.ndarray]:
    """Memory-map embedding shards (no copy into RAM)."""
    return [np.load(p, mmap_mode="r") for p in paths]
