"""Serve any Generator as an OpenAI-compatible completions server.

    python -m pipeline.llm.openai_server --config configs/embedded.yaml --host 127.0.0.1 --port 8001

Endpoints (the subset of vLLM's server that trainers and the HTTP backend use):

- `POST /v1/completions`: `prompt` (a string or a list of strings), `n`, `temperature`,
  `top_p`, `max_tokens` (0 allowed with `echo`), `stop`, `seed`, `echo`, `logprobs` (0-5),
  and vLLM's `structured_outputs: {"regex": ...}` (or the older `guided_regex`): every
  completion of the request matches the regex.
  One request is ONE `generate` call of the wrapped generator (all prompts, `n` each), so the
  backend batches it; requests are served one at a time. Choices are prompt-major
  (`index = prompt_index * n + j`). With `logprobs`, each choice carries
  `{tokens, token_logprobs, text_offset, top_logprobs}` for its `text` (the prompt included
  when `echo`), offsets indexing into that `text`; they are teacher-forced log-probs of the
  text tokenized as one string (the generator's `token_logprobs`), so tokens straddling the
  prompt/completion boundary belong to neither side without `echo`. `finish_reason` is
  "length" when the completion used all `max_tokens` tokens, else "stop".
- `GET /v1/models`, `GET /health`.
- `POST /tokenize`: vLLM's shape, `{"prompt", "add_special_tokens"}` -> `{"count", "tokens",
  "max_model_len"}`.

Requests are bounded by `llm.serve` (pipeline.core.config.LLMServeConfig): prompts, n, max_tokens,
characters and tokens per prompt, body bytes, and wall-clock seconds. Fields are strictly
typed (`"n": "2"` or `"echo": 1` is refused, not coerced) and text must be valid Unicode.
Model work runs one request at a time (pipeline.llm.model_worker); a request whose client
disconnects or that outlives `request_timeout_s` is cancelled between decode steps.

Errors use OpenAI's body `{"error": {"message", "type", "param", "code"}}`: 400 for invalid
requests, 404 for an unknown model name, 413 for a body over the limit, 504 for a request over
its time limit, 500 when the generator fails.
"""

import argparse
import logging
import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from pipeline.core.config import LLMServeConfig as Limits
from pipeline.core.config import PipelineConfig
from pipeline.core.wire import BodySizeLimit, Text, Texts
from pipeline.llm.base import Generator, SamplingParams, generate_with_guides
from pipeline.llm.model_worker import TIMEOUT, ModelWorker, RequestCancelled

log = logging.getLogger(__name__)

DEFAULT_PORT = 8001  # the retrieval server defaults to 8000


class APIError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


_ERROR_TYPES = {
    400: "invalid_request_error",
    404: "NotFoundError",
    413: "invalid_request_error",
    429: "rate_limit_error",
    499: "client_closed_request",
    500: "internal_error",
    504: "timeout_error",
}
# Where the limits are configured, for error messages.
_SETTING = "llm.serve"


def _error(status: int, message: str, param: str | None = None) -> JSONResponse:
    return JSONResponse(
        status_code=status,
        content={
            "error": {
                "message": message,
                "type": _ERROR_TYPES.get(status, "error"),
                "param": param,
                "code": status,
            }
        },
    )


