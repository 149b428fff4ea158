"""Run identity (the id of a new run) and the run record (resolved config + hash) kept with
every run. Which run an invocation works on is `pipeline/run_context.py:choose_run` (it asks
the selector whether a run's feedback is pending, and the store sits below the selector)."""

from __future__ import annotations

import datetime as dt

from pipeline.core.config import PipelineConfig
from pipeline.core.io import atomic_write_bytes, utcnow
from pipeline.store.store import Store
from schemas.tables import SCHEMA_VERSION


def default_run_id(cfg: PipelineConfig, date: dt.date | None = None) -> str:
    """The id of a new run: same day + same config = same run."""
    date = date or utcnow().date()
    return f"{date:%Y%m%d}-{cfg.profile}-{cfg.config_hash()[:8]}"


def generation_shards_done(store: Store, run_id: str) -> int:
    """Generation shards are numbered; stage shards (e.g. the corpus rejects) are named."""
    return sum(name.isdigit() for name in store.completed_shards(run_id, verify=False))


def start_run(store: Store, cfg: PipelineConfig, run_id: str, shards_planned: int) -> dict:
    """Create or resume the run record; a resumed run must have the same config hash."""
    prev = store.read_run(run_id)
    if prev and prev["config_hash"] != cfg.config_hash():
        raise ValueError(
            f"run {run_id!r} exists with config {prev['config_hash']}, not {cfg.config_hash()}; "
            "choose another --run-id or the original configuration"
        )
    run_dir = store.run_dir(run_id)
    atomic_write_bytes(run_dir / "config.yaml", cfg.to_yaml().encode(), within=store.root)
    atomic_write_bytes(
        run_dir / "config_hash", (cfg.config_hash() + "\n").encode(), within=store.root
    )
    record = {
        "run_id": run_id,
        "run_date": prev["run_date"] if prev else utcnow().date(),
        "profile": cfg.profile,
        "config_hash": cfg.config_hash(),
        "config_yaml": cfg.to_yaml(),
        "started_at": prev["started_at"] if prev else utcnow(),
        "finished_at": None,
        "status": "running",
        "shards_planned": shards_planned,
        "shards_completed": generation_shards_done(store, run_id),
        "schema_version": SCHEMA_VERSION,
    }
    store.write_run(record)
    return record


def finish_run(store: Store, record: dict, status: str) -> dict:
    record = {
        **record,
        "status": status,
        "finished_at": utcnow(),
        "shards_completed": generation_shards_done(store, record["run_id"]),
    }
    store.write_run(record)
    return record
