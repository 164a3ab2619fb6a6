"""The catalog loads, covers what the product promises, and rejects bad input clearly."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from backpressure.catalog.errors import CatalogError
from backpressure.catalog.loader import DEFAULT_ROOT, load_catalog


def test_catalog_coverage(cat):
    assert len(cat.gpus) >= 24
    assert len(cat.models) >= 30
    assert len(cat.quants) >= 10
    assert {"llama.cpp", "vllm"} <= set(cat.runtimes)
    assert {"auto", "f16", "bf16", "fp8", "q8_0", "q4_0"} <= set(cat.kv_dtypes)
    kinds = {g.memory_kind for g in cat.gpus.values()}
    assert kinds == {"discrete", "unified", "system"}
    assert sum(a.is_moe for a in cat.archs.values()) >= 5
    assert any(a.attention.mla_latent_dim for a in cat.archs.values())
    assert any(any(a.attention.window_per_layer) for a in cat.archs.values())
    sizes = [a.total_params for a in cat.archs.values() if not a.is_moe]
    assert min(sizes) < 1.5e9
    assert max(sizes) > 400e9


def test_q4_k_m_costs_4_89_bits(cat):
    assert cat.quants["q4_k_m"].bits_per_weight == pytest.approx(4.89)


def test_every_number_has_a_source(cat):
    # The schema enforces it; this checks the enforcement is wired to every entity.
    for table in (cat.gpus, cat.rigs, cat.models, cat.quants, cat.kv_dtypes, cat.runtimes):
        for entity in table.values():
            for name, value in entity:
                if isinstance(value, int | float) and not isinstance(value, bool):
                    assert name in entity.sources, (entity.id, name)
    for name, cal in cat.calibration.items():
        assert cal.source, name


@pytest.fixture
def tmp_catalog(tmp_path: Path) -> Path:
    root = tmp_path / "catalog"
    shutil.copytree(DEFAULT_ROOT, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return root


def problems(root: Path) -> list[str]:
    with pytest.raises(CatalogError) as info:
        load_catalog(root)
    return [str(p) for p in info.value.problems]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"fixture text {old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def test_malformed_yaml_names_file_and_line(tmp_catalog):
    (tmp_catalog / "gpus" / "rtx-4090.yaml").write_text("id: rtx-4090\nname: [unclosed\n")
    [msg] = problems(tmp_catalog)
    assert msg.startswith("catalog/gpus/rtx-4090.yaml: malformed YAML at line")


def test_unknown_field_names_entry_and_field(tmp_catalog):
    path = tmp_catalog / "gpus" / "rtx-4090.yaml"
    path.write_text(path.read_text() + "colour: red\n")
    assert problems(tmp_catalog) == [
        "catalog/gpus/rtx-4090.yaml: entry 'rtx-4090': field colour: Extra inputs are not permitted"
    ]


@pytest.mark.parametrize(
    ("field", "value", "expect"),
    [
        ("memory_bytes", "0", "greater than or equal to"),
        ("bandwidth_bytes_per_s", "1_000_000_000_000_000_000", "less than or equal"),
    ],
)
def test_impossible_values(tmp_catalog, field, value, expect):
    path = tmp_catalog / "gpus" / "rtx-4090.yaml"
    lines = [
        f"{field}: {value}" if ln.startswith(f"{field}:") else ln
        for ln in path.read_text().splitlines()
    ]
    path.write_text("\n".join(lines) + "\n")
    [msg] = problems(tmp_catalog)
    assert msg.startswith(f"catalog/gpus/rtx-4090.yaml: entry 'rtx-4090': field {field}: ")
    assert expect in msg


def test_number_without_source(tmp_catalog):
    path = tmp_catalog / "quants" / "q8_0.yaml"
    text = path.read_text()
    start = text.index("sources:")
    path.write_text(text[:start] + "sources: {}\n")
    [msg] = problems(tmp_catalog)
    assert "field bits_per_weight: numeric fact has no entry in 'sources'" in msg


def test_id_must_match_file_name(tmp_catalog):
    edit(tmp_catalog / "quants" / "q8_0.yaml", "id: q8_0", "id: q8-0")
    [msg] = problems(tmp_catalog)
    assert (
        msg == "catalog/quants/q8_0.yaml: entry 'q8-0': field id: must equal the file name 'q8_0'"
    )


@pytest.mark.parametrize("hostile", ["../../x", "<script>", "a\x07b", "x" * 10_000])
def test_hostile_ids_rejected(tmp_catalog, hostile):
    path = tmp_catalog / "quants" / "q8_0.yaml"
    text = path.read_text().replace("id: q8_0", f"id: {hostile!r}".replace("'", '"'), 1)
    path.write_text(text.replace("\\x07", "\\a"))
    msgs = problems(tmp_catalog)
    assert len(msgs) == 1
    assert "field id:" in msgs[0]
    assert len(msgs[0]) < 300
    assert "\x07" not in msgs[0]


def test_hostile_key_in_a_field_path_is_escaped(tmp_catalog):
    # A mapping key with a newline must not split the one-line error in two.
    path = tmp_catalog / "gpus" / "rtx-4090.yaml"
    edit(path, "\nsources:\n", '\nsources:\n  "\\n": null\n')
    [msg] = problems(tmp_catalog)
    assert "\n" not in msg
    assert msg == (
        "catalog/gpus/rtx-4090.yaml: entry 'rtx-4090': field sources.'\\n': "
        "Input should be a valid string"
    )


def test_unknown_model_type(tmp_catalog):
    edit(tmp_catalog / "models" / "llama-3.1-8b.yaml", "model_type: llama", "model_type: llama9")
    [msg] = problems(tmp_catalog)
    assert msg.startswith(
        "catalog/models/llama-3.1-8b.yaml: entry 'llama-3.1-8b': field config: "
        "unsupported model_type 'llama9'"
    )


def test_more_active_than_total(tmp_catalog):
    path = tmp_catalog / "models" / "mixtral-8x7b.yaml"
    edit(path, "published_active_params: 12_900_000_000", "published_active_params: 99_000_000_000")
    [msg] = problems(tmp_catalog)
    assert "more active than total" in msg


def test_every_problem_is_reported(tmp_catalog):
    (tmp_catalog / "gpus" / "rtx-4090.yaml").write_text(": :\n  - [")
    edit(tmp_catalog / "quants" / "q8_0.yaml", "id: q8_0", "id: Q8")
    assert len(problems(tmp_catalog)) == 2


def test_rig_naming_unknown_gpu(tmp_catalog):
    edit(tmp_catalog / "rigs" / "2x-rtx-4090.yaml", "gpu: rtx-4090", "gpu: rtx-9999")
    [msg] = problems(tmp_catalog)
    where = "catalog/rigs/2x-rtx-4090.yaml: entry '2x-rtx-4090': field gpu"
    assert msg == f"{where}: unknown GPU id 'rtx-9999'"
