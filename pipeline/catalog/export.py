"""SQL-filtered curriculum exports for RL trainers: verl / Search-R1 Parquet, HF datasets, JSONL.

An export is a directory built next to its target and renamed into place, so a trainer never
reads half an export. Records are selected with a user predicate over the `curriculum` view on
a read-only connection (parsed as one expression, see `pipeline.catalog.readonly_sql`),
questions are deduplicated by the project's Norm, and train/validation are split by whole
passage groups so no passage a model trains on shows up in validation. `manifest.json` says
what went in.

The rules (the drops, the dedupe's winner, the split's hash and forced move) are pure functions
over plain row dicts, tested on hand-made rows (export_splits); the per-record state they run
over, the dedupe's and the split's groups included, lives in a scratch DuckDB ledger
(export_ledger), and only the selection, the ledger and the writers touch the disk.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from pipeline.catalog.export_card import write_card
from pipeline.catalog.export_formats import (
    DEFAULT_ABILITY,
    open_format,
    records_table,
    verl_table,
    write_jsonl,
)
from pipeline.catalog.export_ledger import Ledger
from pipeline.catalog.export_reward import (
    RewardConfigError,
    reward_manifest,
    reward_settings,
    write_reward_file,
)
from pipeline.catalog.export_selection import (
    DEFAULT_WHERE,
    ExportError,
    NarrowRow,
    Selection,
    default_selection,
    open_catalog,
    record_columns,
    select_records,
)
from pipeline.catalog.export_splits import (
    SPLIT_BY,
    SPLITS,
    Dropped,
    SplitResult,
    drop_rows,
    view_drops,
)
from pipeline.catalog.export_stream import stream_records
from pipeline.catalog.export_target import (
    MANIFEST,
    WRITTEN_BY,
    check_outside_store,
    check_target,
)
from pipeline.core import variants
from pipeline.core.config import SQLConfig
from pipeline.core.io import atomic_dir, sha256_file
from schemas.exports import (
    EXPORT_VERSION,
    RECORD_SCHEMA,
    VERL_SCHEMA,
)
from schemas.tables import SCHEMA_VERSION

DEFAULT_DATA_SOURCE = "evidence_curriculum"
MAX_SEED = 2**63 - 1  # the split hash's salt: any 64-bit value

# The Search-R1 agent protocol, the one place its text lives: the trainer's rollout engine
# parses <search> / <answer> and inserts <information>, so the tags must match it exactly.
SEARCH_R1_TEMPLATE = (
    "Answer the given question. Reason inside <think> and </think> first every time you get "
    "new information. If you find you lack some knowledge, call a search engine with "
    "<search> query </search> and it returns the top results between <information> and "
    "</information>. You can search as many times as you want. When you need no further "
    "knowledge, give the answer inside <answer> and </answer>, without detailed explanation. "
    "For example, <answer> Beijing </answer>. Question: {question}\n"
)


# ---- prompt ----------------------------------------------------------------------------


def render_prompt(question: str) -> list[dict[str, str]]:
    """Chat messages for one question: a single user turn, as Search-R1's data has it."""
    return [{"role": "user", "content": SEARCH_R1_TEMPLATE.format(question=question.strip())}]


# ---- rows -> tables (pure) -------------------------------------------------------------


