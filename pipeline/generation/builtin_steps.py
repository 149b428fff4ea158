"""The built-in steps of a shard, in their order: propose → solve → verify → gold evidence →
shortcut → uniqueness → (custom gates) → controls (then `shards.Rows` writes the rows).

Each is built once per worker from the config and run once per shard over the whole batch
(one generate call per turn); the seeds are the shard's (`ShardState.seed` + a fixed offset
per step), so a redone shard reproduces every record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pipeline.agents.proposer import ProposerSettings, ProposerTask, propose
from pipeline.agents.solver import SolverSettings, SolverTask, solve
from pipeline.agents.targets import Target
from pipeline.agents.verifier import (
    VerifierItem,
    VerifierResult,
    answer_tokens,
    pmi_from_teacher_forced,
    verify_mc,
    verify_teacher_forced,
)
from pipeline.core.variants import load
from pipeline.generation.gate_stats import verdict
from pipeline.generation.gates import (
    SHORTCUT_COLUMNS,
    GateResult,
    VerifierRun,
    control_subjects,
    gold_evidence_check,
    shortcut_check,
    uniqueness,
    verifier_controls,
)
from pipeline.generation.steps import Gate, ShardState, Step, Verdict, register

if TYPE_CHECKING:
    from pipeline.core.config import PipelineConfig, VerifierConfig
    from pipeline.generation.shards import GenerationContext

# Seed offsets from the shard's seed: a control shares the verifier's (it differs only in
# its evidence), the round trip shares the gold-evidence gate's (its call is a cache hit).
SOLVER_SEED, VERIFIER_SEED, GOLD_SEED = 1, 2, 3


@dataclass(frozen=True)
class GoldCheck:
    """The gold-evidence check's sampling, shared by the gate and the proposer's round trip."""

    n: int
    temperature: float
    max_tokens: int
    answer_words: int

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> GoldCheck:
        g = cfg.generation
        return cls(cfg.gates.gold_n, cfg.verifier.temperature, g.answer_max_tokens,
                   g.max_answer_tokens)  # fmt: skip

    def run(
        self,
        ctx: GenerationContext,
        items: Sequence[VerifierItem],
        aliases: Sequence[Sequence[str]],
        seed: int,
    ) -> list[GateResult]:
        return gold_evidence_check(
            ctx.generator, items, aliases, ctx.shots, self.n, self.temperature,
            self.max_tokens, seed + GOLD_SEED, ctx.render, self.answer_words,
        )  # fmt: skip


@register
@dataclass(frozen=True)
class Propose(Step):
    """A question per slot for its target (answer and evidence chosen before any question);
    with `generation.roundtrip`, a question is kept only if the gold-evidence check answers it."""

    settings: ProposerSettings
    gold: GoldCheck | None  # the round trip, or None
    name = "propose"
    reads = ("targets",)
    adds = ("proposed",)

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> Propose:
        gold = GoldCheck.from_config(cfg) if cfg.generation.roundtrip else None
        return cls(ProposerSettings.from_config(cfg), gold)

    def run(self, ctx: GenerationContext, st: ShardState) -> tuple[int, int]:
        tasks = [
            ProposerTask(pid, t, x, it.hop_count, it.task_type, tg, rid)
            for pid, t, x, it, tg, rid in zip(
                st.pids, st.titles, st.texts, st.items, st.targets, st.rids, strict=True
            )
        ]
        gen = ctx.generator
        st.proposed = propose(
            gen, ctx.retriever, tasks, ctx.shots, ctx.kg_shots,
            replace(self.settings, seed=st.seed), ctx.render, gen.count_tokens,
            self._answerable(ctx, st) if self.gold else None,
        )  # fmt: skip
        return len(st), len(st.valid())

    def _answerable(
        self, ctx: GenerationContext, st: ShardState
    ) -> Callable[[Sequence[tuple[Target, str]]], list[bool]]:
        """Round trip: the gold-evidence check on candidate questions, sampled exactly as the
        gate samples it, so the gate's call for the kept question is a response-cache hit."""
        owner = {id(t): rid for t, rid in zip(st.targets, st.rids, strict=True)}
        gold = self.gold
        assert gold is not None

        def answerable(pairs: Sequence[tuple[Target, str]]) -> list[bool]:
            items = [
                VerifierItem(owner.get(id(t), f"candidate:{k}"), q, t.answer, t.chain_evidence)
                for k, (t, q) in enumerate(pairs)
            ]
            res = gold.run(ctx, items, [t.aliases for t, _ in pairs], st.seed)
            return [bool(r.columns["gold_correct"]) for r in res]

        return answerable


