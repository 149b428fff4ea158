"""Named audits and ad-hoc SQL over the DuckDB catalog, read-only.

An audit is a few SELECTs over the views and macros of `schemas/views.sql`, a description and,
where one makes sense, a pass/fail rule: `evidence` fails when a verbatim record's span is not
the recorded slice of its recorded source passage, `leakage` when a valid record's answer
occurs in its question, `runs` when records carry another configuration than their run.
Audits read what the catalog's refresh kept per run (the evidence tables, the schema
`run_results`: pipeline/store/run_results.py), so a whole-history audit reads a few rows a
run, never a year of files; the views they were kept from still compute live.
Every query goes through `read_only_statements` (DuckDB's parser: SELECT / EXPLAIN only) and
runs on a `connect_audit` connection in a memory-capped worker process (`sql_worker`); an
ad-hoc file is checked whole before any statement runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from pipeline.catalog.bounded_sql import SQLLimitError, Table
from pipeline.catalog.readonly_sql import UnsafeSQLError, read_only_statements
from pipeline.catalog.sql_worker import BoundedSQL
from pipeline.core.config import SQLConfig
from pipeline.core.errors import HintedError, first_line
from pipeline.store.store import HAS_CATALOG_FILES, catalog_runs


class AuditError(HintedError, RuntimeError):
    """An audit that cannot run: unknown name or run, a catalog without the audit views, a
    query that fails. Only an unknown name hints at `--list`; a failing query's message is
    DuckDB's error, which says what to fix."""


@dataclass(frozen=True)
class AuditResult:
    name: str
    description: str
    tables: list[Table]
    passed: bool | None  # None: the audit only reports, it has no pass/fail rule
    message: str

    @property
    def exit_code(self) -> int:
        return 1 if self.passed is False else 0


# A rule looks at the audit's tables and returns a failure message, or None when it passes.
Rule = Callable[[list[Table]], str | None]


@dataclass(frozen=True)
class Audit:
    name: str
    description: str
    queries: list[tuple[str, str]]  # (title, SQL using the named parameter $run_id)
    rule: Rule | None = None
    rule_doc: str = ""
    ok_message: str = field(default="")


def _count(n: int, table: Table) -> str:
    """A count of listed rows: a lower bound when the listing was cut at sql.max_rows."""
    return f"at least {n}" if table.truncated else str(n)


def _evidence_rule(tables: list[Table]) -> str | None:
    bad = tables[0]
    if not bad.rows:
        return None
    ids = ", ".join(bad.column("record_id")[:5]) + (" ..." if len(bad.rows) > 5 else "")
    n = _count(len(bad.rows), bad)
    return f"{n} verbatim record(s) whose span is not its source slice: {ids}"


def _chain_rule(tables: list[Table]) -> str | None:
    bad = tables[0]
    if not bad.rows:
        return None
    ids = ", ".join(dict.fromkeys(bad.column("record_id")[:5]))
    n = _count(len(bad.rows), bad)
    return f"{n} hop span(s) that are not their passage's recorded slice: {ids}"


def _leakage_rule(tables: list[Table]) -> str | None:
    # Valid records come first, so a listing cut at sql.max_rows keeps them.
    valid = [r for r in tables[0].records() if r["is_valid"]]
    if not valid:
        return None
    ids = ", ".join(r["record_id"] for r in valid[:5]) + (" ..." if len(valid) > 5 else "")
    n = _count(len(valid), tables[0])
    return f"{n} valid record(s) whose answer occurs in the question: {ids}"


def _runs_rule(tables: list[Table]) -> str | None:
    bad = [r for r in tables[0].records() if r["foreign_config_records"] or not r["has_run_record"]]
    if not bad:
        return None
    return "runs with records of another configuration or no run record: " + ", ".join(
        str(r["run_id"]) for r in bad
    )


def _quality_rule(tables: list[Table]) -> str | None:
    late = [r for r in tables[0].records() if r["benchmarks_unchecked"]]
    if not late:
        return None
    return "run(s) landed after a benchmark check, not compared with it: " + "; ".join(
        f"{r['run_id']} ({', '.join(r['benchmarks_unchecked'])})" for r in late
    )


_RUN = "($run_id IS NULL OR run_id = $run_id)"

