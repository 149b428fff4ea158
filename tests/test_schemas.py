import json

import duckdb

from schemas.jsonschema import OUT_DIR, render
from schemas.tables import CURRICULUM, SCHEMA_VERSION, TABLES

REQUIRED = [
    "record_id",
    "run_id",
    "source_passage_id",
    "source_title",
    "cluster_id",
    "task_type",
    "hop_count",
    "subgraph_id",
    "question",
    "answer",
    "evidence",
    "evidence_passage_id",
    "evidence_char_start",
    "evidence_char_end",
    "kg_path",
    "waypoints",
    "is_valid",
    "invalid_reason",
    "is_verbatim",
    "format_score",
    "f_think",
    "f_tool",
    "f_answer",
    "solver_n",
    "solver_k",
    "difficulty",
    "verifier_p_pos",
    "verifier_p_neg",
    "verifier_v",
    "verifier_method",
    "verifier_m",
    "brevity",
    "proposer_reward",
    "proposer_model",
    "solver_model",
    "raw_proposer_output",
    "created_at",
]


def test_contract_tables_exist_with_version():
    for name in [
        "passages",
        "embeddings_manifest",
        "entities",
        "edges",
        "subgraphs",
        "clusters",
        "selector_state",
        "curriculum",
        "solver_rollouts",
        "verifier_samples",
        "rejects",
        "runs",
        "shard_manifest",
    ]:
        assert TABLES[name].metadata[b"schema_version"].decode() == SCHEMA_VERSION


def test_curriculum_record_carries_audit_fields():
    assert not set(REQUIRED) - set(CURRICULUM.names)
    kg = CURRICULUM.field("kg_path").type
    assert {f.name for f in kg} == {"nodes", "relations"}


def test_committed_json_schemas_are_current():
    for table in TABLES:
        path = OUT_DIR / f"{table}.schema.json"
        assert path.read_text(encoding="utf-8") == render(table), (
            f"regenerate {path}: python -m schemas.jsonschema"
        )
        doc = json.loads(path.read_text())
        assert doc["x-schema-version"] == SCHEMA_VERSION


def test_views_sql_runs_on_an_empty_catalog(tmp_path):
    from pipeline.store.store import Store

    cat = Store(tmp_path / "out").refresh_catalog()
    con = duckdb.connect(str(cat), read_only=True)
    views = {
        r[0]
        for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    }
    assert {
        "curriculum",
        "funnel",
        "evidence_check",
        "verifier_histogram",
        "passages",
        "runs",
    } <= views
    assert con.execute("SELECT count(*) FROM evidence_check").fetchone() == (0,)
