"""The reward that ships with every export: reward.py is the pipeline's reward
functions copied verbatim, proven equal to them on one table of cases (in this interpreter and
in a bare one without site-packages), equal to what the solver computed for its own rollouts,
in agreement with the exported prompt, and loaded by verl's own loader next to verl's
RLHFDataset reading a fresh export of a hand-made catalog."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import orjson
import pyarrow as pa
import pytest

from pipeline.agents import rewards as R
from pipeline.catalog.export import (
    MANIFEST,
    SEARCH_R1_TEMPLATE,
    ExportError,
    export_curriculum,
    verify_export,
)
from pipeline.catalog.export_reward import (
    TAGS,
    RewardSettings,
    copied_source,
    reward_module_source,
)
from pipeline.core.config import PipelineConfig
from schemas.exports import SOURCE_COLUMNS
from schemas.tables import CURRICULUM


def load_reward(path: Path):
    """The module as verl loads it: by path, not registered in sys.modules."""
    spec = importlib.util.spec_from_file_location("exported_reward", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reward_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("reward") / "reward.py"
    path.write_text(reward_module_source(RewardSettings(0.3, "test")), encoding="utf-8")
    return path


# ---- one table of cases -----------------------------------------------------------------

WAYPOINTS = ["general relativity", "Albert Einstein"]
EVIDENCE = "Einstein was born in Ulm, in the Kingdom of Württemberg"
Q = "In which city was the physicist who developed general relativity born?"
SEARCHED = (
    "<think>General relativity was developed by Albert Einstein.</think>\n"
    "<search> Albert Einstein birthplace </search>\n\n"
    "<information>Doc 1(Title: Albert Einstein) Einstein was born in Ulm, in the Kingdom of "
    "Württemberg.</information>\n\n<think>He was born there.</think>\n<answer> {a} </answer>"
)
# (name, response, ground truth, extra_info): every row is scored alone and as one group.
CASES = [
    ("gold", SEARCHED.format(a="Ulm"), {"target": ["Ulm"], "waypoints": WAYPOINTS}),
    ("gold_normalised", "<answer>the ULM.</answer>", {"target": ["Ulm"]}),
    ("wrong", "<answer> Munich </answer>", {"target": ["Ulm"], "waypoints": WAYPOINTS}),
    (
        "wrong_all_waypoints",
        SEARCHED.format(a="Munich"),
        {"target": ["Ulm"], "waypoints": WAYPOINTS},
    ),
    (
        "wrong_one_waypoint",
        "<think>Albert Einstein's birthplace?</think><answer>Munich</answer>",
        {"target": ["Ulm"], "waypoints": WAYPOINTS},
    ),
    ("no_waypoints", SEARCHED.format(a="Munich"), {"target": ["Ulm"], "waypoints": []}),
    ("waypoints_none", SEARCHED.format(a="Munich"), {"target": ["Ulm"], "waypoints": None}),
    (
        "unparseable",
        "<think>Albert Einstein</think> Ulm, I think.",
        {"target": ["Ulm"], "waypoints": WAYPOINTS},
    ),
    (
        "empty_answer",
        "<think>Albert Einstein</think><answer> </answer>",
        {"target": ["Ulm"], "waypoints": WAYPOINTS},
    ),
    ("unclosed_answer", "<think>x</think><answer> Ulm", {"target": ["Ulm"]}),
    ("last_answer_counts", "<answer>Ulm</answer> no, <answer>Bern</answer>", {"target": ["Ulm"]}),
    (
        "alias",
        "<answer> Ulm an der Donau </answer>",
        {"target": ["Ulm"], "aliases": ["Ulm an der Donau"]},
    ),
    (
        "alias_other_key",
        "<answer>ULM, Germany</answer>",
        {"target": ["Ulm"], "answer_aliases": ["Ulm Germany"]},
    ),
    (
        "not_an_alias",
        "<answer>Neu-Ulm</answer>",
        {"target": ["Ulm"], "aliases": ["Ulm an der Donau"]},
    ),
    (
        "forms_per_waypoint",
        "<think>Einstein's theory</think><answer>x</answer>",
        {"target": ["Ulm"], "waypoints": [["Albert Einstein", "Einstein"], "relativity"]},
    ),
    ("empty_response", "", {"target": ["Ulm"], "waypoints": WAYPOINTS}),
    (
        "invalid_tool_call",
        "<search> </search>\n\n<information>Empty search query.</information>\n\n"
        "<answer>Ulm</answer>",
        {"target": ["Ulm"]},
    ),
]
INFO = {"question": Q, "hop_count": 2}


def expected(responses: list[str], truth: dict, alpha: float = 0.3) -> list[R.TrainerScore]:
    """The pipeline's own functions on the same inputs."""
    answers = list(truth.get("target") or [])
    answers += truth.get("aliases") or truth.get("answer_aliases") or []
    return R.trainer_rewards(
        responses, answers, truth.get("waypoints"), Q, truth.get("evidence"), 2, alpha
    )


