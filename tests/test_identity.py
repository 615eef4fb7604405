"""Closed forms of stddial_book.theory.identity against direct computation and exact small cases."""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stddial_book import (
    DAPO,
    DR_GRPO,
    GRPO,
    bessel_factor,
    expected_group_std,
    expected_group_variance,
    group_std,
    mean_abs_advantage,
    pass_rate,
    silent_probability,
    std_from_pass_rate,
    tries_needed,
    update_weight,
)
from stddial_book.theory.group_size import (
    arcsine_objective,
    attenuated_fidelity,
    difficulty_weight,
    gradient_fidelity,
    group_size_law,
    minimal_group_size,
)
from stddial_book.theory.identity import rloo_advantages


def test_group_std_population_and_bessel() -> None:
    rewards = np.array([[1, 0, 0, 1], [1, 1, 1, 0]], dtype=float)
    np.testing.assert_allclose(group_std(rewards), [0.5, math.sqrt(3) / 4], rtol=0, atol=1e-15)
    np.testing.assert_allclose(group_std(rewards, correction=1), rewards.std(axis=1, ddof=1))


def test_group_std_keeps_torch() -> None:
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float32)
    out = group_std(rewards)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert out.item() == pytest.approx(math.sqrt(0.25 * 0.75))


def test_std_from_pass_rate_matches_rewards() -> None:
    """σ = sqrt(k(G − k))/G for k of G correct, s = σ·sqrt(G/(G − 1)): closed forms, not group_std."""
    for G in range(2, 20):
        for k in range(G + 1):
            rewards = (np.arange(G) < k).astype(float)
            sigma = math.sqrt(k * (G - k)) / G
            assert std_from_pass_rate(k / G) == pytest.approx(sigma, abs=1e-15)
            assert group_std(rewards) == pytest.approx(sigma, abs=1e-15)
            assert std_from_pass_rate(k / G, G, correction=1) == pytest.approx(
                sigma * math.sqrt(G / (G - 1)), abs=1e-14
            )
            assert group_std(rewards, correction=1) == pytest.approx(sigma * math.sqrt(G / (G - 1)), abs=1e-14)


def test_pass_rate() -> None:
    assert pass_rate([1, 0, 1, 1]) == 0.75
    out = pass_rate(torch.tensor([[1, 0], [1, 1]]))
    assert isinstance(out, torch.Tensor) and out.tolist() == [0.5, 1.0]


def test_update_weights_are_sigma_and_sigma_squared() -> None:
    p = np.linspace(0, 1, 33)
    sigma = np.sqrt(p * (1 - p))
    np.testing.assert_allclose(update_weight(p, GRPO), sigma, atol=1e-15)
    np.testing.assert_allclose(update_weight(p, DR_GRPO), sigma**2, atol=1e-15)
    np.testing.assert_allclose(update_weight(p, DAPO), sigma, atol=1e-15)  # ±1 rewards cancel
    np.testing.assert_allclose(update_weight(p, DR_GRPO.replace(reward_wrong=-1.0)), 2 * sigma**2)
    np.testing.assert_allclose(mean_abs_advantage(p, GRPO), 2 * sigma, atol=1e-15)


def test_update_weight_bessel_eps_and_refill() -> None:
    G, p = 8, 3 / 8
    sigma = math.sqrt(p * (1 - p))
    bessel = GRPO.replace(std_correction=1)
    assert update_weight(p, bessel, G) == pytest.approx(sigma * math.sqrt(7 / 8), rel=1e-14)
    assert bessel_factor(8) == pytest.approx(0.9354, abs=1e-4)
    eps = 1e-3
    w = update_weight(p, GRPO.replace(std_eps=eps))
    assert sigma / w - 1 == pytest.approx(eps / sigma, rel=1e-12)
    assert update_weight(p, DAPO, nonsilent_fraction=0.5) == pytest.approx(2 * sigma, rel=1e-14)
    # refill only applies to recipes with dynamic sampling
    assert update_weight(p, GRPO, nonsilent_fraction=0.5) == pytest.approx(sigma, rel=1e-14)
    assert update_weight([0.0, 1.0], DAPO, nonsilent_fraction=0.5).tolist() == [0.0, 0.0]


