"""The multi-turn rollout engine: turn accounting, one generate call and one search batch per
turn, tool responses from the real FAISS index, and the solver on the real CPU model."""

from __future__ import annotations

import re

import pytest

from pipeline.agents.prompts import load_few_shot
from pipeline.agents.rewards import exact_match, wcr_reward
from pipeline.agents.rollout import (
    EVAL_REGEX,
    Evaluation,
    RolloutConfig,
    TurnGuide,
    parse_evaluation,
    run_rollouts,
)
from pipeline.agents.solver import SolverSettings, SolverTask, solve
from pipeline.llm.base import SamplingParams
from pipeline.retrieval.faiss_index import Retriever
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def retriever(sample_index, embedder):
    return CountingRetriever(sample_index.dir, embedder)


class CountingRetriever(Retriever):
    """The real retriever, counting how many search batches it serves."""

    batches: list[list[str]]

    def search_with_vectors(self, queries, k=3):
        self.batches = getattr(self, "batches", [])
        self.batches.append(list(queries))
        return super().search_with_vectors(queries, k)


class Scripted:
    """A generator that plays fixed assistant turns, keyed by a marker in the prompt.

    It stands in for the LLM only to pin down the engine's bookkeeping; the real model runs
    in test_solver_on_the_real_model below."""

    model_id = "scripted"

    def __init__(self, scripts: dict[str, list[str]]):
        self.scripts = scripts
        self.calls: list[tuple[int, int]] = []  # (prompts, n) per generate call
        self.guides: list[list | None] = []  # the regexes sent with each call

    def generate(self, prompts, params, guides=None):
        self.calls.append((len(prompts), params.n))
        self.guides.append(guides)
        outs = []
        for p in prompts:
            key = next(k for k in self.scripts if k in p)
            turn = len(self.calls) - 1  # every generate call is one turn of all live rollouts
            segs = self.scripts[key]
            outs.append([segs[min(turn, len(segs) - 1)]] * params.n)
        return outs

    def count_tokens(self, text):
        return len(text.split())

    def score(self, prompts, continuations):
        raise NotImplementedError


CFG = RolloutConfig("<answer>", "</answer>", max_turns=3, topk=3, max_doc_tokens=60)


def test_turns_searches_and_stop_reasons(retriever):
    gen = Scripted(
        {
            "Q-final": [
                "<think>plan</think>\n<search>Danube river Black Sea",
                "<think>found it</think>\n<answer>Black Sea",
            ],
            "Q-noaction": ["I do not know."],
            "Q-loop": ["<search>Mozart opera", "<search>Magic Flute", "<search>more"],
            "Q-empty": ["<search>  ", "<answer>x"],
        }
    )
    retriever.batches = []
    prompts = ["Q-final\n", "Q-noaction\n", "Q-loop\n", "Q-empty\n"]
    groups = run_rollouts(gen, retriever, prompts, SamplingParams(n=2, seed=1), CFG)
    assert [len(g) for g in groups] == [2, 2, 2, 2]  # n rollouts per prompt
    # Turn 1 samples n of each prompt in one call; later turns send every live rollout at once.
    assert gen.calls == [(4, 2), (6, 1), (2, 1)]
    # Every turn's searches went to the index as one batch (4 then 2 queries).
    assert [len(b) for b in retriever.batches] == [4, 2]

    fin, noact, loop, empty = (g[0] for g in groups)
    assert (fin.stop_reason, fin.final, fin.turns, fin.planning_turns) == (
        "final",
        "Black Sea",
        2,
        2,
    )
    assert fin.searches == ["Danube river Black Sea"] and len(fin.retrieved_ids[0]) == 3
    assert fin.transcript.count("<information>Doc 1(Title: ") == 1
    assert fin.transcript.endswith("<answer>Black Sea</answer>")
    assert fin.valid_tool_calls == fin.tool_responses == 1
    assert "found it" in fin.think and "plan" in fin.think
    assert (noact.stop_reason, noact.turns, noact.final) == ("no_action", 1, None)
    # Three turns allowed: two searches answered, the third asks after the budget is spent.
    assert (loop.stop_reason, loop.turns, loop.tool_responses) == ("unanswered_search", 3, 2)
    assert loop.valid_tool_calls == 3  # so F_tool sees T_tc != responses
    assert (empty.invalid_tool_calls, empty.tool_responses, empty.final) == (1, 0, "x")
    assert "Empty search query." in empty.transcript
    # Tool responses respect the token budget of the (whitespace) tokenizer.
    info = fin.transcript.split("<information>")[1].split("</information>")[0]
    assert len(info.split()) <= CFG.max_doc_tokens
    ids = {pid for pid, _, _ in retriever.passages.get(fin.retrieved_rows[0])}
    assert ids == set(fin.retrieved_ids[0])


