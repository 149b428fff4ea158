"""Teacher forcing inside vLLM's sampler, so a score pays for the answer's positions only.

Prompt log-probabilities (`SamplingParams(prompt_logprobs=0)`) run the LM head and a
log-softmax at every prompt position — for Gemma 3 a 262,144-word vocabulary, more work than
the model body — and such requests skip the prefix cache. A score needs only the answer's
positions: a request that carries the continuation's token ids under `extra_args[FORCE_KEY]`
is decoded greedily with every other token masked at each step, so it emits exactly those
tokens, computing logits at the prompt's last position and at each answer position, with the
prompt served from the prefix cache like any generation. vLLM reports a sampled token's
log-prob from the raw logits, before any logits processor runs (`logprobs_mode`
"raw_logprobs", its default), so each reported value is log P(token | prefix) as prompt
log-probabilities give it.

The engine loads the class by name in its worker process (`LOGITS_PROCESSOR`); requests
without the key pass through untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

FORCE_KEY = "forced_token_ids"
LOGITS_PROCESSOR = "pipeline.llm.forced_tokens:ForcedTokens"


def _forcer(ids: Sequence[int]) -> Callable[[list[int], torch.Tensor], torch.Tensor]:
    last = len(ids) - 1

    def force(output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
        logits.fill_(float("-inf"))  # in place: the row is a view of the batch's logits
        logits[ids[min(len(output_ids), last)]] = 0.0
        return logits

    return force


class ForcedTokens(AdapterLogitsProcessor):
    """Masks all but the next forced token of each request that names some."""

    @classmethod
    def validate_params(cls, sampling_params) -> None:
        ids = (sampling_params.extra_args or {}).get(FORCE_KEY)
        if ids is None:
            return
        if not ids or not all(isinstance(i, int) and i >= 0 for i in ids):
            raise ValueError(f"{FORCE_KEY} must be a non-empty list of token ids")
        if sampling_params.max_tokens != len(ids):
            raise ValueError(f"{FORCE_KEY}: max_tokens must equal the number of forced tokens")

    def is_argmax_invariant(self) -> bool:
        return False  # it decides the argmax

    def new_req_logits_processor(self, params):
        ids = (params.extra_args or {}).get(FORCE_KEY)
        return _forcer(tuple(ids)) if ids else None
