"""The examples in the docstrings are tests: every module of the package, run by doctest."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path
from types import ModuleType

import pytest

PACKAGES = ("backpressure.engine", "backpressure.catalog", "backpressure.generator")


def _modules() -> list[str]:
    """Every module file under the packages' folders (pkgutil skips folders with no __init__)."""
    names = []
    for package in PACKAGES:
        root = Path(importlib.import_module(package).__path__[0])
        for path in root.rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names.append(".".join((package, *parts)))
    return sorted(names)


MODULES = _modules()
FINDER = doctest.DocTestFinder(exclude_empty=True)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _examples(module: ModuleType) -> int:
    return sum(len(t.examples) for t in FINDER.find(module))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in FINDER.find(module):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"


def test_the_package_has_examples() -> None:
    # A walk that found no modules, or a finder that saw no docstrings, would pass above.
    assert len(MODULES) > 50
    counted = {name: _examples(importlib.import_module(name)) for name in MODULES}
    assert sum(counted.values()) >= 25
    assert sum(1 for n in counted.values() if n) >= 8
