"""A planner question from the command line, checked, then answered from a sweep or computed.

Two questions: **plan** (``model`` and ``rps``: which configs serve the model at
that rate, ranked by cost) and **device** (``device`` alone: what it serves
best, per model and context). Inputs are checked first, each refusal one line
(:class:`PlanError`). Rates are read from the sweep output when its settings
apply; otherwise (:func:`backpressure.generator.plan.resweep.reasons`) the
configs are computed, and the answer says why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd
from backpressure.catalog.loader import Catalog
from backpressure.generator import resolve
from backpressure.generator.plan.economics import Basis, economics, prices_frame
from backpressure.generator.plan.frame import Sweep
from backpressure.generator.plan.planner import Plan, Target, plan, size
from backpressure.generator.plan.rank import best_for_device
from backpressure.generator.plan.resweep import (
    Profile,
    candidates,
    evaluate,
    planning_catalog,
    reasons,
)
from backpressure.generator.sweep.combos import swept_quants
from backpressure.generator.sweep.run import Progress
from pydantic import ValidationError


class PlanError(ValueError):
    """A question the planner refuses: one line, naming the flag and the value."""


@dataclass(frozen=True, slots=True)
class Request:
    """A question as given (ids as typed, numbers unchecked; None: not given)."""

    model: str | None = None
    device: str | None = None
    rps: float | None = None
    context: int | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    ttft_p99_ms: float | None = None
    tpot_ms: float | None = None
    quants: tuple[str, ...] = ()
    max_usd_per_hour: float | None = None
    basis: Basis = "auto"


@dataclass(frozen=True, slots=True)
class Question:
    """A checked request: catalog ids, the contexts to look at, the profile.

    ``quants`` are those asked for (empty: the sweep's); ``contexts`` holds the
    plan's one context, or the contexts a device question covers.
    """

    model: str | None
    device: str | None
    rps: float | None
    contexts: tuple[int, ...]
    profile: Profile
    quants: tuple[str, ...]
    tpot_ms: float | None
    max_usd_per_hour: float | None
    basis: Basis

    @property
    def is_plan(self) -> bool:
        """A target rate for a model (else: what a device serves best)."""
        return self.model is not None


def _positive(flag: str, value: float | None, unit: str) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise PlanError(f"{flag} must be a positive number of {unit}, not {value:g}")


def _lookup_ids(cat: Catalog, req: Request) -> tuple[str | None, str | None, tuple[str, ...]]:
    try:
        model = resolve.model_arch(cat, req.model)[0] if req.model is not None else None
        if req.device is not None:
            resolve.lookup({**cat.gpus, **cat.rigs}, "GPU or rig", req.device)
        quants = tuple(resolve.lookup(cat.quants, "quant", q).id for q in req.quants)
    except resolve.LookupError_ as exc:
        raise PlanError(str(exc)) from exc
    return model, req.device, tuple(dict.fromkeys(quants))


def _plan_context(cat: Catalog, model: str, asked: int | None, need: int) -> int:
    """The plan's context: as asked, or the smallest swept one that holds a request."""
    top = cat.archs[model].max_context
    if asked is not None:
        if asked > top:
            raise PlanError(
                f"--context {asked:,} is above {model}'s maximum context of {top:,} tokens"
            )
        if need > asked:
            raise PlanError(
                f"--prompt-tokens + --output-tokens ({need:,}) exceed --context ({asked:,})"
            )
        return asked
    if need > top:
        raise PlanError(
            f"--prompt-tokens + --output-tokens ({need:,}) exceed {model}'s "
            f"maximum context of {top:,} tokens"
        )
    return min((c for c in cat.settings.contexts if need <= c <= top), default=top)


def check(cat: Catalog, req: Request) -> Question:
    """The request with ids resolved and every number checked; raises :class:`PlanError`."""
    if req.model is None and req.device is None:
        raise PlanError("give --model ID with --rps R, or --device ID")
    if req.model is not None and req.rps is None:
        raise PlanError("--model needs --rps R, the target rate in requests per second")
    _positive("--rps", req.rps, "requests per second")
    _positive("--ttft-p99-ms", req.ttft_p99_ms, "milliseconds")
    _positive("--tpot-ms", req.tpot_ms, "milliseconds")
    _positive("--max-per-hour", req.max_usd_per_hour, "US dollars per hour")
    for flag, n in (
        ("--context", req.context),
        ("--prompt-tokens", req.prompt_tokens),
        ("--output-tokens", req.output_tokens),
    ):
        _positive(flag, n, "tokens")
    if req.output_tokens is not None and req.output_tokens < 2:
        raise PlanError("--output-tokens must be at least 2 (TPOT is measured between tokens)")
    model, device, quants = _lookup_ids(cat, req)
    s = cat.settings
    profile = Profile(
        req.prompt_tokens or s.prompt_tokens,
        req.output_tokens or s.output_tokens,
        req.ttft_p99_ms or s.ttft_budget_ms,
    )
    need = profile.prompt_tokens + profile.output_tokens
    if model is not None:
        contexts: tuple[int, ...] = (_plan_context(cat, model, req.context, need),)
    elif req.context is not None:
        if need > req.context:
            raise PlanError(
                f"--prompt-tokens + --output-tokens ({need:,}) exceed --context ({req.context:,})"
            )
        contexts = (req.context,)
    else:
        contexts = tuple(c for c in s.contexts if c >= need)
        if not contexts:
            raise PlanError(
                f"--prompt-tokens + --output-tokens ({need:,}) exceed every swept context"
            )
    return Question(
        model,
        device,
        req.rps,
        contexts,
        profile,
        quants,
        req.tpot_ms,
        req.max_usd_per_hour,
        req.basis,
    )


@dataclass(frozen=True)
class Answer:
    """What the planner found, and where its rates came from.

    ``computed`` says why rates were computed rather than read (empty: all read
    from the sweep), ``simulated`` how many configs were computed. ``configs``
    is the economics frame the answer was drawn from; ``plan`` answers a plan
    question, ``best`` a device question.
    """

    question: Question
    computed: tuple[str, ...]
    simulated: int
    configs: pd.DataFrame
    concurrency: pd.DataFrame
    plan: Plan | None
    best: pd.DataFrame | None


def _select(frame: pd.DataFrame, ids: Sequence[str]) -> pd.DataFrame:
    return frame[frame["config_id"].isin(list(ids))]


Notify = Callable[[str], None]


def _quiet(message: str) -> None:
    """No notice."""


def _rates(
    cat: Catalog,
    q: Question,
    sweep: Sweep | None,
    jobs: int,
    progress: Progress | None,
    notify: Notify,
) -> tuple[pd.DataFrame, pd.DataFrame, tuple[str, ...], int]:
    """Results and concurrency frames for the question, read or computed, and why."""
    quants = q.quants or tuple(cat.settings.sweep_quants)
    try:
        planning = planning_catalog(cat, q.profile, q.contexts, quants)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PlanError(f"settings field {where}: {first['msg']}") from exc
    combos = candidates(planning, q.model, q.device)
    if q.quants:  # the sweep adds each model's released format; a plan names its own
        combos = [c for c in combos if c.quant in q.quants]
    why = reasons(cat, q.profile, q.contexts, quants)
    if sweep is None or why:
        why = why or ["no sweep output was found"]
        notify(f"computing {len(combos):,} configs as the sweep does: {'; '.join(why)}")
        results, tables = evaluate(cat, planning, combos, jobs, progress)
        return results, tables, tuple(why), len(combos)
    have = set(sweep.results["config_id"])
    missing = [c for c in combos if c.id not in have]
    ids = [c.id for c in combos if c.id in have]
    results, tables = _select(sweep.results, ids), _select(sweep.concurrency, ids)
    if q.is_plan:  # every context of the model, for the closest configs elsewhere
        shown = list(quants) if q.quants else list(swept_quants(cat))
        rows = sweep.results[sweep.results["quant"].isin(shown)]
        results, tables = rows, _select(sweep.concurrency, rows["config_id"].tolist())
    if not missing:
        return results, tables, (), 0
    why_more = f"the sweep output lacks {len(missing):,} of these configs"
    notify(f"computing {len(missing):,} configs as the sweep does: {why_more}")
    more, more_tables = evaluate(cat, planning, missing, jobs, progress)
    merged = pd.concat([results, more]).sort_values("config_id", kind="stable")
    merged_tables = pd.concat([tables, more_tables]).sort_values(
        ["config_id", "users"], kind="stable"
    )
    return (
        merged.reset_index(drop=True),
        merged_tables.reset_index(drop=True),
        (why_more,),
        len(missing),
    )


def answer(
    cat: Catalog,
    q: Question,
    sweep: Sweep | None,
    jobs: int = 1,
    progress: Progress | None = None,
    notify: Notify = _quiet,
) -> Answer:
    """Answer a checked question from ``sweep`` (None: compute every config it needs).

    ``sweep`` should hold the question's model (or device) as
    :func:`~backpressure.generator.plan.frame.read_sweep` reads it.
    """
    results, tables, computed, n = _rates(cat, q, sweep, jobs, progress, notify)
    if q.device is not None:
        results = results[results["gpu"] == q.device]
    prices = prices_frame(cat, results["gpu"], q.basis)
    econ = economics(results.reset_index(drop=True), prices, q.profile.output_tokens)
    if q.is_plan:
        assert q.model is not None
        assert q.rps is not None
        target = Target(
            q.model,
            q.rps,
            q.contexts[0],
            q.profile.output_tokens,
            q.quants,
            (q.device,) if q.device else (),
            q.tpot_ms,
            q.max_usd_per_hour,
        )
        return Answer(q, computed, n, econ, tables, plan(econ, tables, target), None)
    assert q.device is not None
    best = best_for_device(econ, q.device, q.contexts)
    if q.rps is not None:
        best = size(best, tables, q.rps, q.profile.output_tokens, q.tpot_ms)
    return Answer(q, computed, n, econ, tables, None, best)
