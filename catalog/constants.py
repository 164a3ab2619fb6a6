"""The catalog-wide files: calibration constants (``calibration.yaml``) and sweep settings.

Unlike the entities in catalog/schema.py these have no id or sources of their
own: each constant carries its source, and the settings are documented here.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from backpressure.catalog.fields import EntityId, Float, Int, Source, Text
from backpressure.catalog.prices import ElectricityPrice
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
    "serving_moe_layer_overhead_s_": (0.0, 0.01, True),
    "serving_moe_eager_layer_s_": (0.0, 0.01, True),
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
    availability: Float = Field(
        default=0.999,
        gt=0,
        lt=1,
        description="Share of offered requests that must be served; the rest is the error "
        "budget, and losing more of it fails the error-budget rule [share].",
    )
    min_usable_tokens_per_s: Float = Field(
        default=5.0,
        gt=0,
        le=10_000,
        description="A config whose single stream decodes slower than this is too slow to "
        "use: it gets its own verdict and no breaking rate [tokens/s].",
    )
    min_usable_reason: Annotated[str, StringConstraints(max_length=500)] = Field(
        default="",
        description="Why the usable floor is where it is (printed beside the verdict).",
    )
    measure_requests: Int = Field(
        default=1500,
        ge=100,
        le=1_000_000,
        description="Arrivals an open-loop run measures (after its warm-up), however long "
        "they take [-].",
    )
    probe_requests: Int = Field(
        default=300,
        ge=50,
        le=1_000_000,
        description="Arrivals of a probe run, which brackets the break before full runs "
        "decide it [-].",
    )
    probe_bracket: Float = Field(
        default=1.3,
        gt=1.0,
        le=10.0,
        description="Probes narrow the break to within this factor; full runs take it from "
        "there [-].",
    )
    min_measure_seconds: Float = Field(
        default=10,
        gt=0,
        le=86_400,
        description="The shortest measured window of a run [s].",
    )
    warmup_seconds: Float = Field(
        default=30,
        ge=0,
        le=86_400,
        description="The longest warm-up of a run: arrivals before it are not measured [s].",
    )
    load_min_fraction: Float = Field(
        default=0.05,
        gt=0,
        le=1,
        description="The lowest offered rate tried, as a share of the closed-loop saturation "
        "rate; a config failing there fails at any load [share].",
    )
    breaking_tolerance: Float = Field(
        default=0.02,
        gt=0.001,
        le=0.5,
        description="The breaking rate is bisected until a rate that holds and one that fails "
        "are this close (relative) [-].",
    )
    max_load_doublings: Int = Field(
        default=4,
        ge=0,
        le=20,
        description="How often the load is doubled past saturation looking for a failure [-].",
    )
    curve_fractions: tuple[Annotated[Float, Field(gt=0, le=10)], ...] = Field(
        default=(0.3, 0.6),
        description="Extra open-loop runs for the latency-against-load chart, as shares of the "
        "breaking rate [share].",
    )
    max_users: Int = Field(
        default=1024,
        ge=1,
        le=65_536,
        description="The concurrency table (closed loop) stops at this many users [-].",
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
    electricity: ElectricityPrice = Field(
        default=ElectricityPrice(
            usd_per_kwh=0.1545,
            region="United States",
            sector="residential",
            period="January 2024",
            as_of=dt.date(2024, 3, 26),
            source="https://www.eia.gov/electricity/monthly/update/end-use.php",
        ),
        description=(
            "Electricity price owner-run hardware is costed at, with its source and "
            "date (catalog/settings.yaml gives the figure used)."
        ),
    )
    amortisation_years: Float = Field(
        default=3,
        gt=0,
        le=20,
        description=(
            "Years a purchased device's price is spread over when it is costed per hour "
            "(straight line, no resale value) [years]."
        ),
    )
