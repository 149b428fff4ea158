"""Prefect flow: cluster the indexed corpus for the next selector iteration (K_t schedule)."""

from __future__ import annotations

from prefect import flow, get_run_logger, task

from flows.retry import RETRY
from pipeline.core import progress
from pipeline.core.config import PipelineConfig, load_config
from pipeline.retrieval.corpus import CorpusFile, locate_corpus
from pipeline.retrieval.index_build import ensure_index
from pipeline.selector import ClusterResult
from pipeline.selector.run_plan import clusters_for, selector_dirs
from pipeline.selector.state import latest_iteration
from pipeline.store.store import Store


@task(name="cluster", **RETRY)
def cluster_task(
    cfg: PipelineConfig, corpus: CorpusFile, store: Store, iteration: int
) -> ClusterResult:
    with progress.stage("index") as st:
        index = ensure_index(cfg, corpus=corpus, out_dir=store.root)
        st.finish(f"{index.passages:,} passages, {'reused' if index.reused else 'built'}")
    with progress.stage("clusters") as st:
        result = clusters_for(cfg, index.dir, iteration, store.root)
        st.finish(f"iteration {iteration}: K={result.k} over {result.n_rows:,} passages")
    return result


@flow(name="cluster-corpus", log_prints=True)
def cluster_corpus(
    profile: str = "configs/embedded.yaml",
    overrides: list[str] | None = None,
    iteration: int | None = None,
) -> ClusterResult:
    """Mini-batch k-means over the embedding shards (reused when nothing changed)."""
    cfg = load_config(profile, overrides or [])
    store = Store.from_config(cfg)
    _, state_dir = selector_dirs(store.root)
    t = iteration or (latest_iteration(state_dir) or 0) + 1
    result = cluster_task(cfg, locate_corpus(cfg), store, t)
    get_run_logger().info(
        "iteration %d: K=%d clusters over %d passages at %s", t, result.k, result.n_rows, result.dir
    )
    return result
