"""`estimate --backend`: llama.cpp's decode on Radeon GPUs costed on Vulkan or ROCm."""

from __future__ import annotations

import json

from backpressure.generator.cli.main import main

BASE = ["estimate", "--model", "qwen3-8b", "--quant", "q4_k_m", "--context", "8192"]


def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def decode(capsys, gpu: str, *extra: str) -> tuple[str, float]:
    code, out, err = run(capsys, [*BASE, "--gpu", gpu, *extra, "--json"])
    assert code == 0, err
    got = json.loads(out)
    return got["backend"], got["decode_tokens_per_s"]


def test_radeon_llama_cpp_defaults_to_vulkan_and_rocm_is_slower(capsys):
    # the measured order on every Radeon card with both builds: Vulkan decodes faster
    default = decode(capsys, "rx-7900-xtx")
    rocm = decode(capsys, "rx-7900-xtx", "--backend", "rocm")
    assert default[0] == "vulkan"
    assert rocm[0] == "rocm"
    assert rocm[1] < default[1]


def test_the_report_names_the_backend_where_there_is_a_choice(capsys):
    code, out, _ = run(capsys, [*BASE, "--gpu", "rx-7900-xtx", "--backend", "ROCm"])
    assert code == 0
    assert "llama.cpp on rocm" in out.splitlines()[0]
    code, out, _ = run(capsys, [*BASE, "--gpu", "rtx-4090"])
    assert code == 0
    assert " on cuda" not in out.splitlines()[0]


def test_instinct_parts_stay_on_rocm(capsys):
    assert decode(capsys, "mi300x", "--runtime", "llama.cpp")[0] == "rocm"
    code, _, err = run(
        capsys, [*BASE, "--gpu", "mi300x", "--runtime", "llama.cpp", "--backend", "vulkan"]
    )
    assert code == 2
    assert "runs vulkan only on rdna3, rdna3.5 GPUs" in err


def test_unknown_backend_names_the_known_ones(capsys):
    code, _, err = run(capsys, [*BASE, "--gpu", "rtx-4090", "--backend", "vulkan"])
    assert code == 2
    assert "known: cuda" in err
    assert err.count("\n") == 1


def test_vllm_has_no_backend_choice(capsys):
    code, _, err = run(
        capsys,
        [
            *BASE[:4],
            "bf16",
            *BASE[5:],
            "--gpu",
            "mi300x",
            "--runtime",
            "vllm",
            "--backend",
            "vulkan",
        ],
    )
    assert code == 2
    assert "runtime vllm runs rocm on amd devices" in err
