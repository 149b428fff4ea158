"""A synthetic corpus of any size for the embedding benchmarks (run them as scripts, so this
module is importable from the benchmarks directory)."""

from __future__ import annotations

from pathlib import Path

import orjson

from pipeline.retrieval.corpus import split_contents


def write_synthetic_corpus(src: Path, n: int, out: Path, words: int) -> None:
    """n distinct FlashRAG-format passages: sample texts cut to `words` words, cycled, tagged."""
    base = [split_contents(orjson.loads(line)["contents"]) for line in src.open("rb")]
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as fh:
        for i in range(n):
            title, text = base[i % len(base)]
            body = " ".join(text.split()[:words])
            contents = f'"{title}"\n{body} (variant {i})'
            fh.write(orjson.dumps({"id": f"syn-{i}", "contents": contents}) + b"\n")
