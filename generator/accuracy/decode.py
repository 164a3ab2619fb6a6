"""Single-stream decode against published llama-bench rows: dense and mixture-of-experts.

Rows are split deterministically by a SHA-256 of the row's source and setup
(source, hardware, backend, model, quant): an even first byte fits, an odd one
checks. Rows of one log share a setup, so a model's depth runs never straddle
the split.

Dense (``llama_bench.csv``, LLaMA-2-7B and 70B tg128): per platform, the share
of datasheet bandwidth and a fixed cost per layer, least squares on 1/tps.

MoE (``decode_single_stream.csv``): a step reads the dense part (attention,
shared experts, norms, output head) and the ``k`` routed experts of every MoE
layer, plus the KV cache (windows capped, recurrent state included) at the
row's depth; ``moe_layer_overhead_s`` per platform is the median time per MoE
layer left unexplained on the fit half, checked on the other half.

``benchmarks/calib_decode.py`` prints these checks into the calibration report;
the accuracy page shows them (:func:`checks`).
"""

from __future__ import annotations

import hashlib
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np
from backpressure.catalog.loader import Catalog
from backpressure.engine.arch import ModelArch
from backpressure.engine.bands import error_band
from backpressure.engine.ceilings import split_weight_bytes
from backpressure.engine.kv import cache_bytes_per_request
from backpressure.engine.units import GIB
from backpressure.generator import resolve
from backpressure.generator.accuracy.rows import data_rows

Row = dict[str, Any]  # a measured row joined with what the check needs
# Calibration keys: a platform, or platform_backend where a backend has its own fit
# (AMD: ROCm rows fit ``amd``, Vulkan rows ``amd_vulkan``; they differ by 5-40 % on the
# same cards).
PLATFORMS = ("nvidia", "amd", "amd_vulkan", "apple", "cpu")
# Backends other than a platform's first that have constants of their own.
OWN_BACKENDS = {("amd", "Vulkan"): "amd_vulkan"}
# llama.cpp's default cache type is f16; recurrent states are float32.
KV_BYTES, STATE_BYTES = 2.0, 4.0
MXFP4_BITS = 4.25

# decode_single_stream.csv device -> the hardware.csv device with its bandwidth.
HARDWARE = {
    "NVIDIA DGX Spark (GB10)": "DGX Spark (GB10)",
    "Radeon AI PRO R9700 (single GPU)": "Radeon AI PRO R9700",
    "Apple M2 Max (Mac Studio, 8+4 CPU, 38-core GPU, 96 GB)": "M2 Max 38-core GPU",
    # Both M2 Ultra variants have 800 GB/s; the source does not give the core count.
    "Apple M2 Ultra (ggerganov's machine; GPU core count not stated)": "M2 Ultra 76-core GPU",
    "Apple M2 Ultra (file benches/mac-m2-ultra/mac-m2-ultra.md, host 'gg-studio'; "
    "GPU core count not stated)": "M2 Ultra 76-core GPU",
    "Apple M3 Ultra (Mac Studio, 32-core CPU / 80-core GPU, 512 GB)": "M3 Ultra 80-core GPU",
    # Both M1 Max variants have 400 GB/s.
    "Apple M1 Max (64 GB; 10-core CPU; GPU core count not stated)": "M1 Max 32-core GPU",
    "Apple M4 (Mac mini, 16 GB; 10-core CPU)": "M4 10-core GPU",
    "Ryzen AI Max+ 395 (Strix Halo CPU, 16 threads)": "Ryzen AI Max+ 395 (LPDDR5X-8000 256-bit)",
    "RX 9070 XT (16GB, on Raspberry Pi 5 host)": "RX 9070 XT",
    "AMD Radeon Pro W7900": "AMD Radeon Pro W7900",
}
# Integrated GPUs share system memory: "iGPU" in hardware.csv's name, or a known unified part.
UNIFIED = ("iGPU", "8060S", "DGX Spark", "Apple", "M1 ", "M2 ", "M3 ", "M4 ")

# llama-bench model strings -> catalog model.
MODELS = {
    "gpt-oss 20B": "gpt-oss-20b",
    "gpt-oss 120B": "gpt-oss-120b",
    "qwen3moe 30B.A3B": "qwen3-30b-a3b",
    "qwen3moe 235B.A22B": "qwen3-235b-a22b",
    "qwen3next 80B.A3B": "qwen3-next-80b-a3b",
    "glm4moe 106B.A12B": "glm-4.5-air",
    "llama4 17Bx16E (Scout)": "llama-4-scout",
    "llama 7B (as printed by the Dec-2023 build; the file is Mixtral-8x7B-Instruct)": (
        "mixtral-8x7b"
    ),
    "gemma3 12B": "gemma-3-12b",
    "gemma3 27B": "gemma-3-27b",
    "llama 70B": "llama-3.3-70b",
    "llama 8B": "llama-3.1-8b",
    "llama 8B (Llama 3.1 8B)": "llama-3.1-8b",
    "llama 3B": "llama-3.2-3b",
    "qwen2 7B": "qwen2.5-7b",
}


