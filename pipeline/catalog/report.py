"""The run report: one Markdown page plus PNG plots per landed run, from the catalog.

`write_run_report` reads the DuckDB catalog read-only, gathers one run's numbers with SQL
(funnel, invalid reasons, V histogram, cluster / task / hop coverage, solver and WCR figures,
rejects, example records) and writes `<out>/runs/<run_id>/report/`:

    report.md            the page; plots are linked by relative path
    funnel.png           generated -> posed -> valid -> valid + verbatim -> V above threshold
                         -> not contaminated -> gates passed -> accepted
    verifier_v.png       histogram of V = p+ - p- (0.2-wide bins, as the verifier_histogram view)
    clusters.png         records per selector cluster (all K clusters, zeros included)
    task_types.png       records per task type (all configured types, zeros included)
    hops.png             records per hop count (all configured hop counts, zeros included)
    wcr_vs_correct.png   solver accuracy by WCR waypoint-coverage bin
    verifier_controls.png  mean V with real evidence vs the verifier controls, per method

A run without records (or without valid ones) still gets every file; empty plots say "no data".
Every file is written to a temporary name and renamed. No Prefect here: flows/report.py
publishes the result as artifacts.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.catalog.report_data import (
    FUNNEL_LABELS,
    FUNNEL_STAGES,
    RunData,
    collect_run_data,
    coverage_rows,
    hop_keys,
    task_keys,
)
from pipeline.catalog.report_plots import PLOT_NAMES, render_plots
from pipeline.core.io import atomic_write_bytes
from pipeline.store.store import connect_readonly, scope_to_runs

REPORT_DIRNAME = "report"
MARKDOWN_NAME = "report.md"


@dataclass(frozen=True)
class RunReport:
    """Where the report of one run was written, and its headline numbers."""

    run_id: str
    dir: Path
    markdown_path: Path
    plots: dict[str, Path]
    markdown: str
    status: str | None
    funnel: dict[str, int]
    mean_v: float | None
    mean_reward: float | None

    @property
    def paths(self) -> list[Path]:
        return [self.markdown_path, *self.plots.values()]

    def artifact_markdown(self) -> str:
        """The page for a UI that cannot see the report directory: image links become the
        plots' absolute paths."""

        def repl(m: re.Match[str]) -> str:
            return f"*{m.group(1)}*: `{self.dir / m.group(2)}`"

        return re.sub(r"!?\[([^\]]*)\]\(([^)\s/]+\.png)\)", repl, self.markdown)


def _cell(value: Any, limit: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    text = " ".join(str(value).split())
    if limit and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("|", "\\|")


def _signed(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.3f}"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _ts(value: dt.datetime | None) -> str:
    if value is None:
        return "–"
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC)
    return value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    if not rows:
        return ["_none_", ""]
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(v, 80) for v in row) + " |" for row in rows]
    return [*out, ""]


def _group_table(rows: list[dict], key: str) -> list[str]:
    return _table(
        [
            key,
            "generated",
            "valid",
            "valid + verbatim",
            "accepted",
            "mean V",
            "mean R_pro",
            "solver accuracy",
        ],
        [
            (
                r["key"],
                r["generated"],
                r["valid"],
                r["verbatim"],
                r["accepted"],
                r["mean_v"],
                r["mean_reward"],
                r["solver_accuracy"],
            )
            for r in rows
        ],
    )


def _gates_section(d: RunData) -> list[str]:
    """Shortcut / uniqueness counts, the verifier controls and what the gates cost."""
    g = d.gates
    lines = ["## Quality gates", ""]
    if g:
        lines += [
            f"Shortcut check (h >= 2): {g['shortcuts']} of {g['shortcut_checked']} checked "
            f"records answered closed-book or with one search (mean accuracy closed-book "
            f"{_num(g['mean_closed_book_accuracy'])}, one search "
            f"{_num(g['mean_one_search_accuracy'])}). Uniqueness: {g['ambiguous']} of "
            f"{g['uniqueness_checked']} solved records have two or more retrieved-supported "
            "answers.",
            "",
        ]
    lines += _search_lines(d)
    lines += ["### Verifier controls", ""]
    lines += _table(
        ["method", "records", "mean V real", "shuffled", "answer only", "off topic",
         "minus one hop", "AUC real vs shuffled", "AUC real vs off-topic",
         "AUC real vs minus one hop", "answer-only V >= real V"],
        [
            (c["method"], c["records"], c["mean_v_real"], c["mean_v_shuffled"],
             c["mean_v_answer_only"], c["mean_v_off_topic"], c.get("mean_v_minus_hop"),
             c["auc_real_vs_shuffled"], c["auc_real_vs_off_topic"],
             c.get("auc_real_vs_minus_hop"), c["answer_only_ge_real_share"])
            for c in d.controls
        ],
    )  # fmt: skip
    lines += [
        "AUC 0.5: the verifier does not tell real evidence from another record's; a high "
        "answer-only share: it rewards the answer string rather than evidence. Minus one hop: "
        "the multi-hop records' chains with one hop's sentence left out (gates.connected).",
        "",
        f"![Verifier controls]({PLOT_NAMES['verifier_controls']})",
        "",
        "### Generation cost per step",
        "",
        *_table(
            ["step", "seconds", "items", "share of generation"],
            [(c["step"], c["seconds"], c["items"], c["share"]) for c in d.step_costs],
        ),
    ]
    return lines


