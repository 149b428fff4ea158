"""Hand-worked examples for EvalAct/PCAR (eqs. 5-8, 11) and ARR (§3.2, eqs. 5-9)."""

import math

import pytest

from pipeline.agents import process_rewards as P


def test_outcome_advantage_eq5():
    # r = [1, 0, 0.5]: μ = 0.5, σ = √((0.25 + 0.25 + 0) / 3) = √(1/6) = 0.408248
    a = P.outcome_advantages([1.0, 0.0, 0.5])
    assert a == pytest.approx([1.224742, -1.224742, 0.0], rel=1e-5)
    assert P.outcome_advantages([0.7, 0.7, 0.7]) == [0.0, 0.0, 0.0]


def test_feedback_tiers_eq11():
    assert [P.feedback_tier(z) for z in (0, 3, 3.5, 7, 7.01, 10)] == [
        "low",
        "low",
        "mid",
        "mid",
        "high",
        "high",
    ]
    with pytest.raises(ValueError):
        P.feedback_tier(10.5)


def test_standardized_reliability_eq6():
    # z = [2, 6, 10]: μ = 6, σ = √(32/3) = 3.265986 -> z̃ = ∓4/3.265986 = ∓1.224745
    assert P.standardized_reliability([2, 6, 10]) == pytest.approx(
        [-1.224745, 0.0, 1.224745], rel=1e-5
    )
    assert P.standardized_reliability([7, 7]) == [0.0, 0.0]  # constant scoring: no signal
    assert P.standardized_reliability([4]) == [0.0]
    assert P.standardized_reliability([]) == []


def test_pcar_gain_and_multiplier_eqs7_8():
    # λ = 0.1 + 0.4·z/10
    assert P.pcar_gain(2) == pytest.approx(0.18)
    assert P.pcar_gain(6) == pytest.approx(0.34)
    assert P.pcar_gain(10) == pytest.approx(0.5)
    assert P.pcar_gain(0, lambda_base=0.2, lambda_max=0.4) == pytest.approx(0.2)
    # 1 + 0.18·(−1.224745) = 0.779546 ; 1 + 0.5·1.224745 = 1.612372
    assert P.pcar_multiplier(-1.224745, 0.18) == pytest.approx(0.779546, rel=1e-6)
    assert P.pcar_multiplier(1.224745, 0.5) == pytest.approx(1.612372, rel=1e-6)
    # 1 + 0.42·(−3) = −0.26 -> clamped to δ
    assert P.pcar_multiplier(-3.0, 0.42) == 1e-6
    assert P.pcar_multiplier(-3.0, 0.42, delta=0.05) == 0.05


def test_pcar_segments_whole_trajectory():
    segs = P.pcar_segments([2, 6, 10], outcome_advantage=2.0)
    assert [s.multiplier for s in segs] == pytest.approx([0.779546, 1.0, 1.612372], rel=1e-5)
    assert [s.advantage for s in segs] == pytest.approx([1.559092, 2.0, 3.224745], rel=1e-5)
    # z = [8, 10 × 9]: μ = 9.8, σ = 0.6, z̃(8) = −3, λ(8) = 0.42 -> 1 − 1.26 < δ: clamped
    segs = P.pcar_segments([8] + [10] * 9, outcome_advantage=-1.0)
    assert segs[0].z_tilde == pytest.approx(-3.0, rel=1e-5)
    assert segs[0].multiplier == 1e-6
    assert segs[0].advantage == pytest.approx(-1e-6)  # sign of A_i kept, never inverted
    assert segs[1].multiplier == pytest.approx(1 + 0.5 * (0.2 / 0.6), rel=1e-5)


def test_token_entropy_exact_and_topk():
    ln2 = math.log(2)
    # p = [1/2, 1/4, 1/4]: H = ½ln2 + 2·¼·ln4 = 1.5 ln2
    assert P.token_entropy([math.log(p) for p in (0.5, 0.25, 0.25)]) == pytest.approx(1.5 * ln2)
    assert P.token_entropy([0.0, -math.inf]) == 0.0  # a certain token
    # p = [1/2, 1/4, 1/8, 1/8]: exact H = 1.75 ln2; top-2 lumps the 1/4 tail: 1.5 ln2 (≤ exact)
    full = [math.log(p) for p in (0.5, 0.25, 0.125, 0.125)]
    assert P.token_entropy(full) == pytest.approx(1.75 * ln2)
    assert P.token_entropy_topk(full[:2]) == pytest.approx(1.5 * ln2)
    assert P.token_entropy_topk(full) == pytest.approx(1.75 * ln2)  # k covers everything
    assert P.token_entropy_topk([math.log(0.5), math.log(0.5000001)]) >= 0.0  # sums above 1
    assert P.mean_token_entropy([1.0, 2.0, 3.0]) == 2.0
    assert P.mean_token_entropy([]) is None


@pytest.mark.parametrize(
    ("entropies", "pattern"),
    [
        ([3.0, 2.0, 1.0], "D"),
        ([1.0, 2.0, 1.0], "ID"),
        ([2.0, 1.0, 2.0], "DI"),
        ([1.0, 2.0, 3.0], "I"),
        ([1.0, 1.05, 1.02], "F"),  # every step within δ = 0.1
        ([1.0, 2.0, 2.05], "I"),  # a flat step is dropped
        ([1.0, 3.0, 2.0, 1.0], "D"),  # only the last three turns count
        ([2.0, 1.0], "D"),
        ([2.0], None),
    ],
)
def test_entropy_pattern_figure2(entropies, pattern):
    assert P.entropy_pattern(entropies, delta=0.1) == pattern