def test_forced_final_budget_and_last_turn(retriever):
    forced = RolloutConfig("<evidence>", "</evidence>", max_turns=3, force_final="<question>")
    gen = Scripted(
        {
            # Budget 0: its search is refused and <question> opened for it.
            "P-budget": ["<think>x</think><search>more please", "Q?</question><evidence>[1]"],
            # Budget 1: one search runs, the second is refused.
            "P-one": ["<search>Danube", "<search>again", "Q2?</question><evidence>[2]"],
            # Says nothing useful: asked once for the final, then gives up.
            "P-mute": ["hmm", "still nothing"],
        }
    )
    budgets = [0, 1, 0]
    g = run_rollouts(gen, retriever, ["P-budget\n", "P-one\n", "P-mute\n"],
                     SamplingParams(n=1), forced, budgets)  # fmt: skip
    budget, one, mute = (x[0] for x in g)
    assert (budget.refused_searches, budget.searches, budget.final) == (1, [], "[1]")
    assert budget.forced_final and budget.segments[1].startswith("<question>Q?")
    assert "<search>" not in budget.transcript  # the refused call is not in the transcript
    assert budget.valid_tool_calls == 1 and budget.tool_responses == 0  # F_tool sees it
    assert (one.searches, one.refused_searches, one.final) == (["Danube"], 1, "[2]")
    assert (mute.stop_reason, mute.forced_final, mute.turns) == ("no_action", True, 2)
    # Last-turn forcing: a rollout still searching at turn 2 of 3 gets <question> opened.
    gen = Scripted({"P-long": ["<search>a", "<search>b", "Q3?</question><evidence>[3]"]})
    (g,) = run_rollouts(gen, retriever, ["P-long\n"], SamplingParams(n=1), forced, [None])
    assert (g[0].searches, g[0].final, g[0].forced_final) == (["a", "b"], "[3]", True)


def test_guided_turns_get_the_regex_their_state_allows(retriever):
    """Free turns may think, search (within budget and turns) or write the final block; a turn
    whose final tag the engine opened continues the final block only; unguided prompts get
    None in the same call."""
    forced = RolloutConfig("<evidence>", "</evidence>", max_turns=3, force_final="<question>")
    guide = TurnGuide("<question>", r"[^<]{1,9}</question>\n<evidence>\[1\]</evidence>")
    gen = Scripted(
        {
            "P-one": ["<search>Danube", "<search>again", "Q?</question><evidence>[1]"],
            "P-free": ["<search>Mozart", "<search>Vienna", "Q?</question><evidence>[1]"],
        }
    )
    run_rollouts(gen, retriever, ["P-one\n", "P-free\n"], SamplingParams(n=1), forced,
                 [1, 1], [guide, None])  # fmt: skip
    with_search, no_search = guide.regex(False, True), guide.regex(False, False)
    assert "<search>" in with_search and "<search>" not in no_search
    assert gen.guides[0] == [with_search, None]  # turn 1: budget left
    # Turn 2: P-one's one search is spent, so no search branch. It searches anyway, the
    # engine refuses and opens <question>, and turn 3 continues the final block only.
    assert gen.guides[1] == [no_search, None]
    assert gen.guides[2] == [guide.final_body, None]
    body = "Paris?</question>\n<evidence>[1]</evidence>"
    assert re.fullmatch(with_search, "<think>plan</think>\n<question>" + body)
    assert re.fullmatch(with_search, "<search>Danube delta</search>")
    assert not re.fullmatch(no_search, "<search>Danube delta</search>")
    assert re.fullmatch(guide.final_body, body) and not re.fullmatch(with_search, body)
    # No guides at all: generate() is called exactly as before (no third argument).
    gen = Scripted({"P": ["<question>Q?</question><evidence>[1]"]})
    run_rollouts(gen, retriever, ["P\n"], SamplingParams(n=1), forced)
    assert gen.guides == [None]


