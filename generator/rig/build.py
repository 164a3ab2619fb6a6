"""A rig from the builder, checked against the catalog and turned into the engine's numbers.

The same checks and the same numbers as ``web/rig/rig.js``, which runs the
port of the engine in the browser: part fields within the schema's bounds
(catalog/scenario.py), a graph that reaches the source, an LLM node's config
resolved to the serving model's scheduler and step cost
(:func:`backpressure.generator.simulate.served_for`). What the browser needs of
the catalog to do the same ships as JSON beside the page
(:mod:`backpressure.generator.rig.data`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from backpressure.catalog.errors import CatalogError
from backpressure.catalog.loader import Catalog
from backpressure.catalog.scenario import LlmPart, LoadSource, Part, Slo, load_parts
from backpressure.engine.rng import mulberry32
from backpressure.engine.serving.step import pack
from backpressure.engine.sim.model import SOURCE, LlmSpec, NodeSpec, Rules, SimSpec
from backpressure.engine.sim.records import RunReport, SweepReport
from backpressure.engine.sim.run import SimResult, simulate, sweep
from backpressure.engine.sim.traffic import Arrivals, Shape, SourceSpec
from backpressure.generator.records import SEP
from backpressure.generator.rig.doc import LOAD_FIELDS, SLO_FIELDS, Rig, RigError, RigNode
from backpressure.generator.rig.fields import (
    CONFIG,
    check,
    fields_of,
    node_fields,
    number_text,
    quoted,
)
from backpressure.generator.simulate import Served, from_served, node_spec, served_for
from pydantic import ValidationError

# What the builder allows beyond the scenario schema: a run the browser can hold.
LIMITS = {
    "max_duration_s": 3600.0,
    "max_nodes": 12,
    "max_sweep_points": 60,
    "min_soak_s": 1.0,
}
RIG_NAME = "rig"
LOAD_SPECS = fields_of(LoadSource, ("shape", "rps", "arrivals", *LOAD_FIELDS))
SLO_SPECS = fields_of(Slo, SLO_FIELDS)

Resolver = Callable[..., Served]


def context_tokens(label: str) -> int | None:
    """``8k`` -> 8192, ``4096`` -> 4096 (records.context_label read back); None if neither."""
    if label.endswith("k") and label[:-1].isdigit():
        return int(label[:-1]) * 1024
    return int(label) if label.isdigit() else None


def parse_config_id(cid: str, node: str = "llm") -> tuple[str, str, str, int, str]:
    """(device, model, quant, context, KV dtype) of a config id, or a :class:`RigError`."""
    bits = cid.split(SEP)
    kv = "auto"
    if len(bits) == 5 and bits[4].startswith("kv-"):
        kv = bits.pop()[3:]
    ctx = context_tokens(bits[3]) if len(bits) == 4 else None
    if ctx is None:
        raise RigError(
            f"{node}.config: {quoted(cid)} is not a config id (device--model--quant--context)"
        )
    return bits[0], bits[1], bits[2], ctx, kv


def _backstop(where: str, exc: ValidationError) -> RigError:
    """A schema error the checks above did not catch (they should catch every one)."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    return RigError(f"{where}.{loc}: {err['msg'].removeprefix('Value error, ')}")


def source_of(rig: Rig) -> SourceSpec:
    """The load source, checked against the scenario schema."""
    if rig.rps is None:
        raise RigError("rps: required (the load level in requests/s)")
    check(LOAD_SPECS["rps"], rig.rps, "rps")
    if not 0 < rig.duration_s <= LIMITS["max_duration_s"]:
        limit = number_text(LIMITS["max_duration_s"])
        raise RigError(f"t: the run lasts more than 0 and at most {limit} s")
    load = dict(rig.load)
    for name, value in rig.load:
        check(LOAD_SPECS[name], value, name)
    at, until = load.get("at_s", 0.0), load.get("until_s")
    if until is not None and at is not None and until <= at:
        raise RigError("until_s: must be after at_s")
    try:
        src = LoadSource(shape=rig.shape, rps=rig.rps, arrivals=rig.arrivals, **load)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise _backstop("load", exc) from None
    kept = {f: getattr(src, f) for f in LOAD_FIELDS}
    return SourceSpec(Shape(src.shape), src.level_rps, Arrivals(src.arrivals), **kept)


