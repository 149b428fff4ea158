"""Tables the store derives from a run's own shards when it compacts the run (issue 28), so
that reading a year of nights does not recompute what one night already settled. Gathered
with the others in schemas/tables.py; the SQL that fills them is `record_facts_of` in
schemas/views.sql (the same macro computes them live for a run not yet compacted)."""

from __future__ import annotations

import pyarrow as pa

from schemas.fields import contract, f


def record_facts(curriculum: pa.Schema) -> pa.Schema:
    """What a record's verdict and the browser's index need that depends on its run alone:
    the curriculum columns they read, the run's V bar, the first stage before the quality
    gates that keeps it out, its first failing generation gate, its question key (Norm of the
    question: the duplicate grouping) and the browser's search text."""
    kept = (
        "record_id", "run_id", "created_at", "cluster_id", "task_type", "hop_count",
        "question_source", "question", "answer", "is_valid", "invalid_reason", "is_verbatim",
        "solver_n", "solver_k", "wcr_coverage_mean", "difficulty", "verifier_v",
        "proposer_reward", "gate_verdicts",
    )  # fmt: skip
    return contract(
        "record_facts",
        "One record's run-local verdict inputs, written once when its run is compacted.",
        [curriculum.field(name) for name in kept]
        + [
            f("v_threshold", pa.float64(), doc="the run's control V bar (verifier_thresholds)"),
            f(
                "before_quality",
                pa.string(),
                doc="invalid reason, no_verbatim_evidence or below_v_threshold (null: none)",
            ),
            f("gate_rejected_by", pa.string(), doc="the first generation gate's rejected_by"),
            f("question_key", pa.string(), doc="Norm(question): the duplicate-question group"),
            f("search_text", pa.string(), doc="lower(question answer evidence): the browser's q"),
        ],
    )
