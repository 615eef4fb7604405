"""The allocation rules on a pool of known pass rates, without training (Part V): the signal accounting
by hand. Tiny sizes."""

from __future__ import annotations

from math import comb, sqrt

import numpy as np
import pytest

from stddial_book.experiments.allocation.signal import allocation_signal, group_signal, signal_by_rule
from stddial_book.rl.allocation_base import Allocation


def test_group_signal_by_hand() -> None:
    assert group_signal([4, 4, 4, 2], [2, 0, 4, 1], 1).tolist() == [0.5, 0.0, 0.0, 0.5]
    assert group_signal([4, 8], [2, 2], 2).tolist() == pytest.approx([0.25, 12 / 64])
    with pytest.raises(ValueError):
        group_signal([4], [5], 1)


def test_allocation_signal_by_hand() -> None:
    a = Allocation()
    a.add_draw(np.array([0, 1, 2]), np.array([4, 8, 4]), np.array([2, 2, 0]))
    a.keep([0, 1], [4, 8], [2, 2])
    a.discarded_silent = 4
    row = allocation_signal(a)
    assert row["generated"] == 16 and row["kept"] == 12 and row["discarded_silent"] == 4
    assert row["mixed_groups"] == 2 and row["mixed_samples"] == 12
    assert row["signal_grpo"] == pytest.approx(0.5 + sqrt(12) / 8)
    assert row["signal_dr_grpo"] == pytest.approx(0.25 + 12 / 64)


def test_signal_by_rule_on_a_silent_pool_by_hand() -> None:
    table = signal_by_rule(solve_rates=np.array([0.0, 1.0] * 8), batch_prompts=2, steps=3)
    assert table["knapsack_oracle"]["generated"] == 0.0  # the oracle sees no prompt worth a sample
    for name, row in table.items():
        assert row["signal_grpo"] == 0.0 and row["mixed_groups"] == 0.0, name
        if row["generated"]:
            assert row["kept"] + row["discarded_silent"] + row["discarded_surplus"] == pytest.approx(1000.0)
    assert table["uniform"]["kept"] == 1000.0 and table["dapo"]["discarded_silent"] == 1000.0


def test_signal_by_rule_uniform_at_one_half_matches_the_hand_sum() -> None:
    table = signal_by_rule(solve_rates=np.full(64, 0.5), batch_prompts=8, steps=400, rules=("uniform", "dapo"))
    e_sigma = sum(comb(8, k) / 256 * sqrt(k * (8 - k)) / 8 for k in range(9))
    e_var = sum(comb(8, k) / 256 * k * (8 - k) / 64 for k in range(9))
    mixed = 1 - 2 / 256
    uniform = table["uniform"]
    assert uniform["signal_grpo"] == pytest.approx(125 * e_sigma, rel=0.02)
    assert uniform["signal_dr_grpo"] == pytest.approx(125 * e_var, rel=0.02)
    assert uniform["mixed_groups"] == pytest.approx(125 * mixed, rel=0.01)
    assert uniform["ceiling_grpo"] == pytest.approx(125 * e_sigma / mixed, rel=0.02)
    for row in table.values():  # the accounting adds up, per 1,000 generated samples
        assert row["kept"] + row["discarded_silent"] + row["discarded_surplus"] == pytest.approx(1000.0)
