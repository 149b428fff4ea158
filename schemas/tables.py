"""The data contracts: one Arrow schema per table, used by writers, readers, tests and docs.

Here the run shards' tables (the rollouts and samples behind the curriculum, the gates' rows,
shard steps, rejects) and the store's own (runs, shard manifest); the curriculum in
schemas/curriculum.py, the stage artifacts' in schemas/artifact_tables.py, the quality
checks' in schemas/quality_tables.py, the reviewers' in schemas/review_tables.py, the building
blocks (SCHEMA_VERSION, `contract`, `f`) in schemas/fields.py. `TABLES` gathers them all.
"""

from __future__ import annotations

import pyarrow as pa

from schemas.artifact_tables import (
    CLUSTERS,
    EDGES,
    EMBEDDINGS_MANIFEST,
    ENTITIES,
    PASSAGES,
    RUN_PLAN,
    SELECTOR_STATE,
    SELECTOR_USAGE,
    SUBGRAPHS,
)
from schemas.curriculum import CURRICULUM
from schemas.derived_tables import control_facts, record_facts
from schemas.fields import DOCS, KG_PATH, SCHEMA_VERSION, TS, contract, f
from schemas.quality_tables import (
    BENCHMARK_CHECKS,
    BENCHMARK_MATCHES,
    DECONTAMINATION_RUNS,
    QUALITY_TABLES,
    QUESTION_CLUSTERS,
    QUESTION_DUPLICATES,
    QUESTION_MINHASH,
)
from schemas.review_tables import REVIEW_REASONS, REVIEW_VERDICTS, REVIEWS

# Derived from a run's curriculum shards when the run is compacted (schemas/derived_tables.py).
RECORD_FACTS = record_facts(CURRICULUM)
CONTROL_FACTS = control_facts()

SOLVER_ROLLOUTS = contract(
    "solver_rollouts",
    "One multi-turn solver rollout (search tool on) at a valid question, with its rewards.",
    [
        f("rollout_id", pa.string(), False),
        f("record_id", pa.string(), False),
        f("run_id", pa.string(), False),
        f("sample", pa.int32(), False),
        f("prompt", pa.string(), False),
        f("raw_output", pa.string(), False, "whole transcript: turns and <information> blocks"),
        f("predicted_answer", pa.string()),
        f("think", pa.string(), doc="text of all <think> spans"),
        f("searches", pa.list_(pa.string()), doc="answered search queries, in order"),
        f("retrieved_ids", pa.list_(pa.list_(pa.string())), doc="top-k passage ids per search"),
        f("turns", pa.int32(), False, "assistant turns (at most max_turns)"),
        f("planning_turns", pa.int32(), False, "turns opening with <think>"),
        f("invalid_tool_calls", pa.int32(), False, "empty <search> queries"),
        f(
            "stop_reason",
            pa.string(),
            False,
            "final | no_action | max_turns | unanswered_search",
        ),
        f("forced_final", pa.bool_(), False, "the engine opened <answer> on the last turn"),
        f("correct", pa.bool_(), False, "EM(predicted, answer)"),
        f("answer_f1", pa.float64(), False),
        f("evidence_f1", pa.float64(), False, "F1(solver evidence, proposer evidence)"),
        f("solver_reward", pa.float64(), False, "R_sol = EM + l_E F1(e_hat, e)"),
        f("wcr_coverage", pa.float64(), doc="g: share of KG waypoints named in <think>"),
        f("wcr_reward", pa.float64(), False, "R = c + alpha (1 - c) valid g_tilde"),
        f(
            "answer_in_retrieved",
            pa.bool_(),
            doc="Norm(predicted answer) occurs in a passage this rollout retrieved (null: no "
            "answer or no search); the uniqueness gate counts only such answers",
        ),
        f("evidence_hit_step", pa.int32(), doc="first search retrieving the evidence passage"),
        f("query_redundancy", pa.list_(pa.float64()), doc="max cosine to earlier sub-queries"),
        f("step_rewards", pa.list_(pa.float64()), doc="EVO-RAG R_t per search (+ answer) step"),
        f("protocol", pa.string(), False, "solver.protocol: search_r1 | evalact | arr"),
        f(
            "protocol_violations",
            pa.list_(pa.string()),
            doc="EvalAct: reason per malformed or missing Evaluate; ARR: role:reason per broken "
            "turn (null under search_r1)",
        ),
        f(
            "outcome_reward",
            pa.float64(),
            doc="EvalAct eq. 4: F1 if the protocol was kept, else 0; ARR eq. 5: the reasoner's r^r",
        ),
        f(
            "outcome_advantage",
            pa.float64(),
            doc="EvalAct eq. 5 / ARR §4.2.1: A_i (ARR: the reasoner's A^r) over the n rollouts",
        ),
        f("verifier_output", pa.string(), doc="ARR: the verifier's view of the dialogue"),
        f("verifier_answer", pa.string(), doc="ARR: the verifier's <final_answer>"),
        f("verifier_answer_f1", pa.float64(), doc="ARR: F1(verifier answer, gold)"),
        f("verifier_reward", pa.float64(), doc="ARR eq. 5: the verifier's r^v"),
        f("verifier_advantage", pa.float64(), doc="ARR §4.2.1: A^v over the record's n dialogues"),
        f(
            "entropy_pattern",
            pa.string(),
            doc="ARR §3.2: D | ID | F | DI | I over the reasoner's last three think entropies",
        ),
        f("behavior_impact", pa.float64(), doc="ARR eq. 8: A_impact (null: < 2 steps)"),
        f("created_at", TS, False),
    ],
)

