"""The dataset card of an export (`README.md`): the Hub's YAML header (configs and
splits, so `datasets.load_dataset(<export>)` reads it; a license left for the team; task
categories) and a body a trainer reads before training on it: how to train with its reward,
the runs and config hashes it came from, the selection and what it left out, the funnel with
every gate's drops, the verifier controls, the reviews, the split rule, the fields (their docs
in schemas/exports.py) and the known limitations.

Rendered from the export's manifest alone (`dataset_card`), so the card says nothing the
manifest does not. It names no path of the machine that wrote it: its commands name the
export's files relative to its folder (run them there, or put the folder's path in front),
and its lineage names the catalog by file name, so the card can be published as it is.
"""

from __future__ import annotations

import html
import shlex
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import yaml

from pipeline.catalog.export_reward import REWARD_FILE, TRL_FUNCTION, VERL_FUNCTION
from pipeline.catalog.export_splits import SPLITS
from pipeline.core import variants
from schemas.exports import RECORD_SCHEMA, VERL_SCHEMA

CARD_FILE = "README.md"
TASK_CATEGORIES = ["question-answering", "text-generation"]
LICENSE = "unknown"  # the team sets it before publishing (the corpus's terms decide)
# Below this AUC a run's verifier tells real evidence from a substitute too weakly to trust V.
WEAK_AUC = 0.6

# funnel columns in stage order, with the card's names
FUNNEL = (
    ("generated", "generated"),
    ("posed", "posed"),
    ("valid", "valid"),
    ("verbatim", "verbatim evidence"),
    ("above_v_threshold", "V above threshold"),
    ("not_contaminated", "not contaminated"),
    ("not_shortcut", "no shortcut"),
    ("unique_answer", "unique answer"),
    ("connected", "every hop matters"),
    ("needs_search", "needs more than one search"),
    ("accepted", "accepted"),
)
# what the accepted records teach a searcher (view funnel), with the card's names
SEARCH = (
    ("accepted_multi_hop", "accepted, 2+ hops"),
    ("accepted_obfuscated", "accepted, obfuscated subject"),
    ("one_search_multi_hop", "multi-hop, one search answers"),
    ("disconnected", "disconnected"),
    ("bridge_leaks", "bridge named in the question"),
    ("single_hop_capped", "one-hop over the cap"),
)
GATES = ("gate", "judged", "passed", "failed", "undetermined", "not_applicable", "off", "rejected")
CONTROLS = (
    ("records", "records"),
    ("mean_v_real", "mean V real"),
    ("mean_v_shuffled", "shuffled"),
    ("mean_v_answer_only", "answer only"),
    ("mean_v_off_topic", "off-topic"),
    ("auc_real_vs_shuffled", "AUC real vs shuffled"),
    ("auc_real_vs_off_topic", "AUC real vs off-topic"),
    ("mean_v_minus_hop", "minus one hop"),
    ("auc_real_vs_minus_hop", "AUC real vs minus one hop"),
    ("answer_only_ge_real_share", "answer-only V >= real"),
)


# The export's folder as the card's commands name it: they run inside it.
HERE = PurePosixPath(".")


def dataset_card(manifest: dict[str, Any]) -> str:
    """README.md of the export whose manifest is `manifest` (its `files` unused)."""
    parts = [
        _header(manifest),
        _training(manifest),
        _provenance(manifest),
        _selection(manifest),
        _funnel(manifest),
        _search(manifest),
        _controls(manifest),
        _reviews(manifest),
        _split(manifest),
        _fields(manifest),
        _limitations(manifest),
    ]
    return "\n".join(line for part in parts for line in part)


# ---- header ------------------------------------------------------------------------------


