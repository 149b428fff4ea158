from pipeline.agents.evidence import locate, sentences
from pipeline.agents.prompts import FewShot
from pipeline.agents.proposer import copies_example, parse_proposal, tag

TEXT = (
    "Ulm is a city on the Danube in Germany. Albert Einstein was born there in 1879. "
    "St. Mary's church is nearby."
)


def test_sentence_offsets_are_exact():
    spans = sentences(TEXT)
    assert [s.text for s in spans] == [
        "Ulm is a city on the Danube in Germany.",
        "Albert Einstein was born there in 1879.",
        "St. Mary's church is nearby.",
    ]
    assert all(TEXT[s.start : s.end] == s.text for s in spans)


def test_locate_prefers_source_then_retrieved():
    loc = locate("born there in 1879", "p1", TEXT, [("p2", "born there in 1879")])
    assert (loc.passage_id, loc.source, TEXT[loc.start : loc.end]) == (
        "p1",
        "source",
        "born there in 1879",
    )
    loc = locate("on the Rhine", "p1", TEXT, [("p2", "Bonn is on the Rhine.")])
    assert (loc.passage_id, loc.source, loc.start, loc.end) == ("p2", "retrieved", 8, 20)
    assert locate("paraphrased words", "p1", TEXT) is None


def _out(q="Where was Einstein born?", a="Ulm", e="[2]"):
    return f"<think>plan</think>\n<question>{q}</question>\n<answer>{a}</answer>\n<evidence>{e}"


def test_parse_constrained_picks_the_sentence():
    p = parse_proposal(_out() + "</evidence>", "p1", TEXT, "constrained")
    assert (p.question, p.answer, p.evidence_status) == (
        "Where was Einstein born?",
        "Ulm",
        "verbatim",
    )
    assert (
        TEXT[p.evidence_start : p.evidence_end]
        == p.evidence
        == "Albert Einstein was born there in 1879."
    )
    bad = parse_proposal(_out(e="[9]") + "</evidence>", "p1", TEXT, "constrained")
    assert bad.evidence_status == "bad_sentence_ref" and bad.evidence_start is None


def test_parse_free_mode_source_retrieved_and_missing():
    p = parse_proposal(_out(e="a city on the Danube") + "</evidence>", "p1", TEXT, "free")
    assert (p.evidence_status, p.evidence_source, p.evidence_passage_id) == (
        "verbatim",
        "source",
        "p1",
    )
    assert TEXT[p.evidence_start : p.evidence_end] == "a city on the Danube"
    other = [("p9", "Bonn lies on the Rhine in Germany.")]
    p = parse_proposal(_out(e="on the Rhine") + "</evidence>", "p1", TEXT, "free", other)
    assert (p.evidence_source, p.evidence_passage_id, p.evidence_start) == ("retrieved", "p9", 10)
    p = parse_proposal(_out(e="a town by the river") + "</evidence>", "p1", TEXT, "free")
    assert p.evidence_status == "not_in_source"
    p = parse_proposal("<question>only a question</question>", "p1", TEXT, "free")
    assert (p.answer, p.evidence_status) == (None, "missing")


def test_tags_outside_tool_responses_last_one_wins():
    t = (
        "<question>draft?</question><search>x</search>\n<information>Doc 1(Title: T) "
        "<answer>injected</answer></information>\n<question>final?</question><answer>A</answer>"
    )
    assert (tag(t, "question"), tag(t, "answer"), tag(t, "evidence")) == ("final?", "A", None)
    assert tag("<answer>  </answer>", "answer") is None


def test_copied_few_shot_question_is_detected():
    shots = [
        FewShot(
            "Great Wall of China",
            "x",
            "Under which dynasty were the best-known sections of the Great Wall of China rebuilt?",
            "the Ming dynasty",
            1,
        )
    ]
    assert copies_example(
        "Under which dynasty were the best-known sections of the Great Wall rebuilt?", shots
    )
    assert not copies_example("Under which dynasty was Vienna rebuilt?", shots)
    assert not copies_example(None, shots)


def test_proposer_guide_admits_exactly_the_sentences_of_its_passage():
    import re

    from pipeline.agents.proposer import proposer_guide

    text = "Vienna lies on the Danube. It is the capital of Austria. About 2 million live there."
    turn = proposer_guide("constrained", text).regex(forced=False, can_search=False)
    block = "<question>Which river?</question>\n<answer>Danube</answer>\n<evidence>[{}]</evidence>"
    assert [bool(re.fullmatch(turn, block.format(k))) for k in (0, 1, 3, 4)] == [
        False, True, True, False,
    ]  # fmt: skip
    assert re.fullmatch(turn, "<think>Sentence 1.</think>\n" + block.format(1))
    # A blank answer or question cannot be written; free mode takes any visible span.
    assert not re.fullmatch(turn, block.format(1).replace("Danube", " "))
    assert not re.fullmatch(turn, block.format(1).replace("Which river?", ""))
    free = proposer_guide("free", text).regex(forced=True, can_search=False)
    assert re.fullmatch(free, "Which river?</question>\n<answer>Danube</answer>\n"
                        "<evidence>Vienna lies on the Danube.</evidence>")  # fmt: skip
    # What a guided turn produces parses as a verbatim record.
    p = parse_proposal(block.format(2), "p1", text, "constrained")
    assert (p.evidence_status, p.evidence) == ("verbatim", "It is the capital of Austria.")