def test_trainer_rewards_are_the_solver_equations_spelled_out():
    """Each case by hand from the pipeline's lower-level functions: EM, coverage, eq. 6."""
    for name, resp, truth in CASES:
        (got,) = expected([resp], truth)
        pred = R.extract_answer(resp)
        forms = (truth.get("target") or []) + (
            truth.get("aliases") or truth.get("answer_aliases") or []
        )
        c = max((R.exact_match(pred, f) for f in forms), default=False)
        wp = truth.get("waypoints")
        g = R.waypoint_coverage(wp, R.think_text(resp)) if wp else 0.0
        assert (got.correct, got.valid, got.coverage) == (c, bool(pred), g), name
        assert got.score == got.wcr == R.wcr_rewards([c], [bool(pred)], [g], 0.3)[0], name
    scores = {name: expected([resp], truth)[0].score for name, resp, truth in CASES}
    assert scores["gold"] == scores["gold_normalised"] == scores["alias"] == 1.0
    assert scores["alias_other_key"] == 1.0 and scores["last_answer_counts"] == 0.0
    assert scores["wrong"] == scores["no_waypoints"] == scores["waypoints_none"] == 0.0
    assert scores["unparseable"] == scores["empty_answer"] == scores["empty_response"] == 0.0
    assert scores["wrong_all_waypoints"] == scores["wrong_one_waypoint"] == pytest.approx(0.3)
    assert scores["not_an_alias"] == 0.0 and scores["unclosed_answer"] == 1.0
    # In one group the partial credit is scaled by the best coverage (g~ = g / max g).
    group = [CASES[i][1] for i in (0, 2, 3, 4)]
    got = [s.score for s in expected(group, CASES[0][2])]
    assert got == pytest.approx([1.0, 0.0, 0.3, 0.15])


def test_exact_match_any_is_the_max_over_the_answer_and_its_aliases():
    forms = ["Ulm", "Ulm an der Donau"]
    for pred in ("ulm", "The Ulm an der Donau!", "Munich", "", None):
        assert R.exact_match_any(pred, forms) == max(R.exact_match(pred, f) for f in forms)
    assert R.exact_match_any("Ulm", "Ulm") and not R.exact_match_any("Ulm", None)


def test_covers_any_accepts_a_short_reply_holding_an_answer_form_on_word_boundaries():
    forms = ["Saxony", "Free State of Saxony"]
    assert R.covers_any("the state of Saxony, and the German state.", forms, 12)
    assert R.covers_any("saxony", forms, 1)  # EM needs no word budget
    assert not R.covers_any("the state of Saxony, and the German state.", forms, 5)
    assert not R.covers_any("Saxony-Anhalt", ["Anhalt-Saxony"], 12)
    assert not R.covers_any("in 19490", "1949", 12) and R.covers_any("vote 1949", "1949", 12)
    assert not R.covers_any("", forms, 12) and not R.covers_any(None, forms, 12)
    assert not R.covers_any("Saxony", None, 12)


