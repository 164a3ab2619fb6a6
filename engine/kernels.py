"""Runtime kernel rules that change what a small batch reads or computes.

llama.cpp on Apple silicon (ggml's Metal backend) picks its matrix kernel by the
tokens of a forward pass, and two of its choices move the bytes a step streams:

- from 2 to ``len(columns) - 1`` tokens (8) mat-vec kernels run: the small-batch
  one reads a weight once for ``columns[t]`` tokens where the format has it
  (from ``ext_from`` tokens) and the rows suit it; otherwise every token's column
  reads the weights again. Above that, matrix tiles of ``tile_tokens`` tokens
  compute whole;
- below ``pair_reads_below`` tokens the MoE kernel reads one expert per (token,
  chosen expert) pair rather than each distinct expert once.

The serving step (``serving/step.py``) and the capacity ceilings
(``ceilings.py``) both follow these rules, so the two agree on a config's page.
"""

from __future__ import annotations

from dataclasses import dataclass

from backpressure.engine.inputs import Runtime, WeightFormat


@dataclass(frozen=True, slots=True)
class MetalKernels:
    """The Metal rules for one server; the default is none (every other platform)."""

    columns: tuple[int, ...] = ()
    ext_from: int = 0
    tile_tokens: int = 0

    @property
    def mat_vec_max(self) -> int:
        """Most tokens a pass runs through the mat-vec kernels (0: no such rule)."""
        return max(len(self.columns) - 1, 0)

    def dense_reads(self, tokens: int) -> int:
        """Times one pass of ``tokens`` tokens streams the dense weights."""
        if not 2 <= tokens <= self.mat_vec_max:
            return 1
        if self.ext_from > 0 and tokens >= self.ext_from:
            return -(-tokens // self.columns[tokens])
        return tokens

    def computed_tokens(self, tokens: int) -> int:
        """Tokens the matrix kernels compute for a pass: whole tiles above the mat-vec limit."""
        if self.tile_tokens <= 0 or tokens <= self.mat_vec_max or self.mat_vec_max == 0:
            return tokens
        return -(-tokens // self.tile_tokens) * self.tile_tokens


NO_METAL = MetalKernels()


def metal_kernels(runtime: Runtime, fmt: WeightFormat, hidden: int, platform: str) -> MetalKernels:
    """The Metal matrix-kernel rules of this runtime and format; none off Apple silicon.

    The small-batch kernel needs the weights' rows a multiple of
    ``metal_ext_row_multiple`` (gpt-oss's 2,880 is not) and a format that has it
    (``metal_ext_min_tokens``).
    """
    if platform != "apple" or not runtime.metal_ext_columns:
        return NO_METAL
    rows_ok = runtime.metal_ext_row_multiple <= 0 or hidden % runtime.metal_ext_row_multiple == 0
    return MetalKernels(
        columns=runtime.metal_ext_columns,
        ext_from=fmt.metal_ext_min_tokens if rows_ok else 0,
        tile_tokens=runtime.metal_tile_tokens,
    )


def pair_reads_below(runtime: Runtime, platform: str, is_moe: bool) -> int:
    """Tokens below which the MoE kernel reads an expert per (token, expert) pair (0: never)."""
    return dict(runtime.expert_pair_reads_below).get(platform, 0) if is_moe else 0