def _search_lines(d: RunData) -> list[str]:
    """What the accepted records teach a searcher: hops, obfuscated subjects, and what the
    search gates and the question rules kept out."""
    x, f = d.funnel_extra, d.funnel
    accepted = f["accepted"]
    share = lambda n: f" ({n / accepted:.0%})" if accepted else ""  # noqa: E731
    return [
        "### Search curriculum",
        "",
        f"Accepted records with two or more hops: {x['accepted_multi_hop']} of {accepted}"
        f"{share(x['accepted_multi_hop'])}; with an obfuscated subject: "
        f"{x['accepted_obfuscated']}{share(x['accepted_obfuscated'])}. Multi-hop records one "
        f"search answers (gates.one_search): {x['one_search_multi_hop']}; disconnected (a hop "
        f"that does not matter, gates.connected): {x['disconnected']}, undetermined "
        f"{x['connected_undetermined']}; questions naming a bridge entity (bridge_leak): "
        f"{x['bridge_leaks']}; tasks not posed because no passage states one of their hops: "
        f"{x['unstated_hop']}; one-hop records over the single-hop cap: "
        f"{x['single_hop_capped']}. By hops: the table below.",
        "",
    ]


def _cost_lines(d: RunData) -> list[str]:
    """What the run's generation spent, from the runner's account of its committed shards:
    seconds and the engine's own token counts (— where the backend does not report them)."""
    c = d.run_costs
    if not c:
        return []
    per = c.get("accepted") or 0
    lines = [
        "## Cost",
        "",
        f"{c['shards']} committed shard(s): {_num(c['seconds'])} s of generation "
        f"({_num(c['cpu_seconds'])} CPU s in this process), {_cell(c['llm_calls'])} LLM calls, "
        f"{_cell(c['prompt_tokens_computed'])} prompt tokens computed and "
        f"{_cell(c['prompt_tokens_cached'])} served from the prefix cache, "
        f"{_cell(c['generated_tokens'])} generated.",
        "",
        f"Per accepted record ({per}): {_num(c['seconds_per_accepted'])} s, "
        f"{_num(c['generated_tokens_per_accepted'])} generated tokens, "
        f"{_num(c['prompt_tokens_per_accepted'])} prompt tokens.",
        "",
    ]
    lines += _table(
        ["step", "records in", "out", "wall s", "CPU s", "LLM calls", "prompt computed",
         "prompt cached", "generated", "generated per accepted"],
        [
            (s["step"], s["items"], s["records_out"], s["seconds"], s["cpu_seconds"],
             s["llm_calls"], s["prompt_tokens_computed"], s["prompt_tokens_cached"],
             s["generated_tokens"],
             s["generated_tokens"] / per if per and s["generated_tokens"] is not None else None)
            for s in d.step_costs
        ],
    )  # fmt: skip
    return lines


def _run_lines(d: RunData) -> list[str]:
    """The report's title and its table of what the run was."""
    run = d.run or {}
    started, finished = run.get("started_at"), run.get("finished_at")
    duration = ""
    if started and finished:
        duration = f" ({(finished - started).total_seconds() / 60:.1f} min)"
    shards = (
        f"{run['shards_completed']}/{run['shards_planned']}" if run else "–"
    )  # generation shards
    clusters = "–"
    if d.iteration is not None:
        clusters = f"{d.iteration} (K = {d.k if d.k else '?'} clusters)"

    def models(col: str) -> str:
        return ", ".join(f"`{m}`" for m in d.models.get(col, [])) or "–"

    lines = [f"# Run report: {d.run_id}", ""]
    if d.run is None:
        lines += [f"> Run `{d.run_id}` is not in the catalog's `runs` view.", ""]
    lines += _table(
        ["field", "value"],
        [
            ("run id", f"`{d.run_id}`"),
            ("status", run.get("status", "unknown")),
            ("profile", run.get("profile")),
            ("config hash", f"`{run['config_hash']}`" if run else None),
            ("started", _ts(started)),
            ("finished", _ts(finished) + duration),
            ("generation shards", shards),
            ("selector iteration", clusters),
            ("proposer model", models("proposer_model")),
            ("solver model", models("solver_model")),
            ("embedder", models("embedder_model")),
            ("index fingerprint", ", ".join(f"`{x}`" for x in d.index_fingerprints) or "–"),
            ("schema version", run.get("schema_version")),
        ],
    )
    return lines


