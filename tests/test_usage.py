"""The LLM usage meter (pipeline.llm.usage): what a backend reports is credited to the step
that is metered and, prompt by prompt, to the record an agent named for it."""

from __future__ import annotations

from pipeline.llm import usage


def test_reports_are_credited_to_the_named_records_and_the_rest_to_none():
    with usage.metered() as m:
        with usage.owned(["p1", "p2"], ["a", "b"]):
            usage.report([("p1", 5), ("p2", 3), ("p3", 2)], 40, 10)
            # a rollout's next turn continues its prompt and serves the same record
            with usage.continued(["p1", "p2"], ["p1 turn 2", "p2 turn 2"]):
                usage.report([("p1 turn 2", 4)], 7, 33)
        usage.report([("p1", 1)], None, None)  # outside the block: nobody's
    assert m.by_record == {"a": 9, "b": 3, usage.UNOWNED: 3}
    u = m.usage
    assert (u.llm_calls, u.prompt_tokens_computed, u.prompt_tokens_cached) == (3, 47, 43)
    assert u.generated_tokens == sum(m.by_record.values()) == 15


def test_a_per_request_total_keeps_what_no_prompt_was_given():
    """An OpenAI server reports usage per request: alone, a prompt gets its request's tokens;
    shared, they go to nobody (never split by a guess), and totals stay exact."""
    with usage.metered() as m, usage.owned(["x", "y", "z"], ["a", "b", "c"]):
        usage.report_openai(["x"], {"usage": {"prompt_tokens": 9, "completion_tokens": 4}})
        usage.report_openai(
            ["y", "z"],
            {"usage": {"prompt_tokens": 20, "completion_tokens": 6,
                       "prompt_tokens_details": {"cached_tokens": 16}}},
        )  # fmt: skip
        usage.report_openai(["z"], {})  # a server without usage: a call, nothing counted
    assert m.by_record == {"a": 4, usage.UNOWNED: 6}
    u = m.usage
    assert (u.llm_calls, u.prompt_tokens_computed, u.prompt_tokens_cached) == (3, 13, 16)
    assert u.generated_tokens == 10


def test_nested_meters_hand_their_totals_out_and_nothing_counts_unmetered():
    usage.report([("p", 100)], 100, 0)  # no meter: dropped, no error
    with usage.metered() as outer:
        with usage.metered() as inner, usage.owned(["p"], ["r"]):
            usage.report([("p", 2)], 10, None)
            assert (inner.usage.generated_tokens, outer.usage.generated_tokens) == (2, None)
        assert outer.usage.generated_tokens == 2  # handed out when the inner one closed
    assert outer.by_record == {"r": 2} and outer.usage.prompt_tokens_computed == 10
    assert outer.usage.prompt_tokens_cached is None  # never reported: unknown, not 0
