"""The M/M/1 curve, the discipline registry and the cohort queue."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.queueing import (
    DISCIPLINES,
    RHO_CAP,
    Cohorts,
    Discipline,
    age_out,
    enqueue,
    mm1_factor,
    serve,
)


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


def _brute(cohorts, amount, lifo, p):
    """Expand whole requests (oldest first) and read the quantile directly."""
    ages = []
    for age, n in sorted(cohorts.items(), reverse=True):  # oldest first
        ages += [age] * n
    taken = ages[-amount:] if lifo else ages[:amount]
    taken.sort()
    return taken[int(np.ceil(p * amount)) - 1]


@given(st.dictionaries(st.integers(0, 30), st.integers(1, 20), min_size=1, max_size=8),
       st.booleans(), st.data())
def test_served_quantiles_match_brute_force(cohorts, lifo, data):
    total = sum(cohorts.values())
    amount = data.draw(st.integers(1, total))
    t = 30
    q = Cohorts.empty(1, t + 1)
    for age, n in cohorts.items():
        enqueue(q, t - age, np.array([float(n)]))
    q.lo = min(t - age for age in cohorts)
    p50, p99, head = serve(q, t, np.array([float(amount)]), np.array([lifo]))
    assert p50[0] == _brute(cohorts, amount, lifo, 0.5)
    assert p99[0] == _brute(cohorts, amount, lifo, 0.99)
    assert q.backlog[0] == total - amount
    left = q.counts[0].sum()
    assert left == pytest.approx(total - amount)
    if total > amount:
        assert head[0] == t - int(np.flatnonzero(q.counts[0] > 0)[0])


def test_age_out_drops_exactly_what_is_older_than_max_age():
    q = Cohorts.empty(1, 10)
    for tick, n in [(0, 3.0), (1, 4.0), (2, 5.0)]:
        enqueue(q, tick, np.array([n]))
    q.lo = 0
    assert age_out(q, 3, max_age_ticks=2).tolist() == [3.0]  # tick-0 work is 3 old
    assert q.backlog.tolist() == [9.0]
    assert age_out(q, 3, max_age_ticks=2).tolist() == [0.0]
