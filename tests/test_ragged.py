"""Ragged groups: one group size per prompt in one batch, for every recipe.

The advantages of each group are those it would get alone; the loss's aggregations weigh a group
by its share of the step's sequences (GRPO, Dr. GRPO) or tokens (DAPO); the gradient of a ragged
batch is the sum of the per-group identity terms so weighted; and one RL step runs end to end
with a G per prompt.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from stddial_book.rl.batches import GroupLayout, group_sizes_of, make_problems
from stddial_book.rl.checkpoints import TrainState
from stddial_book.rl.configs import TaskConfig
from stddial_book.rl.gradcheck import GroupBatch, build_group, flat_grad, per_sample_scores
from stddial_book.rl.losses import policy_loss
from stddial_book.rl.model import CharCodec, tiny_model
from stddial_book.rl.profiles import Profile
from stddial_book.rl.rollout import completion_logprobs, sample
from stddial_book.rl.sampling import DynamicSampler, nonsilent_groups
from stddial_book.rl.tasks import make_problem
from stddial_book.rl.trainer import _rollout_round, _train_step
from stddial_book.rl.update import _passes
from stddial_book.theory.identity import update_weight
from stddial_book.theory.recipes import DAPO, DR_GRPO, GRPO, group_advantages

RECIPES = [GRPO, DR_GRPO, DAPO, GRPO.replace(std_correction=1)]
SIZES = [3, 8, 5, 2, 8, 4]


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: f"{r.name}-{r.std_correction}")
def test_each_ragged_group_gets_the_advantages_it_would_get_alone(recipe) -> None:
    rng = np.random.default_rng(0)
    rewards = rng.integers(0, 2, sum(SIZES)) * 1.0 + rng.normal(0, 0.1, sum(SIZES)) * (recipe is DAPO)
    valid = rng.random(sum(SIZES)) > 0.2
    bounds = np.cumsum([0] + SIZES)
    for mask in (None, valid):
        ragged = group_advantages(rewards, SIZES, recipe, valid=mask)
        for j, size in enumerate(SIZES):
            part = slice(bounds[j], bounds[j + 1])
            alone = group_advantages(rewards[part], size, recipe, valid=None if mask is None else mask[part])
            assert np.array_equal(ragged[part], alone)


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: f"{r.name}-{r.std_correction}")
def test_equal_sizes_given_as_a_list_are_bit_identical_to_one_g(recipe) -> None:
    rng = np.random.default_rng(1)
    rewards = rng.integers(0, 2, 48).astype(float)
    valid = rng.random(48) > 0.2
    assert np.array_equal(group_advantages(rewards, 8, recipe), group_advantages(rewards, [8] * 6, recipe))
    assert np.array_equal(
        group_advantages(rewards, 8, recipe, valid), group_advantages(rewards, (8,) * 6, recipe, valid)
    )
    tensor = group_advantages(torch.tensor(rewards), torch.tensor([8] * 6), recipe)
    assert torch.equal(tensor, torch.tensor(group_advantages(rewards, 8, recipe)))


@pytest.mark.parametrize(
    "sizes, message",
    [([3, 4], "sum to 7 but the batch holds 8"), ([1, 7], "at least 2"), ([], "empty"), ([4.5, 3.5], "integer")],
)
def test_bad_group_sizes_are_named(sizes, message) -> None:
    with pytest.raises(ValueError, match=message):
        group_advantages(np.arange(8.0) % 2, sizes, GRPO)


def test_silence_is_decided_per_group() -> None:
    rewards = np.array(
        [1, 1, 0, 1, 0, 0, 0, 0, 1.0]
    )  # a silent pair, a mixed three, a silent four... then a mixed pair
    sizes = [2, 3, 2, 2]
    adv = group_advantages(rewards, sizes, GRPO)
    assert np.all(adv[:2] == 0) and np.all(adv[5:7] == 0) and np.all(adv[2:5] != 0) and np.all(adv[7:] != 0)
    assert nonsilent_groups(rewards, sizes).tolist() == [False, True, False, True]


# -- the identity on a ragged batch, real autograd gradients of a float64 model ------------------


@pytest.fixture(scope="module")
def ragged_batch():
    """Three groups of one-digit... two-digit sums with G = 3, 6, 4 and k = 1, 2, 3 correct."""
    model = tiny_model(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    spec = [(57, 68, 3, 1), (12, 34, 6, 2), (40, 29, 4, 3)]
    groups = [build_group(model, make_problem(a, b, 2), size, k, 6, gen) for a, b, size, k in spec]
    return model, groups


def _stack(groups: list[GroupBatch]) -> GroupBatch:
    width = max(g.completion_ids.shape[1] for g in groups)

    def pad(x, value):
        return torch.nn.functional.pad(x, (0, width - x.shape[1]), value=value)

    return GroupBatch(
        torch.cat([g.prompt_ids for g in groups]),
        torch.cat([g.prompt_mask for g in groups]),
        torch.cat([pad(g.completion_ids, 0) for g in groups]),
        torch.cat([pad(g.mask, False) for g in groups]),
        np.concatenate([g.rewards for g in groups]),
    )


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: f"{r.name}-{r.std_correction}")
def test_the_gradient_of_a_ragged_batch_is_the_weighted_sum_of_group_identities(ragged_batch, recipe) -> None:
    """−∇L = Σⱼ sⱼ wⱼ (ḡ₊ⱼ − ḡ₋ⱼ) with sⱼ = G_j/N (sequence means) or G_j ℓ̄_j/T (token mean), as
    group_advantages' docstring writes it out."""
    model, groups = ragged_batch
    recipe = recipe.replace(kl_coef=0.0)
    batch = _stack(groups)
    sizes = [len(g.rewards) for g in groups]
    logp = completion_logprobs(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.mask)
    rewards = np.where(batch.rewards == 1, recipe.reward_correct, recipe.reward_wrong)
    adv = torch.as_tensor(group_advantages(rewards, sizes, recipe))
    loss = policy_loss(logp, logp.detach(), adv, batch.mask, recipe, max_new_tokens=6).loss
    params = [p for p in model.parameters() if p.requires_grad]
    gradient = -flat_grad(loss, params)
    num_sequences, num_tokens = sum(sizes), int(batch.mask.sum())
    predicted = torch.zeros_like(gradient)
    for group in groups:
        correct = torch.as_tensor(group.rewards == 1)
        scores = per_sample_scores(model, group, recipe, 6)
        weight = float(update_weight(float(correct.double().mean()), recipe, len(correct)))
        if recipe.loss_aggregation == "token-mean":
            share = int(group.mask.sum()) / num_tokens  # G_j ℓ̄_j / T
        else:
            share = len(correct) / num_sequences  # G_j / N
        predicted += share * weight * (scores[correct].mean(0) - scores[~correct].mean(0))
    assert float((gradient - predicted).norm() / predicted.norm()) < 1e-6
    # the share is what ragged groups change: weighting every group by 1/M (the equal-G mean) is off
    equal = sum(
        float(update_weight(float((g.rewards == 1).mean()), recipe, len(g.rewards)))
        / len(groups)
        * (lambda s, c: s[c].mean(0) - s[~c].mean(0))(
            per_sample_scores(model, g, recipe, 6), torch.as_tensor(g.rewards == 1)
        )
        for g in groups
    )
    assert float((gradient - equal).norm() / equal.norm()) > 1e-3


