"""A run's shards through an executor: `GenerationStep` does one shard, the driver commits it.

The step (`process_shard` + writing the shard's files) runs wherever the executor puts it: in
this process (`executor.kind: local`) or on a Ray worker that loaded its generator and
retriever once. Workers only write shard files, atomically and under the shard's fixed name;
the driver appends the manifest line that commits them, so a shard redone after a lost worker
simply overwrites the same names and is committed once. Records depend only on the plan and
the per-shard seeds, never on which worker ran the shard.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from tqdm import tqdm

from pipeline.agents.prompts import load_few_shot, load_kg_shots
from pipeline.core.config import PipelineConfig
from pipeline.core.io import atomic_write_bytes, utcnow
from pipeline.executors.base import Executor, LocalExecutor, Progress, WorkerStatus
from pipeline.generation.shards import GenerationContext, process_shard, rows_by_cluster
from pipeline.kg.descriptions import Description
from pipeline.kg.entity_facts import EntityFacts
from pipeline.selector.run_plan import Plan, PlanItem
from pipeline.store.store import ShardFile, Store

log = logging.getLogger(__name__)

PROGRESS_FILE = "progress.json"


def shard_name(shard: int) -> str:
    return f"{shard:05d}"


@dataclass(frozen=True)
class ShardUnit:
    """One shard of the plan: what a worker needs besides its loaded step."""

    shard: int
    items: tuple[PlanItem, ...]

    @property
    def name(self) -> str:
        return shard_name(self.shard)


@dataclass(frozen=True)
class ShardDone:
    """What a worker hands back: the files it wrote (not yet committed), and a count."""

    files: list[ShardFile]
    records: int


@dataclass
class GenerationStep:
    """`process_shard` as an executor step. `setup()` builds the generator (the configured
    backend: transformers, vLLM on the worker's GPU, or an HTTP client), the retriever and the
    few-shot examples once per worker; only the settings travel to a worker."""

    cfg: PipelineConfig
    store: Store
    run_id: str
    run_date: dt.date
    index_dir: Path
    subgraphs: dict[str, dict] = field(default_factory=dict)
    # What the graph says of the plan's passage entities (two-passage tasks), and descriptions
    # that single out its entities (obfuscated subjects): read once by the driver.
    facts: EntityFacts | None = None
    descriptions: dict[str, list[Description]] = field(default_factory=dict)
    # The plan's passage rows by cluster, for the off-topic verifier control (computed by the
    # driver, so a worker never reads the plan back from the store).
    cluster_rows: dict[int, list[int]] | None = None
    context: GenerationContext | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "context": None}  # a worker loads its own models

    def setup(self) -> None:
        if self.context is not None:
            return
        from pipeline.llm import make_generator
        from pipeline.llm.cache import default_cache_path
        from pipeline.llm.chat import make_renderer
        from pipeline.retrieval import make_retriever

        cfg = self.cfg
        self.context = GenerationContext(
            cfg=cfg,
            store=self.store,
            generator=make_generator(cfg.llm, default_cache_path(cfg, self.store.root), cfg.seed),
            # the local backend loads the embedder itself; http queries the shared server
            retriever=make_retriever(cfg, self.index_dir),
            run_id=self.run_id,
            run_date=self.run_date,
            embedder_model=cfg.embedding.model,  # what Embedder.from_config loads
            shots=load_few_shot(cfg.resolve_path(cfg.generation.few_shot)),
            kg_shots=load_kg_shots(cfg.resolve_path(cfg.generation.kg_few_shot)),
            subgraphs=self.subgraphs,
            facts=self.facts,
            descriptions=self.descriptions,
            render=make_renderer(cfg),
            cluster_rows=self.cluster_rows,
        )

    def run(self, unit: ShardUnit) -> ShardDone:
        assert self.context is not None, "setup() first"
        out = process_shard(self.context, unit.shard, list(unit.items))
        files = [
            self.store.write_shard(table, self.run_id, self.run_date, unit.name, rows)
            for table, rows in out.tables().items()
        ]
        return ShardDone(files, len(out.curriculum))

    def close(self) -> None:
        pass  # engines stay loaded for the next run in this process (tests, benchmarks)


@dataclass
class GenerationReport:
    shards_planned: int
    shards_done_before: int
    shards_written: int
    # shards committed now, by worker (node:pid), for the log and the run's progress file
    shards_by_worker: dict[str, int] = field(default_factory=dict)


def plan_units(plan: Plan, shard_size: int) -> list[ShardUnit]:
    n = (len(plan.items) + shard_size - 1) // shard_size
    return [
        ShardUnit(s, tuple(plan.items[s * shard_size : (s + 1) * shard_size])) for s in range(n)
    ]


def _worker_name(w: WorkerStatus) -> str:
    return f"{w.node}:{w.pid}"


def run_generation(
    step: GenerationStep,
    plan: Plan,
    executor: Executor | None = None,
    on_shard: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> GenerationReport:
    """Process every shard of the plan that is not yet committed; commit each as it arrives.

    A stop request (or Ctrl-C) keeps every committed shard; a shard in flight when the
    process dies is never committed and is redone by the next run with the same run id.
    `runs/<id>/progress.json` shows, while it runs, the shards and records committed and what
    each worker is doing.
    """
    executor = executor or LocalExecutor()
    if step.cluster_rows is None:
        step.cluster_rows = rows_by_cluster(plan.items)
    store, run_id = step.store, step.run_id
    units = plan_units(plan, step.cfg.generation.shard_size)
    planned = {u.name for u in units}
    done = store.completed_shards(run_id) & planned
    todo = [u for u in units if u.name not in done]
    report = GenerationReport(len(units), len(done), 0)
    records = sum(len(u.items) for u in units if u.name in done)
    progress_path = store.run_dir(run_id) / PROGRESS_FILE
    # Records of this run, committed shard by shard (on a terminal; tqdm skips non-TTYs).
    bar = tqdm(total=len(plan.items), unit=" records", desc="generation", disable=None)
    bar.update(records)

    def write_progress(p: Progress) -> None:
        doc = {
            "run_id": run_id,
            "executor": executor.kind,
            "shards_planned": report.shards_planned,
            "shards_committed": report.shards_done_before + report.shards_written,
            "records_committed": records,
            "shards_by_worker": report.shards_by_worker,
            "workers": p.as_dict()["workers"],
            "updated_at": utcnow().isoformat(timespec="seconds"),
        }
        atomic_write_bytes(progress_path, orjson.dumps(doc, option=orjson.OPT_INDENT_2))

    def commit(unit: ShardUnit, result: ShardDone, worker: WorkerStatus) -> None:
        nonlocal records
        store.commit(run_id, unit.name, result.files)
        records += result.records
        report.shards_written += 1
        who = _worker_name(worker)
        report.shards_by_worker[who] = report.shards_by_worker.get(who, 0) + 1
        bar.update(result.records)
        if executor.kind != "local":
            log.info(
                "shard %s committed (worker %d on %s): %d/%d shards, %d records",
                unit.name, worker.worker, worker.node,
                report.shards_done_before + report.shards_written, report.shards_planned,
                records,
            )  # fmt: skip
        if on_shard:
            on_shard(unit.shard, len(units))

    try:
        executor.map(step, todo, commit, should_stop=should_stop, on_progress=write_progress)
    finally:
        bar.close()
    return report


__all__ = [
    "GenerationReport",
    "GenerationStep",
    "ShardDone",
    "ShardUnit",
    "plan_units",
    "run_generation",
    "shard_name",
]
