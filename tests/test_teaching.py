"""The teaching code (stddial_book.teaching) against the engine it stands for.

Every reference function the chapters show is checked twice: on one case worked out by hand, and
against the engine's fast version on seeded random inputs (exact, or to float64 rounding), so the
short versions cannot drift from what the book runs.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from stddial_book.corpora.histograms import KHistogram, silent_fraction
from stddial_book.rl.batches import Batch
from stddial_book.rl.checkpoints import TrainState
from stddial_book.rl.configs import TrainConfig
from stddial_book.rl.gradcheck import build_group, flat_grad, identity_check, per_sample_scores
from stddial_book.rl.losses import _aggregate, policy_loss
from stddial_book.rl.model import CharCodec, tiny_model
from stddial_book.rl.rollout import completion_logprobs
from stddial_book.rl.sampling import DynamicSampler, nonsilent_groups
from stddial_book.rl.tasks import make_problem
from stddial_book.rl.update import update_policy
from stddial_book.teaching.advantages import dapo_advantages, dr_grpo_advantages, grpo_advantages
from stddial_book.teaching.aggregation import aggregate_loss
from stddial_book.teaching.dynamic_sampling import dynamic_sampling
from stddial_book.teaching.group_size import fidelity, g_star, smallest_group_size
from stddial_book.teaching.identity import identity_sides
from stddial_book.teaching.rl_step import policy_update, rl_step, sample_groups, token_logprobs
from stddial_book.teaching.silent_fraction import pool_silent_fraction
from stddial_book.teaching.surrogate import clipped_surrogate
from stddial_book.theory.group_size import gradient_fidelity, group_size_law, minimal_group_size
from stddial_book.theory.identity import update_weight
from stddial_book.theory.recipes import DAPO, DR_GRPO, GRPO, LOSS_AGGREGATIONS, group_advantages

CASES = 40  # seeded random cases per equivalence test
SQRT3 = math.sqrt(3.0)


def random_rewards(rng: np.random.Generator, kind: str) -> torch.Tensor:
    """(num_groups, G) float64 rewards: 0/1, ±1 or real-valued, with silent groups among the binary ones."""
    num_groups, G = int(rng.integers(1, 7)), int(rng.integers(2, 17))
    if kind == "real":
        return torch.from_numpy(rng.normal(size=(num_groups, G)))
    p = rng.choice([0.0, 0.1, 0.5, 0.9, 1.0], size=(num_groups, 1))
    correct = (rng.random((num_groups, G)) < p).astype(float)
    return torch.from_numpy(correct if kind == "0/1" else 2.0 * correct - 1.0)


# --- advantages ------------------------------------------------------------------------------


def test_advantages_by_hand() -> None:
    """k = 1 of G = 4: σ = √3/4, so GRPO's advantages are (3/4)/σ = √3 and −(1/4)/σ = −1/√3."""
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    assert rewards.std(correction=0).item() == pytest.approx(SQRT3 / 4)
    assert grpo_advantages(rewards)[0].tolist() == pytest.approx([SQRT3, -1 / SQRT3, -1 / SQRT3, -1 / SQRT3])
    assert dr_grpo_advantages(rewards)[0].tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25])
    # DAPO: the same group with ±1 rewards beside a silent one (all right): the silent group is dropped
    both = torch.tensor([[1.0, -1.0, -1.0, -1.0], [1.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
    advantages, keep = dapo_advantages(both)
    assert keep.tolist() == [True, False]
    assert advantages[0].tolist() == pytest.approx([SQRT3, -1 / SQRT3, -1 / SQRT3, -1 / SQRT3]) and len(advantages) == 1
    assert grpo_advantages(both)[1].tolist() == [0.0] * 4  # GRPO keeps it, with A = 0 (never 0/0)


@pytest.mark.parametrize("kind", ["0/1", "±1", "real"])
def test_advantages_match_group_advantages(kind: str) -> None:
    """The three teaching versions against the engine's ``group_advantages`` (flat batch, presets)."""
    rng = np.random.default_rng(0)
    for _ in range(CASES):
        rewards = random_rewards(rng, kind)
        G = rewards.shape[1]
        flat = rewards.reshape(-1)
        for teaching, recipe in ((grpo_advantages, GRPO), (dr_grpo_advantages, DR_GRPO)):
            engine = group_advantages(flat, G, recipe).reshape(rewards.shape)
            torch.testing.assert_close(teaching(rewards), engine, rtol=0, atol=1e-12)
        advantages, keep = dapo_advantages(rewards)
        if kind != "real":  # DAPO's filter reads correctness; for binary rewards σ > 0 is 0 < k < G
            correct = flat.numpy() if kind == "0/1" else (flat.numpy() + 1.0) / 2.0
            assert keep.tolist() == nonsilent_groups(correct, G).tolist()
        engine = group_advantages(rewards[keep].reshape(-1), G, DAPO) if keep.any() else torch.zeros(0)
        torch.testing.assert_close(advantages.reshape(-1), engine.to(torch.float64), rtol=0, atol=1e-12)


# --- aggregation and the clipped surrogate ----------------------------------------------------


def random_tokens(rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Per-token values (B, T) and a mask with 1..L_max tokens a row; returns L_max too."""
    B, T = int(rng.integers(1, 9)), int(rng.integers(1, 12))
    lengths = rng.integers(1, T + 1, size=B)
    mask = torch.from_numpy(np.arange(T)[None, :] < lengths[:, None])
    values = torch.from_numpy(rng.normal(size=(B, T)))
    return values, mask, T + int(rng.integers(0, 4))


def test_aggregation_by_hand() -> None:
    """Two sequences, of 2 and 1 tokens, with per-token losses (1, 2) and (3); L_max = 4."""
    per_token = torch.tensor([[1.0, 2.0, 99.0], [3.0, 99.0, 99.0]])  # 99: padding, never counted
    mask = torch.tensor([[True, True, False], [True, False, False]])
    assert aggregate_loss(per_token, mask, "seq-mean-token-mean").item() == pytest.approx((1.5 + 3.0) / 2)
    assert aggregate_loss(per_token, mask, "seq-mean-token-sum-norm", 4).item() == pytest.approx((3 / 4 + 3 / 4) / 2)
    assert aggregate_loss(per_token, mask, "token-mean").item() == pytest.approx(6.0 / 3)
    with pytest.raises(ValueError, match="unknown loss_aggregation"):
        aggregate_loss(per_token, mask, "sum")


@pytest.mark.parametrize("loss_aggregation", LOSS_AGGREGATIONS)
def test_aggregation_matches_the_engine(loss_aggregation: str) -> None:
    """``aggregate_loss`` against the engine's ``_aggregate`` (one optimizer step in one piece)."""
    rng = np.random.default_rng(1)
    recipe = GRPO.replace(loss_aggregation=loss_aggregation)
    for _ in range(CASES):
        per_token, mask, max_new_tokens = random_tokens(rng)
        engine = _aggregate(
            torch.where(mask, per_token, 0.0), mask, mask.sum(dim=1), recipe, max_new_tokens, None, None
        )
        teaching = aggregate_loss(per_token, mask, loss_aggregation, max_new_tokens)
        assert teaching.item() == pytest.approx(engine.item(), rel=1e-12, abs=1e-12)


def test_clipped_surrogate_by_hand() -> None:
    """ε_low = 0.2, ε_high = 0.28: ρ = 1.5 with A = +1 is clipped to 1.28; ρ = 0.5 with A = −1 to 0.8;
    ρ = 1.5 with A = −1 is not clipped (the min keeps the worse, unclipped term)."""
    ratio = torch.tensor([[1.5], [0.5], [1.5]], dtype=torch.float64)
    advantages = torch.tensor([1.0, -1.0, -1.0], dtype=torch.float64)
    loss = clipped_surrogate(ratio.log(), torch.zeros_like(ratio), advantages, 0.2, 0.28)
    assert loss[:, 0].tolist() == pytest.approx([-1.28, 0.8, 1.5])


@pytest.mark.parametrize("recipe", [GRPO, DR_GRPO, DAPO], ids=lambda r: r.name)
def test_surrogate_and_aggregation_are_the_engines_policy_loss(recipe) -> None:
    """With β = 0 and no truncated sample, ``policy_loss`` is ``clipped_surrogate`` then
    ``aggregate_loss``: the same loss and the same gradient in the log-probs, ratios far from 1
    included (both sides of the clip)."""
    rng = np.random.default_rng(2)
    recipe = recipe.replace(kl_coef=0.0)
    for _ in range(CASES):
        old, mask, max_new_tokens = random_tokens(rng)
        advantages = torch.from_numpy(rng.normal(size=old.shape[0]))
        shift = torch.from_numpy(rng.normal(scale=0.4, size=old.shape))
        logprobs = [(old + shift).clone().requires_grad_(True) for _ in range(2)]
        engine = policy_loss(logprobs[0], old, advantages, mask, recipe, max_new_tokens=max_new_tokens).loss
        per_token = clipped_surrogate(logprobs[1], old, advantages, recipe.clip_low, recipe.clip_high)
        teaching = aggregate_loss(per_token, mask, recipe.loss_aggregation, max_new_tokens)
        assert teaching.item() == pytest.approx(engine.item(), rel=1e-12, abs=1e-12)
        engine.backward()
        teaching.backward()
        torch.testing.assert_close(logprobs[1].grad, logprobs[0].grad, rtol=0, atol=1e-12)


# --- the identity -----------------------------------------------------------------------------


def test_identity_by_hand() -> None:
    """k = 1 of G = 4, one-dimensional scores 1 for the right sample and 0 for the wrong ones:
    (1/4)(√3 · 1) = σ (ḡ₊ − ḡ₋) = (√3/4)(1 − 0); Dr. GRPO's weight is σ² = 3/16."""
    scores = torch.tensor([[1.0], [0.0], [0.0], [0.0]], dtype=torch.float64)
    correct = torch.tensor([True, False, False, False])
    rewards = correct[None].to(torch.float64)
    lhs, rhs = identity_sides(grpo_advantages(rewards)[0], scores, correct)
    assert lhs.item() == pytest.approx(SQRT3 / 4) and rhs.item() == pytest.approx(SQRT3 / 4)
    lhs, rhs = identity_sides(dr_grpo_advantages(rewards)[0], scores, correct, scale_std=False)
    assert lhs.item() == pytest.approx(3 / 16) and rhs.item() == pytest.approx(3 / 16)


def test_identity_on_random_scores_matches_the_engines_weight() -> None:
    """On random scores both sides agree, the left one built from the engine's advantages and the
    right one from its closed-form weight ``update_weight`` (σ for GRPO, σ² for Dr. GRPO)."""
    rng = np.random.default_rng(3)
    for _ in range(CASES):
        G, D = int(rng.integers(2, 17)), int(rng.integers(1, 6))
        k = int(rng.integers(1, G))
        correct = torch.from_numpy(rng.permutation(np.arange(G) < k))
        scores = torch.from_numpy(rng.normal(size=(G, D)))
        gap = scores[correct].mean(0) - scores[~correct].mean(0)
        for recipe, scale_std in ((GRPO, True), (DR_GRPO, False)):
            advantages = group_advantages(correct.to(torch.float64), G, recipe)
            lhs, rhs = identity_sides(advantages, scores, correct, scale_std)
            torch.testing.assert_close(lhs, rhs, rtol=0, atol=1e-12)
            torch.testing.assert_close(rhs, float(update_weight(k / G, recipe)) * gap, rtol=0, atol=1e-12)


def test_identity_on_real_gradients_is_the_engines() -> None:
    """A real group of a float64 transformer: the left side, (1/G) Σ Aᵢ gᵢ from the engine's
    per-sample scores, is minus the gradient of the engine's GRPO loss at ratio 1 (β = 0), to
    float64 rounding, and the engine's own ``identity_check`` agrees."""
    model = tiny_model(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, dtype=torch.float64)
    group = build_group(model, make_problem(57, 68, 2), 6, 2, 6, torch.Generator().manual_seed(0))
    recipe = GRPO.replace(kl_coef=0.0)
    scores = per_sample_scores(model, group, recipe, 6)
    correct = torch.as_tensor(group.rewards == 1)
    advantages = grpo_advantages(correct[None].to(torch.float64))[0]
    lhs, rhs = identity_sides(advantages, scores, correct)
    logp = completion_logprobs(model, group.prompt_ids, group.prompt_mask, group.completion_ids, group.mask)
    loss = policy_loss(logp, logp.detach(), advantages, group.mask, recipe, max_new_tokens=6).loss
    gradient = -flat_grad(loss, [p for p in model.parameters() if p.requires_grad])
    assert float((lhs - gradient).norm() / gradient.norm()) < 1e-10
    assert float((rhs - gradient).norm() / gradient.norm()) < 1e-10
    assert identity_check(model, group, recipe, 6)["rel_error"] < 1e-10


# --- one RL step ------------------------------------------------------------------------------


def small_model(seed: int = 0):
    return tiny_model(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, seed=seed, dtype=torch.float64)


def prompts(num_prompts: int) -> torch.Tensor:
    """Two-digit problems: every prompt has the same length, as the teaching sampler assumes."""
    codec = CharCodec()
    return torch.tensor([codec.encode(make_problem(10 + 7 * i, 31 + 5 * i, 2).prompt) for i in range(num_prompts)])


def engine_batch(batch: dict[str, torch.Tensor], correct: np.ndarray, recipe, G: int) -> Batch:
    """The teaching step's dict as the engine's ``Batch`` (rewards in the recipe's values)."""
    rows = len(correct)
    return Batch(
        batch["prompt_ids"],
        torch.ones_like(batch["prompt_ids"], dtype=torch.bool),
        batch["completion_ids"],
        batch["mask"],
        batch["truncated"],
        batch["logprobs"],
        correct,
        np.where(correct > 0, recipe.reward_correct, recipe.reward_wrong),
        np.array(["D2"] * rows),
        np.arange(rows) // G,
    )


def step_config(recipe, G: int, num_groups: int, max_grad_norm: float = 1.0) -> TrainConfig:
    """The engine's settings for one step that the teaching step can match: one minibatch (the whole
    batch, one optimizer step), no identity check, temperature 1; ``recipe`` comes with β = 0 (no
    reference model) and DAPO's overlong filter and penalty off (see ``matched``)."""
    return TrainConfig(
        recipe=recipe,
        group_size=G,
        prompts_per_step=num_groups,
        num_minibatches=1,
        max_new_tokens=6,
        max_grad_norm=max_grad_norm,
        identity_check_every=0,
    )


def matched(recipe):
    """The recipe without the engine's extra machinery the teaching step leaves out."""
    return recipe.replace(kl_coef=0.0, overlong_filter=False, overlong_penalty=False)


def engine_step(model, batch: Batch, config: TrainConfig, lr: float) -> None:
    """The engine's advantages and ``update_policy`` on ``batch`` with plain SGD (``ref_model=None``,
    ``check_identity=False``)."""
    advantages = group_advantages(batch.rewards, config.group_size, config.recipe)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    update_policy(model, optimizer, batch, advantages, config, TrainState(0, "cpu"), None, check_identity=False)


def parameter_change(before, after) -> torch.Tensor:
    return torch.cat([(a - b).detach().reshape(-1) for a, b in zip(after.parameters(), before.parameters())])


def test_sampler_records_the_policys_logprobs() -> None:
    """``sample_groups``: G contiguous rows a prompt, padding after EOS masked out, and the recorded
    log π_old equal to ``token_logprobs`` and to the engine's ``completion_logprobs`` of the same
    tokens (the ratio starts at 1)."""
    model, codec = small_model(), CharCodec()
    ids = prompts(3)
    batch = sample_groups(model, ids, 4, 6, codec, torch.Generator().manual_seed(1))
    assert batch["completion_ids"].shape[0] == 12 and torch.equal(batch["prompt_ids"], ids.repeat_interleave(4, 0))
    ended = (batch["completion_ids"] == codec.eos_id) & batch["mask"]
    assert torch.equal(batch["truncated"], ~ended.any(dim=1))
    assert torch.equal(batch["mask"].sum(dim=1), torch.where(ended.any(dim=1), ended.int().argmax(dim=1) + 1, 6))
    with torch.no_grad():
        mine = token_logprobs(model, batch["prompt_ids"], batch["completion_ids"], batch["mask"])
        engine = completion_logprobs(
            model,
            batch["prompt_ids"],
            torch.ones_like(batch["prompt_ids"], dtype=torch.bool),
            batch["completion_ids"],
            batch["mask"],
        )
    torch.testing.assert_close(batch["logprobs"], mine, rtol=0, atol=1e-10)
    torch.testing.assert_close(mine, engine, rtol=0, atol=1e-10)


@pytest.mark.parametrize("max_grad_norm", [1e6, 1e-3, 0.0], ids=["unclipped", "norm-clipped", "no-clip"])
@pytest.mark.parametrize("recipe", [GRPO, DR_GRPO, DAPO], ids=lambda r: r.name)
def test_policy_update_moves_the_weights_as_the_engines_update(recipe, max_grad_norm: float) -> None:
    """``policy_update`` and the engine's ``update_policy`` on the same fixed batch (sampled from the model
    itself, random correctness, the engine's advantages) change every parameter alike to 1e-6
    (float64: in fact to about 1e-15). The engine is set to match (``step_config``, ``matched``):
    β = 0 and no reference model, one minibatch, no identity check, DAPO's overlong filter and
    penalty off, plain SGD; the gradient-norm clip is the same in both, and binds in one case."""
    model, codec, G, lr = small_model(), CharCodec(), 4, 0.5
    config = step_config(matched(recipe), G, 4, max_grad_norm)
    batch = sample_groups(model, prompts(4), G, 6, codec, torch.Generator().manual_seed(2))
    correct = (np.random.default_rng(3).random(16) < 0.5).astype(float)
    whole = engine_batch(batch, correct, config.recipe, G)
    engine_model, teaching_model = copy.deepcopy(model), copy.deepcopy(model)
    engine_step(engine_model, whole, config, lr)
    advantages = torch.as_tensor(group_advantages(whole.rewards, G, config.recipe))
    policy_update(teaching_model, torch.optim.SGD(teaching_model.parameters(), lr=lr), batch, advantages, config)
    mine, engine = parameter_change(model, teaching_model), parameter_change(model, engine_model)
    assert engine.abs().max() > 1e-5  # the step moved the weights
    torch.testing.assert_close(mine, engine, rtol=0, atol=1e-6)
    assert float((mine - engine).abs().max()) < 1e-12


@pytest.mark.parametrize("recipe", [GRPO, DR_GRPO, DAPO], ids=lambda r: r.name)
def test_rl_step_is_the_engines_step(recipe) -> None:
    """The whole teaching step (sample, verify, advantages, DAPO's filter, update) against the engine
    on the batch the step sampled: the engine's ``group_advantages``, DAPO's kept groups by
    ``nonsilent_groups``, and ``update_policy`` set as in ``step_config``. The first prompt's group is
    made silent, so DAPO's filter has something to drop."""
    model, codec, G, lr = small_model(seed=1), CharCodec(), 4, 0.5

    def reward_fn(completion_ids, mask):  # group 0 all right; the others by the first token's parity
        correct = completion_ids[:, 0] % 2 == 0
        correct[:G] = True
        return correct

    teaching_model, engine_model = copy.deepcopy(model), copy.deepcopy(model)
    config = step_config(matched(recipe), G, 5)
    torch.manual_seed(4)
    loss = rl_step(
        teaching_model, torch.optim.SGD(teaching_model.parameters(), lr=lr), prompts(5), reward_fn, config, codec
    )
    torch.manual_seed(4)
    batch = sample_groups(model, prompts(5), G, 6, codec)
    correct = reward_fn(batch["completion_ids"], batch["mask"]).numpy().astype(float)
    whole = engine_batch(batch, correct, config.recipe, G)
    kept = np.flatnonzero(nonsilent_groups(correct, G))
    assert 0 < len(kept) < 5  # some groups silent, some not
    if recipe.dynamic_sampling:
        whole = whole[(kept[:, None] * G + np.arange(G)).reshape(-1)]
        config = step_config(config.recipe, G, len(kept))
    engine_step(engine_model, whole, config, lr)
    assert loss is not None
    torch.testing.assert_close(
        parameter_change(model, teaching_model), parameter_change(model, engine_model), rtol=0, atol=1e-6
    )


def test_rl_step_with_only_silent_groups_learns_nothing() -> None:
    """By hand: when every group is silent, DAPO's step has nothing left (None) and GRPO's has
    A = 0 everywhere, a zero loss and a zero gradient; neither moves the weights."""
    codec = CharCodec()
    for recipe, expected in ((DAPO, None), (GRPO, 0.0)):
        model = small_model()
        before = copy.deepcopy(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
        config = step_config(recipe, 4, 2)
        loss = rl_step(model, optimizer, prompts(2), lambda ids, mask: torch.ones(len(ids)), config, codec)
        assert loss == expected
        assert float(parameter_change(before, model).abs().max()) == 0.0


# --- dynamic sampling -------------------------------------------------------------------------


def scripted(rounds: list[list[int]], G: int):
    """A draw that returns the given rounds in turn: each group all right (G), all wrong (0) or mixed
    (any k in between); the samples are their running numbers."""
    state = {"next": 0}

    def draw(round_index: int, missing: int):
        ks = rounds[round_index] if round_index < len(rounds) else []
        correct = np.array([[1] * k + [0] * (G - k) for k in ks]).reshape(-1)
        samples = np.arange(state["next"], state["next"] + len(correct))
        state["next"] += len(correct)
        return samples, correct

    return draw


def test_dynamic_sampling_by_hand() -> None:
    """Two groups of 4 wanted. Round 0: silent, mixed, silent; round 1 (one missing) returns two
    mixed groups, the second a surplus. Kept: samples 4-7 and 12-15; 20 generated."""
    kept, generated = dynamic_sampling(scripted([[0, 2, 4], [1, 3]], 4), 2, 4)
    assert [k.tolist() for k in kept] == [[4, 5, 6, 7], [12, 13, 14, 15]] and generated == 20
    kept, generated = dynamic_sampling(scripted([[0], [4]], 4), 2, 4, max_rounds=2)  # capped: short
    assert kept == [] and generated == 8


def test_dynamic_sampling_matches_the_engines_sampler() -> None:
    """Random rounds (silent groups, surplus groups, empty rounds, the round cap) through
    ``dynamic_sampling`` and the engine's ``DynamicSampler.fill``: the same samples kept, in the same
    order, and the same number generated."""
    rng = np.random.default_rng(5)
    for _ in range(CASES * 5):
        G, num_groups, max_rounds = int(rng.integers(2, 9)), int(rng.integers(1, 7)), int(rng.integers(1, 6))
        rounds = []
        for _ in range(max_rounds):
            size = 0 if rng.random() < 0.1 else int(rng.integers(1, num_groups + 3))
            silent = rng.random(size) < 0.5
            rounds.append([int(rng.choice([0, G])) if s else int(rng.integers(1, G)) for s in silent])
        kept, generated = dynamic_sampling(scripted(rounds, G), num_groups, G, max_rounds)
        parts, cost = DynamicSampler(num_groups, G, max_rounds).fill(scripted(rounds, G))
        mine = np.concatenate(kept) if kept else np.zeros(0, dtype=int)
        engine = np.concatenate(parts) if parts else np.zeros(0, dtype=int)
        assert mine.tolist() == engine.tolist()
        assert generated == cost.samples_generated
        assert (len(kept) < num_groups) == cost.hit_cap


# --- the silent fraction of a pool ------------------------------------------------------------


def test_pool_silent_fraction_by_hand() -> None:
    """Three prompts solved 0, 1 and 2 times of n = 2, groups of G = 2. Fresh draws: P(silent) is
    1, 1/2 and 1, mean 5/6. Subsampling both stored samples: only the split prompt is mixed, 2/3."""
    assert pool_silent_fraction([0, 1, 2], 2, 2) == pytest.approx(5 / 6)
    assert pool_silent_fraction([0, 1, 2], 2, 2, subsample=True) == pytest.approx(2 / 3)


@pytest.mark.parametrize("subsample", [False, True], ids=["bernoulli", "hypergeometric"])
def test_pool_silent_fraction_matches_the_histogram_version(subsample: bool) -> None:
    """Against the engine's ``silent_fraction`` on the pool's k-of-n histogram."""
    rng = np.random.default_rng(6)
    for _ in range(CASES):
        n = int(rng.integers(1, 70))
        num_correct = rng.binomial(n, rng.beta(0.5, 0.5, size=int(rng.integers(1, 300))))
        G = int(rng.integers(1, n + 1)) if subsample else int(rng.integers(1, 80))
        hist = KHistogram(n, np.bincount(num_correct, minlength=n + 1))
        engine = silent_fraction(hist, G, "hypergeometric" if subsample else "bernoulli")[0]
        assert pool_silent_fraction(num_correct, n, G, subsample) == pytest.approx(engine, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("subsample", [False, True], ids=["bernoulli", "hypergeometric"])
def test_pool_silent_fraction_equals_scipy(subsample: bool) -> None:
    """The formula the chapter shows (``math.comb`` ratios, or p^G + (1 − p)^G) equals the silent
    outcomes' probability from ``scipy.stats.hypergeom`` (G of the n stored samples) or
    ``scipy.stats.binom`` (fresh draws at p = k/n)."""
    from scipy.stats import binom, hypergeom

    rng = np.random.default_rng(35)
    for _ in range(CASES):
        n = int(rng.integers(1, 70))
        k = rng.binomial(n, rng.beta(0.5, 0.5, size=int(rng.integers(1, 50))))
        G = int(rng.integers(1, n + 1)) if subsample else int(rng.integers(1, 80))
        dist = hypergeom(n, k, G) if subsample else binom(G, k / n)
        expected = float(np.mean(dist.pmf(0) + dist.pmf(G)))
        assert pool_silent_fraction(k, n, G, subsample) == pytest.approx(expected, rel=1e-12, abs=1e-15)


# --- the group-size law -----------------------------------------------------------------------


def test_group_size_by_hand() -> None:
    """G*(0.05, 1/2) = 1/(8 · 0.05 · 1/4) = 10. At p = 1/2 and G = 2, σ̂ is 1/2 for k = 1
    (probability 1/2) and 0 otherwise: E[σ̂] = 1/4 and φ = (1/4)/(1/2) = 1/2. At G = 3, σ̂ = √2/3
    for k = 1 or 2 (probability 3/4): E[σ̂] = √2/4 and φ = √2/2 ≈ 0.71. So fidelity 0.6
    (ε = 0.4) first takes G = 3."""
    assert g_star(0.05, 0.5) == pytest.approx(10.0)
    assert fidelity(0.5, 2) == pytest.approx(0.5)
    assert fidelity(0.5, 3) == pytest.approx(math.sqrt(2) / 2)
    assert smallest_group_size(0.4, 0.5) == 3
    with pytest.raises(ValueError, match="no G <= 3"):
        smallest_group_size(0.01, 0.5, max_group_size=3)


def test_group_size_matches_the_engine() -> None:
    """``g_star``, ``fidelity`` and ``smallest_group_size`` against ``group_size_law``,
    ``gradient_fidelity`` and ``minimal_group_size`` (which bisects instead of scanning)."""
    rng = np.random.default_rng(7)
    for _ in range(CASES):
        eps, p = float(rng.uniform(0.02, 0.3)), float(rng.uniform(0.05, 0.95))
        G = int(rng.integers(2, 400))
        assert g_star(eps, p) == pytest.approx(float(group_size_law(eps, p)), rel=1e-12)
        assert fidelity(p, G) == pytest.approx(float(gradient_fidelity(p, G)), rel=1e-10)
        assert smallest_group_size(eps, p) == minimal_group_size(eps, p)


# --- seed statistics (chapter 13) -------------------------------------------------------------


def test_welch_t_by_hand_and_against_scipy() -> None:
    """a = (1, 2, 3), b = (0, 0, 3): means 2 and 1, variances 1 and 3, se² = 1/3 + 1 = 4/3, so
    t = 1/√(4/3) = √3/2 and ν = (4/3)² / ((1/3)²/2 + 1²/2) = 3.2; then seeded random seeds against
    scipy.stats.ttest_ind(equal_var=False) and the engine's welch."""
    from scipy import stats

    from stddial_book.experiments.statistics import welch
    from stddial_book.teaching.seed_statistics import welch_t

    hand = welch_t([1.0, 2.0, 3.0], [0.0, 0.0, 3.0])
    assert hand["t"] == pytest.approx(math.sqrt(3) / 2) and hand["df"] == pytest.approx(3.2)
    rng = np.random.default_rng(11)
    for _ in range(CASES):
        a = rng.normal(rng.normal(), rng.uniform(0.1, 2), int(rng.integers(2, 13)))
        b = rng.normal(rng.normal(), rng.uniform(0.1, 2), int(rng.integers(2, 13)))
        mine, scipy_test, engine = welch_t(a, b), stats.ttest_ind(a, b, equal_var=False), welch(a, b)
        assert mine["t"] == pytest.approx(scipy_test.statistic, rel=1e-10)
        assert mine["p"] == pytest.approx(scipy_test.pvalue, rel=1e-9)
        assert mine["df"] == pytest.approx(engine["df"], rel=1e-10) and mine["se"] == pytest.approx(engine["se"])


def test_pool_cells_by_hand_and_against_the_engine() -> None:
    """Two cells, differences 0 and 3 with squared standard errors 1 and 2: weights 1 and 1/2, pooled
    (0 + 1.5)/1.5 = 1, se 1/√1.5, Q = 1·1 + 0.5·4 = 3 on 1 df, I² = 2/3; then seeded random cells
    against the engine's inverse_variance and Cochran's p against scipy.stats.chi2."""
    from scipy import stats

    from stddial_book.experiments.ablation.pooled import inverse_variance
    from stddial_book.teaching.seed_statistics import pool_cells

    hand = pool_cells([0.0, 3.0], [1.0, 2.0])
    assert hand["difference"] == pytest.approx(1.0) and hand["se"] == pytest.approx(1 / math.sqrt(1.5))
    assert hand["q"] == pytest.approx(3.0) and hand["i2"] == pytest.approx(2 / 3)
    assert hand["q_p"] == pytest.approx(stats.chi2.sf(3.0, 1))
    rng = np.random.default_rng(12)
    for _ in range(CASES):
        cells = int(rng.integers(2, 10))
        d, v = rng.normal(size=cells), rng.uniform(0.01, 1, cells)
        mine, engine = pool_cells(d, v), inverse_variance(d, v)
        for key in ("difference", "se", "q", "q_p", "i2"):
            assert mine[key] == pytest.approx(engine[key], rel=1e-12, abs=1e-15), key


# --- the dial on a generation batch (chapter 15) ----------------------------------------------


def test_batch_dial_by_hand_and_against_the_callbacks_engine() -> None:
    """Three groups of 4: k = 0 (silent, wrong), 2 (σ = 1/2) and 4 (silent, right); then seeded random
    batches against bridges.lm_diagnostics.batch_diagnostics, which the DialDiagnostics callback runs."""
    from stddial_book.bridges.lm_diagnostics import batch_diagnostics
    from stddial_book.teaching.dial_batch import batch_dial

    passed = [0, 0, 0, 0, 1, 0, 1, 0, 1, 1, 1, 1]
    advantages = [0, 0, 0, 0, 1, -1, 1, -1, 0, 0, 0, 0]
    hand = batch_dial(passed, advantages, 4)
    assert hand["silent_wrong"] == pytest.approx(1 / 3) and hand["silent_right"] == pytest.approx(1 / 3)
    assert hand["sigma_mean"] == pytest.approx(0.5 / 3) and hand["mass"] == 4 and hand["mass_in_silent"] == 0
    rng = np.random.default_rng(13)
    for _ in range(CASES):
        G, groups = int(rng.integers(2, 17)), int(rng.integers(1, 9))
        correct = rng.random((groups, G)) < rng.choice([0.0, 0.2, 0.5, 1.0], size=(groups, 1))
        rewards = correct.astype(float).reshape(-1)
        adv = np.asarray(group_advantages(rewards, G, GRPO))
        mine, engine = (
            batch_dial(correct.reshape(-1), adv, G),
            batch_diagnostics(correct.reshape(-1), rewards, adv, G, "grpo"),
        )
        assert mine["silent_wrong"] + mine["silent_right"] == pytest.approx(engine["silent_fraction"])
        assert mine["silent_wrong"] == pytest.approx(engine["k_counts"][0] / engine["groups"])
        assert mine["sigma_mean"] == pytest.approx(engine["sigma_mean"], rel=1e-12)
        assert mine["mass_in_silent"] == pytest.approx(engine["mass_in_silent"], abs=1e-12)
