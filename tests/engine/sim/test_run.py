"""Tests that prove the simulation's mechanics, one mechanic per test."""

from dataclasses import replace

import numpy as np
import pytest
from backpressure.engine.rng import mulberry32
from backpressure.engine.sim.libm import LN2
from backpressure.engine.sim.model import LlmSpec, Rules, slot_time_s
from backpressure.engine.sim.queueing import Discipline, mm1_factor
from backpressure.engine.sim.rules import ROW_SUM_LANES, cumsum_ticks, latency
from backpressure.engine.sim.run import Scratch, shape_of, simulate, simulate_many, sweep
from backpressure.engine.sim.traffic import Arrivals, Shape
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.sim.test_support import llm_node, scenario, server

BUF = Discipline.BUFFER
BLOCK = Discipline.BLOCK


def run(spec, seed=1, levels=None):
    return simulate(spec, levels or [spec.source.rps], mulberry32(seed))


def col(result, node, name, lane=0):
    return result.flows[node][name][lane]


def test_backlog_carries_to_the_next_tick_and_waiting_adds_latency():
    # 30 requests in tick 0 (300 rps for 100 ms) into a node serving 10 per tick.
    node = server("db", rps=100.0, discipline=BUF, depth=1000, max_age_s=60, service_s=0.002)
    r = run(scenario([node], 300.0, duration_s=1.0, shape=Shape.STEP, until_s=0.1))
    assert col(r, "db", "served")[:4].tolist() == [10.0, 10.0, 10.0, 0.0]
    assert col(r, "db", "backlog")[:4].tolist() == [20.0, 10.0, 0.0, 0.0]
    # What tick 2 serves arrived in tick 0: two ticks (200 ms) of waiting on top of
    # the M/M/1 service time.
    assert col(r, "db", "wait_p50_ticks")[:3].tolist() == [0.0, 1.0, 2.0]
    rho = r.latency.rho["db"][0, 2]
    service_ms = 0.002 * float(mm1_factor(rho)) * LN2 * 1000
    assert r.latency.p50_ms["db"][0, 2] == pytest.approx(200.0 + service_ms, abs=1e-9)


def test_work_older_than_max_age_is_dropped_and_never_served_late():
    node = server("db", rps=100.0, discipline=BUF, depth=100_000, max_age_s=0.5)
    r = run(scenario([node], 200.0, duration_s=10.0))
    aged = col(r, "db", "dropped_aged")
    assert aged[:10].sum() == 0.0  # the head is younger than 5 ticks at first
    assert aged.sum() > 0.0
    assert col(r, "db", "wait_p99_ticks").max() <= 5.0  # nothing served past its max age
    offered, served = col(r, "db", "offered").sum(), col(r, "db", "served").sum()
    assert offered == pytest.approx(served + aged.sum() + col(r, "db", "backlog")[-1])


def _chain(back_discipline):
    front = server("front", rps=1000.0, discipline=BUF, depth=5000, max_age_s=30)
    depth = 0.0 if back_discipline is Discipline.SHED else 200.0
    back = server(
        "back", parent="front", rps=100.0, discipline=back_discipline, depth=depth, max_age_s=5.0
    )
    return run(scenario([front, back], 200.0, duration_s=60.0))


def test_shed_buffer_and_block_differ_on_the_same_overload():
    shed, buffer, block = (_chain(d) for d in (Discipline.SHED, BUF, BLOCK))

    def total(r, node, name):
        return col(r, node, name).sum()

    # shed drops half at once and nobody waits; buffer holds 200 first, so drops
    # less, and those it serves wait up to 2 s; block drops nothing itself.
    assert total(shed, "back", "dropped_shed") == pytest.approx(6000.0)
    assert total(buffer, "back", "dropped_shed") == pytest.approx(6000.0 - 200.0)
    assert total(block, "back", "dropped_shed") == 0.0
    # Both run saturated (same M/M/1 term); buffer adds up to 2 s of explicit wait.
    assert col(shed, "back", "wait_p99_ticks").max() == 0.0
    assert buffer.latency.p99_ms["back"].max() > shed.latency.p99_ms["back"].max() + 1500.0
    # block refuses at intake and the pressure shows up upstream: the front node's
    # queue fills and it sheds by its own rule once full.
    assert total(block, "back", "refused_block") > 0.0
    assert col(shed, "front", "backlog").max() == 0.0
    assert col(block, "front", "backlog").max() == pytest.approx(5000.0)
    assert total(block, "front", "dropped_shed") > 0.0
    assert total(block, "back", "served") == pytest.approx(total(shed, "back", "served"))


