"""The run-report task: write a landed run's report (pipeline.catalog.report) and publish it
as Prefect artifacts — the Markdown page and a table of the validity funnel."""

from __future__ import annotations

import hashlib
import re

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from pipeline.catalog.report import RunReport, write_run_report
from pipeline.catalog.report_data import FUNNEL_LABELS, FUNNEL_STAGES
from pipeline.core import progress
from pipeline.run_context import RunContext


def artifact_key(run_id: str, kind: str = "report") -> str:
    """A Prefect artifact key (lowercase letters, digits, dashes) for one run.

    Ids that are not already in that alphabet get a short hash of the original id appended, so
    `Run_A` and `run-a` do not overwrite each other's artifacts.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", run_id.lower()).strip("-")
    if slug != run_id:
        slug = f"{slug}-{hashlib.sha1(run_id.encode()).hexdigest()[:6]}".strip("-")
    return f"run-{kind}-{slug}"


def funnel_table(report: RunReport) -> list[dict]:
    total = report.funnel["generated"]
    return [
        {
            "stage": FUNNEL_LABELS[s],
            "records": report.funnel[s],
            "share": f"{report.funnel[s] / total:.0%}" if total else "-",
        }
        for s in FUNNEL_STAGES
    ]


@task(name="report", cache_policy=NO_CACHE)
def report_task(ctx: RunContext) -> RunReport:
    """Write runs/<run_id>/report/ from the refreshed catalog and publish it."""
    run_id = ctx.run_id
    with progress.stage("report") as st:
        report = write_run_report(ctx.store.catalog_path, ctx.run_dir, run_id)
        st.finish("written")
    create_markdown_artifact(
        markdown=report.artifact_markdown(),
        key=artifact_key(run_id, "report"),
        description=f"Run report of {run_id} ({report.markdown_path})",
    )
    create_table_artifact(
        table=funnel_table(report),
        key=artifact_key(run_id, "funnel"),
        description=f"Validity funnel of {run_id}",
    )
    get_run_logger().info("run report: %s", report.markdown_path)
    return report
