import pytest

from pipeline.config import ConfigError, load_config


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
