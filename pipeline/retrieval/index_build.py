"""The index stage: corpus -> passages table -> embedding shards -> FAISS index.

The artifact directory is named by a fingerprint of everything that determines its content
(corpus bytes, embedder, prompts, factory), so an unchanged corpus and config reuse it and any
change builds a new one next to it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from pipeline.catalog.store import read_shard, sha256_file, utcnow, write_parquet_atomic
from pipeline.retrieval.corpus import CorpusError, CorpusReject, load_corpus
from pipeline.retrieval.embedding import Embedder, corpus_fingerprint, embed_corpus
from pipeline.retrieval.faiss_index import INDEX_FILE, META_FILE, PASSAGES_FILE, build_faiss_index
from schemas.tables import REJECTS

REJECTS_FILE = "corpus_rejects.parquet"

log = logging.getLogger(__name__)


@dataclass
class IndexArtifacts:
    dir: Path
    passages_path: Path
    fingerprint: str
    passages: int
    reused: bool
    embedded_shards: int
    rejected: int = 0  # corpus lines rejected (bad lines, duplicate ids)
    repaired: dict[str, int] = field(default_factory=dict)  # lines kept after a fix-up, by kind

    def rejects(self) -> list[dict]:
        """Corpus lines rejected when this index was built (kept with the index)."""
        path = self.dir / REJECTS_FILE
        return read_shard(path, "rejects").to_pylist() if path.exists() else []


def _save_rejects(path: Path, rejects: list[CorpusReject], key: str) -> None:
    now = utcnow()
    rows = [
        {
            "run_id": f"index-{key}",
            "stage": "corpus",
            "source_file": r.source_file,
            "source_line": r.source_line,
            "record_key": r.record_key,
            "reason": r.reason,
            "raw": r.raw,
            "created_at": now,
        }
        for r in rejects
    ]
    write_parquet_atomic(path, pa.Table.from_pylist(rows, schema=REJECTS))


def index_key(cfg, corpus_sha: str) -> str:
    e, i = cfg.embedding, cfg.index
    ident = {
        "corpus_sha256": corpus_sha,
        "corpus_format": cfg.corpus.format,
        "model": e.model,
        "passage_prompt": e.passage_prompt,
        "query_prompt": e.query_prompt,
        "max_length": e.max_length,
        "normalize": e.normalize,
        "factory": i.factory,
        "ivf_threshold": i.ivf_threshold,
        "train_per_list": i.train_per_list,
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


class IndexNotBuiltError(RuntimeError):
    pass


def _locate(cfg) -> tuple[Path, Path, str, str]:
    corpus_path = cfg.resolve_path(cfg.corpus.path)
    if not corpus_path.exists():
        raise CorpusError(f"corpus not found: {corpus_path} (corpus.path)")
    if not corpus_path.is_file():
        raise CorpusError(f"{corpus_path}: is a directory; corpus.path must name a file")
    corpus_sha = sha256_file(corpus_path)
    key = index_key(cfg, corpus_sha)
    return corpus_path, cfg.resolve_path(cfg.store.out_dir) / "index" / key, key, corpus_sha


def find_index(cfg) -> IndexArtifacts:
    """The finished index for the configured corpus and settings, without building anything."""
    _, out, key, _ = _locate(cfg)
    if not (out / ".complete").exists():
        raise IndexNotBuiltError(
            f"no finished index for this corpus and configuration at {out}; "
            "run `curriculum index build` first"
        )
    meta = json.loads((out / META_FILE).read_text())
    return IndexArtifacts(
        out,
        out / PASSAGES_FILE,
        key,
        meta["count"],
        True,
        0,
        meta.get("rejected_lines", 0),
        meta.get("repaired_lines", {}),
    )


def ensure_index(cfg, embedder: Embedder | None = None, progress: bool = True) -> IndexArtifacts:
    """Build the index for the configured corpus, or reuse the finished one."""
    corpus_path, out, key, corpus_sha = _locate(cfg)
    passages_path = out / PASSAGES_FILE
    if (out / ".complete").exists():
        log.info("index %s unchanged; reusing %s", key, out)
        return find_index(cfg)
    fresh = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        stats, rejects = load_corpus(
            corpus_path,
            passages_path,
            cfg.corpus.format,
            cfg.corpus.on_error,
            cfg.corpus.error_budget,
        )
    except BaseException:
        if fresh:  # leave no empty index directory behind a corpus that did not load
            with contextlib.suppress(OSError):
                out.rmdir()
        raise
    if stats.repaired:
        log.info("corpus %s: lines kept after a fix-up: %s", corpus_path, stats.repaired)
    # Persist the rejects before the index is marked complete so a crash never loses them.
    _save_rejects(out / REJECTS_FILE, rejects, key)
    embedder = embedder or Embedder.from_config(cfg)
    fp = corpus_fingerprint(passages_path)
    emb = embed_corpus(embedder, passages_path, out / "emb", cfg.embedding.shard_size, fp, progress)
    meta = {
        "model": embedder.model_ref,
        "query_prompt": embedder.query_prompt,
        "passage_prompt": embedder.passage_prompt,
        "normalized": embedder.normalize,
        "corpus_path": str(corpus_path),
        "corpus_sha256": corpus_sha,
        "corpus_fingerprint": fp,
        "fingerprint": key,
        "rejected_lines": stats.rejected,
        "duplicate_ids": stats.duplicates,
        "repaired_lines": stats.repaired,
    }
    build_faiss_index(
        emb.shards,
        emb.dim,
        cfg.index.factory,
        out,
        meta,
        cfg.index.threads,
        cfg.index.train_per_list,
        cfg.seed,
        cfg.index.ivf_threshold,
    )
    (out / ".complete").write_text(INDEX_FILE + "\n")
    return IndexArtifacts(
        out,
        passages_path,
        key,
        stats.passages,
        False,
        emb.embedded_shards,
        stats.rejected,
        stats.repaired,
    )
