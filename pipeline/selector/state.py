"""Versioned selector state on disk: one directory per self-evolution iteration.

    <state_dir>/iteration=0003/
        selector_state.parquet   arm statistics of both bandits (SELECTOR_STATE contract)
        selector_usage.parquet   cumulative draws per passage (SELECTOR_USAGE contract)
        centroids.npy            the centroids the cluster arms refer to (for inheritance)
        state_meta.json          K_t, clustering key, seed, RNG state, counters; written last

A directory is assembled under a temporary name and renamed into place, so a reader sees either
the previous complete state of that iteration or the new one, never a mix; every past iteration
stays on disk for inspection and replay.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.contracts import read_shard
from pipeline.core.io import atomic_dir, utcnow, write_parquet_atomic
from pipeline.selector.bandit import UCB1Bandit
from schemas.tables import SCHEMA_VERSION, SELECTOR_STATE, SELECTOR_USAGE

STATE_FILE = "selector_state.parquet"
USAGE_FILE = "selector_usage.parquet"
CENTROIDS_FILE = "centroids.npy"
META_FILE = "state_meta.json"
BANDITS = ("cluster", "task_type")
_DIR_RE = re.compile(r"^iteration=(\d+)$")


def iteration_dir(state_dir: str | Path, iteration: int) -> Path:
    return Path(state_dir) / f"iteration={iteration:04d}"


def saved_iterations(state_dir: str | Path) -> list[int]:
    """Iterations with a complete saved state, ascending."""
    root = Path(state_dir)
    if not root.exists():
        return []
    out = []
    for p in root.iterdir():
        m = _DIR_RE.match(p.name)
        if m and (p / META_FILE).exists():
            out.append(int(m.group(1)))
    return sorted(out)


def latest_iteration(state_dir: str | Path, before: int | None = None) -> int | None:
    """The newest saved iteration (strictly before `before` when given), or None."""
    its = [i for i in saved_iterations(state_dir) if before is None or i < before]
    return its[-1] if its else None


@dataclass
class SelectorSnapshot:
    """Everything needed to continue (or replay from) the selector after one iteration."""

    iteration: int
    seed: int
    cluster_key: str
    cluster_dir: str
    rng_state: dict[str, Any]
    cluster: UCB1Bandit
    task_type: UCB1Bandit
    usage_rows: np.ndarray  # int64 passage rows with uses > 0
    usage_ids: pa.Array  # their passage ids
    usage_counts: np.ndarray  # int64
    centroids: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)  # counters for audit (draws, feedback)

    @property
    def k(self) -> int:
        return len(self.cluster.arms)


def _state_table(snap: SelectorSnapshot, now: dt.datetime) -> pa.Table:
    rng_json = json.dumps(snap.rng_state, sort_keys=True)
    rows = [
        {
            "iteration": snap.iteration,
            "bandit": b.name,
            "arm": arm,
            "pulls": float(n),
            "reward_sum": float(s),
            "k": snap.k,
            "rng_state": rng_json,
            "updated_at": now,
        }
        for b in (snap.cluster, snap.task_type)
        for arm, n, s in zip(b.arms, b.pulls, b.reward_sums, strict=True)
    ]
    return pa.Table.from_pylist(rows, schema=SELECTOR_STATE)


def _usage_table(snap: SelectorSnapshot) -> pa.Table:
    n = len(snap.usage_rows)
    return pa.Table.from_arrays(
        [
            pa.array(np.full(n, snap.iteration, dtype=np.int32)),
            pa.array(np.asarray(snap.usage_rows, dtype=np.int64)),
            snap.usage_ids.cast(pa.string()),
            pa.array(np.asarray(snap.usage_counts, dtype=np.int64)),
        ],
        schema=SELECTOR_USAGE,
    )


def write_snapshot(state_dir: str | Path, snap: SelectorSnapshot) -> Path:
    """Write the iteration's directory atomically (replacing an earlier save of it)."""
    target = iteration_dir(state_dir, snap.iteration)
    now = utcnow()
    meta = {
        "iteration": snap.iteration,
        "k": snap.k,
        "seed": snap.seed,
        "cluster_key": snap.cluster_key,
        "cluster_dir": snap.cluster_dir,
        "rng_state": snap.rng_state,
        "schema_version": SCHEMA_VERSION,
        "saved_at": now.isoformat(),
        **snap.info,
    }
    with atomic_dir(target) as tmp:
        write_parquet_atomic(tmp / STATE_FILE, _state_table(snap, now))
        write_parquet_atomic(tmp / USAGE_FILE, _usage_table(snap))
        np.save(tmp / CENTROIDS_FILE, np.asarray(snap.centroids, dtype=np.float32))
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", "utf-8")
    return target


def read_snapshot(state_dir: str | Path, iteration: int, beta: float = 1.0) -> SelectorSnapshot:
    """Load one saved iteration; arm order is as saved (cluster arms are "0".."K-1")."""
    d = iteration_dir(state_dir, iteration)
    if not (d / META_FILE).exists():
        raise FileNotFoundError(f"no saved selector state for iteration {iteration} in {d}")
    meta = json.loads((d / META_FILE).read_text("utf-8"))
    tbl = read_shard(d / STATE_FILE, "selector_state")
    bandits = {}
    for name in BANDITS:
        part = tbl.filter(pc.equal(tbl.column("bandit"), name))
        bandits[name] = UCB1Bandit(
            name,
            part.column("arm").to_pylist(),
            part.column("pulls").to_numpy().astype(np.float64),
            part.column("reward_sum").to_numpy().astype(np.float64),
            beta,
        )
    usage = read_shard(d / USAGE_FILE, "selector_usage")
    info_keys = set(meta) - {
        "iteration",
        "k",
        "seed",
        "cluster_key",
        "cluster_dir",
        "rng_state",
        "schema_version",
        "saved_at",
    }
    return SelectorSnapshot(
        iteration=int(meta["iteration"]),
        seed=int(meta["seed"]),
        cluster_key=meta["cluster_key"],
        cluster_dir=meta["cluster_dir"],
        rng_state=meta["rng_state"],
        cluster=bandits["cluster"],
        task_type=bandits["task_type"],
        usage_rows=usage.column("passage_row").to_numpy().astype(np.int64),
        usage_ids=usage.column("passage_id").combine_chunks(),
        usage_counts=usage.column("uses").to_numpy().astype(np.int64),
        centroids=np.load(d / CENTROIDS_FILE),
        info={k: meta[k] for k in sorted(info_keys)},
    )


__all__ = [
    "SelectorSnapshot",
    "iteration_dir",
    "latest_iteration",
    "read_snapshot",
    "saved_iterations",
    "write_snapshot",
]
