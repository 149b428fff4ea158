"""LLM-guided subgraph extraction (KG-paths paper, Algorithm 1).

Stage 1 grows a target path from each seed: the selector LLM sees the path so far and at most
`max_candidates` filtered edges, numbered, and answers with a number ("0" stops). Expansion is
batch-synchronous: the step-t prompts of all live seeds go to the model in one generate call,
and only unparseable answers are retried (sampled, up to `max_retries` rounds, again batched).
Stage 2 samples 1-3 one-hop distractor branches diverging at intermediate nodes v1..v_{K-1}.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from pipeline.core.contracts import conform
from pipeline.core.io import utcnow
from pipeline.kg.answer_types import answer_types
from pipeline.kg.graph import Candidate, KnowledgeGraph
from pipeline.kg.valency import MANY_VALUED
from pipeline.llm.base import Generator, SamplingParams

PROMPT_VERSION = "kg-select-v2"

FEW_SHOT = """\
Build a chain of facts. Pick the option that continues the chain best and answer with its \
number, or 0 to stop.

Chain: Marie Curie
1. place of birth: Warsaw
2. spouse: Pierre Curie
3. award received: Nobel Prize in Physics
Choice (0-3): 3

Chain: Pablo Picasso > place of birth: Málaga > country: Spain > continent: Europe
1. area: 10,180,000 square kilometre
2. population: 746,000,000
Choice (0-2): 0

Chain: Ludwig van Beethoven > place of birth: Bonn
1. country: Germany
Choice (0-1): 1

"""


# P31 classes (or their P279 superclasses, a few levels up) that decide an answer's type.
@dataclass(frozen=True)
class ExpansionSettings:
    """Algorithm 1's knobs (paper defaults) plus the selector's sampling parameters."""

    min_hops: int = 3
    max_hops: int = 7
    max_candidates: int = 10
    max_retries: int = 5
    distractors_min: int = 1
    distractors_max: int = 3
    seed: int = 0
    max_tokens: int = 4
    retry_temperature: float = 0.8
    per_relation: int = 3  # at most this many offered edges share a relation
    # Each seed draws a length in [min_hops, max_hops]; ending options (literal targets, "0")
    # are offered from that length on, so lengths spread over the range as in the paper's
    # training pool instead of piling up at min_hops. The LLM still picks every edge.
    balance_lengths: bool = True
    # Path hops only through relations a question can chain through (a path of "shares
    # border with" hops asks about no single thing); distractor branches may use any.
    chainable_only: bool = True

    @classmethod
    def from_config(cls, kg: Any, seed: int = 0) -> ExpansionSettings:
        return cls(
            min_hops=kg.min_hops,
            max_hops=kg.max_hops,
            max_candidates=kg.max_candidates,
            max_retries=kg.max_retries,
            distractors_min=kg.distractors_min,
            distractors_max=kg.distractors_max,
            seed=seed,
            chainable_only=kg.chainable_paths,
        )


@dataclass
class PathState:
    """One seed's target path while it grows."""

    seed: str
    nodes: list[tuple[str, str]]  # (id, label), v0..vK
    relations: list[tuple[str, str]] = field(default_factory=list)  # (pid, label), r1..rK
    last: Candidate | None = None  # edge that reached vK (None at the seed)
    outputs: list[str] = field(default_factory=list)  # raw selector completions
    stop_reason: str | None = None
    target_hops: int = 0  # from this length on the path may end (literal target or "0")

    @property
    def hops(self) -> int:
        return len(self.relations)

    @property
    def node_ids(self) -> list[str]:
        return [n for n, _ in self.nodes]

    @property
    def done(self) -> bool:
        return self.stop_reason is not None


@dataclass
class Extraction:
    """Result of one extraction: subgraph records, seeds that gave none, and LLM usage."""

    records: list[dict]
    rejected: list[dict]
    generate_calls: int
    prompts: int
    llm_seconds: float
    seconds: float


