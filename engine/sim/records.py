"""Flat result records of the load simulation."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TickRow:
    """One node in one tick. Counts are fluid requests; times in ms; rates per second.

    ``utilization`` is busy servers over servers (LLM: occupied slots over slots);
    ``p50_ms``/``p99_ms`` are this node's own time in system, waiting included;
    ``ttft_ms`` (LLM only) is the 99th-percentile time to first token from the
    user's side: every upstream node's p99, this node's queue wait and the prefill.
    ``error_budget_left`` is the share of the run's error budget not yet spent by
    requests lost at this node.
    """

    node: str
    tick: int
    offered: float
    admitted: float
    served: float
    backlog: float
    dropped_shed: float
    dropped_aged: float
    refused_block: float
    utilization: float
    p50_ms: float
    p99_ms: float
    ttft_ms: float
    tokens_per_s: float
    error_budget_left: float


@dataclass(frozen=True, slots=True)
class NodeSummary:
    """One node over a whole run.

    Worst values are maxima of the rolling-window means the rules judge.
    """

    node: str
    mean_utilization: float
    peak_utilization: float
    max_backlog: float
    worst_p99_ms: float
    worst_ttft_ms: float
    offered: float
    served: float
    dropped_shed: float
    dropped_aged: float
    refused_block: float
    error_budget_left: float


@dataclass(frozen=True, slots=True)
class RunReport:
    """The verdict of one run (one lane).

    ``failing_rule`` is one of ``ttft``, ``p99``, ``error_budget``, ``soak`` (the
    earliest to fire; ties in that order), ``failing_node`` the node the
    bottleneck line names, ``fail_s`` when the rule fired [s].
    """

    rps: float
    passed: bool
    failing_rule: str | None
    failing_node: str | None
    fail_s: float | None
    bottleneck: str
    worst_p99_ms: float
    worst_ttft_ms: float
    error_budget_left: float
    nodes: tuple[NodeSummary, ...]


@dataclass(frozen=True, slots=True)
class SweepReport:
    """A load sweep: the lowest failing level and what broke there.

    ``breaking_rps`` is None when every level passed; ``bottleneck`` is then the
    line for the highest level.
    """

    breaking_rps: float | None
    bottleneck: str
    failing_node: str | None
    failing_rule: str | None
    points: tuple[RunReport, ...]
