"""transformers backend: batched, left-padded sampling and teacher-forced scoring on CPU/GPU."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import torch

from pipeline.llm.base import SamplingParams, cut_at_stop
from pipeline.models import resolve_llm

log = logging.getLogger(__name__)

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class TransformersGenerator:
    """A causal LM from transformers; prompts are bucketed by length to limit padding."""

    def __init__(
        self,
        model: str,
        device: str = "cpu",
        dtype: str = "float32",
        batch_size: int = 16,
        cache_dir: str = "~/.cache/evidence-curriculum/models",
        max_prompt_tokens: int = 1536,
        share_prefix: bool = True,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model_id = model
        self.device = torch.device(device)
        self.batch_size = batch_size
        self.max_prompt_tokens = max_prompt_tokens
        self.share_prefix = share_prefix
        self._stops: dict[tuple[str, ...], object] = {}
        if self.device.type == "cpu":
            torch.set_num_threads(os.cpu_count() or 1)
        path = resolve_llm(model, cache_dir)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.tokenizer.padding_side = "left"
        # An over-long prompt loses its beginning (few-shot examples), never the part the
        # model must continue from; score() cuts the same way.
        self.tokenizer.truncation_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        kwargs = {} if dtype == "auto" else {"dtype": _DTYPES[dtype]}
        self.model = AutoModelForCausalLM.from_pretrained(path, **kwargs).to(self.device).eval()

    @classmethod
    def from_config(cls, llm) -> TransformersGenerator:
        return cls(
            llm.model,
            llm.device,
            llm.dtype,
            llm.batch_size,
            llm.cache_dir,
            llm.max_prompt_tokens,
            llm.share_prefix,
        )

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _order(self, prompts: Sequence[str]) -> list[int]:
        # Longest first: similar lengths share a batch, and a too-long batch fails early.
        return sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))

    @torch.inference_mode()
    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[list[str]]:
        """Sample n completions per prompt; the n samples share one prefill of their prompt."""
        out: list[list[str]] = [[] for _ in prompts]
        sample = params.temperature > 0
        if params.seed is not None:
            torch.manual_seed(params.seed)
        gen_kwargs: dict = {
            "max_new_tokens": params.max_tokens,
            "do_sample": sample,
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if sample:
            gen_kwargs.update(temperature=params.temperature, top_p=params.top_p, top_k=0)
        if params.stop:
            gen_kwargs["stopping_criteria"] = self._stop_criteria(tuple(params.stop))
        # Rows decoded together stay within batch_size: batch_size // n prompts at a time.
        per_batch = max(1, self.batch_size // params.n)
        for idx in _batches(self._order(prompts), per_batch):
            enc = self.tokenizer(
                [prompts[i] for i in idx],
                return_tensors="pt",
                padding=True,
                truncation=True,
                max_length=self.max_prompt_tokens,
            ).to(self.device)
            ids, mask = enc["input_ids"], enc["attention_mask"]
            share = self.share_prefix and params.n > 1
            cache = self._shared_prefix_cache(ids, mask, params.n) if share else None
            ids, mask = ids.repeat_interleave(params.n, 0), mask.repeat_interleave(params.n, 0)
            if cache is not None:
                gen_kwargs["past_key_values"] = cache
            seqs = self.model.generate(input_ids=ids, attention_mask=mask, **gen_kwargs)
            gen_kwargs.pop("past_key_values", None)
            texts = self.tokenizer.batch_decode(seqs[:, ids.shape[1] :], skip_special_tokens=True)
            for j, t in enumerate(texts):
                out[idx[j // params.n]].append(cut_at_stop(t, params.stop))
        return out

    def _stop_criteria(self, stop: tuple[str, ...]):
        """Stop-string criteria are built once per stop set: building one scans the vocabulary."""
        from transformers import StoppingCriteriaList, StopStringCriteria

        if stop not in self._stops:
            self._stops[stop] = StoppingCriteriaList(
                [StopStringCriteria(self.tokenizer, list(stop))]
            )
        return self._stops[stop]

    def _shared_prefix_cache(self, ids: torch.Tensor, mask: torch.Tensor, n: int):
        """Prefill each prompt once (all but its last token) and copy the KV cache n times.

        On CPU the prompt prefill dominates the cost of short answers; sharing it across the
        n samples is what vLLM's SamplingParams(n=m) does with prefix caching.
        """
        if ids.shape[1] < 2:
            return None
        from transformers import DynamicCache

        try:
            cache = DynamicCache(config=self.model.config)
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            self.model(
                input_ids=ids[:, :-1],
                attention_mask=mask[:, :-1],
                position_ids=pos[:, :-1],
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            cache.batch_repeat_interleave(n)
            return cache
        except (TypeError, ValueError, AttributeError, NotImplementedError) as exc:
            log.warning("shared-prefix sampling unavailable for this model (%s)", exc)
            return None

    @torch.inference_mode()
    def score(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[float]:
        if len(prompts) != len(continuations):
            raise ValueError("score() needs one continuation per prompt")
        tok = self.tokenizer
        result = [0.0] * len(prompts)
        for b_idx in _batches(self._order(prompts), self.batch_size):
            rows, spans = [], []
            for i in b_idx:
                p = tok(prompts[i], add_special_tokens=True)["input_ids"][-self.max_prompt_tokens :]
                c = tok(continuations[i], add_special_tokens=False)["input_ids"]
                rows.append(p + c)
                spans.append((len(p), len(p) + len(c)))
            width = max(len(r) for r in rows)
            # Right padding keeps position ids correct in a plain forward pass.
            ids = torch.full((len(rows), width), tok.pad_token_id, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for j, r in enumerate(rows):
                ids[j, : len(r)] = torch.tensor(r)
                mask[j, : len(r)] = 1
            # Logits only for positions that predict continuation tokens (the LM head over a
            # large vocabulary costs more than the transformer body on CPU).
            first = min(s for s, _ in spans) - 1
            keep = torch.arange(first, width - 1, device=self.device)
            logits = self.model(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                logits_to_keep=keep,
            ).logits
            logp = torch.log_softmax(logits.float(), dim=-1)
            for j, (i, (s, e)) in enumerate(zip(b_idx, spans, strict=True)):
                if e == s:
                    continue
                targets = ids[j, s:e].to(self.device)
                rows_lp = logp[j, s - 1 - first : e - 1 - first]
                result[i] = float(rows_lp.gather(1, targets[:, None]).sum())
        return result


def _batches(items: list[int], size: int):
    for i in range(0, len(items), size):
        yield items[i : i + size]
