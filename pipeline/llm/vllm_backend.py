"""vLLM backend: the offline `vllm.LLM` engine in-process (GPU hosts; `pip install .[vllm]`).

vLLM is imported inside the constructor, so this module imports anywhere; it cannot be
installed on the CPU build machines, so only the glue below is tested there (against a fake
`vllm` module that mimics the documented API). The same protocol is exercised end to end by
the HTTP backend against a real local server.

- generate(): one `llm.generate(prompts, SamplingParams(n=, temperature=, top_p=, max_tokens=,
  stop=, seed=))` call for the whole batch; vLLM's continuous batching and prefix caching
  (`enable_prefix_caching=True`) share the prompt prefill across the n samples. Prompts over
  `max_prompt_tokens` are sent as left-truncated token ids (BOS kept), as the transformers
  backend truncates them.
- score(): prompt and continuation are tokenized separately with the engine's tokenizer
  (prompt with special tokens, left-truncated to max_prompt_tokens; continuation without),
  concatenated and sent as token ids with `SamplingParams(max_tokens=1, prompt_logprobs=0)`;
  the continuation tokens' entries of `RequestOutput.prompt_logprobs` (one
  `{token_id: Logprob}` dict per prompt token, None for the first) are summed. This is the
  same tokenization as the transformers backend, so scores agree across backends and no
  text-offset boundary guessing is needed.
- generate(..., guides): a guided prompt gets its own SamplingParams (with its regex) in the
  same engine call. generate_guided(): the other structured outputs (JSON schema or a choice
  list; not used by the pipeline). vLLM >= 0.12 uses
  `SamplingParams(structured_outputs=StructuredOutputsParams(...))`, older releases
  `SamplingParams(guided_decoding=GuidedDecodingParams(...))`; both are supported.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pipeline.llm.base import SamplingParams, check_guides, cut_at_stop

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "the vllm backend needs vLLM, which is CUDA-only: on a GPU host run `pip install '.[vllm]'` "
    "(or pip install vllm); on CPU machines use llm.backend=transformers, or llm.backend=http "
    "against a `vllm serve` host"
)


def import_vllm():
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(f"vLLM is not importable ({exc}); {INSTALL_HINT}") from exc
    return vllm


def score_token_ids(
    tokenizer, prompt: str, continuation: str, max_prompt_tokens: int
) -> tuple[list[int], int]:
    """Token ids of prompt + continuation and the index of the first continuation token."""
    p = list(tokenizer(prompt, add_special_tokens=True)["input_ids"])[-max_prompt_tokens:]
    c = list(tokenizer(continuation, add_special_tokens=False)["input_ids"])
    return p + c, len(p)


def sum_prompt_logprobs(prompt_logprobs: Sequence[Any], token_ids: Sequence[int], start: int):
    """Sum log P(token_ids[i]) over i >= start from vLLM's `RequestOutput.prompt_logprobs`.

    `prompt_logprobs[i]` is None (position 0) or a dict token_id -> Logprob (`.logprob`), which
    always contains the actual prompt token, whatever `prompt_logprobs=k` asked for.
    """
    if len(prompt_logprobs) != len(token_ids):
        raise ValueError(
            f"prompt_logprobs has {len(prompt_logprobs)} entries for {len(token_ids)} tokens"
        )
    total = 0.0
    for i in range(max(start, 1), len(token_ids)):
        entry = prompt_logprobs[i]
        if entry is None or token_ids[i] not in entry:
            raise ValueError(f"no log-prob for prompt token {i} (id {token_ids[i]})")
        lp = entry[token_ids[i]]
        total += float(getattr(lp, "logprob", lp))
    return total


def structured_kwargs(
    sampling_module,
    *,
    regex: str | None = None,
    json_schema: dict | str | None = None,
    choice: Sequence[str] | None = None,
) -> dict[str, Any]:
    """SamplingParams keyword for one structured-output constraint, for old and new vLLM."""
    given = {
        k: v
        for k, v in {"regex": regex, "json": json_schema, "choice": choice}.items()
        if v is not None
    }
    if len(given) != 1:
        raise ValueError("give exactly one of regex, json_schema, choice")
    if "choice" in given:
        given["choice"] = list(given["choice"])
    if hasattr(sampling_module, "StructuredOutputsParams"):  # vLLM >= 0.12 (0.10.2+ has it)
        return {"structured_outputs": sampling_module.StructuredOutputsParams(**given)}
    if hasattr(sampling_module, "GuidedDecodingParams"):  # vLLM 0.6 .. 0.11
        return {"guided_decoding": sampling_module.GuidedDecodingParams(**given)}
    raise ImportError("this vLLM has neither StructuredOutputsParams nor GuidedDecodingParams")


class VLLMGenerator:
    """Generator over vLLM's offline engine (one engine per process)."""

    def __init__(
        self,
        model: str,
        *,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.85,
        dtype: str = "auto",
        seed: int = 0,
        max_prompt_tokens: int = 4096,
        enable_prefix_caching: bool = True,
        cache_dir: str = "~/.cache/evidence-curriculum/models",
        **engine_kwargs: Any,
    ) -> None:
        vllm = import_vllm()
        from vllm import sampling_params as sampling_module

        from pipeline.models import resolve_llm

        self._vllm = vllm
        self._sampling_module = sampling_module
        self.model_id = model
        self.max_prompt_tokens = max_prompt_tokens
        self.llm = vllm.LLM(
            model=resolve_llm(model, cache_dir),
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            dtype=dtype,
            seed=seed,
            enable_prefix_caching=enable_prefix_caching,
            **engine_kwargs,
        )
        self.tokenizer = self.llm.get_tokenizer()

    @classmethod
    def from_config(cls, llm, seed: int = 0) -> VLLMGenerator:
        return cls(
            llm.model,
            tensor_parallel_size=llm.tensor_parallel_size,
            gpu_memory_utilization=llm.gpu_memory_utilization,
            dtype=llm.dtype,
            seed=seed,
            max_prompt_tokens=llm.max_prompt_tokens,
            cache_dir=llm.cache_dir,
        )

    def _params(self, params: SamplingParams, **extra: Any):
        return self._vllm.SamplingParams(
            n=params.n,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
            stop=list(params.stop) or None,
            seed=params.seed,
            **extra,
        )

    def _inputs(self, prompts: Sequence[str]) -> list:
        """Prompt strings, or left-truncated token ids for prompts over max_prompt_tokens.

        Like the transformers backend, an over-long prompt loses its beginning (few-shot
        examples), never the part the model continues from; a leading BOS is kept.
        """
        out: list = []
        bos = getattr(self.tokenizer, "bos_token_id", None)
        for p in prompts:
            ids = list(self.tokenizer(p, add_special_tokens=True)["input_ids"])
            if len(ids) <= self.max_prompt_tokens:
                out.append(p)
                continue
            keep = self.max_prompt_tokens
            head = [bos] if bos is not None and ids[0] == bos else []
            out.append({"prompt_token_ids": head + ids[len(ids) - (keep - len(head)) :]})
        return out

    def _run(self, prompts: Sequence[str], sp, stop: Sequence[str]) -> list[list[str]]:
        outputs = self.llm.generate(self._inputs(prompts), sp, use_tqdm=False)
        return [[cut_at_stop(o.text, stop) for o in out.outputs] for out in outputs]

    def generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        guides: Sequence[str | None] | None = None,
    ) -> list[list[str]]:
        """One engine call; guided prompts get their own SamplingParams (vLLM takes a list)."""
        if not prompts:
            return []
        guides = check_guides(prompts, guides)
        if guides is None:
            return self._run(prompts, self._params(params), params.stop)
        plain_sp, by_regex = self._params(params), {}
        sps = []
        for g in guides:
            if g is not None and g not in by_regex:
                by_regex[g] = self._params(
                    params, **structured_kwargs(self._sampling_module, regex=g)
                )
            sps.append(plain_sp if g is None else by_regex[g])
        return self._run(prompts, sps, params.stop)

    def generate_guided(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        regex: str | None = None,
        *,
        json_schema: dict | str | None = None,
        choice: Sequence[str] | None = None,
    ) -> list[list[str]]:
        """generate() whose completions are constrained to a regex, JSON schema or choice.

        Completions are still cut at stop strings afterwards (a stop string inside the
        constrained text truncates it, as in generate()).
        """
        if not prompts:
            return []
        extra = structured_kwargs(
            self._sampling_module, regex=regex, json_schema=json_schema, choice=choice
        )
        return self._run(prompts, self._params(params, **extra), params.stop)

    def score(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[float]:
        if len(prompts) != len(continuations):
            raise ValueError("score() needs one continuation per prompt")
        if not prompts:
            return []
        encoded = [
            score_token_ids(self.tokenizer, p, c, self.max_prompt_tokens)
            for p, c in zip(prompts, continuations, strict=True)
        ]
        sp = self._vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        requests = [{"prompt_token_ids": ids} for ids, _ in encoded]  # vllm TokensPrompt
        outputs = self.llm.generate(requests, sp, use_tqdm=False)
        return [
            sum_prompt_logprobs(out.prompt_logprobs, ids, start) if len(ids) > start else 0.0
            for out, (ids, start) in zip(outputs, encoded, strict=True)
        ]

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
