"""Numeric flags take real numbers only: NaN, infinity and unit slips exit 2 with one line."""

from __future__ import annotations

import pytest
from backpressure.generator.cli.main import main

ADHOC = ["estimate", "--vram-gb", "24", "--params-b", "7", "--quant", "q4_k_m", "--context", "8192"]
BAD = ["nan", "NaN", "inf", "-inf", "+Infinity", "1e999"]


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize(
    "flag",
    [
        "--vram-gb",
        "--bandwidth-gbps",
        "--tflops",
        "--params-b",
        "--overhead-gb",
        "--gpu-memory-utilization",
    ],
)
def test_estimate_refuses_non_finite(capsys, flag, value):
    args = [*ADHOC]
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args += [flag, value]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("backpressure: error: ")
    assert flag in err


@pytest.mark.parametrize(
    "args",
    [
        [*ADHOC[:2], "24000000", *ADHOC[3:]],  # bytes typed for GiB
        [*ADHOC, "--bandwidth-gbps", "1e12"],  # B/s typed for GB/s
        [*ADHOC[:7], "--context", str(2**40)],
        ["simulate", "catalog/scenarios/app-postgres.yaml", "--rps", "nan"],
        ["simulate", "catalog/scenarios/app-postgres.yaml", "--duration", "inf"],
        ["diff", "a", "b", "--tolerance", "nan"],
    ],
)
def test_out_of_range_and_other_commands(capsys, args):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("backpressure: error: ")


def test_a_finite_value_still_works(capsys):
    assert main([*ADHOC, "--bandwidth-gbps", "1008", "--overhead-gb", "2"]) == 0
    assert "slots" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["1.5", "2e3", "four"])
@pytest.mark.parametrize("flag", ["--concurrency", "--max-num-seqs", "--prompt-tokens"])
def test_whole_number_flags_name_a_fraction_as_such(capsys, flag, value):
    assert main([*ADHOC, "--concurrency", "4", flag, value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"{value!r} is not a whole number" in err
    assert flag in err
