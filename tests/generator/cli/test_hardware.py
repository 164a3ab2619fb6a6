"""New machines end to end: Intel through `estimate`, the support matrix, prices in `catalog`."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from backpressure.generator import resolve
from backpressure.generator.cli.main import main

INTEL = ["estimate", "--gpu", "arc-b580", "--model", "llama-3.1-8b", "--quant", "q4_k_m"]


def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_an_intel_card_estimates_with_the_intel_calibration(capsys, cat):
    code, out, err = run(capsys, [*INTEL, "--context", "8192", "--json"])
    assert code == 0, err
    data = json.loads(out)
    assert data["fits"] is True
    assert data["runtime"] == "llama.cpp"
    # Each cached token is read once per step at the calibrated share of 456 GB/s.
    eff = cat.calibration["bandwidth_efficiency_intel"].value
    assert data["step_per_kv_token_s"] == pytest.approx(131_072 / (eff * 456e9), rel=1e-12)
    # No FLOPS figure for the B580: the band says so.
    assert "no FLOPS figure" in data["error_band_reason"]


def test_the_intel_report_prints(capsys):
    code, out, _ = run(capsys, [*INTEL, "--context", "8192"])
    assert code == 0
    assert out.startswith("Intel Arc B580 (12 GB) · llama-3.1-8b · q4_k_m")


@pytest.mark.parametrize(
    ("gpu", "quant", "runtime", "line"),
    [
        (
            "h100-sxm",
            "nvfp4",
            None,
            "quant nvfp4 (nvfp4) is not served by vllm on hopper devices (served on: blackwell)",
        ),
        (
            "rx-7900-xtx",
            "fp8",
            None,
            "quant fp8 (fp8) is not served by vllm on rdna3 devices (served on: turing, ampere, "
            "ada, hopper, blackwell, cdna3, cdna4)",
        ),
        (
            "8x-mi300x",
            "awq-int4",
            "vllm",
            "quant awq-int4 (awq) is not served by vllm on cdna3 devices (served on: turing, "
            "ampere, ada, hopper, blackwell, xe2)",
        ),
    ],
)
def test_an_unsupported_combination_is_refused_in_one_line(capsys, gpu, quant, runtime, line):
    argv = ["estimate", "--gpu", gpu, "--model", "llama-3.1-8b", "--quant", quant]
    argv += ["--context", "8192"] + (["--runtime", runtime] if runtime else [])
    code, out, err = run(capsys, argv)
    assert code == 2
    assert out == ""
    assert err.splitlines() == [f"backpressure: error: {line}"]


def test_a_device_from_the_command_line_meets_no_matrix(capsys):
    # A --vram-gb device has no generation; only the runtime's own checks apply.
    argv = ["estimate", "--vram-gb", "80", "--params-b", "8", "--quant", "nvfp4"]
    code, _, err = run(capsys, [*argv, "--context", "8192", "--json"])
    assert code == 0, err


def cost(cat, gpu, quant):
    return resolve.capacity_for(gpu, quant, 8192, model="llama-3.1-8b", cat=cat)


def test_nvfp4_computes_at_the_fp4_rate_only_with_an_fp4_figure(cat):
    # The compute per sequence is FLOPs / rate, the FLOPs the same for every quant.
    pro = cat.gpus["rtx-pro-6000-blackwell"]
    nvfp4, bf16 = cost(cat, pro.id, "nvfp4"), cost(cat, pro.id, "bf16")
    assert nvfp4.step_compute_per_seq_s * pro.fp4_flops_per_s == pytest.approx(
        bf16.step_compute_per_seq_s * pro.bf16_flops_per_s, rel=1e-12
    )
    # B200 computes NVFP4 at its own FP4 figure; an entry without one gets the BF16
    # rate, not a guessed FP4 one.
    b200 = cat.gpus["b200"]
    assert b200.fp4_flops_per_s is not None
    assert cost(cat, "b200", "nvfp4").step_compute_per_seq_s * b200.fp4_flops_per_s == (
        pytest.approx(cost(cat, "b200", "bf16").step_compute_per_seq_s * b200.bf16_flops_per_s)
    )
    bare = replace(
        cat, gpus={**cat.gpus, "b200": b200.model_copy(update={"fp4_flops_per_s": None})}
    )
    assert cost(bare, "b200", "nvfp4").step_compute_per_seq_s == pytest.approx(
        cost(bare, "b200", "bf16").step_compute_per_seq_s, rel=1e-12
    )


def test_fp8_keeps_its_rate_and_int8_gets_bf16(cat):
    fp8, int8 = cost(cat, "h100-sxm", "fp8"), cost(cat, "h100-sxm", "int8-w8a8")
    gpu = cat.gpus["h100-sxm"]
    assert fp8.step_compute_per_seq_s * gpu.fp8_flops_per_s == pytest.approx(
        int8.step_compute_per_seq_s * gpu.bf16_flops_per_s, rel=1e-12
    )


def test_catalog_json_carries_dated_sourced_prices(capsys, cat):
    code, out, _ = run(capsys, ["catalog", "--json"])
    assert code == 0
    data = json.loads(out)
    gpus = {g["id"]: g for g in data["gpus"]}
    h100 = gpus["h100-sxm"]
    assert h100["generation"] == "hopper"
    assert h100["board_power_w"] == 700
    (default,) = [q for q in h100["rental_prices"] if q["default"]]
    assert default["usd_per_gpu_hour"] == 2.69
    assert default["as_of"] == "2025-11-16"
    assert default["source"].startswith("https://github.com/tugot17/gpu-price-tracker/")
    assert default["default_reason"]
    for gpu in data["gpus"]:
        for quote in (*gpu["rental_prices"], *gpu["purchase_prices"]):
            assert len(quote["as_of"]) == 10
            assert quote["source"]
    assert [q["usd"] for q in gpus["arc-b580"]["purchase_prices"]] == [249, 250]
    rigs = {r["id"]: r for r in data["rigs"]}
    assert rigs["8x-h100-sxm"]["per_gpu"]["rental_prices"] == h100["rental_prices"]
    assert rigs["2x-rtx-5090"]["per_gpu"]["board_power_w"] == 575
    costs = data["costs"]
    assert costs["electricity"]["usd_per_kwh"] == cat.settings.electricity.usd_per_kwh
    assert costs["electricity"]["as_of"] == "2024-03-26"
    assert costs["amortisation_years"] == 3