def record_row(
    r: dict[str, Any], split: str, index: int, data_source: str = DEFAULT_DATA_SOURCE
) -> dict[str, Any]:
    """One trainer-neutral row: record `r` at position `index` of `split`."""
    return {
        "record_id": r["record_id"],
        "split": split,
        "index": index,
        "data_source": data_source,
        "prompt": render_prompt(r["question"]),
        "question": r["question"],
        "answer": r["answer"],
        "golden_answers": list(dict.fromkeys([r["answer"], *(r.get("answer_aliases") or [])])),
        "evidence": r.get("evidence"),
        "evidence_chain": r.get("evidence_chain"),
        "evidence_mode": r.get("evidence_mode"),
        "question_style": r.get("question_style"),
        "evidence_passage_id": r.get("evidence_passage_id"),
        "evidence_char_start": r.get("evidence_char_start"),
        "evidence_char_end": r.get("evidence_char_end"),
        "source_passage_id": r["source_passage_id"],
        "source_title": r.get("source_title"),
        "cluster_id": r.get("cluster_id"),
        "task_type": r.get("task_type"),
        "hop_count": r.get("hop_count"),
        "planned_hops": r.get("planned_hops"),
        "kg_path": r.get("kg_path"),
        "waypoints": r.get("waypoints") or [],
        "verifier_v": r.get("verifier_v"),
        "difficulty": r.get("difficulty"),
        "proposer_reward": r.get("proposer_reward"),
        "solver_reward_mean": r.get("solver_reward_mean"),
        "run_id": r["run_id"],
        "config_hash": r.get("config_hash"),
        "solver_process": r.get("solver_process"),
    }


# ---- catalog ---------------------------------------------------------------------------


# ---- writing ---------------------------------------------------------------------------


@dataclass
class ExportResult:
    out: Path
    manifest: dict[str, Any]
    counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _git_commit() -> str | None:
    from pipeline.core.config import PROJECT_ROOT

    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def _parse_formats(formats: Iterable[str]) -> list[str]:
    known = variants.names("export format")
    out: list[str] = []
    for f in formats:
        for part in str(f).split(","):
            name = part.strip().lower()
            if not name:
                continue
            if name not in known:
                raise ExportError(f"unknown format {name!r}", f"choose from {', '.join(known)}")
            if name not in out:
                out.append(name)
    if not out:
        raise ExportError("no export format given", f"choose from {', '.join(known)}")
    return out


