"""Silent-group filter, DAPO's dynamic sampling with its cost, and overlong handling."""

from __future__ import annotations

import numpy as np
import pytest

from stddial_book.rl.sampling import DynamicSampler, nonsilent_groups, overlong_penalty


def test_filter_on_correctness() -> None:
    correct = np.array([1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0])
    assert nonsilent_groups(correct, 4).tolist() == [True, False, False]
    with pytest.raises(ValueError, match="binary"):
        nonsilent_groups([1, 0.5], 2)  # shaped rewards are not correctness


def test_soft_overlong_penalty_by_hand() -> None:
    # L_max = 20, L_cache = 4: no penalty up to 16, linear to -1 at 20, -1 beyond
    lengths = [0, 16, 17, 18, 20, 25]
    np.testing.assert_allclose(overlong_penalty(lengths, 20, 4), [0, 0, -0.25, -0.5, -1, -1])
    with pytest.raises(ValueError, match="overlong_cache"):
        overlong_penalty([1], 10, 12)


def test_dynamic_sampling_keeps_only_mixed_groups_and_counts_the_rest() -> None:
    """A draw that ignores the size it is asked for: the surplus mixed group is dropped and counted."""
    G = 4
    rounds = [
        np.array([1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]),  # silent, mixed, silent
        np.array([0, 1, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1]),  # mixed, silent, mixed
    ]
    asked = []

    def draw(i, num_groups):
        asked.append(num_groups)
        ids = np.arange(12) + 100 * i  # which sample is which
        return ids, rounds[i]

    kept, cost = DynamicSampler(num_groups=2, group_size=G, max_rounds=5).fill(draw)
    flat = np.concatenate(kept)
    assert asked == [2, 1]  # each round asks for the groups still missing
    assert flat.tolist() == [4, 5, 6, 7, 100, 101, 102, 103]
    assert cost.rounds == 2 and cost.groups_generated == 6 and cost.groups_kept == 2
    assert cost.groups_silent == 3 and cost.groups_surplus == 1
    assert cost.samples_generated == 24 and cost.samples_kept == 8 and cost.samples_discarded == 16
    assert cost.generated_per_kept == 3.0 and not cost.hit_cap


def test_rounds_sized_to_the_missing_groups_cost_one_over_one_minus_f() -> None:
    """Groups silent with probability f, each round drawing only what is missing: generated per
    kept is 1/(1 − f) on average and no mixed group is ever discarded."""
    rng = np.random.default_rng(0)
    f, G, ratios = 0.4, 4, []
    for _ in range(400):

        def draw(i, num_groups):
            silent = rng.random(num_groups) < f
            correct = np.where(silent[:, None], 0, np.r_[1, 0, 0, 0][None, :]).reshape(-1)
            return np.arange(len(correct)), correct

        _, cost = DynamicSampler(num_groups=32, group_size=G, max_rounds=50).fill(draw)
        assert cost.groups_surplus == 0 and cost.groups_kept == 32
        ratios.append(cost.groups_generated / cost.groups_kept)
    # generated = 32 + a negative binomial count of silent groups: E[ratio] = 1/(1 − f) exactly, its SD over
    # runs sqrt(32 f)/(32 (1 − f)) = 0.19, so the mean of 400 runs has s.e. 0.56%: rel=0.02 is 3.6 s.e.
    assert np.std(ratios) == pytest.approx(np.sqrt(32 * f) / (32 * (1 - f)), rel=0.2)
    assert np.mean(ratios) == pytest.approx(1 / (1 - f), rel=0.02)


def test_dynamic_sampling_cap() -> None:
    silent = np.zeros(8)
    kept, cost = DynamicSampler(num_groups=1, group_size=4, max_rounds=3).fill(lambda i, n: (np.arange(8), silent))
    assert kept == [] and cost.hit_cap and cost.rounds == 3 and cost.samples_generated == 24


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_groups": 0, "group_size": 4}, "num_groups"),
        ({"num_groups": 1, "group_size": 1}, "at least 2"),
        ({"num_groups": 1, "group_size": 4, "max_rounds": 0}, "max_rounds"),
    ],
)
def test_bad_config(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        DynamicSampler(**kwargs)


def test_batch_not_divisible() -> None:
    with pytest.raises(ValueError, match="does not divide"):
        nonsilent_groups([1, 0, 1], 2)
