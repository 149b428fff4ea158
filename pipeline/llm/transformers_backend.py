"""transformers backend: batched, left-padded sampling and teacher-forced scoring on CPU/GPU."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pipeline.core.model_refs import resolve_llm
from pipeline.llm import usage
from pipeline.llm.base import Completion, SamplingParams, check_guides, cut_at_stop
from pipeline.llm.cancel import checkpoint
from pipeline.llm.chunked_head import hidden_states, target_log_softmax, target_logprobs
from pipeline.llm.cpu_cores import torch_threads
from pipeline.llm.cpu_linear import SKINNY_MAX_ROWS, use_skinny_linear
from pipeline.llm.kv_cache import KVCache, RowView
from pipeline.llm.sampling import row_generator, sample_next

log = logging.getLogger(__name__)

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# Positions token_logprobs runs through the model body at once (hidden states and attention,
# not logits: those are computed a few rows at a time, see chunked_head).
_LOGPROB_POSITIONS = 2048
_STATS = (
    "prefill_s",
    "decode_s",
    "prefill_tokens",
    "prompt_tokens",
    "decode_steps",
    "row_steps",
    "padded_row_steps",
    "generated_tokens",
    "rows",
)


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


def _cancel_point(module, args) -> None:
    checkpoint()


class TransformersGenerator:
    """A causal LM from transformers; prompts are bucketed by length to limit padding.

    `skinny_rows`: products with at most this many rows (decode steps) run as `(W @ xᵀ)ᵀ`,
    which MKL spreads over all cores (pipeline.llm.cpu_linear); None = on for CPU, 0 = off.
    """

    def __init__(
        self,
        model: str,
        device: str = "cpu",
        dtype: str = "float32",
        batch_size: int = 16,
        cache_dir: str = "~/.cache/evidence-curriculum/models",
        max_prompt_tokens: int = 1536,
        share_prefix: bool = True,
        skinny_rows: int | None = None,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model_id = model
        self.device = torch.device(device)
        self.batch_size = batch_size
        self.max_prompt_tokens = max_prompt_tokens
        self.share_prefix = share_prefix
        # Cumulative decode-loop counters (seconds, tokens, row-steps) for benchmarks.
        self.stats: dict[str, float] = dict.fromkeys(_STATS, 0)
        self._guidance = None  # (llguidance tokenizer, executor, grammars), built on first use
        if self.device.type == "cpu":  # every usable core, unless OMP_NUM_THREADS says
            torch.set_num_threads(torch_threads())
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
        if skinny_rows is None:  # decode-shaped products transposed on CPU (see cpu_linear)
            skinny_rows = SKINNY_MAX_ROWS if self.device.type == "cpu" else 0
        if skinny_rows:
            use_skinny_linear(self.model, skinny_rows)
        # A cancelled request (the server's abandoned or overdue work) stops before the next
        # decoder layer, not only between decode steps: one forward pass of a large batch or
        # a long prefill can take seconds on a CPU. Outside the server checkpoint() is a no-op.
        for module in self.model.modules():
            if type(module).__name__.endswith("DecoderLayer"):
                module.register_forward_pre_hook(_cancel_point)

    @classmethod
    def from_config(cls, llm, seed: int = 0) -> TransformersGenerator:
        """`seed` is the backends' common signature (pipeline/core/variants.py); this one is
        seeded per request only (SamplingParams.seed)."""
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
    def generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        guides: Sequence[str | None] | None = None,
    ) -> list[list[str]]:
        """Sample n completions per prompt with our own batched decode loop.

        Per batch: the longest token prefix common to all its prompts is prefilled once (for
        one prompt with n > 1 samples that is all but its last token), each prompt's remaining
        suffix once, and the n samples of a prompt copy its KV cache. Rows leave the batch as
        soon as they hit a stop string, EOS or `max_tokens`, so a batch is not decoded to its
        slowest row. Sampling draws from a per-row generator seeded by (seed, prompt text,
        occurrence of that text in the call, sample index): a row's output does not depend on
        which other prompts share its call or batch. A guided row samples only tokens its
        regex allows (llguidance computes the mask) and ends when the regex is complete.
        """
        return [[c.text for c in row] for row in self._generate(prompts, params, guides, False)]

    @torch.inference_mode()
    def generate_with_entropy(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        guides: Sequence[str | None] | None = None,
        top_k: int = 5,
    ) -> list[list[Completion]]:
        """As `generate`, with the exact entropy of the model's full next-token distribution
        (temperature 1, before a guide's mask) at every sampled token; `top_k` is unused."""
        return self._generate(prompts, params, guides, True)

    def _generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        guides: Sequence[str | None] | None,
        entropy: bool,
    ) -> list[list[Completion]]:
        guides = check_guides(prompts, guides)
        out: list[list[Completion]] = [[] for _ in prompts]
        if params.max_tokens <= 0:
            return [[Completion("", (), exact=True)] * params.n for _ in prompts]
        # Rows decoded together stay within batch_size: batch_size // n prompts at a time.
        per_batch = max(1, self.batch_size // params.n)
        enc = self.tokenizer(list(prompts), truncation=True, max_length=self.max_prompt_tokens)
        ids = [list(x) for x in enc["input_ids"]]
        st = self.stats
        before = (st["prefill_tokens"], st["prompt_tokens"])
        generated: list[int] = [0] * len(prompts)
        seen: dict[str, int] = {}
        occurrence = []
        for p in prompts:
            occurrence.append(seen.get(p, 0))
            seen[p] = occurrence[-1] + 1
        for idx in _batches(self._order(prompts), per_batch):
            checkpoint()
            rngs = None
            if params.temperature > 0 and params.seed is not None:
                rngs = [
                    row_generator(params.seed, prompts[i], occurrence[i], j)
                    for i in idx
                    for j in range(params.n)
                ]
            matchers = None
            if guides:
                matchers = [self._matcher(guides[i]) for i in idx for _ in range(params.n)]
            done, counts = self._generate_batch(
                [ids[i] for i in idx], params, rngs, matchers, entropy
            )
            for j, (c, k) in enumerate(zip(done, counts, strict=True)):
                out[idx[j // params.n]].append(c)
                generated[idx[j // params.n]] += k
        computed = int(st["prefill_tokens"] - before[0])  # a shared prefix is computed once
        usage.report(
            list(zip(prompts, generated, strict=True)),
            computed,
            int(st["prompt_tokens"] - before[1]) - computed,
        )
        return out

    def _generate_batch(
        self,
        rows: list[list[int]],
        params: SamplingParams,
        rngs: list | None,
        matchers: list | None = None,
        entropy: bool = False,
    ) -> tuple[list[Completion], list[int]]:  # n per row, and the tokens each generated
        n, st = params.n, self.stats
        share = self.share_prefix
        if not share:  # every sample prefills its own copy of its prompt
            rows, n = [r for r in rows for _ in range(n)], 1
            prefix = 0
        else:
            prefix = min(_common_prefix(rows), min(len(r) for r in rows) - 1)
            if len(rows) > 1 and prefix < _MIN_SHARED_PREFIX:
                prefix = 0
        width = max(len(r) - prefix for r in rows)
        n_rows = len(rows) * n
        cache = KVCache(
            self.model.config, prefix + width + params.max_tokens, self.model.dtype, self.device
        )
        kv_pos = torch.full((len(rows), prefix + width), -1, dtype=torch.long)
        t0 = time.perf_counter()
        if prefix:
            pre = torch.tensor([rows[0][:prefix]], device=self.device)
            pos = torch.arange(prefix)[None]
            cache.reserve(1)
            self._forward(cache, pre, pos, pos, logits=False)
            cache.select(torch.zeros(len(rows), dtype=torch.long))  # one prefix row, copied
            kv_pos[:, :prefix] = torch.arange(prefix)
        # Suffixes, right-aligned (left-padded) after the shared prefix: [prefix][pad][suffix].
        suffix = [r[prefix:] for r in rows]
        for i, r in enumerate(rows):
            kv_pos[i, prefix + width - len(suffix[i]) :] = torch.arange(prefix, len(r))
        if not prefix:
            cache.reserve(len(rows))
        real = sum(len(x) for x in suffix)
        if len(rows) > 1 and real < (1 - _PAD_WASTE) * width * len(rows):
            # Ragged suffixes: prefill each one alone into its row (no compute on padding).
            rows_logits = []
            for i, x in enumerate(suffix):
                checkpoint()
                view = RowView(cache, i, prefix + width - len(x))
                q = kv_pos[i : i + 1, prefix + width - len(x) :]
                ids = torch.tensor([x], device=self.device)
                rows_logits.append(self._forward(view, ids, q, kv_pos[i : i + 1], logits=True))
            cache.length = prefix + width
            logits = torch.cat(rows_logits)
        else:
            chunk = torch.full((len(rows), width), self.tokenizer.pad_token_id, dtype=torch.long)
            for i, x in enumerate(suffix):
                chunk[i, width - len(x) :] = torch.tensor(x)
            logits = self._forward(
                cache, chunk.to(self.device), kv_pos[:, prefix:], kv_pos, logits=True
            )
        st["prefill_s"] += time.perf_counter() - t0
        st["prefill_tokens"] += prefix + real
        st["prompt_tokens"] += sum(len(r) for r in rows) * n
        if n > 1:
            cache.select(torch.arange(len(rows)).repeat_interleave(n))
            kv_pos = kv_pos.repeat_interleave(n, 0)
            logits = logits.repeat_interleave(n, 0)
        next_pos = torch.tensor([len(r) for r in rows]).repeat_interleave(n)

        t0 = time.perf_counter()
        stops = tuple(s for s in params.stop if s)
        eos = self._eos_ids()
        tokens: list[list[int]] = [[] for _ in range(n_rows)]
        ents: list[list[float]] = [[] for _ in range(n_rows)]
        texts = [""] * n_rows
        alive = list(range(n_rows))  # original row of each batch row
        while True:
            checkpoint()  # a cancelled request (the server's) stops between decode steps
            if entropy:  # the policy's own distribution: before the guide's mask
                logp = torch.log_softmax(logits.float(), dim=-1)
                step_h = (-(logp.exp() * logp).nan_to_num().sum(-1)).tolist()
            if matchers:
                self._mask(logits, [matchers[a] for a in alive])
            nxt = sample_next(logits, params, [rngs[a] for a in alive] if rngs else None).tolist()
            keep = []
            for b, a in enumerate(alive):
                tok = nxt[b]
                if tok in eos:
                    continue
                tokens[a].append(tok)
                if entropy:
                    ents[a].append(step_h[b])
                if stops:  # decoded before the guide check: a regex's last token is kept too
                    texts[a] = self.tokenizer.decode(tokens[a], skip_special_tokens=True)
                    if any(s in texts[a] for s in stops):
                        continue
                if matchers and matchers[a] is not None and not _advance(matchers[a], tok):
                    continue  # the regex is complete (or broken): nothing more may follow
                if len(tokens[a]) < params.max_tokens:
                    keep.append(b)
            st["row_steps"] += len(alive)
            if not keep:
                break
            if len(keep) < len(alive):
                sel = torch.tensor(keep)
                cache.select(sel)
                kv_pos, next_pos = kv_pos[sel], next_pos[sel]
                alive = [alive[b] for b in keep]
            inp = torch.tensor([[nxt[b]] for b in keep], device=self.device)
            kv_pos = torch.cat([kv_pos, next_pos[:, None]], 1)
            logits = self._forward(cache, inp, next_pos[:, None], kv_pos, logits=True)
            next_pos = next_pos + 1
            st["decode_steps"] += 1
        st["decode_s"] += time.perf_counter() - t0
        st["generated_tokens"] += sum(len(t) for t in tokens)
        st["rows"] += n_rows
        # What a decode run to the slowest row (no dropping) would have spent on finished rows.
        st["padded_row_steps"] += n_rows * max(len(t) for t in tokens)
        if not stops:  # with stop strings, texts[] already holds every row's decoded tokens
            texts = [self.tokenizer.decode(t, skip_special_tokens=True) for t in tokens]
        return [
            Completion(cut_at_stop(text, params.stop), tuple(h), exact=True)
            for text, h in zip(texts, ents, strict=True)
        ], [len(t) for t in tokens]

    def _matcher(self, regex: str | None):
        """A fresh llguidance matcher for one guided row (None: unguided)."""
        if regex is None:
            return None
        import llguidance

        if self._guidance is None:
            import llguidance.hf

            # Mask width = the model's logits (may exceed the tokenizer's vocabulary).
            width = self.model.get_output_embeddings().weight.shape[0]
            tok = llguidance.hf.from_tokenizer(
                self.tokenizer, n_vocab=width, eos_token=sorted(self._eos_ids())
            )
            self._guidance = (tok, llguidance.LLExecutor(), {})
        tok, _, grammars = self._guidance
        if regex not in grammars:
            grammars[regex] = llguidance.LLMatcher.grammar_from_regex(regex)
        m = llguidance.LLMatcher(tok, grammars[regex], log_level=0)
        if m.is_error():
            raise ValueError(f"guide {regex!r}: {m.get_error()}")
        return m

    def _mask(self, logits: torch.Tensor, matchers: list) -> None:
        """Set logits of tokens a row's regex forbids to -inf (unguided rows untouched)."""
        rows = [(m, b) for b, m in enumerate(matchers) if m is not None]
        if not rows:
            return
        _, executor, _ = self._guidance
        width = logits.shape[1]
        bitmask = torch.full((len(matchers), (width + 31) // 32), -1, dtype=torch.int32)
        # What llguidance.torch.fill_next_token_bitmask_par does (all rows' masks computed in
        # parallel), without importing its torch.compile'd helpers.
        executor.unsafe_compute_mask_ptr(
            rows, bitmask.data_ptr(), bitmask.shape[1] * 4, len(matchers)
        )
        idx = torch.tensor([b for _, b in rows])
        bits = (bitmask[idx, :, None] >> torch.arange(32, dtype=torch.int32)) & 1
        allowed = bits.reshape(len(rows), -1)[:, :width].bool()
        logits[idx] = logits[idx].masked_fill(~allowed.to(logits.device), float("-inf"))

    def _eos_ids(self) -> set[int]:
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        if eos is None:
            eos = self.tokenizer.eos_token_id
        return set(eos if isinstance(eos, list) else [eos]) - {None}

    def _forward(self, cache, ids, q_pos, kv_pos, logits: bool):
        """One forward pass appending `ids` (positions `q_pos`) to the cache.

        `kv_pos[b, c]` is the position of the token in cache column c of row b (-1: padding);
        masks are built from positions, so padding in the middle of a row is just a hole.
        """
        masks = {}
        width, n_q = kv_pos.shape[1], q_pos.shape[1]
        q = q_pos[:, :, None]
        kv = kv_pos[:, None, :]
        allowed = (kv >= 0) & (kv <= q)
        # A padding query attends to its own column only (a fully masked row gives NaN).
        pad_q = q < 0
        own = torch.arange(width)[None, :] == torch.arange(width - n_q, width)[:, None]
        allowed |= pad_q & own[None]
        neg = torch.finfo(self.model.dtype).min
        zero = torch.zeros((), dtype=self.model.dtype)
        masks["full_attention"] = torch.where(allowed, zero, neg)[:, None].to(self.device)
        window = getattr(self.model.config, "sliding_window", None)
        start = 0
        if window:
            sliding = allowed & ((kv > q - window) | pad_q)
            need = sliding.any(1).any(0).nonzero()
            start = int(need[0]) if len(need) else 0
            masks["sliding_attention"] = torch.where(sliding[..., start:], zero, neg)[:, None].to(
                self.device
            )
        cache.sliding_start = start
        q_pos = q_pos.clamp(min=0).to(self.device)
        outp = self.model(
            input_ids=ids,
            attention_mask=masks,
            position_ids=q_pos,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        cache.advance(ids.shape[1])
        return outp.logits[:, -1].float() if logits else None

    @torch.inference_mode()
    def score(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[float]:
        if len(prompts) != len(continuations):
            raise ValueError("score() needs one continuation per prompt")
        tok = self.tokenizer
        result = [0.0] * len(prompts)
        computed = 0
        for b_idx in _batches(self._order(prompts), self.batch_size):
            checkpoint()
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
            # Only the positions that predict continuation tokens go through the LM head,
            # a chunk at a time (see chunked_head: the head's rows are vocabulary-sized).
            hidden = hidden_states(self.model, ids.to(self.device), mask.to(self.device))
            at = [(j, max(s, 1), e) for j, (s, e) in enumerate(spans)]
            lp = target_log_softmax(
                self.model,
                torch.cat([hidden[j, s - 1 : e - 1] for j, s, e in at]),
                torch.cat([ids[j, s:e] for j, s, e in at]),
            )
            for i, part in zip(b_idx, lp.split([e - s for _, s, e in at]), strict=True):
                result[i] = float(part.sum()) if len(part) else 0.0
            computed += sum(len(r) for r in rows)
        usage.report([(p, 0) for p in prompts], computed, 0)  # a forward pass, no decoding
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
            checkpoint()
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
            # Position p - 1 of a row predicts its token p; padding predicts nothing.
            real = mask[:, 1:].bool()
            hidden = hidden_states(self.model, ids.to(self.device), mask.to(self.device))
            lp, vals, idx = target_logprobs(
                self.model, hidden[:, :-1][real.to(self.device)], ids[:, 1:][real], top_k
            )
            counts = real.sum(1).tolist()
            picked = [x.tolist() for x in lp.cpu().split(counts)]
            if top_k:
                vals = [x.tolist() for x in vals.cpu().split(counts)]
                idx = [x.tolist() for x in idx.cpu().split(counts)]
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


# Below this many common tokens, prefilling a batch's prefix separately is not worth a pass.
_MIN_SHARED_PREFIX = 16
# Prefill ragged suffixes row by row when padding would be more than this share of the chunk.
_PAD_WASTE = 0.2


def _common_prefix(rows: list[list[int]]) -> int:
    first = rows[0]
    n = len(first)
    for r in rows[1:]:
        k, m = 0, min(n, len(r))
        while k < m and r[k] == first[k]:
            k += 1
        n = k
    return n


def _advance(matcher, token: int) -> bool:
    """Feed a sampled token to a row's matcher; False when the row must end here."""
    return matcher.consume_token(token) and not matcher.is_stopped()
