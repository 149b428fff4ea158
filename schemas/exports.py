"""The export tables' contracts: trainer-neutral records (HF dataset, JSONL) and verl /
Search-R1 Parquet rows. Trainers and their reward functions read these columns by name."""

from __future__ import annotations

import pyarrow as pa

from schemas.tables import KG_PATH

# Version of the export layout and columns below (not of the curriculum table contract).
EXPORT_VERSION = "1.1.0"

# Curriculum columns an export needs (the wide prompt / raw-output columns are not fetched).
SOURCE_COLUMNS = (
    "record_id",
    "run_id",
    "source_passage_id",
    "source_title",
    "cluster_id",
    "task_type",
    "hop_count",
    "question",
    "answer",
    "evidence",
    "evidence_passage_id",
    "evidence_char_start",
    "evidence_char_end",
    "kg_path",
    "waypoints",
    "verifier_v",
    "difficulty",
    "proposer_reward",
    "solver_reward_mean",
    "config_hash",
)

# Columns of the catalog's curriculum_quality view an export reads besides SOURCE_COLUMNS: the
# decontamination and near-duplicate gates of issue 17 (not written into the export).
QUALITY_COLUMNS = (
    "contaminated",
    "contamination_benchmarks",
    "contamination_methods",
    "duplicate_cluster_id",
    # LLM gates (gates.shortcut / gates.uniqueness), computed in generation
    "shortcut",
    "closed_book_accuracy",
    "one_search_accuracy",
    "unique_answer",
    "answer_candidates",
    # grounded curriculum: gate verdicts, the run's V bar, the one definition of accepted
    "answer_aliases",
    "shortcut_verdict",
    "uniqueness_verdict",
    "gold_n",
    "v_threshold",
    "rejected_by",
    "accepted",
)

# Per solver rollout of a record solved under solver.protocol=evalact or arr (issue 16): what a
# GRPO trainer needs to apply the process signals. EvalAct: the rollout's A_i and, per
# Search→Evaluate segment in order, PCAR's multiplier clamp(1 + λ z̃, δ, ∞) and A_i × it (null
# for a segment whose Evaluate was a violation). ARR: the reasoner's r^r / A^r, the verifier's
# A^v, and per verifier critique action in order its turn, A^v_proc (eq. 6) and Â^v (eq. 9).
SOLVER_PROCESS = pa.list_(
    pa.struct(
        [
            ("sample", pa.int32()),
            ("protocol", pa.string()),
            ("outcome_reward", pa.float64()),
            ("outcome_advantage", pa.float64()),
            ("pcar_multipliers", pa.list_(pa.float64())),
            ("calibrated_advantages", pa.list_(pa.float64())),
            ("verifier_advantage", pa.float64()),
            ("critique_turns", pa.list_(pa.int32())),
            ("process_advantages", pa.list_(pa.float64())),
            ("critique_advantages", pa.list_(pa.float64())),
            ("entropy_pattern", pa.string()),
        ]
    )
)

MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))

# Trainer-neutral rows for the HF dataset and JSONL: a chat `prompt` (TRL's GRPO trainer reads
# it as is and passes the other columns to reward functions) plus every field a reward needs.
RECORD_SCHEMA = pa.schema(
    [
        pa.field("record_id", pa.string(), nullable=False),
        pa.field("split", pa.string(), nullable=False),
        pa.field("index", pa.int64(), nullable=False),
        pa.field("data_source", pa.string(), nullable=False),
        pa.field("prompt", MESSAGES, nullable=False),
        pa.field("question", pa.string(), nullable=False),
        pa.field("answer", pa.string(), nullable=False),
        pa.field("golden_answers", pa.list_(pa.string()), nullable=False),
        pa.field("evidence", pa.string()),
        pa.field("evidence_passage_id", pa.string()),
        pa.field("evidence_char_start", pa.int32()),
        pa.field("evidence_char_end", pa.int32()),
        pa.field("source_passage_id", pa.string(), nullable=False),
        pa.field("source_title", pa.string()),
        pa.field("cluster_id", pa.int32()),
        pa.field("task_type", pa.string()),
        pa.field("hop_count", pa.int32()),
        pa.field("kg_path", KG_PATH),
        pa.field("waypoints", pa.list_(pa.string())),
        pa.field("verifier_v", pa.float64()),
        pa.field("difficulty", pa.float64()),
        pa.field("proposer_reward", pa.float64()),
        pa.field("solver_reward_mean", pa.float64()),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("config_hash", pa.string()),
        pa.field("solver_process", SOLVER_PROCESS),  # null unless evalact / arr rollouts
    ],
    metadata={"format": "records", "export_version": EXPORT_VERSION},
)

# Record fields verl carries in extra_info (types as in RECORD_SCHEMA).
EXTRA_INFO = (
    "split",
    "index",
    "record_id",
    "run_id",
    "question",
    "hop_count",
    "task_type",
    "source_passage_id",
    "evidence_passage_id",
    "evidence_char_start",
    "evidence_char_end",
    "cluster_id",
    "verifier_v",
    "difficulty",
    "proposer_reward",
    "solver_process",
)

VERL_SCHEMA = pa.schema(
    [
        pa.field("data_source", pa.string(), nullable=False),
        pa.field("prompt", MESSAGES, nullable=False),
        pa.field("ability", pa.string(), nullable=False),
        pa.field(
            "reward_model",
            pa.struct(
                [
                    ("style", pa.string()),
                    (
                        "ground_truth",
                        pa.struct(
                            [
                                ("target", pa.list_(pa.string())),
                                ("evidence", pa.string()),
                                ("waypoints", pa.list_(pa.string())),
                            ]
                        ),
                    ),
                ]
            ),
            nullable=False,
        ),
        pa.field(
            "extra_info",
            pa.struct([pa.field(n, RECORD_SCHEMA.field(n).type) for n in EXTRA_INFO]),
            nullable=False,
        ),
    ],
    metadata={"format": "verl", "export_version": EXPORT_VERSION},
)
