"""`curriculum export`: pure dedupe/split rules on hand-made rows, then real exports of the
landed nightly run (verl Parquet, HF datasets, JSONL, manifest, refusals, the CLI)."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import orjson
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from cli.export import export_command
from pipeline.agents.rewards import normalize
from pipeline.catalog.export import (
    MANIFEST,
    SEARCH_R1_TEMPLATE,
    ExportError,
    export_curriculum,
    record_row,
    render_prompt,
    verify_export,
    verl_table,
)
from pipeline.catalog.export_splits import drop_unusable
from pipeline.catalog.readonly_sql import connect_audit
from pipeline.core.config import load_config
from pipeline.stages import refresh_catalog
from pipeline.store.reviews import Verdict, write_reviews
from pipeline.store.store import Store
from schemas.exports import VERL_SCHEMA
from tests.conftest import landed_copy
from tests.export_reference import (
    assign_splits,
    dedupe_questions,
    group_records,
    ledger_splits,
    shared_passages,
)

VERL_COLUMNS = ["data_source", "prompt", "ability", "reward_model", "extra_info"]
EXTRA_INFO = {
    "record_id",
    "hop_count",
    "split",
    "index",
    "run_id",
    "source_passage_id",
    "evidence_passage_id",
    "cluster_id",
    "task_type",
    "verifier_v",
}


def row(rid: str, q: str = "Q?", src: str = "p0", ev: str | None = None, **kw) -> dict:
    base = {
        "record_id": rid,
        "run_id": "r1",
        "question": q,
        "answer": "Paris",
        "source_passage_id": src,
        "evidence_passage_id": ev,
        "cluster_id": None,
        "verifier_v": None,
    }
    return {**base, **kw}


# ---- dedupe ----------------------------------------------------------------------------


def test_duplicates_differing_in_case_articles_punctuation_collapse_to_best_record():
    rows = [
        row("r3", "Who wrote the play Hamlet?", src="a", verifier_v=0.2),
        row("r1", "who wrote play hamlet", src="b", verifier_v=0.6),
        row("r2", "  Who  wrote a play, Hamlet!! ", src="c", verifier_v=0.6),
        row("r4", "Who wrote Hamlet?", src="d", verifier_v=1.0),  # no "play": distinct
        row("r5", "WHO WROTE THE PLAY HAMLET", src="e"),  # unscored
    ]
    kept, dropped = dedupe_questions(rows)
    assert [r["record_id"] for r in kept] == ["r1", "r4"]  # V tie 0.6 -> smaller record id
    assert {(d.record_id, d.kept_record_id) for d in dropped} == {
        ("r2", "r1"),
        ("r3", "r1"),
        ("r5", "r1"),
    }
    assert all(d.reason == "duplicate_question" for d in dropped)


def test_dedupe_winner_does_not_depend_on_input_order():
    rows = [
        row(f"r{i}", "What is the capital of France?", verifier_v=v)
        for i, v in enumerate([None, -0.5, 0.4, 0.4, None, 0.1])
    ]
    winners = set()
    rng = random.Random(1)
    for _ in range(20):
        rng.shuffle(rows)
        kept, dropped = dedupe_questions([dict(r) for r in rows])
        winners.add(kept[0]["record_id"])
        assert len(kept) == 1 and len(dropped) == 5
    assert winners == {"r2"}  # highest V 0.4, tie with r3 broken by record id


def test_scored_record_beats_unscored_duplicate():
    kept, _ = dedupe_questions([row("a", "Q one"), row("b", "q ONE.", verifier_v=-1.0)])
    assert [r["record_id"] for r in kept] == ["b"]


def test_records_without_question_or_answer_are_dropped_and_counted():
    rows = [row("ok"), row("noq", None), row("punct", " ?! "), row("noa", "Q2", answer="")]
    kept, dropped = drop_unusable(rows)
    assert [r["record_id"] for r in kept] == ["ok"]
    assert {d.record_id for d in dropped} == {"noq", "punct", "noa"}
    assert {d.reason for d in dropped} == {"no_question_or_answer"}


# ---- grouping and split ------------------------------------------------------------------


def test_records_sharing_any_passage_form_one_group_transitively():
    rows = [
        row("a", src="p1", ev="p2"),
        row("b", src="p3", ev="p2"),  # shares evidence passage p2 with a
        row("c", src="p3"),  # shares source p3 with b, so joins a too
        row("d", src="p9", ev="p9"),
        row("e", src="p8", ev="p3"),  # evidence p3 joins the first group
    ]
    keys = group_records(rows)
    assert keys[0] == keys[1] == keys[2] == keys[4] == "passage:p1"
    assert keys[3] == "passage:p9" and keys[3] != keys[0]


@pytest.fixture(params=["reference", "ledger"])
def assign(request):
    """The split rules' tests run on the in-memory reference and on the pipeline's ledger."""
    return assign_splits if request.param == "reference" else ledger_splits


def test_records_sharing_an_evidence_passage_land_in_the_same_split(assign):
    rows = [row(f"x{i}", src=f"s{i}", ev="shared") for i in range(10)]
    rows += [row(f"y{i}", src=f"t{i}") for i in range(40)]
    for seed in range(25):
        res = assign(rows, 0.3, seed=seed)
        assert len({res.splits[i] for i in range(10)}) == 1
        assert not shared_passages(rows, res.splits)


def test_random_passage_graph_never_leaks_and_is_order_independent(assign):
    rng = random.Random(7)
    rows = [
        row(
            f"r{i:04d}",
            src=f"p{rng.randrange(400)}",
            ev=rng.choice([None, f"p{rng.randrange(400)}"]),
        )
        for i in range(600)
    ]
    res = assign(rows, 0.2, seed=3)
    assert not shared_passages(rows, res.splits)
    assert res.groups["train"] > 0 and res.groups["validation"] > 0
    share = res.groups["validation"] / (res.groups["train"] + res.groups["validation"])
    assert 0.1 < share < 0.3
    by_id = dict(zip((r["record_id"] for r in rows), res.splits, strict=True))
    shuffled = rows[:]
    rng.shuffle(shuffled)
    res2 = assign(shuffled, 0.2, seed=3)
    assert dict(zip((r["record_id"] for r in shuffled), res2.splits, strict=True)) == by_id
    res3 = assign(rows, 0.2, seed=4)
    assert res3.splits != res.splits  # the seed salts the hash


def test_split_by_cluster_keeps_whole_clusters_together(assign):
    rows = [row(f"c{c}-{i}", src=f"p{c}-{i}", cluster_id=c) for c in range(12) for i in range(5)]
    passage = assign(rows, 0.5, by="passage", seed=0)
    cluster = assign(rows, 0.5, by="cluster", seed=0)
    assert sum(cluster.groups.values()) == 12 and sum(passage.groups.values()) == 60
    for c in range(12):
        assert len({cluster.splits[c * 5 + i] for i in range(5)}) == 1
    # the passage split does spread at least one cluster across both sides
    assert any(len({passage.splits[c * 5 + i] for i in range(5)}) == 2 for c in range(12))


def test_tiny_export_still_gets_a_validation_group(assign):
    rows = [row("a", src="p1"), row("b", src="p2")]
    for seed in range(30):
        res = assign(rows, 0.1, seed=seed)
        assert sorted(res.splits) == ["train", "validation"]
        assert res.groups == {"train": 1, "validation": 1}
    res = assign(rows, 0.95, seed=0)
    assert sorted(res.splits) == ["train", "validation"]  # never all validation either


def test_the_ledger_splits_as_the_reference_does_and_says_why():
    """Which group a forced move takes (the largest draw back to train, the smallest to
    validation) and its message, the groups and each side: the same from the pipeline's
    ledger as from the reference, over the small cases where the rules decide."""
    cases = [
        ([row("a", src="p1"), row("b", src="p2"), row("c", src="p3")], 0.99, "passage"),
        ([row("a", src="p1"), row("b", src="p2"), row("c", src="p3")], 0.01, "passage"),
        ([row("a", src="p1"), row("b", src="p1", ev="p2")], 0.5, "passage"),
        ([row(f"c{c}-{i}", src=f"p{c}-{i}", cluster_id=c) for c in range(4) for i in range(3)],
         0.5, "cluster"),
    ]  # fmt: skip
    forced = set()
    for rows, fraction, by in cases:
        for seed in range(6):
            want = assign_splits(rows, fraction, by, seed)
            assert ledger_splits(rows, fraction, by, seed) == want
            forced.add((want.forced or "").split(";")[0])
    assert forced >= {"every group hashed into validation", "", "no group hashed below 0.01"}


def test_one_group_or_zero_fraction_has_no_validation(assign):
    one = [row("a", src="p1"), row("b", src="p1")]
    assert assign(one, 0.5).splits == ["train", "train"]
    two = [row("a", src="p1"), row("b", src="p2")]
    res = assign(two, 0.0)
    assert res.splits == ["train", "train"] and res.forced is None
    with pytest.raises(ValueError):
        assign(two, 1.0)


def test_verl_rows_follow_search_r1_layout():
    recs = [record_row(row("a", "Who wrote Hamlet?", evidence="e", waypoints=["x"]), "train", 0)]
    tbl = verl_table(recs)
    assert tbl.schema.equals(VERL_SCHEMA)
    got = tbl.to_pylist()[0]
    assert got["prompt"] == render_prompt("Who wrote Hamlet?")
    content = got["prompt"][0]["content"]
    for tag in ("<think>", "<search>", "</search>", "<information>", "<answer>"):
        assert tag in content
    assert content.endswith("Question: Who wrote Hamlet?\n")
    assert got["reward_model"] == {
        "style": "rule",
        "ground_truth": {
            "target": ["Paris"],
            "evidence": "e",
            "evidence_chain": [],
            "waypoints": ["x"],
        },
    }
    assert got["extra_info"]["split"] == "train" and got["extra_info"]["index"] == 0


# ---- real landed run ---------------------------------------------------------------------


# The export mechanics below read the landed run's valid verbatim records, whatever the gates
# decided of them: the 270M model's 6 records may have none accepted.
MECHANICS = "is_valid AND is_verbatim"
KEEP_ALL = {"include_shortcuts": True, "include_ambiguous": True, "include_undetermined": True}


def _catalog_rows(catalog: Path, where: str = MECHANICS) -> dict[str, dict]:
    with connect_audit(catalog) as con:
        rel = con.table("curriculum_verdicts").filter(where)
        return {r["record_id"]: r for r in rel.to_arrow_table().to_pylist()}


@pytest.fixture(scope="module")
def exported(landed_run, tmp_path_factory):
    """One export of the landed run's valid verbatim records in every format."""
    out = tmp_path_factory.mktemp("export") / "ds"
    res = export_curriculum(
        landed_run.catalog,
        out,
        where=MECHANICS,
        **KEEP_ALL,
        formats=["verl", "hf", "jsonl"],
        validation_fraction=0.5,
        argv=["curriculum", "export", str(out)],
    )
    return res


