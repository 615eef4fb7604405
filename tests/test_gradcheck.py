"""The identity on real autograd gradients of a small float64 transformer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from stddial_book import DAPO, DR_GRPO, GRPO
from stddial_book.rl.gradcheck import (
    build_group,
    drift_study,
    drift_summary,
    identity_check,
    move_policy,
    per_sample_scores,
    score_contrast,
    unclipped,
)
from stddial_book.rl.model import tiny_model
from stddial_book.rl.tasks import make_problem

EXACT = GRPO.replace(kl_coef=0.0)


@pytest.fixture(scope="module")
def setup():
    model = tiny_model(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    group = build_group(model, make_problem(57, 68, 2), 6, 2, 6, gen)
    return model, group


def test_group_is_mixed_and_verified(setup) -> None:
    _, group = setup
    assert group.rewards.tolist().count(1.0) == 2 and len(group.rewards) == 6


@pytest.mark.parametrize("recipe", [EXACT, DR_GRPO, DAPO, EXACT.replace(std_correction=1)])
def test_identity_holds_to_float64_rounding(setup, recipe) -> None:
    model, group = setup
    assert identity_check(model, group, recipe, 6)["rel_error"] < 1e-10


def test_eps_shrinks_by_exactly_one_plus_eps_over_sigma(setup) -> None:
    model, group = setup
    out = identity_check(model, group, EXACT.replace(std_eps=0.05), 6, reference=EXACT)
    assert 1 / out["norm_ratio"] - 1 == pytest.approx(0.05 / out["group_std"], rel=1e-9)


def test_wrong_normaliser_breaks_dr_grpo(setup) -> None:
    model, group = setup
    wrong = DR_GRPO.replace(loss_aggregation="seq-mean-token-mean")
    assert identity_check(model, group, wrong, 6, reference=DR_GRPO)["rel_error"] > 0.01


def test_silent_group_refused(setup) -> None:
    model, group = setup
    silent = group.rows(list(range(6)))
    silent.rewards = np.zeros(6)
    with pytest.raises(ValueError, match="0 < k < G"):
        identity_check(model, silent, EXACT, 6)


@pytest.mark.parametrize("recipe", [EXACT, DR_GRPO, DAPO])
def test_score_contrast_is_the_difference_of_the_per_sample_class_means(setup, recipe) -> None:
    """The one-backward contrast (the fast path the identity checks use) against G separate
    per-sample gradients averaged by class, for each aggregation's normaliser; the group's
    completions have different lengths, so padding and nᵢ both matter."""
    model, group = setup
    assert len(set(group.mask.sum(dim=1).tolist())) > 1
    scores = per_sample_scores(model, group, recipe, 6)
    correct = torch.as_tensor(group.rewards == 1)
    slow = scores[correct].mean(0) - scores[~correct].mean(0)
    fast = score_contrast(model, group, recipe, 6)
    assert float((fast - slow).norm() / slow.norm()) < 1e-12
    swapped = scores[~correct].mean(0) - scores[correct].mean(0)  # the check tells the sign apart
    assert float((fast - swapped).norm() / slow.norm()) > 1.0
    silent = group.rows(list(range(6)))
    silent.rewards = np.ones(6)
    with pytest.raises(ValueError, match="0 < k < G"):
        score_contrast(model, silent, recipe, 6)


def test_drift_study_is_exact_at_first_and_separates_ratio_from_clip() -> None:
    """Step 0 is the identity to rounding; later steps deviate; the clip switched off leaves only the
    ratio's part, and a group with no clipped token deviates by exactly that part."""
    model = tiny_model(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, dtype=torch.float64)
    gen = torch.Generator().manual_seed(1)
    groups = [build_group(model, make_problem(10 + i, 20 + i, 2), 4, 1 + i % 3, 5, gen) for i in range(4)]
    before = [p.detach().clone() for p in model.parameters()]
    study = drift_study(model, groups, EXACT, 5, steps=3, lr=1e-2)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before))  # the model is left as it was
    assert len(study["step"]) == 4 * len(groups)
    at0 = study["step"] == 0
    assert study["rel_error"][at0].max() < 1e-10 and study["clipped"][at0].max() == 0.0
    moved = study["step"] > 0
    assert study["rel_error"][moved].min() > 1e-6
    free = moved & (study["clipped"] == 0)
    np.testing.assert_allclose(study["rel_error"][free], study["ratio_error"][free], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(study["clip_error"][free], 0.0, atol=1e-12)
    assert (study["clipped"][moved] > 0).any()  # at this learning rate the clip binds
    summary = drift_summary(study)
    assert [row["step"] for row in summary] == [0, 1, 2, 3]
    tokens = study["tokens"][study["step"] == 3]
    assert summary[3]["clipped"] == pytest.approx((study["clipped"][study["step"] == 3] * tokens).sum() / tokens.sum())
    assert 0.0 <= summary[3]["clipped_high"] <= summary[3]["clipped"]


def test_unclipped_recipe_never_clips() -> None:
    free = unclipped(EXACT)
    assert free.clip_low > 0.999 and free.clip_high > 1e6 and free.scale_std == EXACT.scale_std


def test_identity_drift_is_zero_on_policy_and_grows_once_the_policy_moves(setup) -> None:
    from stddial_book.rl.gradcheck import identity_drift

    model, group = setup
    moved = tiny_model(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, dtype=torch.float64)
    moved.load_state_dict(model.state_dict())
    with torch.no_grad():
        from stddial_book.rl.rollout import completion_logprobs

        old = completion_logprobs(moved, group.prompt_ids, group.prompt_mask, group.completion_ids, group.mask)
    on_policy = identity_drift(moved, group, EXACT, 6, old)
    assert on_policy["rel_error"] < 1e-10 and on_policy["clipped"] == 0.0
    move_policy(moved, [group], EXACT, 6, steps=3, lr=3e-3)
    after = identity_drift(moved, group, EXACT, 6, old)
    assert after["rel_error"] > 1e-4  # the ratio has left 1: no longer the exact identity


def test_one_forward_pass_gives_the_separate_passes_numbers_bit_for_bit(setup) -> None:
    """identity_check and identity_drift take the prediction and the loss gradients (clipped and
    unclipped) from one forward pass with its graph kept; each from its own pass, as the public
    pieces compute them, gives the same numbers exactly, not just to rounding."""
    from stddial_book.rl.gradcheck import flat_grad, identity_drift, recipe_loss
    from stddial_book.rl.rollout import completion_logprobs
    from stddial_book.theory.identity import update_weight

    model, group = setup
    params = list(model.parameters())
    for recipe, reference in ((EXACT, EXACT), (DR_GRPO, DR_GRPO), (EXACT.replace(std_eps=0.05), EXACT)):
        weight = float(update_weight(float((group.rewards == 1).mean()), reference, len(group.rewards)))
        predicted = weight * score_contrast(model, group, reference, 6)
        gradient = -flat_grad(recipe_loss(model, group, recipe, 6).loss, params)
        got = identity_check(model, group, recipe, 6, reference=reference)
        assert got["rel_error"] == float((gradient - predicted).norm() / predicted.norm())
        assert got["norm_ratio"] == float(gradient.norm() / predicted.norm())
    moved = tiny_model(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, dtype=torch.float64)
    moved.load_state_dict(model.state_dict())
    with torch.no_grad():
        old = completion_logprobs(moved, group.prompt_ids, group.prompt_mask, group.completion_ids, group.mask)
    move_policy(moved, [group], EXACT, 6, steps=2, lr=3e-3)
    params = list(moved.parameters())
    weight = float(update_weight(float((group.rewards == 1).mean()), EXACT, len(group.rewards)))
    predicted = weight * score_contrast(moved, group, EXACT, 6)
    gradient = -flat_grad(recipe_loss(moved, group, EXACT, 6, old).loss, params)
    free = -flat_grad(recipe_loss(moved, group, unclipped(EXACT), 6, old).loss, params)
    got = identity_drift(moved, group, EXACT, 6, old, split=True)
    scale = predicted.norm()
    assert got["rel_error"] == float((gradient - predicted).norm() / scale)
    assert got["ratio_error"] == float((free - predicted).norm() / scale)
    assert got["clip_error"] == float((gradient - free).norm() / scale)