def test_search_disabled_ends_at_a_search():
    gen = Scripted({"Q": ["<search>anything"]})
    cfg = RolloutConfig("<answer>", "</answer>", max_turns=3, search=False)
    (g,) = run_rollouts(gen, None, ["Q\n"], SamplingParams(n=1), cfg)
    assert (g[0].stop_reason, g[0].searches, g[0].turns) == ("no_action", [], 1)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"evaluation": "Doc 2 says so.", "score": 8}', Evaluation("Doc 2 says so.", 8.0, None)),
        ('{"evaluation": "ok", "score": 7.5}</evaluate>', Evaluation("ok", 7.5, None)),
        ("", Evaluation(None, None, "empty_evaluation")),
        ('{"evaluation": "cut sh', Evaluation(None, None, "malformed_json")),
        ('["a", 3]', Evaluation(None, None, "malformed_json")),
        ('{"evaluation": "no score"}', Evaluation("no score", None, "missing_score")),
        ('{"evaluation": "x", "score": true}', Evaluation("x", None, "missing_score")),
        ('{"evaluation": "x", "score": 11}', Evaluation("x", None, "score_out_of_range")),
        ('{"evaluation": " ", "score": 4}', Evaluation(None, 4.0, "missing_assessment")),
    ],
)  # fmt: skip
def test_parse_evaluation_records_violations_never_raises(body, expected):
    assert parse_evaluation(body) == expected


def test_evaluation_regex_is_the_papers_json():
    assert re.fullmatch(EVAL_REGEX, '{"evaluation": "Doc 1 names it.", "score": 10}')
    assert not re.fullmatch(EVAL_REGEX, '{"evaluation": "x", "score": 11}')
    assert parse_evaluation('{"evaluation": "Doc 1 names it.", "score": 10}').z == 10.0


def test_evalact_turns_search_then_exactly_one_evaluate(retriever):
    """After each answered search the engine opens <evaluate>, guides that turn to the paper's
    JSON, records z (or the violation) and answers with Φ(z)'s cue; one generate call and one
    search batch per turn still serve every live rollout."""
    cfg = RolloutConfig("<answer>", "</answer>", max_turns=5, topk=2, max_doc_tokens=40,
                        evaluate=True)  # fmt: skip
    gen = Scripted(
        {
            "Q-ok": [
                "<think>plan</think>\n<search>Danube river Black Sea",
                '{"evaluation": "Doc 1 names the sea.", "score": 8}',
                "<answer>Black Sea",
            ],
            "Q-bad": ["<search>Mozart opera", "I think it is fine", "<search>Vienna", "{}"],
        }
    )
    retriever.batches = []
    ok, bad = (g[0] for g in run_rollouts(gen, retriever, ["Q-ok\n", "Q-bad\n"],
                                          SamplingParams(n=1), cfg))  # fmt: skip
    assert ok.evaluations == [Evaluation("Doc 1 names the sea.", 8.0, None)]
    assert ok.final == "Black Sea" and ok.stop_reason == "final"
    assert '<evaluate>{"evaluation": "Doc 1 names the sea.", "score": 8}</evaluate>' in (
        ok.transcript
    )
    assert "<feedback>Score 8/10 (High Quality)" in ok.transcript
    assert [e.violation for e in bad.evaluations] == ["malformed_json", "missing_score"]
    assert "<feedback>Evaluate not understood (malformed_json)" in bad.transcript
    assert bad.searches == ["Mozart opera", "Vienna"]
    # Q-ok: search | evaluate | answer; Q-bad: search | evaluate | search | evaluate | "{}"
    # (neither a search nor an answer: no action)
    assert bad.stop_reason == "no_action"
    assert [len(b) for b in retriever.batches] == [2, 1]
    assert gen.calls == [(2, 1), (2, 1), (2, 1), (1, 1), (1, 1)]
    assert gen.guides[0] is None and gen.guides[1] == [EVAL_REGEX, EVAL_REGEX]
    assert gen.guides[2] is None and gen.guides[3] == [EVAL_REGEX] and gen.guides[4] is None