def test_filter_exports_the_valid_verbatim_records(exported, landed_run):
    want = _catalog_rows(landed_run.catalog)
    assert want, "the landed run has no valid+verbatim record to export"
    c = exported.counts
    assert c["selected"] == len(want)
    assert c["shortcuts_dropped"] == c["ambiguous_dropped"] == c["undetermined_dropped"] == 0
    assert c["exported"] + c["duplicates_dropped"] + c["no_question_or_answer"] == len(want)
    assert c["train"] + c["validation"] == c["exported"] > 0


def test_default_selection_is_the_accepted_view(landed_run, tmp_path):
    """What the summary line counts, the accepted view holds and the default export ships are
    the same records; the valid verbatim ones it leaves out are in dropped.jsonl with the
    view's reason."""
    with connect_audit(landed_run.catalog) as con:
        accepted = sorted(r for (r,) in con.execute("SELECT record_id FROM accepted").fetchall())
        rejected = dict(
            con.execute(
                "SELECT record_id, rejected_by FROM curriculum_verdicts "
                "WHERE is_valid AND is_verbatim AND NOT accepted"
            ).fetchall()
        )
    assert landed_run.summary.accepted == len(accepted)
    out = tmp_path / "default"
    if not accepted:
        with pytest.raises(ExportError, match="selected no records"):
            export_curriculum(landed_run.catalog, out, formats=["jsonl"])
        return
    res = export_curriculum(landed_run.catalog, out, formats=["jsonl"], validation_fraction=0)
    lines = (out / "jsonl" / "train.jsonl").read_bytes().splitlines()
    assert sorted(orjson.loads(x)["record_id"] for x in lines) == accepted
    assert res.counts["selected"] == res.counts["exported"] == len(accepted)
    dropped = {
        d["record_id"]: d["reason"]
        for d in map(orjson.loads, (out / "dropped.jsonl").read_bytes().splitlines())
    }
    view_names = {"ambiguous": "ambiguous_answer", "shortcut_undetermined": "undetermined",
                  "uniqueness_undetermined": "undetermined"}  # fmt: skip
    assert dropped == {rid: view_names.get(why, why) for rid, why in rejected.items()}