def test_silent_probability_exact_and_against_enumeration() -> None:
    assert silent_probability(0.5, 8) == 2 / 256
    assert silent_probability(0.0, 3) == 1.0 and silent_probability(1.0, 3) == 1.0
    assert silent_probability(0.3, 1) == pytest.approx(1.0)
    p, G = 0.3, 5
    direct = sum(
        math.prod(p if c else 1 - p for c in outcome) for outcome in product([0, 1], repeat=G) if len(set(outcome)) == 1
    )
    assert silent_probability(p, G) == pytest.approx(direct, rel=1e-14)
    grid = silent_probability(np.array([0.1, 0.5]), np.array([[2], [4]]))
    np.testing.assert_allclose(grid, [[0.1**2 + 0.9**2, 2 * 0.5**2], [0.1**4 + 0.9**4, 2 * 0.5**4]], rtol=1e-14)


def test_expected_group_std_and_variance_by_enumeration() -> None:
    for p in (0.0, 0.1, 0.37, 0.5, 1.0):
        for G in (2, 3, 6):
            stds, variances, probs = [], [], []
            for outcome in product([0, 1], repeat=G):
                probs.append(math.prod(p if c else 1 - p for c in outcome))
                stds.append(np.std(outcome))
                variances.append(np.var(outcome))
            assert expected_group_std(p, G) == pytest.approx(np.dot(probs, stds), abs=1e-14)
            assert expected_group_variance(p, G) == pytest.approx(np.dot(probs, variances), abs=1e-14)
            bessel = np.dot(probs, np.array(stds) * math.sqrt(G / (G - 1)))
            assert expected_group_std(p, G, correction=1) == pytest.approx(bessel, abs=1e-14)
    assert expected_group_variance(0.3, 8, correction=1) == pytest.approx(0.21)


def test_expected_group_std_large_g_and_jensen() -> None:
    p = np.linspace(0.01, 0.99, 50)
    e_std = expected_group_std(p, 512)
    assert np.all(e_std <= np.sqrt(expected_group_variance(p, 512)) + 1e-15)
    mid = (p >= 0.1) & (p <= 0.9)  # where n = G p(1 − p) is large, σ̂ concentrates at σ
    # E[σ̂]/σ = 1 − 1/(8n) + O(n⁻²) (DESIGN §3): the first-order term pins the 1/8, and the rest is
    # below 0.1/n² here (0.045/n² measured at G = 512; a coefficient 10% off leaves 0.0125/n, which is
    # 5-60 times that bound over n = 46..128)
    n = 512 * p * (1 - p)
    residual = e_std / np.sqrt(p * (1 - p)) - (1 - 1 / (8 * n))
    assert np.all(np.abs(residual[mid]) < 0.1 / n[mid] ** 2)
    assert np.all(e_std[~mid] < np.sqrt(p * (1 - p))[~mid])


