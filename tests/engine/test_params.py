"""Total and active parameters computed from config.json against published figures."""

from __future__ import annotations

import pytest

# Publishers round: "8B", "30.5B". 2.5 % covers rounding to the figures they print
# (Mistral NeMo "12B" is 12.25B computed, the largest gap).
TOTAL_REL = 0.025
# DeepSeek publishes active counts without the input embedding (a lookup); allow that.
ACTIVE_REL = 0.12


def test_every_published_total_matches(cat):
    checked = 0
    for mid, model in cat.models.items():
        if model.published_params is None:
            continue
        assert cat.archs[mid].total_params == pytest.approx(
            model.published_params, rel=TOTAL_REL
        ), mid
        checked += 1
    assert checked >= 20


def test_every_published_active_matches(cat):
    checked = 0
    for mid, model in cat.models.items():
        if model.published_active_params is None:
            continue
        arch = cat.archs[mid]
        assert arch.active_params == pytest.approx(model.published_active_params, rel=ACTIVE_REL)
        assert arch.active_params - arch.lookup_only_params <= model.published_active_params * 1.03
        checked += 1
    assert checked >= 5


def test_mixtral_total_and_active(cat):
    arch = cat.archs["mixtral-8x7b"]
    assert round(arch.total_params / 1e9, 1) == 46.7
    assert round(arch.active_params / 1e9, 1) == 12.9


def test_qwen3_moe_and_deepseek(cat):
    assert round(cat.archs["qwen3-30b-a3b"].total_params / 1e9, 1) == 30.5
    assert round(cat.archs["qwen3-30b-a3b"].active_params / 1e9, 1) == 3.4
    assert round(cat.archs["deepseek-v3"].total_params / 1e9) == 671
