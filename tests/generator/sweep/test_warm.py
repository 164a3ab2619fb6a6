"""The warm-up runs every compiled kernel of the engine: processes after it compile none."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from backpressure.engine.sim.jit import COMPILED

# In a fresh process (kernels an earlier test ran would count otherwise): warm up, then
# list every module-level numba function of engine/ that is not inlined into its callers,
# with how many argument types it has been run with.
PROBE = """
import importlib, json, pathlib
import backpressure.engine as engine
from numba.core.registry import CPUDispatcher
from backpressure.generator.sweep.warm import warm
warm()
seen = {}
root = pathlib.Path(engine.__file__).parent
for path in sorted(root.rglob("*.py")):
    parts = path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
        continue
    module = importlib.import_module(".".join(("backpressure.engine", *parts)))
    for name, value in vars(module).items():
        if isinstance(value, CPUDispatcher) and value.targetoptions.get("inline") != "always":
            seen[value.py_func.__module__ + "." + value.py_func.__name__] = len(value.signatures)
print(json.dumps(seen))
"""


@pytest.mark.skipif(not COMPILED, reason="numba is not installed")
def test_the_warm_up_runs_every_kernel():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout
    seen = json.loads(out.splitlines()[-1])
    assert len(seen) >= 9, seen  # the serving loop, its two summaries, the tick loop, its sums
    assert {k for k, n in seen.items() if n == 0} == set()
