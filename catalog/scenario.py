"""Scenario YAML for the load simulation: parts with sourced defaults, wired as a tree.

A scenario (``catalog/scenarios/<id>.yaml``) names a load source, a list of nodes
and the failure rules. Each node picks a part (``catalog/parts/<id>.yaml``) and may
override any of its fields; each node names its upstream with ``after`` (``load``
for the source), so the graph is a tree rooted at the source. Loading validates
everything and raises one :class:`~catalog.errors.CatalogError` listing every
problem with its file, entry and field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from backpressure.catalog.errors import CatalogError, Problem, safe_repr
from backpressure.catalog.fields import Bool, Float, Int, Note
from backpressure.catalog.loader import misnamed
from backpressure.catalog.schema import Entity, EntityId, Name
from backpressure.catalog.yaml_file import YamlProblem, read_yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

PARTS_DIR = Path(__file__).resolve().parent / "parts"
SCENARIOS_DIR = Path(__file__).resolve().parent / "scenarios"
SOURCE = "load"
NodeName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,39}$")]
DisciplineName = Literal["shed", "buffer", "block"]


class QueueFields(Entity):
    """Queue behaviour every part has (a node may override each)."""

    discipline: DisciplineName = Field(
        default="shed", description="shed: drop overflow now; buffer: hold it; block: refuse it."
    )
    max_depth: Int | None = Field(
        default=None, ge=0, le=10_000_000, description="Work held between ticks [requests]."
    )
    max_age_s: Float | None = Field(
        default=None, gt=0, le=3600, description="Queued work older than this is dropped [s]."
    )
    lifo: Bool = Field(default=True, description="Adaptive LIFO under heavy overload.")
    lifo_after_s: Float = Field(
        default=0.5,
        gt=0,
        le=3600,
        description="Serve newest first once the oldest waiter is older than this [s].",
    )

    @model_validator(mode="after")
    def _discipline_fields(self) -> QueueFields:
        if self.discipline == "buffer" and (not self.max_depth or self.max_age_s is None):
            raise ValueError("discipline: buffer needs max_depth > 0 and max_age_s")
        if self.discipline == "shed" and self.max_depth:
            raise ValueError("max_depth: a shed node holds nothing; use buffer or block")
        return self


class AppPart(QueueFields):
    """An app or serving tier: workers, each busy for a service time per request."""

    kind: Literal["app"]
    workers: Int = Field(gt=0, le=1_000_000, description="Concurrent workers [-].")
    service_time_s: Float = Field(gt=0, le=600, description="Time a request holds a worker [s].")


class DatabasePart(QueueFields):
    """A database behind a connection pool: connections x query time."""

    kind: Literal["database"]
    pool_size: Int = Field(gt=0, le=100_000, description="Connections in the pool [-].")
    query_time_s: Float = Field(gt=0, le=600, description="Time a request holds a connection [s].")


class QueuePart(QueueFields):
    """A message queue: forwards at its throughput, holds what the next node refuses."""

    kind: Literal["queue"]
    throughput_rps: Float = Field(gt=0, le=10_000_000, description="Forwarding rate [messages/s].")
    service_time_s: Float = Field(gt=0, le=60, description="Enqueue-to-dequeue latency [s].")


class LlmPart(QueueFields):
    """A model on a GPU; slots and token speeds come from the capacity engine.

    Give ``gpu``, ``quant``, ``context`` and either ``model`` or ``params_b``; or
    give the five capacity numbers directly (``slots`` ... ``step_compute_per_seq_s``).
    """

    kind: Literal["llm"]
    gpu: EntityId | None = Field(default=None, description="Catalog GPU or rig id.")
    model: str | None = Field(default=None, description="Catalog model id or HF repo id.")
    params_b: Float | None = Field(
        default=None,
        gt=0,
        le=10_000,
        description="Bare parameter count for an unknown model [1e9].",
    )
    quant: EntityId | None = Field(default=None, description="Catalog quant id.")
    context: Int | None = Field(default=None, gt=0, le=10_485_760, description="Context [tokens].")
    runtime: EntityId | None = Field(default=None, description="Catalog runtime id.")
    kv_dtype: EntityId = Field(default="auto", description="KV-cache dtype id.")
    prompt_tokens: Int = Field(gt=0, le=1_048_576, description="Prompt per request [tokens].")
    output_tokens: Int = Field(gt=0, le=1_048_576, description="Output per request [tokens].")
    slots: Int | None = Field(default=None, gt=0, le=100_000, description="Explicit slots [-].")
    prefill_tokens_per_s: Float | None = Field(default=None, gt=0, description="[tokens/s].")
    step_fixed_s: Float | None = Field(default=None, ge=0, description="Decode step fixed [s].")
    step_per_kv_token_s: Float | None = Field(default=None, ge=0, description="[s/token].")
    step_compute_per_seq_s: Float | None = Field(default=None, ge=0, description="[s/seq].")

    @model_validator(mode="after")
    def _capacity_given(self) -> LlmPart:
        explicit = (
            self.slots,
            self.prefill_tokens_per_s,
            self.step_fixed_s,
            self.step_per_kv_token_s,
            self.step_compute_per_seq_s,
        )
        if any(v is not None for v in explicit):
            if any(v is None for v in explicit):
                raise ValueError("slots: give all five capacity numbers or none")
            return self
        return self

    @property
    def explicit(self) -> bool:
        """Whether the capacity numbers are given rather than resolved."""
        return self.slots is not None


Part = AppPart | DatabasePart | QueuePart | LlmPart
PART_KINDS: dict[str, type[QueueFields]] = {
    "app": AppPart,
    "database": DatabasePart,
    "queue": QueuePart,
    "llm": LlmPart,
}


class LoadSource(BaseModel):
    """The load source: a rate shape scaled by ``rps`` (or users / think time)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    shape: Literal["constant", "ramp", "step", "bursty"] = Field(
        default="constant", description="How the rate moves over the run."
    )
    rps: Float | None = Field(default=None, gt=0, le=10_000_000, description="Level [req/s].")
    users: Int | None = Field(default=None, gt=0, description="Users, for rps = users / think.")
    think_time_s: Float | None = Field(default=None, gt=0, description="Per user [s].")
    arrivals: Literal["poisson", "deterministic"] = Field(
        default="poisson", description="Seeded Poisson, or exactly rate x tick."
    )
    start_fraction: Float = Field(default=0.0, ge=0, le=1, description="Ramp start [x rps].")
    ramp_s: Float = Field(default=60.0, ge=0, description="Ramp length [s].")
    base_fraction: Float = Field(default=0.0, ge=0, description="Step outside [x rps].")
    at_s: Float = Field(default=0.0, ge=0, description="Step start [s].")
    until_s: Float | None = Field(default=None, gt=0, description="Step end [s].")
    burst_bias: Float = Field(default=0.6, ge=0.5, lt=1, description="Bursty cascade bias [-].")

    @model_validator(mode="after")
    def _one_level(self) -> LoadSource:
        by_users = self.users is not None or self.think_time_s is not None
        if self.rps is not None and by_users:
            raise ValueError("rps: give rps or users with think_time_s, not both")
        if self.rps is None and (self.users is None or self.think_time_s is None):
            raise ValueError("rps: required (or users together with think_time_s)")
        if self.until_s is not None and self.until_s <= self.at_s:
            raise ValueError("until_s: must be after at_s")
        return self

    @property
    def level_rps(self) -> float:
        """The load level [requests/s]."""
        if self.rps is not None:
            return self.rps
        assert self.users is not None
        assert self.think_time_s is not None
        return self.users / self.think_time_s


