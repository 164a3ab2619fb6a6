"""Fit the serving step model's constants on the fit half of published serving runs.

The datasheets and llama-bench rows give bandwidth and per-layer costs; what
they cannot give is what a busy vLLM server adds: the compute efficiency of a
mixed step (one common figure, and Hopper's own: ``GENERATIONS``), the share of
decode bandwidth it reaches (one common figure, and Ampere's own:
``BW_GENERATIONS``), the host's fixed cost per step and per sequence in it, and
the front end's cost and latency per request. This script searches those on
the *fit* half of the dense vLLM V1 cases (curves chosen by hash, see
``generator.accuracy.serving``), each curve weighing the same, minimising the
mean |log(predicted / measured)| (each clipped at ``CLIP``) of TTFT, TPOT and
output tokens/s. The
runs are of vLLM releases that schedule a step, run it and take in its outputs
before they schedule the next, so a step's host time adds to its device time
(``StepCost.host_overlaps`` false; rows of releases with async scheduling on by
default overlap, ``Case.async_scheduling``).

Then, with those fixed, the MoE kernel efficiency (``serving_moe_efficiency_vllm``:
the share of dense peak the grouped expert GEMMs reach) on the fit half of the
MoE vLLM V1 cases alone, once for one GPU and once (``_vllm_tp``) for experts
split across tensor-parallel GPUs, both refitted at each value tried of vLLM's
fixed time per MoE layer (``serving_moe_layer_overhead_s_vllm``, in place of the
llama-bench figure) and of the time a MoE layer adds to a step too large for a
captured CUDA graph, on one GPU and on several
(``serving_moe_eager_layer_s_vllm``, ``_multi_gpu``); and the llama.cpp decode
constants (its bandwidth factor and per-sequence host time) on the fit half of
the ``llama-batched-bench`` curves (``generator.accuracy.batched``).

Two MoE rates (one GPU, split) rather than one that rises with the width of
the expert slice each GPU multiplies (``e_max * w / (w + w0)``, ``w`` the
expert's intermediate width over the tensor-parallel GPUs): on a grid of
``e_max`` 0.35-1.0 and ``w0`` 100-2000 its best fit-half loss was 0.270
against 0.257 for the two rates, and its held-out errors no better.

The front end's time per request (``request_overhead_s_vllm``) is a cost of
vLLM's API server, whatever model is behind it. ``--front-end`` searches it
alone, on a grid over the dense and MoE fit halves together, every other
constant at its catalog value: what a change to how the front end is modelled
needs before the rest is refitted. The catalog's other vLLM constants were
fitted by the full run before the front end shared its time; run again now,
the dense search moves the per-request time to 11.25 ms (and the compute
efficiencies up to match), a basin whose loss over both halves is higher than
the catalog's, so they were kept until all vLLM constants are searched jointly.

The bands (``serving_band_pct_*``) are set by ``benchmarks/serving_report.py``
from the same fit half's errors and judged there on the held-out half.

Run: ``python benchmarks/fit_serving.py [--front-end]`` (prints the values to
put in ``catalog/calibration.yaml``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import replace

from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.engine.capacity import pass_overhead_s
from backpressure.engine.inputs import Constants
from backpressure.engine.serving.model import StepCost
from backpressure.engine.serving.spec import (
    bandwidth_factor,
    compute_efficiency,
    eager_layer_s,
    graph_tokens,
)
from backpressure.generator import resolve
from backpressure.generator.accuracy import batched
from backpressure.generator.accuracy.archs import arch_of
from backpressure.generator.accuracy.serving import (
    METRICS,
    Case,
    Replay,
    device,
    load_cases,
    prepare,
    run_replay,
)

# Generations with a compute efficiency of their own (serving_compute_efficiency_vllm_<gen>):
# Hopper, whose datasheet peak the fit half's H100 runs reach a far smaller share of than
# the A100 runs reach of theirs. Every other generation takes the common figure.
GENERATIONS = ("hopper",)
# Generations with a decode bandwidth share of their own (serving_bandwidth_factor_vllm_<gen>):
# Ampere, whose batch-1 vLLM decode rows (benchmarks/calibration-report.txt) reach a far
# smaller share of the datasheet bandwidth than llama-bench's do.
BW_GENERATIONS = ("ampere",)
STEPS = {
    "mfu": 0.1,
    "mfu_hopper": 0.1,
    "bw": 0.1,
    "bw_ampere": 0.1,
    "step": 1e-3,
    "seq": 20e-6,
    "request": 4e-3,
    "latency": 20e-3,
}
START = {
    "mfu": 0.6,
    "mfu_hopper": 0.6,
    "bw": 1.0,
    "bw_ampere": 1.0,
    "step": 1e-3,
    "seq": 20e-6,
    "request": 5e-3,
    "latency": 20e-3,
}
BOUNDS = {
    "mfu": (0.1, 0.95),
    "mfu_hopper": (0.1, 0.95),
    "bw": (0.4, 1.1),
    "bw_ampere": (0.4, 1.1),
    "step": (0.0, 20e-3),
    "seq": (0.0, 1e-3),
    "request": (0.0, 0.1),
    "latency": (0.0, 0.2),
}
CLIP = 1.0  # |log error| counted at most this much: a few wild rows must not steer the fit


def descend(
    loss: Callable[[dict[str, float]], float],
    theta: dict[str, float],
    steps: dict[str, float],
    bounds: dict[str, tuple[float, float]],
    rounds: int,
) -> tuple[dict[str, float], float]:
    """Coordinate descent within ``bounds``: each round halves the steps.

    Deterministic (keys in ``theta``'s order, + before -), so a refit on the
    same rows gives the same constants.
    """
    best = loss(theta)
    for _ in range(rounds):
        improved = True
        while improved:
            improved = False
            for key in theta:
                for sign in (1, -1):
                    lo, hi = bounds[key]
                    trial = {**theta, key: min(hi, max(lo, theta[key] + sign * steps[key]))}
                    if (value := loss(trial)) < best - 1e-9:
                        best, theta, improved = value, trial, True
        steps = {k: v / 2 for k, v in steps.items()}
    return theta, best


def weighted_median(pairs: list[tuple[float, float]]) -> float:
    """The value at half the total weight."""
    pairs.sort()
    half = sum(w for _, w in pairs) / 2
    acc = 0.0
    for v, w in pairs:
        acc += w
        if acc >= half:
            return v
    return pairs[-1][0]


def mfu_key(cat: Catalog, case: Case) -> str:
    """The theta key of the compute efficiency a case's GPU takes."""
    generation = cat.gpus[case.gpu].generation
    return f"mfu_{generation}" if generation in GENERATIONS else "mfu"


def bw_key(cat: Catalog, case: Case) -> str:
    """The theta key of the bandwidth share a case's GPU takes."""
    generation = cat.gpus[case.gpu].generation
    return f"bw_{generation}" if generation in BW_GENERATIONS else "bw"


def current_bw(cat: Catalog, constants: Constants, case: Case) -> float:
    """The bandwidth share the catalog gives the case's GPU now (its cost was built with it)."""
    return bandwidth_factor(constants, "vllm", cat.gpus[case.gpu].generation)


def split_experts(case: Case) -> bool:
    """Whether the case's experts are split across tensor-parallel GPUs (vLLM's default)."""
    return case.gpus > 1 and not case.expert_parallel


def current_mfu(cat: Catalog, constants: Constants, case: Case) -> float:
    """The compute efficiency the catalog gives the case's GPU now (its cost was built with it)."""
    return compute_efficiency(constants, "vllm", cat.gpus[case.gpu].generation)


def cost_with(
    base: StepCost,
    mfu0: float,
    bw0: float,
    theta: dict[str, float],
    mfu: str,
    bw: str,
) -> StepCost:
    """A case's step cost with the fitted constants replaced (``mfu``, ``bw``: its keys)."""
    return replace(
        base,
        flops_per_s=base.flops_per_s / mfu0 * theta[mfu],
        bandwidth_bytes_per_s=base.bandwidth_bytes_per_s / bw0 * theta[bw],
        step_overhead_s=theta["step"],
        seq_overhead_s=theta["seq"],
        request_overhead_s=theta["request"],
        request_latency_s=theta["latency"],
    )


def case_cost(
    cat: Catalog, k: Constants, case: Case, rep: Replay, theta: dict[str, float]
) -> StepCost:
    """The case's step cost under ``theta``, its GPU generation's keys picked."""
    return cost_with(
        rep.server.cost,
        current_mfu(cat, k, case),
        current_bw(cat, k, case),
        theta,
        mfu_key(cat, case),
        bw_key(cat, case),
    )


def errors(
    cat: Catalog, prepared: list[tuple[Case, Replay]], theta: dict[str, float]
) -> list[tuple[Case, str, float]]:
    """(case, metric, log error) for every measured metric."""
    k = resolve.constants(cat)
    out = []
    for c, p in prepared:
        cost = case_cost(cat, k, c, p, theta)
        pred = run_replay(p, cost)
        for m in METRICS:
            if m in c.measured and m in pred and math.isfinite(pred[m]) and pred[m] > 0:
                out.append((c, m, math.log(pred[m] / c.measured[m])))
    return out


def curve_loss(
    prepared: list[tuple[Case, Replay]], predict: Callable[[Case, Replay], dict[str, float]]
) -> float:
    """Mean clipped |log(predicted / measured)| over every metric, each curve weighing the same."""
    weight: dict[str, int] = {}
    for c, _ in prepared:
        weight[c.curve] = weight.get(c.curve, 0) + len(c.measured)
    num = den = 0.0
    for c, p in prepared:
        pred = predict(c, p)
        for m in METRICS:
            if m in c.measured and math.isfinite(pred.get(m, math.nan)) and pred[m] > 0:
                num += min(abs(math.log(pred[m] / c.measured[m])), CLIP) / weight[c.curve]
                den += 1.0 / weight[c.curve]
    return num / den


def fit(cat: Catalog, prepared: list[tuple[Case, Replay]]) -> tuple[dict[str, float], float]:
    """Coordinate search with shrinking steps; returns the constants and the loss."""
    k = resolve.constants(cat)

    def loss(theta: dict[str, float]) -> float:
        return curve_loss(prepared, lambda c, p: run_replay(p, case_cost(cat, k, c, p, theta)))

    return descend(loss, dict(START), STEPS, BOUNDS, rounds=5)


MOE_GRID = [0.01 * 1.25**i for i in range(22)]  # 1 % to 100 % of dense peak, log-spaced


def fit_moe(
    cat: Catalog, prepared: list[tuple[Case, Replay]], theta: dict[str, float]
) -> tuple[float, float]:
    """The MoE kernel efficiency over a log grid, then halving steps; returns it and the loss.

    ``prepared`` were built with the efficiency at 1.0, so a trial scales the
    expert compute of each case's step cost by the value tried.
    """
    k = resolve.constants(cat)

    def loss(eff: float) -> float:
        def predict(c: Case, p: Replay) -> dict[str, float]:
            base = case_cost(cat, k, c, p, theta)
            return run_replay(p, replace(base, moe_flops_per_s=base.moe_flops_per_s * eff))

        return curve_loss(prepared, predict)

    best_eff = min(MOE_GRID, key=loss)
    best = loss(best_eff)
    step = best_eff * 0.125
    for _ in range(4):
        for trial in (best_eff - step, best_eff + step):
            if 0.005 <= trial <= 1.0 and (value := loss(trial)) < best - 1e-9:
                best, best_eff = value, trial
        step /= 2
    return best_eff, best


# vLLM's fixed time per MoE layer of a pass: its fused MoE kernel is not llama.cpp's,
# whose per-layer figure (moe_layer_overhead_s_<platform>) comes from llama-bench
MOE_LAYER_GRID = [i * 5e-6 for i in range(21)]  # 0 to 100 us
# What a MoE layer adds to a step too large for a captured CUDA graph, on one GPU
# and on several (where the eager collectives wait for the slowest host)
EAGER_GRID = [i * 100e-6 for i in range(31)]  # 0 to 3 ms
ROUNDS = 2  # alternations between the grids


def with_moe_layer(
    cat: Catalog, k: Constants, case: Case, rep: Replay, seconds: float, eager: tuple[float, float]
) -> Replay:
    """The case's replay with its passes paying ``seconds`` per MoE layer, and its
    steps above the CUDA-graph limit ``eager`` per MoE layer (one GPU, several)."""
    arch = arch_of(cat, case.model)
    trial = pass_overhead_s(device(cat, case.gpu, case.gpus), k, arch, seconds)
    sched = rep.server.scheduler
    layers = arch.experts.moe_layers if arch.experts is not None else 0
    by_gpus = replace(k, serving_moe_eager_layer_s={"vllm": eager[0], "vllm_multi_gpu": eager[1]})
    cost = replace(
        rep.server.cost,
        pass_overhead_s=trial,
        graph_tokens=graph_tokens(sched.max_seqs, sched.max_batched_tokens),
        eager_s=layers * eager_layer_s(by_gpus, "vllm", case.gpus),
    )
    return replace(rep, server=replace(rep.server, cost=cost))


Times = tuple[float, float, float]  # per MoE layer: every pass, eager on one GPU, on several


def fit_moe_layer(
    cat: Catalog, prepared: list[tuple[Case, Replay]], theta: dict[str, float]
) -> tuple[Times, dict[str, float], float]:
    """vLLM's per-MoE-layer times with both MoE efficiencies refitted at each triple tried.

    The per-pass time and the two eager times are searched on their grids in
    turn (``ROUNDS`` times, each from the others' best). The objective weighs
    every curve the same across the two groups (experts on one GPU, experts
    split across tensor-parallel GPUs). Returns the times, the efficiencies by
    key and the loss.
    """
    k = resolve.constants(cat)
    tried: dict[Times, tuple[dict[str, float], float]] = {}

    def score(times: Times) -> float:
        if times not in tried:
            moved = [(c, with_moe_layer(cat, k, c, p, times[0], times[1:])) for c, p in prepared]
            effs, total, curves = {}, 0.0, 0
            for key, split in (("vllm", False), ("vllm_tp", True)):
                group = [(c, p) for c, p in moved if split_experts(c) == split]
                n = len({c.curve for c, _ in group})
                effs[key], loss = fit_moe(cat, group, theta)
                total += loss * n
                curves += n
            tried[times] = (effs, total / curves)
        return tried[times][1]

    best: Times = (k.serving_moe_layer_overhead_s.get("vllm", 0.0), 0.0, 0.0)
    for _ in range(ROUNDS):
        for axis, grid in ((1, EAGER_GRID), (2, EAGER_GRID), (0, MOE_LAYER_GRID)):
            trials = [(*best[:axis], v, *best[axis + 1 :]) for v in grid]
            best = min(trials, key=score)
    effs, loss = tried[best]
    return best, effs, loss


LLAMA_STEPS = {"bw": 0.1, "seq": 20e-6, "step": 1e-3}
LLAMA_BOUNDS = {"bw": (0.4, 1.5), "seq": (0.0, 1e-3), "step": (0.0, 20e-3)}


def fit_llama(cat: Catalog) -> tuple[dict[str, float], float, int]:
    """llama.cpp's bandwidth factor, per-sequence and per-step host time on the fit half.

    Fitted on the decode of the fit-half ``llama-batched-bench`` curves (TPOT and
    S_TG; their device has no compute figure, so the prompt phase is not used).
    """
    cases, _ = batched.load_batched(cat)
    base = []
    for c in cases:
        if not c.holdout and (got := batched.cost_for(cat, c)) is not None:
            base.append((c, got))
    bw0 = resolve.constants(cat).serving_bandwidth_factor.get("llama.cpp", 1.0)

    def loss(theta: dict[str, float]) -> float:
        errs = []
        for c, (cost, compute) in base:
            trial = replace(
                cost,
                bandwidth_bytes_per_s=cost.bandwidth_bytes_per_s / bw0 * theta["bw"],
                seq_overhead_s=theta["seq"],
                step_overhead_s=theta["step"],
            )
            pred = batched.predict(c, trial, compute)
            errs += [abs(math.log(pred[m] / v)) for m, v in c.measured.items() if m in pred]
        return sum(min(e, CLIP) for e in errs) / len(errs)

    k = resolve.constants(cat)
    theta = {
        "bw": bw0,
        "seq": k.seq_overhead_s.get("llama.cpp", 0.0),
        "step": k.step_overhead_s.get("llama.cpp", 0.0),
    }
    theta, best = descend(loss, theta, LLAMA_STEPS, LLAMA_BOUNDS, rounds=6)
    return theta, best, len(base)


# The front end's time per request, on a grid over every fit-half vLLM curve
REQUEST_GRID = [i * 0.25e-3 for i in range(41)]  # 0 to 10 ms


def fit_request(cat: Catalog) -> list[tuple[float, float]]:
    """The front end's time per request on the dense and MoE fit halves together.

    Every other constant stays at its catalog value and every curve weighs the
    same. Returns (loss, seconds) for each value of the grid, best first.
    """
    cases, _ = load_cases(cat)
    chosen = [c for c in cases if c.v1 and not c.holdout]
    prepared = [(c, p) for c in chosen if (p := prepare(cat, c)) is not None]

    def loss(seconds: float) -> float:
        return curve_loss(
            prepared,
            lambda c, p: run_replay(p, replace(p.server.cost, request_overhead_s=seconds)),
        )

    return sorted((loss(v), v) for v in REQUEST_GRID)


def main(argv: list[str]) -> int:
    cat = load_catalog()
    if argv == ["--front-end"]:
        ranked = fit_request(cat)
        print("request_overhead_s_vllm on every fit-half vLLM V1 curve, dense and MoE:")
        for value, seconds in ranked[:5]:
            print(f"  {seconds * 1e3:5.2f} ms: mean clipped |log error| {value:.4f}")
        return 0
    if argv:
        print("usage: python benchmarks/fit_serving.py [--front-end]", file=sys.stderr)
        return 2
    cases, _ = load_cases(cat)
    chosen = [c for c in cases if c.v1 and not c.holdout and not arch_of(cat, c.model).is_moe]
    prepared = [(c, p) for c in chosen if (p := prepare(cat, c)) is not None]
    print(
        f"fitting on {len(prepared)} dense vLLM V1 cases in "
        f"{len({c.curve for c, _ in prepared})} curves "
        f"({sum(len(c.measured) for c, _ in prepared)} metrics)"
    )
    theta, best = fit(cat, prepared)
    errs = [abs(e) for _, _, e in errors(cat, prepared, theta)]
    med = sorted(errs)[len(errs) // 2]
    print(f"mean clipped |log error| {best:.3f}; median |error| {math.expm1(med) * 100:.0f} %")
    for k, v in theta.items():
        print(f"  {k:8s} {v:.6g}")
    # The MoE kernel efficiency, on the MoE fit half only, with the dense fit fixed:
    # on one GPU (or experts dealt out whole), and split across tensor-parallel GPUs.
    moe_consts = replace(
        resolve.constants(cat),
        serving_moe_efficiency={"vllm": 1.0, "vllm_tp": 1.0, "llama.cpp": 1.0},
    )
    moe = [c for c in cases if c.v1 and not c.holdout and arch_of(cat, c.model).is_moe]
    moe_prepared = [(c, p) for c in moe if (p := prepare(cat, c, moe_consts)) is not None]
    (seconds, eager_one, eager_multi), effs, moe_loss = fit_moe_layer(cat, moe_prepared, theta)
    for key, split in (("vllm", False), ("vllm_tp", True)):
        group = [(c, p) for c, p in moe_prepared if split_experts(c) == split]
        print(
            f"MoE: {len(group)} fit-half MoE vLLM V1 cases in "
            f"{len({c.curve for c, _ in group})} curves; "
            f"serving_moe_efficiency_{key} {effs[key]:.4g}"
        )
    print(
        f"MoE: serving_moe_layer_overhead_s_vllm {seconds:.4g}, "
        f"serving_moe_eager_layer_s_vllm {eager_one:.4g}, "
        f"serving_moe_eager_layer_s_vllm_multi_gpu {eager_multi:.4g} "
        f"(mean clipped |log error| {moe_loss:.3f}, both groups, every curve the same weight)"
    )
    llama, llama_loss, n = fit_llama(cat)
    print(f"llama.cpp: {n} fit-half llama-batched-bench rows; loss {llama_loss:.3f}")
    for k, v in llama.items():
        print(f"  {k:8s} {v:.6g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
