"""HTTP backend: any OpenAI-compatible *completions* server behind the Generator interface.

Works with `vllm serve`, SGLang, TGI's OpenAI route and `python -m pipeline.llm.openai_server`
(which serves the embedded CPU model the same way). Only the legacy `POST /v1/completions`
endpoint is used: prompts are raw text, so the pipeline's few-shot prompts reach the model
unchanged (no chat template).

- generate(): prompts go out in requests of `batch_size` prompts (the completions API takes a
  list of prompts and `n`; the server batches them), at most `max_concurrency` requests in
  flight. Completions are cut at the first stop string again on our side.
- score(): the echo trick. `prompt + continuation` is sent with `echo=True, max_tokens=0,
  logprobs=0`; the server returns the prompt's tokens with `token_logprobs` and `text_offset`,
  and the tokens starting at or after `len(prompt)` (and before the end of the continuation)
  are summed. Tokenization-boundary caveat: the text is tokenized as one string, so a token
  that straddles the prompt/continuation boundary (e.g. prompt "Answer:" + continuation ":x",
  or a prompt ending in a space) is counted with neither part; the in-process backends
  tokenize prompt and continuation separately. When the continuation starts on a token
  boundary (a leading space, a newline) both agree. Servers that reject `max_tokens=0` are
  retried once with `max_tokens=1` (the generated token lies past the continuation and is
  ignored).
- count_tokens(): vLLM's `POST /tokenize` (`{"prompt", "add_special_tokens": false}` ->
  `{"count"}`), which this project's server also speaks. Servers without it (404/405) fall back
  to a local tokenizer named by `llm.tokenizer`; without one, a clear error. Results are
  memoised per text.
- Errors: connect errors, timeouts, 429 and 5xx are retried with exponential backoff
  (`retry_backoff_s * 2**attempt`, at most 60 s, a numeric Retry-After honoured); other 4xx
  fail at once. Both raise with the URL, the status and the server's message. The transport
  is `pipeline.core.http.RetryingClient`, shared with the retrieval client.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Sequence
from typing import Any

from pipeline.core.http import (
    RetryingClient,
    ServerError,
    ServerUnreachableError,
    normalize_base_url,
)
from pipeline.llm import usage
from pipeline.llm.base import Completion, SamplingParams, check_guides, cut_at_stop
from pipeline.llm.entropy import token_entropy_topk

log = logging.getLogger(__name__)


# Stop strings per request in OpenAI's completions API, which vLLM's server enforces (a fifth
# is a 400); further ones are applied client-side by cut_at_stop.
MAX_STOP = 4


def _tokens_covering(tokens: Sequence[str], chars: int) -> int:
    """How many of the server's tokens it takes to cover the first `chars` characters."""
    total = 0
    for i, tok in enumerate(tokens):
        if total >= chars:
            return i
        total += len(tok)
    return len(tokens)


class LLMServerError(ServerError):
    """The LLM server answered with an error status (after retries, for retryable ones)."""


class LLMConnectionError(ServerUnreachableError):
    """The LLM server could not be reached (or kept timing out) after all retries."""

    setting = "llm.base_url"


def continuation_logprob(
    tokens_offsets: Sequence[int],
    token_logprobs: Sequence[float | None],
    start: int,
    end: int,
    tokens: Sequence[str] | None = None,
    text: str | None = None,
) -> float:
    """Sum the log-probs of the tokens whose text starts in [start, end).

    If the servers' offsets count the text of leading special tokens (e.g. "<bos>") that the
    echoed text does not contain, they are shifted back first (detected by comparing the
    concatenated tokens with the echoed text).
    """
    shift = 0
    if tokens is not None and text is not None:
        joined = "".join(tokens)
        if joined != text and joined.endswith(text):
            shift = len(joined) - len(text)
    total = 0.0
    for off, lp in zip(tokens_offsets, token_logprobs, strict=True):
        if lp is not None and start <= off - shift < end:
            total += float(lp)
    return total


