"""Prompt rendering for instruction-tuned models (llm.chat_template), with the real tokenizer
and model: the first prompt becomes the user turn, rollouts continue the assistant turn."""

from __future__ import annotations

import pytest

from pipeline.agents.prompts import load_few_shot, solver_prompt
from pipeline.agents.solver import SolverSettings, SolverTask, solve
from pipeline.core.config import load_config
from pipeline.llm.chat import make_renderer, plain, rendering
from tests.conftest import ROOT

# Gemma's turn format, as an instruct checkpoint's tokenizer_config.json would carry it.
GEMMA_TURNS = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>"
    "{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n{{ m['content'] }}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


@pytest.fixture
def template_file(tmp_path):
    path = tmp_path / "gemma_turns.jinja"
    path.write_text(GEMMA_TURNS)
    return path


def test_plain_is_the_default_and_renders_nothing():
    assert make_renderer(load_config(None)) is plain
    assert load_config("configs/production.yaml").llm.chat_template == "model"


def test_a_template_file_renders_one_user_turn_and_the_assistant_cue(template_file):
    cfg = load_config(None, [f"llm.chat_template={template_file}", "llm.system_prompt=Be exact."])
    render = make_renderer(cfg)
    text = render("Question: Who composed The Magic Flute?\n")
    assert text == (  # no <bos>: the backends add it when they tokenize
        "<start_of_turn>system\nBe exact.<end_of_turn>\n"
        "<start_of_turn>user\nQuestion: Who composed The Magic Flute?\n<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_model_template_on_a_base_tokenizer_is_a_clear_error(tmp_path):
    cfg = load_config(None, ["llm.chat_template=model"])
    with pytest.raises(ValueError, match=r"has no chat template; set llm\.chat_template"):
        make_renderer(cfg)
    cfg = load_config(None, [f"llm.chat_template={tmp_path / 'missing.jinja'}"])
    with pytest.raises(FileNotFoundError, match="no template file"):
        make_renderer(cfg)


def test_single_turn_callers_see_rendered_prompts(template_file, llm):
    render = make_renderer(load_config(None, [f"llm.chat_template={template_file}"]))
    assert rendering(llm, plain) is llm
    wrapped = rendering(llm, render)
    prompt = "Question: What is the capital of France?\nAnswer:"
    # Scoring through the wrapper equals scoring the rendered prompt directly.
    got = wrapped.score([prompt], [" Paris"])
    want = llm.score([render(prompt)], [" Paris"])
    assert got == pytest.approx(want) and got != pytest.approx(llm.score([prompt], [" Paris"]))


@pytest.mark.slow
def test_solver_rollouts_start_in_the_assistant_turn(template_file, llm, sample_index, embedder):
    from pipeline.retrieval.faiss_index import Retriever

    cfg = load_config(None, [f"llm.chat_template={template_file}"])
    retriever = Retriever(sample_index.dir, embedder)
    shots = load_few_shot(ROOT / "data" / "prompts" / "proposer_fewshot.jsonl")
    task = SolverTask("r1", "Who composed The Magic Flute?", "Mozart", None, None, [])
    s = SolverSettings(n=1, temperature=0.0, max_tokens=24, seed=1, max_turns=2)
    [res] = solve(llm, retriever, [task], shots, s, make_renderer(cfg))
    [row] = res.rollouts
    user_turn = solver_prompt(task.question, shots)
    # What the model saw (and what lands in the table) is the chat-rendered first prompt...
    assert row["prompt"] == f"<start_of_turn>user\n{user_turn}<end_of_turn>\n" + (
        "<start_of_turn>model\n"
    )
    # ...tokenized with exactly one BOS, and the rollout continued the assistant turn.
    ids = llm.tokenizer(row["prompt"])["input_ids"]
    assert ids.count(llm.tokenizer.bos_token_id) == 1
    assert 1 <= row["turns"] <= 2