# ---- selector prompt -------------------------------------------------------------------------


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def build_prompt(path: PathState, options: Sequence[Candidate], allow_stop: bool = True) -> str:
    """Few-shot prompt: the chain so far and the numbered options (kept short for CPU)."""
    chain = _short(path.nodes[0][1])
    for (_, rel), (_, node) in zip(path.relations, path.nodes[1:], strict=True):
        chain += f" > {_short(rel, 40)}: {_short(node)}"
    lines = [
        f"{i}. {_short(c.relation, 40)}: {_short(c.target_label)}" for i, c in enumerate(options, 1)
    ]
    # The range in the cue keeps a weak model's answer inside it (it copies the few-shot form);
    # stopping is offered only once the path has the minimum length.
    low = 0 if allow_stop else 1
    return FEW_SHOT + f"Chain: {chain}\n" + "\n".join(lines) + f"\nChoice ({low}-{len(options)}):"


_INT = re.compile(r"\d+")


def parse_choice(text: str, n_options: int, allow_stop: bool = True) -> int | None:
    """The first integer of the completion if it names an option (or 0 = stop, when allowed);
    else None (unparseable: the caller retries)."""
    m = _INT.search(text)
    if m is None:
        return None
    value = int(m.group())
    return value if (0 if allow_stop else 1) <= value <= n_options else None


def _viable(
    c: Candidate,
    needed: int,
    seen: frozenset[str],
    cache: dict[str, list[Candidate]],
    chainable_only: bool = False,
) -> bool:
    """Can a path that takes `c` still grow `needed` more hops without revisiting a node (and,
    with `chainable_only`, through single-valued relations alone)?"""
    if needed == 0:
        return True
    if c.is_literal or c.target_outdeg == 0:
        return False
    nxt = cache.get(c.target_id)
    if nxt is None:
        return True  # beyond the lookahead: trust the out-degree
    seen = seen | {c.target_id, c.target_label.casefold()}
    return any(
        n.target_id not in seen
        and n.target_label.casefold() not in seen
        and not (chainable_only and n.pid in MANY_VALUED)
        and _viable(n, needed - 1, seen, cache, chainable_only)
        for n in nxt
    )


def offer(
    cands: Sequence[Candidate],
    path: PathState,
    s: ExpansionSettings,
    rng: random.Random,
    cache: dict[str, list[Candidate]] | None = None,
) -> list[Candidate]:
    """At most `max_candidates` edges to offer: no cycles (by id or by label), no dead ends
    before `min_hops`, with `chainable_only` no relation a question cannot chain through
    (`valency.MANY_VALUED`), corpus-linked and well-known targets first, relations
    interleaved."""
    seen = frozenset(path.node_ids) | {label.casefold() for _, label in path.nodes}
    needed = max(0, s.min_hops - path.hops - 1)
    may_end = path.hops + 1 >= max(path.target_hops, s.min_hops)
    pool, keys = [], set()
    for c in cands:
        if c.target_id in seen or c.target_label.casefold() in seen:
            continue
        if (c.pid, c.target_id) in keys or (s.chainable_only and c.pid in MANY_VALUED):
            continue
        if needed and not _viable(c, needed, seen, cache or {}, s.chainable_only):
            continue
        if c.is_literal and not may_end:
            continue
        keys.add((c.pid, c.target_id))
        pool.append(c)
    rng.shuffle(pool)
    pool.sort(key=lambda c: (not c.linked, -c.sitelinks, c.is_literal))
    by_rel: dict[str, list[Candidate]] = {}
    for c in pool:
        by_rel.setdefault(c.pid, []).append(c)
    out: list[Candidate] = []
    for rank in range(s.per_relation):
        for group in by_rel.values():
            if rank < len(group) and len(out) < s.max_candidates:
                out.append(group[rank])
    return out


def _generate(
    generator: Generator, prompts: list[str], params: SamplingParams, batched: bool
) -> tuple[list[str], int]:
    if batched:
        return [o[0] for o in generator.generate(prompts, params)], 1
    return [generator.generate([p], params)[0][0] for p in prompts], len(prompts)


def select(
    generator: Generator,
    prompts: list[str],
    n_options: list[int],
    s: ExpansionSettings,
    batched: bool = True,
    allow_stop: list[bool] | None = None,
) -> tuple[list[int | None], list[list[str]], int]:
    """Ask the selector once per prompt, retrying only unparseable answers (sampled).

    Returns (choice per prompt or None after all retries, raw outputs per prompt, calls)."""
    greedy = SamplingParams(n=1, temperature=0.0, max_tokens=s.max_tokens, stop=("\n",))
    choices: list[int | None] = [None] * len(prompts)
    raw: list[list[str]] = [[] for _ in prompts]
    todo, calls = list(range(len(prompts))), 0
    for attempt in range(s.max_retries + 1):
        if not todo:
            break
        params = (
            greedy
            if attempt == 0
            else replace(greedy, temperature=s.retry_temperature, seed=s.seed + attempt)
        )
        outs, n = _generate(generator, [prompts[i] for i in todo], params, batched)
        calls += n
        retry = []
        for i, text in zip(todo, outs, strict=True):
            raw[i].append(text)
            choice = parse_choice(text, n_options[i], allow_stop[i] if allow_stop else True)
            if choice is None:
                retry.append(i)
            else:
                choices[i] = choice
        todo = retry
    return choices, raw, calls