EVALACT_SEGMENTS = contract(
    "evalact_segments",
    "One Search→Evaluate segment of an EvalAct solver rollout, with PCAR's rescaling terms.",
    [
        f("segment_id", pa.string(), False, "<rollout_id>:seg:<k>"),
        f("rollout_id", pa.string(), False, "joins solver_rollouts"),
        f("record_id", pa.string(), False, "joins curriculum"),
        f("run_id", pa.string(), False),
        f("sample", pa.int32(), False),
        f("segment", pa.int32(), False, "k: 0-based position of the search in the rollout"),
        f("query", pa.string(), doc="the search query"),
        f("retrieved_ids", pa.list_(pa.string()), doc="top-k passage ids it returned"),
        f("assessment", pa.string(), doc="Evaluate's free-text assessment c"),
        f("z", pa.float64(), doc="Evaluate's score z in [0, 10]; null on a violation"),
        f("violation", pa.string(), doc="why z is missing: malformed_json, missing_score, ..."),
        f("evidence_hit", pa.bool_(), doc="the search retrieved the record's evidence passage"),
        f("z_tilde", pa.float64(), doc="eq. 6: (z - mean_i) / (std_i + eps) within the rollout"),
        f("pcar_gain", pa.float64(), doc="eq. 7: l_base + (l_max - l_base) z/10"),
        f("pcar_multiplier", pa.float64(), doc="eq. 8: clamp(1 + gain z_tilde, delta, inf)"),
        f("outcome_advantage", pa.float64(), False, "eq. 5: the rollout's A_i"),
        f("calibrated_advantage", pa.float64(), doc="eq. 8: A_i x pcar_multiplier"),
    ],
)

