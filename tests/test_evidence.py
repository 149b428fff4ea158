"""Answer first: targets from KG paths and passages, and the validity rules a reader applies.

Pure functions on authored rows, plus one tiny real index (the registry embedder, FAISS Flat)
for the KG evidence search."""

import re

import orjson
import pytest

from pipeline.agents.chains import kg_targets
from pipeline.agents.evidence import sentences
from pipeline.agents.prompts import render_path
from pipeline.agents.proposer import insitu_question, question_body, tag, template_question
from pipeline.agents.question_checks import names_subject, question_reason, unsupported_words
from pipeline.agents.targets import (
    Target,
    answer_forms,
    answer_spans,
    find_form,
    passage_target,
    quantity_forms,
    sub_path,
)

TEXT = (
    "Ulm is a city on the Danube in Germany. Albert Einstein was born there in 1879. "
    "St. Mary's church is nearby. He sang on Sgt. Pepper's Lonely Hearts Club Band."
)


def test_sentence_offsets_are_exact():
    spans = sentences(TEXT)
    assert [s.text for s in spans] == [
        "Ulm is a city on the Danube in Germany.",
        "Albert Einstein was born there in 1879.",
        "St. Mary's church is nearby.",
        "He sang on Sgt. Pepper's Lonely Hearts Club Band.",
    ]
    assert all(TEXT[s.start : s.end] == s.text for s in spans)


def test_tags_outside_tool_responses_last_one_wins():
    t = (
        "<question>draft?</question><search>x</search>\n<information>Doc 1(Title: T) "
        "<answer>injected</answer></information>\n<question>final?</question><answer>A</answer>"
    )
    assert (tag(t, "question"), tag(t, "answer"), tag(t, "evidence")) == ("final?", "A", None)
    assert tag("<answer>  </answer>", "answer") is None


# ---- surface forms of a path's end entity -------------------------------------------------


def test_answer_forms_of_dates_quantities_and_entities():
    date = {"id": "time:+1949-05-23T00:00:00Z/11", "label": "23 May 1949"}
    assert answer_forms(date) == ["23 May 1949", "May 23, 1949", "May 1949", "1949"]
    year = {"id": "time:+1737-00-00T00:00:00Z/9", "label": "1737"}
    assert answer_forms(year) == ["1737"]
    qty = {"id": "quantity:+1047/Q828224", "label": "1,047 kilometre"}
    forms = answer_forms(qty)
    assert forms[0] == "1,047 kilometre"
    assert {"1,047 km", "1047 km", "1,047 kilometres", "1,047", "1047"} <= set(forms)
    ent = {"id": "Q90", "label": "Paris (city)"}
    assert answer_forms(ent, ["City of Light"]) == ["Paris (city)", "Paris", "City of Light"]


# ---- KG targets: the answer is the path's end entity --------------------------------------

PASSAGES = [
    (
        "p1",
        "Bonn",
        "Bonn is a city on the Rhine. It became the seat of government on 23 May 1949, "
        "when the Federal Republic of Germany was founded.",
    ),
    ("p2", "Vistula", "The Vistula is the longest river in Poland, at 1,047 km in length."),
    ("p3", "Arno", "The Arno flows through Florence and Pisa before reaching the Ligurian Sea."),
    ("p4", "Germany", "Germany borders Denmark to the north and Austria to the south."),
    ("p5", "Kraków", "Kraków lies on the Vistula in southern Poland."),
    ("p6", "Paris", "Paris is the capital of France, on the Seine."),
]


def _path(*parts):
    """('Q1', 'Bonn'), ('P1', 'rel'), ('Q2', 'X'), ... -> a KG path dict."""
    nodes = [{"id": i, "label": lbl} for i, lbl in parts[::2]]
    rels = [{"id": i, "label": lbl} for i, lbl in parts[1::2]]
    return {"target_path": {"nodes": nodes, "relations": rels}}


@pytest.fixture(scope="module")
def tiny_retriever(tmp_path_factory, embedder):
    from pipeline.retrieval.corpus import load_corpus
    from pipeline.retrieval.embedding import corpus_fingerprint, embed_corpus
    from pipeline.retrieval.faiss_index import Retriever, build_faiss_index

    root = tmp_path_factory.mktemp("tiny_index")
    src = root / "corpus.jsonl"
    src.write_bytes(
        b"".join(orjson.dumps({"id": i, "title": t, "text": x}) + b"\n" for i, t, x in PASSAGES)
    )
    passages = root / "idx" / "passages.parquet"
    load_corpus(src, passages)
    fp = corpus_fingerprint(passages)
    res = embed_corpus(embedder, passages, root / "idx" / "emb", 100, fp, progress=False)
    meta = {"model": embedder.model_ref, "query_prompt": "", "passage_prompt": "",
            "fingerprint": fp}  # fmt: skip
    build_faiss_index(res.shards, res.dim, "Flat", root / "idx", meta)
    return Retriever(root / "idx", embedder)


