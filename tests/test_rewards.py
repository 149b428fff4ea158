"""Hand-worked examples for every reward equation (EVE-Agent eqs. 2-4, 9, 14-16, 19)."""

import math

import pytest

from pipeline.agents import rewards as R


def test_normalize_and_contains():
    assert R.normalize("  The Beatles!  ") == "beatles"
    assert R.normalize("An Apple, a day") == "apple day"
    assert R.contains("Where was Albert Einstein born?", "albert einstein")
    assert not R.contains("born in 1879?", "1")  # word boundaries, not raw substrings


def test_validity_reasons():
    assert R.validity("", "Ulm") == (False, "empty_question")
    assert R.validity("Where was Einstein born?", " . ") == (False, "empty_answer")
    assert R.validity("Was Einstein born in Ulm?", "Ulm") == (False, "answer_in_question")
    assert R.validity("Where was Einstein born?", "Ulm") == (True, None)


def test_em_and_token_f1():
    assert R.exact_match("the Ming dynasty", "Ming Dynasty")
    assert not R.exact_match("", "")
    # pred tokens {born, in, ulm}, gold {einstein, born, in, ulm, 1879}: P=3/3, R=3/5 -> F1=0.75
    assert R.token_f1("born in Ulm", "Einstein born in Ulm 1879") == pytest.approx(0.75)
    assert R.token_f1("Paris", "London") == 0.0


def test_format_components():
    assert R.f_think(2, 4) == 0.5
    assert R.f_think(0, 0) == 0.0
    assert R.f_tool(1, 0, 0) == 1.0
    assert R.f_tool(3, 1, 1) == pytest.approx(2 / 3)  # min((1+1)/3, 1)
    assert R.f_tool(2, 3, 3) == 1.0
    assert R.f_tool(3, 2, 1) == 0.0  # calls and responses disagree
    ctx = "Albert Einstein was born in Ulm in the Kingdom of Wurttemberg in 1879."
    assert R.f_answer("Ulm", ctx) == 1.0
    assert R.f_answer("yes", "") == 1.0
    assert R.f_answer("in Ulm in the Kingdom of Wurttemberg", ctx) == 0.5  # 6 words
    assert R.f_answer("Munich", ctx) == 0.0


def test_format_score_worked_example():
    # h=2, 2 assistant turns, 1 planning turn, 1 valid call with 1 response, answer in context:
    # F = 1/4 (1 + 1/2 + min(2/2, 1) + 1) = 0.875
    fs = R.format_score("Where?", "Ulm", "born in Ulm", 2, 1, 2, 1, 1)
    assert (fs.think, fs.tool, fs.answer) == (0.5, 1.0, 1.0)
    assert fs.total == pytest.approx(0.875)
    assert R.format_score("", "Ulm", "Ulm", 1, 1, 1, 0, 0).total == 0.0


def test_difficulty_and_phi():
    assert R.difficulty(0, 5) == 0.0 and R.difficulty(5, 5) == 0.0
    assert R.difficulty(1, 5) == pytest.approx(1.0)  # (5-1)/4
    assert R.difficulty(3, 5) == pytest.approx(0.5)  # (5-3)/4
    # phi_n(p) = E[R_DZ] for k ~ Bin(n, p): check against the explicit binomial sum.
    n, p = 5, 0.3
    explicit = sum(
        math.comb(n, k) * p**k * (1 - p) ** (n - k) * R.difficulty(k, n) for k in range(n + 1)
    )
    assert R.expected_difficulty(p, n) == pytest.approx(explicit)
    assert R.expected_difficulty(0.0, n) == 0.0 and R.expected_difficulty(1.0, n) == 0.0
    with pytest.raises(ValueError):
        R.difficulty(6, 5)


