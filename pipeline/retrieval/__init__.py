"""Retrieval: corpus, embeddings, the FAISS index, and the retriever backends behind one
interface (`base.RetrieverBackend`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.core.config import PipelineConfig
    from pipeline.retrieval.base import RetrieverBackend
    from pipeline.retrieval.embedding import Embedder


def make_retriever(
    cfg: PipelineConfig, index_dir: Path, embedder: Embedder | None = None
) -> RetrieverBackend:
    """The configured backend (`retrieval.backend`) over the index in `index_dir`.

    `local` loads the FAISS index in this process (with `embedder`, or one built from the
    config); `http` queries the shared server at `retrieval.url` and loads no model or index.
    """
    if cfg.retrieval.backend == "http":
        from pipeline.retrieval.http_retriever import HTTPRetriever

        return HTTPRetriever.from_config(cfg, index_dir)
    from pipeline.retrieval.embedding import Embedder
    from pipeline.retrieval.faiss_index import Retriever

    if embedder is None:
        embedder = Embedder.from_config(cfg)
    return Retriever(index_dir, embedder, cfg.index.nprobe, threads=cfg.index.threads)


__all__ = ["make_retriever"]