@register
@dataclass(frozen=True)
class Solve(Step):
    """The solver's rollouts (difficulty, and the uniqueness gate's answers) on every valid
    question; its verbatim evidence and KG waypoints go along for the process signals."""

    settings: SolverSettings
    name = "solve"
    reads = ("proposed",)
    adds = ("tasks", "solved")

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> Solve:
        return cls(SolverSettings.from_config(cfg))

    def shard_settings(self, st: ShardState) -> SolverSettings:
        return replace(self.settings, seed=st.seed + SOLVER_SEED)

    def run(self, ctx: GenerationContext, st: ShardState) -> tuple[int, int]:
        idx = st.valid()
        for i in idx:
            p, t = st.proposed[i].proposal, st.targets[i]
            st.tasks[i] = SolverTask(
                st.rids[i], p.question, p.answer,
                t.chain_evidence if p.evidence_status == "verbatim" else None,
                p.evidence_passage_id, [[w] for w in t.waypoints], t.aliases,
            )  # fmt: skip
        if idx:
            tasks = [st.tasks[i] for i in idx]
            res = solve(ctx.generator, ctx.retriever, tasks, ctx.shots,
                        self.shard_settings(st), ctx.render)  # fmt: skip
            st.solved = dict(zip(idx, res, strict=True))
        return len(idx), len(st.solved)


# Verifier estimators by name, each giving the results of the methods it serves (one
# teacher-forced score call gives both the probability and the log-space estimator).
Estimator = Callable[["Verify", "GenerationContext", ShardState], dict[str, list[VerifierResult]]]


def _mc(v: Verify, ctx: GenerationContext, st: ShardState) -> dict[str, list[VerifierResult]]:
    c = v.cfg
    mc = verify_mc(ctx.generator, st.ver_items, ctx.shots, c.m, c.temperature, c.top_p,
                   v.answer_max_tokens, st.seed + VERIFIER_SEED, ctx.render)  # fmt: skip
    return {"mc": mc}


def _teacher_forced(
    v: Verify, ctx: GenerationContext, st: ShardState
) -> dict[str, list[VerifierResult]]:
    tf = verify_teacher_forced(ctx.generator, st.ver_items, ctx.shots, ctx.render)
    n_tokens = [answer_tokens(ctx.generator, it.answer) for it in st.ver_items]
    return {"teacher_forced": tf, "teacher_forced_pmi": pmi_from_teacher_forced(tf, n_tokens)}


ESTIMATORS: dict[str, Estimator] = {"mc": _mc, "teacher_forced": _teacher_forced}


@dataclass(frozen=True)
class VerifierMethod:
    """A `verifier.method` (registered in pipeline/core/variants.py): the estimators it runs
    and the method whose V the record keeps (the others' samples are stored beside it)."""

    estimators: tuple[str, ...]
    primary: str


MC = VerifierMethod(("mc",), "mc")
TEACHER_FORCED = VerifierMethod(("teacher_forced",), "teacher_forced")
TEACHER_FORCED_PMI = VerifierMethod(("teacher_forced",), "teacher_forced_pmi")
BOTH = VerifierMethod(("mc", "teacher_forced"), "mc")


