"""The cohort queue: served quantiles, ageing and the linked cohorts, against brute force."""

import numpy as np
from backpressure.engine.sim.cohorts import NO_OLDEST, Cohorts, age_out, enqueue, serve
from hypothesis import given, settings
from hypothesis import strategies as st


def _waiting(q, lane):
    """The lane's linked cohorts, oldest to newest, as {arrival tick: count}."""
    out, k = {}, int(q.oldest[lane])
    while k != NO_OLDEST:
        out[k // q.lanes] = float(q.counts.reshape(-1)[k])
        k = NO_OLDEST if k == q.newest[lane] else int(q.links[0].reshape(-1)[k])
    return out


def _brute(cohorts, amount, lifo, p):
    """Expand whole requests (oldest first) and read the quantile directly."""
    ages = []
    for age, n in sorted(cohorts.items(), reverse=True):  # oldest first
        ages += [age] * n
    taken = ages[-amount:] if lifo else ages[:amount]
    taken.sort()
    return taken[int(np.ceil(p * amount)) - 1]


@given(
    st.dictionaries(st.integers(0, 30), st.integers(1, 20), min_size=1, max_size=8),
    st.booleans(),
    st.data(),
)
def test_served_quantiles_match_brute_force(cohorts, lifo, data):
    total = sum(cohorts.values())
    amount = data.draw(st.integers(1, total))
    t = 30
    q = Cohorts.empty(1, t + 1)
    for age in sorted(cohorts, reverse=True):  # arrival order
        enqueue(q, t - age, np.array([float(cohorts[age])]))
    p50, p99, head = serve(q, t, np.array([float(amount)]), np.array([lifo]))
    assert p50[0] == _brute(cohorts, amount, lifo, 0.5)
    assert p99[0] == _brute(cohorts, amount, lifo, 0.99)
    assert q.backlog[0] == total - amount
    left = _waiting(q, 0)
    assert sum(left.values()) == total - amount
    if total > amount:
        assert head[0] == t - min(left)
        assert q.oldest[0] // q.lanes == min(left)
        assert q.newest[0] // q.lanes == max(left)
    else:
        assert head[0] == 0.0


def test_age_out_drops_exactly_what_is_older_than_max_age():
    q = Cohorts.empty(1, 10)
    for tick, n in [(0, 3.0), (1, 4.0), (2, 5.0)]:
        enqueue(q, tick, np.array([n]))
    assert age_out(q, 3, max_age_ticks=2).tolist() == [3.0]  # tick-0 work is 3 old
    assert q.backlog.tolist() == [9.0]
    assert age_out(q, 3, max_age_ticks=2).tolist() == [0.0]
    assert q.oldest.tolist() == [1]  # the tick-1 cohort, lane 0 of 1


def test_age_out_after_skipped_ticks_drops_every_cohort_past_the_age_in_order():
    q = Cohorts.empty(2, 10)
    for tick, n in [(0, [1.0, 2.0]), (1, [4.0, 0.0]), (2, [8.0, 16.0]), (5, [32.0, 0.0])]:
        enqueue(q, tick, np.array(n))
    assert age_out(q, 7, max_age_ticks=4).tolist() == [13.0, 18.0]  # ticks 0-2 are 5-7 old
    assert q.backlog.tolist() == [32.0, 0.0]
    assert q.oldest.tolist() == [5 * 2, NO_OLDEST]  # lane 0: tick 5 (flat 5 x 2); lane 1 empty


class _Reference:
    """The queue as a plain dict of whole requests per arrival tick (one lane)."""

    def __init__(self):
        self.cohorts = {}

    def age_out(self, t, max_age):
        old = [c for c in self.cohorts if c < t - max_age]
        return float(sum(self.cohorts.pop(c) for c in old))

    def serve(self, t, amount, lifo):
        ages = {t - c: n for c, n in self.cohorts.items()}
        p50 = _brute(ages, amount, lifo, 0.5) if amount else None
        p99 = _brute(ages, amount, lifo, 0.99) if amount else None
        for c in sorted(self.cohorts, reverse=lifo):
            got = min(amount, self.cohorts[c])
            amount -= got
            self.cohorts[c] -= got
            if not self.cohorts[c]:
                del self.cohorts[c]
        head = t - min(self.cohorts) if self.cohorts else 0
        return (head if p50 is None else p50), (head if p99 is None else p99), head


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 5), st.booleans()), min_size=1, max_size=60
    ),
    st.integers(1, 12),
)
def test_a_run_of_ticks_matches_the_reference_queue(steps, max_age):
    # Each step: a tick's arrivals, what the server can take, and FIFO or LIFO.
    # Whole requests keep the float arithmetic exact, so everything compares equal.
    lanes = 3  # the same steps in every lane, shifted, to show lanes stay apart
    q = Cohorts.empty(lanes, len(steps))
    refs = [_Reference() for _ in range(lanes)]
    for t, (arrive, cap, lifo) in enumerate(steps):
        arrivals = np.array([float((arrive + k) % 7) for k in range(lanes)])
        aged = age_out(q, t, max_age)
        enqueue(q, t, arrivals)
        amount = np.minimum(q.backlog, float(cap))
        w50, w99, head = serve(q, t, amount, np.array([lifo, not lifo, lifo]))
        for k, ref in enumerate(refs):
            assert aged[k] == ref.age_out(t, max_age)
            if arrivals[k]:
                ref.cohorts[t] = int(arrivals[k])
            assert amount[k] == min(sum(ref.cohorts.values()), cap)
            want = ref.serve(t, int(amount[k]), lifo if k != 1 else not lifo)
            assert (w50[k], w99[k], head[k]) == want
            assert q.backlog[k] == sum(ref.cohorts.values())
            assert _waiting(q, k) == {c: float(n) for c, n in ref.cohorts.items()}


def test_fluid_residue_below_dust_is_dropped_with_the_queue():
    q = Cohorts.empty(2, 5)
    enqueue(q, 0, np.array([1.0, 1.0]))
    serve(q, 0, np.array([1.0 - 1e-12, 0.5]), np.array([False, False]))
    assert q.backlog.tolist() == [0.0, 0.5]
    assert q.oldest[0] > 10**9  # empty again: nothing can age out
    assert not q.busy or q.backlog[0] == 0.0
