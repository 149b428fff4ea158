"""The transformers backend's own decode loop: shared prefixes, row dropping, seeded rows.

Loads the real Gemma-3-270M (CPU); compares against transformers' own `generate` and an
unshared forward pass.
"""

import pytest
import torch

from pipeline.llm import sampling as sampling_module
from pipeline.llm import transformers_backend as backend_module
from pipeline.llm.base import SamplingParams, cut_at_stop
from pipeline.llm.kv_cache import KVCache
from pipeline.llm.sampling import row_generator, sample_next
from pipeline.llm.transformers_backend import _common_prefix

pytestmark = pytest.mark.slow

FEW_SHOT = (
    "Answer each question with a short phrase.\n\n"
    "Question: What is the largest planet in the solar system?\nAnswer: Jupiter\n\n"
    "Question: Who painted the Mona Lisa?\nAnswer: Leonardo da Vinci\n\n"
    "Question: What is the chemical symbol for gold?\nAnswer: Au\n\n"
)
QUESTIONS = [
    "What is the capital of France?",
    "Who wrote the play Hamlet?",
    "Which river flows through Vienna?",
    "In which country is the city of Kyoto?",
]
PROMPTS = [f"{FEW_SHOT}Question: {q}\nAnswer:" for q in QUESTIONS]


def _backend(llm):
    return getattr(llm, "inner", llm)


