"""Load sources: seeded Poisson arrivals, shapes, the bursty cascade, libm-free math."""

import math

import numpy as np
import pytest
from backpressure.engine.rng import mulberry32
from backpressure.engine.sim.libm import (
    EXACT_POISSON_BELOW,
    inverse_normal,
    ln,
    poisson_quantile,
    poisson_rows,
)
from backpressure.engine.sim.traffic import (
    Arrivals,
    Shape,
    SourceSpec,
    arrivals,
    cascade,
    offered_rates,
)
from hypothesis import given, settings
from hypothesis import strategies as st


@given(st.floats(1e-300, 1e300))
def test_ln_matches_libm_to_rounding(x):
    got = float(ln(np.array([x]))[0])
    assert got == pytest.approx(math.log(x), rel=1e-14, abs=1e-15)


def test_inverse_normal_is_accurate():
    from statistics import NormalDist

    u = np.linspace(1e-6, 1 - 1e-6, 2001)
    want = np.array([NormalDist().inv_cdf(float(p)) for p in u])
    assert np.max(np.abs(inverse_normal(u) - want)) < 1e-7  # Acklam: 1.15e-9 relative


@pytest.mark.parametrize("lam", [0.3, 4.0, 30.0, 49.9, 50.0, 150.0, 2000.0])
def test_poisson_counts_have_poisson_mean_and_variance(lam):
    u = mulberry32(5).block(200_000)
    n = poisson_quantile(np.full(u.shape, lam), u)
    assert n.mean() == pytest.approx(lam, rel=0.01, abs=0.01)
    assert n.var() == pytest.approx(lam, rel=0.03)
    assert np.all(n == np.floor(n))


@given(st.floats(0, 400), st.floats(0, 400), st.floats(0, 0.999999))
def test_poisson_quantile_is_monotone_in_the_rate(a, b, u):
    lo, hi = sorted((a, b))
    # the two methods meet at EXACT_POISSON_BELOW; allow their one-count seam there
    seam = 1.0 if lo < EXACT_POISSON_BELOW <= hi else 0.0
    nl = poisson_quantile(np.array([lo]), np.array([u]))[0]
    nh = poisson_quantile(np.array([hi]), np.array([u]))[0]
    assert nl <= nh + seam


def test_cascade_has_mean_one_and_is_seeded():
    a = cascade(6000, 0.65, mulberry32(3))
    b = cascade(6000, 0.65, mulberry32(3))
    assert np.array_equal(a, b)
    assert a.mean() == pytest.approx(1.0, rel=1e-12)
    assert a.max() > 2.0  # bursts
    assert np.all(cascade(1000, 0.5, mulberry32(3)) == pytest.approx(1.0))


def test_shapes_scale_with_the_level():
    ramp = SourceSpec(shape=Shape.RAMP, rps=100.0, start_fraction=0.2, ramp_s=10.0)
    r = offered_rates(ramp, np.array([100.0, 200.0]), 200, 0.1, mulberry32(1))
    assert r[0, 0] == pytest.approx(20.0)
    assert r[0, 150] == pytest.approx(100.0)
    assert np.allclose(r[1], 2 * r[0])
    step = SourceSpec(shape=Shape.STEP, rps=50.0, base_fraction=0.5, at_s=1.0, until_s=2.0)
    s = offered_rates(step, np.array([50.0]), 30, 0.1, mulberry32(1))[0]
    assert s[9] == 25.0
    assert s[10] == 50.0
    assert s[19] == 50.0
    assert s[20] == 25.0


def test_lanes_share_their_draws():
    spec = SourceSpec(rps=100.0)
    rates = offered_rates(spec, np.array([100.0, 100.0]), 50, 0.1, mulberry32(1))
    n = arrivals(spec, rates, 0.1, mulberry32(2))
    assert np.array_equal(n[0], n[1])
    fluid = arrivals(SourceSpec(arrivals=Arrivals.DETERMINISTIC), rates, 0.1, mulberry32(2))
    assert np.all(fluid == 10.0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(0, 80), min_size=1, max_size=12),
    st.integers(1, 400),
    st.integers(0, 2**32 - 1),
    st.booleans(),
)
def test_poisson_rows_equal_the_general_inversion(lams, ticks, seed, ties):
    # One mean per lane (a constant source), the same draws in every lane.
    lam = np.array(lams)
    u = mulberry32(seed).block(ticks)
    if ties:
        u[::2] = u[0]
    want = poisson_quantile(
        np.broadcast_to(lam[:, None], (lam.size, ticks)),
        np.broadcast_to(u[None, :], (lam.size, ticks)),
    )
    assert np.array_equal(poisson_rows(lam, u), want)


def test_counts_do_not_depend_on_the_other_lanes_of_the_call():
    # The CDF table runs to the largest mean of the call; for a smaller mean the
    # extra terms are below half an ulp of its total, so no count moves.
    u = mulberry32(8).block(3000)
    lam = np.array([0.01, 0.7, 4.0, 20.0, 49.0])
    together = poisson_rows(lam, u)
    for i, m in enumerate(lam):
        assert np.array_equal(together[i], poisson_rows(np.array([m]), u)[0])


def test_poisson_rows_settle_draws_that_land_on_a_cdf_step():
    # Draws placed at the step values cdf_k / total and one ulp either side: the
    # binary search on those quotients is then off by a place, and the counts
    # must still be the products' (what poisson_quantile compares).
    lam = np.array([0.3, 1.0, 2.5, 7.0])
    terms = np.cumprod(
        np.concatenate([np.ones((4, 1)), lam[:, None] / np.arange(1, 40)], axis=1), axis=1
    )
    cdf = np.cumsum(terms, axis=1)
    edges = (cdf / cdf[:, -1:]).reshape(-1) - 2.0**-33  # poisson_* add 2**-33 back
    u = np.concatenate([edges, np.nextafter(edges, 0.0), np.nextafter(edges, 1.0)])
    u = u[(u >= 0.0) & (u < 1.0)]
    want = poisson_quantile(
        np.broadcast_to(lam[:, None], (4, u.size)), np.broadcast_to(u[None, :], (4, u.size))
    )
    assert np.array_equal(poisson_rows(lam, u), want)
