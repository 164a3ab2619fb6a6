"""Which runtime serves which weight format on which device generation.

``catalog/support.yaml`` holds one rule per (runtime, format) pair, with its
source: the generations the runtime serves that format on, and where its matrix
products run in the format's own low precision (FP8 for FP8 checkpoints, FP4 for
NVFP4/MXFP4) rather than being widened to 16-bit first. The functions below are
pure: ``backpressure estimate`` refuses what they refuse, and the sweep skips it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

# Device generations (architectures). A new part from a new architecture adds its
# generation here, and the support rules say what runs on it.
Generation = Literal[
    "turing",
    "ampere",
    "ada",
    "hopper",
    "blackwell",
    "cdna3",
    "cdna4",
    "rdna3",
    "rdna3.5",
    "xe2",
    "apple-m1",
    "apple-m2",
    "apple-m3",
    "apple-m4",
    "zen4",
]
Format = Literal["gguf", "float", "awq", "gptq", "fp8", "mxfp4", "nvfp4", "int8"]
Compute = Literal["bf16", "fp8", "fp4"]

# The precision a format's matrix products run in where the hardware has it.
NATIVE_COMPUTE: dict[str, Compute] = {"fp8": "fp8", "nvfp4": "fp4", "mxfp4": "fp4"}

RuntimeId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._-]{0,79}$")]
Source = Annotated[str, StringConstraints(min_length=4, max_length=1000)]


class SupportRule(BaseModel):
    """One runtime serving one weight format: on which generations, computed how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    runtime: RuntimeId = Field(description="Runtime id.")
    format: Format = Field(description="Weight format family (a quant's 'format').")
    generations: tuple[Generation, ...] | Literal["all"] = Field(
        description="Generations the runtime serves this format on ('all': every one)."
    )
    native_compute: tuple[Generation, ...] = Field(
        default=(),
        description=(
            "Generations where the matrix products run in the format's own precision "
            "(FP8 for fp8, FP4 for nvfp4/mxfp4); elsewhere weights are widened to 16-bit."
        ),
    )
    source: Source = Field(description="Where the support statement comes from.")
    note: str | None = Field(default=None, max_length=2000, description="Caveats.")

    @model_validator(mode="after")
    def _compute_is_consistent(self) -> SupportRule:
        if self.native_compute and self.format not in NATIVE_COMPUTE:
            raise ValueError(f"native_compute: format {self.format} has no low-precision path")
        served = self.generations
        if served != "all" and not set(self.native_compute) <= set(served):
            raise ValueError("native_compute: lists a generation the rule does not serve")
        return self


class SupportMatrix(BaseModel):
    """Every (runtime, format) rule of ``catalog/support.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: tuple[SupportRule, ...] = Field(description="One rule per runtime and format.")

    @model_validator(mode="after")
    def _one_rule_per_pair(self) -> SupportMatrix:
        seen: set[tuple[str, str]] = set()
        for rule in self.rules:
            key = (rule.runtime, rule.format)
            if key in seen:
                raise ValueError(f"rules: two rules for runtime {key[0]} and format {key[1]}")
            seen.add(key)
        return self

    def rule(self, runtime: str, fmt: str) -> SupportRule | None:
        """The rule for this runtime and format, if the matrix has one."""
        return next((r for r in self.rules if (r.runtime, r.format) == (runtime, fmt)), None)


def serves(matrix: SupportMatrix, runtime: str, fmt: str, generation: str) -> bool:
    """Whether ``runtime`` serves weight format ``fmt`` on a ``generation`` device."""
    rule = matrix.rule(runtime, fmt)
    if rule is None:
        return False
    return rule.generations == "all" or generation in rule.generations


def refusal(
    matrix: SupportMatrix, quant: str, fmt: str, generation: str, runtime: str
) -> str | None:
    """One line saying why this combination cannot run, or None if it can.

    >>> m = SupportMatrix(rules=(SupportRule(runtime="vllm", format="nvfp4",
    ...     generations=("blackwell",), source="docs"),))
    >>> refusal(m, "nvfp4", "nvfp4", "blackwell", "vllm") is None
    True
    >>> refusal(m, "nvfp4", "nvfp4", "hopper", "vllm")
    'quant nvfp4 (nvfp4) is not served by vllm on hopper devices (served on: blackwell)'
    """
    if serves(matrix, runtime, fmt, generation):
        return None
    rule = matrix.rule(runtime, fmt)
    where = "nowhere" if rule is None else ", ".join(rule.generations)
    return (
        f"quant {quant} ({fmt}) is not served by {runtime} on {generation} devices "
        f"(served on: {where})"
    )


def compute_precision(matrix: SupportMatrix, runtime: str, fmt: str, generation: str) -> Compute:
    """Precision the matrix products of this combination run in.

    FP8 only for FP8 weights on generations with FP8 tensor math; FP4 only for
    NVFP4/MXFP4 where the rule lists the generation; 16-bit everywhere else
    (INT8, AWQ, GPTQ and GGUF weights are costed at the BF16/FP16 rate).
    """
    rule = matrix.rule(runtime, fmt)
    if rule is None or fmt not in NATIVE_COMPUTE or generation not in rule.native_compute:
        return "bf16"
    return NATIVE_COMPUTE[fmt]
