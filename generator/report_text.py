"""Human-readable estimate: the worked arithmetic with this config's numbers."""

from __future__ import annotations

from backpressure.engine.results import CapacityResult
from backpressure.engine.units import GIB
from backpressure.generator.estimate import Estimate
from backpressure.generator.serve_once import serving_lines
from backpressure.generator.text import (
    capacity_verdict,
    plural,
    ranges,
    room,
    weights_expression,
)


def gib(n: float) -> str:
    """Bytes as GiB with two decimals, the unit left to the column."""
    return f"{n / GIB:,.2f}"


def _arithmetic(est: Estimate) -> list[str]:
    r = est.result
    per_token = f"{r.kv_bytes_per_token:,} B/token"
    kv_label = "exact" if r.kv_basis == "exact" else f"{est.kv_heuristic:g} MiB/B heuristic"
    capped = r.kv_bytes_per_request != r.kv_bytes_per_token * r.context_tokens
    window = ", windows capped" if capped else ""
    rows = [
        (
            "weights",
            weights_expression(r.total_params, r.weights_bytes, est.bits_per_weight, "x"),
            gib(r.weights_bytes),
        ),
        (
            "KV budget",
            f"{gib(r.usable_memory_bytes)} - {gib(r.weights_bytes)} - "
            f"{gib(r.overhead_bytes)} (overhead)",
            gib(r.kv_budget_bytes),
        ),
        (
            "KV / request",
            f"{per_token} x {r.context_tokens:,} tokens ({kv_label}{window})",
            gib(r.kv_bytes_per_request),
        ),
    ]
    if r.kv_budget_bytes < 0:
        # No room left for any cache: say by how much, not a negative size.
        rows[1] = (rows[1][0], rows[1][1], room(r.kv_budget_bytes))
        slots_expr = "no KV budget"
    else:
        slots_expr = f"floor({gib(r.kv_budget_bytes)} / {gib(r.kv_bytes_per_request)})"
    width = max(len(slots_expr), *(len(expr) for _, expr, _ in rows))
    lines = [
        f"{name:<12} = {expr:<{width}} = " + (f"{value:>7} GiB" if value[:1].isdigit() else value)
        for name, expr, value in rows
    ]
    lines.append(f"{'slots':<12} = {slots_expr:<{width}} = {r.slots:>7,}")
    return lines


def _ceilings(r: CapacityResult, floor: float) -> list[str]:
    lines = [
        f"  KV slots     {plural(r.slots, 'concurrent request')} at {r.context_tokens:,} tokens"
    ]
    if not r.fits:
        # Speeds of a model that cannot load would read as a promise.
        lines.append("  bandwidth    not computed: the config does not fit")
        return lines
    if r.decode_tokens_per_s is None or r.bandwidth_concurrency is None:
        lines.append("  bandwidth    not computed: no memory-bandwidth figure for this device")
    else:
        lines.append(
            f"  bandwidth    {plural(r.bandwidth_concurrency, 'concurrent stream')} at >= "
            f"{floor:g} tok/s each (one stream alone at full context: "
            f"{r.decode_tokens_per_s:,.1f} tok/s)"
        )
        if r.bandwidth_slow_batches:
            lines.append(
                f"               but at {ranges(r.bandwidth_slow_batches)} streams each is slower:"
                " the small-batch Metal kernels read the weights again"
            )
    if r.prefill_tokens_per_s:
        lines.append(f"  prefill      {r.prefill_tokens_per_s:,.0f} prompt tokens/s")
    lines.append(f"  binding      {r.binding_ceiling or 'unknown (bandwidth not given)'}")
    return lines


def render(est: Estimate) -> str:
    """The full human report."""
    r = est.result
    head = (
        f"{est.device} · {est.model} · {est.quant} ({est.bits_per_weight:g} bits) · "
        f"{r.context_tokens:,} tokens · {est.runtime}"
        f"{f' on {est.backend}' if est.backend_choice else ''} · KV {est.kv_dtype}"
    )
    lines = [
        head,
        "",
        *_arithmetic(est),
        "",
        "ceilings",
        *_ceilings(r, est.min_stream_tokens_per_s),
        "",
        f"band     {r.error_band_reason}",
        f"verdict  {capacity_verdict(r)}",
    ]
    if est.serving is not None:
        lines += ["", *serving_lines(est.serving)]
    return "\n".join(lines)