def test_transcript_format_score_worked_example():
    # SEARCHED: 2 assistant turns, both open with <think>; 1 query, 1 response; h = 2;
    # "Ulm" is in the evidence/tool text: F = 1/4 (1 + 1 + min(2/2, 1) + 1) = 1.
    fs = R.transcript_format_score(Q, SEARCHED.format(a="Ulm"), EVIDENCE, 2)
    assert (fs.think, fs.tool, fs.answer, fs.total) == (1.0, 1.0, 1.0, 1.0)
    # An empty query with a response: T_tc = 0 != 1 response -> F_tool = 0.
    c = R.transcript_counts(CASES[-1][1])
    assert (c.assistant_turns, c.valid_tool_calls, c.tool_responses) == (2, 0, 1)
    assert R.transcript_format_score(Q, CASES[-1][1], EVIDENCE, 2).tool == 0.0
    assert R.transcript_format_score(Q, "", EVIDENCE, 2).total == 0.0


def test_reward_module_equals_the_pipeline_functions_on_every_case(reward_file):
    mod = load_reward(reward_file)
    for name, resp, truth in CASES:
        got = mod.compute_score("evidence_curriculum", resp, truth, INFO)
        (want,) = expected([resp], truth)
        assert got == {
            "score": want.score,
            "acc": float(want.correct),
            "valid": float(want.valid),
            "coverage": want.coverage,
            "wcr": want.wcr,
            "f_fmt": want.format,
        }, name
    # verl's reward_kwargs override the export's settings.
    partial = CASES[3]
    got = mod.compute_score("x", partial[1], partial[2], INFO, alpha=0.5, format_weight=0.1)
    (want,) = R.trainer_rewards([partial[1]], ["Ulm"], WAYPOINTS, Q, None, 2, 0.5, 0.1)
    assert got["score"] == pytest.approx(want.score) == pytest.approx(0.5 + 0.1 * want.format)


