"""Chapter 2's step by hand (stddial_book.teaching.worked_step): the numbers worked out on paper, and
the same numbers from the package's group_advantages, policy_loss (gradient by autograd) and the
identity's update_weight."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from stddial_book.rl.losses import policy_loss
from stddial_book.teaching.worked_step import (
    WORKED_COMPLETIONS,
    WORKED_CORRECT,
    WORKED_MAX_NEW_TOKENS,
    worked_advantages,
    worked_identity,
    worked_logprobs,
    worked_loss,
    worked_summed_scores,
    worked_token_probs,
    worked_token_scores,
    worked_update,
)
from stddial_book.theory.identity import update_weight
from stddial_book.theory.recipes import DAPO, DR_GRPO, GRPO, Recipe, group_advantages

CORRECT = np.array(WORKED_CORRECT)
LENGTHS = np.array([len(c) for c in WORKED_COMPLETIONS])
L_MAX = WORKED_MAX_NEW_TOKENS
SIGMA = math.sqrt(3) / 4  # one correct of four
RECIPES = [GRPO, DR_GRPO, DAPO]


def rewards_of(recipe: Recipe) -> np.ndarray:
    return np.where(CORRECT, recipe.reward_correct, recipe.reward_wrong)


def hand(recipe: Recipe, theta: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    advantages = worked_advantages(rewards_of(recipe), recipe.scale_std)
    scores = worked_summed_scores(WORKED_COMPLETIONS, theta)
    loss = worked_loss(advantages, LENGTHS, recipe.loss_aggregation, L_MAX)
    return advantages, loss, worked_update(advantages, scores, LENGTHS, recipe.loss_aggregation, L_MAX)


def package(recipe: Recipe, theta: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    advantages = group_advantages(rewards_of(recipe), len(WORKED_COMPLETIONS), recipe)
    t = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
    logprobs, mask = worked_logprobs(WORKED_COMPLETIONS, t)
    old = logprobs.detach()
    out = policy_loss(logprobs, old, torch.as_tensor(advantages), mask, recipe, max_new_tokens=L_MAX, ref_logprobs=old)
    (grad,) = torch.autograd.grad(out.loss, t)
    return advantages, float(out.loss.detach()), -grad.numpy()


def test_the_example_is_the_one_the_chapter_describes() -> None:
    assert LENGTHS.tolist() == [2, 1, 3, 4] and CORRECT.tolist() == [True, False, False, False]
    assert LENGTHS.max() < L_MAX * (1 - DAPO.overlong_cache_fraction)  # DAPO's length penalty never applies


def test_scores_by_hand_at_theta_zero() -> None:
    theta = np.zeros(2)
    np.testing.assert_allclose(worked_token_probs(theta), [1 / 3] * 3)
    scores = worked_token_scores(theta)
    np.testing.assert_allclose(scores["a"], [2 / 3, -1 / 3])
    np.testing.assert_allclose(scores["b"], [-1 / 3, 2 / 3])
    np.testing.assert_allclose(scores["c"], [-1 / 3, -1 / 3])
    summed = worked_summed_scores(WORKED_COMPLETIONS, theta)
    np.testing.assert_allclose(summed, [[4 / 3, -2 / 3], [-1 / 3, 2 / 3], [-1, 0], [-4 / 3, 5 / 3]], atol=1e-15)


def test_numbers_worked_out_on_paper() -> None:
    theta = np.zeros(2)
    third = 1 / math.sqrt(3)
    a_grpo, loss_grpo, step_grpo = hand(GRPO, theta)
    np.testing.assert_allclose(a_grpo, [math.sqrt(3), -third, -third, -third])
    assert loss_grpo == pytest.approx(0.0, abs=1e-15)  # per-sequence means −Aᵢ, and Σ Aᵢ = 0
    np.testing.assert_allclose(step_grpo, SIGMA * np.array([1, -25 / 36]))
    a_dr, loss_dr, step_dr = hand(DR_GRPO, theta)
    np.testing.assert_allclose(a_dr, [3 / 4, -1 / 4, -1 / 4, -1 / 4])
    assert loss_dr == pytest.approx(1 / 64)  # −Σ ℓᵢ Aᵢ / (G L_max) = −(3/2 − 2)/32
    np.testing.assert_allclose(step_dr, [5 / 96, -13 / 384])
    a_dapo, loss_dapo, step_dapo = hand(DAPO, theta)
    np.testing.assert_allclose(a_dapo, a_grpo)  # ±1 rewards: the division removes the scale
    assert loss_dapo == pytest.approx(1 / (5 * math.sqrt(3)))  # −Σ ℓᵢ Aᵢ / Σ ℓᵢ
    np.testing.assert_allclose(step_dapo, SIGMA * np.array([8 / 9, -26 / 45]))


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.name)
@pytest.mark.parametrize("theta", [(0.0, 0.0), (0.7, -1.3), (-2.0, 0.4)])
def test_hand_equals_package(recipe: Recipe, theta: tuple[float, float]) -> None:
    theta = np.array(theta)
    a_hand, loss_hand, step_hand = hand(recipe, theta)
    a_pkg, loss_pkg, step_pkg = package(recipe, theta)
    np.testing.assert_allclose(a_hand, a_pkg, rtol=1e-12, atol=1e-12)
    assert loss_hand == pytest.approx(loss_pkg, abs=1e-12)
    np.testing.assert_allclose(step_hand, step_pkg, rtol=0, atol=1e-6)  # the chapter's tolerance
    np.testing.assert_allclose(step_hand, step_pkg, rtol=1e-10, atol=1e-12)  # and in fact to rounding


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.name)
@pytest.mark.parametrize("theta", [(0.0, 0.0), (0.7, -1.3)])
def test_identity_on_the_example(recipe: Recipe, theta: tuple[float, float]) -> None:
    """(1/G) Σ Aᵢ gᵢ = w (ḡ₊ − ḡ₋), w = σ (GRPO, DAPO) or σ² (Dr. GRPO), the package's update_weight."""
    theta = np.array(theta)
    weight = float(update_weight(CORRECT.mean(), recipe))
    assert weight == pytest.approx(SIGMA if recipe.scale_std else SIGMA**2)
    scores = worked_summed_scores(WORKED_COMPLETIONS, theta)
    sides = worked_identity(CORRECT, scores, LENGTHS, recipe.loss_aggregation, L_MAX, weight)
    advantages, _, step = hand(recipe, theta)
    np.testing.assert_allclose(advantages @ sides["g"] / len(advantages), step, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(sides["step"], step, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(sides["step"], package(recipe, theta)[2], rtol=1e-10, atol=1e-12)


def test_logprobs_are_the_policys() -> None:
    theta = np.array([0.7, -1.3])
    logprobs, mask = worked_logprobs(WORKED_COMPLETIONS, torch.tensor(theta))
    assert mask.sum(dim=1).tolist() == LENGTHS.tolist()
    log_pi = dict(zip("abc", np.log(worked_token_probs(theta))))
    for row, completion in zip(logprobs, WORKED_COMPLETIONS):
        np.testing.assert_allclose(row[: len(completion)].numpy(), [log_pi[t] for t in completion])
        assert not row[len(completion) :].any()


def test_a_silent_group_gets_zero_advantage() -> None:
    assert worked_advantages(np.ones(4), scale_std=True).tolist() == [0.0] * 4
    assert worked_advantages(np.zeros(4), scale_std=False).tolist() == [0.0] * 4