ARR_TURNS = contract(
    "arr_turns",
    "One action of one turn of an ARR reasoner-verifier dialogue, with its entropy and advantages.",
    [
        f("turn_id", pa.string(), False, "<rollout_id>:act:<action_index>"),
        f("rollout_id", pa.string(), False, "joins solver_rollouts"),
        f("record_id", pa.string(), False, "joins curriculum"),
        f("run_id", pa.string(), False),
        f("sample", pa.int32(), False),
        f("action_index", pa.int32(), False, "0-based position of the action in the dialogue"),
        f("turn", pa.int32(), False, "0-based generate turn (the roles alternate)"),
        f("round", pa.int32(), False, "0-based reasoner-verifier round"),
        f("role", pa.string(), False, "reasoner | verifier"),
        f(
            "action",
            pa.string(),
            False,
            "think | search | verify | answer | selected_doc | response | final_answer | none "
            "(a turn without any tagged action: its raw text)",
        ),
        f("text", pa.string(), False),
        f("mean_entropy", pa.float64(), doc="H_a: mean token entropy of the action (nats)"),
        f("entropy_tokens", pa.int32(), False, "generated tokens attributed to the action"),
        f("entropy_exact", pa.bool_(), doc="full-vocabulary entropy; false: top-k lower bound"),
        f("entropy_top_k", pa.int32(), doc="k of the top-k approximation (null when exact)"),
        f("violations", pa.list_(pa.string()), doc="the turn's protocol violations (role:reason)"),
        f("critique", pa.bool_(), False, "a verifier action in A^v_sub (arr.critique_actions)"),
        f("gold_in_documents", pa.bool_(), doc="verifier: gold answer in the step's d_t"),
        f("gold_in_action", pa.bool_(), doc="verifier: gold answer in the action's text"),
        f("clarity", pa.float64(), doc="eq. 7: exp(-H) 1[gold in d_t] (2 1[gold in a] - 1)"),
        f("process_advantage", pa.float64(), doc="eq. 6: F1(y^r) A_clarity A_impact"),
        f("outcome_advantage", pa.float64(), False, "A^r or A^v of the action's role"),
        f("advantage", pa.float64(), False, "eq. 9: A^v + 1[critique] A_proc; reasoner: A^r"),
    ],
)

PROPOSER_ROLLOUTS = contract(
    "proposer_rollouts",
    "The proposer's multi-turn rollout behind each curriculum record (one per record).",
    [
        f("record_id", pa.string(), False),
        f("run_id", pa.string(), False),
        f("prompt", pa.string(), False),
        f("raw_output", pa.string(), False, "whole transcript: turns and <information> blocks"),
        f("think", pa.string()),
        f("searches", pa.list_(pa.string())),
        f("retrieved_ids", pa.list_(pa.list_(pa.string()))),
        f("turns", pa.int32(), False),
        f("planning_turns", pa.int32(), False),
        f("tool_calls", pa.int32(), False, "valid <search> emissions"),
        f("tool_responses", pa.int32(), False, "<information> blocks returned"),
        f("stop_reason", pa.string(), False),
        f("refused_searches", pa.int32(), False, "searches past the h - 1 budget, not run"),
        f("forced_final", pa.bool_(), False, "the engine opened <question> for the model"),
        f("temperature", pa.float64(), False),
        f("seed", pa.int64()),
        f("created_at", TS, False),
    ],
)

VERIFIER_SAMPLES = contract(
    "verifier_samples",
    "Single-turn, search-disabled answers with (+) and without (-) the evidence.",
    [
        f("sample_id", pa.string(), False),
        f("record_id", pa.string(), False),
        f("run_id", pa.string(), False),
        f("condition", pa.string(), False, "with_evidence | without_evidence"),
        f("sample", pa.int32(), False),
        f("method", pa.string(), False, "mc | teacher_forced | teacher_forced_pmi"),
        f("prompt", pa.string(), False),
        f("raw_output", pa.string()),
        f("predicted_answer", pa.string()),
        f("correct", pa.bool_()),
        f("logprob", pa.float64(), doc="teacher-forced log P(answer | prompt)"),
        f("created_at", TS, False),
    ],
)

