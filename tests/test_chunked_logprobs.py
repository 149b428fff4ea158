"""Scoring without full-vocabulary logits: the same numbers as the full-logits way, chunk by chunk.

References below are the computation score() and token_logprobs() did before (one logit row
per position over the whole vocabulary, normalised with log_softmax resp. logsumexp), on the
real Gemma-3-270M; the same budget-sized chunks serve every text length.
"""

import pytest
import torch

from pipeline.llm import chunked_head
from pipeline.llm.base import SamplingParams
from pipeline.llm.cancel import Cancelled, CancelToken, cancellable

pytestmark = pytest.mark.slow

FEW = "Question: What is the largest planet?\nAnswer: Jupiter\n"
PROMPTS = [
    f"{FEW}Question: What is the capital of France?\nAnswer:",
    f"{FEW}Question: Who wrote Hamlet?\nAnswer:",
    f"{FEW}Question: Where was Einstein born?\nAnswer:",
]
CONTS = [
    " Paris",
    " William Shakespeare wrote it around 1600",
    " He was born in Ulm, in the Kingdom of Württemberg, on 14 March 1879.",
]


def _gen(llm):
    return getattr(llm, "inner", llm)


@torch.inference_mode()
def _full_vocab(gen, ids: list[int], log_softmax: bool) -> torch.Tensor:
    """log P(token p | tokens < p) for p >= 1, from one vocabulary-sized row per position."""
    x = torch.tensor([ids])
    logits = gen.model(input_ids=x, logits_to_keep=torch.arange(len(ids) - 1)).logits[0].float()
    if log_softmax:
        return torch.log_softmax(logits, -1).gather(1, x[0, 1:, None]).squeeze(1)
    return logits.gather(1, x[0, 1:, None]).squeeze(1) - torch.logsumexp(logits, -1)


def test_score_equals_the_full_vocabulary_computation(llm):
    gen = _gen(llm)
    for p, c in zip(PROMPTS, CONTS, strict=True):
        a = gen.tokenizer(p)["input_ids"]
        b = gen.tokenizer(c, add_special_tokens=False)["input_ids"]
        ref = float(_full_vocab(gen, a + b, log_softmax=True)[len(a) - 1 :].sum())
        assert gen.score([p], [c])[0] == pytest.approx(ref, abs=1e-4)


def test_token_logprobs_equal_the_full_vocabulary_computation(llm, monkeypatch):
    gen = _gen(llm)
    texts = [p + c for p, c in zip(PROMPTS, CONTS, strict=True)]
    wide = gen.token_logprobs(texts, top_k=2)
    # A small budget: blocks of 16 positions, the vocabulary in 128 slices of 2048 tokens.
    monkeypatch.setattr(chunked_head, "CHUNK_BYTES", 16 * 4 * 2048)
    narrow = gen.token_logprobs(texts, top_k=2)
    for text, view, other in zip(texts, wide, narrow, strict=True):
        ref = _full_vocab(gen, gen.tokenizer(text)["input_ids"], log_softmax=False).tolist()
        assert view.token_logprobs == pytest.approx(ref, abs=1e-4)
        assert other.token_logprobs == pytest.approx(ref, abs=1e-4)
        assert [list(t) for t in other.top_logprobs] == [list(t) for t in view.top_logprobs]


def test_cancelled_work_stops_at_the_next_checkpoint(llm):
    gen = _gen(llm)
    token = CancelToken()
    token.cancel("test: stop")
    with cancellable(token), pytest.raises(Cancelled, match="test: stop"):
        gen.generate(PROMPTS[:1], SamplingParams(max_tokens=4))
    with cancellable(token), pytest.raises(Cancelled):
        gen.token_logprobs(PROMPTS[:1])
    # outside the block nothing is cancelled
    assert gen.score(PROMPTS[:1], CONTS[:1])[0] < 0
