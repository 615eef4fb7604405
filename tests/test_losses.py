"""The clipped surrogate and the three aggregations on hand-computed cases."""

from __future__ import annotations

import math

import pytest
import torch

from stddial_book import DAPO, DR_GRPO, GRPO
from stddial_book.rl.losses import k3_kl, policy_loss

NO_KL = GRPO.replace(kl_coef=0.0)


def batch_at_ratio_one():
    """Two samples: lengths 2 and 3 in a padded width of 4, advantages +1 and −0.5."""
    logprobs = torch.log(torch.full((2, 4), 0.5, dtype=torch.float64)).requires_grad_()
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0]], dtype=torch.bool)
    advantages = torch.tensor([1.0, -0.5], dtype=torch.float64)
    return logprobs, logprobs.detach().clone(), advantages, mask


def test_three_aggregations_by_hand() -> None:
    lp, old, adv, mask = batch_at_ratio_one()
    # per-token loss at ratio 1 is −A: sample 1 gives −1, −1; sample 2 gives 0.5, 0.5, 0.5
    grpo = policy_loss(lp, old, adv, mask, NO_KL).loss
    assert grpo.item() == pytest.approx((-1.0 + 0.5) / 2)  # per-sequence means, then mean
    dr = policy_loss(lp, old, adv, mask, DR_GRPO, max_new_tokens=5).loss
    assert dr.item() == pytest.approx((-2.0 + 1.5) / (2 * 5))  # sums / (B · L_max)
    dapo = policy_loss(lp, old, adv, mask, DAPO).loss
    assert dapo.item() == pytest.approx((-2.0 + 1.5) / 5)  # sum / all 5 tokens


def test_dr_grpo_normaliser_is_the_cap_not_the_padded_width() -> None:
    lp, old, adv, mask = batch_at_ratio_one()
    wide = torch.cat([lp.detach(), torch.zeros(2, 3, dtype=torch.float64)], dim=1).requires_grad_()
    wide_mask = torch.cat([mask, torch.zeros(2, 3, dtype=torch.bool)], dim=1)
    narrow = policy_loss(lp, old, adv, mask, DR_GRPO, max_new_tokens=8).loss
    padded = policy_loss(wide, wide.detach(), adv, wide_mask, DR_GRPO, max_new_tokens=8).loss
    assert narrow.item() == pytest.approx(padded.item())


def test_gradient_at_ratio_one_is_minus_advantage_times_score() -> None:
    lp, old, adv, mask = batch_at_ratio_one()
    policy_loss(lp, old, adv, mask, DAPO).loss.backward()
    expected = torch.tensor([[-1, -1, 0, 0], [0.5, 0.5, 0.5, 0]], dtype=torch.float64) / 5
    torch.testing.assert_close(lp.grad, expected)


@pytest.mark.parametrize(
    "recipe, adv, ratio, loss, grad_zero, region",
    [
        (GRPO, 1.0, 1.5, -1.2, True, "high"),  # A > 0, ρ above 1 + 0.2: clipped
        (DAPO, 1.0, 1.25, -1.25, False, None),  # clip-higher: 1.25 < 1.28, not clipped
        (DAPO, 1.0, 1.5, -1.28, True, "high"),
        (GRPO, -1.0, 0.5, 0.8, True, "low"),  # A < 0, ρ below 1 − 0.2: clipped
        (GRPO, -1.0, 1.5, 1.5, False, None),  # A < 0, ρ large: the unclipped term is the min
        (GRPO, 1.0, 0.5, -0.5, False, None),  # A > 0, ρ small: unclipped
    ],
)
def test_clip_bounds(recipe, adv, ratio, loss, grad_zero, region) -> None:
    recipe = recipe.replace(kl_coef=0.0)
    old = torch.zeros(1, 1, dtype=torch.float64)
    lp = torch.full((1, 1), math.log(ratio), dtype=torch.float64, requires_grad=True)
    out = policy_loss(lp, old, torch.tensor([adv], dtype=torch.float64), torch.ones(1, 1, dtype=torch.bool), recipe)
    out.loss.backward()
    assert out.loss.item() == pytest.approx(loss)
    assert (lp.grad.abs().item() == 0.0) == grad_zero
    assert out.metrics["clip_ratio/region_mean"] == (1.0 if region else 0.0)
    if region:
        assert out.metrics[f"clip_ratio/{region}_mean"] == 1.0