@pytest.mark.slow
def test_evalact_solver_on_the_real_model(retriever, vllm_llm):
    """EvalAct on the real CPU model (on the session's vLLM engine, the demo's) with guided
    Evaluate turns: one segment row per answered search, joined to its rollout, with PCAR
    terms whenever z was read."""
    shots = load_few_shot(ROOT / "data" / "prompts" / "proposer_fewshot.jsonl")
    tasks = [
        SolverTask("r1", "Who composed The Magic Flute?", "Wolfgang Amadeus Mozart", None,
                   "p-none", []),
        SolverTask("r2", "Into which sea does the Danube flow?", "Black Sea", None, None, []),
    ]  # fmt: skip
    s = SolverSettings(n=2, temperature=1.0, max_tokens=48, seed=11, max_turns=2,
                       protocol="evalact")  # fmt: skip
    res = solve(vllm_llm, retriever, tasks, shots, s)
    segments = 0
    for r in res:
        ids = {row["rollout_id"] for row in r.rollouts}
        adv = [row["outcome_advantage"] for row in r.rollouts]
        assert sum(adv) == pytest.approx(0.0, abs=1e-6)  # eq. 5 is centred per record
        for row in r.rollouts:
            assert row["protocol"] == "evalact"
            mine = [x for x in r.segments if x["rollout_id"] == row["rollout_id"]]
            assert len(mine) == len(row["searches"])  # exactly one Evaluate per search
            assert row["protocol_violations"] == [x["violation"] for x in mine if x["violation"]]
            assert row["outcome_reward"] == (
                row["answer_f1"] if not row["protocol_violations"] else 0.0
            )
        for x in r.segments:
            segments += 1
            assert x["rollout_id"] in ids
            assert (x["z"] is None) == (x["violation"] is not None)
            if x["z"] is not None:
                assert 0.0 <= x["z"] <= 10.0
                assert x["pcar_multiplier"] >= 1e-6
                assert x["calibrated_advantage"] == pytest.approx(
                    x["outcome_advantage"] * x["pcar_multiplier"]
                )
            if x["record_id"] == "r1":
                assert x["evidence_hit"] is False  # no passage is called p-none
    assert segments > 0  # the few-shot demos make the model search


@pytest.mark.slow
def test_solver_on_the_real_model(retriever, vllm_llm):
    """The solver on the session's vLLM engine (the transformers backend's rollouts: the
    second night in test_nightly, test_chat_template)."""
    shots = load_few_shot(ROOT / "data" / "prompts" / "proposer_fewshot.jsonl")
    tasks = [
        SolverTask("r1", "Who composed The Magic Flute?", "Wolfgang Amadeus Mozart", None, None,
                   [["Mozart"], ["Vienna"]]),
        SolverTask("r2", "Into which sea does the Danube flow?", "Black Sea", None, None, []),
    ]  # fmt: skip
    s = SolverSettings(n=2, temperature=1.0, max_tokens=32, seed=7, max_turns=2, lambda_e=0.3)
    retriever.batches = []
    res = solve(vllm_llm, retriever, tasks, shots, s)
    assert [r.n for r in res] == [2, 2]
    assert len(retriever.batches) <= 1  # two turns: at most one search round, batched
    for task, r in zip(tasks, res, strict=True):
        assert r.k == sum(row["correct"] for row in r.rollouts)
        for row in r.rollouts:
            assert 1 <= row["turns"] <= 2
            assert row["stop_reason"] in {"final", "no_action", "max_turns", "unanswered_search"}
            assert len(row["searches"]) == len(row["retrieved_ids"]) <= 1
            assert row["correct"] == exact_match(row["predicted_answer"], task.answer)
            assert row["solver_reward"] == pytest.approx(float(row["correct"]))  # no ê emitted
            if task.waypoints:
                assert 0.0 <= row["wcr_coverage"] <= 1.0
            else:
                assert row["wcr_coverage"] is None
                assert row["wcr_reward"] == wcr_reward(row["correct"], True, 0.0)