def test_verl_parquet_loads_with_pyarrow_and_matches_the_catalog(exported, landed_run):
    want = _catalog_rows(landed_run.catalog)
    seen = []
    for split in ("train", "validation"):
        tbl = pq.read_table(exported.out / "verl" / f"{split}.parquet")
        assert tbl.column_names == VERL_COLUMNS
        assert tbl.num_rows == exported.counts[split]
        for i, r in enumerate(tbl.to_pylist()):
            info = r["extra_info"]
            assert set(info) >= EXTRA_INFO
            assert info["split"] == split and info["index"] == i
            src = want[info["record_id"]]
            assert r["data_source"] == "evidence_curriculum" and r["ability"] == "fact-reasoning"
            assert r["prompt"] == [
                {"role": "user", "content": SEARCH_R1_TEMPLATE.format(question=src["question"])}
            ]
            gt = r["reward_model"]["ground_truth"]
            assert r["reward_model"]["style"] == "rule"
            # every accepted form of the answer, the answer first (Search-R1's golden_answers)
            assert gt["target"] == list(dict.fromkeys([src["answer"], *src["answer_aliases"]]))
            assert gt["evidence"] == src["evidence"]
            # one verbatim sentence per hop of the question, the last one its evidence
            assert gt["evidence_chain"] == [h["text"] for h in src["evidence_chain"]]
            assert len(gt["evidence_chain"]) == src["hop_count"] == info["hop_count"]
            assert gt["evidence_chain"][-1] == src["evidence"]
            assert gt["waypoints"] == (src["waypoints"] or [])
            assert info["evidence_passage_id"] == src["evidence_passage_id"]
            assert info["run_id"] == landed_run.run_id
            seen.append(info["record_id"])
    assert len(seen) == len(set(seen)) == exported.counts["exported"]