def _on_time_bounds(r, deadline_ticks, warmup=20):
    served = col(r, "q", "served")[warmup:]
    w50 = col(r, "q", "wait_p50_ticks")[warmup:]
    w99 = col(r, "q", "wait_p99_ticks")[warmup:]
    lower = np.where(w99 <= deadline_ticks, 0.99, np.where(w50 <= deadline_ticks, 0.5, 0.0))
    upper = np.where(w50 <= deadline_ticks, 1.0, 0.5)
    return float((served * lower).sum()), float((served * upper).sum())


def test_adaptive_lifo_serves_more_within_deadline_than_fifo_at_double_load():
    def queue(lifo):
        return server("q", rps=100.0, discipline=BUF, depth=100_000, max_age_s=5.0, lifo=lifo)

    fifo = run(scenario([queue(False)], 200.0, duration_s=60.0))
    lifo = run(scenario([queue(True)], 200.0, duration_s=60.0))
    assert col(fifo, "q", "served").sum() == pytest.approx(col(lifo, "q", "served").sum())
    lifo_lower, _ = _on_time_bounds(lifo, deadline_ticks=10)  # 1 s deadline
    _, fifo_upper = _on_time_bounds(fifo, deadline_ticks=10)
    assert lifo_lower > 1.5 * fifo_upper


def _soak(minutes):
    node = server("app", rps=100.0)
    rules = Rules(p99_slo_ms=None)
    spec = scenario(
        [node], 85.0, duration_s=300.0, rules=rules, shape=Shape.STEP, until_s=60.0 * minutes
    )
    return run(spec).reports[0]


def test_soak_fails_at_85_percent_for_two_minutes_and_passes_for_one():
    two, one = _soak(2), _soak(1)
    assert not two.passed
    assert (two.failing_rule, two.failing_node) == ("soak", "app")
    assert two.fail_s == pytest.approx(119.9)
    assert "85 % busy for 2 min" in two.bottleneck
    assert one.passed


def test_audit_case_healthy_completion_rate_but_slots_drop_users():
    # 5000 users, one request every 555.6 s each: 9 rps into 18 slots, with a
    # waiting line as deep as the slots (what an inference server keeps).
    node = llm_node("llm")
    node = replace(node, discipline=BUF, max_depth=18.0, max_age_s=10.0)
    spec = scenario(
        [node],
        5000 / 555.6,
        duration_s=300.0,
        arrivals=Arrivals.POISSON,
        rules=Rules(p99_slo_ms=None),
    )
    r = run(spec)
    llm = node.llm
    # The old view: completions per second over the completion rate the GPU could
    # reach were it never short of slots (its decode compute ceiling: 0.403 ms of
    # host time per sequence and step, llm_node's step_compute_per_seq_s).
    completions = col(r, "llm", "served")[600:].sum() / 240.0
    old_capacity = 1.0 / (llm.output_tokens * 0.000403)
    assert completions / old_capacity == pytest.approx(0.45, abs=0.02)  # "45 % utilization"
    # The hardware's view: every slot is taken and users are being turned away.
    assert col(r, "llm", "utilization")[600:].mean() > 0.98
    dropped = col(r, "llm", "dropped_shed").sum() + col(r, "llm", "dropped_aged").sum()
    assert dropped > 0.1 * col(r, "llm", "offered").sum()
    rep = r.reports[0]
    assert not rep.passed
    assert (rep.failing_rule, rep.failing_node) == ("error_budget", "llm")
    assert rep.bottleneck.startswith("llm: slots full (18 of 18)")


def test_llm_slot_time_follows_the_step_model():
    llm = llm_node("llm").llm  # 8 ms weight read, 1e-7 s per KV token, 5,000 tokens/s
    # With 18 streams, a request's 512-token prompt rides in one step beside the
    # other 17 decoding (each holding 512 + 256 / 2 KV tokens): compute binds.
    with_prompt = max(0.008 + 17 * 640 * 1e-7, (17 + 512) / 5000, 18 * 0.000403)
    assert with_prompt == (17 + 512) / 5000
    # A step of 18 decode tokens reads the weights and 18 x 640 KV tokens.
    decode = max(0.008 + 18 * 640 * 1e-7, 18 / 5000, 18 * 0.000403)
    assert decode == pytest.approx(0.009152)
    # A request holds its slot while the 18 prompts and its own 255 decodes go by.
    want = 18 * with_prompt + (256 - 18) * decode
    assert float(slot_time_s(llm, np.array([18.0]))[0]) == pytest.approx(want, rel=1e-12)
    # One stream alone: its prompt's step, then 255 decode steps of one token.
    alone = 512 / 5000 + 255 * max(0.008 + 640e-7, 1 / 5000, 0.000403)
    assert float(slot_time_s(llm, np.array([0.3]))[0]) == pytest.approx(alone, rel=1e-12)