class ScriptedRoles:
    """Plays fixed turns per role with a fixed entropy per completion, keyed by a marker in
    the prompt (R-… reasoner, V-… verifier); like Scripted, only for the engine's bookkeeping."""

    model_id = "scripted"

    def __init__(self, scripts: dict[str, list[tuple[str, float]]]):
        self.scripts = scripts
        self.used: dict[str, int] = {}
        self.calls: list[tuple[int, int]] = []

    def generate_with_entropy(self, prompts, params, guides=None, top_k=5):
        from pipeline.llm.base import Completion

        self.calls.append((len(prompts), params.n))
        outs = []
        for p in prompts:
            key = max((k for k in self.scripts if k in p), key=p.rfind)
            text, h = self.scripts[key][self.used.get(key, 0)]
            self.used[key] = self.used.get(key, 0) + 1
            c = Completion(text, (h,) * self.count_tokens(text), exact=True)
            outs.append([c] * params.n)
        return outs

    def count_tokens(self, text):
        return len(text.split())


def test_arr_dialogue_rounds_violations_and_advantages(retriever):
    """Reasoner and verifier alternate, one generate call per role turn and one search batch
    per round; broken turns are recorded as role:reason; eqs. 5-9 land on the right rows."""
    import math

    from pipeline.agents.arr import ArrSettings, run_dialogues
    from pipeline.agents.arr_scoring import score_dialogues

    gen = ScriptedRoles(
        {
            "R-ok": [
                ("<think>plan</think>\n<search>Danube river Black Sea", 2.0),
                ("<verify>useful</verify>\n<think>so Black Sea</think>\n<answer>Black Sea", 1.0),
            ],
            "V-ok": [
                ("The query fits.</verify>\n<selected_doc>Doc 1</selected_doc>\n"
                 "<response>Doc 1 says Black Sea.", 0.5),
                ("Doc 1 supports it.</verify>\n<final_answer>Black Sea", 0.4),
            ],
            "R-bad": [("<search>Mozart opera", 1.0), ("I am not sure", 1.0), ("Salzburg", 1.0)],
            "V-bad": [("hmm", 3.0), ("ok</verify>\n<final_answer>Vienna", 1.0)],
        }
    )  # fmt: skip
    retriever.batches = []
    s = ArrSettings(max_rounds=3, topk=2, max_doc_tokens=200)
    ok, bad = (
        g[0]
        for g in run_dialogues(
            gen, retriever, ["R-ok\n", "R-bad\n"], ["V-ok\n", "V-bad\n"], SamplingParams(), s
        )
    )
    # r0 (both) | search batch | v0 critiques (both) | r1 (both) | v1 ok's answer check |
    # r2 bad's forced answer | v2 bad's answer check
    assert gen.calls == [(2, 1), (2, 1), (2, 1), (1, 1), (1, 1), (1, 1)]
    assert [len(b) for b in retriever.batches] == [2]
    assert (ok.final, ok.verifier_answer, ok.stop_reason, ok.violations) == (
        "Black Sea", "Black Sea", "final", [])  # fmt: skip
    assert "<feedback>Doc 1(Title: " in ok.transcript and "Doc 1 says Black Sea." in ok.transcript
    assert [(a.role, a.action) for a in ok.actions] == [
        ("reasoner", "think"), ("reasoner", "search"),
        ("verifier", "verify"), ("verifier", "selected_doc"), ("verifier", "response"),
        ("reasoner", "verify"), ("reasoner", "think"), ("reasoner", "answer"),
        ("verifier", "verify"), ("verifier", "final_answer"),
    ]  # fmt: skip
    assert [a.entropy for a in ok.actions if a.role == "reasoner"] == [2.0, 2.0, 1.0, 1.0, 1.0]
    assert bad.violations == [
        "verifier:missing_verify", "verifier:missing_response",
        "reasoner:missing_verify", "reasoner:no_action",
    ]  # fmt: skip
    assert (bad.final, bad.verifier_answer, bad.forced_final) == ("Salzburg", "Vienna", True)
    assert "The verifier gave no usable feedback." in bad.transcript

    # Scored as one group against "Black Sea" (hand-worked): F1s (1, 1) and (0, 0), no bonus.
    cols, turns = score_dialogues([ok, bad], "Black Sea", s)
    assert [c["outcome_reward"] for c in cols] == [1.0, 0.0]
    assert [c["verifier_reward"] for c in cols] == [1.0, 0.0]
    a = 0.5 / (0.5 + 1e-6)  # (r − mean)/(std + ε) with mean = std = 0.5
    assert cols[0]["outcome_advantage"] == pytest.approx(a)
    assert cols[1]["verifier_advantage"] == pytest.approx(-a)
    # ok's think entropies 2.0 → 1.0: pattern D; its verify has one step: impact = score(D).
    assert (cols[0]["entropy_pattern"], cols[0]["behavior_impact"]) == ("D", 1.0)
    assert (cols[1]["entropy_pattern"], cols[1]["behavior_impact"]) == (None, None)
    by = {(t["turn"], t["action"]): t for t in turns[0]}
    verify, response = by[(1, "verify")], by[(1, "response")]
    assert verify["gold_in_documents"] and not verify["gold_in_action"]
    assert verify["clarity"] == pytest.approx(-math.exp(-0.5))  # eq. 7: drops the answer
    assert response["clarity"] == pytest.approx(math.exp(-0.5))
    assert response["process_advantage"] == pytest.approx(1.0 * math.exp(-0.5) * 1.0)  # eq. 6
    assert response["advantage"] == pytest.approx(a + math.exp(-0.5))  # eq. 9
    assert by[(1, "selected_doc")]["advantage"] == pytest.approx(a)  # not a critique action
    assert by[(0, "think")]["advantage"] == pytest.approx(a)  # the reasoner: Â^r = A^r
    assert all(t["process_advantage"] is None for t in turns[1])  # no impact without a trend