def test_verifier_estimators():
    # 4 of 5 correct with evidence, 1 of 5 without: V = 0.8 - 0.2 = 0.6
    assert R.verifier_mc([1, 1, 1, 1, 0], [0, 0, 1, 0, 0]) == pytest.approx((0.8, 0.2, 0.6))
    p_pos, p_neg, v = R.verifier_teacher_forced(math.log(0.5), math.log(0.125))
    assert (p_pos, p_neg, v) == pytest.approx((0.5, 0.125, 0.375))
    with pytest.raises(ValueError):
        R.verifier_mc([], [True])


def test_brevity_and_proposer_reward():
    assert R.brevity(64) == pytest.approx(0.75)
    assert R.brevity(300) == 0.0
    # R_pro = 1/2 * 0.75 + 0.5 + 0.5 * 0.6 + 0.1 * 0.75 = 1.25
    assert R.proposer_reward(0.75, True, 0.5, 0.6, 0.75) == pytest.approx(1.25)
    assert R.proposer_reward(0.75, False, 0.5, 0.6, 0.75) == pytest.approx(0.375)


def test_solver_reward():
    # EM = 1, F1(ev) = 0.75 -> 1 + 0.3 * 0.75
    assert R.solver_reward(
        "Ulm", "ulm", "born in Ulm", "Einstein born in Ulm 1879"
    ) == pytest.approx(1.225)
    # No span emitted (or no gold span): EM only, not 1 + 0.3 * F1("", "") = 1.3.
    assert R.solver_reward("Ulm", "ulm", None, None) == 1.0
    assert R.solver_reward("Bonn", "ulm", "", "born in Ulm") == 0.0


# ---- hop-grouped advantages (EVE-Agent eq. 5) and GRPO group advantages -------------------


def test_hop_grouped_advantages_worked_example():
    # hop 2: rewards [1, 0, 0.5] -> mean 0.5, pop. var (0.25 + 0.25 + 0)/3 = 1/6,
    # std = 0.408248 -> advantages ±0.5/0.408248 = ±sqrt(1.5) = ±1.224745, 0.
    # hop 1 and hop 3 are singletons -> 0.
    adv = R.hop_grouped_advantages([1, 0, 0.5, 0.2, 0.7], [2, 2, 2, 1, 3], eps=0.0)
    assert adv == pytest.approx([math.sqrt(1.5), -math.sqrt(1.5), 0.0, 0.0, 0.0])
    # with the default delta_0 = 1e-6 in the denominator: 0.5 / (0.4082483 + 1e-6)
    adv = R.hop_grouped_advantages([1, 0, 0.5], [2, 2, 2])
    assert adv[0] == pytest.approx(0.5 / (math.sqrt(1 / 6) + 1e-6), rel=1e-12)
    # ddof=1: sample var (0.25 + 0.25 + 0)/2 = 0.25, std 0.5 -> [1, -1, 0]
    assert R.hop_grouped_advantages([1, 0, 0.5], [2, 2, 2], 0.0, ddof=1) == pytest.approx(
        [1.0, -1.0, 0.0]
    )


def test_hop_grouped_advantages_groups_by_hop_not_position():
    # hop 1: [1, 0] -> mean 0.5, std 0.5 -> [1, -1]; hop 2: [3, 5] -> mean 4, std 1 -> [-1, 1]
    adv = R.hop_grouped_advantages([1, 3, 0, 5], [1, 2, 1, 2], eps=0.0)
    assert adv == pytest.approx([1.0, -1.0, -1.0, 1.0])


def test_hop_grouped_advantages_edge_cases():
    assert R.hop_grouped_advantages([], []) == []
    assert R.hop_grouped_advantages([0.7, 0.7, 0.7], [3, 3, 3]) == [0.0, 0.0, 0.0]  # zero std
    assert R.hop_grouped_advantages([0.4], [1], ddof=1) == [0.0]  # singleton, sample var
    with pytest.raises(ValueError):
        R.hop_grouped_advantages([1.0, 0.0], [1])