GATE_ROLLOUTS = contract(
    "gate_rollouts",
    "Gate rollouts: answers with the gold evidence, and the shortcut check's solver "
    "rollouts with search disabled or one search.",
    [
        f("rollout_id", pa.string(), False, "<record_id>:<check>:<sample>"),
        f("record_id", pa.string(), False),
        f("run_id", pa.string(), False),
        f("check", pa.string(), False, "gold_evidence | closed_book | one_search"),
        f("sample", pa.int32(), False),
        f("prompt", pa.string(), False),
        f("raw_output", pa.string(), False),
        f("predicted_answer", pa.string()),
        f("searches", pa.list_(pa.string())),
        f("retrieved_ids", pa.list_(pa.list_(pa.string()))),
        f("turns", pa.int32(), False),
        f("stop_reason", pa.string(), False),
        f("forced_final", pa.bool_(), False),
        f("correct", pa.bool_(), False, "EM(predicted, answer), as the solver scores"),
        f("created_at", TS, False),
    ],
)

CONTROL_SCORES = contract(
    "control_scores",
    "Verifier controls (gates.controls): V of a record with its real evidence and with "
    "substitutes that should not help, per verifier method.",
    [
        f("record_id", pa.string(), False),
        f("run_id", pa.string(), False),
        f("method", pa.string(), False, "mc | teacher_forced | teacher_forced_pmi"),
        f(
            "control",
            pa.string(),
            False,
            "real | shuffled (another record's chain) | answer_only | off_topic (a sentence of "
            "another cluster's passage per hop) | minus_hop (the chain without one hop)",
        ),
        f("evidence", pa.string(), False, "the text given as evidence"),
        f("evidence_record_id", pa.string(), doc="shuffled: the record whose evidence it is"),
        f("evidence_passage_id", pa.string(), doc="off_topic: the passage used"),
        f("evidence_cluster_id", pa.int32(), doc="off_topic: that passage's cluster"),
        f("dropped_hop", pa.int8(), doc="minus_hop: the hop (1-based) left out"),
        f("p_pos", pa.float64(), False),
        f("p_neg", pa.float64(), False),
        f("v", pa.float64(), False, "p_pos - p_neg"),
        f("m", pa.int32(), False, "MC samples per condition (0: teacher forced)"),
        f("created_at", TS, False),
    ],
)

SHARD_STEPS = contract(
    "shard_steps",
    "The runner's account of each step of one shard: records, seconds and the LLM engine's "
    "calls and tokens as the backend reported them (null: the backend does not report it).",
    [
        f("run_id", pa.string(), False),
        f("shard", pa.int32(), False),
        f(
            "step",
            pa.string(),
            False,
            "propose | solve | verify | gold_evidence | shortcut | uniqueness | <custom gate> "
            "| controls | rows",
        ),
        f("seconds", pa.float64(), False, "wall seconds"),
        f("items", pa.int32(), False, "records the step worked on (records in)"),
        f("records_out", pa.int32(), doc="of them, the records it passed on (a gate: passed)"),
        f("cpu_seconds", pa.float64(), doc="CPU seconds of this process (not a server's)"),
        f("llm_calls", pa.int64(), doc="engine calls (the response cache's hits make none)"),
        f("prompt_tokens_computed", pa.int64(), doc="prompt tokens the engine computed"),
        f("prompt_tokens_cached", pa.int64(), doc="prompt tokens served from its prefix cache"),
        f("generated_tokens", pa.int64(), doc="tokens the engine generated"),
        f("created_at", TS, False),
    ],
)

RECORD_COSTS = contract(
    "record_costs",
    "Generated tokens spent on each record, per step: the engine's per-prompt report credited "
    "to the record the prompt was sent for.",
    [
        f("run_id", pa.string(), False),
        f("shard", pa.int32(), False),
        f("record_id", pa.string(), doc="null: tokens no record was named for"),
        f("step", pa.string(), False),
        f("generated_tokens", pa.int64(), False),
        f("created_at", TS, False),
    ],
)

REJECTS = contract(
    "rejects",
    "Input that could not be used, with where it came from and why.",
    [
        f("run_id", pa.string(), False),
        f("stage", pa.string(), False),
        f("source_file", pa.string()),
        f("source_line", pa.int64()),
        f("record_key", pa.string()),
        f("reason", pa.string(), False),
        f("raw", pa.string()),
        f("created_at", TS, False),
    ],
)