def test_kg_answers_are_the_path_end_entity_with_verbatim_support(tiny_retriever):
    day = ("time:+1949-05-23T00:00:00Z/11", "23 May 1949")
    date = _path(("Q1", "Federal Republic of Germany"), ("P571", "inception"), day)
    qty = _path(("Q5", "Kraków"), ("P206x", "on river"), ("Q6", "Vistula"), ("P2043", "length"),
                ("quantity:+1047/Q828224", "1,047 kilometre"))  # fmt: skip
    ent = _path(("Q7", "Arno"), ("P403", "mouth of the watercourse"), ("Q8", "Ligurian Sea"))
    alias = _path(("Q9", "Paris"), ("P17", "country"), ("Q10", "French Republic"))
    none = _path(("Q11", "Bonn"), ("P17", "country"), ("Q12", "Narnia"))
    # Bonn's own article states the date, but no sentence of it says anyone died then
    unstated = _path(("Q1", "Bonn"), ("P570", "date of death"), day)
    paths = [(date, 1), (qty, 2), (ent, 1), (alias, 1), (none, 1)]
    items = [(p, h, PASSAGES[3]) for p, h in paths] + [(unstated, 1, PASSAGES[0])]
    out = kg_targets(tiny_retriever, items, {"Q10": ["France"]}, k=6)
    t = out[0]  # a date: the passage writes the KG's value, so the answer is that form
    assert (t.answer, t.passage_id, t.source) == ("23 May 1949", "p1", "retrieved")
    assert t.evidence == PASSAGES[0][2].split(". ")[1]  # it says "founded"
    assert PASSAGES[0][2][t.start : t.end] == t.evidence and t.answer in t.evidence
    t = out[1]  # a quantity written as "1,047 km", supported by the final hop's subject
    assert t.answer == "1,047 km" and "1,047 kilometre" in t.aliases
    assert t.waypoints == ["Kraków", "Vistula"] and t.subject == "Kraków"
    assert t.passage_id == "p2"
    assert out[2].answer == "Ligurian Sea" and out[2].passage_id == "p3"
    # an alias: the passage says "France", the KG's label is "French Republic"
    assert out[3].answer == "France" and out[3].aliases[:2] == ("France", "French Republic")
    # no passage states the answer: not posed, and said so
    assert not out[4].posed and out[4].reason == "no_supporting_passage"
    assert out[4].answer is None and out[4].facts == "Bonn -> country -> Narnia"
    # the answer and the subject without a word stating the final hop's property
    assert out[5].reason == "no_supporting_passage" and out[5].answer is None


def test_a_chain_states_each_hop_and_a_hop_no_passage_states_leaves_it_unposed(tiny_retriever):
    """Hop by hop: each hop's sentence names its subject (or lies in its article), the
    property's cue and its object; the bridge is hidden. A hop that no passage states, first
    or last, leaves the task unposed with the position of the missing hop."""
    river = ("P206x", "on river")
    length = ("P2043", "length"), ("quantity:+1047/Q828224", "1,047 kilometre")
    chained = _path(("Q5", "Kraków"), river, ("Q6", "Vistula"), *length)
    located = ("P131", "located in")
    first = _path(("Q13", "Warsaw"), located, ("Q5", "Kraków"), river, ("Q6", "Vistula"))
    day = ("time:+1949-05-23T00:00:00Z/11", "23 May 1949")
    last = _path(("Q5", "Kraków"), river, ("Q6", "Vistula"), ("P571", "inception"), day)
    items = [(p, 2, PASSAGES[4]) for p in (chained, first, last)]
    t, no_first, no_last = kg_targets(tiny_retriever, items, {}, k=6)
    assert [(h.passage_id, h.subject, h.object) for h in t.chain] == [
        ("p5", "Kraków", "Vistula"),
        ("p2", "Vistula", "1,047 km"),
    ]
    for h in t.chain:  # verbatim, at its offsets
        text = next(x for i, _, x in PASSAGES if i == h.passage_id)
        assert text[h.start : h.end] == h.text
    assert t.hops == 2 and t.evidence == t.chain[-1].text and "Vistula" in t.hidden
    for u, hop in ((no_first, 1), (no_last, 2)):
        assert not u.posed and u.reason == "no_supporting_passage" and u.missing_hop == hop


