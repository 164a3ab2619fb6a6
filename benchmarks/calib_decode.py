"""Single-stream decode sections of the calibration report: dense and mixture-of-experts.

The rows, the split and the arithmetic are in ``backpressure.generator.accuracy.decode``
(the accuracy page shows the same checks); this prints them as the report's lines.
"""

from __future__ import annotations

import statistics

from backpressure.catalog.loader import Catalog
from backpressure.generator import resolve
from backpressure.generator.accuracy.decode import (
    PLATFORMS,
    _band,
    _dense_tps,
    _engine_tps,
    _kind,
    dense_points,
    fit_dense,
    fit_moe_overhead,
    model_points,
)


def _summary(label: str, errs: list[float], bands: list[int]) -> str:
    if not errs:
        return f"  {label}: no rows"
    inside = sum(abs(e) * 100 <= b for e, b in zip(errs, bands, strict=True))
    med = statistics.median(abs(e) for e in errs) * 100
    return (
        f"  {label}: {len(errs)} rows, median |error| {med:.1f} %, "
        f"inside band {inside}/{len(errs)} = {inside / len(errs) * 100:.0f} %"
    )


def dense_report(cat: Catalog) -> None:
    """Dense single-stream decode: fit on one half, check on the other."""
    points = dense_points()
    fit_pts = [p for p in points if p["fit"]]
    check = [p for p in points if not p["fit"]]
    print(f"decode, dense: {len(points)} tg128 rows ({len(fit_pts)} fit, {len(check)} held out)")
    half = fit_dense(fit_pts)
    for platform, (eff, over, n) in half.items():
        print(f"  fit half {platform:<6} efficiency {eff:.3f}  {over * 1e6:.1f} us/layer (n={n})")
    c = resolve.constants(cat)
    for label, consts in (
        ("held out, fit-half constants", {k: v[:2] for k, v in half.items()}),
        (
            "held out, catalog constants (fitted on all rows)",
            {k: (c.bandwidth_efficiency[k], c.layer_overhead_s[k]) for k in PLATFORMS},
        ),
    ):
        errs, bands = [], []
        for p in check:
            if str(p["platform"]) not in consts:
                continue
            eff, over = consts[str(p["platform"])]
            errs.append(_dense_tps(p, eff, over) / float(p["tps"]) - 1)
            bands.append(
                _band(
                    _kind(str(p["hardware"]), str(p["platform"])),
                    float(p["params"]),
                    False,
                    str(p["platform"]),
                )
            )
        print(_summary(label, errs, bands))


def moe_report(cat: Catalog) -> None:
    """MoE single-stream decode: the MoE-layer overhead fitted on one half, checked on the other."""
    pts = model_points(cat, True)
    print(
        f"decode, MoE: {len(pts)} llama-bench rows on known devices "
        f"({sum(bool(p['fit']) for p in pts)} fit, {sum(not p['fit'] for p in pts)} held out)"
    )
    for plat, (value, n) in fit_moe_overhead(cat).items():
        print(f"  fit half {plat:<6} moe_layer_overhead_s {value * 1e6:6.1f} us (n={n})")
    for label, sel in (("fit half", True), ("held out", False)):
        errs, bands = [], []
        for p in pts:
            if p["fit"] != sel:
                continue
            errs.append(_engine_tps(cat, p) / float(p["tps"]) - 1)
            bands.append(_band(str(p["kind"]), float(p["params"]), True, str(p["platform"])))
        print(_summary(f"{label}, catalog constants", errs, bands))
    for p in pts:
        if p["fit"]:
            continue
        r = p["row"]
        err = _engine_tps(cat, p) / float(p["tps"]) - 1
        print(
            f"    {str(r['hardware'])[:28]:<28} {r['backend']:<6} {p['model']!s:<20} "
            f"{r['quant']:<7} {r['test']:<12} measured {float(p['tps']):7.1f} "
            f"predicted {_engine_tps(cat, p):7.1f} ({err * 100:+.0f} %)"
        )
    dense = model_points(cat, False)
    errs = [_engine_tps(cat, p) / float(p["tps"]) - 1 for p in dense]
    bands = [_band(str(p["kind"]), float(p["params"]), False, str(p["platform"])) for p in dense]
    print(_summary("dense rows of decode_single_stream.csv (none fitted)", errs, bands))
