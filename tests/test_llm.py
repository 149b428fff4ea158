"""The transformers backend with the real Gemma-3-270M shipped on the registry (CPU)."""

import pytest

from pipeline.llm.base import SamplingParams, cut_at_stop

pytestmark = pytest.mark.slow

PROMPTS = [
    "Question: What is the capital of France?\nAnswer:",
    "Question: Who wrote the play Hamlet?\nAnswer:",
    "Question: Which river flows through Vienna?\nAnswer:",
]


def test_cut_at_stop():
    assert cut_at_stop(" Paris\nQuestion: x", ["\nQuestion", "\n"]) == " Paris"
    assert cut_at_stop("abc", []) == "abc"


def test_generate_returns_n_samples_and_honours_stop(llm):
    out = llm.generate(
        PROMPTS, SamplingParams(n=3, temperature=1.0, max_tokens=16, stop=("\n",), seed=7)
    )
    assert [len(o) for o in out] == [3, 3, 3]
    assert all("\n" not in s for o in out for s in o)
    again = llm.generate(
        PROMPTS, SamplingParams(n=3, temperature=1.0, max_tokens=16, stop=("\n",), seed=7)
    )
    assert again == out  # seeded sampling is reproducible


def test_greedy_is_batch_invariant_and_sensible(llm):
    p = SamplingParams(n=1, temperature=0.0, max_tokens=8, stop=("\n",))
    batched = llm.generate(PROMPTS, p)
    single = [llm.generate([q], p)[0] for q in PROMPTS]
    assert batched == single
    assert "paris" in batched[0][0].lower()
    # n > 1 greedy samples share one prefill and must all equal the single greedy answer
    assert (
        llm.generate(PROMPTS[:1], SamplingParams(n=3, temperature=0.0, max_tokens=8, stop=("\n",)))[
            0
        ]
        == [batched[0][0]] * 3
    )


def test_score_is_teacher_forced_log_probability(llm):
    conts = [" Paris", " William Shakespeare", " the Danube"]
    batched = llm.score(PROMPTS, conts)
    single = [llm.score([p], [c])[0] for p, c in zip(PROMPTS, conts, strict=True)]
    assert batched == pytest.approx(single, abs=1e-3)
    assert all(x < 0 for x in batched)
    # the right answer is more likely than a wrong one
    assert llm.score(PROMPTS[:1], [" Paris"])[0] > llm.score(PROMPTS[:1], [" Berlin"])[0]
    assert llm.count_tokens("Paris") >= 1
