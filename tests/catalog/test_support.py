"""The support matrix: which runtime serves which format on which generation."""

from __future__ import annotations

import shutil
import typing

import pytest
import yaml
from backpressure.catalog.errors import CatalogError
from backpressure.catalog.loader import DEFAULT_ROOT, load_catalog
from backpressure.catalog.support import (
    Generation,
    SupportMatrix,
    SupportRule,
    compute_precision,
    refusal,
    serves,
)
from backpressure.generator import resolve
from backpressure.generator.accuracy.serving import load_cases
from backpressure.generator.sweep.combos import enumerate_combos
from pydantic import ValidationError

RULE = {"runtime": "vllm", "format": "fp8", "generations": ["hopper"], "source": "docs"}


def test_every_gpu_generation_is_a_known_one(cat):
    known = set(typing.get_args(Generation))
    assert {g.generation for g in cat.gpus.values()} <= known
    assert cat.gpus["arc-b580"].generation == "xe2"
    assert cat.gpus["b200"].generation == "blackwell"
    assert cat.gpus["m3-ultra-512gb"].generation == "apple-m3"


@pytest.mark.parametrize(
    ("runtime", "fmt", "generation", "served"),
    [
        ("vllm", "nvfp4", "blackwell", True),
        ("vllm", "nvfp4", "hopper", False),  # FP4 gains nothing before Blackwell
        ("vllm", "nvfp4", "cdna4", False),
        ("vllm", "fp8", "ampere", True),  # weight-only W8A16 through Marlin
        ("vllm", "fp8", "rdna3", False),  # no FP8 matrix hardware
        ("vllm", "fp8", "xe2", False),
        ("vllm", "awq", "cdna3", False),  # vLLM's table: AWQ not on AMD GPUs
        ("vllm", "awq", "xe2", True),
        ("vllm", "int8", "ada", True),
        ("vllm", "int8", "cdna3", False),
        ("vllm", "float", "apple-m4", False),
        ("vllm", "mxfp4", "hopper", True),
        ("llama.cpp", "gguf", "xe2", True),
        ("llama.cpp", "gguf", "apple-m1", True),
        ("llama.cpp", "gguf", "zen4", True),
        ("llama.cpp", "fp8", "hopper", False),  # no rule: llama.cpp does not load FP8 checkpoints
    ],
)
def test_the_bundled_matrix(cat, runtime, fmt, generation, served):
    assert serves(cat.support, runtime, fmt, generation) is served


@pytest.mark.parametrize(
    ("fmt", "generation", "compute"),
    [
        ("fp8", "hopper", "fp8"),
        ("fp8", "ada", "fp8"),
        ("fp8", "cdna3", "fp8"),
        ("fp8", "ampere", "bf16"),  # served, but the weights are widened first
        ("nvfp4", "blackwell", "fp4"),
        ("mxfp4", "blackwell", "fp4"),
        ("mxfp4", "hopper", "bf16"),
        ("mxfp4", "cdna4", "bf16"),
        ("int8", "hopper", "bf16"),
        ("awq", "blackwell", "bf16"),
    ],
)
def test_compute_precision(cat, fmt, generation, compute):
    assert compute_precision(cat.support, "vllm", fmt, generation) == compute


def test_a_refusal_names_quant_generation_and_runtime(cat):
    line = refusal(cat.support, "nvfp4", "nvfp4", "hopper", "vllm")
    assert (
        line == "quant nvfp4 (nvfp4) is not served by vllm on hopper devices (served on: blackwell)"
    )
    assert "\n" not in line
    assert refusal(cat.support, "nvfp4", "nvfp4", "blackwell", "vllm") is None
    assert "served on: nowhere" in refusal(cat.support, "fp8", "fp8", "hopper", "llama.cpp")


def test_rules_are_checked_when_read():
    with pytest.raises(ValidationError, match="two rules"):
        SupportMatrix(rules=[RULE, RULE])
    with pytest.raises(ValidationError, match="native_compute"):
        SupportRule(**RULE, native_compute=["ada"])  # a generation the rule does not serve
    with pytest.raises(ValidationError, match="native_compute"):
        SupportRule(**{**RULE, "format": "awq"}, native_compute=["hopper"])
    with pytest.raises(ValidationError, match="generations"):
        SupportRule(**{**RULE, "generations": ["pentium"]})