def test_group_advantages():
    # [1, 0, 0, 0]: mean 0.25, var (0.5625 + 3 * 0.0625)/4 = 0.1875, std 0.4330127
    # -> 0.75/0.4330127 = sqrt(3), -0.25/0.4330127 = -1/sqrt(3)
    s3 = math.sqrt(3)
    assert R.group_advantages([1, 0, 0, 0], eps=0.0) == pytest.approx(
        [s3, -1 / s3, -1 / s3, -1 / s3]
    )


# ---- waypoint coverage reward (KG-paths eqs. 5-6) -----------------------------------------

# The paper's path Einstein -> ETH Zurich -> Zurich -> Switzerland -> Bern: W(q) = v0..v3.
EINSTEIN_WAYPOINTS = ["Albert Einstein", "ETH Zurich", "Zurich", "Switzerland"]


def test_waypoint_coverage_worked_example():
    # Albert Einstein, ETH Zurich and Zurich (inside "ETH Zurich") matched, Switzerland not:
    # g = 3/4
    text = "Albert Einstein taught at ETH Zurich. Which country is that in?"
    assert R.waypoint_coverage(EINSTEIN_WAYPOINTS, text) == pytest.approx(0.75)
    assert R.waypoint_coverage(EINSTEIN_WAYPOINTS, "the capital is Bern") == 0.0  # answer only
    assert R.waypoint_coverage(["Ulm"], "the Ulmer Münster") == 0.0  # word boundaries
    assert R.waypoint_coverage(["Ulm"], "born in ULM.") == 1.0  # Norm-ed match
    assert R.waypoint_coverage(["Albert Einstein"], "Albert Einstein's theory") == 1.0
    assert R.waypoint_coverage(["AC/DC"], "a gig by AC DC") == 1.0  # punctuation as space


def test_waypoint_coverage_aliases_and_multiple_texts():
    waypoints = [
        ["Albert Einstein", "Einstein"],
        ["ETH Zurich", "ETHZ"],
        ["Switzerland", "Swiss Confederation"],
    ]
    # Einstein (alias) and ETHZ (alias) matched, Switzerland not -> 2/3
    assert R.waypoint_coverage(waypoints, "Einstein worked at the ETHZ") == pytest.approx(2 / 3)
    # a waypoint counts once even if mentioned in several texts; no match across text borders
    texts = ["Einstein and Einstein again", "then Albert", "Einstein moved to Switzerland"]
    assert R.waypoint_coverage(waypoints, texts) == pytest.approx(2 / 3)
    assert R.waypoint_coverage(["Albert Einstein"], ["then Albert", "Einstein moved"]) == 0.0


def test_waypoint_coverage_edge_cases():
    assert R.waypoint_coverage([], "Albert Einstein") == 0.0  # no waypoints: no partial credit
    assert R.waypoint_coverage(EINSTEIN_WAYPOINTS, "") == 0.0
    assert R.waypoint_coverage(EINSTEIN_WAYPOINTS, []) == 0.0


def test_think_text_only_counts_reasoning():
    response = (
        "<think>I should find Einstein's employer.</think><search>ETH Zurich</search>"
        "<information>ETH Zurich is in Switzerland.</information>"
        "<think>He taught at ETH Zurich</think><answer>Bern</answer>"
    )
    assert R.think_text(response) == "I should find Einstein's employer.\nHe taught at ETH Zurich"
    waypoints = ["Einstein", "ETH Zurich", "Switzerland"]
    # Switzerland only appears in the retrieved <information>, which T^(i) excludes: 2/3
    assert R.waypoint_coverage(waypoints, R.think_text(response)) == pytest.approx(2 / 3)
    assert R.waypoint_coverage(waypoints, response) == 1.0
    assert R.think_text("<think>unclosed Zurich") == "unclosed Zurich"
    assert R.think_text(None) == "" and R.think_text("no tags") == ""


