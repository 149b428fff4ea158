"""The index stage: corpus -> passages table -> embedding shards -> FAISS index.

The artifact directory is named by a fingerprint of everything that determines its content
(corpus bytes, embedder, prompts, factory), so an unchanged corpus and config reuse it and any
change builds a new one next to it.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from pipeline.core.config import PipelineConfig
from pipeline.core.contracts import read_shard
from pipeline.core.io import ArtifactDir, content_key, utcnow, write_parquet_atomic
from pipeline.executors.base import Executor
from pipeline.retrieval.corpus import CorpusFile, CorpusReject, load_corpus
from pipeline.retrieval.embedding import Embedder, corpus_fingerprint, embed_corpus
from pipeline.retrieval.faiss_index import INDEX_FILE, META_FILE, PASSAGES_FILE, build_faiss_index
from schemas.tables import REJECTS

REJECTS_FILE = "corpus_rejects.parquet"

log = logging.getLogger(__name__)


@dataclass
class IndexArtifacts:
    """The index stage's handle: what later stages read (the index folder, its passages table,
    its fingerprint) and the corpus it was built from, hashed once."""

    dir: Path
    passages_path: Path
    fingerprint: str
    passages: int
    reused: bool
    embedded_shards: int
    corpus: CorpusFile
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


def index_key(cfg: PipelineConfig, corpus_sha: str) -> str:
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
    return content_key(ident)


class IndexNotBuiltError(RuntimeError):
    pass


def index_dir(cfg: PipelineConfig, corpus: CorpusFile, out_dir: Path) -> ArtifactDir:
    """Where the index of this corpus and these settings lives (finished or not), under the
    store's root `out_dir` (`Store.root`, resolved once by whoever opened the store)."""
    return ArtifactDir(out_dir / "index" / index_key(cfg, corpus.sha256))


def find_index(cfg: PipelineConfig, corpus: CorpusFile, out_dir: Path) -> IndexArtifacts:
    """The finished index for the corpus and settings, without building anything."""
    art = index_dir(cfg, corpus, out_dir)
    out = art.path
    if not art.complete:
        raise IndexNotBuiltError(
            f"no finished index for this corpus and configuration at {out}; "
            "run `curriculum index build` first"
        )
    meta = json.loads((out / META_FILE).read_text())
    return IndexArtifacts(
        dir=out,
        passages_path=out / PASSAGES_FILE,
        fingerprint=art.key,
        passages=meta["count"],
        reused=True,
        embedded_shards=0,
        corpus=corpus,
        rejected=meta.get("rejected_lines", 0),
        repaired=meta.get("repaired_lines", {}),
    )


def ensure_index(
    cfg: PipelineConfig,
    embedder: Embedder | None = None,
    progress: bool = True,
    *,
    corpus: CorpusFile,
    out_dir: Path,
    executor: Executor | None = None,
) -> IndexArtifacts:
    """Build the index of `corpus` (the configured corpus, located and hashed once by the
    caller), or reuse the finished one. The embedding shards run on `executor` (this process
    by default); FAISS training and adding stay here."""
    art = index_dir(cfg, corpus, out_dir)
    out, key, corpus_path, corpus_sha = art.path, art.key, corpus.path, corpus.sha256
    if art.complete:
        log.info("index %s unchanged; reusing %s", key, out)
        return find_index(cfg, corpus, out_dir)
    passages_path = out / PASSAGES_FILE
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
    emb = embed_corpus(
        embedder, passages_path, out / "emb", cfg.embedding.shard_size, fp, progress, executor
    )
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
    art.mark_complete(INDEX_FILE + "\n")
    return IndexArtifacts(
        dir=out,
        passages_path=passages_path,
        fingerprint=key,
        passages=stats.passages,
        reused=False,
        embedded_shards=emb.embedded_shards,
        corpus=corpus,
        rejected=stats.rejected,
        repaired=stats.repaired,
    )