def copy_catalog(tmp_path):
    root = tmp_path / "catalog"
    shutil.copytree(DEFAULT_ROOT, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return root


def test_a_quant_without_a_rule_fails_the_catalog(tmp_path):
    root = copy_catalog(tmp_path)
    path = root / "support.yaml"
    data = yaml.safe_load(path.read_text())
    data["rules"] = [r for r in data["rules"] if (r["runtime"], r["format"]) != ("vllm", "awq")]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(CatalogError) as info:
        load_catalog(root)
    assert [str(p) for p in info.value.problems] == [
        "catalog/quants/awq-int4.yaml: entry 'awq-int4': field runtimes: "
        "support.yaml has no rule for runtime vllm and format awq"
    ]


def test_a_rule_naming_an_unknown_runtime_fails(tmp_path):
    root = copy_catalog(tmp_path)
    path = root / "support.yaml"
    data = yaml.safe_load(path.read_text())
    data["rules"].append({**RULE, "runtime": "sglang"})
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(CatalogError, match="unknown runtime id 'sglang'"):
        load_catalog(root)


def test_the_sweep_enumerates_only_supported_combos(cat):
    combos = enumerate_combos(cat)
    for c in combos:
        gen = resolve.gpu_entry(cat, c.device).generation
        q = cat.quants[c.quant]
        assert refusal(cat.support, c.quant, q.format, gen, c.runtime) is None, c.id
    seen = {(c.device, c.quant) for c in combos}
    # Refused by the matrix: FP8 and AWQ on RDNA 3, AWQ on CDNA 3, FP8 on Intel Xe2.
    for skipped in [
        ("rx-7900-xtx", "fp8"),
        ("rx-7900-xtx", "awq-int4"),
        ("mi300x", "awq-int4"),
        ("8x-mi300x", "awq-int4"),
        ("arc-b580", "fp8"),
    ]:
        assert skipped not in seen
    for kept in [("mi300x", "fp8"), ("arc-b580", "q4_k_m"), ("arc-b580", "awq-int4")]:
        assert kept in seen
    # Apple's bf16 goes to llama.cpp, the quant's first runtime that serves unified memory.
    assert {c.runtime for c in combos if c.device == "m3-ultra-512gb" and c.quant == "bf16"} == {
        "llama.cpp"
    }


def test_every_new_device_is_swept(cat):
    devices = {c.device for c in enumerate_combos(cat)}
    new = {
        "dgx-spark",
        "rtx-pro-6000-blackwell",
        "ryzen-ai-max-395-128gb",
        "m3-ultra-256gb",
        "m3-ultra-512gb",
        "mi355x",
        "rtx-5060-ti-16gb",
        "rtx-5070-ti",
        "rtx-5080",
        "arc-b580",
        "arc-pro-b60",
        "jetson-agx-thor",
        "2x-rtx-5090",
        "4x-rtx-pro-6000",
        "8x-mi355x",
    }
    assert new <= devices


def test_swept_fp4_configs_compute_at_the_fp4_rate(cat):
    # The sweep costs a config through resolve.configure, which passes compute_for's
    # answer on (resolve.with_compute) as `estimate` does: an MXFP4 config on a GPU that
    # runs it natively gets the FP4 rate, elsewhere the weights widen to BF16 math.
    fp4 = 0
    for c in enumerate_combos(cat):
        gpu = resolve.gpu_entry(cat, c.device)
        if resolve.compute_for(cat, gpu, cat.quants[c.quant], c.runtime) != "fp4":
            continue
        cfg = resolve.configure(cat, c.device, c.quant, c.context, c.model, runtime=c.runtime)
        assert cfg.fmt.fp8_compute, c.id
        assert cfg.device.fp8_flops_per_s == gpu.fp4_flops_per_s, c.id
        fp4 += 1
    assert fp4 > 0  # gpt-oss in MXFP4 on consumer Blackwell under vLLM


def test_every_measured_vllm_run_is_a_combination_the_matrix_allows(cat):
    # A published run is proof that vLLM serves its format on its GPU's
    # generation; a rule that refuses one is wrong (it once refused gpt-oss
    # MXFP4 on Ampere and Ada while A100 and RTX 4090 runs sat in the data).
    cases = [c for c in load_cases(cat)[0] if c.framework == "vllm"]
    assert len(cases) > 200
    refused = sorted(
        {
            (c.gpu, c.quant)
            for c in cases
            if not serves(
                cat.support,
                "vllm",
                cat.quants[c.quant].format,
                resolve.gpu_entry(cat, c.gpu).generation,
            )
        }
    )
    assert refused == []
