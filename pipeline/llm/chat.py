"""Prompt rendering for instruction-tuned models: plain few-shot text, or a chat template.

Base models (the embedded Gemma-3-270M) continue plain few-shot text. Instruction-tuned models
(Qwen2.5-Instruct in production) expect their chat template: the pipeline's prompt becomes the
user turn and generation starts in the assistant turn. Multi-turn rollouts then continue that
assistant turn in completion mode, with `<information>` blocks appended inline, which is how
Search-R1 trains and runs its agents. Only the first prompt of a rollout is rendered.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from pipeline.core.config import PipelineConfig
from pipeline.llm.base import generate_with_guides

Render = Callable[[str], str]


def plain(text: str) -> str:
    return text


class ChatTemplate:
    """Render a prompt as one user turn (after an optional system turn) + the assistant cue."""

    def __init__(self, tokenizer, template: str | None = None, system: str | None = None) -> None:
        if template is None and not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} has no chat template; "
                "set llm.chat_template to a Jinja file, or to none for a base model"
            )
        self.tokenizer, self.template, self.system = tokenizer, template, system

    def __call__(self, text: str) -> str:
        messages = [{"role": "system", "content": self.system}] if self.system else []
        messages.append({"role": "user", "content": text})
        rendered = self.tokenizer.apply_chat_template(
            messages, chat_template=self.template, tokenize=False, add_generation_prompt=True
        )
        # Every backend tokenizes prompts with special tokens (BOS) added, as vLLM's
        # completions API does: a template's own BOS would be doubled.
        bos = self.tokenizer.bos_token
        return rendered[len(bos) :] if bos and rendered.startswith(bos) else rendered


@lru_cache(maxsize=4)
def _tokenizer(ref: str, cache_dir: str):
    from transformers import AutoTokenizer

    from pipeline.core.model_refs import resolve_llm

    return AutoTokenizer.from_pretrained(resolve_llm(ref, cache_dir))


def make_renderer(cfg: PipelineConfig) -> Render:
    """`llm.chat_template`: none (plain text), `model` (the tokenizer's own template), or the
    path of a Jinja template file; the tokenizer is `llm.tokenizer`, else `llm.model`."""
    llm = cfg.llm
    choice = (llm.chat_template or "none").strip()
    if choice.lower() == "none":
        return plain
    tok = _tokenizer(llm.tokenizer or llm.model, llm.cache_dir)
    template = None
    if choice.lower() != "model":
        path = Path(cfg.resolve_path(str(Path(choice).expanduser())))
        if not path.is_file():
            raise FileNotFoundError(f"llm.chat_template: no template file at {path}")
        template = path.read_text(encoding="utf-8")
    return ChatTemplate(tok, template, llm.system_prompt)


class RenderingGenerator:
    """A Generator whose prompts are rendered first: for single-turn callers only (KG path
    expansion). Multi-turn rollouts render their first prompt themselves and must not be
    wrapped: their later prompts carry the transcript after the assistant cue."""

    def __init__(self, inner, render: Render) -> None:
        self.inner, self.render = inner, render

    def generate(self, prompts, params, guides=None):
        return generate_with_guides(self.inner, [self.render(p) for p in prompts], params, guides)

    def score(self, prompts, continuations):
        return self.inner.score([self.render(p) for p in prompts], continuations)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)  # model_id, max_model_len, ...


def rendering(generator, render: Render):
    """`generator` itself for plain prompts, else wrapped so each prompt is rendered."""
    return generator if render is plain else RenderingGenerator(generator, render)


__all__ = ["ChatTemplate", "Render", "RenderingGenerator", "make_renderer", "plain", "rendering"]
