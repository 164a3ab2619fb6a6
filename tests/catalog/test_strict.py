"""Every catalog input is strict: types, finite numbers, ranges, clean text, safe ids."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from backpressure.catalog.errors import CatalogError
from backpressure.catalog.hf_config import ConfigError, parse_config, read_config_json
from backpressure.catalog.loader import DEFAULT_ROOT, load_catalog


@pytest.fixture
def root(tmp_path: Path) -> Path:
    dest = tmp_path / "catalog"
    shutil.copytree(DEFAULT_ROOT, dest, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return dest


def problems(root: Path) -> list[str]:
    with pytest.raises(CatalogError) as info:
        load_catalog(root)
    return [str(p) for p in info.value.problems]


def set_line(path: Path, key: str, value: str) -> None:
    """Replace the top-level ``key: ...`` line of a YAML file."""
    lines = path.read_text().splitlines()
    hits = [i for i, ln in enumerate(lines) if ln.startswith(f"{key}:")]
    assert len(hits) == 1, (path, key)
    end = hits[0] + 1
    while end < len(lines) and lines[end].startswith(" "):  # a block scalar's lines
        end += 1
    lines[hits[0] : end] = [f"{key}: {value}"]
    path.write_text("\n".join(lines) + "\n")


GPU = "gpus/rtx-4090.yaml"


@pytest.mark.parametrize(
    ("file", "key", "value", "expect"),
    [
        (GPU, "memory_bytes", "true", "valid integer"),
        (GPU, "memory_bytes", '"25769803776"', "valid integer"),
        (GPU, "memory_bytes", "25769803776.0", "valid integer"),
        (GPU, "memory_bytes", "24", "greater than or equal to 1073741824"),
        (GPU, "bandwidth_bytes_per_s", "1008", "greater than or equal to 10000000000"),
        (GPU, "bf16_flops_per_s", "1", "greater than or equal to 100000000000"),
        (GPU, "name", '"RTX\\u202e0904"', "U+202E"),
        (GPU, "name", '"RTX\\n4090"', "U+000A"),
        (GPU, "name", '"RTX\\u2066 4090"', "U+2066"),
        (GPU, "name", '"RTX\\x07"', "U+0007"),
        (GPU, "name", '" RTX 4090"', "whitespace"),
        (GPU, "notes", '"line one\\rline two"', "U+000D"),
        (GPU, "notes", '"see \\u202bthis"', "U+202B"),
        ("quants/q8_0.yaml", "bits_per_weight", ".nan", "finite number"),
        ("quants/q8_0.yaml", "bits_per_weight", ".inf", "finite number"),
        ("quants/q8_0.yaml", "bits_per_weight", "0.5", "greater than or equal to 1"),
        ("rigs/2x-rtx-4090.yaml", "count", "true", "valid integer"),
        ("runtimes/vllm.yaml", "max_num_batched_tokens", "1e300", "valid integer"),
        ("runtimes/vllm.yaml", "gpu_memory_utilization", '"0.9"', "valid number"),
    ],
)
def test_field_is_strict(root, file, key, value, expect):
    set_line(root / file, key, value)
    [msg] = problems(root)
    assert msg.startswith(f"catalog/{file}: entry "), msg
    assert f"field {key}" in msg
    assert expect in msg
    assert "\n" not in msg
    assert "\u202e" not in msg


def test_notes_keep_plain_newlines(root):
    set_line(root / GPU, "notes", '"first line\\nsecond line"')
    assert load_catalog(root).gpus["rtx-4090"].notes == "first line\nsecond line"


@pytest.mark.parametrize(
    ("stem", "expect"),
    [("index", "reserved"), ("x.html", "ends like a file name"), ("x--y", "'--'")],
)
def test_ids_that_would_collide_are_refused(root, stem, expect):
    src = root / "gpus" / "rtx-4090.yaml"
    dst = root / "gpus" / f"{stem}.yaml"
    dst.write_text(src.read_text().replace("id: rtx-4090", f"id: {stem}"))
    msgs = problems(root)
    assert any(f"gpus/{stem}.yaml" in m and "field id" in m and expect in m for m in msgs), msgs


@pytest.mark.parametrize("folder", ["gpus", "models", "scenarios", "parts"])
def test_yml_files_are_named_not_ignored(root, folder):
    src = next((root / folder).glob("*.yaml"))
    src.rename(src.with_suffix(".yml"))
    msgs = problems(root)
    assert any(m.startswith(f"catalog/{folder}/{src.stem}.yml: ") and ".yaml" in m for m in msgs)


def test_duplicate_key_is_refused(root):
    path = root / GPU
    path.write_text(path.read_text() + "memory_bytes: 1\n")
    [msg] = problems(root)
    assert msg.startswith(f"catalog/{GPU}: key 'memory_bytes' given twice")


def test_deeply_nested_yaml_is_one_problem(root):
    (root / GPU).write_text("[" * 50_000 + "]" * 50_000 + "\n")
    msgs = problems(root)
    assert any(m.startswith(f"catalog/{GPU}:") for m in msgs)


def test_huge_file_is_refused_unread(root):
    (root / GPU).write_bytes(b"#" * (2 << 20))
    [msg] = problems(root)
    assert "larger than" in msg


def test_yaml_alias_bomb_in_a_config_is_refused(root):
    path = root / "models" / "llama-3.1-8b.yaml"
    bomb = "".join(f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9))
    path.write_text("a0: &a0 [1]\n" + bomb + path.read_text())
    msgs = problems(root)
    assert any("llama-3.1-8b.yaml" in m for m in msgs)


@pytest.mark.parametrize(
    ("key", "value", "expect"),
    [
        ("bandwidth_efficiency_nvidia", ".nan", "finite number"),
        ("bandwidth_efficiency_nvidia", ".inf", "finite number"),
        ("bandwidth_efficiency_nvidia", "0", "outside (0, 1]"),
        ("bandwidth_efficiency_nvidia", "92.3", "outside (0, 1]"),
        ("layer_overhead_s_nvidia", "-0.00001", "outside [0, 0.01]"),
        ("min_stream_tokens_per_s", "0", "outside (0, 1000]"),
        ("min_stream_tokens_per_s", "true", "valid number"),
    ],
)
def test_calibration_values_are_bounded(root, key, value, expect):
    path = root / "calibration.yaml"
    lines = path.read_text().splitlines()
    at = lines.index(f"{key}:")
    assert lines[at + 1].startswith("  value:")
    lines[at + 1] = f"  value: {value}"
    path.write_text("\n".join(lines) + "\n")
    [msg] = problems(root)
    assert msg.startswith(f"catalog/calibration.yaml: entry '{key}': field value")
    assert expect in msg


def test_missing_vendor_constant_is_named(root):
    path = root / "calibration.yaml"
    lines = path.read_text().splitlines()
    at = lines.index("bandwidth_efficiency_amd:")
    path.write_text("\n".join(lines[:at] + lines[at + 5 :]) + "\n")
    [msg] = problems(root)
    assert msg.startswith("catalog/calibration.yaml: missing bandwidth_efficiency_amd (needed by ")
    assert "gpus/mi300x.yaml" in msg


@pytest.mark.parametrize(
    ("key", "value", "expect"),
    [
        ("sweep_quants", "[q4_k_m, q9_z]", "field sweep_quants.1: unknown quant 'q9_z'"),
        ("default_kv_dtype", "fp4", "field default_kv_dtype: unknown KV dtype 'fp4'"),
        ("ttft_budget_ms", ".inf", "finite number"),
        ("soak_utilization", ".nan", "finite number"),
        ("measure_requests", "true", "valid integer"),
        ("seed", "-1", "greater than or equal to 0"),
        ("load_min_fraction", "2", "less than or equal to 1"),
    ],
)
def test_settings_are_bounded(root, key, value, expect):
    set_line(root / "settings.yaml", key, value)
    [msg] = problems(root)
    assert msg.startswith("catalog/settings.yaml: entry 'settings': field ")
    assert expect in msg


LLAMA = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
}


def test_tie_word_embeddings_must_be_a_boolean():
    tied = parse_config({**LLAMA, "tie_word_embeddings": True})
    untied = parse_config({**LLAMA, "tie_word_embeddings": False})
    assert tied.total_params < untied.total_params
    assert parse_config(LLAMA).total_params == untied.total_params  # llama's default: untied
    for text in ("false", "true", 0, 1):
        with pytest.raises(ConfigError, match="'tie_word_embeddings' must be true or false"):
            parse_config({**LLAMA, "tie_word_embeddings": text})


@pytest.mark.parametrize(
    ("key", "value", "expect"),
    [
        ("num_key_value_heads", 0, "from 1 to"),
        ("num_key_value_heads", 64, "exceeds the attention heads"),
        ("num_hidden_layers", 10**9, "from 1 to 1,024"),
        ("hidden_size", 2**40, "from 1 to"),
        ("vocab_size", True, "must be an integer"),
        ("num_attention_heads", 32.0, "must be an integer"),
    ],
)
def test_config_dimensions_are_bounded_before_work(key, value, expect):
    with pytest.raises(ConfigError, match=expect):
        parse_config({**LLAMA, key: value})


def test_config_shape_is_bounded():
    deep: dict = {}
    node = deep
    for _ in range(20):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(ConfigError, match="nested deeper"):
        parse_config({**LLAMA, "extra": deep})
    with pytest.raises(ConfigError, match="more than"):
        parse_config({**LLAMA, "extra": list(range(30_000))})


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"a": NaN}', "NaN is not a number"),
        ('{"a": ' + "9" * 5000 + "}", "cannot read"),
        ("[1, 2]", "must be a JSON object"),
        ("\xff\xfe", "cannot read"),
    ],
)
def test_config_json_file_is_read_strictly(tmp_path, text, expect):
    path = tmp_path / "config.json"
    path.write_bytes(text.encode("latin-1") if text.startswith("\xff") else text.encode())
    with pytest.raises(ConfigError, match=expect):
        read_config_json(path)


def test_config_json_file_size_is_bounded(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"pad": "' + "x" * (2 << 20) + '"}')
    with pytest.raises(ConfigError, match="larger than"):
        read_config_json(path)


@pytest.mark.parametrize(
    ("value", "expect"),
    [
        ("{2: 2, 3: 3, 4: 4, 5: 5, 6: 3, 7: 4, 8: 4, 9: 4}", "token count 9 outside"),
        ("{1: 1, 2: 2}", "leave gaps"),
        ("{2: 2, 3: 3, 4: 4, 5: 5, 6: 7}", "7 columns for 6 tokens"),
        ("{2: 2, 4: 4}", "token counts [2, 4] leave gaps"),
    ],
)
def test_metal_kernel_columns_stay_in_the_kernels_range(root, value, expect):
    set_line(root / "runtimes/llama.cpp.yaml", "metal_ext_columns", value)
    [msg] = problems(root)
    assert msg.startswith("catalog/runtimes/llama.cpp.yaml: entry "), msg
    assert "metal_ext_columns" in msg
    assert expect in msg


def test_the_schemas_metal_range_is_the_one_the_engine_packs():
    from backpressure.catalog.schema import METAL_MAT_VEC_MAX
    from backpressure.engine.serving.step import MAX_MAT_VEC

    assert METAL_MAT_VEC_MAX == MAX_MAT_VEC
