"""Without --run-id, the nightly command resumes the latest run of the same
configuration when it did not complete (a crash before midnight resumes after it), and starts
a new date-named run when it did. Run records are written here on a real store."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

from pipeline.core.io import utcnow
from pipeline.core.run_control import store_run_lock
from pipeline.run_context import choose_run
from pipeline.store.runs import default_run_id
from pipeline.store.store import Store
from schemas.tables import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parent.parent
YESTERDAY_2350 = (utcnow() - dt.timedelta(days=1)).replace(hour=23, minute=50)


def write_run(store: Store, run_id: str, config_hash: str, status: str, started: dt.datetime):
    store.write_run(
        {"run_id": run_id, "run_date": started.date(), "profile": "embedded",
         "config_hash": config_hash, "config_yaml": "", "started_at": started,
         "finished_at": None, "status": status, "shards_planned": 4, "shards_completed": 1,
         "schema_version": SCHEMA_VERSION}
    )  # fmt: skip


def test_latest_unfinished_run_of_the_same_config_is_resumed(tmp_cfg):
    cfg = tmp_cfg()
    store = Store.from_config(cfg)
    h = cfg.config_hash()
    crashed = default_run_id(cfg, YESTERDAY_2350.date())
    write_run(store, "older-done", h, "completed", YESTERDAY_2350 - dt.timedelta(days=3))
    write_run(store, crashed, h, "running", YESTERDAY_2350)  # killed before midnight
    # A later unfinished run of another configuration is not this one's.
    write_run(store, "other-config", "0" * 16, "stopped", YESTERDAY_2350 + dt.timedelta(hours=1))
    choice = choose_run(store, cfg)
    assert choice.run_id == crashed != default_run_id(cfg)
    msg = choice.message()
    assert msg.startswith(
        f"resuming unfinished run {crashed} (started {YESTERDAY_2350:%Y-%m-%d} 23:50 UTC, running"
    )
    assert "1/4 shards" in msg and "--run-id" in msg


def test_a_completed_latest_run_gives_a_new_run_named_by_today(tmp_cfg):
    cfg = tmp_cfg()
    store = Store.from_config(cfg)
    h = cfg.config_hash()
    assert choose_run(store, cfg).run_id == default_run_id(cfg)  # empty store
    write_run(store, "abandoned", h, "stopped", YESTERDAY_2350 - dt.timedelta(days=2))
    write_run(store, "finished", h, "completed", YESTERDAY_2350)
    choice = choose_run(store, cfg)
    assert choice.run_id == default_run_id(cfg) and choice.resumed is None
    assert choice.message() is None


def test_a_run_killed_between_generation_and_feedback_is_resumed(tmp_cfg):
    """Generation marks a run completed; its selector feedback comes after. Until that
    iteration's state is saved the run is not finished."""
    import pyarrow as pa

    from pipeline.core.io import write_parquet_atomic
    from pipeline.selector.run_plan import PLAN_FILE, selector_dirs
    from pipeline.selector.state import META_FILE
    from schemas.tables import RUN_PLAN

    cfg = tmp_cfg()
    store = Store.from_config(cfg)
    write_run(store, "generated", cfg.config_hash(), "completed", YESTERDAY_2350)
    row = {
        "run_id": "generated",
        "iteration": 1,
        "slot": 0,
        "passage_row": 0,
        "passage_id": "p",
        "cluster_id": 0,
        "task_type": "factual",
        "hop_count": 1,
        "subgraph_id": None,
    }
    table = pa.Table.from_pylist([row], schema=RUN_PLAN)
    write_parquet_atomic(store.run_dir("generated") / PLAN_FILE, table)
    choice = choose_run(store, cfg)
    assert choice.run_id == "generated" and "feedback pending" in choice.message()
    saved = selector_dirs(store.root)[1] / "iteration=0001"
    saved.mkdir(parents=True)
    (saved / META_FILE).write_text("{}")  # what marks an iteration's state as saved
    assert choose_run(store, cfg).run_id == default_run_id(cfg)


def test_explicit_run_id_wins(tmp_cfg):
    cfg = tmp_cfg()
    store = Store.from_config(cfg)
    write_run(store, "crashed", cfg.config_hash(), "failed", YESTERDAY_2350)
    choice = choose_run(store, cfg, "my-run")
    assert choice.run_id == "my-run" and choice.message() is None


def test_cli_picks_the_unfinished_run_and_announces_it_only_when_the_store_is_free(tmp_path):
    """Through `curriculum nightly`: the default picks the crashed run; with the store held by
    another run (the lock, held here, stops the command before Prefect or any model loads)
    nothing resumes, so the error names the chosen run and no "resuming" line is printed."""
    out = tmp_path / "out"
    sets = ["--set", f"store.out_dir={out}", "--set", f"store.catalog={out / 'c.duckdb'}"]
    from pipeline.core.config import load_config

    cfg = load_config(None, [s for s in sets if s != "--set"])
    crashed = default_run_id(cfg, YESTERDAY_2350.date())
    write_run(Store.from_config(cfg), crashed, cfg.config_hash(), "stopped", YESTERDAY_2350)
    with store_run_lock(out, "someone-else"):
        res = subprocess.run(
            [sys.executable, "-m", "cli", "nightly", *sets],
            cwd=ROOT,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert "resuming" not in res.stderr
    assert (
        lines[0].startswith("error: run 'someone-else'") and f"so {crashed!r} was not" in lines[0]
    )
