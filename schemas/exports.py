"""The export tables' contracts: trainer-neutral records (HF dataset, JSONL) and verl /
Search-R1 Parquet rows. Trainers and their reward functions read these columns by name."""

from __future__ import annotations

import pyarrow as pa

from schemas.fields import EVIDENCE_CHAIN, f
from schemas.tables import KG_PATH

# Version of the export layout and columns below (not of the curriculum table contract).
EXPORT_VERSION = "1.3.0"

# Curriculum columns an export needs (the wide prompt / raw-output columns are not fetched).
SOURCE_COLUMNS = (
    "record_id",
    "run_id",
    "source_passage_id",
    "source_title",
    "cluster_id",
    "task_type",
    "hop_count",
    "planned_hops",
    "question",
    "answer",
    "evidence",
    "evidence_chain",
    "evidence_mode",
    "question_style",
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
# decontamination and near-duplicate gates (not written into the export).
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

# A reviewer's latest verdict on the record (curriculum_verdicts, from view review_latest):
# read to honour reviews, not written into the export. Absent from a catalog
# built before reviews existed.
REVIEW_COLUMNS = ("review_verdict", "review_reason", "reviewer", "reviewed_at")

# Per solver rollout of a record solved under solver.protocol=evalact or arr: what a
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
# Each field's doc is what the export's dataset card says of it.
RECORD_SCHEMA = pa.schema(
    [
        f("record_id", pa.string(), False, "the curriculum record's id (joins the catalog)"),
        f("split", pa.string(), False, "train | validation"),
        f("index", pa.int64(), False, "position of the row in its split"),
        f("data_source", pa.string(), False, "verl's data_source (picks the trainer's reward)"),
        f("prompt", MESSAGES, False, "chat messages: one user turn, the Search-R1 instruction"),
        f("question", pa.string(), False, "the question, as the proposer wrote it"),
        f("answer", pa.string(), False, "the target answer, as the evidence writes it"),
        f(
            "golden_answers",
            pa.list_(pa.string()),
            False,
            "every accepted form of the answer, the answer first",
        ),
        f("evidence", pa.string(), doc="the final hop's evidence span, verbatim from its passage"),
        f(
            "evidence_chain",
            EVIDENCE_CHAIN,
            doc="one verbatim sentence per hop in hop order (passage id, offsets, text, the "
            "hop's subject, property and object): what a searcher has to find",
        ),
        f(
            "evidence_mode",
            pa.string(),
            doc="kg_path | passage_span | passage_bridge | passage_comparison",
        ),
        f("question_style", pa.string(), doc="plain | obfuscated (the start entity described)"),
        f("evidence_passage_id", pa.string(), doc="the passage the evidence is copied from"),
        f("evidence_char_start", pa.int32(), doc="0-based offset of the evidence in it"),
        f("evidence_char_end", pa.int32(), doc="end offset of the evidence (exclusive)"),
        f("source_passage_id", pa.string(), False, "the passage the question was posed from"),
        f("source_title", pa.string(), doc="that passage's title"),
        f("cluster_id", pa.int32(), doc="the source passage's corpus cluster (the selector's)"),
        f("task_type", pa.string(), doc="factual | comparison | causal | temporal | aggregation"),
        f("hop_count", pa.int32(), doc="the question's own hops: its evidence chain's length"),
        f("planned_hops", pa.int32(), doc="the hops the selector drew for the slot"),
        f("kg_path", KG_PATH, doc="the KG sub-path (nodes, relations) ending at the answer"),
        f("waypoints", pa.list_(pa.string()), doc="KG path nodes the WCR reward looks for"),
        f("verifier_v", pa.float64(), doc="evidence verifier V = p+ - p- (with vs without it)"),
        f("difficulty", pa.float64(), doc="R_DZ = 1{0<k<n} (n-k)/(n-1) over n solver rollouts"),
        f("proposer_reward", pa.float64(), doc="R_pro = 1/2 F_fmt + R_DZ + 0.5 V + 0.1 B"),
        f("solver_reward_mean", pa.float64(), doc="mean solver reward R_sol over its rollouts"),
        f("run_id", pa.string(), False, "the nightly run that made the record"),
        f("config_hash", pa.string(), doc="hash of that run's resolved configuration"),
        f(
            "solver_process",
            SOLVER_PROCESS,
            doc="EvalAct / ARR process signals per solver rollout; null under search_r1",
        ),
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
    "evidence_mode",
    "question_style",
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
        f("data_source", pa.string(), False, RECORD_SCHEMA.field("data_source").metadata[b"doc"]),
        f("prompt", MESSAGES, False, RECORD_SCHEMA.field("prompt").metadata[b"doc"]),
        f("ability", pa.string(), False, "verl's ability label (--ability)"),
        f(
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
                                ("evidence_chain", pa.list_(pa.string())),
                                ("waypoints", pa.list_(pa.string())),
                            ]
                        ),
                    ),
                ]
            ),
            False,
            "style rule; ground_truth: target (golden_answers), evidence (the final hop's), "
            "evidence_chain (every hop's sentence), waypoints",
        ),
        f(
            "extra_info",
            pa.struct([pa.field(n, RECORD_SCHEMA.field(n).type) for n in EXTRA_INFO]),
            False,
            "the record fields named in EXTRA_INFO, as in the records format",
        ),
    ],
    metadata={"format": "verl", "export_version": EXPORT_VERSION},
)
