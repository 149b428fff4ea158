"""The generate stage: propose, check, solve, verify, reward and land each shard of a plan.

A run's plan (pipeline.selector.run_plan) is drawn once and stored, so a rerun of the same run
id skips every committed shard and regenerates only the rest with the same per-shard seeds.
Record ids hash (run id, plan slot, passage id) and never repeat.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace

from pipeline.agents.chains import kg_targets
from pipeline.agents.composed import two_passage_target
from pipeline.agents.evidence import Span, sentences
from pipeline.agents.prompts import FewShot, KGShot
from pipeline.agents.proposer import ProposerSettings
from pipeline.agents.rewards import brevity, difficulty, format_score, proposer_reward
from pipeline.agents.targets import Target, obfuscate, passage_target
from pipeline.core.config import PipelineConfig, RewardConfig
from pipeline.core.io import utcnow
from pipeline.generation import builtin_steps, search_gates  # noqa: F401  (register the steps)
from pipeline.generation.records import Provenance, Scored, curriculum_row, proposer_row
from pipeline.generation.steps import REGISTRY, ShardState, Step, StepRunner, check_order, register
from pipeline.kg.descriptions import Description
from pipeline.kg.entity_facts import EntityFacts
from pipeline.llm.base import Generator
from pipeline.llm.chat import Render, plain
from pipeline.retrieval.base import RetrieverBackend
from pipeline.selector.run_plan import PlanItem, load_plan
from pipeline.store.store import Store

log = logging.getLogger(__name__)

# The built-in steps in order; custom gates (gates.custom) go in before the last two.
BUILTIN = (
    "propose",
    "solve",
    "verify",
    "gold_evidence",
    "shortcut",
    "uniqueness",
    "connected",
    "one_search",
    "controls",
    "rows",
)


def stable_int(*parts: object) -> int:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def record_id(run_id: str, slot: int, passage_id: str) -> str:
    return hashlib.sha256(f"{run_id}|{slot}|{passage_id}".encode()).hexdigest()[:24]


@dataclass
class GenerationContext:
    cfg: PipelineConfig
    store: Store
    generator: Generator
    retriever: RetrieverBackend
    run_id: str
    run_date: dt.date
    embedder_model: str
    shots: list[FewShot] = field(default_factory=list)
    kg_shots: list[KGShot] = field(default_factory=list)  # worked KG questions
    # KG subgraphs by id (from the kg stage), offered to the proposer when linked.
    subgraphs: dict[str, dict] = field(default_factory=dict)
    # The plan's passage entities' facts (two-passage tasks) and descriptions of entities that
    # the graph makes unique (obfuscated subjects), by qid.
    facts: EntityFacts | None = None
    descriptions: dict[str, list[Description]] = field(default_factory=dict)
    # First prompt of every call -> what the model sees (plain text or its chat template).
    render: Render = plain
    # cluster id -> passage rows of the run's plan, for the off-topic verifier control; None:
    # read from the run's stored plan on first use (the shard's own items if there is none).
    cluster_rows: dict[int, list[int]] | None = None
    # The shard's steps, built from `cfg` on the first shard (once per worker).
    steps: list[Step] | None = None

    def off_topic_picker(
        self, items: Sequence[PlanItem]
    ) -> Callable[[str, int, int], tuple[str, str, int] | None]:
        """(record id, cluster, hops) -> an off-topic chain: the first sentence of each of
        `hops` passages of other clusters of the run's plan, from a start chosen by a hash of
        the record id (subjects the record's own cluster does not cover), with the first
        passage's id and cluster."""
        if self.cluster_rows is None:
            plan = load_plan(self.store, self.run_id)
            self.cluster_rows = rows_by_cluster(plan.items if plan else items)
        flat = sorted((c, row) for c, rows in self.cluster_rows.items() for row in rows)

        def pick(record_id: str, cluster: int, hops: int = 1) -> tuple[str, str, int] | None:
            start = stable_int(record_id, "off_topic") % len(flat) if flat else 0
            far = [flat[(start + k) % len(flat)] for k in range(len(flat))]
            far = [(c, row) for c, row in far if c != cluster][:hops]
            if not far:
                return None  # one cluster only: no off-topic control
            found = self.retriever.passages.get([row for _, row in far])
            text = " ".join(next(iter(sentences(x)), Span(x, 0, len(x))).text for _, _, x in found)
            return text, found[0][0], far[0][0]

        return pick


@dataclass
class ShardOutput:
    """One shard's rows, one field per sharded table (the field name is the table name), so
    a step that adds a table adds a field here and the shard is written and committed whole."""

    curriculum: list[dict]
    proposer_rollouts: list[dict]
    solver_rollouts: list[dict]
    verifier_samples: list[dict]
    evalact_segments: list[dict] = field(default_factory=list)  # solver.protocol=evalact
    arr_turns: list[dict] = field(default_factory=list)  # solver.protocol=arr
    gate_rollouts: list[dict] = field(default_factory=list)  # gates.shortcut
    control_scores: list[dict] = field(default_factory=list)  # gates.controls
    shard_steps: list[dict] = field(default_factory=list)  # the runner's account per step
    record_costs: list[dict] = field(default_factory=list)  # generated tokens per record

    def tables(self) -> dict[str, list[dict]]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# The tables the Rows step fills: ShardOutput's fields but the runner's own accounting.
RUNNER_TABLES = ("shard_steps", "record_costs")
SHARD_TABLES = tuple(f.name for f in fields(ShardOutput) if f.name not in RUNNER_TABLES)


def build_targets(
    ctx: GenerationContext,
    items: Sequence[PlanItem],
    graphs: Sequence[dict | None],
    passages: Sequence[tuple[str, str, str]],
    rids: Sequence[str],
) -> list[Target]:
    """Each slot's answer and evidence chain before any question: the KG sub-path's end
    entity with a stated sentence per hop where a subgraph is linked (one search batch for the
    shard); else, for a slot drawn with two or more hops, a bridge or a comparison of two
    passages where the graph allows; else a span of the source passage. Then the share of
    slots whose start entity the question describes instead of naming."""
    kg_idx = [i for i, sg in enumerate(graphs) if sg is not None]
    aliases = {q: a for i in kg_idx for q, a in (graphs[i].get("aliases") or {}).items()}
    k = ctx.cfg.generation.evidence_topk
    items_kg = [(graphs[i], items[i].hop_count, passages[i]) for i in kg_idx]
    by_slot: dict[int, Target] = dict(
        zip(kg_idx, kg_targets(ctx.retriever, items_kg, aliases, k), strict=True)
    )
    by_slot.update(composed_targets(ctx, items, passages, rids, set(kg_idx)))
    seen: set[tuple[str | None, str | None, str | None]] = set()
    out = []
    for i, it in enumerate(items):
        t = by_slot.get(i) or passage_target(
            passages[i], it.task_type, stable_int(rids[i], "answer")
        )
        t = described(ctx, t, rids[i])
        if t.posed and _key(t) in seen and graphs[i] is not None:
            # one subgraph linked to several slots: another length of its path, if one is new
            hops = [h for h in (it.hop_count - 1, it.hop_count + 1, 1, 2, 3, 4) if 1 <= h <= 4]
            others = kg_targets(
                ctx.retriever, [(graphs[i], h, passages[i]) for h in hops], aliases, k
            )
            t = next((o for o in others if o.posed and _key(o) not in seen), t)
            t = described(ctx, t, rids[i])
        if t.posed and _key(t) in seen:  # the same question again: ask it once
            t = replace(t, reason="duplicate_target")
        seen.add(_key(t))
        out.append(t)
    return out


def _key(t: Target) -> tuple[str | None, str | None, str | None]:
    return (t.facts or t.answer, t.passage_id, t.evidence)


def composed_targets(
    ctx: GenerationContext,
    items: Sequence[PlanItem],
    passages: Sequence[tuple[str, str, str]],
    rids: Sequence[str],
    taken: set[int],
) -> dict[int, Target]:
    """Bridge or comparison targets for the passage slots drawn with two or more hops (a
    comparison first for the comparison task type, a bridge first otherwise), reading the
    articles they may draw on in one lookup."""
    facts = ctx.facts
    if facts is None or not ctx.cfg.generation.two_passage:
        return {}
    slots = [
        (i, e)
        for i, it in enumerate(items)
        if i not in taken and it.hop_count >= 2 and (e := facts.about(passages[i][0])) is not None
    ]
    wanted: set[str] = set()
    for _, e in slots:
        wanted.update(e.passage_ids)
        for f in e.facts:
            wanted.update(f.passage_ids)
            for q in facts.partners.get((e.qid, f.pid), []):
                wanted.update(facts.entities[q].passage_ids if q in facts.entities else ())
    texts = ctx.retriever.passages.by_ids(sorted(wanted))
    out = {}
    for i, e in slots:
        pick = stable_int(rids[i], "composed")
        t = two_passage_target(passages[i], e, facts, texts, items[i].task_type, pick)
        if t is not None:
            out[i] = t
    return out


def described(ctx: GenerationContext, t: Target, rid: str) -> Target:
    """The target with its start entity described instead of named, for the configured share
    of slots (by record-id hash) whose start entity the graph can single out."""
    share = ctx.cfg.generation.obfuscation_share
    if not t.posed or t.path is None or t.kind not in ("kg", "bridge") or share <= 0:
        return t
    if stable_int(rid, "style") % 10_000 >= share * 10_000:
        return t
    start = t.path["nodes"][0]
    texts = [d.text for d in ctx.descriptions.get(start["id"], [])]
    return obfuscate(t, start.get("label") or start["id"], texts) if texts else t


def build_steps(cfg: PipelineConfig) -> list[Step]:
    """The shard's steps for this config, in order (built once per worker)."""
    names = [*BUILTIN[:-2], *cfg.gates.custom, *BUILTIN[-2:]]
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise ValueError(
            f"gates.custom names {', '.join(map(repr, unknown))}, which no registered step "
            f"has (registered: {', '.join(REGISTRY)})"
        )
    steps = [s for n in names if (s := REGISTRY[n].from_config(cfg)) is not None]
    check_order(steps)
    return steps


def process_shard(ctx: GenerationContext, shard: int, items: Sequence[PlanItem]) -> ShardOutput:
    """Everything for one shard of the plan: its state, then each step over the whole batch."""
    if ctx.steps is None:
        ctx.steps = build_steps(ctx.cfg)
    rows = [it.passage_row for it in items]
    pids, titles, texts = map(list, zip(*ctx.retriever.passages.get(rows), strict=True))
    if pids != [it.passage_id for it in items]:
        raise RuntimeError("the plan's passage ids do not match the index; was it rebuilt?")
    rids = [record_id(ctx.run_id, it.slot, it.passage_id) for it in items]
    graphs = [ctx.subgraphs.get(it.subgraph_id) if it.subgraph_id else None for it in items]
    targets = build_targets(ctx, items, graphs, list(zip(pids, titles, texts, strict=True)), rids)
    st = ShardState(
        shard, list(items), stable_int(ctx.cfg.seed, ctx.run_id, shard), rids, pids, titles,
        texts, graphs, targets, utcnow(),
    )  # fmt: skip
    StepRunner(ctx.steps, ctx.run_id).run(ctx, st)
    return ShardOutput(
        **st.tables,
        shard_steps=st.step_rows,
        record_costs=[
            {"run_id": ctx.run_id, "shard": shard, "record_id": rec or None, "step": step,
             "generated_tokens": n, "created_at": st.now}
            for (rec, step), n in sorted(st.record_tokens.items())
        ],
    )  # fmt: skip


@register
@dataclass(frozen=True)
class Rows(Step):
    """The shard's rows: rewards from what the steps measured, one row per record in every
    table it touched (the curriculum row carries each gate's columns and verdicts)."""

    rewards: RewardConfig
    v_quantile: float
    single_hop_share: float
    proposer: ProposerSettings  # what proposer_rollouts records of it (the seed is the shard's)
    config_hash: str
    name = "rows"
    reads = ("proposed", "gates")
    adds = ("tables",)

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> Rows:
        return cls(
            cfg.rewards,
            cfg.gates.v_quantile,
            cfg.gates.single_hop_share,
            ProposerSettings.from_config(cfg),
            cfg.config_hash(),
        )

    def run(self, ctx: GenerationContext, st: ShardState) -> tuple[int, int]:
        r, gen, run_id, now = self.rewards, ctx.generator, ctx.run_id, st.now
        provenance = Provenance(
            run_id=run_id,
            shard=st.shard,
            created_at=now,
            model=gen.model_id,
            embedder_model=ctx.embedder_model,
            index_fingerprint=ctx.retriever.fingerprint,
            config_hash=self.config_hash,
        )
        pro_settings = replace(self.proposer, seed=st.seed)
        t: dict[str, list[dict]] = {name: [] for name in SHARD_TABLES}
        for i, res in enumerate(st.proposed):
            p, roll = res.proposal, res.rollout
            # Σ for F_ans: the source document and every tool response the proposer received.
            fmt = format_score(
                p.question, p.answer, st.texts[i] + "\n" + roll.transcript,
                st.items[i].hop_count, roll.planning_turns, roll.turns, roll.valid_tool_calls,
                roll.tool_responses,
            )  # fmt: skip
            sol, ver = st.solved.get(i), st.verified.get(i)
            chain = st.targets[i].chain_evidence  # B(e) counts the whole chain
            ev_tokens = gen.count_tokens(chain) if p.evidence_status == "verbatim" else None
            b = brevity(ev_tokens, r.l_max) if ev_tokens is not None else None
            r_dz = difficulty(sol.k, sol.n) if sol else None
            # Protocol failures (invalid q/a or evidence not verbatim) earn ½F_fmt only.
            complete = res.valid and ver is not None and r_dz is not None and b is not None
            reward = proposer_reward(fmt.total, complete, r_dz or 0.0, ver.v if ver else 0.0,
                                     b or 0.0, r.lambda_v, r.lambda_b)  # fmt: skip
            scored = Scored(
                st.items[i], st.graphs[i], st.targets[i], st.rids[i], st.titles[i], res, fmt,
                sol, ver, ev_tokens, b, r_dz, reward, self.v_quantile, self.single_hop_share,
            )  # fmt: skip
            columns = {**st.gates[i].columns, "gate_verdicts": st.verdicts.get(i, [])}
            t["curriculum"].append(curriculum_row(scored, provenance, columns))
            t["proposer_rollouts"].append(proposer_row(scored, pro_settings, run_id, now))
            if sol:
                t["solver_rollouts"] += [{**x, "run_id": run_id, "created_at": now}
                                         for x in sol.rollouts]  # fmt: skip
                t["evalact_segments"] += [{**x, "run_id": run_id} for x in sol.segments]
                t["arr_turns"] += [{**x, "run_id": run_id} for x in sol.turns]
            if ver:
                t["verifier_samples"] += [{**x, "run_id": run_id, "created_at": now}
                                          for x in ver.samples]  # fmt: skip
        t["verifier_samples"] += [{**x, "run_id": run_id, "created_at": now}
                                  for x in st.extra_samples]  # fmt: skip
        g = st.gates.values()
        t["gate_rollouts"] = [{**x, "run_id": run_id, "created_at": now}
                              for res in g for x in res.rollouts]  # fmt: skip
        t["control_scores"] = [x for res in g for x in res.controls]
        st.tables = t
        return len(st), len(st)


def rows_by_cluster(items: Sequence[PlanItem]) -> dict[int, list[int]]:
    """The plan's passage rows by cluster (the off-topic control draws from other clusters)."""
    out: dict[int, list[int]] = {}
    for it in items:
        out.setdefault(it.cluster_id, [])
        if it.passage_row not in out[it.cluster_id]:
            out[it.cluster_id].append(it.passage_row)
    return out
