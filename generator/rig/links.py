"""Links into the rig builder: a config page's config loaded as a rig, ready to run.

The rig is the sweep's own: Poisson load straight into the model server, which
buffers ``queue_depth_per_slot`` requests per request it holds and abandons
those that waited ``queue_max_age_s`` (catalog/settings.yaml), judged by the
settings' rules, at the config's breaking rate, with a sweep up to twice that.
"""

from __future__ import annotations

import math
from typing import Any

from backpressure.generator.rig.doc import Rig, RigNode, fragment

PAGE = "rig/"
RUN_S = 600.0
SWEEP_POINTS = 20


def nice_step(x: float) -> float:
    """A round step near ``x``: 1, 2 or 5 times a power of ten."""
    power = 10.0 ** math.floor(math.log10(x))
    m = x / power
    step = 1 if m < 1.5 else 2 if m < 3.5 else 5 if m < 7.5 else 10
    return float(f"{step * power:.1g}")


def config_rig(row: Any, lim: Any, settings: Any) -> Rig:
    """The rig of one config: its server alone under the sweep's settings.

    ``row`` is a :class:`~backpressure.generator.records.ResultRow`, ``lim`` the
    page :class:`~backpressure.generator.site.pages.Limits`, ``settings`` the
    catalog's settings.
    """
    ref = row.breaking_rps or row.saturation_rps or 1.0
    rps = float(f"{ref:.3g}")
    held = row.max_concurrency or 1
    depth = max(1, math.floor(settings.queue_depth_per_slot * held))
    node = RigNode(
        "llm",
        "llm-server",
        "load",
        (
            ("config", row.config_id),
            ("discipline", "buffer"),
            ("max_depth", depth),
            ("max_age_s", float(settings.queue_max_age_s)),
            ("prompt_tokens", lim.prompt_tokens),
            ("output_tokens", lim.output_tokens),
        ),
    )
    step = nice_step(2.0 * rps / SWEEP_POINTS)
    return Rig(
        seed=settings.seed,
        duration_s=RUN_S,
        rps=rps,
        nodes=(node,),
        slo=(
            ("p99_ms", float(f"{lim.p99_slo_ms:.6g}")),
            ("ttft_ms", lim.ttft_budget_ms),
            ("availability", lim.availability),
            ("soak_utilization", lim.soak_utilization),
            ("soak_s", lim.soak_s),
        ),
        sweep=(step, step, SWEEP_POINTS),
    )


def config_link(root: str, row: Any, lim: Any, settings: Any) -> str:
    """The builder's address with this config's rig in its fragment, relative to ``root``."""
    return f"{root}{PAGE}#{fragment(config_rig(row, lim, settings))}"