def export_curriculum(
    catalog: str | Path,
    out: str | Path,
    where: str | None = DEFAULT_WHERE,
    run_ids: Sequence[str] = (),
    formats: Sequence[str] = ("verl",),
    validation_fraction: float = 0.1,
    split_by: str = "passage",
    seed: int = 0,
    data_source: str = DEFAULT_DATA_SOURCE,
    ability: str = DEFAULT_ABILITY,
    overwrite: bool = False,
    argv: Sequence[str] | None = None,
    include_contaminated: bool = False,
    include_shortcuts: bool = False,
    include_ambiguous: bool = False,
    include_undetermined: bool = False,
    limits: SQLConfig | None = None,
    reviewed_only: bool = False,
) -> ExportResult:
    """Select (the accepted records by default), drop contaminated, shortcut, ambiguous and
    undetermined records (unless `include_*`) and those a reviewer rejected (with
    `reviewed_only`, all but those a reviewer accepted), dedupe questions and near-duplicate
    clusters, split, and write an export directory atomically with its manifest and card."""
    out = Path(out).resolve()
    fmts = _parse_formats(formats)
    _check_split_options(split_by, validation_fraction)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ExportError(f"--seed {seed}: not in 0..2**63-1", "e.g. --seed 0")
    check_outside_store(out, catalog)
    check_target(out, overwrite)  # fail before the work, and again before the rename
    started = dt.datetime.now(dt.UTC)

    included = {
        "contaminated": include_contaminated, "shortcuts": include_shortcuts,
        "ambiguous": include_ambiguous, "undetermined": include_undetermined,
    }  # fmt: skip
    default = where == DEFAULT_WHERE
    # The ledger spills beside the export, on its disk, not in a (possibly small) /tmp.
    out.parent.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix=f".{out.name}.ledger-", dir=out.parent) as scratch,
        Ledger(Path(scratch), split_by, limits) as ledger,
    ):
        sel = _select(catalog, where, run_ids, included, reviewed_only, limits, ledger)
        where = sel.where
        split, leaked = ledger.split(validation_fraction, seed)
        if leaked:  # a bug in the grouping, never a property of the data: refuse to write it
            raise ExportError(f"split leaks {len(leaked)} passage(s), e.g. {sorted(leaked)[0]}")
        kept, drop_counts, sizes = ledger.kept_facts(), ledger.drop_counts(), ledger.split_sizes()
        per_run = kept["per_run"]
        empty_validation = validation_fraction > 0 and not sizes["validation"]
        warnings = _warnings(sel, kept, split, empty_validation)
        try:  # reward.py carries the runs' WCR alpha: one value per export
            reward = reward_settings(catalog, [r["run_id"] for r in sel.runs])
        except RewardConfigError as exc:
            raise ExportError(str(exc), exc.hint) from exc

        with atomic_dir(out, check=lambda: check_target(out, overwrite)) as tmp:
            files = _write_formats(catalog, tmp, fmts, sel, ledger, data_source, ability)
            dropped = write_jsonl(tmp / "dropped.jsonl", ledger.dropped())
            files.append(_file_entry(tmp, tmp / "dropped.jsonl", None, None, dropped))
            files.append(_file_entry(tmp, write_reward_file(tmp, reward), None, None, None))
            counts = {
                "selected": sel.selected,
                **drop_counts,
                "exported": sum(per_run.values()),
                **{s: sizes[s] for s in SPLITS},
            }
            manifest = {
                "written_by": WRITTEN_BY,
                "export_version": EXPORT_VERSION,
                "curriculum_schema_version": SCHEMA_VERSION,
                "created_at": started.isoformat(),
                "finished_at": dt.datetime.now(dt.UTC).isoformat(),
                "catalog": str(Path(catalog).resolve()),
                "filter": where if where and where.strip() else None,
                "default_selection": default,
                "run_ids_requested": sorted(set(run_ids)) or None,
                "formats": fmts,
                "data_source": data_source,
                "ability": ability,
                "prompt_template": SEARCH_R1_TEMPLATE,
                "prompt_template_sha256": hashlib.sha256(SEARCH_R1_TEMPLATE.encode()).hexdigest(),
                "reward": reward_manifest(reward),
                "runs": [
                    {**_jsonable(r), "records_exported": per_run.get(r["run_id"], 0)}
                    for r in sel.runs
                ],
                "counts": counts,
                **_drop_sections(drop_counts, included, sel),
                "reviews": _review_section(sel, kept["accepted"], reviewed_only),
                # The selected runs' rows of the catalog's funnel, gate_funnel and
                # verifier_controls views, as at export (the dataset card shows them).
                "run_views": {v: [_jsonable(r) for r in rows] for v, rows in sel.run_views.items()},
                "split": {
                    "by": split_by,
                    "validation_fraction": validation_fraction,
                    "seed": seed,
                    "hash": "sha256(f'{seed}\\0{group_key}')[:8] / 2**64 < fraction -> validation",
                    "groups": split.groups,
                    "forced": split.forced,
                    "shared_passages": 0,
                },
                "files": files,
                "warnings": warnings,
                "code": {
                    "git_commit": _git_commit(),
                    "argv": list(argv) if argv is not None else None,
                    "versions": _versions(),
                },
            }
            # The card is rendered from the manifest (its files aside), then listed in it.
            files.append(_file_entry(tmp, write_card(tmp, manifest), None, None, None))
            (tmp / MANIFEST).write_bytes(
                orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
            )
        return ExportResult(out, manifest, counts, warnings)


