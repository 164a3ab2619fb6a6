"""A cached kernel goes stale when any engine source changes, not only its own file."""

from __future__ import annotations

import shutil

import pytest
from backpressure.engine.sim import jit

pytestmark = pytest.mark.skipif(not jit.COMPILED, reason="numba is not installed")


def test_the_digest_follows_every_engine_file(tmp_path):
    root = tmp_path / "engine"
    shutil.copytree(jit.ENGINE, root, ignore=shutil.ignore_patterns("__pycache__"))
    before = jit.sources_digest(root)
    assert jit.sources_digest(jit.ENGINE) == before  # the same bytes, the same digest
    edited = tmp_path / "edited"
    shutil.copytree(root, edited)
    # a helper the serving loop inlines, edited in its own file only
    step = edited / "serving" / "step.py"
    step.write_text(step.read_text() + "\n# edited\n")
    assert jit.sources_digest(edited) != before


def test_engine_kernels_are_stamped_with_every_source():
    from backpressure.engine.serving.kernel import serve

    locator = serve._cache._impl.locator  # numba's cache of the serving loop
    assert type(locator).__name__ == "EngineLocator"
    assert locator.get_source_stamp()[1] == jit.sources_digest()
