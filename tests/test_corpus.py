import gzip

import pyarrow.parquet as pq
import pytest

from pipeline.retrieval.corpus import CorpusError, iter_corpus, load_corpus, split_contents
from tests.conftest import SAMPLE_CORPUS

GOOD = '{"id": "1", "contents": "\\"Ulm\\"\\nUlm is a city on the Danube."}\n'


def write(tmp_path, text, name="c.jsonl"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_split_contents_handles_quoted_title():
    assert split_contents('"Albert Einstein"\nHe was born in Ulm.') == (
        "Albert Einstein",
        "He was born in Ulm.",
    )
    assert split_contents('"Quote "inner" title"\nBody') == ('Quote "inner" title', "Body")
    assert split_contents("Plain title\nBody") == ("Plain title", "Body")


def test_sample_corpus_is_valid_and_large_enough(tmp_path):
    stats, rejects = load_corpus(SAMPLE_CORPUS, tmp_path / "p.parquet")
    assert rejects == []
    t = pq.read_table(tmp_path / "p.parquet")
    assert stats.passages == t.num_rows >= 400
    assert len(set(t["title"].to_pylist())) >= 80
    words = [len(x.split()) for x in t["text"].to_pylist()]
    assert 80 <= sum(words) / len(words) <= 130
    assert t["row"].to_pylist() == list(range(t.num_rows))


def test_realdata_wiki18_loads(tmp_path, realdata):
    stats, rejects = load_corpus(realdata / "wiki18_sample_1000.jsonl", tmp_path / "p.parquet")
    assert stats.passages == 1000 and not rejects
    first = next(iter_corpus(realdata / "wiki18_sample_1000.jsonl"))
    assert first.title and not first.title.startswith('"') and first.text


@pytest.mark.parametrize(
    "bad, reason",
    [
        ("this is not json\n", "not valid JSON"),
        ('{"id": "2", "text": "no contents"}\n', "missing field 'contents'"),
        (
            '{"id": "1", "contents": "\\"Dup\\"\\nSame id again."}\n',
            "duplicate id '1' \\(first seen on line 1\\)",
        ),
    ],
)
def test_bad_line_names_file_and_line(tmp_path, bad, reason):
    path = write(tmp_path, GOOD + bad + GOOD.replace('"1"', '"3"'))
    with pytest.raises(CorpusError, match=rf"c\.jsonl:2: {reason}"):
        load_corpus(path, tmp_path / "p.parquet", fmt="flashrag")
    assert not (tmp_path / "p.parquet").exists()


def test_reject_mode_keeps_good_lines(tmp_path):
    lines = [GOOD.replace('"1"', f'"{i}"') for i in range(1, 200)]
    lines.insert(50, "{broken\n")
    path = write(tmp_path, "".join(lines))
    stats, rejects = load_corpus(path, tmp_path / "p.parquet", on_error="reject", error_budget=0.01)
    assert stats.passages == 199 and stats.rejected == 1
    assert rejects[0].source_line == 51 and "not valid JSON" in rejects[0].reason
    assert pq.read_table(tmp_path / "p.parquet").num_rows == 199


def test_error_budget_aborts_with_first_bad_line(tmp_path):
    path = write(tmp_path, GOOD + "x\n" + "y\n")
    with pytest.raises(CorpusError, match=r"over the error budget.*line 2"):
        load_corpus(path, tmp_path / "p.parquet", on_error="reject", error_budget=0.5)


def test_gzip_and_plain_format(tmp_path):
    p = tmp_path / "c.jsonl.gz"
    with gzip.open(p, "wt", encoding="utf-8") as fh:
        fh.write('{"id": 7, "title": "Bonn", "text": "Bonn lies on the Rhine."}\n')
    (passage,) = list(iter_corpus(p))
    assert (passage.id, passage.title, passage.text, passage.source_line) == (
        "7",
        "Bonn",
        "Bonn lies on the Rhine.",
        1,
    )


def test_invalid_utf8_is_a_reject_of_its_line_only(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(
        GOOD.encode()
        + b'{"id": "2", "contents": "\xff\xfe"}\n'
        + GOOD.replace('"1"', '"3"').encode()
    )
    with pytest.raises(CorpusError, match=r"c\.jsonl:2: invalid UTF-8"):
        load_corpus(path, tmp_path / "p.parquet")
    stats, rejects = load_corpus(path, tmp_path / "p.parquet", on_error="reject", error_budget=0.5)
    assert (stats.passages, stats.rejected, rejects[0].source_line) == (2, 1, 2)


def test_error_budget_aborts_early_on_a_broken_file(tmp_path):
    lines = [GOOD.replace('"1"', f'"{i}"') if i % 2 else "garbage\n" for i in range(1, 5001)]
    path = write(tmp_path, "".join(lines))
    with pytest.raises(CorpusError, match=r"500 of 1000 lines rejected so far"):
        load_corpus(path, tmp_path / "p.parquet", on_error="reject", error_budget=0.1)