RUNS = contract(
    "runs",
    "One pipeline run with its resolved configuration.",
    [
        f("run_id", pa.string(), False),
        f("run_date", pa.date32(), False),
        f("profile", pa.string(), False),
        f("config_hash", pa.string(), False),
        f("config_yaml", pa.string(), False),
        f("started_at", TS, False),
        f("finished_at", TS),
        f("status", pa.string(), False, "running | completed | failed"),
        f("shards_planned", pa.int32(), False),
        f("shards_completed", pa.int32(), False),
        f("schema_version", pa.string(), False),
    ],
)

SHARD_MANIFEST = contract(
    "shard_manifest",
    "A completed shard file: only files listed here are visible in the catalog.",
    [
        f("run_id", pa.string(), False),
        f("table", pa.string(), False),
        f("shard", pa.string(), False, "shard name, e.g. 00003 or corpus"),
        f("path", pa.string(), False, "relative to the output directory"),
        f("rows", pa.int64(), False),
        f("sha256", pa.string(), False),
        f("bytes", pa.int64(), False),
        f("schema_version", pa.string(), False),
        f("committed_at", TS, False),
    ],
)

TABLES: dict[str, pa.Schema] = {
    s.metadata[b"table"].decode(): s
    for s in (
        PASSAGES,
        EMBEDDINGS_MANIFEST,
        ENTITIES,
        EDGES,
        SUBGRAPHS,
        CLUSTERS,
        SELECTOR_STATE,
        CURRICULUM,
        RECORD_FACTS,
        CONTROL_FACTS,
        SOLVER_ROLLOUTS,
        EVALACT_SEGMENTS,
        ARR_TURNS,
        PROPOSER_ROLLOUTS,
        VERIFIER_SAMPLES,
        GATE_ROLLOUTS,
        CONTROL_SCORES,
        SHARD_STEPS,
        RECORD_COSTS,
        REJECTS,
        RUNS,
        SHARD_MANIFEST,
        SELECTOR_USAGE,
        RUN_PLAN,
        BENCHMARK_MATCHES,
        BENCHMARK_CHECKS,
        QUESTION_CLUSTERS,
        QUESTION_DUPLICATES,
        QUESTION_MINHASH,
        DECONTAMINATION_RUNS,
        REVIEWS,
    )
}


def schema_for(table: str) -> pa.Schema:
    try:
        return TABLES[table]
    except KeyError:
        raise KeyError(f"unknown table {table!r}; known: {', '.join(sorted(TABLES))}") from None


def table_doc(table: str) -> str:
    return DOCS[table]


__all__ = [
    "ARR_TURNS",
    "BENCHMARK_CHECKS",
    "BENCHMARK_MATCHES",
    "CLUSTERS",
    "CONTROL_FACTS",
    "CONTROL_SCORES",
    "CURRICULUM",
    "DECONTAMINATION_RUNS",
    "EDGES",
    "EMBEDDINGS_MANIFEST",
    "ENTITIES",
    "EVALACT_SEGMENTS",
    "GATE_ROLLOUTS",
    "KG_PATH",
    "PASSAGES",
    "PROPOSER_ROLLOUTS",
    "QUALITY_TABLES",
    "QUESTION_CLUSTERS",
    "QUESTION_DUPLICATES",
    "QUESTION_MINHASH",
    "RECORD_FACTS",
    "REJECTS",
    "REVIEWS",
    "REVIEW_REASONS",
    "REVIEW_VERDICTS",
    "RUNS",
    "RUN_PLAN",
    "SCHEMA_VERSION",
    "SELECTOR_STATE",
    "SELECTOR_USAGE",
    "SHARD_MANIFEST",
    "SHARD_STEPS",
    "SOLVER_ROLLOUTS",
    "SUBGRAPHS",
    "TABLES",
    "VERIFIER_SAMPLES",
    "schema_for",
    "table_doc",
]