def _select(
    catalog: str | Path,
    where: str | None,
    run_ids: Sequence[str],
    included: dict[str, bool],
    reviewed_only: bool,
    limits: SQLConfig | None,
    ledger: Ledger,
) -> Selection:
    """The selection (`where`, or the default's accepted records plus the included gates'),
    with the records it keeps after the gates, the reviews and the dedupe in `ledger` (a
    batch of runs at a time: `drop_rows` per row, then the dedupe over them all); refuses an
    export left with nothing."""
    default = where == DEFAULT_WHERE
    if default:
        where = default_selection(k for k, on in included.items() if on)

    def keep(rows: list[NarrowRow], rejected: list[Dropped]) -> None:
        kept, drops = drop_rows(rows, included, reviewed_only)
        ledger.add(kept, drops, view_drops(rejected))

    sel = select_records(catalog, where, run_ids, rejections=default, limits=limits, on_batch=keep)
    if reviewed_only and not sel.reviewed:
        raise ExportError(
            f"--reviewed-only: the catalog {catalog} was built before reviews existed",
            "rebuild it (run `curriculum nightly`, or the land flow, with this code)",
        )
    if not sel.selected:
        scope = f"runs {', '.join(run_ids)}" if run_ids else "all runs"
        raise ExportError(
            f"filter {sel.where!r} selected no records from {scope} in {catalog}",
            'loosen --where, or look at the funnel: curriculum sql "SELECT * FROM funnel"',
        )
    ledger.dedupe()
    if not ledger.kept_count():
        raise ExportError(
            _nothing_left(sel.selected, sel.where, ledger.drop_counts()),
            "select other records (--where, --include-*, --run-id), or review more",
        )
    return sel


def _check_split_options(split_by: str, validation_fraction: float) -> None:
    if split_by not in SPLIT_BY:
        raise ExportError(f"unknown --split-by {split_by!r}", f"choose from {', '.join(SPLIT_BY)}")
    if not 0.0 <= validation_fraction < 1.0:
        raise ExportError(
            f"--validation-fraction {validation_fraction} is outside [0, 1)",
            "e.g. 0.1 keeps about a tenth of the passage groups for validation",
        )


def _drop_sections(
    counts: dict[str, Any], included: dict[str, bool], sel: Selection
) -> dict[str, Any]:
    """The manifest's account of the dedupe, decontamination and gate drops."""
    return {
        "dedupe": {
            "key": "pipeline.agents.rewards.normalize(question)",
            "winner": "highest verifier_v (unscored last), then smallest record_id",
            "dropped": counts["duplicates_dropped"],
        },
        "decontamination": {
            "contaminated_excluded": not included["contaminated"],
            "dropped": counts["contaminated_dropped"],
            "benchmark_checks": sel.benchmark_checks,
        },
        "llm_gates": {
            "shortcuts_excluded": not included["shortcuts"],
            "ambiguous_excluded": not included["ambiguous"],
            "undetermined_excluded": not included["undetermined"],
            "shortcuts_dropped": counts["shortcuts_dropped"],
            "ambiguous_dropped": counts["ambiguous_dropped"],
            "undetermined_dropped": counts["undetermined_dropped"],
        },
        "near_duplicates": {
            "key": "question_clusters.cluster_id (curriculum quality near-duplicates)",
            "computed": sel.clustered,
            "winner": "highest verifier_v (unscored last), then smallest record_id",
            "dropped": counts["near_duplicates_dropped"],
        },
    }


def _review_section(sel: Selection, exported_accepted: int, reviewed_only: bool) -> dict[str, Any]:
    """The manifest's account of the reviews: the rule applied and the latest
    verdicts in the export's scope (the selected records) and over the whole catalog."""
    scope = Counter(sel.review_scope)
    rule = (
        "Reviews honoured (view review_latest, the latest verdict per record wins): records "
        "whose latest review is reject are left out"
    )
    if reviewed_only:
        rule += "; --reviewed-only: so are those no reviewer accepted"
    if not sel.reviewed:
        rule = "Reviews not read: the catalog was built before reviews existed"
    return {
        "in_catalog": sel.reviewed,
        "rule": rule + ".",
        "reviewed_only": reviewed_only,
        "scope": {
            "accept": scope["accept"],
            "reject": scope["reject"],
            "not_reviewed": sel.selected - scope["accept"] - scope["reject"],
        },
        "overall": sel.reviews_overall,
        "exported_accepted": exported_accepted,
    }


def _nothing_left(selected: int, where: str | None, counts: dict[str, Any]) -> str:
    """Why an export that selected records has none left to write (one line)."""
    why = {k: v for k, v in counts.items() if v and not isinstance(v, dict)}
    said = ", ".join(f"{k} {v}" for k, v in why.items())
    return f"none of the {selected} records selected by {where!r} is left to export ({said})"