# -- sampling with a count per prompt, and one ragged RL step ---------------------------------------


def test_sample_takes_a_count_per_prompt_and_shares_each_prompts_cache() -> None:
    model = tiny_model(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, dtype=torch.float64)
    codec = CharCodec()
    prompts = torch.tensor([codec.encode(make_problem(a, b, 2).prompt) for a, b in ((12, 34), (56, 78), (90, 11))])
    out = sample(
        model, prompts, 5, codec.eos_id, codec.pad_id, generator=torch.Generator().manual_seed(0), num_samples=[2, 5, 3]
    )
    assert out.completion_ids.shape[0] == 10
    assert torch.equal(out.prompt_ids, prompts.repeat_interleave(torch.tensor([2, 5, 3]), dim=0))
    again = completion_logprobs(model, out.prompt_ids, out.prompt_mask, out.completion_ids, out.mask)
    torch.testing.assert_close(again, out.logprobs, rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="one count per prompt"):
        sample(model, prompts, 5, codec.eos_id, codec.pad_id, num_samples=[2, 5])


def test_group_layout_and_sizes_from_prompts() -> None:
    layout = GroupLayout.of([3, 2, 4])
    assert layout.rows(np.array([2, 0])).tolist() == [5, 6, 7, 8, 0, 1, 2]
    assert layout.group_of(torch.tensor([0, 3, 4, 8])).tolist() == [0, 1, 1, 2]
    assert layout.first_row(torch.tensor([1, 2])).tolist() == [3, 5]
    assert group_sizes_of(np.array([7, 7, 7, 2, 2, 9, 9, 9, 9])) == [3, 2, 4]
    equal = GroupLayout.of(4)
    assert equal.rows(np.array([1])).tolist() == [4, 5, 6, 7] and not equal.ragged


def test_passes_cover_every_row_of_ragged_groups() -> None:
    from stddial_book.rl.batches import Batch

    sizes = [3, 5, 2]
    n = sum(sizes)
    mask = torch.arange(6)[None, :] < torch.tensor([1, 2, 3, 4, 5, 6, 1, 2, 3, 4])[:, None]
    batch = Batch(
        torch.ones(n, 3, dtype=torch.long), torch.ones(n, 3, dtype=torch.bool), torch.ones(n, 6, dtype=torch.long),
        mask, torch.zeros(n, dtype=torch.bool), torch.zeros(n, 6), np.zeros(n), np.zeros(n),
        np.array(["D1"] * n), np.repeat([0, 1, 2], sizes),
    )  # fmt: skip
    rows = torch.arange(n)
    for micro in (None, 3):
        passes = _passes(batch, rows, GroupLayout.of(sizes), micro)
        assert sorted(torch.cat([p[0] for p in passes]).tolist()) == list(range(n))