def _example_lines(d: RunData) -> list[str]:
    """The top valid records by V, each with its question, answer and evidence."""
    lines = [f"## Example valid records (top {len(d.examples)} by V)", ""]
    if not d.examples:
        lines += ["_none: no valid record with verbatim evidence in this run_", ""]
    for i, ex in enumerate(d.examples, 1):
        lines += [
            f"### {i}. V {_signed(ex['verifier_v'])}, R_pro {_num(ex['proposer_reward'])} — "
            f"{ex['hop_count']}-hop {_cell(ex['task_type'])}, source “{_cell(ex['source_title'])}”",
            "",
            f"- **Question:** {_cell(ex['question'], 500)}",
            f"- **Answer:** {_cell(ex['answer'], 200)}",
            f"- **Evidence:** {_cell(ex['evidence'], 800)}",
            f"- record `{ex['record_id']}`",
            "",
        ]
    return lines


def _render(d: RunData, tasks: list[dict], hops: list[dict]) -> str:
    img = PLOT_NAMES
    lines = _run_lines(d)
    gen = d.funnel["generated"]
    lines += ["## Validity funnel", ""]
    lines += _table(
        ["stage", "records", "dropped at this gate", "share of generated"],
        [
            (
                FUNNEL_LABELS[s],
                d.funnel[s],
                d.funnel[FUNNEL_STAGES[k - 1]] - d.funnel[s] if k else "–",
                f"{d.funnel[s] / gen:.0%}" if gen else "–",
            )
            for k, s in enumerate(FUNNEL_STAGES)
        ],
    )
    lines += _threshold_lines(d)
    lines += [
        f"Mean V: {_signed(d.mean_v)} over {d.scored_v} scored records; "
        f"mean proposer reward R_pro: {_num(d.mean_reward)}; "
        f"mean difficulty R_DZ: {_num(d.solver['difficulty'])}.",
        "",
        f"![Validity funnel]({img['funnel']})",
        "",
        "### Invalid reasons",
        "",
        *_table(["reason", "records"], d.invalid_reasons),
        "### Evidence status",
        "",
        *_table(["evidence status", "records"], d.evidence_status),
        *_gates_section(d),
        "## Verifier score V",
        "",
        "V = p₊ − p₋ per scored record, in 0.2-wide bins (the `verifier_histogram` view).",
        "",
        f"![Verifier score V]({img['verifier_v']})",
        "",
        "## Coverage",
        "",
    ]
    drawn = sum(1 for c, _, _ in d.by_cluster if c is not None)
    lines += [
        f"### Clusters: {drawn} of {d.k if d.k else '?'} drawn",
        "",
        f"![Cluster coverage]({img['clusters']})",
        "",
        "### Task types",
        "",
        *_group_table(tasks, "task type"),
        f"![Task-type coverage]({img['task_types']})",
        "",
        "### Hop counts",
        "",
        *_group_table(hops, "hops"),
        f"![Hop-count distribution]({img['hops']})",
        "",
    ]
    s = d.solver
    lines += [
        "## Solver rollouts and WCR",
        "",
        f"{s['rollouts']} rollouts over {s['records']} records; accuracy (EM) "
        f"{_num(s['accuracy'])}, mean R_sol {_num(s['solver_reward'])}, mean waypoint coverage g "
        f"{_num(s['wcr_coverage'])} (correct rollouts {_num(s['wcr_coverage_correct'])}, "
        f"incorrect {_num(s['wcr_coverage_incorrect'])}), mean WCR reward "
        f"{_num(s['wcr_reward'])}, evidence-passage hit rate {_num(s['evidence_hit_rate'])}.",
        "",
        *_table(["coverage g", "rollouts", "correct", "accuracy"], d.wcr_bins),
        f"![WCR coverage vs. correctness]({img['wcr_vs_correct']})",
        "",
        *_process_lines(d),
        f"## Rejects: {sum(n for _, _, n in d.rejects)}",
        "",
        *_table(["stage", "reason", "rows"], d.rejects),
        *_example_lines(d),
        *_cost_lines(d),
    ]
    lines += ["## Files", ""]
    lines += [f"- [{name}]({name})" for name in PLOT_NAMES.values()]
    return "\n".join(lines) + "\n"