def test_adversarial_reward_eq5():
    # n = 4 buckets of width ¼: 0.6 -> 0.5, 0.2 -> 0 (a minor difference), −0.6 -> −0.5
    assert P.f1_bin(0.6, 4) == 0.5
    assert P.f1_bin(0.2, 4) == 0.0
    assert P.f1_bin(-0.6, 4) == -0.5
    assert P.f1_bin(0.25, 4) == 0.25
    assert P.adversarial_reward(0.8, 0.2, lam=0.5, buckets=4) == pytest.approx(1.05)
    assert P.adversarial_reward(0.2, 0.8, lam=0.5, buckets=4) == pytest.approx(0.2)
    assert P.adversarial_reward(0.8, 0.7, lam=0.5, buckets=4) == pytest.approx(0.8)
    # reasoner "Ulm" F1 = 1; verifier "born in Ulm 1879" F1 = 2·¼·1/(¼+1) = 0.4; bin(0.6) = 0.5
    rr, rv = P.adversarial_rewards("Ulm", "born in Ulm 1879", "Ulm", lam=0.5, buckets=4)
    assert rr == pytest.approx(1.25)
    assert rv == pytest.approx(0.4)


def test_process_aware_advantage_eqs6_to_9():
    e = math.exp(-0.5)  # 0.606531
    assert P.verifier_clarity(0.5, True, True) == pytest.approx(e)
    assert P.verifier_clarity(0.5, True, False) == pytest.approx(-e)
    assert P.verifier_clarity(0.5, False, True) == 0.0
    docs = "Albert Einstein was born in Ulm in 1879."
    assert P.verifier_clarity_text(0.5, "Ulm", docs, "Doc 1 supports Ulm.") == pytest.approx(e)
    assert P.verifier_clarity_text(0.5, "Ulm", docs, "The query is off.") == pytest.approx(-e)
    # think: D -> 1.0, verify: ID -> 0.8 -> A_impact = 0.9
    impact = P.behavior_impact({"think": [3, 2, 1], "verify": [1, 2, 1]}, delta=0.1)
    assert impact == pytest.approx(0.9)
    assert P.behavior_impact({"think": [1.0]}, delta=0.1) is None
    # A_proc = 0.5 · 0.606531 · 0.9 = 0.272939
    proc = P.process_advantage(0.5, e, impact)
    assert proc == pytest.approx(0.272939, rel=1e-5)
    assert P.verifier_token_advantage(0.3, proc, True) == pytest.approx(0.572939, rel=1e-5)
    assert P.verifier_token_advantage(0.3, proc, False) == 0.3


def test_gated_outcome_reward_eq4():
    assert P.gated_outcome_reward(0.75, True) == 0.75
    assert P.gated_outcome_reward(0.75, False) == 0.0  # a skipped or malformed Evaluate


def test_solver_protocol_config():
    from pipeline.core.config import load_config

    cfg = load_config(None, [])
    assert cfg.solver.protocol == "search_r1"
    assert (cfg.solver.pcar_lambda_base, cfg.solver.pcar_lambda_max) == (0.1, 0.5)
    assert cfg.solver.pcar_delta == 1e-6
    assert load_config(None, ["solver.protocol=evalact"]).solver.protocol == "evalact"
    arr = load_config(None, ["solver.protocol=arr", "arr.max_rounds=3"])
    assert (arr.solver.protocol, arr.arr.max_rounds) == ("arr", 3)
    # Same model with role prompts only: a separate verifier model is refused, not ignored.
    with pytest.raises(Exception, match=r"arr\.verifier_model is not supported"):
        load_config(None, ["solver.protocol=arr", "arr.verifier_model=some/model"])


def test_action_spans_and_their_token_entropies():
    """An action's H_a is the mean over its own tokens: positions from the token counts of
    the text before and after it (here one token per character)."""
    from pipeline.agents.arr import action_spans, span_entropies

    text = "<think>ab</think><search>q"  # the stop string cut </search>
    spans = action_spans(text, ("think", "search"))
    assert [(n, b) for n, b, _, _ in spans] == [("think", "ab"), ("search", "q")]
    h = [float(i) for i in range(len(text))]  # token i has entropy i
    (_, _, s0, e0), (_, _, s1, e1) = spans
    assert (s0, e0, s1, e1) == (0, 17, 17, 26)
    assert span_entropies(h, len, text, s0, e0) == h[0:17]
    assert span_entropies(h, len, text, s1, e1) == h[17:26]
    assert span_entropies(h[:20], len, text, s1, e1) == h[17:20]  # fewer tokens than text
    assert P.mean_token_entropy(span_entropies(h, len, text, s1, e1)) == 21.0


def test_step_entropies_are_token_weighted_per_turn():
    """[H_{a_1}, …]: one value per turn; two think blocks of one turn pool their tokens."""
    from pipeline.agents.arr import Action
    from pipeline.agents.arr_scoring import step_entropies

    acts = [
        Action("reasoner", "think", "a", 0, 0, 2.0, 1),
        Action("reasoner", "think", "b", 0, 0, 1.0, 3),  # turn 0: (2·1 + 1·3)/4 = 1.25
        Action("verifier", "verify", "c", 1, 0, 9.0, 5),  # another role
        Action("reasoner", "think", "d", 2, 1, 0.5, 2),
        Action("reasoner", "think", "", 4, 2, None, 0),  # no tokens: no step
    ]
    assert step_entropies(acts, "reasoner", "think") == [1.25, 0.5]
    assert P.entropy_pattern(step_entropies(acts, "reasoner", "think"), 0.05) == "D"
