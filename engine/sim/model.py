"""Plain inputs of the load simulation: the graph, its nodes and the failure rules."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum

import numpy as np
import numpy.typing as npt
from backpressure.engine.sim.queueing import Discipline
from backpressure.engine.sim.traffic import SourceSpec

Array = npt.NDArray[np.float64]

# One tick is 100 ms. Fine enough that a 1500 ms TTFT budget spans 15 ticks and a
# 500 ms p99 SLO 5, so breaches are resolved to well under their size; coarse
# enough that a 10-minute run is 6,000 ticks and a 40-point sweep of it stays
# fast. Service times shorter than a tick are handled in closed form (M/M/1).
TICK_S = 0.1

SOURCE = "load"  # the name a first node gives as its upstream


class NodeKind(StrEnum):
    """Server: an app tier, database or queue; LLM: a model on a GPU with slots."""

    SERVER = "server"
    LLM = "llm"


@dataclass(frozen=True, slots=True)
class LlmSpec:
    """What the capacity engine says about a model on a GPU, plus a request profile.

    Attributes
    ----------
    slots : int
        Concurrent sequences the KV cache holds [-].
    prefill_tokens_per_s : float
        Prompt processing speed [tokens/s].
    step_fixed_s, step_per_kv_token_s, step_compute_per_seq_s : float
        Decode step model: a step of ``b`` streams holding ``k`` KV tokens takes
        ``max(step_fixed_s + k * step_per_kv_token_s, b * step_compute_per_seq_s)``
        seconds and yields one token per stream [s], [s/token], [s/sequence].
    prompt_tokens, output_tokens : int
        Request profile [tokens].
    """

    slots: int
    prefill_tokens_per_s: float
    step_fixed_s: float
    step_per_kv_token_s: float
    step_compute_per_seq_s: float
    prompt_tokens: int = 512
    output_tokens: int = 256

    @property
    def kv_tokens_per_stream(self) -> float:
        """KV tokens a stream holds on average: its prompt and half its output [tokens]."""
        return self.prompt_tokens + 0.5 * self.output_tokens

    @property
    def prompt_s(self) -> float:
        """Seconds to process one prompt [s]."""
        return self.prompt_tokens / self.prefill_tokens_per_s


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node of the graph, as plain numbers.

    Attributes
    ----------
    name : str
        Unique node name.
    parent : str
        Upstream node name, or ``"load"`` for the source.
    kind : NodeKind
        server or llm.
    discipline : Discipline
        shed, buffer or block.
    servers : int
        Workers, pool connections or (LLM) slots [-].
    service_s : float
        Server: time one request holds a server [s]. Unused for LLM nodes.
    capacity_rps : float
        Server: requests/s it completes when busy; ``servers / service_s`` unless a
        part states a throughput (a message queue) [requests/s].
    max_depth : float
        Work it may hold between ticks [requests]; 0 holds nothing.
    max_age_s : float or None
        Queued work older than this is abandoned [s]; None keeps it.
    lifo : bool
        Adaptive LIFO: serve newest first once the oldest waiter is older than
        ``lifo_after_s`` [s].
    resource : str
        What its servers are called in the one-line bottleneck ("pool", "workers").
    llm : LlmSpec or None
        Required for LLM nodes.
    """

    name: str
    parent: str
    kind: NodeKind = NodeKind.SERVER
    discipline: Discipline = Discipline.SHED
    servers: int = 1
    service_s: float = 0.01
    capacity_rps: float = 100.0
    max_depth: float = 0.0
    max_age_s: float | None = None
    lifo: bool = True
    lifo_after_s: float = 0.5
    resource: str = "workers"
    llm: LlmSpec | None = None


@dataclass(frozen=True, slots=True)
class Rules:
    """Failure rules of a scenario.

    Attributes
    ----------
    p99_slo_ms : float or None
        End-to-end p99 latency objective for request paths that end in a server [ms].
    ttft_budget_ms : float
        Hard time-to-first-token budget for paths that end in an LLM [ms].
    availability : float
        Share of requests that must be served; the rest is the error budget [-].
    soak_utilization : float
        A node whose utilization averages at least this over ``soak_s`` fails [-].
    soak_s : float
        Soak window [s].
    window_s : float
        Latency and TTFT are judged on their rolling mean over this window, and the
        M/M/1 factor uses utilization averaged over it [s].
    """

    p99_slo_ms: float | None = 500.0
    ttft_budget_ms: float = 1500.0
    availability: float = 0.999
    soak_utilization: float = 0.85
    soak_s: float = 120.0
    window_s: float = 10.0


@dataclass(frozen=True, slots=True)
class SimSpec:
    """A scenario reduced to numbers: source, nodes in topological order, rules."""

    name: str
    source: SourceSpec
    nodes: tuple[NodeSpec, ...]
    rules: Rules = field(default_factory=Rules)
    duration_s: float = 60.0

    @property
    def ticks(self) -> int:
        """Number of ticks in the run [-]."""
        return max(1, round(self.duration_s / TICK_S))

    def children(self, name: str) -> tuple[NodeSpec, ...]:
        """Nodes fed by ``name``, in declaration order."""
        return tuple(n for n in self.nodes if n.parent == name)


@dataclass(frozen=True, slots=True)
class LlmLanes:
    """:class:`LlmSpec` with one value per lane, so one run can hold several configs.

    Same fields and units as :class:`LlmSpec`, each a float array of shape
    ``(lanes,)``, plus its two derived numbers computed once per config; the step
    model below takes either, with the same arithmetic, so a lane computes exactly
    what its own :class:`LlmSpec` would.
    """

    slots: Array
    prefill_tokens_per_s: Array
    step_fixed_s: Array
    step_per_kv_token_s: Array
    step_compute_per_seq_s: Array
    prompt_tokens: Array
    output_tokens: Array
    kv_tokens_per_stream: Array
    prompt_s: Array

    @classmethod
    def of(cls, llms: Sequence[LlmSpec], lanes: Sequence[int]) -> LlmLanes:
        """Config ``i``'s numbers repeated over its ``lanes[i]`` lanes."""
        return cls(
            *(
                np.repeat(np.array([getattr(m, f.name) for m in llms], dtype=np.float64), lanes)
                for f in fields(cls)
            )
        )


def step_time_s(llm: LlmSpec | LlmLanes, batch: Array) -> Array:
    """Seconds per decode step for ``batch`` streams mid-generation [s].

    Each stream holds its prompt plus, on average, half its output in the KV cache.
    """
    kv_tokens = batch * llm.kv_tokens_per_stream
    return np.maximum(
        llm.step_fixed_s + kv_tokens * llm.step_per_kv_token_s, batch * llm.step_compute_per_seq_s
    )


def prefill_s(llm: LlmSpec | LlmLanes) -> float | Array:
    """Seconds to process one prompt [s]."""
    return llm.prompt_s


def slot_time_s(llm: LlmSpec | LlmLanes, batch: Array) -> Array:
    """Seconds one request holds a slot at this batch size: prefill plus decode [s]."""
    return prefill_s(llm) + llm.output_tokens * step_time_s(llm, batch)