def test_hf_dataset_loads_with_load_from_disk(exported):
    import datasets

    dd = datasets.load_from_disk(str(exported.out / "hf"))
    assert isinstance(dd, datasets.DatasetDict)
    assert set(dd) == {"train", "validation"}
    for split in ("train", "validation"):
        assert dd[split].num_rows == exported.counts[split]
        assert {"prompt", "golden_answers", "evidence", "kg_path", "record_id"} <= set(
            dd[split].column_names
        )
    verl_ids = pq.read_table(exported.out / "verl" / "train.parquet").to_pylist()
    assert dd["train"]["record_id"] == [r["extra_info"]["record_id"] for r in verl_ids]


def test_load_dataset_reads_the_export_folder_through_its_card(exported, tmp_path):
    """The card's YAML header names the records format's files as the default config, so
    `datasets.load_dataset(<export>)` (and the Hub) read the export folder itself."""
    import datasets

    card = (exported.out / "README.md").read_text()
    assert card.startswith("---\n") and "\nlicense: unknown" in card
    assert "task_categories:\n- question-answering" in card
    dd = datasets.load_dataset(str(exported.out), cache_dir=str(tmp_path / "cache"))
    disk = datasets.load_from_disk(str(exported.out / "hf"))
    assert set(dd) == {s for s in ("train", "validation") if exported.counts[s]}
    for split in dd:
        assert dd[split]["record_id"] == disk[split]["record_id"]
        assert dd[split].column_names == disk[split].column_names


def test_train_and_validation_share_no_passage(exported):
    lines = {
        s: [
            orjson.loads(x)
            for x in (exported.out / "jsonl" / f"{s}.jsonl").read_bytes().splitlines()
        ]
        for s in ("train", "validation")
    }
    assert [len(lines[s]) for s in lines] == [exported.counts[s] for s in lines]
    for r in lines["train"] + lines["validation"]:  # hop_count is the question's own hops
        assert r["hop_count"] == len(r["evidence_chain"]) >= 1
    passages = {
        s: ({r["source_passage_id"] for r in rs} | {r["evidence_passage_id"] for r in rs}) - {None}
        for s, rs in lines.items()
    }
    assert not passages["train"] & passages["validation"]
    if (
        exported.manifest["split"]["groups"]["train"]
        + exported.manifest["split"]["groups"]["validation"]
        >= 2
    ):
        assert lines["validation"], "two or more groups must give a non-empty validation split"