class NodeEntry(BaseModel):
    """One node: a part, its upstream, and any field of the part overridden."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: NodeName = Field(description="Unique node name; 'load' is the source.")
    part: EntityId = Field(description="Part id under catalog/parts/.")
    after: str = Field(default=SOURCE, description="Upstream node name, or 'load'.")

    @property
    def overrides(self) -> dict[str, Any]:
        """Part fields this node sets."""
        return dict(self.model_extra or {})


class Slo(BaseModel):
    """Failure rules."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    p99_ms: Float | None = Field(default=500.0, gt=0, description="End-to-end p99 SLO [ms].")
    ttft_ms: Float = Field(default=1500.0, gt=0, description="Hard TTFT budget [ms].")
    availability: Float = Field(default=0.999, gt=0, lt=1, description="Served share target.")
    soak_utilization: Float = Field(default=0.85, gt=0, le=1, description="Soak line [-].")
    soak_s: Float = Field(default=120.0, gt=0, description="Soak window [s].")
    window_s: Float = Field(default=10.0, gt=0, le=600, description="Rolling window [s].")


class Sweep(BaseModel):
    """Load levels a sweep tries: ``start_rps + i * step_rps`` for ``i < points``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start_rps: Float = Field(gt=0, description="First level [req/s].")
    step_rps: Float = Field(gt=0, description="Spacing [req/s].")
    points: Int = Field(default=40, ge=1, le=1000, description="Number of levels.")

    def levels(self) -> list[float]:
        """The levels, ascending [req/s]."""
        return [self.start_rps + i * self.step_rps for i in range(self.points)]


class Scenario(BaseModel):
    """One scenario file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: EntityId = Field(description="Equals the file name.")
    name: Name = Field(description="Shown in reports.")
    description: Note | None = Field(default=None, description="Shown under the name.")
    seed: Int = Field(default=1, ge=0, lt=2**32, description="mulberry32 seed.")
    duration_s: Float = Field(gt=0, le=86_400, description="Simulated time per run [s].")
    load: LoadSource
    nodes: tuple[NodeEntry, ...] = Field(min_length=1, max_length=100)
    slo: Slo = Field(default_factory=Slo)
    sweep: Sweep