def test_dynamic_sampler_keeps_and_drops_ragged_groups_whole() -> None:
    rounds = [
        (np.arange(9), np.array([1, 1, 0, 1, 0, 0, 0, 0, 1]), [2, 3, 2, 2]),  # silent, mixed, silent, mixed
        (np.arange(9, 15), np.array([1, 0, 1, 0, 1, 1]), [4, 2]),  # mixed, silent
    ]
    sampler = DynamicSampler(num_groups=3, group_size=2, max_rounds=4)
    kept, cost = sampler.fill(lambda i, missing: rounds[i])
    assert [k.tolist() for k in kept] == [[2, 3, 4, 7, 8], [9, 10, 11, 12]]
    assert (cost.groups_kept, cost.groups_silent, cost.samples_silent, cost.samples_kept) == (3, 3, 6, 9)
    assert cost.samples_generated == cost.samples_kept + cost.samples_silent + cost.samples_surplus


TINY = Profile(
    "tiny",
    "cpu",
    "test-sized runs",
    model=dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64),
    train=dict(group_size=4, prompts_per_step=6, num_minibatches=2, lr=1e-3, max_new_tokens=4, eval_every=0),
)


@pytest.fixture(scope="module")
def pool():
    return make_problems(TaskConfig(digits=(1,), num_train=40, num_heldout=20))[0]


@pytest.fixture(scope="module")
def warm(pool) -> dict:
    """The tiny model's weights after a short warm start: some groups are mixed."""
    from stddial_book.rl.configs import SFTConfig
    from stddial_book.rl.model import model_for_profile
    from stddial_book.rl.sft import sft

    model = model_for_profile(TINY)
    config = SFTConfig(lr=3e-3, batch_size=32, target_pass_rate=0.3, eval_every=10, eval_prompts=20, max_steps=400)
    sft(model, pool, pool[:20], config, max_new_tokens=4)
    return {k: v.to(torch.float64) for k, v in model.state_dict().items()}


def _step(recipe, pool, warm, group_sizes, **changes):
    from stddial_book.rl.model import model_for_profile
    from stddial_book.rl.sft import adamw_optimizer

    torch.manual_seed(0)
    model = model_for_profile(TINY, dtype=torch.float64)
    model.load_state_dict(warm)
    config = TINY.train_config(recipe, identity_check_every=1, identity_check_groups=8, **changes)
    state = TrainState(config.seed, "cpu")
    optimizer = adamw_optimizer(model, config.lr)
    metrics, generated = _train_step(model, optimizer, pool, config, state, CharCodec(), None, group_sizes)
    return model, metrics, generated, state


@pytest.mark.parametrize("recipe", [GRPO.replace(kl_coef=0.0), DR_GRPO, DAPO])
def test_one_ragged_rl_step_end_to_end(recipe, pool, warm) -> None:
    """Each prompt sampled at its own G, with the shared prompt cache; advantages, minibatches and
    the identity check inside the update follow the groups' own sizes."""
    sizes = np.array([[2, 3, 4, 6, 8][i % 5] for i in range(len(pool))])
    _, metrics, generated, state = _step(recipe, pool, warm, sizes, max_rounds=2)
    drawn = metrics["groups_generated/prompt"]
    assert metrics["groups_generated/size"] == [int(sizes[p]) for p in drawn]
    assert generated == sum(sizes[p] for p in drawn) == metrics["samples/step_generated"]
    assert "groups/prompt" in metrics  # the warm start leaves mixed groups
    assert metrics["groups/size"] == [int(sizes[p]) for p in metrics["groups/prompt"]]
    assert state.samples_kept == sum(metrics["groups/size"])
    assert metrics["optimizer_steps"] >= 1 and metrics["update_norm"] > 0
    # the first minibatch's groups are checked before any step: the identity to rounding
    first = np.array(metrics["identity/minibatch"]) == 0
    assert first.any() and max(np.array(metrics["identity/rel_error"])[first]) < 1e-6
    if recipe.dynamic_sampling:
        assert metrics["samples/step_discarded_silent"] + state.samples_kept == generated


def test_a_ragged_step_with_every_g_equal_matches_the_equal_path(pool, warm) -> None:
    """The same step with G given per prompt (all 4) and as one G: the same samples, the same update."""
    recipe = GRPO.replace(kl_coef=0.0)
    equal, m_equal, _, _ = _step(recipe, pool, warm, None)
    ragged, m_ragged, _, _ = _step(recipe, pool, warm, np.full(len(pool), 4))
    assert m_equal["groups_generated/k"] == m_ragged["groups_generated/k"]
    for p, q in zip(equal.parameters(), ragged.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)


def test_a_round_draws_each_prompts_own_g(pool) -> None:
    from stddial_book.rl.model import model_for_profile

    model = model_for_profile(TINY)
    config = TINY.train_config(GRPO)
    state = TrainState(0, "cpu")
    sizes = np.arange(len(pool)) % 3 + 2
    batch = _rollout_round(model, pool, config, state, CharCodec(), 5, None, sizes)
    groups = group_sizes_of(batch.prompt_index)
    assert len(groups) == 5 and groups == [int(sizes[p]) for p in batch.prompt_index[np.cumsum([0] + groups[:-1])]]
