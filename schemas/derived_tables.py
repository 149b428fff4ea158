"""Tables the store derives from a run's own shards when it compacts the run, so
that reading a year of nights does not recompute what one night already settled. Gathered
with the others in schemas/tables.py; the SQL that fills them is `record_facts_of` and
`verifier_controls_of` in schemas/views.sql (the same macros compute them live for a run not yet
compacted)."""

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
        "proposer_reward", "gate_verdicts", "single_hop_share",
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


def control_facts() -> pa.Schema:
    """A run's verifier controls per method (the `verifier_controls` view's row): ranking every
    control score of a year of nights on each read cost a second and half a GB."""
    share = "share of records whose answer-only V >= their real V"
    return contract(
        "control_facts",
        "One run's verifier-control summary for one method, written once when the run is "
        "compacted.",
        [
            f("run_id", pa.string(), False),
            f("method", pa.string()),
            f("records", pa.int64(), False, "records with control scores"),
            f("mean_v_real", pa.float64()),
            f("mean_v_shuffled", pa.float64()),
            f("mean_v_answer_only", pa.float64()),
            f("mean_v_off_topic", pa.float64()),
            f("auc_real_vs_shuffled", pa.float64(), doc="ROC AUC, ties counted half"),
            f("auc_real_vs_off_topic", pa.float64(), doc="ROC AUC, ties counted half"),
            f("answer_only_ge_real_share", pa.float64(), doc=share),
            f("mean_v_minus_hop", pa.float64(), doc="multi-hop records: the chain minus one hop"),
            f("auc_real_vs_minus_hop", pa.float64(), doc="ROC AUC, ties counted half"),
        ],
    )