def test_tries_needed_is_smallest_g() -> None:
    p = np.array([0.5, 0.1, 0.01, 0.9, 0.999, 0.0, 1.0])
    for delta in (0.5, 0.05, 1e-3):
        out = tries_needed(p, delta)
        assert np.isinf(out[-2:]).all()
        for q, G in zip(p[:-2], out[:-2]):
            G = int(G)
            assert silent_probability(q, G) <= delta
            assert G == 1 or silent_probability(q, G - 1) > delta
    assert tries_needed(0.5, 0.05) == 6  # 2 * 0.5**6 = 0.031 <= 0.05 < 2 * 0.5**5


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-6, 1 - 1e-6), st.floats(1e-6, 0.99))
def test_tries_needed_property(p: float, delta: float) -> None:
    G = int(tries_needed(p, delta))
    assert silent_probability(p, G) <= delta
    assert G == 1 or silent_probability(p, G - 1) > delta


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: group_std([1.0, float("nan"), 0.0]), "NaN"),
        (lambda: group_std([]), "empty"),
        (lambda: group_std([1.0]), "at least 2"),
        (lambda: group_std([[1.0, 0.0]], correction=2), "correction"),
        (lambda: pass_rate([1, 0, 0.5]), "binary"),
        (lambda: std_from_pass_rate(1.5), r"\[0, 1\]"),
        (lambda: std_from_pass_rate(0.5, correction=1), "group_size=G"),
        (lambda: silent_probability(0.5, 0), "positive integers"),
        (lambda: silent_probability(0.5, 2.5), "positive integers"),
        (lambda: expected_group_std(0.5, 1), "at least 2"),
        (lambda: tries_needed(0.5, 1.0), "strictly between 0 and 1"),
        (lambda: update_weight(0.5, DAPO, nonsilent_fraction=0.0), "nonsilent_fraction"),
        (lambda: update_weight(0.5, GRPO.replace(std_correction=1)), "group_size=G"),
        (lambda: bessel_factor(1), "at least 2"),
    ],
)
def test_bad_input_raises_clear_value_error(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


# --- the theory of chapters 5 and 6 (Bay and Yearick, 2026, §3-§6) -----------------------------


def test_rloo_rescaled_is_group_mean_centring() -> None:
    rng = np.random.default_rng(3)
    for G in (2, 3, 8, 17):
        r = rng.normal(size=(5, G))
        np.testing.assert_allclose(r - r.mean(axis=-1, keepdims=True), (G - 1) / G * rloo_advantages(r), atol=1e-12)
    # by hand: (1, 0, 0, 1): the baseline of a correct sample is 1/3, of a wrong one 2/3
    np.testing.assert_allclose(rloo_advantages(np.array([1.0, 0, 0, 1])), [2 / 3, -2 / 3, -2 / 3, 2 / 3])
    with pytest.raises(ValueError, match="must be at least 2"):
        rloo_advantages(np.array([1.0]))


#: The paper's Table 2: exact G (G* rounded) for fidelity 90/95/99% at p = 0.5, 0.3, 0.1, 0.05.
PAPER_GROUP_SIZES = {
    0.5: [(7, 5), (11, 10), (51, 50)],
    0.3: [(9, 6), (14, 12), (61, 60)],
    0.1: [(22, 14), (36, 28), (144, 139)],
    0.05: [(42, 26), (69, 53), (273, 263)],
}


@pytest.mark.parametrize("p", sorted(PAPER_GROUP_SIZES))
def test_group_size_table_of_the_paper(p: float) -> None:
    for eps, (exact, law) in zip((0.1, 0.05, 0.01), PAPER_GROUP_SIZES[p]):
        for q in (p, 1 - p):  # the table is symmetric in p ↔ 1 − p
            assert minimal_group_size(eps, q) == exact
            assert round(float(group_size_law(eps, q))) == law
        # minimal means minimal: one fewer sample misses the target
        assert gradient_fidelity(p, exact - 1) < 1 - eps <= gradient_fidelity(p, exact)


def test_fidelity_numbers_quoted_by_the_paper() -> None:
    assert round(float(gradient_fidelity(0.05, 8)), 2) == 0.54
    assert round(float(attenuated_fidelity(0.05, 8)), 2) == 0.67
    assert round(float(gradient_fidelity(0.5, 8)), 2) == 0.93
    assert tries_needed(0.05, 0.05) == 59 and minimal_group_size(0.05, 0.05) == 69


def test_fidelity_against_direct_enumeration() -> None:
    from math import comb, sqrt

    for G, p in ((5, 0.2), (8, 0.05), (12, 0.7)):
        direct = sum(comb(G, k) * p**k * (1 - p) ** (G - k) * sqrt(k * (G - k)) / G for k in range(1, G))
        assert gradient_fidelity(p, G) == pytest.approx(direct / sqrt(p * (1 - p)), rel=1e-12)


def test_difficulty_weight_is_the_derivative_of_the_arcsine_objective() -> None:
    p = np.linspace(0.05, 0.95, 19)
    h = 1e-6
    numeric = (arcsine_objective(p + h) - arcsine_objective(p - h)) / (2 * h)
    np.testing.assert_allclose(numeric, difficulty_weight(p), rtol=1e-6)
    assert difficulty_weight(0.5) == pytest.approx(2.0)
    assert round(float(difficulty_weight(0.05)), 1) == 4.6  # the paper's "w ≈ 4.6"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: gradient_fidelity(0.0, 8), "gradient fidelity is defined for 0 < solve_rate < 1 only"),
        (lambda: difficulty_weight(1.0), "difficulty weight is defined for 0 < solve_rate < 1 only"),
        (lambda: group_size_law(0.0, 0.5), "tolerance ε must lie strictly between 0 and 1"),
        (lambda: minimal_group_size(1.5, 0.5), "tolerance ε must lie strictly between 0 and 1; got 1.5"),
        (lambda: attenuated_fidelity(1.0, 8), "attenuation is defined for 0 < solve_rate < 1 only"),
    ],
)
def test_theory_bad_input(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_refill_weight_same_prompt_redraw_matches_simulation() -> None:
    """Same-prompt redraw (at most T draws): Monte Carlo of the redraw loop against the closed form."""
    from stddial_book.theory.identity import update_weight
    from stddial_book.theory.recipes import GRPO
    from stddial_book.theory.silent import expected_update_weight, refill_weight

    rng = np.random.default_rng(0)
    G, T, n = 8, 4, 200_000
    weights = np.asarray(update_weight(np.arange(G + 1) / G, GRPO, G))
    for p in (0.02, 0.3, 0.97):
        j = rng.binomial(G, p, size=(T, n))
        mixed = (j > 0) & (j < G)
        first_mixed = np.where(mixed.any(axis=0), mixed.argmax(axis=0), -1)
        kept = np.where(first_mixed >= 0, weights[j[np.maximum(first_mixed, 0), np.arange(n)]], 0.0)
        closed = float(refill_weight(p, G, GRPO, redraw_tries=T))
        # 3 solve rates: a 4.5-standard-error miss has probability ~2e-5 under the closed form
        # (the former rel=0.02 was 8 to 65 standard errors wide)
        z = (kept.mean() - closed) / (kept.std(ddof=1) / np.sqrt(n))
        assert abs(z) < 4.5, (p, z)
    # one draw is no redraw at all; new-prompt refill scales every prompt by the same 1/(1 − f)
    p = np.linspace(0.01, 0.99, 9)
    base = expected_update_weight(p, G, GRPO)
    assert np.allclose(refill_weight(p, G, GRPO, redraw_tries=1), base)
    assert np.allclose(refill_weight(p, G, GRPO, pool_silent_fraction=0.44), base / 0.56)
    with pytest.raises(ValueError, match="exactly one"):
        refill_weight(p, G, GRPO)
    with pytest.raises(ValueError, match="redraw_tries"):
        refill_weight(p, G, GRPO, redraw_tries=0)


def test_tries_needed_agrees_with_silent_probability_at_equality() -> None:
    """p = δ = 1/3: P(silent) at G = 3 is 1/3 exactly, but the log route and the power route round it
    an ulp apart; the answer must satisfy silent_probability(p, G) <= δ as that function computes it."""
    G = int(tries_needed(1 / 3, 1 / 3))
    assert silent_probability(1 / 3, G) <= 1 / 3 < silent_probability(1 / 3, G - 2)
