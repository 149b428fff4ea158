"""A run's plan: the (passage, cluster, task type, hop count) of every proposer call.

The selector draws the plan once when a run starts; it is stored in the run directory, so a
resumed run regenerates exactly the same slots and the feedback step knows what was drawn.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from pipeline.core.config import PipelineConfig
from pipeline.core.contracts import read_shard
from pipeline.core.io import write_parquet_atomic
from pipeline.selector import (
    ClusterResult,
    Feedback,
    Selector,
    cluster_count,
    cluster_index,
    run_score,
    saved_iterations,
)
from pipeline.selector.state import latest_iteration
from pipeline.store.store import Store
from schemas.tables import RUN_PLAN

log = logging.getLogger(__name__)

PLAN_FILE = "plan.parquet"


@dataclass(frozen=True)
class PlanItem:
    slot: int
    passage_row: int
    passage_id: str
    cluster_id: int
    task_type: str
    hop_count: int
    subgraph_id: str | None = None


@dataclass(frozen=True)
class Plan:
    run_id: str
    iteration: int
    items: list[PlanItem]


def selector_dirs(out_dir: Path) -> tuple[Path, Path]:
    """(clusterings, per-iteration state) under the store's root `out_dir` (`Store.root`)."""
    root = out_dir / "selector"
    return root / "clusters", root / "state"


def clusters_for(
    cfg: PipelineConfig, index_dir: Path, iteration: int, out_dir: Path
) -> ClusterResult:
    """K_t = K0 + floor(alpha * (t - 1)) clusters for iteration t (t = 1, 2, ...); reused when
    the embeddings and K are unchanged."""
    k = cluster_count(cfg.selector.k0, cfg.selector.alpha, iteration - 1)
    clusters_dir, _ = selector_dirs(out_dir)
    return cluster_index(index_dir, k, cfg.seed, clusters_dir, iteration=iteration)


def load_plan(store: Store, run_id: str) -> Plan | None:
    path = store.run_dir(run_id) / PLAN_FILE
    if not path.exists():
        return None
    rows = read_shard(path, "run_plan").to_pylist()
    items = [
        PlanItem(
            r["slot"],
            r["passage_row"],
            r["passage_id"],
            r["cluster_id"],
            r["task_type"],
            r["hop_count"],
            r["subgraph_id"],
        )
        for r in rows
    ]
    return Plan(run_id, rows[0]["iteration"], items)


def subgraph_links(subgraphs: list[dict]) -> dict[str, str]:
    """passage id -> the largest subgraph (most nodes) with a path node linked to it.

    Subgraphs arrive ordered by node count, descending (the curriculum heuristic)."""
    links: dict[str, str] = {}
    for sg in subgraphs:
        for node_passages in sg["passage_ids"] or []:
            for pid in node_passages or []:
                links.setdefault(pid, sg["subgraph_id"])
    return links


def make_plan(
    cfg: PipelineConfig,
    store: Store,
    index_dir: Path,
    run_id: str,
    subgraphs: list[dict] | None = None,
) -> Plan:
    """The run's plan: read it back on resume, otherwise draw it from the selector and attach
    the KG subgraph linked to each drawn passage, if any."""
    plan = load_plan(store, run_id)
    if plan is not None:
        return plan
    _, state_dir = selector_dirs(store.root)
    iteration = (latest_iteration(state_dir) or 0) + 1
    clusters = clusters_for(cfg, index_dir, iteration, store.root)
    selector = Selector.load_or_init(state_dir, iteration, clusters, cfg.selector, cfg.seed)
    draws = selector.draw(cfg.generation.num_sources)
    links = subgraph_links(subgraphs or [])
    items = [
        PlanItem(
            i,
            d.passage_row,
            d.passage_id,
            d.cluster_id,
            d.task_type,
            d.hop_count,
            links.get(d.passage_id),
        )
        for i, d in enumerate(draws)
    ]
    rows = [{"run_id": run_id, "iteration": iteration, **vars(it)} for it in items]
    write_parquet_atomic(
        store.run_dir(run_id) / PLAN_FILE, pa.Table.from_pylist(rows, schema=RUN_PLAN)
    )
    log.info(
        "run %s: iteration %d, %d draws over K=%d clusters",
        run_id,
        iteration,
        len(items),
        selector.k,
    )
    return Plan(run_id, iteration, items)


def feedback_pending(store: Store, run_id: str) -> bool:
    """The run was planned by the selector and its iteration's feedback is not saved yet: a
    run killed between generation and feedback is not finished."""
    plan = load_plan(store, run_id)
    _, state_dir = selector_dirs(store.root)
    return plan is not None and plan.iteration not in saved_iterations(state_dir)


def apply_feedback(
    cfg: PipelineConfig,
    store: Store,
    index_dir: Path,
    plan: Plan,
    records: list[dict],
    solver_mean: float | None,
) -> bool:
    """Feed a finished run back into the bandits and save the selector as its iteration.

    The selector of the plan's iteration is rebuilt from the state saved before it and replays
    the plan's draws (so document usage and the RNG advance exactly as when it was drawn), then
    learns from the run's valid records. Returns False when the iteration was already saved.
    """
    _, state_dir = selector_dirs(store.root)
    if plan.iteration in saved_iterations(state_dir):
        return False
    clusters = clusters_for(cfg, index_dir, plan.iteration, store.root)
    selector = Selector.load_or_init(state_dir, plan.iteration, clusters, cfg.selector, cfg.seed)
    replay = selector.draw(len(plan.items))
    drawn = [(d.passage_row, d.cluster_id, d.task_type, d.hop_count) for d in replay]
    planned = [(i.passage_row, i.cluster_id, i.task_type, i.hop_count) for i in plan.items]
    if drawn != planned:
        raise RuntimeError(
            f"selector state changed since run {plan.run_id} was planned (iteration "
            f"{plan.iteration}); refusing to apply its feedback to a different state"
        )
    valid = [r for r in records if r["is_valid"]]
    proposer_mean = sum(r["proposer_reward"] for r in records) / max(len(records), 1)
    selector.update([Feedback.from_record(r) for r in valid], run_score(proposer_mean, solver_mean))
    selector.save(state_dir)
    return True