class HTTPGenerator:
    """Generator over an OpenAI-compatible completions server."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        prompts_per_request: int = 16,
        max_concurrency: int = 8,
        request_timeout_s: float = 600.0,
        max_retries: int = 5,
        retry_backoff_s: float = 1.0,
        api_key: str | None = None,
        tokenizer: str | None = None,
        tokenizer_cache_dir: str = "~/.cache/evidence-curriculum/models",
    ) -> None:
        if not base_url:
            raise ValueError("the http backend needs llm.base_url (e.g. http://127.0.0.1:8000)")
        self.base_url = normalize_base_url(base_url)
        self.model_id = model
        self.prompts_per_request = max(1, prompts_per_request)
        self.max_concurrency = max(1, max_concurrency)
        self.max_retries = max_retries
        self.retry_backoff_s = retry_backoff_s
        self._tokenizer_ref = tokenizer
        self._tokenizer_cache_dir = tokenizer_cache_dir
        self._local_tokenizer = None
        self._server_tokenize: bool | None = None  # unknown until first tried
        self._echo_max_tokens = 0
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = RetryingClient(
            self.base_url,
            max_concurrency=self.max_concurrency,
            timeout_s=request_timeout_s,
            max_retries=max_retries,
            retry_backoff_s=retry_backoff_s,
            headers=headers,
            server_error=LLMServerError,
            unreachable_error=LLMConnectionError,
        )

    @classmethod
    def from_config(cls, llm, seed: int = 0) -> HTTPGenerator:
        """`seed` is the backends' common signature (pipeline/core/variants.py); requests are
        seeded one by one (SamplingParams.seed)."""
        api_key = None
        if llm.api_key_env:
            api_key = os.environ.get(llm.api_key_env)
            if not api_key:
                raise ValueError(
                    f"llm.api_key_env names {llm.api_key_env!r}, which is not set or empty"
                )
        return cls(
            llm.base_url,
            llm.model,
            prompts_per_request=llm.batch_size,
            max_concurrency=llm.max_concurrency,
            request_timeout_s=llm.request_timeout_s,
            max_retries=llm.max_retries,
            retry_backoff_s=llm.retry_backoff_s,
            api_key=api_key,
            tokenizer=llm.tokenizer,
            tokenizer_cache_dir=llm.cache_dir,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> HTTPGenerator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def requests_sent(self) -> int:
        """Requests attempted, retries included."""
        return self._http.requests_sent

    # -- transport -------------------------------------------------------------------------

    def _post(self, path: str, body: dict[str, Any]) -> dict:
        return self._http.post(path, body)

    def _map_requests(self, bodies: list[dict], path: str = "/v1/completions") -> list[dict]:
        return self._http.post_many(path, bodies)

    def _chunks(self, n_items: int) -> list[range]:
        step = self.prompts_per_request
        return [range(i, min(i + step, n_items)) for i in range(0, n_items, step)]

    @staticmethod
    def _choices(res: dict, expected: int, url: str) -> list[dict]:
        choices = res.get("choices")
        if not isinstance(choices, list) or len(choices) != expected:
            got = len(choices) if isinstance(choices, list) else "no"
            raise LLMServerError(url, 200, f"expected {expected} choices, got {got}")
        return sorted(choices, key=lambda c: c.get("index", 0))

    # -- Generator -------------------------------------------------------------------------

    def generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        guides: Sequence[str | None] | None = None,
    ) -> list[list[str]]:
        """n completions per prompt; choices are ordered prompt-major by their `index`.

        A guided prompt is sent with `"structured_outputs": {"regex": ...}` (vLLM >= 0.12's
        extension of the completions API, which our server also reads); one request carries
        prompts of one guide only.
        """
        choices = self._complete(prompts, params, guides, None)
        return [[cut_at_stop(c.get("text") or "", params.stop) for c in row] for row in choices]

    def generate_with_entropy(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        guides: Sequence[str | None] | None = None,
        top_k: int = 5,
    ) -> list[list[Completion]]:
        """As `generate`, asking for `logprobs=top_k`; each token's entropy is approximated from
        its `top_logprobs` (the unseen tail lumped into one outcome, a lower bound: see
        `llm/entropy.token_entropy_topk`). OpenAI's completions API and our server allow
        k <= 5, vLLM up to its `max_logprobs` (20). Tokens are those the server reports for the
        returned (stop-cut) text; a choice without `top_logprobs` is an LLMServerError."""
        url = f"{self.base_url}/v1/completions"
        out: list[list[Completion]] = []
        for row in self._complete(prompts, params, guides, top_k):
            done = []
            for c in row:
                lp = c.get("logprobs") or {}
                tops = lp.get("top_logprobs")
                if not isinstance(tops, list):
                    raise LLMServerError(url, 200, "a choice came back without top_logprobs")
                ents = tuple(token_entropy_topk(list((t or {}).values())) for t in tops)
                raw = c.get("text") or ""
                text = cut_at_stop(raw, params.stop)
                if len(text) < len(raw):  # a stop past the server's MAX_STOP, cut here
                    ents = ents[: _tokens_covering(lp.get("tokens") or [], len(text))]
                done.append(Completion(text, ents, exact=False, top_k=top_k))
            out.append(done)
        return out

    def _complete(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        guides: Sequence[str | None] | None,
        logprobs: int | None,
    ) -> list[list[dict]]:
        """The raw choices, `params.n` per prompt, from as few requests as the guides allow."""
        prompts = list(prompts)
        if not prompts:
            return []
        guides = check_guides(prompts, guides)
        groups: dict[str | None, list[int]] = {}
        for i in range(len(prompts)):
            groups.setdefault(guides[i] if guides else None, []).append(i)
        chunks: list[tuple[str | None, list[int]]] = []
        for guide, idx in groups.items():
            chunks += [(guide, [idx[i] for i in c]) for c in self._chunks(len(idx))]
        # Greedy samples are identical, and vLLM refuses n > 1 without sampling: ask for one.
        n = 1 if params.temperature == 0 else params.n
        bodies = [
            {
                "model": self.model_id,
                "prompt": [prompts[i] for i in chunk],
                "n": n,
                "temperature": params.temperature,
                "top_p": params.top_p,
                "max_tokens": params.max_tokens,
                # OpenAI's API (and vLLM's server) take at most MAX_STOP stop strings; the
                # rest are applied on our side (every completion is cut at every stop).
                "stop": list(params.stop)[:MAX_STOP] or None,
                "seed": params.seed,
                **({"structured_outputs": {"regex": guide}} if guide is not None else {}),
                **({"logprobs": logprobs} if logprobs is not None else {}),
            }
            for guide, chunk in chunks
        ]
        url = f"{self.base_url}/v1/completions"
        try:
            results = self._map_requests(bodies)
        except LLMServerError as exc:
            # One request carries one guide: name the one the server refused (vLLM's message
            # quotes the bad regex without saying it is ours).
            bad = [g for g, _ in chunks if g is not None and g in exc.server_message]
            if exc.status != 400 or not bad or exc.server_message.startswith("guide "):
                raise
            raise LLMServerError(
                exc.url, exc.status, f"guide {bad[0]!r}: {exc.server_message}", exc.attempts
            ) from exc
        out: list[list[dict]] = [[] for _ in prompts]
        for (_, chunk), res in zip(chunks, results, strict=True):
            usage.report_openai([prompts[i] for i in chunk], res)
            choices = self._choices(res, len(chunk) * n, url)
            for k, i in enumerate(chunk):
                out[i] = choices[k * n : (k + 1) * n] * (params.n // n)
        return out

    def score(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[float]:
        if len(prompts) != len(continuations):
            raise ValueError("score() needs one continuation per prompt")
        if not prompts:
            return []
        full = [p + c for p, c in zip(prompts, continuations, strict=True)]
        chunks = self._chunks(len(full))
        try:
            results = self._score_requests(full, chunks)
        except LLMServerError as exc:
            if exc.status != 400 or self._echo_max_tokens != 0:
                raise
            # Some servers insist on max_tokens >= 1; the extra token is ignored below.
            log.info("%s rejected max_tokens=0 with echo (%s); using 1", exc.url, exc)
            self._echo_max_tokens = 1
            results = self._score_requests(full, chunks)
        url = f"{self.base_url}/v1/completions"
        out: list[float] = []
        for chunk, res in zip(chunks, results, strict=True):
            usage.report_openai([prompts[i] for i in chunk], res)
            for i, choice in zip(chunk, self._choices(res, len(chunk), url), strict=True):
                lp = choice.get("logprobs") or {}
                offsets, values = lp.get("text_offset"), lp.get("token_logprobs")
                if offsets is None or values is None:
                    raise LLMServerError(
                        url, 200, "no logprobs.text_offset/token_logprobs in an echo response"
                    )
                start = len(prompts[i])
                out.append(
                    continuation_logprob(
                        offsets,
                        values,
                        start,
                        start + len(continuations[i]),
                        lp.get("tokens"),
                        choice.get("text"),
                    )
                )
        return out

    def _score_requests(self, full: list[str], chunks: list[range]) -> list[dict]:
        bodies = [
            {
                "model": self.model_id,
                "prompt": [full[i] for i in chunk],
                "echo": True,
                "max_tokens": self._echo_max_tokens,
                "logprobs": 0,
                "temperature": 0.0,
                "n": 1,
            }
            for chunk in chunks
        ]
        return self._map_requests(bodies)

    def count_tokens(self, text: str) -> int:
        return self._count_tokens(text)

    @functools.lru_cache(maxsize=65536)  # noqa: B019 - one generator per process
    def _count_tokens(self, text: str) -> int:
        if self._server_tokenize is not False:
            try:
                res = self._post(
                    "/tokenize",
                    {"model": self.model_id, "prompt": text, "add_special_tokens": False},
                )
                self._server_tokenize = True
                if "count" in res:
                    return int(res["count"])
                return len(res["tokens"])
            except LLMServerError as exc:
                if exc.status not in (404, 405) or self._server_tokenize:
                    raise
                self._server_tokenize = False
                log.info("%s has no /tokenize; counting tokens locally", self.base_url)
        return len(self._tokenizer().encode(text, add_special_tokens=False))

    def _tokenizer(self):
        if self._local_tokenizer is None:
            if not self._tokenizer_ref:
                raise RuntimeError(
                    f"{self.base_url} has no POST /tokenize and llm.tokenizer is not set: set "
                    "llm.tokenizer to the served model's tokenizer (a local path, hub id or "
                    "registry:<package>) so count_tokens can work"
                )
            from transformers import AutoTokenizer

            from pipeline.core.model_refs import resolve_llm

            path = resolve_llm(self._tokenizer_ref, self._tokenizer_cache_dir)
            self._local_tokenizer = AutoTokenizer.from_pretrained(path)
        return self._local_tokenizer
