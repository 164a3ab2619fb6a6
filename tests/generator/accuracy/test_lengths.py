"""The replay's request lengths: ShareGPT replies spread about the published mean."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from backpressure.catalog.loader import load_catalog
from backpressure.generator.accuracy.serving import (
    SHAREGPT_MAX_TOTAL,
    SHAREGPT_MIN_TOKENS,
    Case,
    load_cases,
    output_lengths,
)


@pytest.fixture(scope="module")
def sharegpt() -> Case:
    cases, _ = load_cases(load_catalog())
    return next(c for c in cases if c.dataset == "sharegpt" and c.requests >= 1000)


def test_sharegpt_replies_keep_the_mean_within_the_sampler_bounds(sharegpt: Case) -> None:
    out = output_lengths(sharegpt)
    assert out.shape == (sharegpt.requests,)
    assert abs(float(out.mean()) - sharegpt.output) < 0.5
    assert out.min() >= SHAREGPT_MIN_TOKENS
    assert out.max() <= SHAREGPT_MAX_TOTAL - sharegpt.prompt
    # exponential: the median near ln 2 of the mean, a long tail past twice the mean
    assert 0.6 < float(np.median(out)) / sharegpt.output < 0.75
    assert out.max() > 3 * sharegpt.output


def test_lengths_are_deterministic_and_fixed_datasets_keep_the_mean(sharegpt: Case) -> None:
    assert np.array_equal(output_lengths(sharegpt), output_lengths(sharegpt))
    fixed = dataclasses.replace(sharegpt, dataset="random")
    assert np.array_equal(output_lengths(fixed), np.full(sharegpt.requests, sharegpt.output))
