"""The compiled loops give the numpy loops' bits, and the pure-Python fallback runs."""

from dataclasses import replace

import numpy as np
import pytest
from backpressure.engine.rng import mulberry32
from backpressure.engine.sim import kernel as kernel
from backpressure.engine.sim import libm, loop, rules
from backpressure.engine.sim import sums as sums
from backpressure.engine.sim.jit import COMPILED
from backpressure.engine.sim.libm import poisson_quantile, poisson_rows
from backpressure.engine.sim.model import LlmSpec, Rules, slot_time_s
from backpressure.engine.sim.queueing import Discipline
from backpressure.engine.sim.rules import cumsum_ticks, rolling_from
from backpressure.engine.sim.run import simulate
from backpressure.engine.sim.sums import lane_sums
from backpressure.engine.sim.traffic import Arrivals, Shape
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.sim.test_run import _assert_same_result
from tests.engine.sim.test_support import llm_node, scenario

pytestmark = pytest.mark.skipif(not COMPILED, reason="numba is not installed")


def _numpy_only(monkeypatch):
    for module in (loop, rules, libm, sums):
        monkeypatch.setattr(module, "COMPILED", False)


def _rig(slots, depth_per_slot, max_age_s, lifo, output_tokens=128, duration_s=40.0, bursty=False):
    llm = LlmSpec.explicit(
        slots=slots,
        prefill_tokens_per_s=4000.0,
        step_fixed_s=0.01,
        step_per_kv_token_s=2e-7,
        step_compute_per_seq_s=0.0005,
        prompt_tokens=600,
        output_tokens=output_tokens,
    )
    node = replace(
        llm_node("llm", llm=llm),
        discipline=Discipline.BUFFER,
        max_depth=depth_per_slot * slots,
        max_age_s=max_age_s,
        lifo=lifo,
    )
    shape = {"shape": Shape.BURSTY} if bursty else {}
    return scenario(
        [node],
        1.0,
        duration_s=duration_s,
        arrivals=Arrivals.POISSON,
        rules=Rules(p99_slo_ms=2000.0),
        **shape,
    )


def _levels(spec):
    llm = spec.nodes[0].llm
    saturation = llm.slots / float(slot_time_s(llm, np.array([float(llm.slots)]))[0])
    return list(np.geomspace(0.1, 4.0, 24) * saturation)


@pytest.mark.parametrize(
    "rig",
    [
        _rig(16, 8.0, 6.0, True),  # the sweep's shape: buffer, max age, adaptive LIFO
        _rig(16, 8.0, 6.0, False),  # FIFO throughout
        _rig(3, 2.0, None, True),  # no max age, a short queue
        _rig(64, 8.0, 2.0, True, output_tokens=32, bursty=True),  # many small cohorts
        _rig(1, 30.0, 10.0, False, output_tokens=512),  # one slow slot, a long walk
    ],
)
def test_compiled_tick_loop_equals_the_numpy_loop(rig, monkeypatch):
    levels = _levels(rig)
    compiled = simulate(rig, levels, mulberry32(7))
    assert np.any(compiled.flows["llm"]["backlog"] > 0)  # queues formed: the walk ran
    with monkeypatch.context() as m:
        _numpy_only(m)
        reference = simulate(rig, levels, mulberry32(7))
    _assert_same_result(compiled, reference)


@settings(max_examples=25, deadline=None)
@given(
    slots=st.integers(1, 40),
    depth=st.sampled_from([0.5, 2.0, 8.0]),
    age=st.sampled_from([None, 1.0, 5.0]),
    lifo=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_compiled_loop_equals_numpy_for_any_rig(slots, depth, age, lifo, seed):
    rig = _rig(slots, depth, age, lifo, duration_s=15.0)
    levels = _levels(rig)
    compiled = simulate(rig, levels, mulberry32(seed))
    with pytest.MonkeyPatch.context() as m:
        _numpy_only(m)
        reference = simulate(rig, levels, mulberry32(seed))
    _assert_same_result(compiled, reference)


def test_pure_python_fallback_gives_the_same_bits(monkeypatch):
    # Where numba is missing the same functions run as Python: check they are right.
    rig = _rig(4, 4.0, 1.0, True, duration_s=3.0)
    levels = _levels(rig)[::4]
    compiled = simulate(rig, levels, mulberry32(3))
    monkeypatch.setattr(kernel, "_loop", kernel._loop_py)
    for name in ("_running_sum", "_rolling", "_poisson_rows", "_lane_sums"):
        monkeypatch.setattr(sums, name, getattr(sums, name + "_py"))
    _assert_same_result(simulate(rig, levels, mulberry32(3)), compiled)
    x = np.random.default_rng(1).random((30, 8))
    assert np.array_equal(lane_sums(x.T, 4), x.T[:, 4:].sum(axis=1))


def test_sums_along_ticks_equal_numpy_on_time_major_views():
    rng = np.random.default_rng(5)
    block = rng.exponential(size=(1800, 256)) * rng.integers(0, 2, (1800, 256))
    one = block[:, 40:80].T  # one config's lanes of a block, as the flows are
    assert np.array_equal(lane_sums(one), one.sum(axis=1))
    assert np.array_equal(lane_sums(one, 900), one[:, 900:].sum(axis=1))
    lane_major = np.ascontiguousarray(one)  # numpy sums this pairwise: left to numpy
    assert np.array_equal(lane_sums(lane_major), lane_major.sum(axis=1))
    ct = cumsum_ticks(block.T)
    assert np.array_equal(ct, np.cumsum(block.T, axis=1))
    for window in (1, 600, 1800, 5000):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(rules, "COMPILED", False)
            want = rolling_from(ct, window)
        assert np.array_equal(rolling_from(ct, window), want)


@pytest.mark.parametrize("scale", [0.5, 30.0, 49.9, 80.0, 4000.0])
def test_poisson_rows_equal_poisson_quantile(scale):
    rng = np.random.default_rng(int(scale * 10))
    lam = np.sort(rng.random(40) * scale)
    lam[0] = 0.0
    u = rng.random(1800)
    assert np.array_equal(poisson_rows(lam, u), poisson_quantile(lam[:, None], u[None, :]))