def test_k3_kl_by_hand_and_in_the_loss() -> None:
    lp = torch.log(torch.tensor([[0.5]], dtype=torch.float64))
    ref = torch.log(torch.tensor([[0.25]], dtype=torch.float64))
    expected = 0.5 - math.log(0.5) - 1.0
    assert k3_kl(lp, ref).item() == pytest.approx(expected)
    assert k3_kl(lp, lp).item() == 0.0
    out = policy_loss(
        lp, lp, torch.tensor([0.0], dtype=torch.float64), torch.ones(1, 1, dtype=torch.bool), GRPO, ref_logprobs=ref
    )
    assert out.loss.item() == pytest.approx(0.04 * expected)
    assert out.metrics["kl"] == pytest.approx(expected)


def test_token_mean_is_invariant_to_micro_batching() -> None:
    torch.manual_seed(0)
    B, T = 8, 6
    lengths = torch.randint(1, T + 1, (B,))
    mask = torch.arange(T)[None, :] < lengths[:, None]
    old = -torch.rand(B, T, dtype=torch.float64)
    base = old + 0.3 * torch.randn(B, T, dtype=torch.float64)
    adv = torch.randn(B, dtype=torch.float64)
    for recipe, extra in ((DAPO, {}), (NO_KL, {}), (DR_GRPO, {"max_new_tokens": T})):
        whole = base.clone().requires_grad_()
        policy_loss(whole, old, adv, mask, recipe, **extra).loss.backward()
        for k in (2, 4, 8):
            split = base.clone().requires_grad_()
            total = 0.0
            for rows in torch.arange(B).chunk(k):
                out = policy_loss(
                    split[rows],
                    old[rows],
                    adv[rows],
                    mask[rows],
                    recipe,
                    step_num_tokens=int(mask.sum()),
                    step_num_sequences=B,
                    **extra,
                )
                out.loss.backward()
                total += out.loss.item()
            full = policy_loss(base, old, adv, mask, recipe, **extra).loss.item()
            assert total == pytest.approx(full, rel=1e-12)
            torch.testing.assert_close(split.grad, whole.grad)
    # the trap: averaging micro-batch token means is not the step's token mean
    naive = sum(policy_loss(base[r], old[r], adv[r], mask[r], DAPO).loss.item() for r in torch.arange(B).chunk(4)) / 4
    assert naive != pytest.approx(policy_loss(base, old, adv, mask, DAPO).loss.item(), rel=1e-6)


def test_overlong_filter_masks_truncated_samples() -> None:
    lp, old, adv, mask = batch_at_ratio_one()
    truncated = torch.tensor([False, True])
    dapo = policy_loss(lp, old, adv, mask, DAPO, truncated=truncated).loss
    assert dapo.item() == pytest.approx(-2.0 / 2)  # only sample 1's two tokens remain
    grpo = policy_loss(lp, old, adv, mask, NO_KL, truncated=truncated).loss
    assert grpo.item() == pytest.approx((-1.0 + 0.5) / 2)  # GRPO does not filter


def test_entropy_metric() -> None:
    lp, old, adv, mask = batch_at_ratio_one()
    entropy = torch.arange(8, dtype=torch.float64).reshape(2, 4)
    out = policy_loss(lp, old, adv, mask, NO_KL, entropy=entropy)
    assert out.metrics["entropy"] == pytest.approx((0 + 1 + 4 + 5 + 6) / 5)


@pytest.mark.parametrize(
    "change, message",
    [
        ("old_shape", "old_logprobs has shape"),
        ("adv_shape", "advantages must have shape"),
        ("empty_mask", "mask selects no token"),
        ("too_long", "more than max_new_tokens"),
        ("no_cap", "pass max_new_tokens"),
        ("no_ref", "no ref_logprobs"),
        ("truncated_shape", "truncated must have shape"),
    ],
)
def test_bad_input(change: str, message: str) -> None:
    lp, old, adv, mask = batch_at_ratio_one()
    recipe, kwargs = DR_GRPO, {"max_new_tokens": 4}
    if change == "old_shape":
        old = old[:, :3]
    elif change == "adv_shape":
        adv = torch.zeros(3, dtype=torch.float64)
    elif change == "empty_mask":
        mask = torch.zeros_like(mask)
    elif change == "too_long":
        kwargs = {"max_new_tokens": 2}
    elif change == "no_cap":
        kwargs = {}
    elif change == "no_ref":
        recipe, kwargs = GRPO, {}
    elif change == "truncated_shape":
        kwargs["truncated"] = torch.tensor([True])
    with pytest.raises(ValueError, match=message):
        policy_loss(lp, old, adv, mask, recipe, **kwargs)