def _hf_greedy(gen, prompt: str, max_tokens: int, stop: tuple[str, ...]) -> str:
    enc = gen.tokenizer([prompt], return_tensors="pt")
    seqs = gen.model.generate(
        **enc, max_new_tokens=max_tokens, do_sample=False, pad_token_id=gen.tokenizer.pad_token_id
    )
    text = gen.tokenizer.decode(seqs[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return cut_at_stop(text, stop)


def test_common_prefix():
    assert _common_prefix([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert _common_prefix([[5, 6]]) == 2
    assert _common_prefix([[1], [2]]) == 0


def test_greedy_matches_transformers_generate_with_shared_prefix_and_row_dropping(llm):
    gen = _backend(llm)
    stop = ("\n",)
    p = SamplingParams(n=1, temperature=0.0, max_tokens=12, stop=stop)
    before = dict(gen.stats)
    ours = gen.generate(PROMPTS, p)
    d = {k: gen.stats[k] - before[k] for k in before}
    # The few-shot block is prefilled once for the batch, not once per prompt...
    assert d["prefill_tokens"] < d["prompt_tokens"] - 2 * gen.count_tokens(FEW_SHOT)
    # ...and rows that stopped early left the batch.
    assert d["row_steps"] <= d["padded_row_steps"]
    reference = [[_hf_greedy(gen, q, 12, stop)] for q in PROMPTS]
    assert ours == reference
    assert "paris" in ours[0][0].lower()


def test_unshared_and_shared_paths_agree(llm, monkeypatch):
    gen = _backend(llm)
    p = SamplingParams(n=2, temperature=0.0, max_tokens=10, stop=("\n",))
    prompts = [*PROMPTS, FEW_SHOT + "Question: Name the longest river in Africa, please.\nAnswer:"]
    shared = gen.generate(prompts, p)
    # Ragged suffixes prefilled as one padded chunk, or row by row: same answers.
    for waste in (0.0, 1.0):
        monkeypatch.setattr(backend_module, "_PAD_WASTE", waste)
        assert gen.generate(prompts, p) == shared
    gen.share_prefix = False
    try:
        unshared = gen.generate(prompts, p)
    finally:
        gen.share_prefix = True
    assert shared == unshared
    assert all(o[0] == o[1] for o in shared)  # greedy samples of one prompt are equal


@torch.inference_mode()
def test_prefix_pad_suffix_layout_logits_match_unshared_forward(llm):
    """[prefix][pad][suffix] rows with position masks give the plain forward's logits."""
    gen = _backend(llm)
    # Long enough that the sliding-window layers (512) really slide over the prefix.
    long_shot = FEW_SHOT * 12
    prompts = [f"{long_shot}Question: {q}\nAnswer:" for q in QUESTIONS[:3]]
    rows = [gen.tokenizer(p)["input_ids"] for p in prompts]
    assert len(rows[0]) > 600
    prefix = _common_prefix(rows)
    width = max(len(r) - prefix for r in rows)
    cache = KVCache(gen.model.config, capacity=prefix + width + 1)
    cache.reserve(1)
    pos = torch.arange(prefix)[None]
    gen._forward(cache, torch.tensor([rows[0][:prefix]]), pos, pos, logits=False)
    cache.select(torch.zeros(len(rows), dtype=torch.long))
    kv_pos = torch.full((len(rows), prefix + width), -1, dtype=torch.long)
    kv_pos[:, :prefix] = torch.arange(prefix)
    chunk = torch.full((len(rows), width), gen.tokenizer.pad_token_id, dtype=torch.long)
    for i, r in enumerate(rows):
        s = r[prefix:]
        chunk[i, width - len(s) :] = torch.tensor(s)
        kv_pos[i, prefix + width - len(s) :] = torch.arange(prefix, len(r))
    shared = gen._forward(cache, chunk, kv_pos[:, prefix:], kv_pos, logits=True)
    for i, r in enumerate(rows):
        plain = gen.model(input_ids=torch.tensor([r]), logits_to_keep=1).logits[0, -1].float()
        assert torch.allclose(shared[i], plain, atol=1e-3, rtol=1e-4), (
            (shared[i] - plain).abs().max()
        )
        assert shared[i].argmax() == plain.argmax()


def test_seeded_samples_do_not_depend_on_batch_composition(llm):
    gen = _backend(llm)
    p = SamplingParams(n=3, temperature=1.0, top_p=0.9, max_tokens=10, stop=("\n",), seed=11)
    together = gen.generate(PROMPTS, p)
    alone = [gen.generate([q], p)[0] for q in PROMPTS]
    assert together == alone
    assert gen.generate(PROMPTS, p) == together  # reproducible
    other = gen.generate(PROMPTS, SamplingParams(**{**p.to_dict(), "stop": ("\n",), "seed": 12}))
    assert other != together
    # Repeated prompts in one call are independent samples, not copies.
    rep = gen.generate([PROMPTS[0]] * 4, SamplingParams(**{**p.to_dict(), "stop": ("\n",), "n": 1}))
    assert len({o[0] for o in rep}) > 1


def test_sample_top_p_and_greedy():
    logits = torch.tensor([[0.0, 5.0, 4.9, -3.0], [2.0, 0.0, 0.0, 0.0]])
    assert sample_next(logits, SamplingParams(temperature=0.0), None).tolist() == [1, 0]
    # top_p this small keeps only the most likely token of each row
    rngs = [row_generator(0, "x", 0, j) for j in range(2)]
    for _ in range(20):
        out = sample_next(logits, SamplingParams(temperature=1.0, top_p=0.01), rngs)
        assert out.tolist() == [1, 0]
    rngs = [row_generator(0, "x", 0, 0)]
    draws = {int(sample_next(logits[:1], SamplingParams(temperature=1.0), rngs)) for _ in range(50)}
    assert draws <= {0, 1, 2, 3} and {1, 2} <= draws


def test_nucleus_from_top_candidates_equals_full_sort(monkeypatch):
    torch.manual_seed(0)
    logits = torch.randn(6, 5000) * 4
    params = SamplingParams(temperature=0.7, top_p=0.9)
    picks = {}
    for k in (64, 100_000):  # 64 candidates: rows whose nucleus is larger use the full sort
        monkeypatch.setattr(sampling_module, "NUCLEUS_CANDIDATES", k)
        rngs = [row_generator(3, "p", 0, j) for j in range(6)]
        picks[k] = [sample_next(logits, params, rngs).tolist() for _ in range(30)]
    assert picks[64] == picks[100_000]
    sharp = logits * 10  # nucleus inside the top 64: the cheap path
    for k in (64, 100_000):
        monkeypatch.setattr(sampling_module, "NUCLEUS_CANDIDATES", k)
        rngs = [row_generator(3, "p", 0, j) for j in range(6)]
        picks[k] = [sample_next(sharp, params, rngs).tolist() for _ in range(30)]
    assert picks[64] == picks[100_000]