# ---- Algorithm 1 -----------------------------------------------------------------------------


def _rng(s: ExpansionSettings, seed_qid: str, salt: str) -> random.Random:
    digest = hashlib.sha256(f"{s.seed}|{seed_qid}|{salt}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def expand_paths(
    graph: KnowledgeGraph,
    generator: Generator,
    seeds: Sequence[str],
    s: ExpansionSettings,
    batched: bool = True,
    cache: dict[str, list[Candidate]] | None = None,
) -> tuple[list[PathState], dict[str, int | float]]:
    """Stage 1 for all seeds at once: one candidate query and one generate call per hop
    (plus one per retry round) — or, with batched=False, one call per seed per step."""
    cache = {} if cache is None else cache
    labels = graph.nodes(seeds)
    paths = [
        PathState(
            q,
            [(q, labels.get(q, {}).get("label") or q)],
            target_hops=_rng(s, q, "length").randint(s.min_hops, s.max_hops)
            if s.balance_lengths
            else s.min_hops,
        )
        for q in seeds
    ]
    usage: dict[str, int | float] = {"generate_calls": 0, "prompts": 0, "llm_seconds": 0.0}
    for t in range(s.max_hops):
        live = [p for p in paths if not p.done]
        if not live:
            break
        frontier = [p.nodes[-1][0] for p in live if p.nodes[-1][0] not in cache]
        cache.update(graph.candidates(frontier))
        # Lookahead to min_hops: edges of the nodes reachable in the hops still required,
        # one query per level for all live seeds, so no offered edge leads to a dead end.
        level = {p.nodes[-1][0] for p in live}
        for _ in range(max(0, s.min_hops - t - 1)):
            level = {c.qid for q in level for c in cache.get(q, []) if c.qid}
            cache.update(graph.candidates(level - cache.keys()))
        asked: list[tuple[PathState, list[Candidate]]] = []
        for p in live:
            options = offer(cache.get(p.nodes[-1][0], []), p, s, _rng(s, p.seed, t), cache)
            if options:
                asked.append((p, options))
            else:
                p.stop_reason = "no_candidates"
        if not asked:
            break
        t0 = time.perf_counter()
        stop_ok = [p.hops >= max(p.target_hops, s.min_hops) for p, _ in asked]
        choices, raw, calls = select(
            generator,
            [build_prompt(p, o, ok) for (p, o), ok in zip(asked, stop_ok, strict=True)],
            [len(o) for _, o in asked],
            s,
            batched,
            stop_ok,
        )
        usage["llm_seconds"] += time.perf_counter() - t0
        usage["generate_calls"] += calls
        usage["prompts"] += sum(len(r) for r in raw)
        for (p, options), choice, outs in zip(asked, choices, raw, strict=True):
            p.outputs.extend(outs)
            if choice is None:
                p.stop_reason = "unparseable"
            elif choice == 0:
                p.stop_reason = "llm_stop"
            else:
                c = options[choice - 1]
                p.nodes.append((c.target_id, c.target_label))
                p.relations.append((c.pid, c.relation))
                p.last = c
                if c.is_literal:
                    p.stop_reason = "literal"
    for p in paths:
        if not p.done:
            p.stop_reason = "max_hops"
    usage["llm_seconds"] = round(float(usage["llm_seconds"]), 3)
    return paths, usage


