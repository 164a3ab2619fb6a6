"""`backpressure estimate` and `backpressure catalog` as a user runs them."""

from __future__ import annotations

import json

import pytest
from backpressure.generator.cli.main import main

WORKED = [
    "estimate",
    "--vram-gb",
    "24",
    "--params-b",
    "7",
    "--quant",
    "q4_k_m",
    "--context",
    "8192",
    "--overhead-gb",
    "2",
]

REQUIRED_KEYS = {
    "fits",
    "slots",
    "weights_bytes",
    "kv_budget_bytes",
    "kv_bytes_per_token",
    "kv_bytes_per_request",
    "kv_capacity_tokens",
    "kv_basis",
    "total_params",
    "active_params",
    "decode_tokens_per_s",
    "binding_ceiling",
    "error_band_pct",
    "error_band_reason",
}


def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_worked_example_gives_18_slots(capsys):
    code, out, _ = run(capsys, [*WORKED, "--json"])
    assert code == 0
    data = json.loads(out)
    assert data["slots"] == 18
    assert data["kv_basis"] == "heuristic"
    assert set(data) >= REQUIRED_KEYS


def test_worked_example_human_output_shows_the_arithmetic(capsys):
    code, out, _ = run(capsys, WORKED)
    assert code == 0
    lines = out.splitlines()
    assert any(ln.startswith("weights") and ln.endswith("3.98 GiB") for ln in lines)
    assert any(ln.startswith("KV budget") and "18.02 GiB" in ln for ln in lines)
    assert any(ln.startswith("KV / request") and ln.endswith("0.95 GiB") for ln in lines)
    assert any(ln.startswith("slots") and ln.endswith(" 18") for ln in lines)
    assert "verdict  fits" in out


def test_catalog_gpu_and_hf_repo(capsys):
    code, out, _ = run(
        capsys,
        [
            "estimate",
            "--gpu",
            "rtx-4090",
            "--model",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--quant",
            "q4_k_m",
            "--context",
            "8192",
            "--json",
        ],
    )
    data = json.loads(out)
    assert code == 0
    assert data["kv_bytes_per_token"] == 131072
    assert data["kv_basis"] == "exact"
    assert data["binding_ceiling"] == "kv"
    assert data["decode_tokens_per_s"] > 0


def test_fp8_kv_halves_the_cache(capsys):
    args = [
        "estimate",
        "--gpu",
        "h100-sxm",
        "--model",
        "llama-3.1-8b",
        "--quant",
        "bf16",
        "--context",
        "8192",
        "--runtime",
        "vllm",
        "--json",
    ]
    _, out16, _ = run(capsys, args)
    _, out8, _ = run(capsys, [*args, "--kv-dtype", "fp8"])
    assert json.loads(out8)["kv_bytes_per_token"] * 2 == json.loads(out16)["kv_bytes_per_token"]


def test_model_config_file(tmp_path, capsys, cat):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(cat.models["qwen3-8b"].config))
    code, out, _ = run(
        capsys,
        [
            "estimate",
            "--gpu",
            "l4",
            "--model-config",
            str(cfg),
            "--quant",
            "q8_0",
            "--context",
            "4096",
            "--json",
        ],
    )
    assert code == 0
    assert json.loads(out)["total_params"] == cat.archs["qwen3-8b"].total_params


def test_a_model_config_without_a_name_is_called_by_its_file(tmp_path, capsys, cat):
    config = {k: v for k, v in cat.models["qwen3-8b"].config.items() if k != "_name_or_path"}
    cfg = tmp_path / "my-finetune.json"
    cfg.write_text(json.dumps(config))
    argv = ["estimate", "--gpu", "l4", "--model-config", str(cfg), "--quant", "q8_0"]
    code, out, _ = run(capsys, [*argv, "--context", "4096"])
    assert code == 0
    assert out.splitlines()[0].split(" · ")[1] == "my-finetune.json (qwen3)"
    code, _, err = run(capsys, [*argv, "--context", "1000000"])
    assert code == 2
    assert "'my-finetune.json (qwen3)'" in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (
            ["--gpu", "rtx-4900", "--model", "llama-3.1-8b"],
            "unknown GPU 'rtx-4900'; did you mean rtx-4090",
        ),
        (
            ["--gpu", "rtx-4090", "--model", "llama-3.1-9b"],
            "unknown model 'llama-3.1-9b'; did you mean llama-3.1-8b",
        ),
        (["--vram-gb", "0", "--params-b", "7"], "--vram-gb"),
        (["--gpu", "rtx-4090", "--params-b", "-3"], "--params-b"),
        (
            ["--gpu", "rtx-4090", "--model", "llama-3.1-8b", "--runtime", "vllm"],
            "not served by vllm",
        ),
        (
            [
                "--gpu",
                "m2-ultra-192gb",
                "--model",
                "llama-3.1-8b",
                "--quant",
                "bf16",
                "--runtime",
                "vllm",
            ],
            "unified",
        ),
    ],
)
def test_bad_input_is_one_clear_line(capsys, argv, needle):
    base = {"--quant": "q4_k_m", "--context": "8192"}
    for k, v in base.items():
        if k not in argv:
            argv = [*argv, k, v]
    code, out, err = run(capsys, ["estimate", *argv])
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert needle in err
    assert "Traceback" not in err


def test_unknown_quant_suggests(capsys):
    code, _, err = run(
        capsys,
        [
            "estimate",
            "--gpu",
            "rtx-4090",
            "--model",
            "llama-3.1-8b",
            "--quant",
            "q4_km",
            "--context",
            "8192",
        ],
    )
    assert code == 2
    assert "unknown quant 'q4_km'; did you mean q4_k_m" in err