def test_many_valued_hops_shorten_or_drop_the_path():
    p = _path(("Q1", "Switzerland"), ("P47", "shares border with"), ("Q2", "Germany"),
              ("P571", "inception"), ("Q3", "1949"))["target_path"]  # fmt: skip
    # a 2-hop question would ask about "the country bordering Switzerland": cut to 1 hop
    assert [n["label"] for n in sub_path(p, 2)["nodes"]] == ["Germany", "1949"]
    border = _path(("Q1", "France"), ("P47", "shares border with"), ("Q2", "Spain"))
    assert sub_path(border["target_path"], 1) is None
    # a path that ends on many-valued hops is cut back to its last single-valued one
    border = ("P47", "shares border with")
    p = _path(("Q1", "Vistula"), ("P131", "located in"), ("Q2", "Masovian Voivodeship"),
              ("P131", "located in"), ("Q3", "Poland"), border, ("Q4", "Germany"), border,
              ("Q5", "France"))["target_path"]  # fmt: skip
    cut = sub_path(p, 5)
    assert [n["label"] for n in cut["nodes"]] == ["Vistula", "Masovian Voivodeship", "Poland"]
    assert [r["id"] for r in cut["relations"]] == ["P131", "P131"]
    assert [n["label"] for n in sub_path(p, 1)["nodes"]] == ["Masovian Voivodeship", "Poland"]


def test_a_rounded_quantity_is_an_accepted_form():
    forms = quantity_forms("quantity:+2755309", "2,755,309")
    assert forms[:2] == ["2,755,309", "2755309"] and "2.8 million" in forms
    assert "2.76 million" in forms and "3 million" not in forms
    assert find_form("Rome has around 2.8 million inhabitants.", forms) == (16, 27)
    assert not any("million" in f for f in quantity_forms("quantity:+1047", "1,047 kilometre"))


def test_passage_targets_take_a_span_of_the_evidence_by_task_type():
    text = (
        "Leipzig was first mentioned in 1015 in the chronicle of Thietmar of Merseburg. "
        "The city has 26 districts and about 600,000 inhabitants."
    )
    passage = ("p9", "Leipzig", text)
    t = passage_target(passage, "temporal", 0)
    assert (t.answer, t.span_kind, t.source) == ("1015", "date", "source")
    assert t.evidence == text[t.start : t.end] and t.answer in t.evidence
    assert passage_target(passage, "aggregation", 0).span_kind == "number"
    name = passage_target(passage, "factual", 0)
    assert name.answer == "Thietmar of Merseburg" and name.subject == "Leipzig"
    spans = answer_spans(text, "Leipzig")
    assert all(text[a:b] != "Leipzig" for a, b in spans["name"])  # never the title itself
    assert not passage_target(("p0", "X", "no spans here at all"), "factual", 0).posed


# ---- the validity rules, one reason each -----------------------------------------------------


@pytest.mark.parametrize(
    ("question", "answer", "reason"),
    [
        ("", "1949", "empty_question"),
        ("When did Bonn become the capital?", "  ", "empty_answer"),
        ("What is the source of the information in the passage?", "Bonn", "refers_to_unseen_text"),
        ("According to the text, when did Bonn become the capital?", "1949",
         "refers_to_unseen_text"),
        ("Which city does this sentence describe in Bonn?", "Bonn", "answer_in_question"),
        ("Bonn became the capital of West Germany.", "1949", "not_a_question"),
        ("Bonn became the capital in which year", "1949", "not_a_question"),
        ("When did Bonn become the capital?\nevidence> The better place", "1949", "format_debris"),
        ("When did Bonn become the capital?", "1949 <answer>", "format_debris"),
        ("Question: when did Bonn become the capital?", "1949", "format_debris"),
        ("When did Bonn become the capital?", "I will look up the United Kingdom", "non_answer"),
        ("Which cities did Bonn outlast?", "All of them.", "non_answer"),
        ("Why did Bonn become the capital?",
         "He went deaf in 1795 after a series of accidents that left him unable to hear",
         "answer_too_long"),
        ("When did the city become the capital?", "1949", "no_named_subject"),
        ("When did Bonn become the capital of West Germany?", "1949", None),
    ],
)  # fmt: skip
def test_each_invalid_reason(question, answer, reason):
    assert question_reason(question, answer, (), "Bonn") == reason