def test_manifest_lists_runs_counts_and_checksums(exported, landed_run):
    m = orjson.loads((exported.out / MANIFEST).read_bytes())
    assert m == orjson.loads(orjson.dumps(exported.manifest))
    assert m["filter"] == MECHANICS and m["formats"] == ["verl", "hf", "jsonl"]
    with connect_audit(landed_run.catalog) as con:
        (config_hash,) = con.execute(
            "SELECT config_hash FROM runs WHERE run_id = ?", [landed_run.run_id]
        ).fetchone()
    assert [(r["run_id"], r["config_hash"]) for r in m["runs"]] == [
        (landed_run.run_id, config_hash)
    ]
    assert m["runs"][0]["records_exported"] == m["counts"]["exported"]
    paths = {f["path"] for f in m["files"]}
    assert {"verl/train.parquet", "jsonl/validation.jsonl", "hf/dataset_dict.json"} <= paths
    rows = {f["path"]: f["rows"] for f in m["files"]}
    assert rows["verl/validation.parquet"] == m["counts"]["validation"]
    assert verify_export(exported.out) == []
    assert m["split"]["shared_passages"] == 0 and m["code"]["argv"][1] == "export"
    # a changed file is caught against the manifest
    victim = exported.out / "jsonl" / "train.jsonl"
    data = victim.read_bytes()
    victim.write_bytes(data + b"\n")
    try:
        assert verify_export(exported.out) == [
            "jsonl/train.jsonl: sha256 differs from the manifest"
        ]
    finally:
        victim.write_bytes(data)
    assert not [p for p in exported.out.parent.iterdir() if p.name.startswith(".")]


def test_dataset_card_says_where_the_data_comes_from(exported, landed_run):
    """README.md: the runs with their config hashes, the selection, the funnel and every
    gate's drops, the verifier controls, the reviews, the split rule, the fields (their docs
    from schemas/exports.py) and the known limitations."""
    card = (exported.out / "README.md").read_text()
    m = exported.manifest
    run = m["runs"][0]
    assert f"| {landed_run.run_id} | " in card and f" | {run['config_hash']} | " in card
    for section in ("Where it comes from", "Selection", "Funnel", "Verifier controls",
                    "Reviews", "Split", "Fields", "Known limitations"):  # fmt: skip
        assert f"\n## {section}\n" in card
    assert f"```sql\n{MECHANICS}\n```" in card
    with connect_audit(landed_run.catalog) as con:
        gates = con.execute("SELECT gate, rejected FROM gate_funnel").fetchall()
        (generated,) = con.execute("SELECT generated FROM funnel").fetchall()[0]
        controls = con.execute(
            "SELECT method, auc_real_vs_shuffled FROM verifier_controls"
        ).fetchall()
    assert f"| {landed_run.run_id} | {generated} | " in card
    for gate, rejected in gates:
        assert f"| {landed_run.run_id} | {gate} | " in card
        assert any(line.startswith(f"| {landed_run.run_id} | {gate} | ")
                   and line.endswith(f" | {rejected} |") for line in card.splitlines())  # fmt: skip
    for method, auc in controls:
        assert f"| {landed_run.run_id} | {method} | " in card
        assert auc is None or f"{auc:.3f}" in card
    assert "| accepted by a reviewer | 0 | 0 |" in card  # the landed run has no review
    assert m["split"]["hash"] in card
    assert "| evidence_char_start | int32 | 0-based offset of the evidence in it |" in card
    assert "| reward_model | struct | " in card


def test_permissive_filter_drops_records_without_question(landed_run, tmp_path):
    all_rows = _catalog_rows(landed_run.catalog, "true")
    res = export_curriculum(landed_run.catalog, tmp_path / "all", where="", formats=["jsonl"])
    usable = [r for r in all_rows.values() if normalize(r["question"]) and normalize(r["answer"])]
    assert res.counts["selected"] == len(all_rows)
    assert res.counts["no_question_or_answer"] == len(all_rows) - len(usable)
    # the LLM gates' drops (gates.shortcut / gates.uniqueness), whatever the model produced
    judged = ("fail", "undetermined")
    gated = [r for r in usable
             if r["shortcut_verdict"] in judged or r["uniqueness_verdict"] in judged]  # fmt: skip
    c = res.counts
    assert c["shortcuts_dropped"] + c["ambiguous_dropped"] + c["undetermined_dropped"] == len(gated)
    usable = [r for r in usable if r not in gated]
    distinct = {normalize(r["question"]) for r in usable}
    assert res.counts["duplicates_dropped"] == len(usable) - len(distinct)
    assert res.counts["exported"] == len(distinct)
    dropped = [
        orjson.loads(x) for x in (tmp_path / "all" / "dropped.jsonl").read_bytes().splitlines()
    ]
    assert len(dropped) == (
        res.counts["no_question_or_answer"] + res.counts["duplicates_dropped"] + len(gated)
    )
    assert res.manifest["filter"] is None


@pytest.mark.parametrize(
    "bad",
    [
        "is_valid) UNION ALL SELECT * FROM curriculum --",
        "true; COPY curriculum TO '{leak}'",
        "is_valid; DROP VIEW curriculum",
        "true) TO '{leak}' (FORMAT csv",
    ],
)
def test_malicious_filter_is_refused_and_nothing_is_written(landed_run, tmp_path, bad):
    leak = tmp_path / "leak.csv"
    where = bad.format(leak=leak)
    out = tmp_path / "ds"
    with pytest.raises(ExportError) as err:
        export_curriculum(landed_run.catalog, out, where=where)
    assert where in str(err.value) and "\n" not in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert _catalog_rows(landed_run.catalog), "catalog still readable"


