"""Prefect flow for the knowledge-graph stage: dump ingest, then LLM-guided subgraphs."""

from __future__ import annotations

from prefect import flow, get_run_logger, task

from flows.retry import RETRY
from pipeline.core import progress
from pipeline.core.config import PipelineConfig, load_config
from pipeline.kg import extract as kg
from pipeline.llm import usage
from pipeline.retrieval.corpus import CorpusFile, locate_corpus
from pipeline.stages import TokenRate
from pipeline.store.store import Store


@task(name="kg-ingest", **RETRY)
def ingest_task(cfg: PipelineConfig, store: Store) -> kg.IngestReport:
    with progress.stage("kg ingest") as st:
        rep = kg.ingest(cfg, kg.KGInputs.from_config(cfg).dump, store.root)
        st.finish(f"{rep.items:,} items, {rep.edges:,} edges, {'reused' if rep.reused else 'read'}")
    return rep


@task(name="kg-extract", **RETRY)
def extract_task(cfg: PipelineConfig, corpus: CorpusFile, store: Store) -> kg.ExtractResult:
    # No index here: the KG parses the corpus into its own passages table (cached by its sha).
    with usage.metered() as meter, progress.stage("kg") as st:
        st.live = TokenRate(meter)
        res = kg.extract(cfg, corpus, store.root, kg.passages_path(cfg, corpus, store.root))
        how = "reused" if res.reused else "extracted"
        st.finish(f"{res.subgraphs} subgraphs from {res.seeds} seeds, {how}")
    return res


@flow(name="extract-subgraphs", log_prints=True)
def extract_subgraphs(
    profile: str = "configs/embedded.yaml", overrides: list[str] | None = None
) -> kg.ExtractResult:
    """Dump -> entities/edges (reused when unchanged) -> subgraphs + Figure-5 statistics."""
    cfg = load_config(profile, overrides or [])
    log = get_run_logger()
    store = Store.from_config(cfg)
    rep = ingest_task(cfg, store)
    log.info(
        "dump %s: %d items, %d properties, %d edges, %d rejects (%d bad lines, %d duplicate "
        "entities, %d repaired lines) (%s)",
        rep.source_file,
        rep.items,
        rep.properties,
        rep.edges,
        rep.reject_rows,
        rep.rejects,
        rep.duplicates,
        rep.repaired,
        "reused" if rep.reused else f"{rep.seconds:.1f}s",
    )
    res = extract_task(cfg, locate_corpus(cfg), store)
    log.info(
        "%d subgraphs from %d seeds at %s (%s)\n%s",
        res.subgraphs,
        res.seeds,
        res.dir,
        "reused" if res.reused else "extracted",
        kg.format_stats(res.stats),
    )
    return res
