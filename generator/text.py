"""Numbers and verdicts as the pages and the command line write them: one place for each."""

from __future__ import annotations

import math
from typing import Any

from backpressure.engine.results import CapacityResult
from backpressure.engine.units import GIB


def number(x: float, digits: int = 3) -> str:
    """A number in plain notation: ``digits`` significant figures, never an exponent.

    >>> number(1940.5), number(12.345), number(0.000012345), number(-0.5), number(0)
    ('1,940', '12.3', '0.0000123', '-0.5', '0')
    """
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    places = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    text = f"{x:,.{places}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def gib(n: float | None) -> str:
    """Bytes as GiB with two decimals.

    >>> gib(17.43 * 2**30), gib(None)
    ('17.43 GiB', 'n/a')
    """
    return "n/a" if n is None else f"{n / GIB:,.2f} GiB"


def room(n: float) -> str:
    """Memory left over, or how much is missing: never a negative size.

    >>> room(17.43 * 2**30), room(-18.16 * 2**30)
    ('17.43 GiB', 'short by 18.16 GiB')
    """
    return gib(n) if n >= 0 else short_by(-n)


def sig(x: float, digits: int = 6) -> float:
    """Round to significant digits, as ``results.csv`` and the JSON publish numbers.

    >>> sig(2.7550000001), sig(1234567.0), sig(0.000123456789, 4)
    (2.755, 1234570.0, 0.0001235)
    """
    return float(f"{x:.{digits}g}")


def rps(x: float | None) -> str:
    """A request rate with precision that suits its size.

    >>> rps(1940.4), rps(12.34), rps(1.234), rps(0.0523), rps(0.0000123)
    ('1,940', '12.3', '1.23', '0.0523', '0.0000123')

    A rate is first taken to the six significant digits ``results.csv`` keeps,
    so a page writes the same figure whether it read the rate from memory or
    from the published table (2.7550000001 and 2.755 both read 2.75):

    >>> rps(2.7550000001), rps(2.755)
    ('2.75', '2.75')
    """
    if x is None:
        return "n/a"
    x = sig(x)
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 0.1:
        return f"{x:.2f}"
    # Three significant figures, as ``.3g`` writes them down to 1e-4, below which it
    # would switch to an exponent.
    return f"{x:.3g}" if x >= 1e-4 else number(x)


def band(pct: int) -> str:
    """An error band as written on every page: ``±20 %``."""
    return f"±{pct} %"


def params_b(n: int) -> str:
    """A parameter count in billions: 8030261248 -> '8.03B'."""
    return f"{n / 1e9:.2f}B" if n < 1e11 else f"{n / 1e9:,.0f}B"


def tokens(n: int) -> str:
    """A token count with thousands separators."""
    return f"{n:,}"


def plural(n: float, word: str, many: str | None = None) -> str:
    """A count and its noun, singular only for exactly one; thousands separated, no exponent.

    >>> plural(1, "slot"), plural(17, "slot"), plural(1024, "slot"), plural(1940.5, "request")
    ('1 slot', '17 slots', '1,024 slots', '1,940 requests')
    >>> plural(2.5, "user"), plural(1, "query", "queries"), plural(3, "query", "queries")
    ('2.5 users', '1 query', '3 queries')
    """
    count = f"{n:,.0f}" if float(n).is_integer() else number(n)
    return f"{count} {word if n == 1 else (many or word + 's')}"


def ranges(spans: tuple[tuple[int, int], ...]) -> str:
    """Integer ranges as written on the pages: ``"2-3, 6"``; empty for none.

    >>> ranges(((2, 3), (6, 6))), ranges(())
    ('2-3, 6', '')
    """
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def short_by(shortfall_bytes: float) -> str:
    """A memory shortfall as people say it: ``short by 5.09 GiB``."""
    return f"short by {gib(shortfall_bytes)}"


def seconds(s: float) -> str:
    """A time that suits its size: ``850 ms``, ``14.4 s``, ``3.2 min``.

    >>> seconds(0.85), seconds(14.44), seconds(120), seconds(float("inf"))
    ('850 ms', '14.4 s', '2.0 min', 'never')
    """
    if not math.isfinite(s):
        return "never"
    if s < 1:
        return f"{s * 1000:,.0f} ms"
    if s < 120:
        return f"{s:,.1f} s"
    return f"{s / 60:,.1f} min"


def share(x: float) -> str:
    """A share as a percentage: ``85 %``, ``0.1 %``.

    >>> share(0.85), share(0.001), share(1.0)
    ('85 %', '0.1 %', '100 %')
    """
    pct = 100 * x
    return f"{pct:.0f} %" if pct >= 1 else f"{pct:.2g} %"


