"""Plain inputs of the load simulation: the graph, its nodes and the failure rules."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import numpy.typing as npt
from backpressure.engine.serving.model import StepCost
from backpressure.engine.serving.step import expert_reads, pack
from backpressure.engine.sim.llm import times_lanes
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
    """A model server as the tick loop sees it: its limits, its step cost, a request profile.

    Attributes
    ----------
    slots : int
        Requests of this profile the server holds at once
        (:func:`backpressure.engine.serving.spec.requests_held`) [-].
    cost : StepCost
        The serving model's step cost (:mod:`backpressure.engine.serving.step`).
    max_batched_tokens : int
        Tokens one step may carry, decode and prompt chunks together [tokens].
    ubatch_tokens : int
        Tokens of one forward pass; a step of more runs as several passes [tokens].
    prompt_tokens, output_tokens : int
        Request profile [tokens].

    Notes
    -----
    How a step's mix and a request's slot time follow from these is in
    :mod:`backpressure.engine.sim.llm`.
    """

    slots: int
    cost: StepCost
    max_batched_tokens: int
    ubatch_tokens: int
    prompt_tokens: int = 512
    output_tokens: int = 256

    @classmethod
    def explicit(
        cls,
        slots: int,
        prefill_tokens_per_s: float,
        step_fixed_s: float,
        step_per_kv_token_s: float,
        step_compute_per_seq_s: float,
        prompt_tokens: int = 512,
        output_tokens: int = 256,
    ) -> LlmSpec:
        """A server given by five numbers instead of a catalog config.

        The numbers become a step cost with unit bandwidth and unit FLOPs per
        token: ``step_fixed_s`` is the weight read, ``step_per_kv_token_s`` the
        read per KV token, ``1 / prefill_tokens_per_s`` the compute per token and
        ``step_compute_per_seq_s`` the host's time per sequence, so a decode step
        of ``b`` streams holding ``k`` KV tokens costs
        ``max(step_fixed_s + k step_per_kv_token_s, t / prefill_tokens_per_s,
        b step_compute_per_seq_s)`` for its ``t`` tokens. The token budget is large
        enough never to bind.
        """
        cost = StepCost(
            weight_bytes=step_fixed_s,
            expert_bytes=0.0,
            num_experts=0,
            experts_per_token=0,
            kv_read_bytes_per_token=step_per_kv_token_s,
            window_read_bytes_per_token=0.0,
            window=0,
            bandwidth_bytes_per_s=1.0,
            flops_per_token=1.0,
            attn_flops_per_pair=0.0,
            flops_per_s=prefill_tokens_per_s,
            pass_overhead_s=0.0,
            step_overhead_s=0.0,
            seq_overhead_s=step_compute_per_seq_s,
        )
        budget = slots * (prompt_tokens + 1) + prompt_tokens
        return cls(slots, cost, budget, budget, prompt_tokens, output_tokens)

    @property
    def experts_len(self) -> int:
        """Entries of the distinct-experts table a step can index [-]."""
        return max(self.max_batched_tokens, self.slots + 1) + 1


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

    ``costs`` is ``(lanes, COST_FIELDS)`` (each lane's packed step cost),
    ``experts`` ``(lanes, k)`` (its distinct-experts table, zero-padded) and
    ``ints`` ``(5, lanes)``: slots, prompt tokens, output tokens, step token
    budget and tokens per pass. ``slots``, ``prompt_tokens`` and
    ``output_tokens`` are the same as floats. A lane computes exactly what its
    own :class:`LlmSpec` would.
    """

    costs: Array
    experts: Array
    ints: npt.NDArray[np.int64]
    slots: Array
    prompt_tokens: Array
    output_tokens: Array

    @classmethod
    def of(cls, llms: Sequence[LlmSpec], lanes: Sequence[int]) -> LlmLanes:
        """Config ``i``'s numbers repeated over its ``lanes[i]`` lanes."""
        width = max(m.experts_len for m in llms)
        tables = np.zeros((len(llms), width))
        for i, m in enumerate(llms):
            c = m.cost
            tables[i, : m.experts_len] = expert_reads(c, m.experts_len - 1)
        ints = np.array(
            [
                [m.slots, m.prompt_tokens, m.output_tokens, m.max_batched_tokens, m.ubatch_tokens]
                for m in llms
            ],
            dtype=np.int64,
        )
        costs = np.stack([pack(m.cost) for m in llms])
        rep = np.repeat(ints, lanes, axis=0)
        return cls(
            np.ascontiguousarray(np.repeat(costs, lanes, axis=0)),
            np.ascontiguousarray(np.repeat(tables, lanes, axis=0)),
            np.ascontiguousarray(rep.T),
            rep[:, 0].astype(np.float64),
            rep[:, 1].astype(np.float64),
            rep[:, 2].astype(np.float64),
        )


def llm_times(llm: LlmSpec | LlmLanes, inflight: Array) -> tuple[Array, Array]:
    """Slot time and time to first token per lane at ``inflight`` sequences [s].

    See :mod:`backpressure.engine.sim.llm`.
    """
    lanes = llm if isinstance(llm, LlmLanes) else LlmLanes.of([llm], [inflight.size])
    return times_lanes(lanes.costs, lanes.experts, lanes.ints, np.asarray(inflight, np.float64))


def slot_time_s(llm: LlmSpec | LlmLanes, inflight: Array) -> Array:
    """Seconds one request holds a slot with ``inflight`` sequences running [s]."""
    return llm_times(llm, inflight)[0]