AUDITS: dict[str, Audit] = {
    a.name: a
    for a in [
        Audit(
            "evidence",
            "Re-check every verbatim record: its span must equal substr(passage text, start, "
            "len) of its recorded evidence passage. Lists the records where it does not. As "
            "of the catalog's refresh, against the passages it was given (the evidence_check "
            "view re-checks against the passages now).",
            [
                (
                    "evidence mismatches",
                    f"""
                    SELECT record_id, run_id, evidence_passage_id AS passage_id,
                           evidence_char_start AS char_start, evidence_char_end AS char_end,
                           problem, span, recorded_slice
                    FROM evidence_mismatches WHERE {_RUN} ORDER BY run_id, record_id
                    """,
                ),
                (
                    "evidence checked",
                    f"""
                    SELECT run_id, verbatim AS verbatim_records, matching, mismatches
                    FROM evidence_counts WHERE {_RUN} ORDER BY run_id
                    """,
                ),
            ],
            _evidence_rule,
            "fails when any verbatim record's span differs from its recorded source slice",
            "every verbatim span equals its recorded source slice",
        ),
        Audit(
            "chain",
            "Re-check every hop of every verbatim record's evidence chain: each hop's sentence "
            "must equal substr(passage text, start, len) of its recorded passage, against the "
            "passages now (view chain_check). Lists the hops where it does not.",
            [
                (
                    "chain mismatches",
                    f"""
                    SELECT record_id, run_id, hop, passage_id, char_start, char_end,
                           passage_found, span, recorded_slice
                    FROM chain_check WHERE {_RUN} AND NOT span_matches
                    ORDER BY run_id, record_id, hop
                    """,
                ),
                (
                    "hops checked",
                    f"""
                    SELECT run_id, count(DISTINCT record_id) AS records, count(*) AS hops,
                           count(*) FILTER (WHERE span_matches) AS matching
                    FROM chain_check WHERE {_RUN} GROUP BY run_id ORDER BY run_id
                    """,
                ),
            ],
            _chain_rule,
            "fails when any hop's span differs from its recorded passage slice",
            "every hop's span equals its recorded passage slice",
        ),
        Audit(
            "leakage",
            "Records whose normalised answer occurs in the normalised question (SQL norm() "
            "mirrors pipeline.agents.rewards.normalize).",
            [
                (
                    "answer leaked into the question",
                    f"""
                    SELECT record_id, run_id, is_valid, invalid_reason, question, answer
                    FROM run_results.answer_leakage WHERE {_RUN}
                    ORDER BY is_valid DESC, run_id, record_id
                    """,
                ),
            ],
            _leakage_rule,
            "fails when a record marked valid leaks its answer (invalid ones were caught)",
            "no valid record leaks its answer into the question",
        ),
        Audit(
            "funnel",
            "Generated -> posed -> valid -> valid+verbatim -> V above the controls' threshold -> "
            "not contaminated -> shortcut gate -> uniqueness gate -> accepted per run, with the "
            "rates and the gates' undetermined counts.",
            [
                (
                    "funnel",
                    f"""
                    SELECT run_id, generated, posed, valid, verbatim, above_v_threshold,
                           not_contaminated, not_shortcut, unique_answer, accepted,
                           shortcut_undetermined, uniqueness_undetermined,
                           round(v_threshold, 3) AS v_threshold,
                           round(valid / nullif(generated, 0), 3) AS valid_rate,
                           round(verbatim / nullif(generated, 0), 3) AS verbatim_rate,
                           round(accepted / nullif(generated, 0), 3) AS accepted_rate,
                           round(mean_v, 3) AS mean_v,
                           round(mean_proposer_reward, 3) AS mean_r_pro
                    FROM run_results.funnel WHERE {_RUN} ORDER BY run_id
                    """,
                ),
                (
                    "why records were invalid",
                    f"SELECT run_id, reason, n FROM run_results.invalid_reasons WHERE {_RUN} "
                    "ORDER BY run_id, n DESC, reason",
                ),
            ],
        ),
        Audit(
            "histogram",
            "Verifier score V = p+ - p- in 0.2-wide bins over [-1, 1] per run (bin = lower edge).",
            [
                (
                    "verifier V histogram",
                    f"""
                    SELECT run_id, v_bin, n,
                           bar(n, 0, max(n) OVER (PARTITION BY run_id), 30) AS bar
                    FROM run_results.verifier_histogram WHERE {_RUN} ORDER BY run_id, v_bin
                    """,
                ),
            ],
        ),
        *[
            Audit(
                name,
                f"Per-{key} summary: records, valid / verbatim rates, mean V, mean R_pro, "
                "mean R_DZ, solver accuracy.",
                [
                    (
                        f"by {key}",
                        f"""
                        SELECT run_id, {key}, records, valid, verbatim, accepted,
                               round(valid_rate, 3) AS valid_rate,
                               round(verbatim_rate, 3) AS verbatim_rate,
                               round(mean_v, 3) AS mean_v,
                               round(mean_proposer_reward, 3) AS mean_r_pro,
                               round(mean_difficulty, 3) AS mean_r_dz,
                               round(solver_accuracy, 3) AS solver_accuracy
                        FROM run_results.{view} WHERE {_RUN} ORDER BY run_id, {key} NULLS LAST
                        """,
                    ),
                ],
            )
            for name, key, view in [
                ("clusters", "cluster_id", "cluster_summary"),
                ("tasks", "task_type", "task_summary"),
                ("hops", "hop_count", "hop_summary"),
            ]
        ],
        Audit(
            "wcr",
            "Waypoint coverage g of the solver rollouts against correctness: accuracy per "
            "coverage bin, and per run the coverage of correct vs wrong rollouts.",
            [
                (
                    "accuracy by waypoint coverage",
                    f"""
                    SELECT run_id, coverage_bin, rollouts, correct, round(accuracy, 3) AS accuracy,
                           round(mean_coverage, 3) AS mean_g,
                           round(mean_wcr_reward, 3) AS mean_wcr_reward,
                           round(mean_solver_reward, 3) AS mean_r_sol
                    FROM run_results.wcr_by_coverage WHERE {_RUN}
                    ORDER BY run_id, coverage_bin NULLS FIRST
                    """,
                ),
                (
                    "coverage vs correctness",
                    f"""
                    SELECT run_id, rollouts, with_waypoints,
                           round(coverage_if_correct, 3) AS g_if_correct,
                           round(coverage_if_wrong, 3) AS g_if_wrong,
                           round(coverage_correct_corr, 3) AS corr_g_correct
                    FROM run_results.wcr_correctness WHERE {_RUN} ORDER BY run_id
                    """,
                ),
            ],
        ),
        Audit(
            "runs",
            "Runs with status, timing, shards, config hash and landed records; the YAML is "
            "SELECT config_yaml FROM run_config('<run_id>').",
            [
                (
                    "runs",
                    f"""
                    SELECT run_id, run_date, profile, status,
                           strftime(started_at, '%Y-%m-%d %H:%M:%S') AS started_utc,
                           date_trunc('second', duration) AS duration,
                           shards_planned, shards_completed, config_hash, records,
                           foreign_config_records, has_run_record
                    FROM run_results.run_overview WHERE {_RUN}
                    ORDER BY started_at NULLS LAST, run_id
                    """,
                ),
            ],
            _runs_rule,
            "fails when a run's records carry another config hash or a run has no run record",
            "every record carries its run's configuration",
        ),
        Audit(
            "quality",
            "Quality gates per run: contaminated records, records in near-duplicate "
            "clusters, records not yet clustered, and the benchmark checks that covered the run "
            "(`curriculum quality decontaminate` / `near-duplicates`).",
            [
                (
                    "quality gates",
                    f"""
                    SELECT q.*,
                           (SELECT coalesce(list(b.benchmark ORDER BY b.benchmark), [])
                            FROM benchmark_checks b WHERE list_contains(b.run_ids, q.run_id))
                               AS benchmarks_checked,
                           (SELECT coalesce(list(b.benchmark ORDER BY b.benchmark), [])
                            FROM benchmark_checks b WHERE NOT list_contains(b.run_ids, q.run_id))
                               AS benchmarks_unchecked
                    FROM run_results.run_quality q WHERE {_RUN} ORDER BY q.run_id
                    """,
                ),
                (
                    "shortcut and uniqueness (gates.shortcut, gates.uniqueness)",
                    f"SELECT * FROM run_results.shortcut_summary WHERE {_RUN} ORDER BY run_id",
                ),
                (
                    "verifier controls (gates.controls)",
                    f"SELECT * FROM run_results.verifier_controls WHERE {_RUN} "
                    "ORDER BY run_id, method",
                ),
            ],
            _quality_rule,
            "fails when a run was landed after a benchmark was checked (never compared with it)",
            "every run was checked against every benchmark checked so far",
        ),
        Audit(
            "rejects",
            "Input the run could not use (corpus lines, dump lines, model output), by stage "
            "and reason.",
            [
                (
                    "rejects",
                    f"""
                    SELECT run_id, stage, reason, count(*) AS n,
                           min(source_file || ':' || source_line) AS first_seen
                    FROM rejects WHERE {_RUN} GROUP BY ALL ORDER BY run_id, n DESC
                    """,
                ),
            ],
        ),
    ]
}