def fits_half(r: dict[str, str]) -> bool:
    """The deterministic split: True for the fit half."""
    key = "|".join(r.get(k, "") for k in ("source", "hardware", "backend", "model", "quant"))
    return hashlib.sha256(key.encode()).digest()[0] % 2 == 0


def hardware() -> dict[str, dict[str, str]]:
    """hardware.csv by device name (first backend listed; bandwidth is per device)."""
    out: dict[str, dict[str, str]] = {}
    for r in data_rows("hardware.csv"):
        out.setdefault(r["hardware"], r)
    return out


def _key(platform: str, backend: str) -> str:
    """The calibration key of a row: its platform, or platform_backend (:data:`OWN_BACKENDS`)."""
    if backend == "CPU":
        return "cpu"
    return OWN_BACKENDS.get((platform, backend), platform)


def _kind(name: str, platform: str) -> str:
    if platform == "cpu":
        return "system"
    return "unified" if any(u in name for u in UNIFIED) else "discrete"


def _depth(test: str) -> tuple[int, int] | None:
    """(tokens generated, prefix depth) of a llama-bench decode test."""
    if not test.startswith("tg"):
        return None
    n, _, d = test[2:].partition("@d")
    return (int(n), int(d or 0)) if n.isdigit() and (not d or d.isdigit()) else None


def dense_points() -> list[Row]:
    """tg128 rows of llama_bench.csv joined with their device bandwidth."""
    hw = {(r["hardware"], r["backend"]): r for r in data_rows("hardware.csv")}
    out: list[Row] = []
    for r in data_rows("llama_bench.csv"):
        h = hw.get((r["hardware"], r["backend"]))
        if r["test"] != "tg128" or not h or not h["bandwidth_gb_s"] or not r["model_size_gib"]:
            continue
        platform = _key(h["platform"], r["backend"])
        if platform not in PLATFORMS:
            continue
        out.append(
            {
                "hardware": r["hardware"],
                "backend": r["backend"],
                "platform": platform,
                "size_bytes": float(r["model_size_gib"]) * GIB,
                "params": float(r["model_params_b"] or 6.74) * 1e9,
                "layers": 80.0 if r["model"] == "llama 70B" else 32.0,
                "bandwidth": float(h["bandwidth_gb_s"]) * 1e9,
                "tps": float(r["tokens_per_s"]),
                "fit": fits_half(r),
                "row": r,
            }
        )
    return out


def fit_dense(points: list[Row]) -> dict[str, tuple[float, float, int]]:
    """Per platform: (efficiency, overhead per layer [s], n), least squares on 1/tps."""
    fits = {}
    for platform in PLATFORMS:
        pts = [p for p in points if p["platform"] == platform]
        if len(pts) < 3:
            continue
        x = np.array(
            [[float(p["size_bytes"]) / float(p["bandwidth"]), float(p["layers"])] for p in pts]
        )
        y = np.array([1.0 / float(p["tps"]) for p in pts])
        (inv_eff, per_layer), *_ = np.linalg.lstsq(x, y, rcond=None)
        if per_layer < 0 or inv_eff < 1:  # unphysical (negative cost, efficiency > 1): refit
            inv_eff, per_layer = float(np.dot(x[:, 0], y) / np.dot(x[:, 0], x[:, 0])), 0.0
        fits[platform] = (1.0 / float(inv_eff), float(per_layer), len(pts))
    return fits


def _dense_tps(p: Row, eff: float, per_layer: float) -> float:
    step = float(p["size_bytes"]) / (eff * float(p["bandwidth"])) + float(p["layers"]) * per_layer
    return 1.0 / step


def _band(kind: str, params: float, moe: bool, platform: str) -> int:
    vendor = platform.split("_")[0]  # the band widens by vendor, whatever the backend
    return error_band(kind, int(params), 1, moe, None, True, True, 100, vendor).pct


def _arch_bytes(arch: ModelArch, size_bytes: float, quant: str) -> tuple[float, float]:
    """(dense bytes, one routed expert's bytes) a token reads, from the file size."""
    streamed = arch.active_params - arch.lookup_only_params
    expert_bpp = MXFP4_BITS / 8 if quant == "mxfp4" else None
    return split_weight_bytes(
        int(size_bytes), arch.total_params, streamed, arch.experts, expert_bpp
    )