def test_ttft_adds_the_upstream_queue_wait_and_breaks_the_budget():
    queue = server("queue", rps=5000.0, discipline=BUF, depth=10_000, max_age_s=30)
    model = llm_node("llm", parent="queue", discipline=BLOCK)
    r = run(scenario([queue, model], 9.0, duration_s=120.0, rules=Rules(p99_slo_ms=None)))
    ttft = r.latency.ttft_ms["llm"][0]
    queue_p99 = r.latency.p99_ms["queue"][0]
    prefill_ms = 512 / 5000 * 1000
    assert np.all(ttft >= queue_p99 + prefill_ms - 1e-9)
    assert col(r, "queue", "backlog").max() > 100  # block pushed the wait upstream
    rep = r.reports[0]
    assert (rep.failing_rule, rep.failing_node) == ("ttft", "llm")
    assert "over the 1.5 s budget" in rep.bottleneck


def test_error_budget_counts_requests_lost_anywhere():
    node = server("app", rps=100.0)
    r = run(
        scenario(
            [node],
            100.2,
            duration_s=60.0,
            arrivals=Arrivals.POISSON,
            rules=Rules(p99_slo_ms=None, availability=0.999),
        )
    )
    lost = col(r, "app", "dropped_shed")
    budget = 0.001 * 100.2 * 60.0
    left = r.latency.total_budget_left[0]
    assert left[-1] == pytest.approx(1.0 - lost.sum() / budget)
    rep = r.reports[0]
    assert rep.failing_rule == "error_budget"
    first = int(np.argmax(np.cumsum(lost) >= budget))
    assert rep.fail_s == pytest.approx(first * 0.1)


def test_same_seed_same_bits_other_seed_other_bits():
    spec = scenario(
        [server("app", rps=150.0, discipline=BUF, depth=500, max_age_s=2)],
        140.0,
        arrivals=Arrivals.POISSON,
        shape=Shape.BURSTY,
    )
    a, b, c = run(spec, seed=3), run(spec, seed=3), run(spec, seed=4)
    for name in a.flows["app"]:
        assert np.array_equal(a.flows["app"][name], b.flows["app"][name])
    assert not np.array_equal(a.flows["app"]["offered"], c.flows["app"]["offered"])
    assert a.reports == b.reports


def test_a_sweep_as_one_array_call_equals_the_scalar_loop():
    nodes = [
        server("app", rps=400.0),
        server("db", parent="app", rps=300.0, discipline=BUF, depth=400, max_age_s=3, lifo=True),
        server("queue", parent="app", rps=1000.0, discipline=BUF, depth=300, max_age_s=20),
        llm_node("llm", parent="queue", discipline=BLOCK),
    ]
    spec = scenario(
        nodes,
        100.0,
        duration_s=40.0,
        arrivals=Arrivals.POISSON,
        shape=Shape.BURSTY,
        rules=Rules(p99_slo_ms=400.0),
    )
    levels = [2.0, 150.0, 290.0, 350.0, 600.0]
    together = simulate(spec, levels, mulberry32(9))
    for lane, level in enumerate(levels):
        alone = simulate(spec, [level], mulberry32(9))
        for node in together.flows:
            for name, values in together.flows[node].items():
                assert np.array_equal(values[lane], alone.flows[node][name][0]), (level, node, name)
            assert np.array_equal(
                together.latency.ttft_ms[node][lane], alone.latency.ttft_ms[node][0]
            )
        assert together.reports[lane] == alone.reports[0]
    report = sweep(spec, levels, mulberry32(9))
    assert report.points == together.reports
    assert report.breaking_rps == next(p.rps for p in report.points if not p.passed)


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(list(Discipline)),
    st.floats(10.0, 400.0),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