def _request_models(limits: Limits) -> tuple[type[BaseModel], type[BaseModel]]:
    """The request bodies of `/v1/completions` and `/tokenize`, bounded by `limits`."""

    class StructuredOutputs(BaseModel):
        model_config = ConfigDict(extra="allow", strict=True)  # others are refused by name
        regex: Text | None = None

    class CompletionRequest(BaseModel):
        # Strict: a field this server does not implement (logit_bias, presence_penalty, a
        # typo) is a 400 naming it, never silently ignored; declared ones are never coerced.
        model_config = ConfigDict(extra="forbid", strict=True)
        model: Text | None = None
        prompt: Texts
        n: int = Field(1, ge=1, le=limits.max_n)
        temperature: float = Field(1.0, ge=0.0, le=2.0)
        top_p: float = Field(1.0, gt=0.0, le=1.0)
        max_tokens: int = Field(16, ge=0, le=limits.max_tokens)
        stop: Texts | None = None
        seed: int | None = None
        echo: bool = False
        logprobs: int | None = Field(None, ge=0, le=5)
        stream: bool = False
        best_of: int | None = None
        suffix: Text | None = None
        # vLLM's extension: completions match a regex (>= 0.12 form, and the older field).
        structured_outputs: StructuredOutputs | None = None
        guided_regex: Text | None = None

    class TokenizeRequest(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        model: Text | None = None
        prompt: Text
        add_special_tokens: bool = True

    return CompletionRequest, TokenizeRequest


def _add_error_handlers(app: FastAPI) -> None:
    """Every refusal in OpenAI's error body (see the module docstring for the statuses)."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        parts, param = [], None
        for e in exc.errors():
            loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body")
            param = param or loc or None
            parts.append(f"{loc}: {e.get('msg')}" if loc else str(e.get("msg")))
        return _error(400, "; ".join(parts) or "invalid request", param)

    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return _error(exc.status, exc.message, exc.param)

    @app.exception_handler(RequestCancelled)
    async def _cancelled(_: Request, exc: RequestCancelled) -> JSONResponse:
        return _error(504 if exc.reason == TIMEOUT else 499, exc.message)


class _Checks:
    """The checks of a request against `llm.serve`'s limits and the served model's name."""

    def __init__(self, limits: Limits, model_name: str) -> None:
        self.limits, self.model_name = limits, model_name

    def chars(self, prompts: Sequence[str]) -> None:
        for i, p in enumerate(prompts):
            if len(p) > self.limits.max_prompt_chars:
                raise APIError(
                    400,
                    f"prompt {i} has {len(p)} characters; the limit is "
                    f"{self.limits.max_prompt_chars} ({_SETTING}.max_prompt_chars)",
                    "prompt",
                )

    def tokens(self, counts: Sequence[int]) -> None:
        for i, n in enumerate(counts):
            if n > self.limits.max_prompt_tokens:
                raise APIError(
                    400,
                    f"prompt {i} has {n} tokens; the limit is {self.limits.max_prompt_tokens}"
                    f" ({_SETTING}.max_prompt_tokens)",
                    "prompt",
                )

    def model(self, name: str | None) -> None:
        if name and name != self.model_name:
            raise APIError(
                404,
                f"The model `{name}` does not exist; this server serves `{self.model_name}`",
                "model",
            )

    def completion(self, req: Any, generator: Generator) -> None:
        """What a completion request asks for, checked before any work: the model, the
        fields this server does not implement, the prompts' number and size, logprobs."""
        self.model(req.model)
        if req.stream:
            raise APIError(400, "stream=true is not supported by this server", "stream")
        if req.suffix:
            raise APIError(400, "suffix is not supported by this server", "suffix")
        if req.best_of is not None and req.best_of != req.n:
            raise APIError(400, "best_of other than n is not supported", "best_of")
        prompts = req.prompt  # a single string arrives as a list of one
        if not prompts:
            raise APIError(400, "prompt: at least one prompt is required", "prompt")
        if len(prompts) > self.limits.max_prompts:
            raise APIError(
                400,
                f"{len(prompts)} prompts; the limit is {self.limits.max_prompts}"
                f" ({_SETTING}.max_prompts)",
                "prompt",
            )
        self.chars(prompts)
        if req.max_tokens == 0 and not req.echo:
            raise APIError(400, "max_tokens=0 is only allowed with echo=true", "max_tokens")
        if req.logprobs is not None and not hasattr(generator, "token_logprobs"):
            raise APIError(
                400, f"logprobs are not supported by {type(generator).__name__}", "logprobs"
            )

    def cost(self, req: Any, in_flight: int) -> int:
        """The sampled tokens a completion request asks for, within the request's limit and,
        with the `in_flight` tokens of the queued and running requests, the server's."""
        limits, prompts = self.limits, req.prompt
        cost = len(prompts) * req.n * max(req.max_tokens, 1)
        if cost > limits.max_request_tokens:
            raise APIError(
                400,
                f"{len(prompts)} prompt(s) x n={req.n} x max_tokens={req.max_tokens} = {cost} "
                f"sampled tokens; the limit is {limits.max_request_tokens} "
                f"({_SETTING}.max_request_tokens)",
                "max_tokens",
            )
        if in_flight + cost > limits.max_tokens_in_flight:
            raise APIError(
                429,
                f"the server is busy: {in_flight} sampled tokens in flight, this "
                f"request asks for {cost}; the limit is {limits.max_tokens_in_flight} "
                f"({_SETTING}.max_tokens_in_flight); retry later",
            )
        return cost


def create_completions_app(
    generator: Generator, served_model_name: str | None = None, limits: Limits | None = None
) -> FastAPI:
    limits = limits or Limits()
    model_name = served_model_name or generator.model_id
    created = int(time.time())
    worker = ModelWorker(limits.request_timeout_s, f"{_SETTING}.request_timeout_s")
    in_flight = {"tokens": 0}  # sampled tokens asked for by queued and running requests
    check = _Checks(limits, model_name)
    CompletionRequest, TokenizeRequest = _request_models(limits)

    app = FastAPI(title="curriculum LLM (OpenAI-compatible)", version="1")
    app.add_middleware(
        BodySizeLimit,
        max_bytes=limits.max_body_bytes,
        setting=f"{_SETTING}.max_body_bytes",
        render=_error,
    )
    app.router.on_shutdown.append(worker.shutdown)
    _add_error_handlers(app)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "model": model_name, "cancelled": worker.cancelled}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        card = {
            "id": model_name,
            "object": "model",
            "created": created,
            "owned_by": "evidence-curriculum",
            "root": generator.model_id,
            "max_model_len": getattr(generator, "max_model_len", None),
        }
        return {"object": "list", "data": [card]}

    @app.post("/tokenize")
    def tokenize(req: TokenizeRequest) -> dict[str, Any]:
        check.model(req.model)
        check.chars([req.prompt])
        tok = getattr(generator, "tokenizer", None)
        if tok is not None:
            ids = list(tok(req.prompt, add_special_tokens=req.add_special_tokens)["input_ids"])
            count = len(ids)
        else:
            if req.add_special_tokens:
                raise APIError(
                    400,
                    "this backend counts tokens without special tokens only",
                    "add_special_tokens",
                )
            ids, count = None, generator.count_tokens(req.prompt)
        check.tokens([count])
        return {
            "count": count,
            "tokens": ids,
            "max_model_len": getattr(generator, "max_model_len", None),
        }

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest, request: Request) -> dict[str, Any]:
        check.completion(req, generator)
        prompts = req.prompt
        stop = tuple(req.stop or [])
        params = SamplingParams(
            n=req.n,
            temperature=req.temperature,
            top_p=req.top_p,
            max_tokens=req.max_tokens,
            stop=stop,
            seed=req.seed,
        )
        regex = _guide(req)
        cost = check.cost(req, in_flight["tokens"])

        def work() -> tuple[list[list[str]], list[dict] | None, dict[str, int], list[list[int]]]:
            prompt_tokens = [generator.count_tokens(p) for p in prompts]
            check.tokens(prompt_tokens)
            if req.max_tokens > 0:
                guides = [regex] * len(prompts) if regex else None
                outs = generate_with_guides(generator, prompts, params, guides)
            else:
                outs = [[""] * req.n for _ in prompts]
            lps = _logprobs(generator, prompts, outs, req.logprobs, req.echo)
            n_tokens = [[generator.count_tokens(t) for t in o] for o in outs]
            return outs, lps, _usage(prompt_tokens, n_tokens), n_tokens

        in_flight["tokens"] += cost
        try:
            outs, lps, usage, n_tokens = await worker.run(request, work)
        except (APIError, RequestCancelled):
            raise
        except ValueError as exc:
            raise APIError(400, str(exc)) from exc
        except Exception as exc:
            log.exception("completion failed")
            raise APIError(500, f"{type(exc).__name__}: {exc}") from exc
        finally:
            in_flight["tokens"] -= cost
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": model_name,
            "choices": _choices(prompts, outs, lps, n_tokens, req),
            "usage": usage,
        }

    return app


