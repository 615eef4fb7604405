"""Recipe presets and group_advantages: the identity, its variants, silent groups, bad input."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from stddial_book import (
    DAPO,
    DR_GRPO,
    GRPO,
    PRESETS,
    Recipe,
    get_recipe,
    group_advantages,
    group_std,
)

EXACT_GRPO = GRPO.replace(std_correction=0, std_eps=0.0)


def group(G: int, k: int) -> np.ndarray:
    return (np.arange(G) < k).astype(float)


def test_presets_have_the_published_settings() -> None:
    assert GRPO.scale_std and GRPO.loss_aggregation == "seq-mean-token-mean" and GRPO.kl_coef == 0.04
    assert not GRPO.dynamic_sampling and (GRPO.clip_low, GRPO.clip_high) == (0.2, 0.2)
    assert not DR_GRPO.scale_std and DR_GRPO.loss_aggregation == "seq-mean-token-sum-norm"
    assert DR_GRPO.kl_coef == 0.0
    assert DAPO.scale_std and DAPO.dynamic_sampling and DAPO.loss_aggregation == "token-mean"
    assert (DAPO.clip_low, DAPO.clip_high) == (0.2, 0.28) and DAPO.kl_coef == 0.0
    assert DAPO.overlong_filter and DAPO.overlong_penalty and DAPO.overlong_cache_fraction == 0.2
    assert (DAPO.reward_correct, DAPO.reward_wrong) == (1.0, -1.0)
    assert get_recipe("Dr. GRPO") is DR_GRPO and get_recipe("dr-grpo") is DR_GRPO
    assert set(PRESETS) == {"grpo", "dr_grpo", "dapo"}


def test_recipe_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'scale_std'"):
        GRPO.scale_std = False  # type: ignore[misc]


def test_hand_computed_advantages() -> None:
    rewards = np.array([1, 0, 0, 0, 1, 1, 0, 0], dtype=float)
    a = group_advantages(rewards, 4, EXACT_GRPO)
    s = math.sqrt(3) / 4
    np.testing.assert_allclose(a[:4], [0.75 / s, -0.25 / s, -0.25 / s, -0.25 / s], rtol=1e-15)
    np.testing.assert_allclose(a[4:], [1, 1, -1, -1], rtol=1e-15)
    np.testing.assert_allclose(group_advantages(rewards, 4, DR_GRPO), [0.75, -0.25, -0.25, -0.25, 0.5, 0.5, -0.5, -0.5])


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 64).flatmap(lambda G: st.tuples(st.just(G), st.integers(1, G - 1))), st.integers(0, 2**32 - 1))
def test_identity_every_group(Gk: tuple[int, int], seed: int) -> None:
    """mean|A| = 2σ and (1/G) Σ A_i g_i = σ(ḡ₊ − ḡ₋) (GRPO), σ²(ḡ₊ − ḡ₋) (Dr. GRPO)."""
    G, k = Gk
    rng = np.random.default_rng(seed)
    order = rng.permutation(G)  # correct samples need not come first
    rewards = group(G, k)[order]
    scores = rng.normal(size=(G, 3)) * rng.lognormal(size=(G, 1))
    sigma = math.sqrt(k * (G - k)) / G  # σ = sqrt(p̂(1 − p̂)), p̂ = k/G: not the package's group_std
    assert group_std(rewards) == pytest.approx(sigma, rel=1e-14)
    correct = rewards == 1
    gap = scores[correct].mean(0) - scores[~correct].mean(0)
    a = group_advantages(rewards, G, EXACT_GRPO)
    assert abs(np.abs(a).mean() - 2 * sigma) <= 1e-12
    np.testing.assert_allclose(a @ scores / G, sigma * gap, atol=1e-12 * (1 + np.abs(scores).max()))
    a_dr = group_advantages(rewards, G, DR_GRPO)
    assert abs(np.abs(a_dr).mean() - 2 * sigma**2) <= 1e-12
    np.testing.assert_allclose(a_dr @ scores / G, sigma**2 * gap, atol=1e-12 * (1 + np.abs(scores).max()))


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 64).flatmap(lambda G: st.tuples(st.just(G), st.integers(1, G - 1))))
def test_bessel_multiplies_grpo_by_sqrt_g_minus_1_over_g(Gk: tuple[int, int]) -> None:
    G, k = Gk
    rewards = group(G, k)
    a_pop = group_advantages(rewards, G, EXACT_GRPO)
    a_bessel = group_advantages(rewards, G, EXACT_GRPO.replace(std_correction=1))
    np.testing.assert_allclose(a_bessel, a_pop * math.sqrt((G - 1) / G), rtol=1e-13)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(2, 32).flatmap(lambda G: st.tuples(st.just(G), st.integers(1, G - 1))),
    st.floats(-5, 5),
    st.floats(0.1, 10),
)
def test_grpo_affine_invariant_dr_grpo_not(Gk: tuple[int, int], shift: float, scale: float) -> None:
    G, k = Gk
    rewards = group(G, k)
    moved = scale * rewards + shift
    np.testing.assert_allclose(
        group_advantages(moved, G, EXACT_GRPO), group_advantages(rewards, G, EXACT_GRPO), rtol=1e-9, atol=1e-9
    )
    np.testing.assert_allclose(
        group_advantages(moved, G, DR_GRPO), scale * group_advantages(rewards, G, DR_GRPO), rtol=1e-9, atol=1e-9
    )
    if not math.isclose(scale, 1.0, rel_tol=1e-3):
        assert not np.allclose(group_advantages(moved, G, DR_GRPO), group_advantages(rewards, G, DR_GRPO))


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 64), st.sampled_from([0.0, 1.0, -1.0, 0.3]), st.sampled_from(list(PRESETS.values())))
def test_silent_groups_give_exact_zeros(G: int, value: float, recipe: Recipe) -> None:
    rewards = np.concatenate([np.full(G, value), group(G, 1)])
    # a float-noise "silent" group, detected by the tolerance rather than == 0
    noisy = np.full(G, 0.7) + np.r_[1e-12, np.zeros(G - 1)]
    a = group_advantages(np.concatenate([rewards, noisy]), G, recipe)
    assert np.all(a[:G] == 0.0) and np.all(a[2 * G :] == 0.0)
    assert np.all(np.isfinite(a)) and np.any(a[G : 2 * G] != 0)


def test_torch_in_torch_out() -> None:
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    a = group_advantages(rewards, 4, GRPO)
    assert isinstance(a, torch.Tensor) and a.dtype == torch.float32 and a.shape == (8,)
    np.testing.assert_allclose(a.numpy(), group_advantages(rewards.numpy(), 4, GRPO), rtol=1e-6)
    s = math.sqrt(3) / 4  # 1 of 4 correct; the second group is silent (all correct)
    np.testing.assert_allclose(a.numpy(), [0.75 / s, -0.25 / s, -0.25 / s, -0.25 / s, 0, 0, 0, 0], rtol=1e-6)


def test_eps_shrinks_by_exactly_eps_over_sigma() -> None:
    rewards = group(8, 3)
    sigma = math.sqrt(15) / 8  # sqrt(3 · 5)/8
    eps = 1e-2
    a0 = group_advantages(rewards, 8, EXACT_GRPO)
    a_eps = group_advantages(rewards, 8, EXACT_GRPO.replace(std_eps=eps))
    np.testing.assert_allclose(a0 / a_eps - 1, eps / sigma, rtol=1e-12)


@pytest.mark.parametrize(
    "rewards, G, message",
    [
        ([1.0, 0.0, 1.0], 2, "does not divide"),
        ([1.0, 0.0], 1, "at least 2"),
        ([1.0, 0.0], 2.5, "integer"),
        ([], 2, "empty"),
        ([1.0, float("nan")], 2, "NaN"),
        ([[1.0, 0.0], [0.0, 1.0]], 2, "flat 1-D"),
        (["a", "b"], 2, "numeric"),
    ],
)
def test_group_advantages_bad_input(rewards, G, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        group_advantages(rewards, G, GRPO)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"std_correction": 2}, "std_correction"),
        ({"loss_aggregation": "mean"}, "loss_aggregation"),
        ({"clip_low": 1.0}, "clip_low"),
        ({"std_eps": -1.0}, "std_eps"),
        ({"overlong_penalty": True}, "overlong_cache_fraction"),
        ({"reward_correct": 0.0}, "must exceed"),
    ],
)
def test_recipe_validation(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GRPO.replace(**changes)


def test_unknown_recipe() -> None:
    with pytest.raises(ValueError, match="choose one of"):
        get_recipe("ppo")


def test_truncated_samples_do_not_shape_the_group_statistics() -> None:
    """With DAPO's overlong filter and soft penalty together, truncated samples are masked out of the
    loss; they must not move the mean and std either. A group of 1 correct, 2 short wrong and 5
    truncated (penalised) answers gave the short wrong answers A = +0.378 when all 8 counted."""
    from stddial_book.theory.recipes import DAPO, GRPO, group_advantages

    rewards = np.array([1.0, -1, -1, -2, -2, -2, -2, -2])
    truncated = np.array([0, 0, 0, 1, 1, 1, 1, 1], dtype=bool)
    masked = group_advantages(rewards, 8, DAPO, valid=~truncated)
    # the three valid rewards 1, −1, −1: mean −1/3, σ = √8/3, so A = (4/3, −2/3, −2/3)/σ
    np.testing.assert_allclose(masked[:3], [math.sqrt(2), -1 / math.sqrt(2), -1 / math.sqrt(2)], rtol=1e-14)
    np.testing.assert_allclose(masked[:3], group_advantages(rewards[:3], 3, DAPO), rtol=1e-14)
    assert np.all(masked[3:] == 0)
    # what the unmasked statistics did: mean −11/8, σ² = 63/64, so A = (3/8)/σ = 3/√63 = +0.378
    assert group_advantages(rewards, 8, DAPO)[1] == pytest.approx(3 / math.sqrt(63), rel=1e-14)
    # every sample valid: bit for bit the plain computation; one valid sample left: silent
    x = np.random.default_rng(0).normal(size=32)
    assert np.array_equal(group_advantages(x, 8, GRPO, valid=np.ones(32, bool)), group_advantages(x, 8, GRPO))
    assert np.all(group_advantages(rewards, 8, DAPO, valid=np.eye(8, dtype=bool)[0]) == 0)
    with pytest.raises(ValueError, match="one entry per sample"):
        group_advantages(rewards, 8, DAPO, valid=~truncated[:4])