def list_audits() -> list[tuple[str, str]]:
    """(name, description) of every named audit, in registry order."""
    return [(a.name, a.description) for a in AUDITS.values()]


def _unknown_run(session: BoundedSQL, run_id: str) -> list[str] | None:
    """None when `run_id` is in the catalog, else the runs it has (the first sql.max_rows)."""
    ((indexed,),) = session.fetch("files", HAS_CATALOG_FILES, where="known runs").rows
    runs = catalog_runs(indexed)
    known = f"SELECT $run_id IN ({runs}) AS known"
    if session.fetch("run", known, {"run_id": run_id}, "known runs").rows[0][0]:
        return None
    return session.fetch("runs", f"{runs} ORDER BY 1", where="known runs").column("run_id")


def run_audit(
    catalog: str | Path, name: str, run_id: str | None = None, limits: SQLConfig | None = None
) -> AuditResult:
    """Run the named audit (optionally for one run) against the catalog, read-only, under
    `limits` (default: the `sql:` section's defaults)."""
    limits = limits or SQLConfig()
    audit = AUDITS.get(name)
    if audit is None:
        raise AuditError(
            f"unknown audit {name!r}; known: {', '.join(AUDITS)}",
            hint="curriculum audit --list shows the audits and what each checks",
        )
    # Registry SQL is ours, but it takes the same gate as an auditor's file.
    checked = [(t, read_only_statements(q, where=f"audit {name}")) for t, q in audit.queries]
    with BoundedSQL(catalog, limits) as session:
        try:
            if run_id is not None and (known := _unknown_run(session, run_id)) is not None:
                raise AuditError(
                    f"no run {run_id!r} in {catalog}; runs: {', '.join(known) or 'none'}"
                )
            if run_id is not None:  # one run's audit reads that run's files
                session.scope([run_id])
            tables = [
                session.fetch(title, stmt, {"run_id": run_id}, f"audit {name}: {title}")
                for title, stmts in checked
                for stmt in stmts
            ]
        except duckdb.CatalogException as exc:
            raise AuditError(
                f"audit {name}: {first_line(exc)} -- the catalog at {catalog} was built "
                "before this audit's views existed; refresh it (rerun the nightly flow with the "
                "same --run-id, which resumes and re-lands)"
            ) from exc
        except duckdb.Error as exc:  # e.g. a shard missing under the catalog: one line, exit 2
            raise AuditError(f"audit {name}: {first_line(exc)}") from exc
    failure = audit.rule(tables) if audit.rule else None
    passed = None if audit.rule is None else failure is None
    if failure:
        message = f"FAIL {name}: {failure}"
    elif passed:
        message = f"PASS {name}: {audit.ok_message}"
    else:
        message = f"{name}: {sum(len(t.rows) for t in tables)} row(s)"
    return AuditResult(name, audit.description, tables, passed, message)


def run_sql_file(
    catalog: str | Path, path: str | Path, limits: SQLConfig | None = None
) -> list[Table]:
    """Run an auditor's SQL file: every statement is checked read-only before any runs, and
    each runs under `limits` (default: the `sql:` section's defaults)."""
    limits = limits or SQLConfig()
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise AuditError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise AuditError(f"{path}: not UTF-8 text (invalid byte at offset {exc.start})") from None
    statements = read_only_statements(text, where=str(path))
    tables = []
    with BoundedSQL(catalog, limits) as session:
        for i, stmt in enumerate(statements, 1):
            title, where = f"{path.name} statement {i}", f"{path}: statement {i}"
            try:
                tables.append(session.fetch(title, stmt, where=where))
            except duckdb.Error as exc:
                raise AuditError(f"{where}: {first_line(exc)}") from exc
    return tables


__all__ = [
    "AUDITS",
    "Audit",
    "AuditError",
    "AuditResult",
    "SQLLimitError",
    "Table",
    "UnsafeSQLError",
    "list_audits",
    "run_audit",
    "run_sql_file",
]