def test_context_over_model_maximum(capsys):
    code, _, err = run(
        capsys,
        [
            "estimate",
            "--gpu",
            "rtx-4090",
            "--model",
            "phi-3-mini-4k",
            "--quant",
            "q4_k_m",
            "--context",
            "8192",
        ],
    )
    assert code == 2
    assert "maximum of 'phi-3-mini-4k', 4,096 tokens" in err


def test_catalog_json_lists(capsys):
    code, out, _ = run(capsys, ["catalog", "--json"])
    data = json.loads(out)
    assert code == 0
    for key in ("gpus", "models", "quants", "runtimes"):
        assert isinstance(data[key], list)
        assert data[key]
    assert {g["id"] for g in data["gpus"]} >= {"rtx-4090", "h100-sxm", "m2-ultra-192gb"}


def test_two_gpus_pool_their_memory(capsys):
    base = [
        "estimate",
        "--gpu",
        "rtx-4090",
        "--model",
        "llama-3.3-70b",
        "--quant",
        "q4_k_m",
        "--context",
        "8192",
        "--json",
    ]
    _, one, _ = run(capsys, base)
    code, two, _ = run(capsys, [*base, "--gpus", "2"])
    assert code == 0
    assert not json.loads(one)["fits"]  # 43 GB of weights on a 24 GB card
    assert json.loads(two)["fits"]
    assert json.loads(two)["memory_bytes"] == 2 * json.loads(one)["memory_bytes"]


def test_does_not_fit_says_by_how_much(capsys):
    code, out, _ = run(
        capsys,
        [
            "estimate",
            "--gpu",
            "rtx-3060-12gb",
            "--model",
            "llama-3.3-70b",
            "--quant",
            "q4_k_m",
            "--context",
            "8192",
        ],
    )
    assert code == 0
    assert "verdict  does not fit:" in out
    assert "GiB for one 8,192-token request" in out


CONFIG = [
    "estimate",
    "--gpu",
    "rtx-4090",
    "--model",
    "llama-3.1-8b",
    "--quant",
    "awq-int4",
    "--context",
    "8192",
]
CONCURRENCY_KEYS = {
    "concurrency",
    "ttft_ms",
    "tpot_ms",
    "itl_ms",
    "output_tokens_per_s",
    "requests_per_s",
    "running",
    "serving_band_pct",
    "serving_band_reason",
}
RATE_KEYS = {"ttft_ms_p50", "ttft_ms_p99", "e2e_ms_p99", "goodput_rps", "holds", "bottleneck"}


def test_concurrency_adds_the_closed_loop_numbers(capsys):
    code = main([*CONFIG, "--concurrency", "8", "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data.keys() >= CONCURRENCY_KEYS
    assert data["concurrency"] == 8
    # TPOT as vLLM's benchmark defines it; tokens per second follow from it
    assert data["ttft_ms"] > 0
    assert data["tpot_ms"] > 0
    assert data["running"] <= 8 + 1e-9
    # Little's law: eight users always in flight
    e2e_s = (data["ttft_ms"] + data["tpot_ms"] * (data["output_tokens"] - 1)) / 1000
    assert data["requests_per_s"] * e2e_s == pytest.approx(8, rel=0.15)


def test_more_users_more_throughput_slower_each(capsys):
    out = []
    for n in (1, 16):
        assert main([*CONFIG, "--concurrency", str(n), "--json"]) == 0
        out.append(json.loads(capsys.readouterr().out))
    assert out[1]["output_tokens_per_s"] > 4 * out[0]["output_tokens_per_s"]
    assert out[1]["tpot_ms"] > out[0]["tpot_ms"]


def test_rps_judges_the_rules_and_names_the_bottleneck(capsys):
    assert main([*CONFIG, "--rps", "0.5", "--json"]) == 0
    light = json.loads(capsys.readouterr().out)
    assert light.keys() >= RATE_KEYS
    assert light["holds"] is True
    assert main([*CONFIG, "--rps", "50", "--json"]) == 0
    heavy = json.loads(capsys.readouterr().out)
    assert heavy["holds"] is False
    assert heavy["ttft_ms_p99"] is None or heavy["ttft_ms_p99"] > light["ttft_ms_p99"]
    assert "50.0 rps" in heavy["bottleneck"]


def test_batch_limits_and_profile_change_the_result(capsys):
    assert main([*CONFIG, "--concurrency", "32", "--json"]) == 0
    free = json.loads(capsys.readouterr().out)
    assert main([*CONFIG, "--concurrency", "32", "--max-num-seqs", "4", "--json"]) == 0
    capped = json.loads(capsys.readouterr().out)
    assert capped["running"] <= 4 + 1e-9 < free["running"]
    assert (
        main(
            [
                *CONFIG,
                "--concurrency",
                "4",
                "--prompt-tokens",
                "256",
                "--output-tokens",
                "64",
                "--json",
            ]
        )
        == 0
    )
    short = json.loads(capsys.readouterr().out)
    assert (short["prompt_tokens"], short["output_tokens"]) == (256, 64)


def test_human_output_shows_a_short_serving_table(capsys):
    assert main([*CONFIG, "--concurrency", "4", "--rps", "1"]) == 0
    out = capsys.readouterr().out
    for line in (
        "serving",
        "users        4 (closed loop)",
        "TTFT",
        "TPOT",
        "throughput",
        "offered      1.00 requests/s (Poisson)",
        "verdict",
        "band",
    ):
        assert line in out


def test_serving_flags_without_a_load_or_a_profile_too_long_are_one_line_errors(capsys):
    assert main([*CONFIG, "--prompt-tokens", "100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "--concurrency" in err[0]
    assert main([*CONFIG[:-1], "2048", "--concurrency", "2", "--prompt-tokens", "4000"]) == 2
    assert "exceed --context" in capsys.readouterr().err
