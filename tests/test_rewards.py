"""Hand-worked examples for every reward equation (EVE-Agent eqs. 2-4, 9, 14-16, 19)."""

import math

import pytest

from pipeline import rewards as R


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