def model_points(cat: Catalog, moe: bool) -> list[Row]:
    """decode_single_stream.csv llama-bench rows on known devices and catalog models."""
    hw = hardware()
    out: list[Row] = []
    for r in data_rows("decode_single_stream.csv"):
        mid = MODELS.get(r["model"])
        gen = _depth(r["test"])
        if mid is None or gen is None or (r["moe"] == "true") != moe:
            continue
        if "Coder" in r["device_note"] and mid == "qwen3-30b-a3b":
            mid = "qwen3-coder-30b-a3b"
        if mid not in cat.archs:  # a catalog without the model (a test's small one)
            continue
        h = hw.get(HARDWARE.get(r["hardware"], r["hardware"]))
        if h is None or not h["bandwidth_gb_s"]:
            continue
        platform = _key(h["platform"], r["backend"])
        arch = cat.archs[mid]
        if r["model_size_gib"]:
            size = float(r["model_size_gib"]) * GIB
        else:
            q = cat.quants.get(r["quant"])
            if q is None:
                continue
            size = arch.total_params * q.bits_per_weight / 8
        dense, expert = _arch_bytes(arch, size, r["quant"])
        n, depth = gen
        kv = cache_bytes_per_request(arch, KV_BYTES, STATE_BYTES, depth + n // 2)
        e = arch.experts
        routed = e.moe_layers * e.experts_per_token * expert if e is not None else 0.0
        out.append(
            {
                "row": r,
                "model": mid,
                "platform": platform,
                "kind": _kind(r["hardware"], platform),
                "bytes": dense + routed + kv,
                "bandwidth": float(h["bandwidth_gb_s"]) * 1e9,
                "layers": arch.num_layers,
                "moe_layers": e.moe_layers if e is not None else 0,
                "tps": float(r["tokens_per_s"]),
                "fit": fits_half(r),
                "params": arch.total_params,
            }
        )
    return out


def _base_step(cat: Catalog, p: Row) -> float:
    c = resolve.constants(cat)
    plat = str(p["platform"])
    eff = c.bandwidth_efficiency[plat]
    return (
        float(p["bytes"]) / (eff * float(p["bandwidth"]))
        + int(p["layers"]) * c.layer_overhead_s[plat]
    )


def fit_moe_overhead(cat: Catalog) -> dict[str, tuple[float, int]]:
    """Per platform: median unexplained time per MoE layer on the fit half [s], and n."""
    pts = [p for p in model_points(cat, True) if p["fit"]]
    per_layer = {
        plat: [
            (1 / float(p["tps"]) - _base_step(cat, p)) / int(p["moe_layers"])
            for p in pts
            if p["platform"] == plat
        ]
        for plat in PLATFORMS
    }
    pooled = [v for vs in per_layer.values() for v in vs]
    out = {}
    for plat, vals in per_layer.items():
        use = vals if len(vals) >= 3 else pooled
        out[plat] = (max(0.0, statistics.median(use)), len(use))
    return out


def _engine_tps(cat: Catalog, p: Row) -> float:
    c = resolve.constants(cat)
    extra = int(p["moe_layers"]) * c.moe_layer_overhead_s.get(str(p["platform"]), 0.0)
    return 1.0 / (_base_step(cat, p) + extra)


@dataclass(frozen=True, slots=True)
class DecodeCheck:
    """One measured single-stream decode speed against the engine's."""

    kind: str  # "dense" or "MoE"
    hardware: str
    backend: str
    model: str
    quant: str
    test: str
    measured: float  # tokens/s
    predicted: float  # tokens/s
    band_pct: int
    fit: bool
    source: str

    @property
    def error(self) -> float:
        """Predicted over measured, minus one [-]."""
        return self.predicted / self.measured - 1

    @property
    def inside(self) -> bool:
        """Whether the error lies within the band."""
        return abs(self.error) * 100 <= self.band_pct


def checks(cat: Catalog) -> list[DecodeCheck]:
    """Every row, measured against the engine.

    Dense rows are priced with the constants fitted on the dense fit half, MoE
    rows with the catalog's (their per-MoE-layer cost is fitted on the MoE fit half).
    """
    out: list[DecodeCheck] = []
    points = dense_points()
    half = fit_dense([p for p in points if p["fit"]])
    for p in points:
        if str(p["platform"]) not in half:
            continue
        eff, over, _ = half[str(p["platform"])]
        r = p["row"]
        assert isinstance(r, dict)
        out.append(
            DecodeCheck(
                "dense",
                str(p["hardware"]),
                str(p["backend"]),
                r["model"],
                r["quant"],
                "tg128",
                float(p["tps"]),
                _dense_tps(p, eff, over),
                _band(
                    _kind(str(p["hardware"]), str(p["platform"])),
                    float(p["params"]),
                    False,
                    str(p["platform"]),
                ),
                bool(p["fit"]),
                r["source"],
            )
        )
    for p in model_points(cat, True):
        r = p["row"]
        assert isinstance(r, dict)
        out.append(
            DecodeCheck(
                "MoE",
                r["hardware"],
                r["backend"],
                str(p["model"]),
                r["quant"],
                r["test"],
                float(p["tps"]),
                _engine_tps(cat, p),
                _band(str(p["kind"]), float(p["params"]), True, str(p["platform"])),
                bool(p["fit"]),
                r["source"],
            )
        )
    return out