@register
@dataclass(frozen=True)
class Verify(Step):
    """V of every solved question whose evidence is verbatim, by the run's verifier method."""

    cfg: VerifierConfig
    method: VerifierMethod
    answer_max_tokens: int
    name = "verify"
    reads = ("proposed", "solved")
    adds = ("ver_idx", "ver_items", "by_method", "verified", "extra_samples")

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> Verify:
        method = load("verifier method", cfg.verifier.method)
        return cls(cfg.verifier, method, cfg.generation.answer_max_tokens)

    def run(self, ctx: GenerationContext, st: ShardState) -> tuple[int, int]:
        st.ver_idx = [i for i in st.solved if st.proposed[i].proposal.evidence_status == "verbatim"]
        ps = [st.proposed[i].proposal for i in st.ver_idx]
        # the whole chain is the evidence a verified answer may rest on
        st.ver_items = [
            VerifierItem(st.rids[i], p.question, p.answer, st.targets[i].chain_evidence or "")
            for i, p in zip(st.ver_idx, ps, strict=True)
        ]
        if not st.ver_items:
            return 0, 0
        estimators, primary = self.method.estimators, self.method.primary
        for name in estimators:
            results = ESTIMATORS[name](self, ctx, st)
            st.by_method.update(results)
            if primary not in results:  # "both": the second estimator's samples are kept too
                st.extra_samples += [row for r in results[name] for row in r.samples]
        st.verified = dict(zip(st.ver_idx, st.by_method[primary], strict=True))
        return len(st.ver_items), len(st.verified)


@register
@dataclass(frozen=True)
class GoldEvidence(Step):
    """Can the solver answer at all when handed the gold evidence chain? The shortcut,
    uniqueness and connected gates judge only records it answers (the others are
    `undetermined`). Sampling decides first; where no sample is right, the verifier's
    teacher-forced scores decide (the chain raises log P(answer)), and `gold_decided_by` says
    which one did: a 270M model rarely writes a three-hop answer, yet scores it."""

    gold: GoldCheck
    name = "gold_evidence"
    reads = ("ver_items", "targets", "by_method")
    adds = ("gates", "gold_correct", "gold_n", "gold_decided_by")

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> GoldEvidence:
        return cls(GoldCheck.from_config(cfg))

    def run(self, ctx: GenerationContext, st: ShardState) -> tuple[int, int]:
        st.gates = {i: GateResult() for i in range(len(st))}
        res = self.gold.run(ctx, st.ver_items, [st.targets[i].aliases for i in st.ver_idx],
                            st.seed)  # fmt: skip
        tf = st.by_method.get("teacher_forced")
        for k, (i, r) in enumerate(zip(st.ver_idx, res, strict=True)):
            c = r.columns
            if c["gold_correct"]:
                c["gold_decided_by"] = "sampling"
            elif tf is not None and tf[k].v > 0:
                c["gold_decided_by"] = "teacher_forced"
            st.gates[i] = r
        return len(res), sum(_answerable(st, i) for i in st.ver_idx)


def _answerable(st: ShardState, i: int) -> bool:
    return st.gates[i].columns["gold_decided_by"] is not None


@register
@dataclass(frozen=True)
class Shortcut(Gate):
    """A multi-hop question a closed-book or one-search solver answers teaches no multi-hop
    search (`gates.shortcut`)."""

    on: bool
    n: int
    threshold: float
    answer_words: int
    solver: Solve
    name = "shortcut"
    reads = ("gates", "tasks", "solved")
    adds = ("verdicts", *SHORTCUT_COLUMNS, "shortcut_verdict")

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> Shortcut:
        g = cfg.gates
        return cls(g.shortcut, g.shortcut_n, g.shortcut_threshold,
                   cfg.generation.max_answer_tokens, Solve.from_config(cfg))  # fmt: skip

    def judge(self, ctx: GenerationContext, st: ShardState) -> dict[int, Verdict]:
        # the question's own hops: a KG sub-path's relations (a passage span is one hop)
        multi = [i for i in st.ver_idx if _answerable(st, i) and st.targets[i].hops >= 2]
        if self.on and multi:
            res = shortcut_check(
                ctx.generator, ctx.retriever, [st.tasks[i] for i in multi],
                [st.targets[i].hops for i in multi], ctx.shots, self.solver.shard_settings(st),
                self.n, self.threshold, ctx.render, self.answer_words,
            )  # fmt: skip
            for i, r in zip(multi, res, strict=True):
                st.gates[i].columns.update({k: r.columns[k] for k in SHORTCUT_COLUMNS})
                st.gates[i].rollouts += r.rollouts
        out = {}
        for i in range(len(st)):
            c = st.gates[i].columns
            v = verdict(self.on, i in st.solved and st.targets[i].hops >= 2, _answerable(st, i),
                        c["shortcut"])  # fmt: skip
            c["shortcut_verdict"] = v
            out[i] = Verdict(v)
        return out


