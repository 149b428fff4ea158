"""One registry per kind of variant: every registered name resolves to a real
implementation, the config's Literals and the CLI's choices are the registry's keys, and a new
variant is its implementation plus one registry entry (shown with a toy export format and a
toy LLM backend registered for one test)."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from pipeline.catalog.export import MANIFEST, export_curriculum, verify_export
from pipeline.catalog.export_formats import ExportFormat, Rows, Written
from pipeline.core import variants
from pipeline.core.config import LLMConfig, VerifierConfig
from tests.test_export_reward import make_catalog


def test_every_registered_name_resolves_to_a_real_implementation():
    assert set(variants.REGISTRIES) == {"llm backend", "verifier method", "export format"}
    for name in variants.names("llm backend"):
        cls = variants.load("llm backend", name)
        assert inspect.isclass(cls) and isinstance(cls, type), name
        assert "seed" in inspect.signature(cls.from_config).parameters, name
        assert callable(getattr(cls, "generate", None)) and callable(getattr(cls, "score", None))
    for name in variants.names("export format"):
        fmt = variants.load("export format", name)
        assert isinstance(fmt, ExportFormat) and callable(fmt.write or fmt.open), name
    from pipeline.generation.builtin_steps import ESTIMATORS, VerifierMethod

    for name in variants.names("verifier method"):
        m = variants.load("verifier method", name)
        assert isinstance(m, VerifierMethod) and set(m.estimators) <= set(ESTIMATORS), name
        assert m.primary == name or name == "both"


def test_the_config_literals_and_the_cli_choices_are_the_registry_keys():
    from cli.export import ExportFormat as CliFormat

    backend = LLMConfig.model_fields["backend"].annotation
    method = VerifierConfig.model_fields["method"].annotation
    assert typing.get_args(backend) == variants.names("llm backend")
    assert typing.get_args(method) == variants.names("verifier method")
    assert tuple(f.value for f in CliFormat) == variants.names("export format")
    with pytest.raises(ValueError) as err:  # pydantic names the registry's choices
        LLMConfig(backend="llamacpp")
    assert all(repr(n) in str(err.value) for n in variants.names("llm backend"))


def test_an_unknown_name_is_refused_naming_the_kind_and_the_known_names(monkeypatch):
    with pytest.raises(variants.UnknownVariant, match=r"unknown llm backend 'llamacpp' \(known: "
                       r"transformers, vllm, http\)"):  # fmt: skip
        variants.load("llm backend", "llamacpp")
    monkeypatch.setitem(variants.VERIFIER_METHODS, "toy", None)  # named, not yet implemented
    with pytest.raises(
        variants.UnknownVariant, match="verifier method 'toy' has no implementation"
    ):
        variants.load("verifier method", "toy")
    with pytest.raises(variants.UnknownVariant, match="unknown kind of variant 'retriever'"):
        variants.names("retriever")


# ---- a new variant is its implementation plus one registry entry ----------------------------


def _write_tsv(folder: Path, records: Rows, ability: str) -> Written:
    folder.mkdir()
    out: Written = []
    for split, rows in records.items():
        path = folder / f"{split}.tsv"
        path.write_text("".join(f"{r['question']}\t{r['answer']}\n" for r in rows))
        out.append((path, split, len(rows)))
    return out


TSV = ExportFormat(_write_tsv)  # no datasets loader: the card shows no TRL example for it


def test_a_new_export_format_is_a_writer_and_one_registry_entry(tmp_path, monkeypatch):
    monkeypatch.setitem(variants.EXPORT_FORMATS, "tsv", "tests.test_variants:TSV")
    catalog = make_catalog(tmp_path / "catalog.duckdb")
    res = export_curriculum(catalog, tmp_path / "tsv", formats=["tsv"], validation_fraction=0.3)
    m = orjson.loads((res.out / MANIFEST).read_bytes())
    assert m["formats"] == ["tsv"] and verify_export(res.out) == []
    tsv = {f["split"]: f for f in m["files"] if f["format"] == "tsv"}
    assert set(tsv) == {"train", "validation"}
    lines = (res.out / "tsv" / "train.tsv").read_text().splitlines()
    assert len(lines) == tsv["train"]["rows"] == res.counts["train"] > 0
    assert all(line.count("\t") == 1 for line in lines)
    assert "## TRL" not in (res.out / "README.md").read_text()
    # Next to a registered format: files in registry order (tsv last), TRL reads the jsonl.
    both = export_curriculum(catalog, tmp_path / "both", formats=["tsv", "jsonl"])
    listed = [f["format"] for f in both.manifest["files"] if f["format"]]
    assert listed == ["jsonl", "jsonl", "tsv", "tsv"]
    assert "load_dataset('json'" in (both.out / "README.md").read_text()


class ToyGenerator:
    @classmethod
    def from_config(cls, llm, seed: int = 0):
        return SimpleNamespace(backend=llm.backend, seed=seed)


def test_make_backend_builds_the_registered_class(monkeypatch):
    from pipeline.llm import make_backend

    monkeypatch.setitem(variants.LLM_BACKENDS, "toy", "tests.test_variants:ToyGenerator")
    built = make_backend(SimpleNamespace(backend="toy"), seed=7)
    assert (built.backend, built.seed) == ("toy", 7)
