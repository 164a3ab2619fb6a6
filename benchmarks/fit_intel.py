"""Fit the Intel decode constants the way calibrate.py fits the other platforms.

calibrate.fit needs three tg128 rows per platform and its point list leaves Intel
out; the llama-bench data has two Intel rows (Arc A770 and Arc B580, Vulkan). This
script applies the same model, least squares on

    1/tps = (bytes / bandwidth) / efficiency + layers x overhead

with the same fallback (a negative overhead or an efficiency above 1 is refitted
through the origin with no overhead), and prints the fit, n and each row's error.

Run: ``python benchmarks/fit_intel.py``. The result is what
``bandwidth_efficiency_intel`` and ``layer_overhead_s_intel`` in
catalog/calibration.yaml hold.
"""

from __future__ import annotations

import numpy as np
from backpressure.engine.units import GIB
from backpressure.generator.accuracy.rows import data_rows


def _hardware() -> dict[tuple[str, str], dict[str, str]]:
    return {(r["hardware"], r["backend"]): r for r in data_rows("hardware.csv")}


def intel_points() -> list[dict[str, float | str]]:
    """tg128 rows on Intel GPUs joined with their datasheet bandwidth (hardware.csv)."""
    hw = _hardware()
    out: list[dict[str, float | str]] = []
    for r in data_rows("llama_bench.csv"):
        h = hw.get((r["hardware"], r["backend"]))
        if r["test"] != "tg128" or not h or h["platform"] != "intel" or not r["model_size_gib"]:
            continue
        out.append(
            {
                "hardware": r["hardware"],
                "backend": r["backend"],
                "size_bytes": float(r["model_size_gib"]) * GIB,
                "layers": 80.0 if r["model"] == "llama 70B" else 32.0,
                "bandwidth": float(h["bandwidth_gb_s"]) * 1e9,
                "tps": float(r["tokens_per_s"]),
                "source": r["source"],
            }
        )
    return out


def fit_points(points: list[dict[str, float | str]]) -> tuple[float, float]:
    """(efficiency, overhead per layer [s]) by calibrate.fit's model and fallback."""
    x = np.array(
        [[float(p["size_bytes"]) / float(p["bandwidth"]), float(p["layers"])] for p in points]
    )
    y = np.array([1.0 / float(p["tps"]) for p in points])
    (inv_eff, per_layer), *_ = np.linalg.lstsq(x, y, rcond=None)
    if per_layer < 0 or inv_eff < 1:  # unphysical: refit through the origin, no overhead
        inv_eff, per_layer = float(np.dot(x[:, 0], y) / np.dot(x[:, 0], x[:, 0])), 0.0
    return 1.0 / float(inv_eff), float(per_layer)


def main() -> None:
    points = intel_points()
    eff, over = fit_points(points)
    print(f"intel: efficiency {eff:.3f}  overhead {over * 1e6:.1f} us/layer  (n={len(points)})")
    for p in points:
        t = float(p["size_bytes"]) / (eff * float(p["bandwidth"])) + float(p["layers"]) * over
        own = float(p["size_bytes"]) / float(p["bandwidth"]) * float(p["tps"])
        print(
            f"  {p['hardware']:<10} {p['backend']:<7} measured {float(p['tps']):6.2f} tok/s, "
            f"predicted {1 / t:6.2f} ({(1 / t / float(p['tps']) - 1) * 100:+.0f} %), "
            f"own efficiency {own:.3f}"
        )


if __name__ == "__main__":
    main()