def test_group_normalised_coverage():
    # g_max = 0.5 -> [0.25/0.5, 0.5/0.5, 0/0.5] = [0.5, 1, 0]
    assert R.group_normalised_coverage([0.25, 0.5, 0.0]) == pytest.approx([0.5, 1.0, 0.0])
    # max-scaling, not min-max: [0.25, 0.5, 0.75] / 0.75 = [1/3, 2/3, 1] (min-max: [0, .5, 1])
    assert R.group_normalised_coverage([0.25, 0.5, 0.75]) == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert R.group_normalised_coverage([0.5, 0.5]) == [1.0, 1.0]  # all equal, non-zero
    assert R.group_normalised_coverage([0.0, 0.0, 0.0]) == [0.0, 0.0, 0.0]
    assert R.group_normalised_coverage([]) == []
    with pytest.raises(ValueError):
        R.group_normalised_coverage([0.5, -0.1])


def test_wcr_reward():
    assert R.wcr_reward(True, True, 1.0) == 1.0  # correct: full reward, no bonus on top
    assert R.wcr_reward(1.0, False, 0.0) == 1.0
    assert R.wcr_reward(False, True, 0.5) == pytest.approx(0.15)  # 0 + 0.3 * 1 * 1 * 0.5
    assert R.wcr_reward(False, False, 1.0) == 0.0  # invalid: no partial credit
    assert R.wcr_reward(0, True, 1.0, alpha=0.5) == pytest.approx(0.5)


def test_wcr_rewards_group_worked_example():
    # g = [1, 0.75, 0.25, 0.75, 0]; g_max = 1 comes from the correct rollout, so g~ = g.
    # R = [1, 0.3 * 0.75, 0.3 * 0.25, 0 (invalid), 0] = [1, 0.225, 0.075, 0, 0]
    correct = [True, False, False, False, False]
    valid = [True, True, True, False, True]
    rewards = R.wcr_rewards(correct, valid, [1.0, 0.75, 0.25, 0.75, 0.0])
    assert rewards == pytest.approx([1.0, 0.225, 0.075, 0.0, 0.0])
    # g = [0, 0.5, 0.25, 0.5, 0] -> g~ = [0, 1, 0.5, 1, 0] -> R = [1, 0.3, 0.15, 0, 0]
    rewards = R.wcr_rewards(correct, valid, [0.0, 0.5, 0.25, 0.5, 0.0])
    assert rewards == pytest.approx([1.0, 0.3, 0.15, 0.0, 0.0])
    with pytest.raises(ValueError):
        R.wcr_rewards([True], [True, True], [0.5, 0.5])


# ---- EVO-RAG step signals (§3.3, §3.6, Table 2) -------------------------------------------


def test_retrieval_hit_and_bonus():
    steps = [["p1", "p2"], ["p3", "ev"], ["ev"]]
    assert R.retrieval_hit(steps, "ev") == 1  # first hit at the second search (index 1)
    assert R.retrieval_hit(steps, "p9") is None
    assert R.retrieval_hit([], "ev") is None
    assert R.retrieval_bonus(steps, "ev") == [-1, 1, 1]
    assert R.retrieval_bonus(steps, ["p2", "p9"]) == [1, -1, -1]
    assert R.step_count(steps) == 3 and R.step_count([[], []]) == 2


def test_query_redundancy():
    # q1 first -> 0; q2 = 2*q1 -> cos 1 (duplicate, unnormalised); q3 orthogonal to both -> 0;
    # q4 = (1, 1): cos with (1, 0) and (0, 3) is 1/sqrt(2) each -> 0.7071
    vecs = [[1.0, 0.0], [2.0, 0.0], [0.0, 3.0], [1.0, 1.0]]
    assert R.query_redundancy(vecs) == pytest.approx([0.0, 1.0, 0.0, 1 / math.sqrt(2)])
    assert R.query_redundancy([[1.0, 0.0], [-1.0, 0.0]]) == pytest.approx([0.0, -1.0])
    assert R.query_redundancy([[0.0, 0.0], [1.0, 0.0]]) == [0.0, 0.0]  # zero vector
    assert R.query_redundancy([]) == []
    with pytest.raises(ValueError):
        R.query_redundancy([[1.0, 0.0], [1.0, 0.0, 0.0]])


