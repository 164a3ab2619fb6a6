"""`backpressure verify LINK` recomputes a rig builder link and checks what it claims."""

from __future__ import annotations

import pytest
from backpressure.generator.ci.verify import is_rig_target
from backpressure.generator.cli.main import main

# The golden scenario as a link: app into Postgres, whose sweep breaks at 1,500 rps.
SCENARIO = (
    "v=1&seed=1&t=600&load=constant&rps=1000&arrivals=poisson"
    "&node=app:app-tier:load&node=postgres:postgres:app"
    "&slo.p99_ms=500&slo.availability=0.999"
)
FULL_SWEEP = "&sweep=100:100:40"  # the scenario's own sweep
GOLDEN = SCENARIO + "&sweep=1300:100:4"  # its last levels: the same lowest failing level


@pytest.mark.parametrize(
    ("prefix", "sweep"),
    [("https://example.org/docs/rig/#", FULL_SWEEP), ("rig/#", ""), ("", "")],
)
def test_a_link_whose_claims_hold_verifies(capsys, prefix, sweep):
    link = prefix + (SCENARIO + sweep if sweep else GOLDEN) + "&claim=pass&breaking=1500"
    code = main(["verify", link])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "sweep breaks at 1,500 rps" in out
    assert "verdict: claimed pass, recomputed pass: holds" in out
    assert "breaking rate: claimed 1,500 rps, recomputed 1,500 rps: holds" in out
    assert out.splitlines()[-1] == "verified: the link's verdict and breaking rate hold"


@pytest.mark.parametrize(
    ("claims", "differs"),
    [
        ("&claim=fail:p99:postgres&breaking=1500", "verdict"),
        ("&claim=pass&breaking=1600", "breaking rate"),
    ],
)
def test_a_tampered_claim_is_caught(capsys, claims, differs):
    code = main(["verify", "https://example.org/rig/#" + GOLDEN + claims])
    out = capsys.readouterr().out
    assert code == 1
    assert out.splitlines()[-1] == "MISMATCH: the link's claims do not hold"
    [line] = [x for x in out.splitlines() if x.endswith("DIFFERS")]
    assert line.strip().startswith(f"{differs}:")


@pytest.mark.parametrize(
    ("fragment", "message"),
    [
        ("v=1&rps=-1&node=a:app-tier:load", "rps: must be greater than 0"),
        ("v=1&rps=1", "nodes: the rig is empty; add at least one node after the load"),
        (
            "v=1&rps=1&node=a:app-tier:b&node=b:app-tier:a",
            "nodes: cycle a -> b -> a never reaches the load",
        ),
        ("v=1&rps=1&node=a:app-tier:load&breaking=3", "breaking: a breaking rate needs the sweep"),
    ],
)
def test_a_bad_link_exits_2_with_one_line(capsys, fragment, message):
    code = main(["verify", "https://example.org/rig/#" + fragment])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert f"rig link: {message}" in err


def test_rig_targets_are_told_from_config_targets():
    assert is_rig_target("https://x.org/rig/#v=1&rps=1")
    assert is_rig_target("v=1&rps=1")
    assert not is_rig_target("site/rig")  # a directory: the site's own checks
    assert not is_rig_target("rtx-4090--llama-3.1-8b--q4_k_m--8k")
    assert not is_rig_target("https://x.org/gpu/rtx-4090/llama-3.1-8b/q4_k_m/8k/")
