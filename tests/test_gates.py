"""Generation-time quality gates (issue 17 items 3-5): the pure statistics on hand-made numbers,
then the gates on the real 270M model (shortcut check, uniqueness, verifier controls)."""

from __future__ import annotations

import pytest
from sklearn.metrics import roc_auc_score

from pipeline.quality.gate_stats import (
    accuracy,
    answer_candidates,
    auc_real_vs_control,
    derangement,
    in_sample,
    is_shortcut,
    is_unique,
    leakage_share,
)

# ---- pure statistics ---------------------------------------------------------------------


def test_shortcut_only_for_multi_hop_and_at_the_threshold():
    assert is_shortcut(2, 0.5, 0.0, 0.5) is True
    assert is_shortcut(3, 0.0, 0.75, 0.5) is True
    assert is_shortcut(2, 0.25, 0.25, 0.5) is False
    assert is_shortcut(1, 1.0, 1.0, 0.5) is None  # single-hop: not applicable
    assert is_shortcut(2, None, None, 0.5) is None  # nothing measured
    assert accuracy([True, False, True, True]) == 0.75 and accuracy([]) is None


def test_answer_candidates_count_only_supported_converging_answers():
    preds = ["Paris", "paris.", "The Paris", "Lyon", "Lyon", "Nice", None]
    supported = [True, True, False, True, True, True, None]
    # "paris" twice supported (the third is unsupported), "lyon" twice, "nice" once
    assert answer_candidates(preds, supported, 2) == ["lyon", "paris"]
    assert not is_unique(answer_candidates(preds, supported, 2))
    assert answer_candidates(preds, supported, 3) == []
    assert is_unique(answer_candidates(preds, supported, 3))
    assert answer_candidates(preds, supported, 1) == ["lyon", "nice", "paris"]


@pytest.mark.parametrize("n", [2, 3, 5, 16])
def test_derangement_has_no_fixed_point_and_is_a_permutation(n):
    for seed in range(20):
        d = derangement(n, seed)
        assert sorted(d) == list(range(n))
        assert all(d[i] != i for i in range(n))
    with pytest.raises(ValueError):
        derangement(1, 0)


def test_controls_sample_is_a_stable_share_of_record_ids():
    ids = [f"{i:08x}" + "0" * 16 for i in range(0, 0xFFFFFFFF, 0xFFFFFFFF // 1000)]
    share = sum(in_sample(r, 0.25) for r in ids) / len(ids)
    assert 0.23 < share < 0.27
    assert all(in_sample(r, 1.0) for r in ids) and not any(in_sample(r, 0.0) for r in ids)


def test_auc_and_leakage_share_on_hand_made_scores():
    assert auc_real_vs_control([0.5, 0.25], [0.0, 0.0]) == 1.0
    assert auc_real_vs_control([0.0, 0.0], [0.0, 0.0]) == 0.5  # degenerate verifier
    real, shuf = [0.5, 0.0, 0.25, -0.25], [0.0, 0.25, -0.5, 0.0]
    assert auc_real_vs_control(real, shuf) == pytest.approx(
        roc_auc_score([1] * 4 + [0] * 4, real + shuf)
    )
    assert auc_real_vs_control([], [0.1]) is None
    assert leakage_share([0.5, 0.0, 0.25], [0.5, 0.25, 0.0]) == pytest.approx(2 / 3)
