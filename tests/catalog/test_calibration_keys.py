"""Every platform and link in the catalog has its calibration constants, checked on load."""

from __future__ import annotations

import shutil

import pytest
import yaml
from backpressure.catalog.errors import CatalogError
from backpressure.catalog.loader import DEFAULT_ROOT, load_catalog
from backpressure.generator import resolve
from backpressure.generator.cli.main import main


def copy_catalog(tmp_path):
    root = tmp_path / "catalog"
    shutil.copytree(DEFAULT_ROOT, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return root


def drop_calibration(root, *keys):
    path = root / "calibration.yaml"
    data = yaml.safe_load(path.read_text())
    for key in keys:
        del data[key]
    path.write_text(yaml.safe_dump(data))


def test_every_platform_in_the_catalog_has_its_constants(cat):
    constants = resolve.constants(cat)
    for gpu in cat.gpus.values():
        assert gpu.platform in constants.bandwidth_efficiency
        assert gpu.platform in constants.layer_overhead_s
    for rig in cat.rigs.values():
        assert rig.interconnect in constants.allreduce_latency_s


def test_intel_is_a_platform_of_its_own(cat):
    assert cat.gpus["arc-b580"].platform == "intel"
    assert resolve.device_for(cat, "arc-b580").platform == "intel"
    assert cat.gpus["epyc-9654-768gb"].platform == "cpu"  # system memory: the CPU's figures


def test_a_vendor_without_calibration_fails_with_one_line(tmp_path):
    root = copy_catalog(tmp_path)
    drop_calibration(root, "bandwidth_efficiency_intel", "layer_overhead_s_intel")
    with pytest.raises(CatalogError) as info:
        load_catalog(root)
    assert [str(p) for p in info.value.problems] == [
        "catalog/calibration.yaml: missing bandwidth_efficiency_intel, layer_overhead_s_intel "
        "(needed by gpus/arc-b580.yaml, gpus/arc-pro-b60.yaml)"
    ]


def test_the_cli_prints_that_line_and_exits_2(tmp_path, capsys):
    root = copy_catalog(tmp_path)
    drop_calibration(root, "layer_overhead_s_intel")
    argv = ["estimate", "--gpu", "arc-b580", "--model", "llama-3.1-8b", "--quant", "q4_k_m"]
    code = main([*argv, "--context", "8192", "--catalog", str(root)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.splitlines() == [
        "backpressure: error: catalog/calibration.yaml: missing layer_overhead_s_intel "
        "(needed by gpus/arc-b580.yaml, gpus/arc-pro-b60.yaml)"
    ]


def test_a_rig_link_without_calibration_fails(tmp_path):
    root = copy_catalog(tmp_path)
    drop_calibration(root, "allreduce_latency_s_infinity-fabric")
    with pytest.raises(CatalogError, match=r"missing allreduce_latency_s_infinity-fabric \(needed"):
        load_catalog(root)


def test_many_users_are_shortened(tmp_path):
    root = copy_catalog(tmp_path)
    drop_calibration(root, "bandwidth_efficiency_nvidia")
    with pytest.raises(CatalogError) as info:
        load_catalog(root)
    (problem,) = info.value.problems
    assert "missing bandwidth_efficiency_nvidia (needed by gpus/a100-40gb-sxm.yaml" in str(problem)
    assert str(problem).endswith(" more)")


def test_a_runtime_backend_without_calibration_fails(tmp_path):
    root = copy_catalog(tmp_path)
    drop_calibration(root, "bandwidth_efficiency_amd_vulkan")
    with pytest.raises(CatalogError) as info:
        load_catalog(root)
    assert [str(p) for p in info.value.problems] == [
        "catalog/calibration.yaml: missing bandwidth_efficiency_amd_vulkan "
        "(needed by runtimes/llama.cpp.yaml)"
    ]