@dataclass(frozen=True)
class LoadedScenario:
    """A validated scenario with each node's part, overrides applied, in topological order."""

    path: Path
    scenario: Scenario
    nodes: tuple[tuple[NodeEntry, Part], ...]


def _read(path: Path, problems: list[Problem]) -> Any:
    try:
        return read_yaml(path)
    except YamlProblem as exc:
        problems.append(Problem(str(path), None, None, str(exc)))
    return None


def misnamed_problems(folder: Path) -> list[Problem]:
    """A ``.yml`` (or ``.YAML``) file in ``folder``: named, never silently skipped."""
    return [
        Problem(str(p), None, None, "catalog files end in .yaml; rename it")
        for p in misnamed(folder)
    ]


def _problems(file: str, entry: str | None, exc: ValidationError) -> list[Problem]:
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or None
        msg = err["msg"].removeprefix("Value error, ")
        head, _, rest = msg.partition(": ")
        if rest and head.isidentifier():  # "field: message" from a model validator
            loc, msg = (head if loc is None else f"{loc}.{head}"), rest
        out.append(Problem(file, entry, loc, msg))
    return out


def load_parts(folder: Path = PARTS_DIR) -> dict[str, Part]:
    """Every part file, validated; raise CatalogError listing every problem."""
    problems: list[Problem] = misnamed_problems(folder)
    parts: dict[str, Part] = {}
    for path in sorted(folder.glob("*.yaml")):
        data = _read(path, problems)
        raw_kind = data.get("kind") if isinstance(data, dict) else None
        kind = PART_KINDS.get(raw_kind) if isinstance(raw_kind, str) else None
        if kind is None:
            if data is not None:
                problems.append(
                    Problem(
                        str(path), path.stem, "kind", f"expected one of {', '.join(PART_KINDS)}"
                    )
                )
            continue
        try:
            part = kind.model_validate(data)
        except ValidationError as exc:
            problems.extend(_problems(str(path), path.stem, exc))
            continue
        if part.id != path.stem:
            problems.append(Problem(str(path), part.id, "id", "must equal the file name"))
        parts[part.id] = part  # type: ignore[assignment]
    if problems:
        raise CatalogError(problems)
    return parts


def load_scenario(path: Path, parts: dict[str, Part] | None = None) -> LoadedScenario:
    """Read and validate a scenario file against the parts catalog.

    Raises
    ------
    CatalogError
        Malformed YAML, unknown fields, unknown parts or nodes, cycles, impossible
        values; every problem names the file, the entry and the field.
    """
    parts = load_parts() if parts is None else parts
    problems: list[Problem] = []
    file = str(path)
    data = _read(path, problems)
    if problems:
        raise CatalogError(problems)
    if not isinstance(data, dict):
        raise CatalogError([Problem(file, None, None, "expected a mapping at the top level")])
    entry = safe_repr(str(data.get("id", path.stem)))[1:-1]
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise CatalogError(_problems(file, entry, exc)) from None
    if scenario.id != path.stem:
        problems.append(Problem(file, scenario.id, "id", "must equal the file name"))
    order = _graph_order(scenario, file, problems)
    resolved = [_node_part(scenario, n, parts, file, problems) for n in order]
    _check_llm_leaves(scenario, order, resolved, file, problems)
    if problems:
        raise CatalogError(problems)
    nodes = tuple((n, p) for n, p in zip(order, resolved, strict=True) if p is not None)
    return LoadedScenario(path, scenario, nodes)


