"""The corpus selector: which (cluster, task type, document, hop count) the proposer gets next.

EVE-Agent §3.3 / appendix F. Two UCB1 bandits (clusters, task types) pick arms, a document is
drawn inside the chosen cluster with P(d | k) ~ ||z_d - mu_k|| / (1 + u_d), and the hop count
comes from a fixed pmf. The bandits learn only between iterations (`update`), from the samples
of the finished iteration; document usage u_d grows with every draw.

One iteration t of the nightly flow:
    sel = Selector.load_or_init(state_dir, t, clusters, cfg.selector, seed)  # state of t-1
    draws = sel.draw(n)            ... generate ...
    sel.update(feedback, run_score)
    sel.save(state_dir)            # -> <state_dir>/iteration=000t/
Rerunning t loads t-1 again and reproduces the same draws (the RNG state is part of the state).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.selector.bandit import UCB1Bandit
from pipeline.selector.clustering import ClusterResult
from pipeline.selector.feedback import sample_rewards
from pipeline.selector.sampling import FenwickSampler, doc_scores, hop_pmf
from pipeline.selector.state import (
    SelectorSnapshot,
    latest_iteration,
    read_snapshot,
    write_snapshot,
)
from pipeline.selector.ucb import nearest_parents

if TYPE_CHECKING:
    from pipeline.core.config import SelectorConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Draw:
    """One planned proposer call."""

    cluster_id: int
    task_type: str
    passage_row: int
    passage_id: str
    hop_count: int


@dataclass(frozen=True)
class Feedback:
    """One generated sample of the finished iteration, tagged with the arms that produced it.

    `prompt` is the string whose duplicates in the batch lower Q_i; None means the question
    (the solver-training prompt of the sample, as in the paper).
    """

    cluster_id: int
    task_type: str
    question: str
    answer: str
    prompt: str | None = None

    @classmethod
    def from_record(cls, row: Mapping[str, Any]) -> Feedback:
        """From a curriculum row (cluster_id, task_type, question, answer)."""
        return cls(
            int(row["cluster_id"]),
            str(row["task_type"]),
            row.get("question") or "",
            row.get("answer") or "",
        )


@dataclass(frozen=True)
class FeedbackResult:
    """Per-sample rewards of one update, for logging and audit."""

    sample_rewards: np.ndarray  # r_i = R_run * Q_i
    cluster_rewards: np.ndarray  # R_sel fed to the cluster bandit
    task_rewards: np.ndarray  # R_sel fed to the task-type bandit


def _restore_rng(state: Mapping[str, Any]) -> np.random.Generator:
    bit_gen = getattr(np.random, state["bit_generator"])()
    bit_gen.state = dict(state)
    return np.random.Generator(bit_gen)


def _cluster_arms(k: int) -> list[str]:
    return [str(i) for i in range(k)]


class Selector:
    """Cluster and task-type UCB1 bandits plus the in-cluster document draw."""

    def __init__(
        self,
        clusters: ClusterResult,
        cfg: SelectorConfig,
        seed: int,
        iteration: int,
        cluster_bandit: UCB1Bandit,
        task_bandit: UCB1Bandit,
        uses: np.ndarray,
        rng: np.random.Generator,
        resumed_from: int | None = None,
    ) -> None:
        if len(cluster_bandit.arms) != clusters.k:
            raise ValueError(f"{len(cluster_bandit.arms)} cluster arms for K={clusters.k}")
        if len(uses) != clusters.n_rows:
            raise ValueError(f"usage for {len(uses)} passages, corpus has {clusters.n_rows}")
        self.clusters = clusters
        self.cfg = cfg
        self.seed = seed
        self.iteration = iteration
        self.cluster_bandit = cluster_bandit
        self.task_bandit = task_bandit
        self.uses = np.asarray(uses, dtype=np.int64)
        self.rng = rng
        self.resumed_from = resumed_from
        self.draws_made = 0
        self.feedback_rows = 0
        self._order, self._starts = clusters.members()
        self._hops, self._hop_p = hop_pmf(cfg.hop_weights)
        self._samplers: dict[int, FenwickSampler | None] = {}  # None: all-zero -> uniform

    # ---- construction -------------------------------------------------------------------

    @classmethod
    def fresh(
        cls, clusters: ClusterResult, cfg: SelectorConfig, seed: int, iteration: int = 0
    ) -> Selector:
        """Every arm with one virtual pull, no usage, RNG seeded from `seed`."""
        return cls(
            clusters,
            cfg,
            seed,
            iteration,
            UCB1Bandit.fresh("cluster", _cluster_arms(clusters.k), cfg.beta),
            UCB1Bandit.fresh("task_type", list(cfg.task_types), cfg.beta),
            np.zeros(clusters.n_rows, dtype=np.int64),
            np.random.default_rng(seed),
        )

    @classmethod
    def load_or_init(
        cls,
        state_dir: str | Path,
        iteration: int,
        clusters: ClusterResult,
        cfg: SelectorConfig,
        seed: int,
    ) -> Selector:
        """The selector for `iteration`: continues from the newest state saved before it, or
        starts fresh when there is none. A changed clustering inherits the cluster statistics
        (each new centroid's nearest old centroid is its parent, see `ucb.inherit_split`)."""
        prev = latest_iteration(state_dir, before=iteration)
        if prev is None:
            log.info("selector: no saved state before iteration %d; starting fresh", iteration)
            return cls.fresh(clusters, cfg, seed, iteration)
        snap = read_snapshot(state_dir, prev, cfg.beta)
        log.info("selector: iteration %d continues from saved iteration %d", iteration, prev)
        return cls.from_snapshot(snap, clusters, cfg, iteration)

    @classmethod
    def load(
        cls, state_dir: str | Path, iteration: int, clusters: ClusterResult, cfg: SelectorConfig
    ) -> Selector:
        """Exactly the state saved after `iteration` (for inspection)."""
        return cls.from_snapshot(read_snapshot(state_dir, iteration, cfg.beta), clusters, cfg)

    @classmethod
    def from_snapshot(
        cls,
        snap: SelectorSnapshot,
        clusters: ClusterResult,
        cfg: SelectorConfig,
        iteration: int | None = None,
    ) -> Selector:
        cluster = snap.cluster
        cluster.beta = cfg.beta
        if cluster.arms != _cluster_arms(snap.k):
            raise ValueError(f"saved iteration {snap.iteration}: cluster arms are not 0..K-1")
        if snap.cluster_key != clusters.key or snap.k != clusters.k:
            if snap.centroids.shape[1:] != clusters.centroids.shape[1:]:
                log.warning(
                    "selector: embedding dimension changed (%s -> %s); cluster arms reset",
                    snap.centroids.shape,
                    clusters.centroids.shape,
                )
                cluster = UCB1Bandit.fresh("cluster", _cluster_arms(clusters.k), cfg.beta)
            else:
                parents = nearest_parents(snap.centroids, clusters.centroids)
                cluster = cluster.split(parents, _cluster_arms(clusters.k))
                log.info(
                    "selector: K %d -> %d, cluster statistics inherited by nearest centroid",
                    snap.k,
                    clusters.k,
                )
        task = snap.task_type.with_arms(list(cfg.task_types))
        return cls(
            clusters,
            cfg,
            snap.seed,
            snap.iteration if iteration is None else iteration,
            cluster,
            task,
            _map_usage(snap, clusters),
            _restore_rng(snap.rng_state),
            resumed_from=snap.iteration,
        )

    # ---- drawing ------------------------------------------------------------------------

    @property
    def k(self) -> int:
        return self.clusters.k

    @property
    def task_types(self) -> list[str]:
        return self.task_bandit.arms

    def draw(self, n: int) -> list[Draw]:
        """n (cluster, task type, document, hop count) draws.

        Clusters and task types: argmax of U for n = 1, else i.i.d. from softmax(U / std U);
        empty clusters are never chosen. Hop counts: i.i.d. from the hop pmf. Documents: one
        at a time, each draw raising u_d before the next, so repeated draws from a cluster
        spread over its documents.
        """
        c, t, rows, h = self.draw_arrays(n)
        ids = self.clusters.passage_ids.take(pa.array(rows)).to_pylist() if n else []
        names = self.task_bandit.arms
        return [
            Draw(int(ci), names[ti], int(r), pid, int(hi))
            for ci, ti, r, pid, hi in zip(
                c.tolist(), t.tolist(), rows.tolist(), ids, h.tolist(), strict=True
            )
        ]

    def draw_arrays(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """`draw` as arrays: (cluster ids, task-type indices, passage rows, hop counts)."""
        nonempty = np.diff(self._starts) > 0
        clusters = self.cluster_bandit.pick(n, self.rng, nonempty)
        tasks = self.task_bandit.pick(n, self.rng)
        hops = self.rng.choice(self._hops, size=n, p=self._hop_p).astype(np.int64)
        u = self.rng.random(n)
        rows = np.empty(n, dtype=np.int64)
        for i, (ci, ui) in enumerate(zip(clusters.tolist(), u.tolist(), strict=True)):
            rows[i] = self._draw_document(ci, ui)
        self.draws_made += n
        return clusters, tasks, rows, hops

    def _sampler(self, cluster: int) -> FenwickSampler | None:
        if cluster not in self._samplers:
            members = self._order[self._starts[cluster] : self._starts[cluster + 1]]
            w = doc_scores(self.clusters.distances[members], self.uses[members])
            self._samplers[cluster] = FenwickSampler(w) if w.sum() > 0 else None
        return self._samplers[cluster]

    def _draw_document(self, cluster: int, u: float) -> int:
        start, stop = int(self._starts[cluster]), int(self._starts[cluster + 1])
        sampler = self._sampler(cluster)
        if sampler is None:  # every score is zero: uniform over the cluster
            local = min(int(u * (stop - start)), stop - start - 1)
        else:
            local = sampler.sample(u)
        row = int(self._order[start + local])
        self.uses[row] += 1
        if sampler is not None:
            sampler.set(local, float(self.clusters.distances[row]) / (1.0 + self.uses[row]))
        return row

    # ---- feedback -----------------------------------------------------------------------

    def update(self, feedback: Sequence[Feedback], run_score: float) -> FeedbackResult:
        """Feed one finished iteration's samples back to both bandits (appendix F).

        Call once per iteration with the whole batch: duplicates D_i are counted within the
        call and every sample sees the pre-update counts and means. `run_score` is R_run in
        [0, 1] (see `feedback.run_score`). Pass the samples that became solver-training data.
        """
        empty = np.zeros(0)
        if not feedback:
            return FeedbackResult(empty, empty, empty)
        clusters = np.array([f.cluster_id for f in feedback], dtype=np.int64)
        where = {name: i for i, name in enumerate(self.task_bandit.arms)}
        unknown = sorted({f.task_type for f in feedback} - set(where))
        if unknown:
            raise ValueError(f"feedback names unknown task types {unknown}")
        tasks = np.array([where[f.task_type] for f in feedback], dtype=np.int64)
        r = sample_rewards(
            [f.question for f in feedback],
            [f.answer for f in feedback],
            run_score,
            [f.question if f.prompt is None else f.prompt for f in feedback],
        )
        r_cluster = self.cluster_bandit.feedback(clusters, r)
        r_task = self.task_bandit.feedback(tasks, r)
        self.feedback_rows += len(feedback)
        return FeedbackResult(r, r_cluster, r_task)

    # ---- persistence --------------------------------------------------------------------

    def snapshot(self) -> SelectorSnapshot:
        used = np.flatnonzero(self.uses)
        return SelectorSnapshot(
            iteration=self.iteration,
            seed=self.seed,
            cluster_key=self.clusters.key,
            cluster_dir=str(self.clusters.dir),
            rng_state=self.rng.bit_generator.state,
            cluster=self.cluster_bandit,
            task_type=self.task_bandit,
            usage_rows=used,
            usage_ids=self.clusters.passage_ids.take(pa.array(used)),
            usage_counts=self.uses[used],
            centroids=self.clusters.centroids,
            info={
                "draws": self.draws_made,
                "feedback_rows": self.feedback_rows,
                "resumed_from": self.resumed_from,
                "passages": self.clusters.n_rows,
            },
        )

    def save(self, state_dir: str | Path) -> Path:
        """Write `<state_dir>/iteration=<t>/` (replacing an earlier save of the same t)."""
        return write_snapshot(state_dir, self.snapshot())


def _map_usage(snap: SelectorSnapshot, clusters: ClusterResult) -> np.ndarray:
    """Saved usage onto the current passage rows, by row when ids agree, else by passage id
    (passages no longer in the corpus are dropped)."""
    uses = np.zeros(clusters.n_rows, dtype=np.int64)
    rows, counts = snap.usage_rows, snap.usage_counts
    if len(rows) == 0:
        return uses
    if rows.max() < clusters.n_rows and clusters.passage_ids.take(pa.array(rows)).equals(
        snap.usage_ids
    ):
        uses[rows] = counts
        return uses
    idx = pc.index_in(snap.usage_ids, value_set=clusters.passage_ids)
    found = idx.is_valid().to_numpy(zero_copy_only=False)
    target = idx.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    np.add.at(uses, target[found], counts[found])
    return uses


__all__ = ["Draw", "Feedback", "FeedbackResult", "Selector"]