@pytest.mark.parametrize(
    ("question", "kind", "ok"),
    [
        ("In which year did Richard Wagner marry?", "date", True),
        ("In which decade did Richard Wagner marry?", "date", False),  # the answer is a year
        ("When did Richard Wagner marry?", "date", True),
        ("Who did Richard Wagner marry in 1836?", "date", False),
        ("In which year did Richard Wagner marry?", "person", False),
        ("Who did Richard Wagner marry in 1836?", "person", True),
        ("How many cantons does Switzerland have?", "number", True),
        ("Which cantons does Switzerland have?", "number", False),
        ("In which state does the Spree rise?", "place", True),
        ("How many states does the Spree cross?", "place", False),
        ("What did Richard Wagner compose?", "name", True),
        ("When did Richard Wagner compose?", "name", False),
    ],
)  # fmt: skip
def test_the_question_asks_for_the_kind_of_answer_it_has(question, kind, ok):
    want = None if ok else "wrong_question_type"
    answer = "1840" if kind == "date" else "x9"
    assert question_reason(question, answer, (), None, kind) == want
    # the guide writes only questions of the right kind (the grain is the check's)
    grain = "decade" in question
    assert bool(re.fullmatch(question_body(kind), question + "</question>")) == (ok or grain)


@pytest.mark.parametrize(
    ("question", "alone"),
    [
        ("In popular music, The Beatles, formed in Liverpool in what year, became the "
         "best-selling band in history?", True),
        ("In the Great Court Run, students try to circle the court in the time it takes the "
         "clock to strike twelve, a challenge made famous by the film what?", True),
        ("After 1949 the city belonged to East Germany until reunification in what year?", False),
        ("In 1959 he joined what and the Hurricanes?", False),
        ("In June 1860 what happened?", False),  # a month is not what the question is about
        ("What did Bonn become in 1949?", False),  # one short name: the title must be named
        ("It was founded in Bonn by whom?", False),  # an opening pronoun is not a name
        ("Which river flows through the city of Florence?", False),
        ("Which river flows through the city of Florence and Pisa?", True),
    ],
)  # fmt: skip
def test_a_passage_question_may_name_other_things_than_its_title(question, alone):
    """Passage tasks: a question that names what it asks about and points back at nothing
    need not name the passage's title; KG tasks must name the path's start entity."""
    want = None if alone else "no_named_subject"
    assert question_reason(question, "x9", (), "Leipzig", names_suffice=True) == want
    assert question_reason(question, "x9", (), "Leipzig") == "no_named_subject"


def test_aliases_in_the_question_and_copied_examples_are_invalid():
    assert question_reason("Which country is the French Republic in?", "France",
                           ("France", "French Republic"), None) == "answer_in_question"  # fmt: skip
    ex = "Under which dynasty were the best-known sections of the Great Wall of China rebuilt?"
    q = "Under which dynasty were the best-known sections of the Great Wall rebuilt?"
    assert question_reason(q, "Qing", examples=[ex]) == "copies_few_shot_example"
    assert question_reason("Under which dynasty was Vienna rebuilt?", "Qing", examples=[ex]) is None
    # the answer bound is in tokens of the model's tokenizer when one is given
    assert question_reason("Who led Bonn?", "a b c", count_tokens=lambda s: 40) == (
        "answer_too_long"
    )


def test_names_subject():
    assert names_subject("In which year was Albert Einstein born?", "Albert Einstein")
    assert not names_subject("Which river flows into the sea?", "Amazon River")
    assert names_subject("When was the University of Paris founded?", "University of Paris 1896")


def test_template_question_words_each_hop_by_its_property():
    t = Target(
        kind="kg", answer="Germany", subject="Albert Einstein",
        path={"nodes": [{"id": "Q1", "label": "Albert Einstein"}, {"id": "Q2", "label": "Ulm"},
                        {"id": "Q3", "label": "Germany"}],
              "relations": [{"id": "P19", "label": "place of birth"},
                            {"id": "P17", "label": "country"}]},
    )  # fmt: skip
    q = template_question(t)
    assert q == "In which country is the place of birth of Albert Einstein?"
    assert question_reason(q, t.answer, (t.answer,), t.subject, "place") is None
    # a property without a wording reads from its label, opened by the answer's kind
    other = {"id": "P9999", "label": "record label"}
    rels = [t.path["relations"][0], other]
    dated = Target(**{**t.__dict__, "answer_kind": "date", "path": {**t.path, "relations": rels}})
    assert template_question(dated) == (
        "In what year was the record label of the place of birth of Albert Einstein?"
    )
    path = {"nodes": t.path["nodes"][1:], "relations": [{"id": "P571", "label": "inception"}]}
    inception = Target(**{**t.__dict__, "answer": "1949", "answer_kind": "date",
                          "subject": "Germany", "path": path})  # fmt: skip
    q = template_question(inception)
    assert q == "When was Germany founded?"
    assert question_reason(q, "1949", (), "Germany", "date", context="Germany -> inception") is None
    assert template_question(Target(kind="passage")) is None


