import pytest

from pipeline.core.config import ConfigError, load_config


def test_profiles_load_and_differ():
    emb = load_config("configs/embedded.yaml")
    prod = load_config("production")
    assert emb.profile == "embedded" and prod.profile == "production"
    assert emb.index.factory == "auto" and emb.index.ivf_threshold == 200_000
    assert prod.embedding.model == "intfloat/e5-base-v2"
    assert prod.embedding.query_prompt == "query: " and prod.embedding.passage_prompt == "passage: "
    assert prod.llm.backend == "vllm" and prod.index.factory.startswith("IVF")
    assert prod.index.nprobe == 64
    assert (prod.verifier.m, prod.rewards.lambda_v, prod.rewards.lambda_b) == (5, 0.5, 0.1)
    assert emb.config_hash() != prod.config_hash()


def test_override_changes_value_and_hash():
    base = load_config()
    over = load_config(None, ["generation.num_sources=7", "verifier.method=both"])
    assert over.generation.num_sources == 7 and over.verifier.method == "both"
    assert over.config_hash() != base.config_hash()
    assert load_config().config_hash() == base.config_hash()  # stable


@pytest.mark.parametrize(
    "override, message",
    [
        ("generation.num_sources", "section.key=value"),
        ("generation.nope=1", "nope"),
        ("verifier.m=0", "verifier"),
        ("llm.backend=gpt", "backend"),
    ],
)
def test_bad_override_is_a_clear_error(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_missing_profile():
    with pytest.raises(ConfigError, match="not found"):
        load_config("configs/does-not-exist.yaml")


def test_relative_paths_resolve_against_project_root():
    cfg = load_config()
    assert cfg.resolve_path(cfg.corpus.path).exists()


# ---- the config hash across code upgrades ---------------------------------------------------


def _upgraded_config_class():
    """PipelineConfig as a later release might have it: one more setting in an existing
    section and one new section, both with defaults."""
    from pydantic import create_model

    from pipeline.core.config import GenerationConfig, PipelineConfig, _Section

    class NewSection(_Section):
        knob: int = 3

    class NewGeneration(GenerationConfig):
        extra_turn_budget: int = 0

    return create_model(
        "UpgradedConfig",
        __base__=PipelineConfig,
        generation=(NewGeneration, NewGeneration()),
        later=(NewSection, NewSection()),
    )


@pytest.mark.parametrize("profile", ["embedded", "production"])
def test_adding_a_field_with_a_default_keeps_the_hash(profile):
    import yaml

    from pipeline.core.config import PipelineConfig

    data = yaml.safe_load(load_config(profile).to_yaml())
    today = PipelineConfig.model_validate(data)
    upgraded = _upgraded_config_class().model_validate(data)
    assert upgraded.generation.extra_turn_budget == 0 and upgraded.later.knob == 3
    assert upgraded.config_hash() == today.config_hash() == load_config(profile).config_hash()
    # A value of the new setting other than its default is a different configuration.
    changed = _upgraded_config_class().model_validate(
        {**data, "generation": {**data["generation"], "extra_turn_budget": 2}}
    )
    assert changed.config_hash() != today.config_hash()


def test_changing_a_value_changes_the_hash_and_restating_a_default_does_not():
    base = load_config()
    assert load_config(None, ["verifier.temperature=0.9"]).config_hash() != base.config_hash()
    # Back to the code's default from the profile's own value: still a change.
    assert load_config(None, ["generation.num_sources=40"]).config_hash() != base.config_hash()
    # Spelling out a default the profile left implicit describes the same run.
    assert load_config(None, ["verifier.temperature=1.0"]).config_hash() == base.config_hash()
    assert load_config(None, ["index.nprobe=64"]).config_hash() == base.config_hash()


def test_hash_is_versioned_and_leaves_out_auditor_and_server_limits():
    import orjson

    from pipeline.core.config import CONFIG_HASH_VERSION

    base = load_config()
    doc = orjson.loads(base.canonical_json())
    assert doc["hash_version"] == CONFIG_HASH_VERSION and "sql" not in doc["values"]
    assert load_config(None, ["sql.timeout_s=5"]).config_hash() == base.config_hash()
    # The servers' request limits and addresses do not change a run's records either.
    for setting in ("llm.serve.max_n=3", "retrieval.max_body_bytes=2048", "retrieval.port=9"):
        assert load_config(None, [setting]).config_hash() == base.config_hash(), setting
    assert load_config(None, ["retrieval.topk=5"]).config_hash() != base.config_hash()