def test_every_request_is_accounted_for(discipline, rps, lifo, seed):
    depth = 0.0 if discipline is Discipline.SHED else 300.0
    front = server("front", rps=250.0, discipline=BUF, depth=500, max_age_s=3.0, lifo=lifo)
    back = server(
        "back",
        parent="front",
        rps=120.0,
        discipline=discipline,
        depth=depth,
        max_age_s=2.0,
        lifo=lifo,
    )
    r = run(scenario([front, back], rps, duration_s=20.0, arrivals=Arrivals.POISSON), seed=seed)
    for node in ("front", "back"):
        f = r.flows[node]
        intake = f["offered"] - f["admitted"]
        if discipline is not Discipline.BLOCK or node == "front":
            assert intake.sum() == pytest.approx(f["dropped_shed"].sum(), abs=1e-6)
        assert f["admitted"].sum() == pytest.approx(
            f["served"].sum() + f["dropped_aged"].sum() + f["backlog"][0, -1], abs=1e-6
        )
        assert np.all(f["utilization"] <= 1.0 + 1e-12)
        assert np.all(f["backlog"] <= (500.0 if node == "front" else depth) + 1e-9)
    assert np.array_equal(r.flows["back"]["offered"], r.flows["front"]["served"])


def _assert_same_result(got, want):
    """Every array and verdict of two SimResults, bit for bit."""
    assert got.spec == want.spec
    assert np.array_equal(got.levels, want.levels)
    assert np.array_equal(got.rates, want.rates)
    for node, cols in want.flows.items():
        for name, values in cols.items():
            assert np.array_equal(got.flows[node][name], values), (node, name)
    for field in want.latency.__dataclass_fields__:
        a, b = getattr(got.latency, field), getattr(want.latency, field)
        pairs = [(a[k], b[k]) for k in b] if isinstance(b, dict) else [(a, b)]
        for x, y in pairs:
            assert np.array_equal(x, y), field
    assert got.fails.keys() == want.fails.keys()
    for key, ticks in want.fails.items():
        assert np.array_equal(got.fails[key], ticks), key
    assert got.reports == want.reports


