"""A shard is an ordered list of batched steps over one shared state (datatrove's pipeline of
steps, distilabel's declared columns).

Each step is built once per worker from the config (`from_config`; None: not in this run),
runs once per shard over the whole batch, and declares the state fields it reads and adds;
`build_steps` checks that every read is added by an earlier step. The runner, not the step,
times and counts: records in and out, wall and CPU seconds, and the LLM engine's calls and
tokens as the backend reports them (`pipeline.llm.usage`), one `shard_steps` row per step,
and the generated tokens of each record (`record_costs`). A gate is a step whose verdict can
keep a record out: one `Gate` subclass, registered by name, and one config entry.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pipeline.llm import usage

if TYPE_CHECKING:
    from pipeline.agents.proposer import ProposerResult
    from pipeline.agents.solver import SolverResult, SolverTask
    from pipeline.agents.targets import Target
    from pipeline.agents.verifier import VerifierItem, VerifierResult
    from pipeline.core.config import PipelineConfig
    from pipeline.generation.gates import GateResult
    from pipeline.generation.shards import GenerationContext
    from pipeline.selector.run_plan import PlanItem

# What a gate may say of a record; `fail` and `undetermined` keep it out of the curriculum.
VERDICTS = ("pass", "fail", "undetermined", "not_applicable", "off")
REJECTING = ("fail", "undetermined")


@dataclass
class ShardState:
    """What the steps of one shard share: the plan's slots, then what each step adds."""

    shard: int
    items: list[PlanItem]
    seed: int
    rids: list[str]
    pids: list[str]
    titles: list[str]
    texts: list[str]
    graphs: list[dict | None]
    targets: list[Target]
    now: dt.datetime
    # propose
    proposed: list[ProposerResult] = field(default_factory=list)
    # solve: slot -> its solver task and result (valid questions)
    tasks: dict[int, SolverTask] = field(default_factory=dict)
    solved: dict[int, SolverResult] = field(default_factory=dict)
    # verify: the verified slots in order, their items, every method's results in that order,
    # the record's own method's result per slot, and samples of a second method ("both")
    ver_idx: list[int] = field(default_factory=list)
    ver_items: list[VerifierItem] = field(default_factory=list)
    by_method: dict[str, list[VerifierResult]] = field(default_factory=dict)
    verified: dict[int, VerifierResult] = field(default_factory=dict)
    extra_samples: list[dict] = field(default_factory=list)
    # gates: per slot, the gate columns and rows, and every gate's verdict in step order
    gates: dict[int, GateResult] = field(default_factory=dict)
    verdicts: dict[int, list[dict[str, str | None]]] = field(default_factory=dict)
    # rows: the shard's rows by table
    tables: dict[str, list[dict]] = field(default_factory=dict)
    # the runner's accounting: shard_steps rows and generated tokens per record and step
    step_rows: list[dict] = field(default_factory=list)
    record_tokens: dict[tuple[str, str], int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.items)

    def valid(self) -> list[int]:
        return [i for i, r in enumerate(self.proposed) if r.valid]


# The fields ShardState starts with: what the plan and the shard's setup provide.
INITIAL = ("items", "seed", "rids", "pids", "titles", "texts", "graphs", "targets", "now")


class Step:
    """One batched step of a shard. Subclasses set `name`, `reads` and `adds` (ShardState
    fields, or curriculum columns a gate fills) and implement `run`."""

    name: ClassVar[str]
    reads: ClassVar[tuple[str, ...]] = ()
    adds: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_config(cls, cfg: PipelineConfig) -> Step | None:
        return cls()

    def run(self, ctx: GenerationContext, st: ShardState) -> tuple[int, int]:
        """Do the step for the whole shard; returns (records in, records out)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Verdict:
    verdict: str  # one of VERDICTS
    detail: str | None = None  # why, for a reader of the record


class Gate(Step):
    """A step that judges records: `judge` returns a verdict per slot it looked at (a slot it
    did not look at is `not_applicable`). A `fail` is rejected as `name` (or `reason`), an
    `undetermined` as `<name>_undetermined`, in the catalog's view curriculum_verdicts, the
    funnel (view gate_funnel) and the export's default selection."""

    reason: ClassVar[str | None] = None  # the rejected_by value of a fail (default: name)
    adds = ("verdicts",)

    def judge(self, ctx: GenerationContext, st: ShardState) -> dict[int, Verdict]:
        raise NotImplementedError

    def run(self, ctx: GenerationContext, st: ShardState) -> tuple[int, int]:
        judged = self.judge(ctx, st)
        for v in judged.values():
            if v.verdict not in VERDICTS:
                raise ValueError(f"gate {self.name} gave verdict {v.verdict!r}; one of {VERDICTS}")
        for i in range(len(st)):
            v = judged.get(i, Verdict("not_applicable"))
            rejected = None
            if v.verdict == "fail":
                rejected = self.reason or self.name
            elif v.verdict == "undetermined":
                rejected = f"{self.name}_undetermined"
            st.verdicts.setdefault(i, []).append(
                {"gate": self.name, "verdict": v.verdict, "rejected_by": rejected,
                 "detail": v.detail}
            )  # fmt: skip
        # records in: those it judged (not `not_applicable` or `off`); out: those it passed
        looked = [v.verdict for v in judged.values() if v.verdict not in ("not_applicable", "off")]
        return len(looked), sum(v not in REJECTING for v in looked)


# Steps by name: the built-in ones register themselves (generation.shards imports them), a
# custom gate registers with @register and is switched on by `gates.custom.<name>`.
REGISTRY: dict[str, type[Step]] = {}


def register(cls: type[Step]) -> type[Step]:
    if REGISTRY.get(cls.name, cls) is not cls:
        raise ValueError(f"a step named {cls.name!r} is already registered")
    REGISTRY[cls.name] = cls
    return cls


def check_order(steps: Sequence[Step]) -> None:
    """Every field a step reads is added by a step before it (or is part of the plan)."""
    have = set(INITIAL)
    for s in steps:
        missing = [r for r in s.reads if r not in have]
        if missing:
            raise ValueError(
                f"step {s.name!r} reads {', '.join(missing)}, which no earlier step adds "
                f"(order: {', '.join(x.name for x in steps)})"
            )
        have |= set(s.adds)


@dataclass
class StepRunner:
    """Runs a shard's steps in order and accounts for each."""

    steps: list[Step]
    run_id: str
    _wall: float = 0.0
    _extra: dict[str, Any] = field(default_factory=dict)

    def run(self, ctx: GenerationContext, st: ShardState) -> None:
        for step in self.steps:
            wall, cpu = time.perf_counter(), time.process_time()
            with usage.metered() as meter:
                n_in, n_out = step.run(ctx, st)
            u = meter.usage
            st.step_rows.append(
                {
                    "run_id": self.run_id,
                    "shard": st.shard,
                    "step": step.name,
                    "seconds": time.perf_counter() - wall,
                    "items": n_in,
                    "records_out": n_out,
                    "cpu_seconds": time.process_time() - cpu,
                    "llm_calls": u.llm_calls,
                    "prompt_tokens_computed": u.prompt_tokens_computed,
                    "prompt_tokens_cached": u.prompt_tokens_cached,
                    "generated_tokens": u.generated_tokens,
                    "created_at": st.now,
                }
            )
            for rec, n in meter.by_record.items():
                key = (rec, step.name)
                st.record_tokens[key] = st.record_tokens.get(key, 0) + n