def _warnings(
    sel: Selection, kept: dict[str, Any], split: SplitResult, empty_validation: bool
) -> list[str]:
    warnings = []
    if split.forced:
        warnings.append(split.forced)
    if empty_validation:
        warnings.append("validation split is empty: all records share one passage group")
    not_done = [r["run_id"] for r in sel.runs if r["status"] != "completed"]
    if not_done:
        warnings.append(f"run(s) not completed: {', '.join(not_done)}")
    return warnings + _gate_warnings(sel, kept)


def _gate_warnings(sel: Selection, kept: dict[str, Any]) -> list[str]:
    """Exported records the quality gates have not seen: landed after the last check
    (`kept`: Ledger.kept_facts)."""
    out = []
    for check in sel.benchmark_checks:
        late = sorted(set(kept["per_run"]) - set(check["run_ids"]))
        if late:
            out.append(
                f"run(s) {', '.join(late)} landed after benchmark {check['benchmark']} was "
                "checked: rerun `curriculum quality decontaminate`"
            )
    unclustered = kept["unclustered"]
    if sel.clustered and unclustered:
        out.append(
            f"{unclustered} exported record(s) were landed after the near-duplicate check: "
            "rerun `curriculum quality near-duplicates`"
        )
    return out


def _write_formats(
    catalog: str | Path,
    tmp: Path,
    fmts: list[str],
    sel: Selection,
    ledger: Ledger,
    data_source: str,
    ability: str,
) -> list[dict[str, Any]]:
    """Each chosen format's folder, in registry order (pipeline/core/variants.py), written
    from the kept records' full rows read a batch at a time (export_stream)."""
    scratch = tmp / ".scratch"
    scratch.mkdir()
    names = [n for n in variants.names("export format") if n in fmts]
    writers = [
        open_format(variants.load("export format", n), tmp / n, ability, scratch) for n in names
    ]
    with open_catalog(catalog) as con:
        stream_records(
            con, record_columns(sel), sel.views, ledger.kept_per_run(), ledger.placement,
            lambda r, s, i: record_row(r, s, i, data_source), writers, scratch,
        )  # fmt: skip
    files: list[dict[str, Any]] = []
    for name, w in zip(names, writers, strict=True):
        files += [_file_entry(tmp, path, name, s, rows) for path, s, rows in w.close()]
    shutil.rmtree(scratch)
    return files


def _file_entry(
    root: Path, path: Path, fmt: str | None, split: str | None, rows: int | None
) -> dict[str, Any]:
    return {
        "path": str(path.relative_to(root)),
        "format": fmt,
        "split": split,
        "rows": rows,
        "bytes": path.stat().st_size,
        "sha256": sha256_file(path),
    }


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, dt.date) else v for k, v in row.items()}


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("evidence-curriculum", "pyarrow", "duckdb", "datasets"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out


def verify_export(out: str | Path) -> list[str]:
    """Problems with an export directory against its manifest (sha256, sizes); [] when intact."""
    out = Path(out)
    manifest = orjson.loads((out / MANIFEST).read_bytes())
    problems = []
    for f in manifest["files"]:
        path = out / f["path"]
        if not path.exists():
            problems.append(f"{f['path']}: missing")
        elif sha256_file(path) != f["sha256"]:
            problems.append(f"{f['path']}: sha256 differs from the manifest")
    return problems


__all__ = [
    "DEFAULT_WHERE",
    "EXPORT_VERSION",
    "RECORD_SCHEMA",
    "SEARCH_R1_TEMPLATE",
    "SPLITS",
    "SPLIT_BY",
    "VERL_SCHEMA",
    "ExportError",
    "ExportResult",
    "Selection",
    "export_curriculum",
    "records_table",
    "render_prompt",
    "select_records",
    "verify_export",
    "verl_table",
]