def rules_of(rig: Rig) -> Rules:
    """The failure rules, checked against the scenario schema."""
    for name, value in rig.slo:
        check(SLO_SPECS[name], value, f"slo.{name}")
    slo_given = dict(rig.slo)
    soak = slo_given.get("soak_s")
    if soak is not None and soak < LIMITS["min_soak_s"]:
        raise RigError(f"slo.soak_s: must be at least {number_text(LIMITS['min_soak_s'])}")
    try:
        slo = Slo(**slo_given)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise _backstop("slo", exc) from None
    return Rules(
        p99_slo_ms=slo.p99_ms,
        ttft_budget_ms=slo.ttft_ms,
        availability=slo.availability,
        soak_utilization=slo.soak_utilization,
        soak_s=slo.soak_s,
        window_s=slo.window_s,
    )


def graph_order(nodes: tuple[RigNode, ...]) -> list[RigNode]:
    """Nodes in topological order (declaration order among those ready), or why not."""
    if not nodes:
        raise RigError("nodes: the rig is empty; add at least one node after the load")
    if len(nodes) > LIMITS["max_nodes"]:
        raise RigError(f"nodes: at most {number_text(LIMITS['max_nodes'])} nodes")
    by_name = {n.name: n for n in nodes}
    for n in nodes:
        if n.after != SOURCE and n.after not in by_name:
            raise RigError(f"{n.name}.after: no node {quoted(n.after)} (and it is not the load)")
        if n.after == n.name:
            raise RigError(f"{n.name}.after: a node cannot come after itself")
    order: list[RigNode] = []
    placed = {SOURCE}
    while len(order) < len(nodes):
        ready = [n for n in nodes if n.name not in placed and n.after in placed]
        if not ready:
            stuck = next(n for n in nodes if n.name not in placed)
            raise RigError(f"nodes: cycle {_cycle(stuck, by_name)} never reaches the load")
        order.append(ready[0])
        placed.add(ready[0].name)
    return order


def _cycle(start: RigNode, by_name: dict[str, RigNode]) -> str:
    path = [start.name]
    name = start.after
    while name not in path:
        path.append(name)
        name = by_name[name].after
    loop = path[path.index(name) :]
    return " -> ".join([*loop, loop[0]])


def part_of(node: RigNode, parts: dict[str, Part]) -> Part:
    """The node's part with its overrides applied, checked against the schema."""
    base = parts.get(node.part)
    if base is None:
        known = ", ".join(sorted(parts))
        raise RigError(f"{node.name}.part: unknown part {quoted(node.part)} (one of {known})")
    kind = type(base)
    specs = fields_of(kind, node_fields(kind))
    extra = node.overrides()
    for key, value in node.fields:
        if key not in specs:
            raise RigError(f"{node.name}.{key}: not a field of a {base.kind} node")
        check(specs[key], value, f"{node.name}.{key}")
    merged = base.model_dump() | {k: v for k, v in extra.items() if k != CONFIG}
    holds = bool(merged["max_depth"])
    if merged["discipline"] == "buffer" and (not holds or merged["max_age_s"] is None):
        raise RigError(f"{node.name}.discipline: buffer needs max_depth > 0 and max_age_s")
    if merged["discipline"] == "shed" and holds:
        raise RigError(f"{node.name}.max_depth: a shed node holds nothing; use buffer or block")
    sourced = [k for k in extra if k != CONFIG]
    if isinstance(base, LlmPart):
        cid = extra.get(CONFIG)
        if not isinstance(cid, str):
            raise RigError(f"{node.name}.config: required (a config id, as on its config page)")
        device, model, quant, ctx, kv = parse_config_id(cid, node.name)
        merged |= {"gpu": device, "model": model, "quant": quant, "context": ctx, "kv_dtype": kv}
        sourced.append("context")
    # a value the link sets is sourced to the link, as a scenario's overrides are
    merged["sources"] = dict(base.sources) | {
        k: f"rig builder link, node {node.name}" for k in sourced
    }
    try:
        return kind.model_validate(merged)
    except ValidationError as exc:
        raise _backstop(node.name, exc) from None


