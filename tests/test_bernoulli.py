"""The Bernoulli-logit prompt: sampled gradients against the closed forms (Bay and Yearick, 2026)."""

from __future__ import annotations

import numpy as np
import pytest

from stddial_book import DR_GRPO, GRPO
from stddial_book.bernoulli import monte_carlo_gradient, sampled_gradients
from stddial_book.identity import expected_group_std, expected_group_variance

P = np.linspace(0.02, 0.98, 25)


@pytest.mark.parametrize("recipe, closed_form", [(GRPO, expected_group_std), (DR_GRPO, expected_group_variance)],
                         ids=["grpo", "dr_grpo"])
def test_monte_carlo_lands_on_the_exact_closed_form(recipe, closed_form) -> None:
    mean, se = monte_carlo_gradient(P, 64, recipe, num_groups=2000, seed=1)
    z = (mean - closed_form(P, 64)) / se
    assert np.max(np.abs(z)) < 4.5  # 25 points: a 4.5-SE miss has probability ~2e-4 under the closed form


def test_monte_carlo_can_tell_the_finite_group_from_the_limit() -> None:
    """At G = 8 and p = 0.05 the exact E[g] is 0.54 of √(p(1 − p)); the check sees the gap."""
    mean, se = monte_carlo_gradient(np.array([0.05]), 8, GRPO, num_groups=4000, seed=2)
    assert abs(mean[0] - np.sqrt(0.05 * 0.95)) / se[0] > 10
    assert abs(mean[0] - expected_group_std(0.05, 8)) / se[0] < 4


def test_one_group_is_the_identity() -> None:
    """Per group the sampled GRPO gradient is σ̂ and Dr. GRPO's σ̂² (ḡ₊ − ḡ₋ = 1 for this policy)."""
    p = np.full(200, 0.3)
    grpo = sampled_gradients(p, 8, GRPO, np.random.default_rng(5))
    dr = sampled_gradients(p, 8, DR_GRPO, np.random.default_rng(5))
    np.testing.assert_allclose(dr, grpo**2, atol=1e-12)
    assert set(np.round(grpo * 8, 9)) <= {round(np.sqrt(k * (8 - k)), 9) for k in range(9)}


def test_bad_input() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError):
        sampled_gradients(np.array([1.5]), 8, GRPO, rng)
    with pytest.raises(ValueError):
        sampled_gradients(np.array([]), 8, GRPO, rng)
    with pytest.raises(ValueError):
        monte_carlo_gradient(np.array([0.5]), 8, GRPO, num_groups=1)
