"""One config served at a concurrency or a rate: what ``estimate --concurrency/--rps`` adds.

The same engine as the sweep (:mod:`backpressure.engine.serving`), with the
request profile and queue settings of the catalog unless the command line
overrides them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from backpressure.catalog.loader import Catalog
from backpressure.engine.results import CapacityResult
from backpressure.engine.serving.breaking import (
    Epochs,
    closed_loop_point,
    concurrency_table,
    open_loop,
    saturation_rps,
)
from backpressure.engine.serving.spec import server
from backpressure.generator import resolve, text
from backpressure.generator.sweep.rig import LoadSettings, seed_of, serving_key


class ServingError(ValueError):
    """The config cannot be served (does not fit, or no bandwidth or FLOPS figure)."""


@dataclass(frozen=True, slots=True)
class Load:
    """What was asked: a concurrency or a rate, with the request profile and limits."""

    concurrency: int | None
    rps: float | None
    prompt_tokens: int
    output_tokens: int
    max_num_seqs: int | None
    max_num_batched_tokens: int | None


def serve_config(
    cat: Catalog, cfg: resolve.Config, cap: CapacityResult, load: Load
) -> dict[str, Any]:
    """The serving numbers of one config under ``load``, as ``estimate --json`` prints them."""
    s = LoadSettings.from_catalog(cat)
    if load.prompt_tokens + load.output_tokens > cap.context_tokens:
        raise ServingError(
            f"--prompt-tokens + --output-tokens ({load.prompt_tokens + load.output_tokens:,}) "
            f"exceed --context ({cap.context_tokens:,})"
        )
    srv = server(
        cfg.device,
        cfg.runtime,
        cfg.fmt,
        cfg.constants,
        cfg.arch,
        cap,
        load.prompt_tokens,
        load.output_tokens,
        s.queue_depth_per_slot,
        s.queue_max_age_s,
        load.max_num_seqs,
        load.max_num_batched_tokens,
    )
    if srv is None:
        why = "does not fit" if not cap.fits else text.missing_figure(cap)
        raise ServingError(f"cannot simulate serving: {why}")
    band = resolve.serving_band(cat, cfg.runtime_id, cfg.arch is not None and cfg.arch.is_moe, cap)
    out: dict[str, Any] = {
        "prompt_tokens": load.prompt_tokens,
        "output_tokens": load.output_tokens,
        "max_num_seqs": srv.scheduler.max_seqs,
        "max_num_batched_tokens": srv.scheduler.max_batched_tokens,
        "serving_band_pct": band.pct,
        "serving_band_reason": band.reason,
    }
    if load.concurrency is not None:
        n = load.concurrency
        c = closed_loop_point(srv, n, load.prompt_tokens, load.output_tokens)
        out.update(
            concurrency=n,
            ttft_ms=c.ttft_ms,
            tpot_ms=c.tpot_ms,
            itl_ms=c.itl_ms,
            output_tokens_per_s=c.output_tokens_per_s,
            requests_per_s=c.requests_per_s,
            running=c.running,
        )
    if load.rps is not None:
        custom = LoadSettings(
            **{
                **_fields(s),
                "prompt_tokens": load.prompt_tokens,
                "output_tokens": load.output_tokens,
            }
        )
        search, limits = custom.search(), custom.limits()
        times = Epochs(seed_of(serving_key(srv, custom), custom.seed))
        # the soak rule needs the server's saturation rate, from its closed loop
        sat = saturation_rps(concurrency_table(srv, load.prompt_tokens, load.output_tokens, search))
        v = open_loop(
            srv,
            times,
            load.rps,
            load.prompt_tokens,
            load.output_tokens,
            limits,
            search.window(load.rps),
            sat,
        )
        out.update(
            rps=load.rps,
            saturation_rps=sat,
            ttft_ms_p50=_ms(v.ttft_p50_s),
            ttft_ms_p99=_ms(v.ttft_p99_s),
            e2e_ms_p99=_ms(v.e2e_p99_s),
            goodput_rps=v.goodput_rps,
            lost_share=v.lost_share,
            holds=v.passed,
            bottleneck=(
                f"holds at {text.rps(load.rps)} rps"
                if v.passed
                else f"{text.rule_text(v.rule or '', custom)} at {text.rps(load.rps)} rps"
            ),
        )
    return out


def _ms(seconds: float) -> float | None:
    """Milliseconds, None for an infinite percentile (a request was lost)."""
    return None if not math.isfinite(seconds) else seconds * 1e3


def _fields(s: LoadSettings) -> dict[str, Any]:
    return {f: getattr(s, f) for f in s.__dataclass_fields__}


def serving_lines(out: dict[str, Any]) -> list[str]:
    """The human table of ``estimate --concurrency/--rps``."""
    lines = [
        "serving",
        f"  profile      {out['prompt_tokens']:,} prompt + {out['output_tokens']:,} output tokens; "
        f"max_num_seqs {out['max_num_seqs']:,}, {out['max_num_batched_tokens']:,} tokens a step",
    ]
    if "concurrency" in out:
        per_user = 1000.0 / out["tpot_ms"] if out["tpot_ms"] > 0 else math.inf
        lines += [
            f"  users        {out['concurrency']:,} (closed loop)",
            f"  TTFT         {text.seconds(out['ttft_ms'] / 1000)} mean",
            f"  TPOT         {out['tpot_ms']:,.1f} ms mean ({per_user:,.1f} tokens/s per user)",
            f"  throughput   {out['output_tokens_per_s']:,.0f} output tokens/s, "
            f"{text.rps(out['requests_per_s'])} requests/s, {out['running']:,.1f} running",
        ]
    if "rps" in out:

        def ms(v: float | None, tail: str) -> str:
            # None: more than the tail never got there (lost, or unfinished when the
            # run stopped once a rule had fired), so the percentile is unbounded
            return (
                f"unbounded (over {tail} lost or unfinished)"
                if v is None
                else text.seconds(v / 1000)
            )

        lines += [
            f"  offered      {text.rps(out['rps'])} requests/s (Poisson); the server "
            f"saturates at {text.rps(out['saturation_rps'])}",
            f"  TTFT         p50 {ms(out['ttft_ms_p50'], 'half')}, "
            f"p99 {ms(out['ttft_ms_p99'], '1 %')}",
            f"  latency      p99 {ms(out['e2e_ms_p99'], '1 %')}; "
            f"goodput {text.rps(out['goodput_rps'])}"
            f" requests/s; {text.share(out['lost_share'])} lost",
            f"  verdict      {out['bottleneck']}",
        ]
    lines.append(f"  band         {out['serving_band_reason']}")
    return lines