def _choices(
    prompts: Sequence[str],
    outs: list[list[str]],
    lps: list[dict] | None,
    n_tokens: list[list[int]],
    req: Any,
) -> list[dict[str, Any]]:
    """The response's choices, prompt-major (`index = prompt_index * n + j`)."""
    choices = []
    for i, p in enumerate(prompts):
        for j, text in enumerate(outs[i]):
            k = i * req.n + j
            choices.append(
                {
                    "index": k,
                    "text": p + text if req.echo else text,
                    "logprobs": lps[k] if lps is not None else None,
                    "finish_reason": ("length" if n_tokens[i][j] >= req.max_tokens else "stop"),
                }
            )
    return choices


def _guide(req) -> str | None:
    """The request's regex constraint; other structured outputs (json, choice) are refused."""
    so = req.structured_outputs
    extra = (so.model_extra or {}) if so is not None else {}
    other = sorted(k for k, v in extra.items() if v is not None)
    if other:
        raise APIError(
            400, f"structured_outputs: only regex is supported, not {other}", "structured_outputs"
        )
    regex = so.regex if so is not None else None
    if regex is not None and req.guided_regex is not None and regex != req.guided_regex:
        raise APIError(400, "structured_outputs.regex and guided_regex disagree", "guided_regex")
    return regex if regex is not None else req.guided_regex


