"""Shared fixtures: the bundled catalog, loaded once; scenario runs, made once per input."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.generator.site import scenarios


@pytest.fixture(scope="session")
def cat() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="session", autouse=True)
def scenario_runs_once_per_input() -> Iterator[None]:
    """Every site build runs the catalog's scenarios (seconds each, more under coverage).

    Dozens of tests build sites from the same scenario files; within a test
    process each distinct input (the scenario, its parts and the engine spec the
    catalog resolves it to) is run once and its page context handed out as a
    copy. The site's own cache logic is untouched: a build still asks for a run
    exactly when its cache misses, which is what the tests that count runs see.
    """
    from backpressure.generator.simulate import build_spec

    real = scenarios._context
    made: dict[str, dict[str, Any]] = {}

    def once(loaded: Any, capacity: Any) -> dict[str, Any]:
        spec = build_spec(loaded, capacity=capacity)
        key = repr((loaded.scenario, loaded.nodes, spec))
        if key not in made:
            made[key] = real(loaded, capacity)
        return copy.deepcopy(made[key])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scenarios, "_context", once)
        yield
