"""transformers backend: batched, left-padded sampling and teacher-forced scoring on CPU/GPU."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pipeline.llm.base import SamplingParams, cut_at_stop
from pipeline.models import resolve_llm

log = logging.getLogger(__name__)

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Logit rows materialised at once by token_logprobs (each row is vocabulary-sized).
_LOGPROB_POSITIONS = 2048


@dataclass
class TokenLogprobs:
    """Teacher-forced per-token view of one text (what OpenAI's echo + logprobs returns).

    `tokens` concatenate to the text exactly; `text_offset[i]` is the character where token i
    starts (a leading space belongs to the token, as in " Paris"); `token_logprobs[i]` is
    log P(token i | special prefix such as BOS + tokens < i), None only when nothing precedes
    it; `top_logprobs[i]` maps the k most likely tokens at that position to their log-probs.
    """

    tokens: list[str]
    token_logprobs: list[float | None]
    text_offset: list[int]
    top_logprobs: list[dict[str, float] | None] | None = None


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

    @property
    def max_model_len(self) -> int | None:
        return getattr(self.model.config, "max_position_embeddings", None)

    def _encode_with_offsets(self, text: str) -> tuple[list[int], list[int | None]]:
        """Token ids (with special tokens) and each token's start offset (None = special)."""
        tok = self.tokenizer
        if tok.is_fast:
            enc = tok(
                text,
                add_special_tokens=True,
                return_offsets_mapping=True,
                return_special_tokens_mask=True,
            )
            starts = [
                None if special else start
                for (start, _), special in zip(
                    enc["offset_mapping"], enc["special_tokens_mask"], strict=True
                )
            ]
            return list(enc["input_ids"]), starts
        # Slow tokenizers have no offset mapping: decode growing prefixes instead.
        ids = tok(text, add_special_tokens=True)["input_ids"]
        special = set(tok.all_special_ids)
        starts: list[int | None] = []
        body: list[int] = []
        for i in ids:
            if i in special:
                starts.append(None)
                continue
            starts.append(len(tok.decode(body, skip_special_tokens=True)))
            body.append(i)
        return ids, starts

    @torch.inference_mode()
    def token_logprobs(self, texts: Sequence[str], top_k: int = 0) -> list[TokenLogprobs]:
        """Per-token log-probs of each whole text under teacher forcing (no truncation).

        Special tokens the tokenizer adds (BOS) condition the first text token but are not
        reported. Used by the OpenAI-compatible server for `echo` + `logprobs`, which is how
        the HTTP backend scores continuations.
        """
        tok = self.tokenizer
        encoded = [self._encode_with_offsets(t) for t in texts]
        result: list[TokenLogprobs | None] = [None] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(encoded[i][0]))
        groups: list[list[int]] = []
        for i in order:  # longest first: a group's width is its first row's length
            if groups:
                g = groups[-1]
                width = max(len(encoded[g[0]][0]), 1)
                if len(g) < self.batch_size and (len(g) + 1) * width <= _LOGPROB_POSITIONS:
                    g.append(i)
                    continue
            groups.append([i])
        for group in groups:
            rows = [encoded[i][0] for i in group]
            width = max(len(r) for r in rows)
            if width < 2:  # nothing to predict (empty text, maybe a lone BOS)
                for i in group:
                    n = sum(s is not None for s in encoded[i][1])
                    result[i] = TokenLogprobs(
                        [texts[i]] if n else [],
                        [None] * n,
                        [0] * n,
                        [None] * n if top_k else None,
                    )
                continue
            ids = torch.full((len(rows), width), tok.pad_token_id, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for j, r in enumerate(rows):
                if r:
                    ids[j, : len(r)] = torch.tensor(r)
                    mask[j, : len(r)] = 1
            logits = (
                self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device))
                .logits[:, :-1]
                .float()
            )
            lse = torch.logsumexp(logits, dim=-1)
            picked = logits.gather(-1, ids[:, 1:, None].to(self.device)).squeeze(-1) - lse
            picked = picked.cpu().tolist()
            if top_k:
                vals, idx = logits.topk(top_k, dim=-1)
                vals = (vals - lse[..., None]).cpu().tolist()
                idx = idx.cpu().tolist()
            del logits
            for j, i in enumerate(group):
                text = texts[i]
                starts = encoded[i][1]
                keep = [p for p, s in enumerate(starts) if s is not None]
                offs = [starts[p] for p in keep]
                ends = [*offs[1:], len(text)] if offs else []
                entry = TokenLogprobs(
                    tokens=[text[o:e] if e >= o else "" for o, e in zip(offs, ends, strict=True)],
                    token_logprobs=[picked[j][p - 1] if p > 0 else None for p in keep],
                    text_offset=offs,
                    top_logprobs=[] if top_k else None,
                )
                if top_k:
                    for p in keep:
                        if p == 0:
                            entry.top_logprobs.append(None)
                            continue
                        names = tok.convert_ids_to_tokens(idx[j][p - 1])
                        top: dict[str, float] = {}
                        for name, v in zip(names, vals[j][p - 1], strict=True):
                            top.setdefault(tok.convert_tokens_to_string([name]), v)
                        entry.top_logprobs.append(top)
                result[i] = entry
        return result  # type: ignore[return-value]


def _batches(items: list[int], size: int):
    for i in range(0, len(items), size):
        yield items[i : i + size]
