"""A small catalog and a complete sweep of one model on it, shared by the planner tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from backpressure.catalog.loader import Catalog, load_catalog
from backpressure.generator.sweep.combos import enumerate_combos

from tests.generator.fixtures import write_fixture
from tests.generator.small_catalog import make_small_catalog

MODEL = "llama-3.1-8b"
DEVICE = "rtx-4090"  # every model is swept on it, for the device questions


@dataclass(frozen=True)
class Small:
    root: Path
    cat: Catalog
    sweep: Path


@pytest.fixture(scope="session")
def small(tmp_path_factory: pytest.TempPathFactory) -> Small:
    """The small catalog (4 GPUs, a rig, 2k and 8k), swept for llama-3.1-8b and the RTX 4090."""
    root = make_small_catalog(tmp_path_factory.mktemp("plan-cat"))
    cat = load_catalog(root)
    combos = [
        (c.device, c.model, c.quant, c.context)
        for c in enumerate_combos(cat)
        if c.model == MODEL or c.device == DEVICE
    ]
    sweep = tmp_path_factory.mktemp("plan-sweep")
    write_fixture(sweep, combos, cat)
    return Small(root, cat, sweep)
