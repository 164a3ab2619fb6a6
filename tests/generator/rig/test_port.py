"""The JavaScript port in Node writes the Python engine's tick files, byte for byte.

Node is the second JavaScript engine; headless chromium runs the same jobs in
tests/browser/test_rig_browser.py. The golden scenarios, generated rigs (30
here, 300 behind the ``slow`` marker), the specs built from rig links, their
verdicts, the sweep's breaking rate, the error messages of bad links and
Python's float formatting are compared.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import random
import re

import pytest
from backpressure.catalog.scenario import load_parts, load_scenario
from backpressure.generator.ci.goldens import SIM_RUNS
from backpressure.generator.paths import GOLDENS
from backpressure.generator.rig.build import levels, run, run_sweep, spec_json, spec_of
from backpressure.generator.rig.doc import RigError, parse
from backpressure.generator.simulate import build_spec, served_for

from tests.generator.rig.rigs import (
    NO_NODE,
    NODE,
    data,
    generated,
    node_jobs,
    python_ticks,
    sha256,
)

if NODE is None and os.environ.get("CI"):  # CI installs it (make browser-deps)
    raise RuntimeError(f"{NO_NODE}: .ci/run must install Debian's nodejs")
pytestmark = pytest.mark.skipif(NODE is None, reason=NO_NODE)

FAST_RIGS = 30
SLOW_RIGS = 300


def _payload(cat, jobs, output="text"):
    index, devices = data(cat)
    return {"index": index, "devices": devices, "output": output, "jobs": jobs}


def _diff(want: str, got: str) -> str:
    lines = difflib.unified_diff(want.splitlines(), got.splitlines(), "python", "node", n=1)
    return "\n".join(list(lines)[:30])


@pytest.mark.parametrize("scenario", sorted(SIM_RUNS))
def test_golden_tick_files_are_the_same_bytes_in_node(scenario, cat):
    seed, rps, duration = SIM_RUNS[scenario]
    loaded = load_scenario(
        cat.root / "scenarios" / f"{scenario}.yaml", load_parts(cat.root / "parts")
    )
    spec = build_spec(
        loaded, rps=rps, duration_s=duration, capacity=lambda **kw: served_for(cat=cat, **kw)
    )
    [got] = node_jobs(_payload(cat, [{"kind": "spec", "spec": spec_json(spec), "seed": seed}]))
    want = (GOLDENS / f"{scenario}.ticks.csv").read_text(encoding="utf-8")
    assert got["ticks"] == want, _diff(want, got["ticks"])


def _compare_rigs(cat, fragments):
    got = node_jobs(_payload(cat, [{"kind": "rig", "fragment": f} for f in fragments], "sha256"))
    mismatched = []
    for fragment, js in zip(fragments, got, strict=True):
        rig = parse(fragment)
        spec = spec_of(rig, cat)
        _result, rep = run(spec, rig.seed)
        assert js["ok"], (fragment, js)
        assert json.loads(json.dumps(spec_json(spec))) == js["spec"], fragment
        verdict = (rep.passed, rep.failing_rule, rep.failing_node, rep.fail_s, rep.bottleneck)
        assert (
            tuple(
                js["report"][k]
                for k in ("passed", "failing_rule", "failing_node", "fail_s", "bottleneck")
            )
            == verdict
        )
        if js["ticks"] != sha256(python_ticks(fragment, cat)):
            mismatched.append(fragment)
    if mismatched:  # show the first difference in full
        [text] = node_jobs(_payload(cat, [{"kind": "rig", "fragment": mismatched[0]}]))
        pytest.fail(
            f"{len(mismatched)} of {len(fragments)} rigs differ, e.g. #{mismatched[0]}\n"
            + _diff(python_ticks(mismatched[0], cat), text["ticks"])
        )
    return got


def test_generated_rigs_give_the_python_bytes_in_node(cat):
    got = _compare_rigs(cat, generated(FAST_RIGS, seed=11))
    rules = {js["report"]["failing_rule"] for js in got}
    assert {None, "p99", "ttft", "error_budget"} <= rules  # the rigs pass and fail every way


# Not traced for coverage: the fast test beside it runs the same code, and tracing
# the Python side of 300 runs would double the suite's longest test.
@pytest.mark.slow
@pytest.mark.no_cover
def test_hundreds_of_generated_rigs_give_the_python_bytes_in_node(cat):
    _compare_rigs(cat, generated(SLOW_RIGS, seed=2024))


def test_the_sweep_finds_the_same_breaking_rate(cat):
    fragments = [
        f + "&sweep=" + ":".join(str(x) for x in (step, step, 12))
        for f, step in zip(generated(4, seed=5), (0.5, 20.0, 3.0, 100.0), strict=True)
    ]
    got = node_jobs(
        _payload(cat, [{"kind": "rig", "fragment": f, "sweep": True} for f in fragments])
    )
    for fragment, js in zip(fragments, got, strict=True):
        rig = parse(fragment)
        report = run_sweep(spec_of(rig, cat), rig)
        assert (js["breaking_rps"], js["bottleneck"]) == (report.breaking_rps, report.bottleneck)
        assert len(levels(rig)) == 12


BAD = [
    "",
    "v=2&rps=1",
    "v=1&rps=-5&node=a:app-tier:load",
    "v=1&rps=0&node=a:app-tier:load",
    "v=1&rps=abc&node=a:app-tier:load",
    "v=1&rps=1e999&node=a:app-tier:load",
    "v=1&node=a:app-tier:load",
    "v=1&rps=10",
    "v=1&rps=10&node=a:app-tier:b&node=b:app-tier:a",
    "v=1&rps=10&node=a:app-tier:load&node=b:app-tier:c&node=c:queue:b",
    "v=1&rps=10&node=a:app-tier:nowhere",
    "v=1&rps=10&node=a:app-tier:a",
    "v=1&rps=10&node=load:app-tier:load",
    "v=1&rps=10&node=a:app-tier:load&node=a:queue:load",
    "v=1&rps=10&node=a:mystery:load",
    "v=1&rps=10&node=a:app-tier:load&a.workers=2.5",
    "v=1&rps=10&node=a:app-tier:load&a.workers=0",
    "v=1&rps=10&node=a:app-tier:load&a.workers=true",
    "v=1&rps=10&node=a:app-tier:load&a.colour=red",
    "v=1&rps=10&node=a:app-tier:load&a.discipline=buffer",
    "v=1&rps=10&node=a:postgres:load&a.discipline=shed",
    "v=1&rps=10&node=a:app-tier:load&a.discipline=drop",
    "v=1&rps=10&node=a:app-tier:load&a.lifo=maybe",
    "v=1&rps=10&node=a:app-tier:load&b.workers=3",
    "v=1&rps=10&node=a:app-tier:load&a.workers=3&a.workers=4",
    "v=1&rps=10&node=m:llm-server:load",
    "v=1&rps=10&node=m:llm-server:load&m.config=rtx-4090",
    "v=1&rps=10&t=0&node=a:app-tier:load",
    "v=1&rps=10&t=7200&node=a:app-tier:load",
    "v=1&rps=10&seed=-1&node=a:app-tier:load",
    "v=1&rps=10&load=wobbly&node=a:app-tier:load",
    "v=1&rps=10&load=step&at_s=5&until_s=2&node=a:app-tier:load",
    "v=1&rps=10&load=bursty&burst_bias=0.2&node=a:app-tier:load",
    "v=1&rps=10&slo.availability=1&node=a:app-tier:load",
    "v=1&rps=10&slo.soak_s=0.5&node=a:app-tier:load",
    "v=1&rps=10&slo.colour=1&node=a:app-tier:load",
    "v=1&rps=10&claim=maybe&node=a:app-tier:load",
    "v=1&rps=10&sweep=1:2&node=a:app-tier:load",
    "v=1&rps=%zz",
    "v=1&rps",
]


def test_bad_links_are_refused_with_the_same_message(cat):
    got = node_jobs(_payload(cat, [{"kind": "rig", "fragment": f} for f in BAD]))
    for fragment, js in zip(BAD, got, strict=True):
        with pytest.raises(RigError) as err:
            spec_of(parse(fragment), cat)
        assert not js["ok"], fragment
        assert js["error"] == str(err.value), fragment


def _values():
    rng = random.Random(4)
    edge = [
        0.0,
        -0.0,
        0.5,
        1.5,
        2.5,
        -2.5,
        0.125,
        0.375,
        1.0005,
        0.0005,
        2.675,
        1e21,
        1e22,
        -1e21,
        123456789.125,
        5e-324,
        1.7976931348623157e308,
        9.995,
        99.95,
        0.001,
        1e-7,
        1234567.0,
        0.1,
        100.0,
        1e16,
        12.25,
        7.5,
        1499.5,
        0.30000000000000004,
    ]
    values = [(x, p) for x in edge for p in (0, 1, 2, 3, 4, 6)]
    for _ in range(400):
        x = rng.choice(
            (rng.uniform(-1e4, 1e4), rng.lognormvariate(0, 8), rng.randint(0, 10**6) / 8)
        )
        values.append((x, rng.randint(0, 7)))
    return values


def _wire(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return "-0" if x == 0 and math.copysign(1, x) < 0 else x


def test_float_formatting_is_pythons():
    from backpressure.generator.simulate import _num

    values = [*_values(), (math.nan, 3), (math.inf, 2), (-math.inf, 1)]
    payload = {
        "index": None,
        "devices": {},
        "jobs": [{"kind": "format", "values": [[_wire(x), p] for x, p in values]}],
    }
    [got] = node_jobs(payload)
    for i, (x, p) in enumerate(values):
        assert got["fixed"][i] == f"{x:.{p}f}", (x, p)
        assert got["fixed_grouped"][i] == f"{x:,.{p}f}", (x, p)
        assert got["general"][i] == f"{x:.{p}g}", (x, p)
        assert got["general_grouped"][i] == f"{x:,.{p}g}", (x, p)
        assert got["num"][i] == _num(x, p), (x, p)
        if math.isfinite(x):
            want = round(x, p)
            js = float(got["rounded"][i])
            assert js == want, (x, p)
            assert math.copysign(1, js) == math.copysign(1, want), (x, p)


# Math functions whose results are exact or correctly rounded in IEEE 754 (the same
# bits in every engine); Math.log10 only as a first guess that format.js corrects.
EXACT_MATH = {"abs", "ceil", "floor", "imul", "max", "min", "round", "sqrt", "trunc"}


def test_the_engine_calls_no_libm_function_whose_bits_may_differ():
    """exp, log, pow, sin... are not correctly rounded, so engines may differ in the last bit."""
    from backpressure.generator.paths import WEB_RIG

    files = [*sorted((WEB_RIG / "engine").glob("*.js")), WEB_RIG / "rig.js"]
    assert len(files) > 5
    found: dict[str, set[str]] = {}
    for path in files:
        text = re.sub(r"//.*", "", path.read_text(encoding="utf-8"))  # code, not comments
        for name in re.findall(r"\bMath\.([A-Za-z0-9_]+)", text):
            found.setdefault(name, set()).add(path.name)
        assert "Math.random" not in text, path.name
        assert "Date." not in text, path.name
        # x ** y with a non-literal exponent is pow(); only powers of two (exact) are allowed
        for base in re.findall(r"([\w.)\]]+)\s*\*\*", text):
            assert base in {"2", "10n"}, (path.name, base)
    assert found.pop("log10") == {"format.js"}
    assert set(found) <= EXACT_MATH, found