def _process_lines(d: RunData) -> list[str]:
    """The solver protocols' process signals: only for runs that have such rollouts."""
    lines: list[str] = []
    if e := d.evalact:
        lines += [
            "## EvalAct: z calibration",
            "",
            f"{e['segments']} Search→Evaluate segments, {e['scored_segments']} with a score z, "
            f"{e['violations']} protocol violations; mean PCAR multiplier "
            f"{_num(e['mean_pcar_multiplier'])}. A calibrated agent scores searches that "
            "retrieved the evidence passage higher than those that missed it:",
            "",
            *_table(
                ["segments", "scored", "mean z"],
                [
                    ("hit the evidence passage", e["scored_hits"], _num(e["mean_z_hit"])),
                    ("missed it", e["scored_misses"], _num(e["mean_z_miss"])),
                ],
            ),
        ]
        if e["violation_reasons"]:
            lines += ["Violations:", "", *_table(["reason", "segments"], e["violation_reasons"])]
    if a := d.arr:
        patterns = [
            (r["entropy_pattern"] or "none", r["dialogues"], _num(r["share"]),
             _num(r["accuracy"]), _num(r["mean_f1"]))
            for r in a["patterns"]
        ]  # fmt: skip
        lines += [
            "## ARR: reasoner–verifier dialogues",
            "",
            f"{a['dialogues']} dialogues; reasoner accuracy {_num(a['reasoner_accuracy'])} "
            f"(F1 {_num(a['reasoner_f1'])}), verifier F1 {_num(a['verifier_f1'])}, answers agree "
            f"{_num(a['answers_agree'])}; mean outcome reward r^r {_num(a['mean_reasoner_reward'])}"
            f", r^v {_num(a['mean_verifier_reward'])}; mean verifier process advantage "
            f"{_num(a['mean_process_advantage'])}; verifier critique entropy when the reasoner "
            f"was right {_num(a['critique_entropy_if_correct'])}, wrong "
            f"{_num(a['critique_entropy_if_wrong'])}.",
            "",
            "Entropy pattern of the reasoner's last three think steps (ARR §3.2; none: fewer "
            "than two steps) vs correctness:",
            "",
            *_table(["pattern", "dialogues", "share", "accuracy", "mean F1"], patterns),
        ]
        if a["violation_reasons"]:
            reasons = a["violation_reasons"]
            lines += ["Violations:", "", *_table(["role", "reason", "turns"], reasons)]
    return lines


def write_run_report(
    catalog_path: str | Path, run_dir: str | Path, run_id: str, examples: int = 3
) -> RunReport:
    """Query the catalog (read-only) for one run and write its report under run_dir/report/."""
    with connect_readonly(catalog_path) as con:
        scope_to_runs(con, [run_id])  # its figures read its own files (and what spans runs)
        d = collect_run_data(con, run_id, examples)
    tasks = coverage_rows(d.by_task, task_keys(d))
    hops = coverage_rows(d.by_hop, hop_keys(d))
    out = Path(run_dir) / REPORT_DIRNAME
    pngs = render_plots(d, tasks, hops)
    plots: dict[str, Path] = {}
    for key, data in pngs.items():
        plots[key] = out / PLOT_NAMES[key]
        atomic_write_bytes(plots[key], data)
    markdown = _render(d, tasks, hops)
    md_path = out / MARKDOWN_NAME
    atomic_write_bytes(md_path, markdown.encode("utf-8"))  # last: the page appears complete
    return RunReport(
        run_id=run_id,
        dir=out,
        markdown_path=md_path,
        plots=plots,
        markdown=markdown,
        status=d.run["status"] if d.run else None,
        funnel=dict(d.funnel),
        mean_v=d.mean_v,
        mean_reward=d.mean_reward,
    )


def known_run_ids(catalog_path: str | Path) -> list[str]:
    """Runs in the catalog's `runs` view, oldest first (start time, then id)."""
    with connect_readonly(catalog_path) as con:
        rows = con.execute("SELECT run_id FROM runs ORDER BY started_at, run_id").fetchall()
    return [r[0] for r in rows]


__all__ = ["RunReport", "known_run_ids", "write_run_report"]


def _threshold_lines(d: RunData) -> list[str]:
    """Where the verifier bar came from and what it dropped; the gates' undetermined counts."""
    t, x, f = d.threshold, d.funnel_extra, d.funnel
    if not t:
        return []
    dropped = f["verbatim"] - f["above_v_threshold"]
    return [
        f"Verifier threshold: V > {_signed(t['v_threshold'])} ({t['method']}), the "
        f"{t['quantile']:.2f} quantile of {t['control_scores']} control scores "
        f"(source: {t['source']}; their mean V {_signed(t['mean_control_v'])}); it dropped "
        f"{dropped} valid verbatim record(s).",
        "",
        f"Undetermined (no answer correct even with the gold evidence; not accepted): "
        f"shortcut gate {x['shortcut_undetermined']}, uniqueness gate "
        f"{x['uniqueness_undetermined']}. Duplicate questions left out: {x['duplicates']}. "
        f"Questions built from the KG path's relation labels (template fallback): "
        f"{x['template_questions']}.",
        "",
    ]
