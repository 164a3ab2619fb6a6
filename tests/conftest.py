"""Shared fixtures: the bundled catalog, loaded once."""

from __future__ import annotations

import pytest
from backpressure.catalog.loader import Catalog, load_catalog


@pytest.fixture(scope="session")
def cat() -> Catalog:
    return load_catalog()
