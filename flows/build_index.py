"""Prefect flow for the index stage alone (the nightly flow runs the same work first, in its
index stage): the corpus is located and hashed once, and the store opened once, here, and both
are handed on."""

from __future__ import annotations

from prefect import flow, get_run_logger, task

from flows.retry import RETRY
from pipeline.core import progress
from pipeline.core.config import PipelineConfig, load_config
from pipeline.executors import open_executor
from pipeline.retrieval.corpus import CorpusFile, locate_corpus
from pipeline.retrieval.index_build import IndexArtifacts, ensure_index
from pipeline.store.store import Store


@task(name="build-index", **RETRY)
def build_index_task(cfg: PipelineConfig, corpus: CorpusFile, store: Store) -> IndexArtifacts:
    # The embedding shards run on the configured executor (Ray workers with executor.kind=ray).
    with open_executor(cfg) as executor, progress.stage("index") as st:
        art = ensure_index(cfg, corpus=corpus, out_dir=store.root, executor=executor)
        st.finish(f"{art.passages:,} passages, {'reused' if art.reused else 'built'}")
    return art


@flow(name="build-index", log_prints=True)
def build_index(
    profile: str = "configs/embedded.yaml", overrides: list[str] | None = None
) -> IndexArtifacts:
    """Corpus -> passages -> embedding shards -> FAISS; a no-op when nothing changed."""
    cfg = load_config(profile, overrides or [])
    art = build_index_task(cfg, locate_corpus(cfg), Store.from_config(cfg))
    get_run_logger().info(
        "index %s at %s: %d passages, %s (%d embedding shards computed)",
        art.fingerprint,
        art.dir,
        art.passages,
        "reused, nothing to do" if art.reused else "built",
        art.embedded_shards,
    )
    return art