def _usage(prompt_counts: Sequence[int], completion_counts: list[list[int]]) -> dict[str, int]:
    prompt_tokens = sum(prompt_counts)
    completion_tokens = sum(sum(c) for c in completion_counts)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _logprobs(
    generator, prompts: Sequence[str], outs: list[list[str]], k: int | None, echo: bool
) -> list[dict] | None:
    """OpenAI `logprobs` objects for every choice, from ONE token_logprobs call."""
    if k is None:
        return None
    texts = [p + t for p, o in zip(prompts, outs, strict=True) for t in o]
    starts = [0 if echo else len(p) for p, o in zip(prompts, outs, strict=True) for _ in o]
    views = generator.token_logprobs(texts, top_k=k)
    result = []
    for view, start in zip(views, starts, strict=True):
        keep = [i for i, off in enumerate(view.text_offset) if off >= start]
        top = view.top_logprobs
        result.append(
            {
                "tokens": [view.tokens[i] for i in keep],
                "token_logprobs": [view.token_logprobs[i] for i in keep],
                "text_offset": [view.text_offset[i] - start for i in keep],
                "top_logprobs": [top[i] for i in keep] if top is not None else None,
            }
        )
    return result


def serve(
    cfg: PipelineConfig,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    served_model_name: str | None = None,
    log_level: str = "info",
) -> None:
    """Load `cfg.llm`'s backend (uncached) and serve it until interrupted.

    The entry point for `python -m pipeline.llm.openai_server` and `curriculum llm serve`.
    """
    import uvicorn

    from pipeline.llm import make_backend

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    generator = make_backend(cfg.llm)
    app = create_completions_app(generator, served_model_name or cfg.llm.model, cfg.llm.serve)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


def main(argv: Sequence[str] | None = None) -> None:
    from pipeline.core.config import load_config

    ap = argparse.ArgumentParser(
        prog="python -m pipeline.llm.openai_server",
        description="Serve the configured LLM as an OpenAI-compatible completions server.",
    )
    ap.add_argument("--config", "-p", default=None, help="YAML profile (default: embedded)")
    ap.add_argument(
        "--set", "-s", action="append", default=[], help="override, e.g. llm.batch_size=8"
    )
    ap.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback)")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    ap.add_argument("--served-model-name", default=None, help="model name clients send")
    ap.add_argument("--log-level", default="info")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    cfg = load_config(args.config, args.set)
    serve(cfg, args.host, args.port, args.served_model_name, args.log_level)


if __name__ == "__main__":
    main()