@pytest.mark.parametrize(
    ("title", "text", "task", "question"),
    [
        ("Leipzig", "Leipzig was first mentioned in 1015 in the chronicle of Thietmar of "
         "Merseburg, and it received its town charter around 1165 from Margrave Otto.",
         "temporal", "Leipzig was first mentioned in what year in the chronicle of Thietmar of "
         "Merseburg?"),
        ("Galileo Galilei", "He was summoned to Rome and tried by the Roman Inquisition in 1633.",
         "factual", "Galileo Galilei was summoned to Rome and tried by whom in 1633?"),
        ("Switzerland", "The country is divided into 26 cantons.", "aggregation",
         "Switzerland is divided into how many cantons?"),
        ("Ringo Starr", "His stepfather, Harry Graves, encouraged his interest in music.",
         "factual", None),  # an answer in apposition reads as no question
    ],
)  # fmt: skip
def test_insitu_question_replaces_the_answer_with_its_question_phrase(title, text, task, question):
    t = passage_target(("p", title, text), task, 0)
    q = insitu_question(t)
    assert q == question
    if q is not None:  # what the rules build passes the rules, the answer left out
        assert (
            question_reason(
                q,
                t.answer,
                t.aliases,
                t.subject,
                t.answer_kind,
                context=f"{t.evidence} {t.subject}",
                max_unsupported=0,
            )
            is None
        )


def _at(subject: str, evidence: str, answer: str, kind: str = "name") -> Target:
    return Target(kind="passage", answer=answer, evidence=evidence, subject=subject,
                  answer_at=evidence.index(answer), answer_kind=kind)  # fmt: skip


@pytest.mark.parametrize(
    ("target", "question"),
    [
        # "he" is Darwin, not the book the passage is about: no substitution, and the
        # question that keeps "he" names nothing, so the rules reject it
        (_at("On the Origin of Species", "For about eight years he studied barnacles before "
             "starting a large book on species in 1856.", "1856", "date"),
         "For about eight years he studied barnacles before starting a large book on species "
         "in what year?"),
        # another person is named before "he": the sentence is about Einstein, not Ulm
        (_at("Ulm", "Albert Einstein was born in Ulm in 1879; he later studied at ETH Zurich "
             "in Zürich.", "ETH Zurich"),
         "Albert Einstein was born in Ulm in 1879; he later studied at what in Zürich?"),
        # a clause opening with its verb takes the sentence, whose "they" is the subject
        (_at("The Beatles", "In 1968 they set up Apple Corps, and released the double album "
             "The Beatles, widely called the White Album.", "White Album"),
         "In 1968 The Beatles set up Apple Corps, and released the double album The Beatles, "
         "widely called what?"),
        # after a number's question phrase the pronoun cannot be the answer
        (_at("Johann Sebastian Bach", "In 1700, aged 14, he left for Lüneburg.", "14",
             "number"),
         "In 1700, aged how many, Johann Sebastian Bach left for Lüneburg?"),
        # "between X and Y" keeps its "and Y"
        (_at("Charles Darwin", "In 1860 an exchange took place between Thomas Henry Huxley, a "
             "defender of Darwin, and Samuel Wilberforce.", "Thomas Henry Huxley"),
         "In 1860 an exchange took place between what, a defender of Darwin, and Samuel "
         "Wilberforce?"),
        # "the city" as the subject after an opener, in a city's article
        (_at("Leipzig", "After 1949 the city belonged to East Germany until reunification in "
             "1990.", "1990", "date"),
         "After 1949 Leipzig belonged to East Germany until reunification in what year?"),
        # ... not where "the city" is not the subject
        (_at("Leipzig", "At the edge of the city stands a castle built in 1200.", "1200",
             "date"), "At the edge of the city stands a castle built in what year?"),
        # ... and a college's "the city" is another place
        (_at("Trinity College, Cambridge", "In 1209 the city received scholars from Oxford.",
             "Oxford"), "In 1209 the city received scholars from what?"),
        # "It" for a person's article is something else
        (_at("Alan Turing", "It was founded in 1946 by the National Physical Laboratory.",
             "National Physical Laboratory"), "It was founded in 1946 by whom?"),
    ],
)  # fmt: skip
def test_insitu_pronouns_stand_for_the_subject_only_where_they_can(target, question):
    q = insitu_question(target)
    assert q == question
    # what keeps an unresolved pronoun and names neither its subject nor anything else is not
    # self-contained; the others pass the rules
    why = question_reason(q, target.answer, (), target.subject, names_suffice=True)
    unresolved = not names_subject(q, target.subject) and re.search(r"\b(?:he|It|the city)\b", q)
    assert why == ("no_named_subject" if unresolved else None)