def sample_distractors(
    path: PathState, cache: dict[str, list[Candidate]], s: ExpansionSettings
) -> list[dict]:
    """Stage 2: D ~ U{min..max} one-hop branches from v_k, k ~ U{1..K-1}, off the path.

    Half the time a branch reuses the relation the target path takes at v_k when it can:
    a sibling value (another border, another employer) is the locally plausible wrong turn."""
    rng = _rng(s, path.seed, "distractors")
    want = rng.randint(s.distractors_min, s.distractors_max)
    on_path = set(path.node_ids) | {label.casefold() for _, label in path.nodes}
    used: set[str] = set()
    branches: list[dict] = []
    ks = list(range(1, path.hops))
    for _ in range(want):
        order = ks[:]
        rng.shuffle(order)
        for k in order:
            v_id, v_label = path.nodes[k]
            next_pid = path.relations[k][0] if k < path.hops else None
            opts = [
                c
                for c in cache.get(v_id, [])
                if c.target_id not in on_path
                and c.target_label.casefold() not in on_path
                and c.target_id not in used
            ]
            if not opts:
                continue
            same = [c for c in opts if c.pid == next_pid]
            c = rng.choice(same if same and rng.random() < 0.5 else opts)
            used.add(c.target_id)
            branches.append(
                {
                    "nodes": [
                        {"id": v_id, "label": v_label},
                        {"id": c.target_id, "label": c.target_label},
                    ],
                    "relations": [{"id": c.pid, "label": c.relation}],
                }
            )
            break
    return branches


def subgraph_id(key: str, seed: str) -> str:
    return hashlib.sha256(f"{key}|{seed}".encode()).hexdigest()[:16]


def llm_guided_subgraphs(
    graph: KnowledgeGraph,
    generator: Generator,
    seeds: Sequence[str],
    s: ExpansionSettings,
    key: str = "",
    batched: bool = True,
) -> Extraction:
    """Algorithm 1 for every seed; records follow the SUBGRAPHS contract, ordered by node
    count (descending) as the paper feeds them to the proposer."""
    t0 = time.perf_counter()
    cache: dict[str, list[Candidate]] = {}
    paths, usage = expand_paths(graph, generator, seeds, s, batched, cache)
    kept, rejected = [], []
    for p in paths:
        if p.hops < s.min_hops:
            rejected.append(
                (p, f"path of {p.hops} hops is shorter than {s.min_hops} ({p.stop_reason})")
            )
        else:
            kept.append(p)
    types = answer_types(graph, kept)
    info = graph.nodes(n for p in kept for n, _ in p.nodes)
    records = []
    now = utcnow()
    for p in kept:
        branches = sample_distractors(p, cache, s)
        if len(branches) < s.distractors_min:
            rejected.append((p, f"{len(branches)} distractor branches < {s.distractors_min}"))
            continue
        node_ids = set(p.node_ids) | {n["id"] for b in branches for n in b["nodes"]}
        answer = p.last
        assert answer is not None
        records.append(
            {
                "subgraph_id": subgraph_id(key, p.seed),
                "seed_qid": p.seed,
                "target_path": {
                    "nodes": [{"id": n, "label": lab} for n, lab in p.nodes],
                    "relations": [{"id": r, "label": lab} for r, lab in p.relations],
                },
                "distractors": branches,
                "answer_qid": answer.qid,
                "answer_label": answer.target_label,
                "answer_type": types[p.seed],
                "waypoints": [lab for _, lab in p.nodes[:-1]],
                "passage_ids": [info.get(n, {}).get("passage_ids", []) for n in p.node_ids],
                "hops": p.hops,
                "node_count": len(node_ids),
                "stop_reason": p.stop_reason,
                "llm_outputs": p.outputs,
                "model": getattr(generator, "model_id", None),
                "created_at": now,
            }
        )
    records.sort(key=lambda r: (-r["node_count"], -r["hops"], r["subgraph_id"]))
    rejects = [
        {"seed": p.seed, "reason": reason, "outputs": p.outputs, "hops": p.hops}
        for p, reason in rejected
    ]
    return Extraction(
        records,
        rejects,
        int(usage["generate_calls"]),
        int(usage["prompts"]),
        float(usage["llm_seconds"]),
        round(time.perf_counter() - t0, 3),
    )


def to_table(records: list[dict]) -> pa.Table:
    return conform("subgraphs", records)


__all__ = [
    "FEW_SHOT",
    "PROMPT_VERSION",
    "ExpansionSettings",
    "Extraction",
    "PathState",
    "build_prompt",
    "expand_paths",
    "llm_guided_subgraphs",
    "offer",
    "parse_choice",
    "sample_distractors",
    "select",
    "to_table",
]
