"""Cheap measurements in place of training runs (stddial_book.experiments.testbed.probes, chapters 10 and 11)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from stddial_book import DAPO, DR_GRPO, GRPO
from stddial_book.experiments.testbed.probes import kl_gradient_share, rollout_groups, token_weights, update_comparison
from stddial_book.rl.gradcheck import GroupBatch
from stddial_book.rl.model import CharCodec, tiny_model
from stddial_book.rl.tasks import make_problem


def small_model(seed: int = 0):
    return tiny_model(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, seed=seed)


def hand_batch() -> GroupBatch:
    """Two groups of G = 4 completions of '12+34=' with 2 and 1 correct, lengths 2 to 4."""
    codec = CharCodec()
    prompt = torch.tensor([codec.encode("12+34=")] * 8)
    texts = ["64<eos>", "6<eos>", "64<eos>", "99<eos>", "64<eos>", "1<eos>", "7<eos>", "123<eos>"]
    ids = [codec.encode(t) for t in texts]
    width = max(map(len, ids))
    completion = torch.full((8, width), codec.pad_id)
    mask = torch.zeros(8, width, dtype=torch.bool)
    for row, seq in enumerate(ids):
        completion[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = True
    rewards = np.array([1, 0, 1, 0, 1, 0, 0, 0])
    return GroupBatch(prompt, torch.ones_like(prompt, dtype=torch.bool), completion, mask, rewards)


def test_token_weights_follow_each_aggregation() -> None:
    lengths, adv = [2, 4], [1.0, -1.0]
    dr = token_weights(lengths, adv, DR_GRPO, max_new_tokens=8)
    assert dr.shape == (2, 4)
    assert np.allclose(dr[0], [1 / 16, 1 / 16, 0, 0]) and np.allclose(dr[1], -1 / 16)  # A / (B L_max)
    padded = token_weights(lengths, adv, DR_GRPO, max_new_tokens=4)  # the padded width instead
    assert np.allclose(padded[0, :2], 1 / 8)
    grpo = token_weights(lengths, adv, GRPO.replace(kl_coef=0.0), max_new_tokens=8)
    assert np.allclose(grpo[0, :2], 1 / 4) and np.allclose(grpo[1], -1 / 8)  # A / (B ℓ_i)
    dapo = token_weights(lengths, adv, DAPO, max_new_tokens=8)
    assert np.allclose(dapo[0, :2], 1 / 6) and np.allclose(dapo[1], -1 / 6)  # A / (tokens of the step)
    with pytest.raises(ValueError, match="one number per completion"):
        token_weights(lengths, [1.0], DR_GRPO, max_new_tokens=8)


def test_update_comparison_reward_gap_scales_dr_grpo_not_grpo() -> None:
    model, batch = small_model(), hand_batch()
    before = [p.detach().clone() for p in model.parameters()]
    dr = update_comparison(model, batch, DR_GRPO, DR_GRPO.replace(reward_wrong=-1.0), 4, 8, steps=2, lr=1e-3)
    assert dr["gradient_ratio"] == pytest.approx(2.0, rel=1e-5)  # w = Δσ², Δ from 1 to 2
    # Adam divides the doubled gradient's scale out except against its ε: the updates differ by 0.42% and
    # their norms by 0.09% here (deterministic; the bounds leave room for float32 and library rounding).
    # Plain SGD would give a norm ratio of 2, no ε at all a difference of 0
    assert 1e-3 < dr["adam_rel_diff"] < 1e-2 and dr["adam_norm_ratio"] == pytest.approx(1.0, abs=3e-3)
    unclipped = update_comparison(
        model, batch, DR_GRPO, DR_GRPO.replace(reward_wrong=-1.0), 4, 8, steps=1, lr=1e-3, max_grad_norm=None
    )
    assert unclipped["gradient_ratio"] == pytest.approx(2.0, rel=1e-5)
    assert unclipped["gradient_norm"] == pytest.approx(dr["gradient_norm"]) and dr["gradient_norm"] > 0
    # a clip that binds on both sides at every step leaves two gradients of the same direction and
    # norm: the updates agree to rounding, ε included
    both = update_comparison(
        model,
        batch,
        DR_GRPO,
        DR_GRPO.replace(reward_wrong=-1.0),
        4,
        8,
        steps=2,
        lr=1e-3,
        max_grad_norm=1e-3 * dr["gradient_norm"],
    )
    assert both["adam_rel_diff"] < 1e-5 < dr["adam_rel_diff"]
    plain = GRPO.replace(kl_coef=0.0)
    grpo = update_comparison(model, batch, plain, plain.replace(reward_wrong=-1.0), 4, 8, steps=2, lr=1e-3)
    assert grpo["gradient_ratio"] == pytest.approx(1.0, rel=1e-5) and grpo["adam_rel_diff"] < 1e-5
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before))  # the model is left as it was
    with pytest.raises(ValueError, match="lr"):
        update_comparison(model, batch, DR_GRPO, DR_GRPO, 4, 8, lr=0.0)


def test_kl_gradient_share_is_zero_at_the_reference() -> None:
    model, batch = small_model(), hand_batch()
    same = kl_gradient_share(model, copy.deepcopy(model), batch, GRPO, 4, 8)
    assert same["kl"] == pytest.approx(0.0, abs=1e-7) and same["kl_norm"] == pytest.approx(0.0, abs=1e-7)
    assert same["surrogate_norm"] > 0
    moved = kl_gradient_share(model, small_model(seed=1), batch, GRPO, 4, 8)
    assert moved["kl"] > 0 and moved["kl_norm"] > 0
    assert moved["ratio"] == pytest.approx(moved["kl_norm"] / moved["surrogate_norm"])
    assert -1.0 <= moved["cosine"] <= 1.0
    doubled = kl_gradient_share(model, small_model(seed=1), batch, GRPO.replace(kl_coef=0.08), 4, 8)
    assert doubled["kl_norm"] == pytest.approx(2 * moved["kl_norm"], rel=1e-5)  # linear in β
    with pytest.raises(ValueError, match="no KL term"):
        kl_gradient_share(model, model, batch, DR_GRPO, 4, 8)


def test_rollout_groups_stacks_groups_with_verified_rewards() -> None:
    problems = [make_problem(12, 34, 2), make_problem(5, 7, 2)]
    batch = rollout_groups(small_model(), problems, 3, 4, torch.Generator().manual_seed(0))
    codec = CharCodec()
    assert batch.completion_ids.shape[0] == 6 and batch.rewards.shape == (6,)
    assert [codec.decode(row) for row in batch.prompt_ids.tolist()] == ["12+34="] * 3 + ["05+07="] * 3
    assert set(np.unique(batch.rewards)) <= {0.0, 1.0}
    assert (batch.mask.sum(dim=1) >= 1).all() and (batch.mask.sum(dim=1) <= 4).all()