def test_a_question_about_what_its_evidence_does_not_say_is_not_grounded():
    ev = "On 2 December 1804 Napoleon crowned himself Emperor of the French at Notre-Dame."
    kw = {"context": f"{ev} Napoleon", "max_unsupported": 0}
    bad = "Who was the first European to be crowned Emperor of the French by Napoleon?"
    assert unsupported_words(bad, ev) == ["first", "european"]
    assert question_reason(bad, "Pius VII", (), "Napoleon", "person", **kw) == "not_grounded"
    good = "Where did Napoleon crown himself Emperor of the French?"
    assert question_reason(good, "Notre-Dame", (), "Napoleon", "place", **kw) is None


def test_glued_subject_and_unsupported_superlatives_are_rejected():
    ev = "The Fifth and Sixth symphonies were premiered together in Vienna in December 1808."
    kw = {"context": f"{ev} Ludwig van Beethoven", "max_unsupported": 0}
    glued = "In which month were the Fifth and Sixth symphonies premieredLudwig van Beethoven?"
    assert question_reason(glued, "December 1808", (), "Ludwig van Beethoven", "date", **kw) == (
        "format_debris"
    )
    first = "What was the first symphony of Ludwig van Beethoven premiered in Vienna?"
    assert question_reason(first, "Fifth", (), "Ludwig van Beethoven", "name", **kw) == (
        "not_grounded"
    )


def test_rules_first_asks_the_llm_only_where_the_rule_built_question_fails():
    """passage_questions=rules_first: a span whose in-situ question passes every rule is
    posed without any LLM call (no generator is even needed), counted as a template."""
    from pipeline.agents.proposer import ProposerSettings, ProposerTask, propose

    text = "He was summoned to Rome and tried by the Roman Inquisition in 1633."
    t = passage_target(("p1", "Galileo Galilei", text), "factual", 0)
    task = ProposerTask("p1", "Galileo Galilei", text, 1, "factual", t)
    s = ProposerSettings(0.7, 0.95, 32, 1, passage_questions="rules_first")
    [res] = propose(None, None, [task], [], [], s)
    assert (res.valid, res.question_source, res.attempts) == (True, "template", 0)
    assert (
        res.proposal.question == "Galileo Galilei was summoned to Rome and tried by whom in 1633?"
    )
    assert res.proposal.answer == "Roman Inquisition" and res.rollout.stop_reason == "rule_built"


def test_kg_rules_first_uses_a_worded_property_template_without_the_llm():
    """kg_questions=rules_first: a KG slot whose final property has a wording is posed from
    the template with no LLM call (no generator is even needed)."""
    from pipeline.agents.proposer import ProposerSettings, ProposerTask, propose

    text = "The Spree rises in the Lusatian Highlands of Saxony."
    path = _path(("Q1", "Spree"), ("P131", "located in the administrative territorial entity"),
                 ("Q2", "Saxony"))["target_path"]  # fmt: skip
    t = Target(kind="kg", answer="Saxony", aliases=("Saxony",), evidence=text, passage_id="p1",
               start=0, end=len(text), answer_at=text.index("Saxony"), subject="Spree",
               facts=render_path(path), path=path, answer_kind="place")  # fmt: skip
    task = ProposerTask("p1", "Spree", text, 1, "factual", t)
    s = ProposerSettings(0.7, 0.95, 32, 1, kg_questions="rules_first")
    [res] = propose(None, None, [task], [], [], s)
    assert (res.valid, res.question_source, res.attempts) == (True, "template", 0)
    assert res.proposal.question == "In which administrative region is Spree located?"
