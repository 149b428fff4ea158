"""Multi-hop targets without a model: two-passage tasks (bridge, comparison), the rules a
multi-hop question obeys (the bridge stays hidden, a comparison names its options), the
connected-reasoning and one-search decisions, and obfuscated subjects that the graph makes
unique. Authored entities, passages and graph files; pure functions and one real DuckDB."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.agents.composed import (
    bridge_target,
    comparison_target,
    two_passage_target,
)
from pipeline.agents.proposer import rule_question, template_question
from pipeline.agents.question_checks import question_reason
from pipeline.agents.targets import Hop, Target, chain_text, find_form, obfuscate
from pipeline.generation.gate_stats import connectedness, leaks_in_top_k, redundant_hops
from pipeline.kg.descriptions import describe
from pipeline.kg.entity_facts import Entity, EntityFacts, Fact
from schemas.tables import EDGES, ENTITIES

EINSTEIN = ("p1", "Albert Einstein", "Albert Einstein was born in Ulm in 1879. He died in 1955.")
ULM = (
    "p2",
    "Ulm",
    "Ulm is a city on the Danube. Ulm received its town charter in 1181 from the emperor.",
)
BOHR = ("p3", "Niels Bohr", "Niels Bohr was a physicist. Bohr was born on 7 October 1885.")
TEXTS = {p[0]: p for p in (EINSTEIN, ULM, BOHR)}


def _einstein_facts() -> EntityFacts:
    ulm = {"id": "Q3012", "label": "Ulm"}
    born = {"id": "time:+1879-03-14T00:00:00Z/11", "label": "14 March 1879"}
    bohr_born = {"id": "time:+1885-10-07T00:00:00Z/11", "label": "7 October 1885"}
    einstein = Entity(
        "Q937",
        "Albert Einstein",
        (),
        frozenset({"Q169470"}),
        ("p1",),
        (
            Fact("P19", "place of birth", ulm, None, ("p2",)),
            Fact("P569", "date of birth", born, 18790314.0),
        ),
    )
    bohr = Entity(
        "Q7085",
        "Niels Bohr",
        (),
        frozenset({"Q169470"}),
        ("p3",),
        (Fact("P569", "date of birth", bohr_born, 18851007.0),),
    )
    ulm_e = Entity("Q3012", "Ulm", (), frozenset({"Q515"}), ("p2",), ())
    return EntityFacts(
        by_passage={"p1": "Q937", "p2": "Q3012", "p3": "Q7085"},
        entities={"Q937": einstein, "Q7085": bohr, "Q3012": ulm_e},
        partners={("Q937", "P569"): ["Q7085"]},
    )


def test_a_bridge_asks_the_linked_articles_fact_without_naming_the_bridge():
    facts = _einstein_facts()
    t = bridge_target(EINSTEIN, facts.about("p1"), facts, TEXTS, "temporal", 0)
    assert t is not None and t.kind == "bridge" and t.hops == 2
    assert [h.passage_id for h in t.chain] == ["p1", "p2"]
    assert t.chain[0].text == "Albert Einstein was born in Ulm in 1879."
    assert t.chain[1].text == "Ulm received its town charter in 1181 from the emperor."
    assert t.answer == "1181"
    q = rule_question(t)
    described = "The place of birth of Albert Einstein"
    assert q == f"{described} received its town charter in what year from the emperor?"
    assert "Ulm" in t.hidden and not find_form(q, t.hidden)
    assert question_reason(q, t.answer, t.aliases, t.subject, "date", hidden=t.hidden) is None
    # each hop's sentence is verbatim in its passage
    for h in t.chain:
        assert TEXTS[h.passage_id][2][h.start : h.end] == h.text


def test_a_comparison_names_both_entities_and_answers_the_earlier_one():
    facts = _einstein_facts()
    t = comparison_target(EINSTEIN, facts.about("p1"), facts, TEXTS, 0)
    assert t is not None and t.kind == "comparison" and t.hops == 2
    assert t.ruled == "Who was born first, Albert Einstein or Niels Bohr?"
    assert t.answer == "Albert Einstein" and set(t.options) == {"Albert Einstein", "Niels Bohr"}
    assert [h.object for h in t.chain] == ["1879", "7 October 1885"]
    # the comparison task type asks a comparison first, any other a bridge first
    assert (
        two_passage_target(EINSTEIN, facts.about("p1"), facts, TEXTS, "comparison", 0).kind
        == "comparison"
    )
    assert (
        two_passage_target(EINSTEIN, facts.about("p1"), facts, TEXTS, "factual", 0).kind == "bridge"
    )
    # the paper's filter would reject a question naming its answer; a comparison must name it
    q, a = t.ruled, t.answer
    assert question_reason(q, a, t.aliases, t.subject, "person", options=t.options) is None
    assert question_reason(q, a, t.aliases, t.subject, "person") == "answer_in_question"
    one = "Who was born first, Albert Einstein or Max Planck?"
    assert (
        question_reason(one, a, t.aliases, t.subject, "person", options=t.options)
        == "wrong_options"
    )


def test_no_two_passage_task_where_the_link_is_not_stated():
    facts = _einstein_facts()
    unstated = ("p1", "Albert Einstein", "Albert Einstein was a physicist.")
    assert (
        bridge_target(unstated, facts.about("p1"), facts, {**TEXTS, "p1": unstated}, "temporal", 0)
        is None
    )


def _kg_target(subject: str, bridge: str, answer: str) -> Target:
    path = {
        "nodes": [
            {"id": "Q1", "label": subject},
            {"id": "Q2", "label": bridge},
            {"id": "Q3", "label": answer},
        ],
        "relations": [{"id": "P20", "label": "place of death"}, {"id": "P17", "label": "country"}],
    }
    died, capital = f"{subject} died in {bridge}.", f"{bridge} is the capital of {answer}."
    hops = (
        Hop("a", 0, len(died), died, subject, "place of death", bridge, "article"),
        Hop("b", 0, len(capital), capital, bridge, "country", answer, "article"),
    )
    return Target(
        kind="kg",
        answer=answer,
        aliases=(answer,),
        evidence=hops[1].text,
        subject=subject,
        path=path,
        chain=hops,
        hidden=(bridge,),
        waypoints=[subject, bridge],
        answer_kind="place",
    )


def test_a_multi_hop_question_naming_its_bridge_is_a_bridge_leak():
    t = _kg_target("Niels Bohr", "Copenhagen", "Denmark")
    q = template_question(t)
    assert q == "In which country is the place of death of Niels Bohr?"
    assert question_reason(q, t.answer, t.aliases, t.subject, "place", hidden=t.hidden) is None
    leaked = "In which country is Copenhagen, where Niels Bohr died?"
    assert (
        question_reason(leaked, t.answer, t.aliases, t.subject, "place", hidden=t.hidden)
        == "bridge_leak"
    )
    assert t.hops == 2 and chain_text(t.chain).startswith("Niels Bohr died in Copenhagen.")


def test_obfuscation_describes_the_start_entity_without_naming_the_chain():
    t = _kg_target("Niels Bohr", "Copenhagen", "Denmark")
    # the first description names the chain's bridge: the next one is used
    o = obfuscate(
        t, "Niels Bohr", ["the physicist who died in Copenhagen", "the physicist born in 1885"]
    )
    assert (o.subject, o.style) == ("the physicist born in 1885", "obfuscated")
    assert "Niels Bohr" in o.hidden and "Copenhagen" in o.hidden
    q = template_question(o)
    assert q == "In which country is the place of death of the physicist born in 1885?"
    assert question_reason(q, o.answer, o.aliases, o.subject, "place", hidden=o.hidden) is None
    named = "In which country is the place of death of Niels Bohr?"
    assert (
        question_reason(named, o.answer, o.aliases, o.subject, "place", hidden=o.hidden)
        == "bridge_leak"
    )
    assert obfuscate(t, "Niels Bohr", ["the physicist who died in Copenhagen"]) is t


def _ingest(root: Path, entities: list[dict], edges: list[dict]) -> Path:
    for name, schema, rows in (("entities", ENTITIES, entities), ("edges", EDGES, edges)):
        (root / name).mkdir(parents=True)
        full = [{f: r.get(f) for f in schema.names} for r in rows]
        pq.write_table(pa.Table.from_pylist(full, schema=schema), root / name / "part-0.parquet")
    return root


def _item(qid, label):
    return {"qid": qid, "kind": "item", "label": label}


def _edge(s, p, o=None, year=None):
    if year is not None:
        return {
            "subject": s,
            "pid": p,
            "value_type": "time",
            "time_precision": 11,
            "value": f"+{year}-01-01T00:00:00Z",
            "rank": "normal",
        }
    return {
        "subject": s,
        "pid": p,
        "object_qid": o,
        "value_type": "wikibase-item",
        "rank": "normal",
    }


def test_a_description_is_offered_only_where_the_graph_makes_it_unique(tmp_path):
    names = {
        "Q1": "Niels Bohr",
        "Q2": "Other Physicist",
        "Q9": "physicist",
        "Q35": "Denmark",
        "Q5": "human",
    }
    entities = [_item(q, label) for q, label in names.items()]
    edges = [
        _edge("Q1", "P31", "Q5"),
        _edge("Q1", "P106", "Q9"),
        _edge("Q1", "P569", year=1885),
        _edge("Q1", "P570", year=1962),
        _edge("Q1", "P27", "Q35"),
        _edge("Q2", "P31", "Q5"),
        _edge("Q2", "P106", "Q9"),
        _edge("Q2", "P569", year=1885),
        _edge("Q2", "P570", year=1950),
        _edge("Q2", "P27", "Q35"),
    ]
    got = describe(_ingest(tmp_path, entities, edges), ["Q1"])
    texts = [d.text for d in got["Q1"]]
    # two physicists were born in 1885 and both are from Denmark: those descriptions are
    # ambiguous and never offered; the year of death singles Bohr out
    assert "the physicist born in 1885" not in texts
    assert "the physicist from Denmark" not in texts
    assert texts[0] == "the physicist who died in 1962"
    assert "the human born in 1885" not in texts  # 'human' is no class to describe by
    assert got["Q1"][0].facts == (("P570", "1962"),)


def test_disconnected_and_one_search_decisions():
    bohr = (["Niels Bohr"], ["Copenhagen"], "Niels Bohr died in Copenhagen.")
    capital = (["Copenhagen"], ["Denmark"], "Copenhagen is the capital of Denmark.")
    # a final sentence that names the start entity states hop 1's link again
    shortcut = (
        ["Copenhagen"],
        ["Denmark"],
        "Copenhagen, where Niels Bohr died, is the capital of Denmark.",
    )
    assert redundant_hops([bohr, capital]) == [False, False]
    assert redundant_hops([bohr, shortcut]) == [True, False]
    # dropping hop 1 does not lower P(answer) and its link is stated again: disconnected
    assert connectedness(-2.0, [-1.9, -5.0], [True, False]) == (True, "teacher_forced")
    # the scores ignore hop 1, but it is the chain's only link: connected, by the text
    assert connectedness(-2.0, [-1.9, -5.0], [False, False]) == (False, "rules")
    # every hop lowers P(answer): connected, by the scores
    assert connectedness(-2.0, [-2.5, -5.0], [True, False]) == (False, "teacher_forced")
    assert connectedness(-2.0, [-5.0], [False]) is None  # one hop: nothing to drop
    found = lambda text, forms: find_form(text, forms) is not None  # noqa: E731
    top = ["Niels Bohr died in Copenhagen.", "Copenhagen is a city."]
    assert not leaks_in_top_k(top, [["Denmark"]], found)
    assert leaks_in_top_k([*top, "Denmark's capital is Copenhagen."], [["Denmark"]], found)
    # a comparison: one search answers it only if it finds both compared values
    assert not leaks_in_top_k(top, [["1885"], ["1879"]], found)