def test_reward_module_is_standard_library_only(reward_file, tmp_path):
    """A bare interpreter (-I -S: no site-packages, no project) scores the case table."""
    script = (
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('r', {str(reward_file)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "cases = json.load(sys.stdin)\n"
        "out = [m.compute_score('d', r, t, i)['score'] for r, t, i in cases]\n"
        "mods = sorted(k for k in sys.modules if k.split('.')[0] in "
        "('pipeline', 'schemas', 'numpy', 'yaml'))\n"
        "print(json.dumps({'scores': out, 'modules': mods}))\n"
    )
    cases = json.dumps([[r, t, INFO] for _, r, t in CASES])
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script],
        input=cases,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    res = json.loads(done.stdout)
    assert res["modules"] == []
    assert res["scores"] == [expected([r], t)[0].score for _, r, t in CASES]


def test_reward_module_is_generated_from_rewards_py():
    """The copied block is rewards.py's own text; nothing else defines a reward there."""
    src = reward_module_source(RewardSettings(0.25, "test"))
    block = copied_source(["trainer_rewards"])
    assert block in src and "SETTINGS = {'alpha': 0.25, 'format_weight': 0.0}" in src
    rewards_text = Path(R.__file__).read_text(encoding="utf-8")
    for name in ("normalize", "waypoint_coverage", "wcr_rewards", "extract_answer", "format_score"):
        m = re.search(rf"^def {name}\(.*?(?=^\S)", rewards_text, re.S | re.M)
        assert m and m.group(0).rstrip() in block, name
    assert not re.search(r"^\s*(from|import) pipeline", src, re.M)
    assert "def difficulty(" not in block  # only what trainer_rewards needs


def test_a_reward_function_needing_a_package_outside_the_standard_library_is_refused(tmp_path):
    from types import SimpleNamespace

    from pipeline.catalog.export_reward import RewardConfigError

    path = tmp_path / "fake_rewards.py"
    path.write_text(
        "import re\nimport numpy as np\nimport yaml\n\n"
        "def plain(x):\n    return re.sub('a', 'b', x)\n\n"
        "def vector(x):\n    return np.asarray(x)\n",
        encoding="utf-8",
    )
    fake = SimpleNamespace(__file__=str(path), __name__="fake_rewards")
    assert (
        copied_source(["plain"], fake)
        == "import re\n\n\ndef plain(x):\n    return re.sub('a', 'b', x)\n"
    )
    with pytest.raises(RewardConfigError, match="imports numpy"):
        copied_source(["vector"], fake)


def test_the_prompts_own_demonstration_scores_full_reward(reward_file):
    mod = load_reward(reward_file)
    demo = re.search(r"<answer>(.*?)</answer>", SEARCH_R1_TEMPLATE)
    assert demo, "the exported prompt shows how to answer"
    truth = {"target": [demo.group(1).strip()], "waypoints": []}
    assert mod.compute_score("evidence_curriculum", demo.group(0), truth, {})["score"] == 1.0
    # ... and a whole trajectory in the prompt's tags gets full reward and full F_fmt.
    for open_, close in TAGS.values():
        assert open_ in SEARCH_R1_TEMPLATE and close in SEARCH_R1_TEMPLATE
    traj = SEARCHED.format(a="Ulm")
    got = mod.compute_score("evidence_curriculum", traj, {"target": ["Ulm"]}, INFO)
    assert got["score"] == 1.0 and got["f_fmt"] == 1.0


def test_reward_module_scores_the_solvers_rollouts_as_the_solver_did(reward_file):
    """The pipeline's own solver on scripted turns: its correct / wcr_reward columns equal
    what the exported reward gives the same transcripts (TRL's function, one group)."""
    from pipeline.agents.solver import SolverSettings, SolverTask, solve
    from pipeline.retrieval.faiss_index import Hit

    plans = [
        ["<think>General relativity is Albert Einstein's.</think>\n<search>Einstein birthplace",
         "<think>Born in Ulm.</think>\n<answer>Ulm"],
        ["<think>general relativity by Albert Einstein</think>\n<answer>Munich"],
        ["<think>Albert Einstein?</think>\n<answer>Munich"],
        ["No idea.", "Bern"],  # no action: the engine opens <answer> for it
        ["<think>Albert Einstein</think>\n<answer>"],  # empty answer: not valid
    ]  # fmt: skip

    class Plans:
        model_id = "plans"

        def generate(self, prompts, params, guides=None):
            if params.n > 1:  # first turn: one plan per sample
                return [[p[0] for p in plans] for _ in prompts]
            out = []
            for prompt in prompts:
                plan = next(p for p in plans if p[0] in prompt)
                out.append([plan[sum(seg in prompt for seg in plan)]])
            return out

        def count_tokens(self, text):
            return len(text.split())

    class Docs:
        def search_with_vectors(self, queries, k=3):
            hit = Hit("2", "Albert Einstein", EVIDENCE, 1.0, 0)
            return [[hit] for _ in queries], [[1.0, 0.0] for _ in queries]

    forms = [[w] for w in WAYPOINTS]
    task = SolverTask("r1", Q, "Ulm", EVIDENCE, None, forms)
    settings = SolverSettings(n=len(plans), temperature=0.0, max_tokens=64, seed=0)
    (res,) = solve(Plans(), Docs(), [task], [], settings)
    rows = res.rollouts
    assert [r["wcr_reward"] for r in rows] == pytest.approx([1.0, 0.3, 0.15, 0.0, 0.0])
    mod = load_reward(reward_file)
    got = mod.curriculum_reward(
        prompts=[[{"role": "user", "content": Q}]] * len(rows),
        completions=[[{"role": "assistant", "content": r["raw_output"]}] for r in rows],
        completion_ids=[[0]] * len(rows),
        golden_answers=[["Ulm"]] * len(rows),
        waypoints=[forms] * len(rows),
        evidence=[EVIDENCE] * len(rows),
        question=[Q] * len(rows),
        hop_count=[2] * len(rows),
        trainer_state=None,
    )
    assert got == [r["wcr_reward"] for r in rows]
    scores = R.trainer_rewards([r["raw_output"] for r in rows], ["Ulm"], forms, Q, EVIDENCE, 2)
    assert [s.correct for s in scores] == [r["correct"] for r in rows]
    assert [s.coverage for s in scores] == [r["wcr_coverage"] for r in rows]


# ---- a fresh export of a hand-made catalog ------------------------------------------------

RECORDS = [
    # (record_id, source passage, question, answer, evidence, waypoints, hop count)
    ("rec-einstein", "2", Q, "Ulm", EVIDENCE, WAYPOINTS, 2),
    ("rec-mozart", "106", "Where was the composer of The Magic Flute born?", "Salzburg",
     "He was born in Salzburg", ["The Magic Flute", "Wolfgang Amadeus Mozart"], 2),
    ("rec-flute", "110", "In which year did the opera first staged at the Theater auf der "
     "Wieden in September open?", "1791", "The Magic Flute opened on 30 September 1791",
     None, 1),
    ("rec-vienna", "235", "Who founded the oldest university in the German-speaking world?",
     "Duke Rudolf IV", "founded in 1365 by Duke Rudolf IV", None, 1),
    ("rec-haydn", "132", "What was the trade of Haydn's father?", "wheelwright",
     "Haydn's father, Mathias, was a wheelwright", None, 1),
]  # fmt: skip


def make_catalog(path: Path, alphas: dict[str, float] | None = None) -> Path:
    """A catalog file with a `curriculum` and a `runs` table, as the export reads them."""
    alphas = alphas or {"run-a": 0.3}
    runs = list(alphas)
    types = {f.name: f.type for f in CURRICULUM}
    rows = []
    for i, (rid, pid, q, a, ev, wp, hops) in enumerate(RECORDS):
        row = dict.fromkeys(SOURCE_COLUMNS)
        row |= {
            "record_id": rid,
            "run_id": runs[i % len(runs)],
            "source_passage_id": pid,
            "evidence_passage_id": pid,
            "question": q,
            "answer": a,
            "evidence": ev,
            "waypoints": wp,
            "hop_count": hops,
            "task_type": "factual",
            "verifier_v": 0.5,
            "config_hash": "0" * 16,
        }
        rows.append(row | {"is_valid": True, "is_verbatim": True})
    rows.append(rows[0] | {"record_id": "rec-invalid", "is_valid": False})
    schema = pa.schema(
        [pa.field(c, types[c]) for c in SOURCE_COLUMNS]
        + [pa.field("is_valid", pa.bool_()), pa.field("is_verbatim", pa.bool_())]
    )
    curriculum = pa.Table.from_pylist(rows, schema=schema)
    with duckdb.connect(str(path)) as con:
        con.register("c", curriculum)
        con.execute("CREATE TABLE curriculum AS SELECT * FROM c")
        con.execute(
            "CREATE TABLE runs (run_id VARCHAR, run_date DATE, profile VARCHAR, "
            "config_hash VARCHAR, config_yaml VARCHAR, started_at TIMESTAMPTZ, "
            "finished_at TIMESTAMPTZ, status VARCHAR, schema_version VARCHAR)"
        )
        for run_id, alpha in alphas.items():
            cfg = PipelineConfig.model_validate({"rewards": {"wcr_alpha": alpha}})
            con.execute(
                "INSERT INTO runs VALUES (?, DATE '2026-11-25', 'embedded', ?, ?, "
                "TIMESTAMPTZ '2026-11-25 00:00:00+00', TIMESTAMPTZ '2026-11-25 00:10:00+00', "
                "'completed', 'x')",
                [run_id, "0" * 16, cfg.to_yaml()],
            )
    return path


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    base = tmp_path_factory.mktemp("export_reward")
    catalog = make_catalog(base / "catalog.duckdb")
    res = export_curriculum(
        catalog, base / "ds", formats=["verl", "hf", "jsonl"], validation_fraction=0.3
    )
    return res


def test_every_export_ships_reward_and_card_listed_in_the_manifest(export):
    out = export.out
    assert (out / "reward.py").is_file() and (out / "README.md").is_file()
    m = orjson.loads((out / MANIFEST).read_bytes())
    entries = {f["path"]: f for f in m["files"]}
    assert entries["reward.py"]["format"] is None and "README.md" in entries
    assert verify_export(out) == []
    r = m["reward"]
    assert (r["alpha"], r["format_weight"]) == (0.3, 0.0)
    assert r["alpha_from"] == "rewards.wcr_alpha of run(s) run-a"
    assert r["verl"]["reward.custom_reward_function.name"] == "compute_score"
    assert r["trl"]["reward_funcs"] == "curriculum_reward"
    assert r["tags"] == TAGS and set(r["components"]) == {"correct", "wcr", "format"}
    assert (out / "reward.py").read_text() == reward_module_source(RewardSettings(0.3, "x"))
    card = (out / "README.md").read_text()
    # publishable as it is: paths relative to the export's folder, none of this machine's
    assert "reward.custom_reward_function.path=reward.py" in card
    assert "data.train_files=verl/train.parquet" in card
    assert str(out.parent) not in card  # neither the export's nor the catalog's folder
    assert "curriculum_reward" in card


def test_alpha_comes_from_the_runs_config_and_runs_must_agree(tmp_path):
    catalog = make_catalog(tmp_path / "one.duckdb", {"run-a": 0.25})
    res = export_curriculum(catalog, tmp_path / "one", formats=["jsonl"])
    assert res.manifest["reward"]["alpha"] == 0.25
    assert "SETTINGS = {'alpha': 0.25," in (res.out / "reward.py").read_text()
    catalog = make_catalog(tmp_path / "two.duckdb", {"run-a": 0.3, "run-b": 0.5})
    with pytest.raises(ExportError, match=r"disagree on rewards\.wcr_alpha") as err:
        export_curriculum(catalog, tmp_path / "two", formats=["jsonl"])
    assert "--run-id" in err.value.hint and not (tmp_path / "two").exists()
    res = export_curriculum(catalog, tmp_path / "b", formats=["jsonl"], run_ids=["run-b"])
    assert res.manifest["reward"]["alpha"] == 0.5


def test_trl_signature_on_the_hf_export(export):
    """TRL passes the prompts, the completions and every other dataset column as lists."""
    import datasets

    mod = load_reward(export.out / "reward.py")
    ds = datasets.load_from_disk(str(export.out / "hf"))
    rows = [r for s in ("train", "validation") for r in ds[s]]
    rows = [r for r in rows if r["waypoints"]]
    assert rows, "the export has KG records"
    completions, cols = [], {k: [] for k in rows[0] if k != "prompt"}
    for r in rows:  # four completions per prompt, as GRPO's num_generations
        think = " and ".join(r["waypoints"])
        for text in (
            f"<answer>{r['answer']}</answer>",
            "<answer>nowhere</answer>",
            f"<think>{think}</think><answer>nowhere</answer>",
            f"<think>{r['waypoints'][0]}</think><answer>nowhere</answer>",
        ):
            completions.append([{"role": "assistant", "content": text}])
            for k in cols:
                cols[k].append(r[k])
    prompts = [r["prompt"] for r in rows for _ in range(4)]
    got = mod.curriculum_reward(prompts, completions, completion_ids=None, **cols)
    assert got == pytest.approx([1.0, 0.0, 0.3, 0.15] * len(rows))


@pytest.mark.slow
def test_verl_loads_the_export_and_its_reward(export, tmp_path):
    """verl 0.9.1's RLHFDataset reads the verl parquet (the base Gemma tokenizer given a chat
    template) and verl's get_custom_reward_fn loads reward.py: gold 1, wrong 0, a wrong answer
    naming waypoints WCR's partial credit, the numbers of the pipeline's functions; verl's
    NaiveRewardManager gives the same for the responses as tokens."""
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from pipeline.core.config import load_config
    from pipeline.core.model_refs import resolve_llm

    llm = load_config(None, []).llm
    tok = AutoTokenizer.from_pretrained(resolve_llm(llm.model, llm.cache_dir))
    assert not tok.chat_template  # Gemma-3-270M base: a trainer supplies one
    tok.chat_template = (
        "{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}"
        "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n"
        "{% endif %}"
    )
    files = [str(export.out / "verl" / f"{s}.parquet") for s in ("train", "validation")]
    cfg = OmegaConf.create(
        {"prompt_key": "prompt", "max_prompt_length": 1024, "cache_dir": str(tmp_path),
         "filter_overlong_prompts": True, "filter_overlong_prompts_workers": 1}
    )  # fmt: skip
    ds = RLHFDataset(files, tok, cfg)
    assert len(ds) == export.counts["exported"]  # no prompt filtered as too long
    rows = [ds[i] for i in range(len(ds))]
    fn = get_custom_reward_fn(
        OmegaConf.create(
            {"reward": {"custom_reward_function": {
                "path": str(export.out / "reward.py"), "name": "compute_score",
                "reward_kwargs": {}}}}
        )
    )  # fmt: skip
    kg = [r for r in rows if len(r["reward_model"]["ground_truth"]["waypoints"]) >= 2]
    assert kg
    for row in kg:
        truth, info = row["reward_model"]["ground_truth"], row["extra_info"]
        assert row["raw_prompt"] == row["prompt"] and row["data_source"] == "evidence_curriculum"
        target = truth["target"][0]
        responses = {
            "gold": f"<think>Looking it up.</think>\n<answer> {target} </answer>",
            "wrong": "<answer> nowhere </answer>",
            "partial": f"<think>It is about {truth['waypoints'][0]}.</think>\n<answer> nowhere"
            " </answer>",
        }
        got = {k: fn(row["data_source"], v, truth, info)["score"] for k, v in responses.items()}
        want = {
            k: R.trainer_rewards(
                [v], truth["target"], truth["waypoints"], info["question"], truth["evidence"],
                info["hop_count"], 0.3,
            )[0].score
            for k, v in responses.items()
        }  # fmt: skip
        assert got == want == {"gold": 1.0, "wrong": 0.0, "partial": pytest.approx(0.3)}
        # The same responses as tokens through verl's reward loop (decode, call, dict result).
        managed = {k: naive_reward(tok, fn, row, v) for k, v in responses.items()}
        assert {k: m["reward_score"] for k, m in managed.items()} == got
        assert managed["partial"]["reward_extra_info"]["coverage"] == 0.5
        print(f"verl scores for {info['record_id']}: {got}")


def naive_reward(tok, fn, row: dict, text: str) -> dict:
    """verl's NaiveRewardManager (its reward loop's default) on one tokenized response."""
    import numpy as np
    import torch
    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    prompt = tok(row["prompt"][0]["content"], return_tensors="pt")["input_ids"]
    resp = tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    pad = torch.full((1, 3), tok.pad_token_id, dtype=resp.dtype)  # right padding, masked
    data = DataProto.from_dict(
        tensors={
            "prompts": prompt,
            "responses": torch.cat([resp, pad], 1),
            "attention_mask": torch.cat(
                [torch.ones_like(prompt), torch.ones_like(resp), torch.zeros_like(pad)], 1
            ),
        },
        non_tensors={
            "data_source": np.array([row["data_source"]], dtype=object),
            "reward_model": np.array([row["reward_model"]], dtype=object),
            "extra_info": np.array([dict(row["extra_info"])], dtype=object),
        },
    )
    mgr = NaiveRewardManager(OmegaConf.create({}), tok, fn)
    return mgr.loop.run_until_complete(mgr.run_single(data))
