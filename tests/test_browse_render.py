"""The record browser's pure parts: the evidence inside its passage, the KG path's layout, and
page cursors that a client cannot forge into another sort or into SQL."""

from __future__ import annotations

import datetime as dt

import pytest

from pipeline.browse.query import CursorError, RecordFilter, decode_cursor, encode_cursor
from pipeline.browse.render import highlight, path_drawing

TEXT = "Rome is the capital of Italy. It lies on the Tiber. The city is old."


def test_evidence_is_cut_at_its_stored_offsets():
    start = TEXT.index("It lies")
    end = start + len("It lies on the Tiber.")
    h = highlight(TEXT, "It lies on the Tiber.", start, end)
    assert (h.before, h.evidence, h.after, h.exact) == (
        TEXT[:start],
        TEXT[start:end],
        TEXT[end:],
        True,
    )
    # offsets that do not cut out the evidence: the first occurrence is marked, and said so
    moved = highlight(TEXT, "It lies on the Tiber.", start + 1, end + 1)
    assert moved.evidence == "It lies on the Tiber." and not moved.exact
    assert "do not cut out" in moved.note and f"found at {start}" in moved.note
    missing = highlight(TEXT, "<script>x</script>", None, None)
    assert (
        missing.evidence == "" and missing.before == TEXT and "not in this passage" in missing.note
    )


def test_kg_path_is_laid_out_seed_to_answer_with_distractor_rows():
    node = lambda q: {"id": q, "label": f"L{q}"}  # noqa: E731
    rel = lambda p: {"id": p, "label": f"R{p}"}  # noqa: E731
    path = {"nodes": [node("Q1"), node("Q2"), node("Q3")], "relations": [rel("P1"), rel("P2")]}
    branch = {"nodes": [node("Q2"), node("Q9")], "relations": [rel("P9")]}
    d = path_drawing(path, ["LQ1", "LQ2"], [branch, {"nodes": [node("Q77")], "relations": []}])
    kinds = [(n.qid, n.kind) for n in d.nodes]
    assert kinds == [("Q1", "seed"), ("Q2", "waypoint"), ("Q3", "answer"), ("Q9", "distractor")]
    assert [e.label for e in d.edges] == ["RP1", "RP2", "RP9"]
    assert [e.distractor for e in d.edges] == [False, False, True]
    main = [n for n in d.nodes if n.kind != "distractor"]
    assert len({n.y for n in main}) == 1 and [n.x for n in main] == sorted(n.x for n in main)
    assert d.nodes[-1].y > main[0].y  # the branch on its own row
    assert d.width >= max(n.x for n in d.nodes) + 150 and d.height > d.nodes[-1].y
    assert path_drawing(None) is None and path_drawing({"nodes": []}) is None


def test_cursors_round_trip_and_refuse_forgeries():
    t = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert decode_cursor(encode_cursor("time", t, "r1"), "time") == (t, "r1")
    assert decode_cursor(encode_cursor("v", 0.25, "r2"), "v") == (0.25, "r2")
    with pytest.raises(CursorError, match="another sort"):
        decode_cursor(encode_cursor("v", 0.25, "r2"), "time")
    for bad in ("!!", "e30", encode_cursor("v", "'; DROP TABLE x; --", "r")):
        with pytest.raises(CursorError):
            decode_cursor(bad, "v")


def test_filters_are_bound_parameters_never_sql_text():
    flt = RecordFilter(run_id="x' OR 1=1 --", q="<B>", gate="shortcut", gate_verdict="fail",
                       review="unreviewed", v_min=0.5, status="rejected")  # fmt: skip
    conds, args = flt.where()
    assert "x' OR" not in " ".join(conds) and "x' OR 1=1 --" in args
    assert "<b>" in args  # searched lower-cased
    assert "rv.verdict IS NULL" in conds and "NOT r.accepted" in conds
    assert args.count("shortcut") == 1 and "fail" in args