def rule_text(rule: str, s: Any) -> str:
    """What a failure rule says, in the settings' own numbers."""
    return {
        "ttft": f"p99 time to first token over the {seconds(s.ttft_budget_ms / 1000)} budget",
        "p99": f"p99 latency over the {seconds(s.p99_slo_ms / 1000)} SLO",
        "error_budget": f"more than {share(1 - s.availability)} of requests lost: the queue sheds",
        "soak": (
            f"the soak fails ({share(s.soak_utilization)} occupancy or more for "
            f"{seconds(s.soak_s)}, or more offered than the server completes)"
        ),
    }[rule]


BOUND_TEXT = {
    "kv": "the KV cache",
    "seqs": "the sequence limit (max_num_seqs)",
    "bandwidth": "memory bandwidth",
    "compute": "compute",
    "host": "host-side scheduling",
}


def capacity_verdict(r: CapacityResult) -> str:
    """One line on capacity alone: does it fit, how many slots, what binds."""
    if not r.fits:
        short = r.kv_bytes_per_request - r.kv_budget_bytes
        return f"does not fit: {short_by(short)} for one {r.context_tokens:,}-token request"
    what = {
        "kv": "the KV cache fills before bandwidth runs out",
        "bandwidth": "memory bandwidth binds before the KV cache fills",
        "compute": "compute binds before the KV cache fills",
        None: "decode speed not computed",
    }[r.binding_ceiling]
    return (
        f"fits: {plural(r.slots, 'slot')} at full context, "
        f"{plural(r.effective_concurrency, 'concurrent request')} (±{r.error_band_pct} %); "
        f"{what}"
    )


def verdict(r: CapacityResult, serving: Any, s: Any, band_pct: int | None) -> str:
    """One line: does it fit, is it usable, where it breaks and on which rule."""
    if not r.fits:
        return capacity_verdict(r)
    if serving is None:
        return f"fits; not simulated: {missing_figure(r)}"
    if not serving.usable:
        tps = serving.single.tokens_per_s_per_user
        return (
            f"too slow to use: one stream decodes at {tps:,.2f} tokens/s, under the "
            f"{s.min_usable_tokens_per_s:g} tokens/s floor"
        )
    b = serving.breaking
    if b.fails_at_any_load:
        return f"fails at any load: {rule_text(b.rule, s)} even at {rps(b.bracket[0])} rps"
    if b.rate is None:
        return f"holds up to {rps(b.bracket[1])} rps, the most tried"
    return (
        f"breaks at {rps(b.rate)} rps ±{band_pct} %: {rule_text(b.rule, s)}; "
        f"{plural(serving.max_concurrency, 'request')} at once"
    )


def missing_figure(r: CapacityResult) -> str:
    """Why a config that fits cannot be simulated under load: the figure its device lacks."""
    if r.decode_tokens_per_s is not None and r.prefill_tokens_per_s is None:
        return (
            "no published dense FLOPS figure for this device, so its prompt phase cannot be timed"
        )
    if r.decode_tokens_per_s is None and r.prefill_tokens_per_s is not None:
        return "no memory bandwidth figure for this device"
    return "no bandwidth or FLOPS figure for this device"


def bottleneck(r: CapacityResult, serving: Any, s: Any) -> str:
    """The one-line bottleneck: what gives way first, and what binds at saturation."""
    if not r.fits:
        return "does not fit: no room in memory for a single request"
    if serving is None:
        return "not simulated"
    bound = BOUND_TEXT[serving.bound]
    if not serving.usable:
        return f"{bound} binds: one stream is too slow to use"
    b = serving.breaking
    where = (
        f"at any load ({rps(b.bracket[0])} rps)"
        if b.fails_at_any_load
        else f"at {rps(b.rate)} rps"
        if b.rate is not None
        else "nowhere tried"
    )
    first = rule_text(b.rule, s) if b.rule else "nothing fails"
    return f"{first} {where}; {bound} binds at saturation ({rps(serving.saturation_rps)} rps)"


def weights_expression(total_params: int, weights_bytes: int, bits: float, times: str = "×") -> str:
    """``params × bits / 8`` for the weights line of the arithmetic, true to its result.

    A format that leaves some weights unquantized (AWQ, GPTQ and FP8 keep the
    embeddings in 16 bits; MXFP4 quantizes only the routed experts) costs more
    than its own bits over the whole model: the line then shows the average the
    weights really take, and says so, so that the product is the value beside it.
    """
    params = params_b(total_params)
    average = 8 * weights_bytes / total_params if total_params else bits
    if abs(average - bits) < 0.005:
        return f"{params} {times} {bits:g} bits / 8"
    return f"{params} {times} {average:.2f} bits / 8 ({bits:g} bits where quantized)"
