"""Generation-time quality gates: the pure statistics on hand-made numbers,
then the gates on the real 270M model (shortcut check, uniqueness, verifier controls)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from sklearn.metrics import roc_auc_score

from pipeline.generation.gate_stats import (
    accuracy,
    answer_candidates,
    auc_real_vs_control,
    derangement,
    in_sample,
    is_shortcut,
    is_unique,
    leakage_share,
)
from pipeline.generation.steps import Gate, Verdict, register

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


# ---- the gates on the real 270M model ------------------------------------------------------


# Session-scoped (one per worker, cheap to build): a module-scoped fixture would run every
# test that uses it in one worker (tests/conftest.py), the transformers-model gates with the
# vLLM engine's.
@pytest.fixture(scope="session")
def retriever(sample_index, embedder):
    from pipeline.retrieval.faiss_index import Retriever

    return Retriever(sample_index.dir, embedder)


@pytest.fixture(scope="session")
def shots():
    from pipeline.agents.prompts import load_few_shot
    from tests.conftest import ROOT

    return load_few_shot(ROOT / "data/prompts/proposer_fewshot.jsonl")


def test_shortcut_check_flags_a_single_hop_question_posed_as_multi_hop(llm, retriever, shots):
    """A one-fact question labelled 2-hop that the model answers without searching is flagged
    (the transformers backend: with these seeds it answers "Paris" closed-book in most samples;
    on vLLM's sampler the same settings gave 1 of 4, so the backend is pinned here);
    a question with an answer no solver can produce (an invented name) is not (h = 1 is
    covered by test_shortcut_only_for_multi_hop_and_at_the_threshold). Closed-book and
    one-search rollouts are the solver's own."""
    from pipeline.agents.solver import SolverSettings, SolverTask
    from pipeline.generation.gates import shortcut_check

    tasks = [
        SolverTask("easy", "What is the capital of France?", "Paris", None, None, []),
        SolverTask(
            "hard",
            "Which clerk of the Verrano guild signed the second Ostrel charter?",
            "Quilmar Dessoway",
            None,
            None,
            [],
        ),
    ]
    base = SolverSettings(n=2, temperature=1.0, max_tokens=24, seed=11, max_turns=2, topk=3)
    res = shortcut_check(llm, retriever, tasks, [2, 3], shots, base, 4, 0.5, lambda p: p, 12)
    easy, hard = res
    seen = [(r["check"], r["predicted_answer"], r["stop_reason"]) for r in res[0].rollouts]
    assert easy.columns["closed_book_accuracy"] >= 0.5, seen
    assert easy.columns["shortcut"] is True
    assert hard.columns["closed_book_accuracy"] == 0.0
    assert hard.columns["one_search_accuracy"] == 0.0
    assert hard.columns["shortcut"] is False
    for r in res:
        checks = [row["check"] for row in r.rollouts]
        assert checks.count("closed_book") == 4 and checks.count("one_search") == 4
    closed = [row for r in res for row in r.rollouts if row["check"] == "closed_book"]
    one = [row for r in res for row in r.rollouts if row["check"] == "one_search"]
    assert all(not row["searches"] for row in closed)  # the search tool was off
    assert all(len(row["searches"]) <= 1 for row in one)  # a budget of one search
    assert any(row["searches"] for row in one)  # ... that the model used


def test_verifier_controls_on_real_model_outputs(vllm_llm, retriever, shots):
    """The controls re-score real verifier results: every subject gets all three controls for
    every method (PMI from the same teacher-forced scores), the shuffled evidence is another
    record's, p- is the real run's, and teacher forcing gives the answer-bearing real evidence
    more credit than another record's."""
    import datetime as dt
    import math

    from pipeline.agents.verifier import (
        VerifierItem,
        answer_tokens,
        pmi_from_teacher_forced,
        verify_mc,
        verify_teacher_forced,
    )
    from pipeline.generation.gates import VerifierRun, control_subjects, verifier_controls

    items = [
        VerifierItem(
            "a" * 24,
            "In which year was the Eiffel Tower completed?",
            "1889",
            "The Eiffel Tower was completed in 1889 as the entrance to the World's Fair.",
        ),
        VerifierItem(
            "b" * 24,
            "Who wrote the novel Moby-Dick?",
            "Herman Melville",
            "Moby-Dick is an 1851 novel by the American writer Herman Melville.",
        ),
        VerifierItem(
            "c" * 24,
            "What is the chemical symbol for gold?",
            "Au",
            "Gold is a chemical element with the symbol Au and atomic number 79.",
        ),
    ]
    render = lambda p: p  # noqa: E731
    llm = vllm_llm
    mc = verify_mc(llm, items, shots, 2, 1.0, 1.0, 8, 5, render)
    tf = verify_teacher_forced(llm, items, shots, render)
    pmi = pmi_from_teacher_forced(tf, [answer_tokens(llm, it.answer) for it in items])
    verified = [
        {"mc": m, "teacher_forced": t, "teacher_forced_pmi": p}
        for m, t, p in zip(mc, tf, pmi, strict=True)
    ]
    subjects = control_subjects(items, [0, 1, 2], verified, 1.0)
    _, title, text = retriever.passages.get([7])[0]

    def off_topic(record_id: str, cluster: int, hops: int):
        assert hops == 1  # one-hop subjects: a one-passage off-topic control
        return f"{title}: {text}", "passage-7", cluster + 10

    vr = VerifierRun(("mc", "teacher_forced", "teacher_forced_pmi"), 2, 1.0, 1.0, 8, 5)
    now = dt.datetime.now(dt.UTC)
    out = verifier_controls(llm, subjects, items, off_topic, shots, vr, render, now, "run-x")
    rows = [row for g in out.values() for row in g.controls]
    assert len(rows) == 3 * 3 * 4  # records x methods x (real + 3 controls)
    real = {(r["record_id"], r["method"]): r for r in rows if r["control"] == "real"}
    evidence = {it.record_id: it.evidence for it in items}
    for r in rows:
        assert r["p_neg"] == real[(r["record_id"], r["method"])]["p_neg"]
        if r["method"] != "teacher_forced_pmi":  # PMI: tanh of the per-token log ratio
            assert r["v"] == pytest.approx(r["p_pos"] - r["p_neg"])
        else:
            assert r["v"] == pytest.approx(math.tanh(math.log(r["p_pos"] / r["p_neg"])))
        if r["control"] == "shuffled":
            assert r["evidence_record_id"] != r["record_id"]
            assert r["evidence"] == evidence[r["evidence_record_id"]]
        if r["control"] == "answer_only":
            assert r["evidence"] == next(i.answer for i in items if i.record_id == r["record_id"])
        if r["control"] == "off_topic":
            assert r["evidence_passage_id"] == "passage-7" and text in r["evidence"]
    for it, m in zip(items, mc, strict=True):  # MC, the primary method, fills the columns
        cols = out[it.record_id].columns
        mine = {
            r["control"]: r["v"]
            for r in rows
            if r["record_id"] == it.record_id and r["method"] == "mc"
        }
        assert cols["v_shuffled"] == mine["shuffled"] and cols["v_off_topic"] == mine["off_topic"]
        assert mine["real"] == m.v
    tf_real = [r["v"] for r in rows if r["method"] == "teacher_forced" and r["control"] == "real"]
    tf_shuf = [
        r["v"] for r in rows if r["method"] == "teacher_forced" and r["control"] == "shuffled"
    ]
    assert sum(tf_real) > sum(tf_shuf)


def test_pmi_verifier_is_the_per_token_log_ratio_squashed():
    import math

    from pipeline.agents.rewards import verifier_pmi

    p_pos, p_neg, v = verifier_pmi(math.log(0.25) * 2, math.log(0.0625) * 2, 2)
    assert (p_pos, p_neg) == pytest.approx((0.25, 0.0625))
    assert v == pytest.approx(math.tanh(math.log(4)))
    # the paper's P+ - P- is ~0 for long answers; the PMI still ranks real above shuffled
    assert verifier_pmi(-20.0, -30.0, 5)[2] > verifier_pmi(-29.0, -30.0, 5)[2] > 0
    assert verifier_pmi(-30.0, -20.0, 5)[2] < 0
    with pytest.raises(ValueError):
        verifier_pmi(-1.0, -1.0, 0)


def test_export_drops_shortcut_and_ambiguous_rows_with_reasons():
    from pipeline.catalog.export_splits import drop_ambiguous, drop_shortcuts

    rows = [
        {"record_id": "a", "shortcut": True, "shortcut_verdict": "fail",
         "closed_book_accuracy": 0.75},
        {"record_id": "b", "shortcut": None, "unique_answer": None},  # single-hop, unchecked
        {"record_id": "c", "shortcut": False, "unique_answer": False,
         "answer_candidates": ["lyon", "paris"]},
        {"record_id": "d", "shortcut": False, "unique_answer": True},
    ]  # fmt: skip
    kept, short = drop_shortcuts(rows)
    kept, amb = drop_ambiguous(kept)
    assert [r["record_id"] for r in kept] == ["b", "d"]
    assert [(d.record_id, d.reason) for d in short] == [("a", "shortcut")]
    assert "0.75" in short[0].detail
    assert [(d.record_id, d.reason, d.detail) for d in amb] == [
        ("c", "ambiguous_answer", "answers: lyon | paris")
    ]


def test_a_gate_without_a_correct_gold_evidence_answer_is_undetermined():
    from types import SimpleNamespace

    from pipeline.catalog.export_splits import drop_undetermined
    from pipeline.generation.builtin_steps import Shortcut, Uniqueness
    from pipeline.generation.gate_stats import verdict
    from pipeline.generation.gates import GateResult
    from pipeline.generation.steps import ShardState

    assert verdict(False, True, True, True) == "off"
    assert verdict(True, False, True, None) == "not_applicable"
    assert verdict(True, True, False, False) == "undetermined"  # nothing measured: no pass
    assert verdict(True, True, True, None) == "undetermined"
    assert (verdict(True, True, True, True), verdict(True, True, True, False)) == ("fail", "pass")

    def gated(gold_correct, shortcut, unique, hops=2, decided=None):
        """The two gate steps on one solved record whose checks measured these values (no
        verified slot: nothing is left to measure, so no LLM call). `decided`: what showed
        the record answerable (the gold-evidence step sets it; sampling where one was right)."""
        res = GateResult()
        decided = decided or ("sampling" if gold_correct else None)
        res.columns.update(
            gold_n=2, gold_correct=gold_correct, shortcut=shortcut, gold_decided_by=decided
        )
        answers = ["Paris", "Paris"] + (["Lyon", "Lyon"] if not unique else [])
        rollouts = [{"predicted_answer": a, "answer_in_retrieved": True} for a in answers]
        st = ShardState(0, [None], 0, ["r"], ["p"], ["t"], ["x"], [None],
                        [SimpleNamespace(hops=hops)], None)  # fmt: skip
        st.gates, st.solved = {0: res}, {0: SimpleNamespace(rollouts=rollouts)}
        Shortcut(True, 2, 0.5, 12, None).run(None, st)
        Uniqueness(True, 2).run(None, st)
        c = res.columns
        assert [(v["gate"], v["verdict"]) for v in st.verdicts[0]] == [
            ("shortcut", c["shortcut_verdict"]),
            ("uniqueness", c["uniqueness_verdict"]),
        ]
        return c["shortcut_verdict"], c["uniqueness_verdict"]

    # every rollout 0, closed book 0: no evidence either way, so neither gate passes
    assert gated(0, False, True) == ("undetermined", "undetermined")
    assert gated(1, False, True) == ("pass", "pass")
    # no sample right, but the chain raises the answer's teacher-forced probability
    assert gated(0, False, True, decided="teacher_forced") == ("pass", "pass")
    assert gated(2, True, False) == ("fail", "fail")
    assert gated(1, None, True, hops=1) == ("not_applicable", "pass")
    rows = [
        {"record_id": "a", "shortcut_verdict": "undetermined", "uniqueness_verdict": "pass",
         "gold_n": 1},
        {"record_id": "b", "shortcut_verdict": "pass", "uniqueness_verdict": "pass"},
    ]  # fmt: skip
    kept, dropped = drop_undetermined(rows)
    assert [r["record_id"] for r in kept] == ["b"]
    assert (dropped[0].record_id, dropped[0].reason) == ("a", "undetermined")


def test_gold_evidence_check_scores_any_answer_form(llm, shots):
    """Real model: an answer given the gold evidence is correct when it matches any form, or
    holds one within the word budget (cover-EM); a reply that holds none is not."""
    from pipeline.agents.verifier import VerifierItem
    from pipeline.generation.gates import gold_evidence_check

    s = shots[0]  # the model's own demonstration: copying the answer from context is easy
    ev = "The first European to travel its full length was Francisco de Orellana."
    items = [VerifierItem(r, s.question, a, ev) for r, a in (("r1", "Orellana"),
             ("r2", "Orellana"), ("r3", "Pizarro"))]  # fmt: skip
    forms = [("Francisco de Orellana",), (), ()]
    out = gold_evidence_check(llm, items, forms, shots, 1, 0.0, 12, 7, lambda p: p, 3)
    preds = [r.rollouts[0]["predicted_answer"] for r in out]
    assert preds == ["Francisco de Orellana"] * 3, preds  # greedy, its own demo
    assert out[0].columns["gold_n"] == 1 and out[0].rollouts[0]["check"] == "gold_evidence"
    # an accepted form of r1's answer; a 3-word reply holding r2's; nothing of r3's
    assert [o.columns["gold_correct"] for o in out] == [1, 1, 0]
    short = gold_evidence_check(llm, items[1:2], forms[1:2], shots, 1, 0.0, 12, 7,
                                lambda p: p, 2)  # fmt: skip
    assert short[0].columns["gold_correct"] == 0  # past the word budget: not a short answer


def test_landed_run_gates_views_match_their_rows(landed_run):
    """On the real landed nightly: every valid verbatim record got its controls, and the
    verifier_controls view's AUC and leakage share equal scikit-learn's over control_scores."""
    import duckdb

    from pipeline.generation.gate_stats import auc_real_vs_control, leakage_share

    with duckdb.connect(str(landed_run.catalog), read_only=True) as con:
        verified = con.execute(
            "SELECT count(*) FROM curriculum WHERE run_id = ? AND verifier_v IS NOT NULL",
            [landed_run.run_id],
        ).fetchone()[0]
        rows = con.execute(
            "SELECT record_id, method, control, v FROM control_scores WHERE run_id = ?",
            [landed_run.run_id],
        ).fetchall()
        view = con.execute(
            "SELECT method, records, auc_real_vs_shuffled, answer_only_ge_real_share "
            "FROM verifier_controls WHERE run_id = ?",
            [landed_run.run_id],
        ).fetchall()
        steps = dict(
            con.execute("SELECT step, sum(items) FROM shard_steps GROUP BY step").fetchall()
        )
        judged, multi, looked, gold, shortcut_rows = con.execute(
            "SELECT count(*) FILTER (WHERE shortcut IS NOT NULL), "
            "count(*) FILTER (WHERE shortcut_verdict IN ('pass', 'fail')), "
            "count(*) FILTER (WHERE shortcut_verdict IN ('pass', 'fail', 'undetermined')), "
            "(SELECT count(*) FROM gate_rollouts g WHERE run_id = ? AND g.check = 'gold_evidence'),"
            " (SELECT count(*) FROM gate_rollouts g WHERE run_id = ? "
            "AND g.check <> 'gold_evidence') "
            "FROM curriculum WHERE run_id = ?",
            [landed_run.run_id] * 3,
        ).fetchone()
        verdicts = con.execute(
            "SELECT gold_correct, shortcut_verdict, uniqueness_verdict, hop_count, gold_n, "
            "gold_decided_by FROM curriculum WHERE run_id = ? AND verifier_v IS NOT NULL",
            [landed_run.run_id],
        ).fetchall()
        pairs_per_shard = con.execute(
            "SELECT max(n) FROM (SELECT count(*) AS n FROM curriculum WHERE run_id = ? "
            "AND verifier_v IS NOT NULL GROUP BY shard)",
            [landed_run.run_id],
        ).fetchone()[0]
    assert verified > 0
    assert {"propose", "solve", "verify", "gold_evidence", "controls"} <= set(steps)
    # the shortcut rollouts ran exactly for the records it judged (shortcut_n=2, two checks);
    # its shard_steps rows count those and the undetermined ones as the records it took in
    assert judged == multi and shortcut_rows == judged * 2 * 2
    assert steps["shortcut"] == looked
    assert steps["gold_evidence"] == verified  # every verified record, gates.gold_n answers each
    assert gold == sum(v[4] for v in verdicts) and {v[4] for v in verdicts} == {3}
    for gold_correct, sc, un, hops, _, decided_by in verdicts:
        # a gold answer right, or else the chain raising log P(answer), shows the record
        # answerable; with neither, no gate may pass it
        assert (decided_by == "sampling") == (gold_correct > 0), (gold_correct, decided_by)
        assert (decided_by is None) == (un == "undetermined"), (decided_by, un)
        if decided_by is None:
            assert sc in ("undetermined", "not_applicable")
        if sc != "not_applicable":
            assert hops >= 2
    real = {(r, m): v for r, m, c, v in rows if c == "real"}
    methods = {m for _, m, _, _ in rows}  # teacher-forced runs also store the PMI variant
    assert len(real) == verified * len(methods)  # every verified record, every method
    shuffled = {"shuffled"} if pairs_per_shard >= 2 else set()  # a derangement needs two
    # a multi-hop record is also scored with its chain minus each hop (gates.connected)
    minus_hop = {"minus_hop"} if any(v[3] >= 2 and v[5] for v in verdicts) else set()
    assert {c for _, _, c, _ in rows} == {"real", "answer_only", "off_topic"} | shuffled | minus_hop
    for method, records, auc, share in view:
        pairs = [(r, v) for (r, m), v in real.items() if m == method]
        shuf = [v for r, m, c, v in rows if m == method and c == "shuffled"]
        ans = {r: v for r, m, c, v in rows if m == method and c == "answer_only"}
        assert records == len(pairs)
        assert auc == pytest.approx(auc_real_vs_control([v for _, v in pairs], shuf))
        assert share == pytest.approx(
            leakage_share([v for _, v in pairs], [ans[r] for r, _ in pairs])
        )


@pytest.fixture(scope="module")
def sample_facts(sample_index, tmp_path_factory):
    """The sample Wikidata dump ingested and linked to the sample index's passages: what a
    run's two-passage tasks read of the graph (no LLM: no subgraphs are extracted)."""
    import pyarrow.parquet as pq

    from pipeline.agents.properties import PROPERTIES
    from pipeline.core.config import load_config
    from pipeline.kg.entity_facts import entity_facts
    from pipeline.kg.extract import KGInputs, ingest, ingest_dir
    from pipeline.kg.graph import KnowledgeGraph

    out = tmp_path_factory.mktemp("sample-kg")
    cfg = load_config(None, [f"store.out_dir={out}"])
    inputs = KGInputs.from_config(cfg)
    ingest(cfg, inputs.dump, out)
    ing, _ = ingest_dir(cfg, inputs.dump, out)
    linked = out / "linked.parquet"
    with KnowledgeGraph(ing, sample_index.table, inputs.relation_filter()) as graph:
        pq.write_table(graph.linked_entities(), linked)
    ids = pq.read_table(sample_index.table, columns=["id"])["id"].to_pylist()
    return entity_facts(ing, linked, ids, PROPERTIES)


def test_production_profile_runs_the_same_grounded_path(
    vllm_llm, retriever, shots, sample_facts, tmp_path
):
    """configs/production.yaml's generation, verifier and gates settings (mc with m = 5,
    n = 5 solver rollouts, 6 question samples, LLM wording first, gold_n = 2, the 0.8 control
    quantile) on three slots of the sample corpus: one linked to an authored two-hop KG path,
    one passage slot drawn with one hop, one with two. Only the model, the corpus and the
    token budgets differ (CPU). Same chains, questions, gates and columns as the demo."""
    import datetime as dt

    from pipeline.agents.prompts import load_kg_shots
    from pipeline.core.config import load_config
    from pipeline.generation.shards import GenerationContext, process_shard
    from pipeline.selector.run_plan import PlanItem
    from tests.conftest import ROOT

    cfg = load_config(
        ROOT / "configs/production.yaml",
        [f"store.out_dir={tmp_path}", "generation.proposer_max_tokens=32",
         "generation.solver_max_tokens=16", "generation.max_turns=2",
         "generation.answer_max_tokens=8", "gates.custom.long_question.max_words=12"],
    )  # fmt: skip
    assert (cfg.verifier.method, cfg.rewards.n_solver, cfg.verifier.m) == ("mc", 5, 5)
    assert (cfg.generation.kg_questions, cfg.generation.passage_questions) == ("llm_first",) * 2
    titles = retriever.passages.table.column("title").to_pylist()
    rows = [titles.index(t) for t in ("Florence", "Leipzig")]
    rows.append(
        next(
            r
            for r, t in enumerate(titles)
            if t == "Albert Einstein" and "born in Ulm" in retriever.passages.get([r])[0][2]
        )
    )
    path = {
        "nodes": [{"id": "Q2044", "label": "Florence"}, {"id": "Q38", "label": "Italy"},
                  {"id": "Q4916", "label": "euro"}],
        "relations": [{"id": "P17", "label": "country"}, {"id": "P38", "label": "currency"}],
    }  # fmt: skip
    sg = {
        "subgraph_id": "sg",
        "target_path": path,
        "answer_type": "Other",
        "answer_aliases": [],
        "aliases": {},
    }
    pid = retriever.passages.get(rows)
    items = [
        PlanItem(0, rows[0], pid[0][0], 0, "factual", 2, "sg"),
        PlanItem(1, rows[1], pid[1][0], 1, "temporal", 1, None),
        PlanItem(2, rows[2], pid[2][0], 2, "factual", 2, None),
    ]
    ctx = GenerationContext(
        cfg=cfg, store=None, generator=vllm_llm, retriever=retriever, run_id="prod",
        run_date=dt.date(2026, 1, 2), embedder_model="e", shots=shots,
        kg_shots=load_kg_shots(ROOT / cfg.generation.kg_few_shot), subgraphs={"sg": sg},
        facts=sample_facts, cluster_rows={0: [rows[0]], 1: [rows[1]], 2: [rows[2]]},
    )  # fmt: skip
    engine_tokens = vllm_llm.stats["generated_tokens"]
    out = process_shard(ctx, 0, items)
    engine_tokens = vllm_llm.stats["generated_tokens"] - engine_tokens
    kg, span, two = out.curriculum
    # the KG slot asks for the path's end entity, with a stated sentence for each hop
    assert (kg["evidence_mode"], kg["answer"], kg["hop_count"]) == ("kg_path", "euro", 2)
    assert [h["object"] for h in kg["evidence_chain"]] == ["Italy", "euro"]
    assert [h["subject"] for h in kg["evidence_chain"]] == ["Florence", "Italy"]
    # one hop drawn: a date span of its own sentence; two drawn: a bridge or a comparison
    assert (span["evidence_mode"], span["answer_span_kind"], span["hop_count"]) == (
        "passage_span",
        "date",
        1,
    )
    assert two["evidence_mode"] in ("passage_bridge", "passage_comparison")
    assert two["hop_count"] == two["planned_hops"] == 2
    text = {p[0]: p[2] for p in retriever.passages.get(list(range(len(titles))))}
    for r in out.curriculum:
        assert r["hop_count"] == len(r["evidence_chain"])
        for h in r["evidence_chain"]:  # every hop verbatim in its passage
            assert text[h["passage_id"]][h["char_start"] : h["char_end"]] == h["text"]
        assert r["evidence_chain"][-1]["text"] == r["evidence"]
        assert r["question_attempts"] >= 1 or r["question_source"] == "template"
        assert r["v_threshold_quantile"] == 0.8
        if r["is_valid"]:
            assert r["verifier_method"] == "mc" and r["verifier_m"] == 5
            assert r["solver_n"] == 5 and r["gold_n"] == 2
            assert r["uniqueness_verdict"] in ("pass", "fail", "undetermined")
            assert (r["uniqueness_verdict"] == "undetermined") == (r["gold_decided_by"] is None)
            assert r["one_search_verdict"] in ("pass", "fail", "not_applicable")
    steps = [s["step"] for s in out.shard_steps]
    assert steps == [
        "propose",
        "solve",
        "verify",
        "gold_evidence",
        "shortcut",
        "uniqueness",
        "connected",
        "one_search",
        "long_question",
        "controls",
        "rows",
    ]
    # The toy gate (one class, one config entry) judged every valid record, after the others.
    for r in out.curriculum:
        v = r["gate_verdicts"][-1]
        assert [g["gate"] for g in r["gate_verdicts"]] == [
            "shortcut",
            "uniqueness",
            "connected",
            "one_search",
            "long_question",
        ]
        long = len(r["question"].split()) > 12
        assert v["verdict"] == (
            "not_applicable" if not r["is_valid"] else "fail" if long else "pass"
        )
        assert v["rejected_by"] == ("long_question" if v["verdict"] == "fail" else None)
    toy = out.shard_steps[steps.index("long_question")]
    assert toy["items"] == sum(r["is_valid"] for r in out.curriculum)
    # Cost rows: the engine's own counter, the steps' and the records' sums are one number.
    generated = sum(s["generated_tokens"] or 0 for s in out.shard_steps)
    assert generated == sum(c["generated_tokens"] for c in out.record_costs) == engine_tokens > 0
    assert {c["record_id"] for c in out.record_costs} <= {r["record_id"] for r in out.curriculum}
    by_step = {s["step"]: s for s in out.shard_steps}
    assert by_step["propose"]["llm_calls"] >= 1 and by_step["rows"]["llm_calls"] == 0
    assert by_step["solve"]["prompt_tokens_computed"] > 0
    assert all(s["cpu_seconds"] > 0 and s["seconds"] > 0 for s in out.shard_steps)


@register
@dataclass(frozen=True)
class LongQuestion(Gate):
    """A toy gate: a question longer than `max_words` words fails (the example of a
    gate added with one class and one config entry, `gates.custom.long_question`)."""

    max_words: int
    name = "long_question"
    reads = ("proposed",)

    @classmethod
    def from_config(cls, cfg):
        return cls(**cfg.gates.custom[cls.name])

    def judge(self, ctx, st):
        return {
            i: Verdict("fail" if len(r.proposal.question.split()) > self.max_words else "pass")
            for i, r in enumerate(st.proposed)
            if r.valid
        }


def test_shuffled_control_never_hands_a_record_its_own_evidence():
    """Two slots of one subgraph share their evidence: a 'shuffled' control with that same
    text is no control (it inflated the run's V bar), so the partner moves on along the
    derangement's cycle, and with nothing else to take there is no shuffled control."""
    from pipeline.agents.verifier import VerifierItem
    from pipeline.generation.gate_stats import derangement
    from pipeline.generation.gates import _shuffled_partner

    same = "After 1945 Germany was divided, and in 1949 two states emerged."
    pool = [VerifierItem(f"r{i}", "q?", "1949", same if i < 2 else f"other {i}") for i in range(4)]
    shuffle = derangement(len(pool), 7)
    for k, it in enumerate(pool):
        other = _shuffled_partner(pool, shuffle, k)
        assert other is not None and other.evidence != it.evidence
    twins = pool[:2]
    assert _shuffled_partner(twins, derangement(2, 7), 0) is None


def test_connected_gate_on_real_model_scores(vllm_llm, shots):
    """The connected gate on two authored three-hop chains to one answer, scored by the real
    engine: a hop whose link another sentence states again, and whose removal does not lower
    P(answer), is disconnected; a hop the scores ignore but that is the chain's only link is
    connected by the text, and the record says so. The minus-hop scores are control rows."""
    import datetime as dt
    from types import SimpleNamespace

    from pipeline.agents.targets import Hop, Target
    from pipeline.agents.verifier import VerifierItem
    from pipeline.generation.gates import GateResult
    from pipeline.generation.search_gates import Connected
    from pipeline.generation.steps import ShardState

    def target(*hops):
        chain = tuple(Hop("p", 0, len(t), t, s, r, o, "article") for s, r, o, t in hops)
        return Target(
            kind="kg", answer="Europe", aliases=("Europe",), evidence=chain[-1].text, chain=chain
        )

    # Hop 1's sentence mentions other continents: the model's P(Europe) rises without it
    # (measured with both backends: by 0.5 nats after the clean final sentence, 0.8 after
    # the one that names Bohr's place of death again).
    died = (
        "Niels Bohr",
        "place of death",
        "Copenhagen",
        "Bohr, who had lectured across America, Asia and Africa, died in Copenhagen in 1962.",
    )
    capital = ("Copenhagen", "country", "Denmark", "Copenhagen is the capital of Denmark.")
    end = "Denmark is a Nordic country in Northern Europe."
    clean = target(died, capital, ("Denmark", "continent", "Europe", end))
    end = "Denmark, where Niels Bohr died in Copenhagen, is a Nordic country in Northern Europe."
    again = target(died, capital, ("Denmark", "continent", "Europe", end))
    q = "On which continent is the country of the place of death of Niels Bohr?"
    items = [
        VerifierItem(f"r{k}", q, "Europe", " ".join(h.text for h in t.chain))
        for k, t in enumerate((clean, again))
    ]
    now = dt.datetime.now(dt.UTC)
    blank, none = [""] * 2, [None] * 2
    st = ShardState(0, none, 0, ["r0", "r1"], blank, blank, blank, none, [clean, again], now)
    st.ver_idx, st.ver_items = [0, 1], items
    st.gates = {i: GateResult() for i in range(2)}
    for g in st.gates.values():
        g.columns["gold_decided_by"] = "sampling"
    ctx = SimpleNamespace(generator=vllm_llm, shots=shots, render=lambda p: p, run_id="t")
    Connected(True, "teacher_forced").run(ctx, st)
    c0, c1 = st.gates[0].columns, st.gates[1].columns
    assert len(c0["hop_drop_logprobs"]) == len(c1["hop_drop_logprobs"]) == 3
    real = verify_real(vllm_llm, items, shots)
    for c, lp in zip((c0, c1), real, strict=True):
        assert lp <= c["hop_drop_logprobs"][0]  # without hop 1, P(answer) does not fall
    # the clean chain states Bohr's place of death once: the scores ignore the chain's only
    # link to Copenhagen, so the text decides, and it is connected
    assert (c0["disconnected"], c0["connected_verdict"]) == (False, "pass")
    assert c0["connected_decided_by"] == "rules"
    # the second chain's last sentence states hop 1's link again: disconnected, by the scores
    # (leaving hop 1 out does not lower P(answer)) and the text
    assert (c1["disconnected"], c1["connected_verdict"]) == (True, "fail")
    assert c1["connected_decided_by"] == "teacher_forced"
    rows = st.gates[1].controls
    assert sorted(r["dropped_hop"] for r in rows if r["method"] == "teacher_forced") == [1, 2, 3]
    assert all(r["control"] == "minus_hop" for r in rows)


def verify_real(llm, items, shots) -> list[float]:
    """log P(answer | question, whole chain) of each item, teacher forced."""
    from pipeline.agents.verifier import verify_teacher_forced

    res = verify_teacher_forced(llm, items, shots, lambda p: p)
    return [next(s["logprob"] for s in r.samples if s["condition"] == "with_evidence") for r in res]
