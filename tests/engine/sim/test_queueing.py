"""The M/M/1 curve and the discipline registry."""

import pytest
from backpressure.engine.sim.queueing import DISCIPLINES, RHO_CAP, Discipline, mm1_factor
from hypothesis import given
from hypothesis import strategies as st


def test_mm1_factor_is_twenty_at_95_percent():
    # 1 / (1 - 0.95) in binary floating point is 19.999999999999982; 1e-12 relative
    # is far below anything the simulation shows.
    assert float(mm1_factor(0.95)) == pytest.approx(20.0, rel=1e-12)
    assert float(mm1_factor(0.0)) == 1.0
    assert float(mm1_factor(0.9)) == pytest.approx(10.0, rel=1e-12)


def test_mm1_factor_is_capped_where_the_closed_form_diverges():
    assert float(mm1_factor(1.5)) == pytest.approx(1.0 / (1.0 - RHO_CAP))


@given(st.floats(0, 1), st.floats(0, 1))
def test_mm1_factor_is_monotone_in_utilization(a, b):
    lo, hi = sorted((a, b))
    assert float(mm1_factor(lo)) <= float(mm1_factor(hi))


def test_registry_is_a_literal_mapping_of_the_three_disciplines():
    assert set(DISCIPLINES) == set(Discipline)
    assert DISCIPLINES[Discipline.SHED].holds is False
    assert DISCIPLINES[Discipline.BUFFER].overflow == "drop"
    assert DISCIPLINES[Discipline.BLOCK].overflow == "refuse"