def _graph_order(scenario: Scenario, file: str, problems: list[Problem]) -> list[NodeEntry]:
    """Nodes in topological order (declaration order among siblings)."""
    names = [n.name for n in scenario.nodes]
    by_name = {n.name: n for n in scenario.nodes}
    for i, n in enumerate(scenario.nodes):
        where = f"nodes.{i}"
        if n.name == SOURCE:
            problems.append(Problem(file, n.name, f"{where}.name", "'load' names the source"))
        if names.count(n.name) > 1 and names.index(n.name) == i:
            problems.append(Problem(file, n.name, f"{where}.name", "duplicate node name"))
        if n.after != SOURCE and n.after not in by_name:
            problems.append(
                Problem(file, n.name, f"{where}.after", f"unknown node {safe_repr(n.after)}")
            )
    order: list[NodeEntry] = []
    placed = {SOURCE}
    while len(order) < len(scenario.nodes):
        ready = [n for n in scenario.nodes if n.name not in placed and n.after in placed]
        if not ready:
            break
        order.append(ready[0])
        placed.add(ready[0].name)
    for cycle in _cycles(by_name, placed):
        problems.append(
            Problem(
                file,
                cycle[0],
                "after",
                f"cycle: {' -> '.join([*cycle, cycle[0]])} never reaches 'load'",
            )
        )
    return order


def _cycles(by_name: dict[str, NodeEntry], placed: set[str]) -> list[list[str]]:
    """Each cycle among unplaced nodes once, starting at its first-declared node."""
    found: list[list[str]] = []
    seen: set[str] = set()
    for start in by_name:
        path: list[str] = []
        name = start
        while name in by_name and name not in placed and name not in seen and name not in path:
            path.append(name)
            name = by_name[name].after
        if name in path:
            loop = path[path.index(name) :]
            first = min(loop, key=list(by_name).index)
            i = loop.index(first)
            found.append(loop[i:] + loop[:i])
        seen.update(path)
    return found


def _node_part(
    scenario: Scenario, node: NodeEntry, parts: dict[str, Part], file: str, problems: list[Problem]
) -> Part | None:
    base = parts.get(node.part)
    if base is None:
        problems.append(Problem(file, node.name, "part", f"unknown part {safe_repr(node.part)}"))
        return None
    kind = type(base)
    fixed = {"id", "name", "sources", "notes", "kind"}
    extra = node.overrides
    bad = sorted(k for k in extra if k not in kind.model_fields or k in fixed)
    for key in bad:
        problems.append(
            Problem(file, node.name, key, f"unknown field for a {base.kind} part ({base.id})")
        )
    if bad:
        return None
    merged = base.model_dump() | extra
    merged["sources"] = dict(base.sources) | {
        k: f"scenario {scenario.id}, node {node.name}" for k in extra
    }
    try:
        part = kind.model_validate(merged)
    except ValidationError as exc:
        problems.extend(_problems(file, node.name, exc))
        return None
    if isinstance(part, LlmPart) and not part.explicit:
        for field, message in _llm_missing(part):
            problems.append(Problem(file, node.name, field, message))
    return part


def _llm_missing(part: LlmPart) -> list[tuple[str, str]]:
    """What an LLM node needs to be resolved by the capacity engine."""
    out = [
        (f, "required for an LLM node (or give slots and the step model)")
        for f in ("gpu", "quant", "context")
        if getattr(part, f) is None
    ]
    if (part.model is None) == (part.params_b is None):
        out.append(("model", "give exactly one of model or params_b"))
    return out


def _check_llm_leaves(
    scenario: Scenario,
    order: list[NodeEntry],
    resolved: list[Part | None],
    file: str,
    problems: list[Problem],
) -> None:
    parents = {n.after for n in scenario.nodes}
    for node, part in zip(order, resolved, strict=True):
        name = node.name
        if isinstance(part, LlmPart) and name in parents:
            problems.append(
                Problem(
                    file, name, "after", "an LLM node must be a leaf (nothing may come after it)"
                )
            )
