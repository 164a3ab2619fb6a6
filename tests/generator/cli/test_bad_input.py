"""Bad input on any command: one clear line per problem on stderr, exit code 2, no traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from backpressure.catalog.loader import Catalog
from backpressure.generator.cli.main import main
from backpressure.generator.paths import ROOT

SCENARIO = str(ROOT / "catalog" / "scenarios" / "app-postgres.yaml")
ESTIMATE = ["estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--quant", "fp8"]
PROBLEM = "gpus/rtx-4090.yaml: entry 'rtx-4090': field memory_bytes"


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line(code: int, err: str, *needles: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("backpressure: error: ")
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory, cat: Catalog) -> Path:
    """A copy of the catalog whose RTX 4090 has a negative memory size."""
    root = tmp_path_factory.mktemp("broken") / "catalog"
    shutil.copytree(cat.root, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    gpu = root / "gpus" / "rtx-4090.yaml"
    text = gpu.read_text(encoding="utf-8")
    start = text.index("memory_bytes:")
    end = text.index("\n", start)
    gpu.write_text(text[:start] + "memory_bytes: -5" + text[end:], encoding="utf-8")
    return root


COMMANDS = {
    "estimate": [*ESTIMATE, "--context", "8k"],
    "catalog": ["catalog"],
    "simulate": ["simulate", SCENARIO, "--duration", "1"],
    "sweep": ["sweep", "--out", "{tmp}/sweep"],
    "build": ["build", "--out", "{tmp}/site"],
    "verify": ["verify", "rtx-4090--llama-3.1-8b--q4_k_m--8k", "--site", "{tmp}/none"],
    "goldens": ["goldens"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_broken_catalog_is_one_line_on_every_command(command, broken, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in COMMANDS[command]]
    code, out, err = run(capsys, [*argv, "--catalog", str(broken)])
    assert_one_line(code, err, PROBLEM, "greater than or equal to 1073741824")
    assert out == ""
    # Nothing half-built is left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ([*ESTIMATE, "--context", "8q"], "'8q' is not a context length"),
        ([*ESTIMATE, "--context", "0"], "is not a context length"),
        ([*ESTIMATE, "--context", "2M"], "2,097,152 tokens exceeds the maximum"),
        ([*ESTIMATE[:-1], "nope", "--context", "8k"], "unknown quant 'nope'"),
        (
            [
                "estimate",
                "--gpu",
                "rtx-4909",
                "--params-b",
                "7",
                "--quant",
                "fp8",
                "--context",
                "8k",
            ],
            "did you mean rtx-4090",
        ),
        ([*ESTIMATE], "--context"),
        (["simulate", "/no/such/scenario.yaml"], "scenario.yaml"),
        (["build", "--results", "/no/such/dir"], "/no/such/dir"),
        (["verify", "no-such-config"], "no-such-config"),
        (["diff", "no-such-ref", "catalog", "--work", "{tmp}/w"], "no-such-ref"),
        (["sweep", "--jobs", "0"], "--jobs"),
        (["nonsense"], "nonsense"),
    ],
)
def test_each_bad_value_is_one_line(argv, needle, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, _, err = run(capsys, argv)
    assert_one_line(code, err, needle)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        # a rig is its GPUs already
        (["--gpu", "2x-rtx-4090", "--gpus", "2", "--quant", "q4_k_m"], "rig of 2 GPUs already"),
        # vLLM shards the 32 attention heads of Llama 3.1 8B: 3 GPUs cannot split them
        (["--gpu", "h100-sxm", "--gpus", "3", "--quant", "fp8"], "do not divide the 32 attention"),
        # unified memory does not pool across machines
        (["--gpu", "m4-max-128gb", "--gpus", "2", "--quant", "q4_k_m"], "Apple machines"),
        (
            ["--vram-gb", "64", "--memory-kind", "unified", "--gpus", "2", "--quant", "q4_k_m"],
            "Apple machines",
        ),
    ],
)
def test_impossible_gpu_counts_are_refused(argv, needle, capsys):
    code, _, err = run(capsys, ["estimate", *argv, "--model", "llama-3.1-8b", "--context", "8k"])
    assert_one_line(code, err, "--gpus", needle)


def test_layer_split_takes_any_gpu_count(capsys):
    # llama.cpp splits by layers, not heads: three GPUs are fine.
    code, out, err = run(
        capsys, [*ESTIMATE[:-1], "q4_k_m", "--gpus", "3", "--context", "8k", "--json"]
    )
    assert code == 0, err
    assert json.loads(out)["runtime"] == "llama.cpp"


@pytest.mark.parametrize(("given", "tokens"), [("8k", 8192), ("128K", 131072), ("8,192", 8192)])
def test_a_context_is_given_as_the_site_writes_it(given, tokens, capsys):
    code, out, err = run(capsys, [*ESTIMATE, "--context", given, "--json"])
    assert code == 0, err
    assert json.loads(out)["context_tokens"] == tokens


def test_one_million_is_a_context_too(capsys):
    code, out, err = run(
        capsys,
        [
            "estimate",
            "--gpu",
            "h100-sxm",
            "--params-b",
            "8",
            "--quant",
            "fp8",
            "--context",
            "1M",
            "--json",
        ],
    )
    assert code == 0, err
    assert json.loads(out)["context_tokens"] == 1024 * 1024


def test_ids_match_in_any_case(capsys):
    plain = run(capsys, [*ESTIMATE[:-1], "q4_k_m", "--context", "8192", "--json"])
    upper = [
        "estimate",
        "--gpu",
        "H100-SXM",
        "--model",
        "Llama-3.1-8B",
        "--quant",
        "Q4_K_M",
        "--runtime",
        "LLAMA.CPP",
        "--kv-dtype",
        "AUTO",
        "--context",
        "8k",
        "--json",
    ]
    shouted = run(capsys, upper)
    assert shouted[0] == 0, shouted[2]
    assert json.loads(shouted[1]) == json.loads(plain[1])


def test_simulate_reads_the_catalog_given(tmp_path, cat, capsys):
    # The LLM scenario's GPU from another catalog: half the bandwidth, another run.
    root = tmp_path / "catalog"
    shutil.copytree(cat.root, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    gpu = root / "gpus" / "rtx-4090.yaml"
    text = gpu.read_text(encoding="utf-8")
    start = text.index("bandwidth_bytes_per_s:")
    end = text.index("\n", start)
    gpu.write_text(text[:start] + "bandwidth_bytes_per_s: 504_000_000_000" + text[end:])
    scenario = str(cat.root / "scenarios" / "llm-7b-q4-24gb.yaml")
    argv = ["simulate", scenario, "--duration", "5", "--json"]
    code, bundled, err = run(capsys, argv)
    assert code == 0, err
    code, ours, err = run(capsys, [*argv, "--catalog", str(root)])
    assert code == 0, err
    assert json.loads(ours) != json.loads(bundled)


@pytest.mark.parametrize(
    "argv",
    [
        ["estimate", "--gpu", "rtx-4090", "--model-config", "\0", "--quant", "q4_k_m"],
        [*ESTIMATE, "--catalog", "cat\0alog"],
        ["sweep", "--out", "out\0"],
        ["simulate", "scen\0ario.yaml"],
    ],
)
def test_a_nul_byte_in_a_path_is_one_line(argv, capsys):
    # os.stat raises ValueError, not OSError, on an embedded NUL: found by the fuzz campaign
    code, _, err = run(capsys, argv)
    assert_one_line(code, err, "NUL byte")
