"""Through the real CLI: bad input on a stage command is one `error:` line naming the
file and exit 2 — no retry, no traceback, no `.complete` marker — and every stage flow retries
only transient failures."""

from __future__ import annotations

import bz2
import subprocess
from pathlib import Path

import zstandard
from prefect.states import Failed

from flows.retry import retry_transient
from pipeline.llm.http_backend import LLMConnectionError
from pipeline.retrieval.corpus import CorpusError
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_DUMP = ROOT / "data" / "sample" / "wikidata_sample.json"
GOOD = '{"id": "1", "contents": "\\"Ulm\\"\\nUlm is a city on the Danube."}\n'


cli = run_cli


def assert_one_line_error(res: subprocess.CompletedProcess, *names: str) -> str:
    """Exit 2, exactly one `error:` line (naming `names`), no traceback, no retry."""
    output = res.stdout + res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert res.returncode == 2, output[-3000:]
    assert len(errors) == 1, output[-3000:]
    assert all(n in errors[0] for n in names), errors[0]
    assert "Traceback" not in output and "Retry" not in output, output[-3000:]
    return errors[0]


def no_leftovers(out: Path) -> None:
    names = [p.name for p in out.rglob("*")] if out.exists() else []
    assert ".complete" not in names and not [n for n in names if "tmp" in n], names


def test_index_build_bad_line_is_one_line_and_exit_2(tmp_path, prefect_api):
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text(GOOD + "this is not json\n")
    out = tmp_path / "out"
    res = cli("index", "build", "--set", f"corpus.path={corpus}", "--set", f"store.out_dir={out}")
    assert_one_line_error(res, f"{corpus}:2", "not valid JSON")
    no_leftovers(out)
    index_dirs = list((out / "index").glob("*")) if (out / "index").exists() else []
    assert index_dirs == []  # no half-built index directory


def test_kg_ingest_truncated_bz2_is_exit_2_with_nothing_kept(tmp_path):
    full = bz2.compress(SAMPLE_DUMP.read_bytes() * 3)
    dump = tmp_path / "dump.json.bz2"
    dump.write_bytes(full[: len(full) // 2])
    out = tmp_path / "out"
    res = cli(
        "kg", "ingest", "--set", f"kg.dump_path={dump}", "--set", f"store.out_dir={out}",
        "--set", "kg.chunk_lines=60",
    )  # fmt: skip
    assert_one_line_error(res, str(dump), "truncated or corrupt .bz2")
    no_leftovers(out)
    kg_dirs = [p for p in (out / "kg").iterdir() if p.is_dir()] if (out / "kg").exists() else []
    assert kg_dirs == []


def test_kg_ingest_fake_gz_is_exit_2(tmp_path):
    dump = tmp_path / "dump.json.gz"
    dump.write_bytes(SAMPLE_DUMP.read_bytes())  # plain JSON under a .gz name
    res = cli("kg", "ingest", "--set", f"kg.dump_path={dump}", "--set", f"store.out_dir={tmp_path}")
    assert "Not a gzipped file" in assert_one_line_error(res, str(dump))


def test_cluster_kg_extract_and_nightly_map_bad_input_to_exit_2(tmp_path, prefect_api):
    """The other flow-backed commands, on the session's Prefect server."""
    res = cli("cluster", "--set", f"corpus.path={tmp_path}", "--set", f"store.out_dir={tmp_path}")
    assert_one_line_error(res, str(tmp_path), "is a directory")
    dump = tmp_path / "dump.json.gz"
    dump.write_bytes(b"\x1f\x8b" + b"\x00" * 40)  # a gzip header, then nothing usable
    res = cli(
        "kg", "extract", "--set", f"kg.dump_path={dump}", "--set", f"store.out_dir={tmp_path}"
    )
    assert_one_line_error(res, str(dump))
    no_leftovers(tmp_path)
    corpus = tmp_path / "c.jsonl.zst"
    corpus.write_bytes(zstandard.ZstdCompressor().compress(GOOD.encode() * 500)[:-8])
    res = cli(
        "nightly", "--set", f"corpus.path={corpus}", "--set", f"store.out_dir={tmp_path / 'n'}"
    )
    assert_one_line_error(res, str(corpus), "truncated or corrupt .zst")
    no_leftovers(tmp_path / "n")


def test_stage_flows_retry_only_transient_failures():
    from flows.build_index import build_index_task
    from flows.cluster_corpus import cluster_task
    from flows.extract_subgraphs import extract_task, ingest_task
    from flows.nightly import generate_task, index_task, kg_task, land_task

    for t in (
        build_index_task,
        cluster_task,
        ingest_task,
        extract_task,
        index_task,
        kg_task,
        generate_task,
        land_task,
    ):
        assert t.retry_condition_fn is retry_transient, t.name
        assert t.retries == 2, t.name
    bad_input = Failed(data=CorpusError("c.jsonl:2: not valid JSON"))
    assert retry_transient(None, None, bad_input) is False
    assert retry_transient(None, None, Failed(data=RuntimeError("a bug"))) is False
    assert (
        retry_transient(
            None, None, Failed(data=LLMConnectionError("http://llm", ConnectionError("reset"), 3))
        )
        is True
    )