@register
@dataclass(frozen=True)
class Uniqueness(Gate):
    """Solver rollouts that converge on several retrieved-supported answers mean the corpus
    backs more than one answer (`gates.uniqueness`)."""

    on: bool
    min_support: int
    name = "uniqueness"
    reason = "ambiguous"
    reads = ("gates", "solved")
    adds = ("verdicts", "answer_candidates", "unique_answer", "uniqueness_verdict")

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> Uniqueness:
        return cls(cfg.gates.uniqueness, cfg.gates.unique_min_support)

    def judge(self, ctx: GenerationContext, st: ShardState) -> dict[int, Verdict]:
        out = {}
        for i in range(len(st)):
            c = st.gates[i].columns
            if self.on and i in st.solved:
                c.update(uniqueness(st.solved[i], self.min_support))
            ambiguous = None if c["unique_answer"] is None else not c["unique_answer"]
            v = verdict(self.on, i in st.solved, _answerable(st, i), ambiguous)
            c["uniqueness_verdict"] = v
            out[i] = Verdict(v)
        return out


@register
@dataclass(frozen=True)
class Controls(Step):
    """V again with evidence that should not help (another record's chain, the answer alone,
    an off-topic chain): the run's V bar comes from these (`gates.controls`)."""

    share: float
    sampling: VerifierRun  # the verifier's settings; methods and seed are set per shard
    primary: str  # the run's verifier method: it fills the curriculum's v_* columns
    name = "controls"
    reads = ("ver_items", "by_method", "gates")
    adds = ("v_shuffled", "v_answer_only", "v_off_topic")

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> Controls | None:
        if not cfg.gates.controls:
            return None
        v = cfg.verifier
        return cls(cfg.gates.controls_share, VerifierRun(
            (), v.m, v.temperature, v.top_p, cfg.generation.answer_max_tokens, 0),
            load("verifier method", v.method).primary)  # fmt: skip

    def run(self, ctx: GenerationContext, st: ShardState) -> tuple[int, int]:
        if not st.ver_items:
            return 0, 0
        # the record's own method first: it fills the curriculum's v_* columns
        order = (self.primary, "mc", "teacher_forced", "teacher_forced_pmi")
        methods = tuple(dict.fromkeys(m for m in order if m in st.by_method))
        subjects = control_subjects(
            st.ver_items,
            [st.items[i].cluster_id for i in st.ver_idx],
            [{m: st.by_method[m][k] for m in methods} for k in range(len(st.ver_idx))],
            self.share,
            [st.targets[i].hops for i in st.ver_idx],
        )
        vr = replace(self.sampling, methods=methods, seed=st.seed + VERIFIER_SEED)
        controls = verifier_controls(
            ctx.generator, subjects, st.ver_items, ctx.off_topic_picker(st.items), ctx.shots,
            vr, ctx.render, st.now, ctx.run_id,
        )  # fmt: skip
        for i in st.ver_idx:
            c = controls.get(st.rids[i])
            if c is not None:
                st.gates[i].columns.update(
                    {k: val for k, val in c.columns.items() if k.startswith("v_")}
                )
                st.gates[i].controls += c.controls
        return len(subjects), len(subjects)