def _llm_rigs():
    """Structurally identical load -> LLM rigs with different numbers, sources and rules."""
    rigs = []
    for i, (slots, prefill, fixed, kv, comp) in enumerate(
        [
            (18, 5000.0, 0.008, 1e-7, 0.000403),
            (4, 900.0, 0.03, 4e-7, 0.002),
            (64, 12000.0, 0.005, 3e-8, 0.0001),
            (1, 300.0, 0.05, 1e-6, 0.01),
        ]
    ):
        llm = LlmSpec.explicit(
            slots=slots,
            prefill_tokens_per_s=prefill,
            step_fixed_s=fixed,
            step_per_kv_token_s=kv,
            step_compute_per_seq_s=comp,
            prompt_tokens=512 + 100 * i,
            output_tokens=128,
        )
        node = replace(
            llm_node("llm", llm=llm), discipline=BUF, max_depth=8.0 * slots, max_age_s=6.0
        )
        rules = Rules(p99_slo_ms=None, ttft_budget_ms=1500.0 + 100 * (i // 2))
        shape = {"shape": Shape.BURSTY} if i == 2 else {}
        rigs.append(
            scenario([node], 1.0, duration_s=30.0, arrivals=Arrivals.POISSON, rules=rules, **shape)
        )
    return rigs


@pytest.mark.parametrize("max_lanes", [1, 50, 4096])
def test_many_configs_in_shared_tick_loops_equal_each_run_alone(max_lanes):
    # Lanes = configs x levels; every config keeps its own numbers, rules and seed.
    # The first two share rules and 160 lanes: with room for both in one loop their
    # running sums are taken a row of lanes at a time (engine.sim.rules.cumsum_ticks).
    runs = []
    for i, spec in enumerate(_llm_rigs()):
        saturation = spec.nodes[0].llm.slots / float(
            slot_time_s(spec.nodes[0].llm, np.array([1.0]))[0]
        )
        levels = list(np.geomspace(0.1, 3.0, 80 if i < 3 else 7) * saturation)
        runs.append((spec, levels, 100 + i))
    together = list(
        simulate_many(
            [(s, lv, mulberry32(seed)) for s, lv, seed in runs],
            max_lanes=max_lanes,
            scratch=Scratch(),
        )
    )
    assert len(together) == len(runs)
    for (spec, levels, seed), got in zip(runs, together, strict=True):
        _assert_same_result(got, simulate(spec, levels, mulberry32(seed)))
        assert got.passed.tolist() == [r.passed for r in got.reports]
        assert got.report(len(levels) - 1) == got.reports[-1]


def test_a_graph_with_queues_and_block_runs_batched_as_alone():
    def graph(app_rps, db_rps, depth):
        nodes = [
            server("app", rps=app_rps),
            server(
                "db", parent="app", rps=db_rps, discipline=BUF, depth=depth, max_age_s=3, lifo=True
            ),
            server("queue", parent="app", rps=1000.0, discipline=BUF, depth=300, max_age_s=20),
            llm_node("llm", parent="queue", discipline=BLOCK),
        ]
        return scenario(
            nodes, 100.0, duration_s=20.0, arrivals=Arrivals.POISSON, rules=Rules(p99_slo_ms=400.0)
        )

    specs = [graph(400.0, 300.0, 400), graph(250.0, 500.0, 50), graph(900.0, 120.0, 1000)]
    levels = [2.0, 150.0, 290.0, 350.0, 600.0]
    scratch = Scratch()
    for _ in range(2):  # the second pass reuses the scratch memory of the first
        together = list(simulate_many([(s, levels, mulberry32(7)) for s in specs], scratch=scratch))
        for spec, got in zip(specs, together, strict=True):
            _assert_same_result(got, simulate(spec, levels, mulberry32(7)))


def test_configs_of_different_shapes_cannot_share_a_tick_loop():
    a = scenario([server("app")], 10.0)
    b = scenario([server("app", discipline=BUF, depth=10, max_age_s=1)], 10.0)
    with pytest.raises(ValueError, match="shape"):
        list(simulate_many([(a, [1.0], mulberry32(1)), (b, [1.0], mulberry32(1))]))
    assert shape_of(a) == shape_of(replace(a, nodes=(server("app", rps=5.0),)))


def test_running_sums_row_by_row_equal_numpy_lane_by_lane():
    rng = np.random.default_rng(3)
    x = rng.exponential(size=(300, ROW_SUM_LANES + 5)) * rng.integers(0, 2, (300, 1))
    x[0, :3] = -0.0
    time_major = x.T  # (lanes, ticks) view of a (ticks, lanes) array, as the flows are
    assert np.array_equal(
        cumsum_ticks(time_major), np.cumsum(np.ascontiguousarray(time_major), axis=1)
    )
    few = x[:, :4].T.copy()
    assert np.array_equal(cumsum_ticks(few), np.cumsum(few, axis=1))


def test_one_lane_verdict_needs_no_other_lane_and_nothing_runs_for_no_configs():
    spec = _llm_rigs()[0]
    fresh = simulate(spec, [1.0, 40.0], mulberry32(5))
    first = fresh.report(1)  # built alone, before the full tuple
    assert first == fresh.reports[1]
    assert list(simulate_many([])) == []


def test_latency_defaults_to_the_spec_numbers_and_a_zero_level_has_no_budget():
    spec = scenario([server("app", rps=100.0)], 100.0, arrivals=Arrivals.POISSON)
    r = simulate(spec, [0.0, 150.0], mulberry32(2))
    again = latency(spec, r.flows, r.rates)  # numbers from the spec, not per lane
    for name in r.latency.__dataclass_fields__:
        a, b = getattr(again, name), getattr(r.latency, name)
        for x, y in [(a[k], b[k]) for k in b] if isinstance(b, dict) else [(a, b)]:
            assert np.array_equal(x, y), name
    assert np.all(r.latency.total_budget_left[0] == 1.0)  # nothing offered, nothing lost
    assert r.reports[0].passed
    assert not r.reports[1].passed


def test_a_sweep_that_never_breaks_and_two_children_that_block():
    spec = scenario([server("app", rps=1000.0)], 10.0)
    report = sweep(spec, [1.0, 2.0], mulberry32(1))
    assert report.breaking_rps is None
    assert report.bottleneck == report.points[-1].bottleneck
    nodes = [
        server("front", rps=500.0, discipline=BUF, depth=1000, max_age_s=5),
        server("a", parent="front", rps=100.0, discipline=BLOCK, depth=50, max_age_s=2),
        server("b", parent="front", rps=60.0, discipline=BLOCK, depth=50, max_age_s=2),
    ]
    r = run(scenario(nodes, 200.0, duration_s=10.0))
    # front can pass on no more than the smaller room of its two blocking children
    assert col(r, "front", "served").max() <= 60.0 * 0.1 + 50.0 + 1e-9
    assert col(r, "front", "backlog").max() > 0.0