def hub_configs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The header's `configs`: the exported format that names its files for the Hub and
    comes first in the card's order (TRL's: the trainer-neutral records before verl), with
    its non-empty splits. One format only: `datasets` reads every config of a folder with the
    one builder it infers (parquet, json or arrow), so a second format would not load."""
    chosen = []
    for name in manifest["formats"]:
        fmt = variants.load("export format", name)
        if fmt.data_files is not None:
            chosen.append((fmt.trl_rank, name, fmt))
    if not chosen:
        return []
    _, name, fmt = min(chosen, key=lambda x: x[0])
    files = [
        {"split": s, "path": f"{name}/{fmt.data_files(s)}"}
        for s in SPLITS
        if manifest["counts"][s] > 0  # an empty file of some formats does not load
    ]
    return [{"config_name": name, "data_files": files, "default": True}]


def _size_category(n: int) -> str:
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")]
    bounds += [(1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")]
    bounds += [(100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B")]
    return next((name for bound, name in bounds if n < bound), "1B<n<10B")


def _header(m: dict[str, Any]) -> list[str]:
    meta = {
        "pretty_name": "Evidence curriculum export",
        "license": LICENSE,
        "task_categories": TASK_CATEGORIES,
        "tags": ["synthetic", "search-agents", "reinforcement-learning", "evidence"],
        "size_categories": [_size_category(m["counts"]["exported"])],
        "configs": hub_configs(m),
    }
    if not meta["configs"]:
        del meta["configs"]
    text = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)
    text = text.replace(
        f"license: {LICENSE}\n", f"license: {LICENSE}  # for the team to set before publishing\n"
    )
    return ["---", *text.splitlines(), "---", ""]


# ---- training ----------------------------------------------------------------------------


def _training(m: dict[str, Any]) -> list[str]:
    reward, r, formats = HERE / REWARD_FILE, m["reward"], m["formats"]
    lines = [
        "# Evidence curriculum export",
        "",
        "Search-agent training data (question, answer, verbatim evidence, KG waypoints) with the",
        f"reward that matches it: `{REWARD_FILE}` (standard library only; load it by path).",
        "`manifest.json` lists the runs, filter, counts, file checksums and the reward's",
        "settings. The commands below run in this folder; elsewhere, put its path in front of",
        "the file names. The pipeline's documentation (Exports and training) has the details.",
        "",
        f"Reward: R = c + {r['alpha']} * (1 - c) * valid * g~"
        + (f" + {r['format_weight']} * F_fmt" if r["format_weight"] else ""),
        "(c: exact match of the last <answer> with the target or an alias; valid: a non-empty",
        "<answer>; g~: the share of the KG waypoints named in <think>, divided by the best in",
        "the group scored together). A base model without a chat template needs one set on",
        "its tokenizer first (verl and TRL both apply it to the chat `prompt`).",
        "",
    ]
    if "verl" in formats:
        lines += [
            "## verl",
            "",
            "```bash",
            "python -m verl.trainer.main_ppo \\",
            f"  data.train_files={_shell(HERE / 'verl' / 'train.parquet')} \\",
            f"  data.val_files={_shell(HERE / 'verl' / 'validation.parquet')} \\",
            f"  reward.custom_reward_function.path={_shell(reward)} \\",
            f"  reward.custom_reward_function.name={VERL_FUNCTION} ...",
            "```",
            "",
        ]
    # TRL reads the format ranked first that datasets loads (none such: no TRL example).
    chosen = [(variants.load("export format", f), f) for f in formats]
    loadable = [(x, f) for x, f in chosen if x.trl_train is not None]
    if not loadable:
        return lines
    trl, fmt = min(loadable, key=lambda xf: xf[0].trl_rank)
    return [
        *lines,
        "## TRL",
        "",
        "```python",
        "import importlib.util",
        "from datasets import load_dataset, load_from_disk",
        "from trl import GRPOConfig, GRPOTrainer",
        "",
        f"spec = importlib.util.spec_from_file_location('reward', {str(reward)!r})",
        "reward = importlib.util.module_from_spec(spec)",
        "spec.loader.exec_module(reward)",
        f"train = {trl.trl_train(HERE / fmt)}",
        f"trainer = GRPOTrainer(model=..., reward_funcs=[reward.{TRL_FUNCTION}],",
        "                      args=GRPOConfig(...), train_dataset=train)",
        "```",
        "",
    ]


# ---- where it came from and what was taken -------------------------------------------------


def _shell(path: Path | PurePosixPath) -> str:
    """A path as one shell word (a folder named `x; rm -rf ~` stays a name)."""
    return shlex.quote(str(path))


def _text(value: Any) -> str:
    """A stored value (a run's profile, a gate's name, a warning) as Markdown text: no raw
    HTML (`<`, `>`, `&` as entities), on one line."""
    return html.escape(str(value), quote=False).replace("\r", " ").replace("\n", " ")


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    return _text(value).replace("|", "\\|")


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    return [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(_cell(v) for v in row) + " |" for row in rows),
        "",
    ]


def _code(text: str) -> list[str]:
    """`text` fenced (longer than any run of backticks in it)."""
    fence = "```"
    while fence in text:
        fence += "`"
    return [fence + "sql", text, fence, ""]


def _provenance(m: dict[str, Any]) -> list[str]:
    rows = [
        (r["run_id"], r.get("run_date"), r.get("profile"), r["config_hash"], r.get("status"),
         r.get("records_exported"))
        for r in m["runs"]
    ]  # fmt: skip
    head = ("run", "date", "profile", "config hash", "status", "records exported")
    return [
        "## Where it comes from",
        "",
        f"{m['counts']['exported']} records from {len(m['runs'])} run(s) of the catalog "
        f"`{PurePosixPath(m['catalog']).name}`, exported {m['created_at']} "
        f"(code {m['code'].get('git_commit')}).",
        "",
        *_table(head, rows),
    ]


def _selection(m: dict[str, Any]) -> list[str]:
    gates, reviews = m["llm_gates"], m["reviews"]
    kept = [
        name
        for name, out in (
            ("contaminated", m["decontamination"]["contaminated_excluded"]),
            ("shortcuts", gates["shortcuts_excluded"]),
            ("ambiguous", gates["ambiguous_excluded"]),
            ("undetermined", gates["undetermined_excluded"]),
        )
        if not out
    ]
    lines = ["## Selection", ""]
    if m["filter"]:
        lines += ["The records of view `curriculum_verdicts` matching", "", *_code(m["filter"])]
    else:
        lines += ["Every record of view `curriculum_verdicts` (no filter).", ""]
    if m["run_ids_requested"]:
        lines += [f"Runs requested: {', '.join(m['run_ids_requested'])}.", ""]
    lines += [
        "Kept in although a gate rejected them (`--include-*`): "
        + (", ".join(kept) if kept else "none")
        + ".",
        "",
        reviews["rule"],
        "",
        "`selected` counts the records the filter took; the drops below it count those the "
        "export left out, with the default selection also the valid verbatim records the "
        "catalog did not accept (all listed in `dropped.jsonl`).",
        "",
    ]
    counts = [(k, v) for k, v in m["counts"].items() if not isinstance(v, dict)]
    custom = m["counts"].get("custom_gates_dropped") or {}
    counts[-3:-3] = [(f"custom gate {g} dropped", n) for g, n in custom.items()]
    return lines + _table(("count", "records"), counts)


def _funnel(m: dict[str, Any]) -> list[str]:
    funnel, gates = m["run_views"].get("funnel"), m["run_views"].get("gate_funnel")
    lines = ["## Funnel", ""]
    if not funnel:
        return [*lines, "The catalog has no funnel view (built before the gates).", ""]
    lines += [
        "Each stage counts the records of the run that pass it and every stage before it "
        "(view `funnel`).",
        "",
    ]
    lines += _table(
        ("run", *(name for _, name in FUNNEL)),
        [(f["run_id"], *(f[k] for k, _ in FUNNEL)) for f in funnel],
    )
    if gates:
        lines += [
            "Every generation gate, in step order (view `gate_funnel`): the records it judged "
            "and what it said; `rejected` are those it is the first stage to keep out.",
            "",
            *_table(("run", *GATES), [(g["run_id"], *(g[k] for k in GATES)) for g in gates]),
        ]
    return lines


def _search(m: dict[str, Any]) -> list[str]:
    """Hops, obfuscated subjects and the search gates' counts: what a trainer selecting on
    hop_count gets, and what the pipeline kept out."""
    funnel, hops = m["run_views"].get("funnel"), m["run_views"].get("hop_funnel")
    if not funnel or not hops:
        return []
    lines = [
        "## What it teaches a searcher",
        "",
        "`hop_count` is each question's own hops (its evidence chain's length). Per run "
        "(view `funnel`):",
        "",
        *_table(
            ("run", *(name for _, name in SEARCH)),
            [(f["run_id"], *(f.get(k) for k, _ in SEARCH)) for f in funnel],
        ),
        "Records by hops, task kind and subject style (view `hop_funnel`):",
        "",
    ]
    head = ("run", "hops", "kind", "style", "records", "accepted", "one search answers")
    rows = [
        (
            h["run_id"],
            h["hop_count"],
            h["evidence_mode"],
            h["question_style"],
            h["records"],
            h["accepted"],
            h["one_search_answerable"],
        )
        for h in hops
    ]
    return lines + _table(head, rows)


def _controls(m: dict[str, Any]) -> list[str]:
    rows = m["run_views"].get("verifier_controls")
    lines = ["## Verifier controls", ""]
    if not rows:
        return [
            *lines,
            "No verifier controls for these runs (gates.controls off): V was not compared with "
            "its value on shuffled, answer-only or off-topic evidence.",
            "",
        ]
    lines += [
        "Mean V with the real evidence and with each substitute, and the ROC AUC of real vs "
        "substitute V (0.5: V does not tell them apart; view `verifier_controls`).",
        "",
    ]
    head = ("run", "method", *(name for _, name in CONTROLS))
    return lines + _table(
        head, [(c["run_id"], c["method"], *(c.get(k) for k, _ in CONTROLS)) for c in rows]
    )


def _reviews(m: dict[str, Any]) -> list[str]:
    r = m["reviews"]
    lines = ["## Reviews", ""]
    if not r["in_catalog"]:
        return [*lines, "The catalog was built before reviews existed: none were read.", ""]
    scope, overall = r["scope"], r["overall"]
    rows = [
        ("accepted by a reviewer", scope["accept"], overall["accept"]),
        ("rejected by a reviewer", scope["reject"], overall["reject"]),
        ("not reviewed", scope["not_reviewed"], overall["not_reviewed"]),
    ]
    return [
        *lines,
        "Latest verdict per record (view `review_latest`): in this export's scope (the "
        f"{m['counts']['selected']} selected records) and over the whole catalog.",
        "",
        *_table(("latest review", "in scope", "whole catalog"), rows),
        f"Left out by review: {m['counts']['review_rejected']} rejected"
        + (
            f", {m['counts']['not_reviewed']} not accepted by a reviewer"
            if r["reviewed_only"]
            else ""
        )
        + f"; {r['exported_accepted']} of the {m['counts']['exported']} exported records were "
        "accepted by a reviewer.",
        "",
    ]


def _split(m: dict[str, Any]) -> list[str]:
    s = m["split"]
    by = "passage (source or evidence)" if s["by"] == "passage" else "passage and source cluster"
    lines = [
        "## Split",
        "",
        f"Records sharing a {by}, transitively, form one group; a whole group goes to "
        f"validation when `{s['hash']}` (fraction {s['validation_fraction']}, seed "
        f"{s['seed']}), else to train, so no passage is on both sides (checked before writing). "
        f"Groups: {s['groups']['train']} train, {s['groups']['validation']} validation; rows: "
        f"{m['counts']['train']} train, {m['counts']['validation']} validation.",
        "",
    ]
    if s["forced"]:
        lines += [f"Adjusted: {s['forced']}.", ""]
    return lines


# ---- fields and limitations ----------------------------------------------------------------


def _type_name(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return f"list<{_type_name(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct"
    return str(t)


def _docs(schema: pa.Schema) -> list[tuple[str, str, str]]:
    return [
        (f.name, _type_name(f.type), (f.metadata or {}).get(b"doc", b"").decode()) for f in schema
    ]


def _fields(m: dict[str, Any]) -> list[str]:
    lines = ["## Fields", ""]
    records = [f for f in m["formats"] if f != "verl"]
    if records:
        lines += [
            f"Rows of {', '.join(f'`{f}/`' for f in records)} (the trainer-neutral records):",
            "",
            *_table(("field", "type", "description"), _docs(RECORD_SCHEMA)),
        ]
    if "verl" in m["formats"]:
        lines += [
            "Rows of `verl/` (Search-R1 / verl layout; `extra_info` holds the record fields "
            "of the same names):",
            "",
            *_table(("field", "type", "description"), _docs(VERL_SCHEMA)),
        ]
    return [
        *lines,
        "`dropped.jsonl`: one line per record the selection took and the export left out, "
        "with its `reason`, the record kept in its place (`kept_record_id`) and a `detail`.",
        "",
    ]


def _limitations(m: dict[str, Any]) -> list[str]:
    c, r = m["counts"], m["reviews"]
    out = [
        "Questions, answers and KG paths are model output: the gates and the verifier filter "
        "them, they do not prove them right. Evidence spans are checked verbatim against "
        "their passage.",
        f"No license is set (`license: {LICENSE}` above): the team sets one that respects the "
        "corpus's and the knowledge graph's terms before publishing.",
    ]
    if r["in_catalog"] and not r["reviewed_only"]:
        out.append(
            f"{r['exported_accepted']} of the {c['exported']} exported records were read and "
            "accepted by a reviewer; the others passed the automatic gates only."
        )
    if m["default_selection"]:
        out.append(
            "The catalog deduplicates questions before any review: a record a reviewer "
            "rejected does not bring back the duplicates it displaced."
        )
    for ctl in m["run_views"].get("verifier_controls") or []:
        for key, what in (
            ("auc_real_vs_shuffled", "shuffled"),
            ("auc_real_vs_off_topic", "off-topic"),
        ):
            auc = ctl.get(key)
            if auc is not None and auc < WEAK_AUC:
                out.append(
                    f"Run {ctl['run_id']} ({ctl['method']}): V tells real from {what} evidence "
                    f"apart weakly (AUC {auc:.3f}); treat its V as a weak signal."
                )
    checks = m["decontamination"]["benchmark_checks"]
    if checks:
        names = ", ".join(ch["benchmark"] for ch in checks)
        out.append(f"Decontaminated against {names} only.")
    else:
        out.append(
            "Not checked against any benchmark (`curriculum quality decontaminate`): "
            "evaluation questions may be in it."
        )
    if not m["near_duplicates"]["computed"]:
        out.append(
            "Near-duplicate questions were not clustered (`curriculum quality near-duplicates`):"
            " only exact duplicates (normalised text) were removed."
        )
    out += [w for w in m["warnings"] if w != m["split"]["forced"]]  # that one is under Split
    return ["## Known limitations", "", *(f"- {_text(x)}" for x in out), ""]


def write_card(tmp: Path, manifest: dict[str, Any]) -> Path:
    """README.md into the export being built at `tmp`."""
    path = tmp / CARD_FILE
    path.write_text(dataset_card(manifest), encoding="utf-8")
    return path