def llm_of(node: RigNode, part: LlmPart, cat: Catalog, resolve: Resolver | None) -> LlmSpec:
    """The LLM node's engine numbers from its config."""
    resolve = resolve or (lambda **kw: served_for(cat=cat, **kw))
    try:
        served = resolve(
            gpu=part.gpu,
            model=part.model,
            quant=part.quant,
            context=part.context,
            kv_dtype=part.kv_dtype,
        )
    except (KeyError, ValueError, CatalogError) as exc:
        raise RigError(f"{node.name}.config: {exc}") from None
    llm, why = from_served(served, part.prompt_tokens, part.output_tokens)
    if llm is None:
        raise RigError(f"{node.name}.config: {why}")
    return llm


def spec_of(
    rig: Rig,
    cat: Catalog,
    parts: dict[str, Part] | None = None,
    resolve: Resolver | None = None,
) -> SimSpec:
    """The engine's scenario for a rig, or a :class:`RigError` naming what is wrong."""
    source = source_of(rig)
    rules = rules_of(rig)
    parts = parts if parts is not None else load_parts(cat.root / "parts")
    nodes: list[NodeSpec] = []
    for node in graph_order(rig.nodes):
        part = part_of(node, parts)
        llm = llm_of(node, part, cat, resolve) if isinstance(part, LlmPart) else None
        nodes.append(node_spec(node.name, node.after, part, llm))
    return SimSpec(RIG_NAME, source, tuple(nodes), rules, rig.duration_s)


def levels(rig: Rig) -> list[float]:
    """The sweep's load levels, ``start + i * step`` (as scenario sweeps)."""
    if rig.sweep is None:
        raise RigError("sweep: not given (START:STEP:POINTS)")
    start, step, points = rig.sweep
    if not (start > 0 and step > 0 and 1 <= points <= LIMITS["max_sweep_points"]):
        most = number_text(LIMITS["max_sweep_points"])
        raise RigError(f"sweep: start and step above 0, 1 to {most} points")
    return [start + i * step for i in range(points)]


def run(spec: SimSpec, seed: int) -> tuple[SimResult, RunReport]:
    """One run at the source's level."""
    result = simulate(spec, [spec.source.rps], mulberry32(seed))
    return result, result.reports[0]


def run_sweep(spec: SimSpec, rig: Rig) -> SweepReport:
    """Every level of the rig's sweep, in one engine call."""
    return sweep(spec, levels(rig), mulberry32(rig.seed))


def spec_json(spec: SimSpec) -> dict[str, Any]:
    """A SimSpec as the JavaScript engine reads it (``web/rig/engine/run.js``)."""

    def node(n: NodeSpec) -> dict[str, Any]:
        out = {f.name: getattr(n, f.name) for f in dataclasses.fields(n) if f.name != "llm"}
        out["kind"], out["discipline"] = str(n.kind), str(n.discipline)
        out["llm"] = None if n.llm is None else llm_json(n.llm)
        return out

    source = dataclasses.asdict(spec.source)
    source["shape"], source["arrivals"] = str(spec.source.shape), str(spec.source.arrivals)
    return {
        "name": spec.name,
        "duration_s": spec.duration_s,
        "source": source,
        "nodes": [node(n) for n in spec.nodes],
        "rules": dataclasses.asdict(spec.rules),
    }


def llm_json(m: LlmSpec) -> dict[str, Any]:
    """An LLM node's numbers: its slots, packed step cost and token limits."""
    return {
        "slots": m.slots,
        "cost": pack(m.cost).tolist(),
        "num_experts": m.cost.num_experts,
        "experts_per_token": m.cost.experts_per_token,
        "expert_pair_below": m.cost.expert_pair_below,
        "max_batched_tokens": m.max_batched_tokens,
        "ubatch_tokens": m.ubatch_tokens,
        "prompt_tokens": m.prompt_tokens,
        "output_tokens": m.output_tokens,
    }
