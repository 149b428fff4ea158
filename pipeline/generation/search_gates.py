"""Gates that a search curriculum needs beyond the paper's: every hop must matter, and one
search must not be enough.

`connected` (MuSiQue's connected reasoning): the answer is scored teacher-forced with the
evidence chain minus each hop in turn; a multi-hop record whose answer is as likely without
some hop's sentence, which the other sentences also state, is `disconnected`
(`gate_stats.connectedness` says which judge decided). Its scores are also the `minus_hop`
verifier controls.
`one_search` (InfoSeek): the run's own retriever, given the question alone; a multi-hop record
whose answer is in the top k is `one_search`. Both run once per shard over the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pipeline.agents.targets import chain_text, entity_forms, find_form
from pipeline.agents.verifier import (
    VerifierItem,
    VerifierResult,
    answer_tokens,
    pmi_from_teacher_forced,
    verify_teacher_forced,
)
from pipeline.core.variants import load
from pipeline.generation.builtin_steps import _answerable
from pipeline.generation.gate_stats import connectedness, leaks_in_top_k, redundant_hops, verdict
from pipeline.generation.gates import control_row
from pipeline.generation.steps import Gate, ShardState, Verdict, register

if TYPE_CHECKING:
    from pipeline.core.config import PipelineConfig
    from pipeline.generation.shards import GenerationContext


def _logp(res: VerifierResult, condition: str = "with_evidence") -> float:
    return next(r["logprob"] for r in res.samples if r["condition"] == condition)


@register
@dataclass(frozen=True)
class Connected(Gate):
    """Every hop must matter (`gates.connected`): decided by teacher-forced scores, which a
    270M model gives where its samples cannot tell."""

    on: bool
    primary: str  # the run's verifier method: the minus_hop controls are scored in it too
    name = "connected"
    reason = "disconnected"
    reads = ("gates", "ver_items", "by_method")
    adds = (
        "verdicts",
        "hop_drop_logprobs",
        "disconnected",
        "connected_decided_by",
        "connected_verdict",
    )

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> Connected:
        return cls(cfg.gates.connected, load("verifier method", cfg.verifier.method).primary)

    def judge(self, ctx: GenerationContext, st: ShardState) -> dict[int, Verdict]:
        multi = [k for k, i in enumerate(st.ver_idx) if len(st.targets[i].chain) >= 2]
        if self.on and multi:
            self._measure(ctx, st, multi)
        out = {}
        for k, i in enumerate(st.ver_idx):
            c = st.gates[i].columns
            applies = k in multi
            v = verdict(self.on, applies, _answerable(st, i), c["disconnected"])
            c["connected_verdict"] = v
            out[i] = Verdict(v)
        return out

    def _measure(self, ctx: GenerationContext, st: ShardState, multi: list[int]) -> None:
        gen, items = ctx.generator, st.ver_items
        real = st.by_method.get("teacher_forced")
        if real is None:  # an mc run: the full chain's score is computed here
            full = verify_teacher_forced(gen, [items[k] for k in multi], ctx.shots, ctx.render)
            real = dict(zip(multi, full, strict=True))
        else:
            real = dict(enumerate(real))
        jobs: list[tuple[int, int, VerifierItem]] = []
        for k in multi:
            chain = st.targets[st.ver_idx[k]].chain
            for j in range(len(chain)):
                rest = chain_text(chain[:j] + chain[j + 1 :])
                jobs.append((k, j, replace(items[k], evidence=rest)))
        base = [real[k] for k, _, _ in jobs]
        scored = verify_teacher_forced(
            gen, [it for _, _, it in jobs], ctx.shots, ctx.render, baseline=base
        )
        by_method = {"teacher_forced": scored}
        if self.primary == "teacher_forced_pmi":
            ntok = [answer_tokens(gen, it.answer) for _, _, it in jobs]
            by_method["teacher_forced_pmi"] = pmi_from_teacher_forced(scored, ntok, base)
        drops: dict[int, list[float]] = {k: [] for k in multi}
        for n, (k, j, item) in enumerate(jobs):
            drops[k].append(_logp(scored[n]))
            g = st.gates[st.ver_idx[k]]
            extra = {"dropped_hop": j + 1}
            for method, res in by_method.items():
                row = control_row(
                    item, method, "minus_hop", item.evidence, res[n], extra, ctx.run_id, st.now
                )
                g.controls.append(row)
        for k in multi:
            c = st.gates[st.ver_idx[k]].columns
            c["hop_drop_logprobs"] = drops[k]
            chain = st.targets[st.ver_idx[k]].chain
            links = [(entity_forms(h.subject), [h.object], h.text) for h in chain]
            judged = connectedness(_logp(real[k]), drops[k], redundant_hops(links))
            if judged is not None:
                c["disconnected"], c["connected_decided_by"] = judged


@register
@dataclass(frozen=True)
class OneSearch(Gate):
    """Search necessity measured, not assumed (`gates.one_search`): the run's retriever with
    the question alone must not return the answer for a multi-hop record to count as one."""

    on: bool
    k: int
    name = "one_search"
    reason = "one_search"
    reads = ("proposed", "gates")
    adds = ("verdicts", "one_search_answerable", "one_search_verdict")

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> OneSearch:
        return cls(cfg.gates.one_search, cfg.gates.one_search_k)

    def judge(self, ctx: GenerationContext, st: ShardState) -> dict[int, Verdict]:
        idx = st.valid()
        if self.on and idx:
            hits = ctx.retriever.search([st.proposed[i].proposal.question for i in idx], self.k)
            for i, found in zip(idx, hits, strict=True):
                t = st.targets[i]
                texts = [f"{h.title} {h.text}" for h in found]
                # a comparison names its answer: one search answers it if it finds both values
                wanted = [[h.object] for h in t.chain] if t.options else [t.aliases]
                st.gates[i].columns["one_search_answerable"] = leaks_in_top_k(
                    texts, wanted, lambda text, forms: find_form(text, forms) is not None
                )
        out = {}
        for i in idx:
            c = st.gates[i].columns
            applies = st.targets[i].hops >= 2
            v = verdict(self.on, applies, True, c["one_search_answerable"])
            c["one_search_verdict"] = v
            out[i] = Verdict(v)
        return out