def test_bad_column_empty_selection_and_unknown_run_are_one_line_errors(landed_run, tmp_path):
    cases = {
        "no_such_column > 1": "Binder Error",
        "false": "selected no records",
    }
    for where, msg in cases.items():
        with pytest.raises(ExportError, match=msg) as err:
            export_curriculum(landed_run.catalog, tmp_path / "ds", where=where)
        assert where in str(err.value) and err.value.hint
    with pytest.raises(ExportError, match="unknown run id") as err:
        export_curriculum(landed_run.catalog, tmp_path / "ds", run_ids=["nope"])
    assert landed_run.run_id in err.value.hint
    with pytest.raises(ExportError, match="no catalog"):
        export_curriculum(tmp_path / "missing.duckdb", tmp_path / "ds")
    assert list(tmp_path.iterdir()) == []


def test_existing_export_needs_overwrite(landed_run, tmp_path):
    out = tmp_path / "ds"
    first = export_curriculum(landed_run.catalog, out, formats=["jsonl"])
    with pytest.raises(ExportError, match="already exists"):
        export_curriculum(landed_run.catalog, out, formats=["verl"])
    assert not (out / "verl").exists()
    second = export_curriculum(
        landed_run.catalog, out, formats=["verl"], run_ids=[landed_run.run_id], overwrite=True
    )
    assert (out / "verl" / "train.parquet").exists() and not (out / "jsonl").exists()
    assert second.manifest["created_at"] >= first.manifest["created_at"]
    assert second.manifest["run_ids_requested"] == [landed_run.run_id]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
    precious = tmp_path / "notes"
    precious.mkdir()
    (precious / "keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="not a curriculum export"):
        export_curriculum(landed_run.catalog, precious, overwrite=True)
    assert (precious / "keep.txt").read_text() == "mine"


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command("export")(export_command)

    @app.callback()
    def main() -> None:
        """Stand-in for cli.main's app."""

    return app


def test_cli_export_writes_formats_and_prints_summary(landed_run, tmp_path):
    out = tmp_path / "cli-ds"
    sets = [a for s in landed_run.settings for a in ("--set", s)]
    args = ["export", str(out), *sets, "--format", "verl", "--format", "hf", "--where", MECHANICS,
            "--include-shortcuts", "--include-ambiguous", "--include-undetermined"]  # fmt: skip
    res = CliRunner().invoke(
        _cli(), [*args, "--run-id", landed_run.run_id, "--split-by", "cluster"]
    )
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("exported ")
    assert f"({landed_run.run_id})" in res.stdout
    assert str(out / "verl") in res.stdout and str(out / "manifest.json") in res.stdout
    m = orjson.loads((out / MANIFEST).read_bytes())
    assert m["formats"] == ["verl", "hf"] and m["split"]["by"] == "cluster"
    assert not (out / "jsonl").exists()

    again = CliRunner().invoke(_cli(), args)
    assert again.exit_code == 2
    assert again.stderr.splitlines()[0] == f"error: {out.resolve()} already exists"
    assert again.stderr.splitlines()[1].startswith("hint: pass --overwrite")


def test_cli_reviewed_only_without_reviews_exports_nothing_and_says_why(landed_run, tmp_path):
    out = tmp_path / "x"
    sets = [a for s in landed_run.settings for a in ("--set", s)]
    help_text = CliRunner().invoke(_cli(), ["export", "--help"]).stdout
    assert "--reviewed-only" in help_text and "--include-*" in help_text
    args = ["export", str(out), *sets, "--where", MECHANICS, "--reviewed-only",
            "--include-shortcuts", "--include-ambiguous", "--include-undetermined"]  # fmt: skip
    res = CliRunner().invoke(_cli(), args)
    n = len(_catalog_rows(landed_run.catalog))
    assert res.exit_code == 2, res.output
    first = res.stderr.splitlines()[0]
    assert first.startswith(f"error: none of the {n} records selected by '{MECHANICS}' is left")
    assert f"not_reviewed {n}" in first and not out.exists()


def test_cli_bad_filter_and_missing_catalog(landed_run, tmp_path):
    sets = [a for s in landed_run.settings for a in ("--set", s)]
    out = tmp_path / "x"
    res = CliRunner().invoke(_cli(), ["export", str(out), *sets, "--where", "1=1; DROP TABLE t"])
    assert res.exit_code == 2
    first = res.stderr.splitlines()[0]
    assert first.startswith(
        "error: filter '1=1; DROP TABLE t' over curriculum_verdicts: Parser Error"
    )
    assert not out.exists()
    res = CliRunner().invoke(
        _cli(), ["export", str(out), "--set", f"store.catalog={tmp_path / 'none.duckdb'}"]
    )
    assert res.exit_code == 2 and "error: no catalog at" in res.stderr
    assert not out.exists()


def test_real_rows_with_duplicates_and_shared_passages(landed_run, tmp_path):
    """The landed rows plus, per valid record, a re-cased duplicate question from another
    passage and a new question on its evidence passage; `runs` is empty (run.parquet lost)."""
    import duckdb

    catalog = tmp_path / "mixed.duckdb"
    with duckdb.connect(str(catalog)) as con:
        con.execute(f"ATTACH '{landed_run.catalog}' AS src (READ_ONLY)")
        con.execute(
            """
            CREATE TABLE curriculum AS
            SELECT * FROM src.curriculum
            UNION ALL
            SELECT * REPLACE (record_id || '-dup' AS record_id,
                              '  ' || upper(question) || ' !!' AS question,
                              'elsewhere-' || record_id AS source_passage_id)
            FROM src.curriculum WHERE is_valid AND is_verbatim
            UNION ALL
            SELECT * REPLACE (record_id || '-sib' AS record_id,
                              'Which sentence of passage ' || record_id || ' is quoted?'
                                  AS question,
                              'sibling-' || record_id AS source_passage_id)
            FROM src.curriculum WHERE is_valid AND is_verbatim
            """
        )
        con.execute("CREATE TABLE runs AS SELECT * FROM src.runs WHERE false")
        n = con.execute("SELECT count(*) FROM src.curriculum_valid").fetchone()[0]
    res = export_curriculum(catalog, tmp_path / "ds", formats=["jsonl"], validation_fraction=0.5)
    assert res.counts["selected"] == 3 * n
    assert res.counts["duplicates_dropped"] == n
    assert res.counts["exported"] == 2 * n
    dropped = [
        orjson.loads(x) for x in (tmp_path / "ds" / "dropped.jsonl").read_bytes().split(b"\n") if x
    ]
    # equal V: the original (shorter, smaller record id) wins over its '-dup'
    assert {(d["record_id"], d["kept_record_id"]) for d in dropped} == {
        (d["kept_record_id"] + "-dup", d["kept_record_id"]) for d in dropped
    }
    split_of = {}
    for s in ("train", "validation"):
        for line in (tmp_path / "ds" / "jsonl" / f"{s}.jsonl").read_bytes().splitlines():
            split_of[orjson.loads(line)["record_id"]] = s
    assert len(split_of) == 2 * n
    for rid in [r for r in split_of if r.endswith("-sib")]:
        assert split_of[rid] == split_of[rid.removesuffix("-sib")]
    if n >= 2:
        assert set(split_of.values()) == {"train", "validation"}
    assert res.manifest["runs"] == [
        {
            "run_id": landed_run.run_id,
            "config_hash": res.manifest["runs"][0]["config_hash"],
            "status": "unknown",
            "records_exported": 2 * n,
        }
    ]
    assert len(res.manifest["runs"][0]["config_hash"]) == 16
    assert any("not completed" in w for w in res.warnings)


# ---- reviews -----------------------------------------------------------------------------


def _reviewed_copy(landed_run, tmp_path: Path) -> SimpleNamespace:
    """The landed store copied (reviews are never written into the shared one) and its catalog
    rebuilt over the copy the way landing does, so it reads the copy's reviews."""
    out, settings = landed_copy(landed_run, tmp_path)
    cfg = load_config(None, settings)
    store = Store.from_config(cfg)
    refresh_catalog(cfg, store)
    return SimpleNamespace(out=out, catalog=store.catalog_path, cfg=cfg, store=store)


def test_reviews_reach_the_export_and_the_latest_verdict_wins(landed_run, tmp_path):
    """A reviewer's reject leaves a record out (dropped.jsonl: review_rejected), a later
    accept brings it back, --reviewed-only exports exactly the records reviewers accepted,
    and the card and the manifest count them; the export folder still loads."""
    import datasets

    c, run = _reviewed_copy(landed_run, tmp_path), landed_run.run_id
    with connect_audit(c.catalog) as con:
        accepted = con.execute("SELECT record_id FROM accepted").fetchall()
        ((records,),) = con.execute("SELECT count(*) FROM curriculum").fetchall()
    # The default selection when the run accepted two records or more (the 270M model's six
    # records usually give four); else the valid verbatim ones through a user's --where,
    # which the reviews bind all the same.
    scope = {} if len(accepted) >= 2 else {"where": MECHANICS, **KEEP_ALL}

    def export(name: str, **kw):
        res = export_curriculum(c.catalog, tmp_path / name, formats=["hf", "jsonl"],
                                validation_fraction=0, **scope, **kw)  # fmt: skip
        lines = (res.out / "jsonl" / "train.jsonl").read_bytes().splitlines()
        dropped = (res.out / "dropped.jsonl").read_bytes().splitlines()
        return (
            res,
            [orjson.loads(x)["record_id"] for x in lines],
            {d["record_id"]: d for d in map(orjson.loads, dropped)},
        )

    before, ids, _ = export("before")
    assert len(ids) >= 2, "the landed run has fewer than two records to review"
    bad, good = ids[0], ids[1]
    write_reviews(c.out, Verdict("reject", "ana", "answer_not_in_evidence", "wrong span"),
                  [(bad, run)])  # fmt: skip
    write_reviews(c.out, Verdict("accept", "ben"), [(good, run)])

    res, kept, dropped = export("rejected")
    assert bad not in kept and set(ids) - {bad} <= set(kept)
    assert dropped[bad]["reason"] == "review_rejected"
    assert "answer_not_in_evidence" in dropped[bad]["detail"] and "ana" in dropped[bad]["detail"]
    assert res.counts["review_rejected"] == 1 and res.counts["not_reviewed"] == 0
    reviews = res.manifest["reviews"]
    assert reviews["scope"] == {
        "accept": 1, "reject": 1, "not_reviewed": before.counts["selected"] - 2
    }  # fmt: skip
    # over the catalog's records, counted from its manifests (catalog_files), not its files
    assert reviews["overall"] == {"accept": 1, "reject": 1, "not_reviewed": records - 2}
    assert reviews["exported_accepted"] == 1 and not reviews["reviewed_only"]
    card = (res.out / "README.md").read_text()
    assert "| accepted by a reviewer | 1 | 1 |" in card
    assert "| rejected by a reviewer | 1 | 1 |" in card
    assert "Left out by review: 1 rejected;" in card
    dd = datasets.load_dataset(str(res.out), cache_dir=str(tmp_path / "cache"))
    assert dd["train"]["record_id"] == kept

    only, kept, dropped = export("reviewed-only", reviewed_only=True)
    assert kept == [good]
    assert {r for r, d in dropped.items() if d["reason"] == "not_reviewed"} >= set(ids) - {
        bad,
        good,
    }
    assert only.counts["not_reviewed"] == before.counts["selected"] - 2
    assert (
        "--reviewed-only: so are those no reviewer accepted" in (only.out / "README.md").read_text()
    )

    write_reviews(c.out, Verdict("accept", "ana", note="re-read: it is there"), [(bad, run)])
    res, kept, dropped = export("accepted-later")
    assert kept == ids and bad not in dropped and res.counts["review_rejected"] == 0
    _, kept, _ = export("reviewed-only-later", reviewed_only=True)
    assert kept == sorted([bad, good])


def test_reviews_survive_a_catalog_rebuild(landed_run, tmp_path):
    """Reviews live in the store, not the catalog: a rebuilt catalog lists them, and so does
    every read-only connection before the rebuild."""
    import duckdb

    from pipeline.store.store import connect_readonly

    c = _reviewed_copy(landed_run, tmp_path)
    with connect_audit(c.catalog) as con:
        ((rid,),) = con.execute("SELECT min(record_id) FROM curriculum").fetchall()
    write_reviews(c.out, Verdict("reject", "ana", "trivial"), [(rid, landed_run.run_id)])
    sql = "SELECT record_id, verdict, reason, reviewer FROM review_latest"
    with duckdb.connect(str(c.catalog), read_only=True) as con:  # the catalog's own listing
        assert con.execute(sql).fetchall() == []
    with connect_readonly(c.catalog) as con:  # the files on disk now
        assert con.execute(sql).fetchall() == [(rid, "reject", "trivial", "ana")]
    refresh_catalog(c.cfg, c.store)
    with duckdb.connect(str(c.catalog), read_only=True) as con:
        assert con.execute(sql).fetchall() == [(rid, "reject", "trivial", "ana")]
        got = con.execute(
            "SELECT review_verdict FROM curriculum_verdicts WHERE record_id = ?", [rid]
        ).fetchall()
    assert got == [("reject",)]
