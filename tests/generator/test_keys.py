"""Which code a cached result depends on: derived from imports, never listed by hand."""

from __future__ import annotations

import pytest
from backpressure.generator import keys

ROOT = keys.ROOT


def _files(module: str) -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in keys.code_files(module)}


# Each was once missing from a hand-kept list, and an edit to it published stale output.
@pytest.mark.parametrize(
    ("module", "path"),
    [
        (keys.SWEEP_MODULE, "generator/resolve.py"),
        (keys.SWEEP_MODULE, "generator/text.py"),
        (keys.SWEEP_MODULE, "generator/records.py"),
        (keys.SWEEP_MODULE, "catalog/hf_config.py"),
        (keys.SWEEP_MODULE, "engine/serving/kernel.py"),
        (keys.CONFIG_PAGE_MODULE, "generator/site/chart_pack.py"),
        (keys.SCENARIO_MODULE, "generator/site/chart_pack.py"),
        (keys.SCENARIO_MODULE, "engine/sim/loop.py"),
    ],
)
def test_the_code_a_result_depends_on_is_derived(module, path):
    assert path in _files(module)


@pytest.mark.parametrize(
    "path",
    [
        "generator/site/chart_pack.py",
        "generator/site/configs.py",
        "generator/cli/estimate.py",
        "engine/sim/loop.py",
        "generator/simulate.py",
    ],
)
def test_the_sweep_does_not_depend_on_pages_cli_or_scenarios(path):
    # so an edit there reuses every row
    assert path not in _files(keys.SWEEP_MODULE)


def test_an_unknown_module_is_an_error():
    with pytest.raises(ValueError, match="not a module"):
        keys.code_files("json")


def test_a_code_edit_moves_the_digest(monkeypatch):
    before = keys.code_digest(keys.SWEEP_MODULE)
    real = keys.read_bytes
    edited = ROOT / "generator" / "text.py"
    monkeypatch.setattr(keys, "read_bytes", lambda p: real(p) + (b"#" if p == edited else b""))
    assert keys.code_digest(keys.SWEEP_MODULE) != before
