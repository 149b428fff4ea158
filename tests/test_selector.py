"""Selector: UCB1 arithmetic, split inheritance, appendix-F feedback, draws, persistence.

Hand-worked cases write the arithmetic in comments; numbers are rounded to 6 places there.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pipeline.core.config import SelectorConfig
from pipeline.core.contracts import read_shard
from pipeline.selector import (
    ClusterResult,
    Feedback,
    Selector,
    UCB1Bandit,
    batch_probabilities,
    inherit_split,
    nearest_parents,
    run_score,
    sample_rewards,
    saved_iterations,
    selector_rewards,
    ucb_scores,
)
from pipeline.selector.feedback import duplicate_counts, q_ans, q_len, quality
from pipeline.selector.sampling import FenwickSampler, draw_probabilities, hop_pmf
from pipeline.selector.state import iteration_dir
from pipeline.selector.ucb import pick_arms


def make_clusters(
    assignments,
    distances,
    centroids,
    key: str = "test",
    ids: list[str] | None = None,
) -> ClusterResult:
    """An in-memory clustering (the selector does not care how it was computed)."""
    a = np.asarray(assignments, dtype=np.int32)
    c = np.asarray(centroids, dtype=np.float32)
    ids = ids or [f"p{i}" for i in range(len(a))]
    return ClusterResult(
        Path("/nonexistent") / key,
        key,
        0,
        len(c),
        len(c),
        0,
        c,
        a,
        np.asarray(distances, dtype=np.float32),
        pa.array(ids, type=pa.string()),
        0.0,
    )


def blocks(k: int, per: int, seed: int = 0, key: str = "blocks") -> ClusterResult:
    rng = np.random.default_rng(seed)
    n = k * per
    return make_clusters(np.repeat(np.arange(k), per), 0.5 + rng.random(n), np.eye(k, 4), key=key)


# ---- UCB1 -----------------------------------------------------------------------------------


def test_ucb_scores_hand_worked():
    # N = [1, 3, 6], S = [0, 1.5, 4.2], beta = 1 -> N_tot = 10, log 10 = 2.302585
    # U0 = 0/1   + sqrt(2.302585 / 1) = 0   + 1.517427 = 1.517427
    # U1 = 1.5/3 + sqrt(2.302585 / 3) = 0.5 + 0.876087 = 1.376087
    # U2 = 4.2/6 + sqrt(2.302585 / 6) = 0.7 + 0.619487 = 1.319487
    u = ucb_scores(np.array([1.0, 3.0, 6.0]), np.array([0.0, 1.5, 4.2]), beta=1.0)
    assert u == pytest.approx([1.517427, 1.376087, 1.319487], abs=1e-6)
    # beta scales only the bonus: beta = 2 -> U1 = 0.5 + 2 * 0.876087 = 2.252174
    assert ucb_scores(np.array([1.0, 3.0, 6.0]), np.array([0.0, 1.5, 4.2]), 2.0)[1] == (
        pytest.approx(2.252174, abs=1e-6)
    )


def test_fresh_arms_have_one_virtual_pull():
    # 5 fresh arms: N_k = 1, S_k = 0, N_tot = 5 -> U_k = sqrt(log 5) = 1.268636 for every arm
    b = UCB1Bandit.fresh("task_type", ["factual", "comparison", "causal", "temporal", "agg"])
    assert b.pulls.tolist() == [1.0] * 5 and b.reward_sums.tolist() == [0.0] * 5
    assert b.scores() == pytest.approx([1.268636] * 5, abs=1e-6)
    # max(N, 1) keeps a zero-count arm finite: N = [0, 1] -> N_tot = 1, log 1 = 0 -> U = S/1
    assert ucb_scores(np.array([0.0, 1.0]), np.array([0.0, 0.3])).tolist() == [0.0, 0.3]


def test_batch_softmax_rescaled_by_std():
    # U = [1, 2, 3]: population std sigma = sqrt(2/3) = 0.816497
    # z = (U - 3) / sigma = [-2.449490, -1.224745, 0]; exp(z) = [0.086338, 0.293833, 1]
    # sum = 1.380171 -> p = [0.062556, 0.212896, 0.724548]
    p = batch_probabilities(np.array([1.0, 2.0, 3.0]))
    assert p == pytest.approx([0.062556, 0.212896, 0.724548], abs=1e-6)
    # scale invariance: U * 10 + 5 has the same z-scores, hence the same batch distribution
    assert batch_probabilities(np.array([15.0, 25.0, 35.0])) == pytest.approx(p)
    # sigma = 0 (all U equal) -> uniform
    assert batch_probabilities(np.full(4, 1.7)).tolist() == [0.25] * 4
    # masked arms get probability 0; std is over the eligible arms only ([1, 3]: sigma = 1)
    # z = [-2, 0] -> p = [e^-2, 1] / (1 + e^-2) = [0.119203, 0.880797]
    pm = batch_probabilities(np.array([1.0, 2.0, 3.0]), mask=np.array([True, False, True]))
    assert pm == pytest.approx([0.119203, 0.0, 0.880797], abs=1e-6)
    # a single eligible arm -> sigma = 0 -> all mass on it
    assert batch_probabilities(np.array([1.0, 2.0]), np.array([False, True])).tolist() == [0, 1]


def test_pick_arms_argmax_for_one_softmax_for_batch():
    rng = np.random.default_rng(0)
    u = np.array([0.2, 0.9, 0.9, 0.1])
    assert pick_arms(u, 1, rng).tolist() == [1]  # tie between 1 and 2 -> lowest index
    assert pick_arms(u, 1, rng, np.array([True, False, True, True])).tolist() == [2]
    draws = pick_arms(np.array([1.0, 2.0, 3.0]), 20_000, rng)
    freq = np.bincount(draws, minlength=3) / 20_000
    assert freq == pytest.approx([0.062556, 0.212896, 0.724548], abs=0.015)
    assert pick_arms(u, 0, rng).tolist() == []


# ---- split inheritance ----------------------------------------------------------------------


def test_inherit_split_hand_worked():
    # old arms: 0: N=7, S=3.0 (3 children); 1: N=1, S=0.5 (2 children); 2: N=4, S=2 (none)
    # arm 0's children: max(floor(7/3), 1) = 2 pulls, 3.0/3 = 1.0 reward each
    # arm 1's children: max(floor(1/2), 1) = max(0, 1) = 1 pull, 0.5/2 = 0.25 reward each
    # arm 2 has no child: its statistics leave with it
    parent_of = np.array([0, 1, 0, 1, 0])
    pulls, sums = inherit_split(parent_of, np.array([7.0, 1.0, 4.0]), np.array([3.0, 0.5, 2.0]))
    assert pulls.tolist() == [2.0, 1.0, 2.0, 1.0, 2.0]
    assert sums == pytest.approx([1.0, 0.25, 1.0, 0.25, 1.0])


def test_nearest_parents_by_euclidean_distance():
    old = np.array([[0.0, 0.0], [10.0, 10.0]])
    new = np.array([[1.0, -1.0], [9.0, 11.0], [-2.0, 0.5], [6.0, 6.0]])
    # (6, 6): |.-(0,0)|^2 = 72, |.-(10,10)|^2 = 32 -> parent 1
    assert nearest_parents(old, new).tolist() == [0, 1, 0, 1]


# ---- feedback (appendix F) ------------------------------------------------------------------


def test_quality_factors_and_boundaries():
    assert [q_len(n) for n in (19, 20, 220, 221)] == [0.65, 1.0, 1.0, 0.65]
    assert [q_ans(n) for n in (0, 1, 80, 81)] == [0.55, 1.0, 1.0, 0.55]
    # |q| = 30, |a| = 5, D = 4 -> 1 * 1 / sqrt(4) = 0.5
    assert quality(30, 5, 4) == 0.5
    # |q| = 10, |a| = 100, D = 1 -> 0.65 * 0.55 / 1 = 0.3575
    assert quality(10, 100, 1) == pytest.approx(0.3575)
    assert duplicate_counts(["a", "b", "a", "a"]).tolist() == [3, 1, 3, 3]


def test_sample_rewards_hand_worked():
    q_ok = "Who wrote the novel Dune in 1965?"  # 33 chars -> q_len = 1
    rows = [
        (q_ok, "Frank Herbert"),  # Q = 1 * 1 / sqrt(2) (q_ok appears twice) = 0.707107
        (q_ok, "Frank Herbert"),  # same
        ("Who?", "Frank Herbert"),  # |q| = 4 -> Q = 0.65
        ("What did the committee decide in 1999?", "x" * 81),  # |a| = 81 -> Q = 0.55
        ("What did the committee decide in 2001?", ""),  # |a| = 0 -> Q = 0.55
    ]
    # R_run = 0.8 -> r = 0.8 * Q = [0.565685, 0.565685, 0.52, 0.44, 0.44]
    r = sample_rewards([q for q, _ in rows], [a for _, a in rows], 0.8)
    assert r == pytest.approx([0.565685, 0.565685, 0.52, 0.44, 0.44], abs=1e-6)
    # duplicates are counted on the prompt string when one is given
    r2 = sample_rewards([q for q, _ in rows], [a for _, a in rows], 0.8, ["a", "b", "c", "d", "e"])
    assert r2[0] == pytest.approx(0.8)
    with pytest.raises(ValueError):
        sample_rewards(["q"], ["a"], 1.2)


def test_selector_reward_hand_worked_uses_pre_update_statistics():
    # bandit N = [1, 3, 6], S = [0, 1.5, 4.2]; samples: (arm 1, r = 0.5), (arm 2, r = 0.2)
    # N_tot = 10; arm 1: R_div = -log(3/10 + 1e-8) = 1.203973, rbar = 1.5/3 = 0.5,
    #   R_util = 0.5 - 0.5 = 0 -> R_sel = 1.203973
    # arm 2: R_div = -log(6/10 + 1e-8) = 0.510826, rbar = 4.2/6 = 0.7,
    #   0.5 * (0.2 - 0.7) = -0.25 -> R_sel = 0.260826
    pulls, sums = np.array([1.0, 3.0, 6.0]), np.array([0.0, 1.5, 4.2])
    r_sel = selector_rewards(np.array([1, 2]), np.array([0.5, 0.2]), pulls, sums)
    assert r_sel == pytest.approx([1.203973, 0.260826], abs=1e-6)

    b = UCB1Bandit("cluster", ["0", "1", "2"], pulls.copy(), sums.copy())
    # two samples on arm 1 in one batch: both see N_1 = 3 (pre-update), so both get 1.203973
    out = b.feedback(np.array([1, 1, 2]), np.array([0.5, 0.5, 0.2]))
    assert out == pytest.approx([1.203973, 1.203973, 0.260826], abs=1e-6)
    # then N = [1, 3 + 2, 6 + 1], S = [0, 1.5 + 2 * 1.203973, 4.2 + 0.260826]
    assert b.pulls.tolist() == [1.0, 5.0, 7.0]
    assert b.reward_sums == pytest.approx([0.0, 3.907946, 4.460826], abs=1e-6)


def test_run_score_normalises_to_unit_interval():
    # R_pro in [1/8 - 0.5, 0.5 + 1 + 0.5 + 0.1] = [-0.375, 2.1]: 0.8625 -> 1.2375 / 2.475 = 0.5
    # R_sol in [0, 1.3]: 0.65 -> 0.5; R_run = (0.5 + 0.5) / 2 = 0.5
    assert run_score(0.8625, 0.65) == pytest.approx(0.5)
    assert run_score(2.1, None) == pytest.approx(1.0)
    assert run_score(-9.0, -9.0) == 0.0  # clipped


# ---- document draws and hops ----------------------------------------------------------------


def test_in_cluster_probabilities():
    # delta = [0, 1, 3], u = [0, 0, 2] -> scores [0, 1, 1] -> P = [0, 0.5, 0.5]
    assert draw_probabilities(np.array([0.0, 1.0, 3.0]), np.array([0, 0, 2])).tolist() == [
        0.0,
        0.5,
        0.5,
    ]
    # every score zero -> uniform
    assert draw_probabilities(np.zeros(4), np.arange(4)).tolist() == [0.25] * 4


def test_fenwick_sampler_matches_weights_and_updates():
    w = np.array([0.0, 1.0, 0.0, 3.0, 4.0])
    s = FenwickSampler(w)
    us = np.random.default_rng(0).random(40_000)
    freq = np.bincount([s.sample(u) for u in us], minlength=5) / len(us)
    assert freq == pytest.approx(w / w.sum(), abs=0.01)
    assert freq[0] == freq[2] == 0  # zero-weight entries never drawn
    s.set(4, 0.0)
    s.set(1, 3.0)  # weights now [0, 3, 0, 3, 0]
    got = {s.sample(u) for u in us[:2000]}
    assert got == {1, 3}
    assert s.total == pytest.approx(6.0)


def test_hop_pmf_4_3_2_1():
    hops, p = hop_pmf({1: 4, 2: 3, 3: 2, 4: 1})
    assert hops.tolist() == [1, 2, 3, 4] and p == pytest.approx([0.4, 0.3, 0.2, 0.1])
    sel = Selector.fresh(blocks(2, 50), SelectorConfig(), seed=1)
    h = np.array([d.hop_count for d in sel.draw(20_000)])
    assert np.bincount(h, minlength=5)[1:] / len(h) == pytest.approx(
        [0.4, 0.3, 0.2, 0.1], abs=0.015
    )


def test_usage_factor_spreads_repeated_draws_over_a_cluster():
    # one cluster of 10 documents at equal distance: without the usage factor 50 draws would
    # be multinomial (some documents 0 times); with it every document is used about 5 times
    clusters = make_clusters(np.zeros(10), np.ones(10), np.zeros((1, 3)))
    sel = Selector.fresh(clusters, SelectorConfig(), seed=0)
    rows = [d.passage_row for d in sel.draw(50)]
    counts = np.bincount(rows, minlength=10)
    assert counts.min() >= 3 and counts.max() <= 7
    assert sel.uses.tolist() == counts.tolist()
    # single-draw calls (argmax arm) also spread, since usage persists between calls
    for _ in range(50):
        sel.draw(1)
    assert sel.uses.min() >= 7 and sel.uses.max() <= 13


def test_distance_bias_and_uniform_fallback():
    # cluster 0: distances [0.1, 1, 10] -> the far document dominates; cluster 1: all zero
    clusters = make_clusters([0, 0, 0, 1, 1], [0.1, 1.0, 10.0, 0.0, 0.0], np.eye(2))
    sel = Selector.fresh(clusters, SelectorConfig(), seed=0)
    seen = np.bincount([sel._draw_document(0, u) for u in np.linspace(0, 0.999, 30)], minlength=5)
    assert seen[2] > seen[1] > seen[0]
    fallback = {sel._draw_document(1, u) for u in (0.1, 0.9)}
    assert fallback == {3, 4}


def test_empty_clusters_are_never_drawn():
    clusters = make_clusters([0, 0, 2, 2], [1, 1, 1, 1], np.eye(3))  # cluster 1 is empty
    sel = Selector.fresh(clusters, SelectorConfig(), seed=0)
    assert 1 not in {d.cluster_id for d in sel.draw(500)}


# ---- simulation -----------------------------------------------------------------------------


def test_cluster_bandit_moves_towards_better_clusters_and_keeps_exploring():
    k, per, batch, iterations = 5, 40, 100, 30
    good_rate = np.array([0.1, 0.3, 0.5, 0.7, 0.9])  # chance a cluster yields a well-formed sample
    sel = Selector.fresh(blocks(k, per), SelectorConfig(), seed=0)
    outcome = np.random.default_rng(100)
    share = np.zeros((iterations, k))
    for it in range(iterations):
        draws = sel.draw(batch)
        share[it] = np.bincount([d.cluster_id for d in draws], minlength=k) / batch
        feedback = []
        for j, d in enumerate(draws):
            if outcome.random() < good_rate[d.cluster_id]:  # Q = 1
                q, a = f"Which river flows through city number {it}-{j}?", "The Rhine"
            else:  # |q| < 20 and |a| > 80 -> Q = 0.65 * 0.55 = 0.3575
                q, a = f"q{it}-{j}?", "x" * 100
            feedback.append(Feedback(d.cluster_id, d.task_type, q, a))
        sel.update(feedback, run_score=1.0)
    total = share.mean(axis=0)
    late = share[iterations // 2 :].mean(axis=0)
    # pull share ordered towards the better clusters ...
    assert total[4] > total[0] + 0.03
    assert total[3] + total[4] > total[0] + total[1] + 0.05
    assert late[4] > 1 / k and late[0] < 1 / k
    pulls = sel.cluster_bandit.pulls
    assert pulls[4] > pulls[2] > pulls[0]
    # ... while every cluster is still visited (the diversity term keeps exploring)
    assert total.min() > 0.1
    assert (share[-5:].sum(axis=0) > 0).all()


# ---- persistence ----------------------------------------------------------------------------


def _feedback(draws) -> list[Feedback]:
    return [
        Feedback(d.cluster_id, d.task_type, f"What is described in passage {d.passage_id}?", "x")
        for d in draws
    ]


def test_iteration_2_continues_from_iteration_1(tmp_path):
    cfg, clusters, state = SelectorConfig(), blocks(4, 25), tmp_path / "selector"
    sel1 = Selector.load_or_init(state, 1, clusters, cfg, seed=7)
    assert sel1.resumed_from is None
    draws1 = sel1.draw(30)
    sel1.update(_feedback(draws1), run_score=0.6)
    path = sel1.save(state)
    assert path == iteration_dir(state, 1) and saved_iterations(state) == [1]
    # the files honour their contracts
    st = read_shard(path / "selector_state.parquet", "selector_state")
    assert st.num_rows == 4 + 5 and set(st.column("bandit").to_pylist()) == {"cluster", "task_type"}
    usage = read_shard(path / "selector_usage.parquet", "selector_usage")
    assert sum(usage.column("uses").to_pylist()) == 30

    sel2 = Selector.load_or_init(state, 2, clusters, cfg, seed=999)  # seed ignored on resume
    assert sel2.resumed_from == 1 and sel2.iteration == 2
    assert sel2.cluster_bandit.pulls.tolist() == sel1.cluster_bandit.pulls.tolist()
    assert sel2.cluster_bandit.reward_sums == pytest.approx(sel1.cluster_bandit.reward_sums)
    assert sel2.task_bandit.pulls.tolist() == sel1.task_bandit.pulls.tolist()
    assert sel2.cluster_bandit.total_pulls == 4 + 30  # virtual pulls + one per sample
    assert sel2.uses.tolist() == sel1.uses.tolist()
    # RNG state restored: iteration 2 draws exactly what iteration 1's selector would draw next
    again = Selector.load_or_init(state, 2, clusters, cfg, seed=999)
    draws2 = sel2.draw(30)
    assert draws2 == again.draw(30) == sel1.draw(30)
    sel2.update(_feedback(draws2), run_score=0.4)
    sel2.save(state)
    assert saved_iterations(state) == [1, 2]
    assert Selector.load(state, 2, clusters, cfg).uses.sum() == 60

    # replay: rerunning iteration 1 starts from nothing before it and reproduces its draws
    assert Selector.load_or_init(state, 1, clusters, cfg, seed=7).draw(30) == draws1


def test_recluster_inherits_split_statistics(tmp_path):
    cfg, state = SelectorConfig(), tmp_path / "selector"
    # K = 2 at iteration 0: centroids (0, 0) and (10, 10)
    coarse = make_clusters([0] * 5 + [1] * 5, np.ones(10), [[0, 0], [10, 10]], key="k2")
    sel = Selector.fresh(coarse, cfg, seed=1)
    sel.cluster_bandit.pulls = np.array([7.0, 1.0])
    sel.cluster_bandit.reward_sums = np.array([3.0, 0.5])
    sel.save(state)
    # K = 5 at iteration 1: three children near (0, 0), two near (10, 10)
    fine = make_clusters(
        [0, 0, 1, 1, 2, 3, 3, 4, 4, 4],
        np.ones(10),
        [[1, 0], [9, 9], [0, 1], [11, 10], [-1, -1]],
        key="k5",
    )
    nxt = Selector.load_or_init(state, 1, fine, cfg, seed=1)
    # parent 0 (N=7, S=3) -> 3 children: 2 pulls, 1.0 each; parent 1 (N=1, S=0.5) -> 2 children:
    # max(floor(1/2), 1) = 1 pull, 0.25 each
    assert nxt.cluster_bandit.pulls.tolist() == [2.0, 1.0, 2.0, 1.0, 2.0]
    assert nxt.cluster_bandit.reward_sums == pytest.approx([1.0, 0.25, 1.0, 0.25, 1.0])
    assert nxt.cluster_bandit.arms == ["0", "1", "2", "3", "4"]


def test_usage_follows_passage_ids_when_rows_move(tmp_path):
    cfg, state = SelectorConfig(), tmp_path / "selector"
    old = make_clusters([0, 0, 0], [1, 1, 1], [[0.0]], key="a", ids=["a", "b", "c"])
    sel = Selector.fresh(old, cfg, seed=0)
    sel.uses[:] = [1, 2, 3]
    sel.save(state)
    # the corpus gained a passage at the front and lost "b"
    new = make_clusters([0, 0, 0], [1, 1, 1], [[0.0]], key="b", ids=["z", "a", "c"])
    assert Selector.load_or_init(state, 1, new, cfg, seed=0).uses.tolist() == [0, 1, 3]


def test_saving_the_same_iteration_twice_replaces_it(tmp_path):
    cfg, clusters, state = SelectorConfig(), blocks(2, 5), tmp_path / "s"
    sel = Selector.fresh(clusters, cfg, seed=0, iteration=3)
    sel.draw(4)
    sel.save(state)
    sel.draw(4)
    sel.save(state)
    assert saved_iterations(state) == [3]
    assert Selector.load(state, 3, clusters, cfg).uses.sum() == 8
    assert [p.name for p in state.iterdir()] == ["iteration=0003"]


def test_update_rejects_unknown_task_type():
    sel = Selector.fresh(blocks(2, 5), SelectorConfig(), seed=0)
    with pytest.raises(ValueError, match="unknown task types"):
        sel.update([Feedback(0, "riddle", "What is this question about?", "x")], 0.5)
    assert math.isclose(sel.cluster_bandit.total_pulls, 2.0)
