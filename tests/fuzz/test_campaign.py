"""A fuzz campaign over every input a user controls: catalog YAML, config.json, CLI flags.

Each case must end in a result or in the project's own error (one line per
problem, exit 2), never in a traceback. The counts are printed at the end of
the run (tests/fuzz/conftest.py) and checked here: each campaign ran every case
it was asked for.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from backpressure.catalog.errors import CatalogError
from backpressure.catalog.hf_config import ConfigError, parse_config, read_config_json
from backpressure.catalog.loader import load_catalog
from backpressure.catalog.scenario import load_parts, load_scenario
from backpressure.generator.cli.main import main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tiny_catalog import make_tiny_catalog

TRIED = {"catalog YAML": 0, "config.json": 0, "CLI flags": 0}
CASES = {"catalog YAML": 300, "config.json": 1000, "CLI flags": 300}

TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",))
    | st.sampled_from("\n\r\t\u202e\u2066\x00"),
    max_size=30,
)
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 1008, 10**9, 2**63, 1e300, 0.5]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return make_tiny_catalog(tmp_path_factory.mktemp("fuzz"))


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.yaml"))


def _yaml_value(value) -> str:
    """A value as YAML text, NaN and infinities included (YAML writes them .nan, .inf)."""
    import yaml

    return yaml.safe_dump(value, allow_unicode=True, default_flow_style=True).strip()


def _problems(load) -> list[str]:
    """The problems ``load()`` reports (none if it succeeds); any other exception propagates."""
    try:
        load()
    except CatalogError as exc:
        return [str(p) for p in exc.problems] or ["(an error without problems)"]
    return []


def _check_catalog(root: Path) -> None:
    def scenarios() -> None:
        parts = load_parts(root / "parts")
        for path in sorted((root / "scenarios").glob("*.yaml")):
            load_scenario(path, parts)

    for problems in (_problems(lambda: load_catalog(root)), _problems(scenarios)):
        assert "(an error without problems)" not in problems
        assert all("\n" not in p for p in problems)


@settings(
    max_examples=CASES["catalog YAML"] // 2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.data())
def test_catalog_fields_set_to_anything(root, data):
    path = data.draw(st.sampled_from(_files(root)))
    original = path.read_text(encoding="utf-8")
    lines = original.splitlines()
    keys = sorted(
        {ln.split(":", 1)[0] for ln in lines if ln and not ln.startswith((" ", "#", "-"))}
    )
    key = data.draw(st.sampled_from([*keys, "bogus", "name", "notes", "id"]))
    value = data.draw(VALUES)
    kept = [ln for ln in lines if not ln.startswith(f"{key}:")]
    try:
        path.write_text("\n".join([*kept, f"{key}: {_yaml_value(value)}"]) + "\n", encoding="utf-8")
        _check_catalog(root)
    finally:
        path.write_text(original, encoding="utf-8")
    TRIED["catalog YAML"] += 1


@settings(
    max_examples=CASES["catalog YAML"] // 2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.data())
def test_catalog_files_mangled(root, data):
    path = data.draw(st.sampled_from(_files(root)))
    original = path.read_bytes()
    at = data.draw(st.integers(0, len(original)))
    cut = data.draw(st.integers(0, 40))
    insert = data.draw(
        st.binary(max_size=12) | st.sampled_from([b"[" * 5000, b": :", b"&a [*a]", b"\t"])
    )
    try:
        path.write_bytes(original[:at] + insert + original[at + cut :])
        _check_catalog(root)
    finally:
        path.write_bytes(original)
    TRIED["catalog YAML"] += 1


BASE_CONFIG = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
}
MODEL_TYPES = [
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "minimax_m2",
    "gemma2",
    "gemma3",
    "phi3",
    "deepseek_v3",
    "x",
]


@settings(max_examples=CASES["config.json"], deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                *BASE_CONFIG,
                "head_dim",
                "sliding_window",
                "layer_types",
                "text_config",
                "num_experts",
                "num_experts_per_tok",
                "torch_dtype",
            ]
        ),
        VALUES | st.sampled_from(MODEL_TYPES),
        max_size=6,
    ),
    st.booleans(),
)
def test_any_config_json(tmp_path_factory, changes, through_file):
    cfg = {**BASE_CONFIG, **changes}
    arch, error = None, ""
    try:
        if through_file:
            path = tmp_path_factory.getbasetemp() / "config.json"
            path.write_text(json.dumps(cfg, allow_nan=True), encoding="utf-8")
            cfg = read_config_json(path)
        arch = parse_config(cfg)
    except ConfigError as exc:  # the one error a config may raise: one line, naming the key
        error = str(exc)
    assert "\n" not in error
    if arch is not None:
        assert arch.total_params >= arch.active_params >= 0
        assert math.isfinite(arch.total_params)
    TRIED["config.json"] += 1


FLAGS = [
    "--gpu",
    "--vram-gb",
    "--bandwidth-gbps",
    "--tflops",
    "--memory-kind",
    "--model",
    "--model-config",
    "--params-b",
    "--quant",
    "--context",
    "--gpus",
    "--runtime",
    "--backend",
    "--gpu-memory-utilization",
    "--kv-dtype",
    "--overhead-gb",
    "--json",
]
FLAG_VALUES = st.one_of(
    st.sampled_from(
        [
            "nan",
            "inf",
            "-inf",
            "1e999",
            "0",
            "-1",
            "24",
            "7",
            "q4_k_m",
            "rtx-4090",
            "llama-3.1-8b",
            "8192",
            "",
            "unified",
            "llama.cpp",
            "vulkan",
            "rocm",
            "auto",
            "/dev/null",
            "/nonexistent/config.json",
            "2**40",
            "1_000",
        ]
    ),
    TEXT,
    NUMBERS.map(str),
)


@settings(
    max_examples=CASES["CLI flags"],
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(st.tuples(st.sampled_from(FLAGS), FLAG_VALUES), max_size=7))
def test_any_estimate_flags(root, capsys, flags):
    args = ["estimate", "--catalog", str(root)]
    for flag, value in flags:
        args += [flag] if flag == "--json" else [flag, value]
    code = main(args)
    out = capsys.readouterr()
    assert code in (0, 2), (args, out.err)
    assert "Traceback" not in out.err
    if code == 2:
        assert out.err.startswith("backpressure: error: ")
    TRIED["CLI flags"] += 1


def test_every_campaign_ran_all_its_cases():
    # Runs last in this module: a campaign that stopped early (or was skipped) shows here.
    assert TRIED == CASES, TRIED
