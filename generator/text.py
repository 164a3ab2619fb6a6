"""Numbers and verdicts as the pages and the command line write them: one place for each."""

from __future__ import annotations

from backpressure.engine.results import CapacityResult
from backpressure.engine.units import GIB


def gib(n: float | None) -> str:
    """Bytes as GiB with two decimals."""
    return "n/a" if n is None else f"{n / GIB:,.2f} GiB"


def rps(x: float | None) -> str:
    """A request rate with precision that suits its size."""
    if x is None:
        return "n/a"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}" if x >= 0.1 else f"{x:.3g}"


def band(pct: int) -> str:
    """An error band as written on every page: ``±20 %``."""
    return f"±{pct} %"


def params_b(n: int) -> str:
    """A parameter count in billions: 8030261248 -> '8.03B'."""
    return f"{n / 1e9:.2f}B" if n < 1e11 else f"{n / 1e9:,.0f}B"


def tokens(n: int) -> str:
    """A token count with thousands separators."""
    return f"{n:,}"


def verdict(r: CapacityResult) -> str:
    """One line: does it fit, how many streams, what binds."""
    if not r.fits:
        short = (
            -r.kv_budget_bytes + r.kv_bytes_per_request
            if r.kv_budget_bytes < 0
            else (r.kv_bytes_per_request - r.kv_budget_bytes)
        )
        return (
            f"does not fit: {short / GIB:.2f} GiB short of one {r.context_tokens:,}-token request"
        )
    what = {
        "kv": "the KV cache fills before bandwidth runs out",
        "bandwidth": "memory bandwidth binds before the KV cache fills",
        "compute": "compute binds before the KV cache fills",
        None: "decode speed not computed",
    }[r.binding_ceiling]
    return f"fits: {r.effective_concurrency:,} concurrent requests (±{r.error_band_pct} %); {what}"