@pytest.mark.slow
def test_arr_solver_on_the_real_model(retriever, llm):
    """ARR on the real CPU model: every action row joins its dialogue, carries the exact
    entropy of its own tokens, and the advantages agree with eqs. 5 and 9."""
    from pipeline.core.contracts import conform

    shots = load_few_shot(ROOT / "data" / "prompts" / "proposer_fewshot.jsonl")
    tasks = [SolverTask("r2", "Into which sea does the Danube flow?", "Black Sea", None, None, [])]
    from pipeline.agents.arr import ArrSettings

    s = SolverSettings(n=2, temperature=1.0, max_tokens=12, seed=5, protocol="arr",
                       arr=ArrSettings(max_rounds=2, topk=1, max_doc_tokens=64))  # fmt: skip
    (res,) = solve(llm, retriever, tasks, shots, s)
    ids = {row["rollout_id"] for row in res.rollouts}
    assert len(ids) == 2 and {t["rollout_id"] for t in res.turns} == ids
    assert sum(r["outcome_advantage"] for r in res.rollouts) == pytest.approx(0.0, abs=1e-6)
    for row in res.rollouts:
        assert row["protocol"] == "arr" and row["verifier_output"]
        assert all(":" in v for v in row["protocol_violations"])  # role:reason
        mine = [t for t in res.turns if t["rollout_id"] == row["rollout_id"]]
        assert {t["role"] for t in mine} <= {"reasoner", "verifier"}
        assert sorted({v for t in mine for v in t["violations"]}) == sorted(
            set(row["protocol_violations"])
        )
        for t in mine:
            assert t["entropy_exact"] is (True if t["entropy_tokens"] else None)
            assert (t["mean_entropy"] is None) == (t["entropy_tokens"] == 0)
            if t["role"] == "reasoner":
                assert t["advantage"] == row["outcome_advantage"]
            elif t["process_advantage"] is not None:
                assert t["advantage"] == pytest.approx(
                    row["verifier_advantage"] + t["process_advantage"]
                )
    run = {"run_id": "r"}
    assert conform("arr_turns", [{**t, **run} for t in res.turns]).num_rows == len(res.turns)