def test_answer_correctness():
    assert R.answer_correctness("Ulm", "ulm") == 1.0
    # EM 0, F1: P = 1/3, R = 1 -> 0.5; r_ans = (0 + 0.5)/2
    assert R.answer_correctness("born in Ulm", "Ulm") == pytest.approx(0.25)


def test_progress_ratio_and_scheduled_weights():
    assert R.progress_ratio(1, 20) == 0.0 and R.progress_ratio(20, 20) == 1.0
    assert R.progress_ratio(3, 5) == 0.5 and R.progress_ratio(1, 1) == 0.0
    with pytest.raises(ValueError):
        R.progress_ratio(6, 5)
    # Discovery (stage 1): Start -> Mid; Refinement (stage 2): Mid -> End
    assert R.scheduled_weight("retrieval", 1, 5, stage=1) == pytest.approx(2.0)
    assert R.scheduled_weight("retrieval", 5, 5, stage=1) == pytest.approx(1.0)
    assert R.scheduled_weight("retrieval", 3, 5, stage=2) == pytest.approx(0.75)  # (1 + .5)/2
    assert R.scheduled_weight("overlap", 3, 5, stage=2) == pytest.approx(0.85)  # (.5 + 1.2)/2
    assert R.scheduled_weight("refusal", 4, 5, stage=2) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        R.scheduled_weight("step", 1, 5, stage=3)


def test_retrieval_action_penalty():
    assert R.retrieval_action_penalty(0.9, 0.2) == 0.0  # early: p < 0.3
    assert R.retrieval_action_penalty(0.9, 0.3) == -1.0  # late and redundant
    assert R.retrieval_action_penalty(0.0, 0.9) == 0.0  # first query / orthogonal
    assert R.retrieval_action_penalty(-0.2, 0.9) == 0.0


def test_evo_rag_step_rewards_worked_example():
    # T_max = 5, Refinement (Mid -> End).
    # t=1, p=0:    w_b=1, w_l=.8, w_g=.5, w_eta=.05; miss, no overlap: -1 - .05 = -1.05
    # t=2, p=.25:  w_b=.875, w_l=.7, w_g=.675, w_eta=.0625; hit, r_act=0 (p<.3), overlap .8:
    #              .875 - .675*.8 - .0625 = .2725
    # t=3 (ANSWER), p=.5: w_k=.55, w_eta=.075; r_ans = 1: .55 - .075 = .475
    got = R.evo_rag_step_rewards([-1, 1], [0.0, 0.8], t_max=5, stage=2, answer_score=1.0)
    assert got == pytest.approx([-1.05, 0.2725, 0.475])
    # T_max = 3, Discovery (Start -> Mid), three hits, overlaps [0, .5, .5]:
    # t=1, p=0:  2.0 - .02 = 1.98
    # t=2, p=.5: w_b=1.5, w_l=1.15, w_g=.3, w_eta=.035, r_act=-1: 1.5 - 1.15 - .15 - .035 = .165
    # t=3, p=1:  w_b=1, w_l=.8, w_g=.5, w_eta=.05: 1 - .8 - .25 - .05 = -.1
    got = R.evo_rag_step_rewards([1, 1, 1], [0.0, 0.5, 0.5], t_max=3, stage=1)
    assert got == pytest.approx([1.98, 0.165, -0.1])
    assert R.evo_rag_step_rewards([], [], t_max=5) == []


def test_evo_rag_step_rewards_rejects_bad_input():
    with pytest.raises(ValueError):
        R.evo_rag_step_rewards([True, False], [0.0, 0.1], t_max=5)  # booleans, not ±1
    with pytest.raises(ValueError):
        R.evo_rag_step_rewards([1, 1], [0.0], t_max=5)
    with pytest.raises(ValueError):
        R.evo_rag_step_rewards([1, 1, 1], [0.0, 0.0, 0.0], t_max=3, answer_score=1.0)
