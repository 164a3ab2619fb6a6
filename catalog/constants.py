"""The catalog-wide files: calibration constants (``calibration.yaml``) and sweep settings.

Unlike the entities in catalog/schema.py these have no id or sources of their
own: each constant carries its source, and the settings are documented here.
"""

from __future__ import annotations

from typing import Annotated

from backpressure.catalog.fields import EntityId, Float, Int, Source, Text
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

MAX_MS = 10**7  # latency budgets [ms]: under three hours
MAX_S = 86_400  # durations [s]: a simulated day


# Calibration constants by name (or name prefix, ending in "_"): (low, high, low
# included). Bounds catch a unit slip (an efficiency of 92.3 for 0.923, a latency
# in microseconds for seconds); a constant not listed here must be finite and >= 0.
CALIBRATION_RANGES: dict[str, tuple[float, float, bool]] = {
    "kv_heuristic_mib_per_billion": (0.0, 1.0, False),
    "bandwidth_efficiency_": (0.0, 1.0, False),
    "layer_overhead_s_": (0.0, 0.01, True),
    "moe_expert_overhead_s": (0.0, 0.01, True),
    "allreduce_latency_s_": (0.0, 0.01, True),
    "prefill_compute_efficiency": (0.0, 1.0, False),
    "decode_compute_efficiency": (0.0, 1.0, False),
    "min_stream_tokens_per_s": (0.0, 1000.0, False),
}
# Constants the engine always reads; per-platform and per-link ones are required
# for every platform and link the catalog's devices use (catalog/loader.py).
REQUIRED_CALIBRATION = (
    "kv_heuristic_mib_per_billion",
    "moe_expert_overhead_s",
    "prefill_compute_efficiency",
    "decode_compute_efficiency",
    "min_stream_tokens_per_s",
)


def calibration_range(name: str) -> tuple[float, float, bool]:
    """(low, high, low included) of a calibration constant; the default is [0, 1e12]."""
    if name in CALIBRATION_RANGES:
        return CALIBRATION_RANGES[name]
    for key, bounds in CALIBRATION_RANGES.items():
        if key.endswith("_") and name.startswith(key):
            return bounds
    return (0.0, 1e12, True)


class Calibration(BaseModel):
    """One calibration constant with its value, unit, meaning and source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: Float = Field(description="The constant's value.")
    unit: Annotated[Text, StringConstraints(max_length=40)] = Field(description="Unit of value.")
    meaning: Text = Field(description="What the constant does in the engine.")
    source: Source = Field(description="Where the value comes from.")


class Settings(BaseModel):
    """Sweep-wide settings with documented defaults (``catalog/settings.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    contexts: tuple[Annotated[Int, Field(gt=0, le=10_485_760)], ...] = Field(
        default=(2048, 4096, 8192, 16384, 32768, 131072),
        min_length=1,
        description="Context lengths swept [tokens]; each is capped at the model's maximum.",
    )
    default_kv_dtype: EntityId = Field(
        default="auto", description="KV-cache dtype used when none is asked for."
    )
    sweep_quants: tuple[EntityId, ...] = Field(
        default=("q4_k_m", "q8_0", "bf16", "fp8", "awq-int4"),
        min_length=1,
        description=(
            "Quants the batch sweep covers (every catalog quant stays available to "
            "`backpressure estimate`)."
        ),
    )
    prompt_tokens: Int = Field(
        default=1024,
        gt=0,
        le=1_048_576,
        description="Prompt length of the request profile the load sweep offers [tokens].",
    )
    output_tokens: Int = Field(
        default=128,
        gt=0,
        le=1_048_576,
        description="Output length of the request profile [tokens].",
    )
    ttft_budget_ms: Float = Field(
        default=1500, gt=0, le=MAX_MS, description="Hard time-to-first-token budget [ms]."
    )
    p99_slo_ms: Float | None = Field(
        default=None,
        gt=0,
        le=MAX_MS,
        description=(
            "p99 end-to-end latency SLO [ms]; unset means the TTFT budget plus the output "
            "streamed at the minimum per-stream rate (calibration min_stream_tokens_per_s)."
        ),
    )
    soak_utilization: Float = Field(
        default=0.85, gt=0, le=1, description="Utilization that fails a soak if held [share]."
    )
    soak_seconds: Float = Field(
        default=120,
        gt=0,
        le=MAX_S,
        description="How long the soak utilization must hold to fail [s].",
    )
    load_points: Int = Field(
        default=40, ge=4, le=400, description="Offered-load levels per config in the load sweep."
    )
    load_min_fraction: Float = Field(
        default=0.1, gt=0, lt=1, description="Lowest offered load, as a share of saturation."
    )
    load_max_fraction: Float = Field(
        default=3.0, gt=1, le=100, description="Highest offered load, as a share of saturation."
    )
    sim_seconds: Float = Field(
        default=180, gt=0, le=86_400, description="Simulated duration of each load level [s]."
    )
    sim_min_service_times: Float = Field(
        default=4,
        ge=0,
        le=100,
        description="A config's run lasts at least this many mean service times, rounded up "
        "to a whole multiple of sim_seconds, so that a slow server is seen busy [-].",
    )
    seed: Int = Field(default=0, ge=0, lt=2**32, description="Seed of the sweep's simulation.")
    queue_depth_per_slot: Float = Field(
        default=8,
        ge=0,
        le=10_000,
        description="Requests the LLM server's queue holds per slot before it sheds [-].",
    )
    queue_max_age_s: Float = Field(
        default=60,
        gt=0,
        le=MAX_S,
        description="Queued requests older than this are abandoned [s].",
    )
