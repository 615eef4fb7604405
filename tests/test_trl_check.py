"""The TRL bridge (chapter 14): TRL's own code against the book's, on one batch and on a short testbed run.

The tests marked ``trl`` feed one hand-made batch (left-padded 2- and 3-digit prompts, completions cut
off at L_max, a silent group, π_old moved so that the clip binds, a KL reference that differs from the
policy) to TRL's ``_generate_and_score_completions`` and ``_compute_loss`` and to the book's
``group_advantages`` and ``policy_loss``. Without TRL they are skipped, or fail under ``CI_STRICT=1``.
The mapping itself, which needs no TRL, is tests/test_trl_settings.py.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from stddial_book.bridges.trl_check import one_batch_check, trl_testbed_run
from stddial_book.bridges.trl_rewards import trl_reward_funcs
from stddial_book.bridges.trl_settings import TRL_STD_EPS, grpo_config, trl_equivalent_recipe
from stddial_book.rl.batches import encode_prompts
from stddial_book.rl.configs import TrainConfig
from stddial_book.rl.model import CharCodec, tiny_model
from stddial_book.rl.profiles import Profile
from stddial_book.rl.rollout import completion_logprobs
from stddial_book.rl.sampling import overlong_penalty
from stddial_book.rl.tasks import make_problem
from stddial_book.theory.identity import bessel_factor, group_std
from stddial_book.theory.recipes import DAPO, GRPO, PRESETS, group_advantages

# ----------------------------------------------------------------------------------- TRL's code against the book's


@pytest.fixture(scope="module")
def trl():
    try:
        import trl as module
    except ImportError:
        if os.environ.get("CI_STRICT") == "1":
            pytest.fail("TRL is not installed in a strict CI run: pip install -r bench/requirements-trl.txt")
        pytest.skip("TRL is not installed (pip install -r bench/requirements-trl.txt)")
    return module


G, L_MAX = 4, 10  # L_cache = round(0.2 * 10) = 2: DAPO's penalty band is lengths 9 and 10


@pytest.fixture(scope="module")
def batch():
    """Four groups of four: 2- and 3-digit prompts (left-padded together), cut-off completions, a silent group."""
    codec = CharCodec()
    prompts = [make_problem(57, 68, 2), make_problem(123, 456, 3), make_problem(5, 7, 2), make_problem(999, 1, 3)]
    texts = [
        ["521<eos>", "522<eos>", "5210000000", "1<eos>"],  # 57+68=125: one right, one cut off
        ["975<eos>", "975<eos>", "97500000<eos>", "0000000000"],  # 123+456=579: two right, one of length 9
        ["3<eos>", "22<eos>", "2<eos>", "111111111<eos>"],  # 5+7=12: silent, all wrong
        ["0001<eos>", "0001<eos>", "1000<eos>", "0001<eos>"],
    ]  # 999+1=1000: three right
    problems = [p for p in prompts for _ in range(G)]
    completions = [codec.encode(t) for group in texts for t in group]
    small = dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    policy = tiny_model(seed=1, **small)
    reference, old_model = copy.deepcopy(policy), copy.deepcopy(policy)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
        for p in old_model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=gen))
    prompt_ids, prompt_mask = encode_prompts(problems, codec)
    width = max(map(len, completions))
    ids = torch.full((len(completions), width), codec.pad_id)
    for row, c in enumerate(completions):
        ids[row, : len(c)] = torch.tensor(c)
    with torch.no_grad():
        old = completion_logprobs(old_model, prompt_ids, prompt_mask, ids, ids != codec.pad_id)
    assert not bool(prompt_mask.all())  # the batch is left-padded
    return dict(problems=problems, completions=completions, policy=policy, reference=reference, old=old)


def check(recipe, batch, tmp_path: Path, **kw):
    kw = {"old_logprobs": batch["old"], "ref_model": batch["reference"], **kw}
    return one_batch_check(
        recipe,
        batch["policy"],
        batch["problems"],
        batch["completions"],
        group_size=G,
        max_new_tokens=L_MAX,
        workdir=tmp_path / "work",
        **kw,
    )


@pytest.mark.trl
@pytest.mark.parametrize("key", sorted(PRESETS))
def test_trl_computes_the_books_update(trl, batch, tmp_path: Path, key: str) -> None:
    before = [p.detach().clone() for p in batch["policy"].parameters()]
    result = check(key, batch, tmp_path)
    assert result["advantages"] < 1e-6
    assert result["loss"] < 1e-6 * max(1.0, abs(result["loss_book"]))
    assert result["gradient"] < 1e-6 * result["gradient_scale"]
    assert result["gradient_scale"] > 0.01
    assert 0.05 < result["clip_fraction"] < 0.9  # π_old moved: the clip binds on some tokens, not all
    assert result["silent_fraction"] == 0.25
    if key == "grpo":
        assert result["kl"] > 1e-4  # the reference differs from the policy, so the KL term is live
    # TRL's frac_reward_zero_std counts groups whose shaped rewards agree: DAPO's length penalty spreads
    # the silent group (one of its wrong answers is 10 tokens long, penalty -1)
    assert result["frac_reward_zero_std"] == (0.0 if key == "dapo" else 0.25)
    assert all(torch.equal(p, q) for p, q in zip(batch["policy"].parameters(), before))  # the policy is untouched


@pytest.mark.trl
def test_trl_divides_by_bessels_std(trl, batch, tmp_path: Path) -> None:
    result = check("grpo", batch, tmp_path)
    rewards = result["rewards"].reshape(-1, G)
    ours = group_advantages(result["rewards"], G, GRPO).reshape(-1, G)  # the population std
    theirs = result["advantages_trl"].reshape(-1, G)
    mixed = rewards.min(axis=1) < rewards.max(axis=1)
    s = group_std(rewards[mixed], correction=1)
    ratio = theirs[mixed] / ours[mixed]
    np.testing.assert_allclose(ratio, (bessel_factor(G) * s / (s + TRL_STD_EPS))[:, None] * np.ones(G), rtol=1e-6)
    np.testing.assert_allclose(ratio, bessel_factor(G), rtol=3e-4)  # sqrt(3/4) = 0.866 at G = 4


@pytest.mark.trl
def test_trl_keeps_cut_off_samples_in_the_group_statistics(trl, batch, tmp_path: Path) -> None:
    result = check("dapo", batch, tmp_path)
    cut_off = np.array([len(c) == L_MAX and c[-1] != CharCodec().eos_id for c in batch["completions"]])
    assert cut_off.any()
    # the book's trainer leaves cut-off samples out of their group's mean and std; TRL does not
    trainer = group_advantages(result["rewards"], G, trl_equivalent_recipe(DAPO), valid=~cut_off)
    groups_with_cuts = cut_off.reshape(-1, G).any(axis=1).repeat(G)
    np.testing.assert_allclose(result["advantages_trl"][~groups_with_cuts], trainer[~groups_with_cuts], atol=1e-6)
    assert np.abs(result["advantages_trl"] - trainer)[groups_with_cuts & ~cut_off].max() > 0.1


@pytest.mark.trl
def test_trls_defaults_are_traps(trl, batch, tmp_path: Path) -> None:
    # TRL's default multiplies the k3 term by the ratio π_θ/π_old. At ratio 1 (π_old = π_θ, as in TRL with
    # one optimizer step per rollout) the loss keeps its value, but the ratio's gradient adds k3 · ∇log π
    biased = check("grpo", batch, tmp_path, old_logprobs=None, trl_overrides={"use_bias_correction_kl": True})
    assert biased["kl"] > 1e-4  # the reference differs from the policy
    assert biased["loss"] < 1e-6
    assert biased["gradient"] > 1e-3 * biased["gradient_scale"]
    # Dr. GRPO's advantage with TRL's default aggregation is not Dr. GRPO
    token_level = check("dr_grpo", batch, tmp_path, trl_overrides={"loss_type": "dapo"})
    assert token_level["loss"] > 1e-3 * abs(token_level["loss_book"])


@pytest.mark.trl
def test_trls_overlong_punishment_is_the_books(trl) -> None:
    from trl.rewards import get_soft_overlong_punishment  # a submodule: trl.rewards is set only once imported

    punish = get_soft_overlong_punishment(max_completion_len=L_MAX, soft_punish_cache=2)
    lengths = np.arange(1, L_MAX + 1)
    np.testing.assert_allclose(punish([[3] * n for n in lengths]), overlong_penalty(lengths, L_MAX, 2))
    funcs = trl_reward_funcs("dapo", max_new_tokens=L_MAX)
    assert len(funcs) == 2 and funcs[1]([[3] * 9]) == [-0.5]


@pytest.mark.trl
def test_grpo_config(trl, tmp_path: Path) -> None:
    config = grpo_config(TrainConfig(recipe="dr_grpo", sample_budget=512), tmp_path, use_cpu=True)
    assert isinstance(config, trl.GRPOConfig)
    assert (config.loss_type, config.scale_rewards, config.steps_per_generation, config.max_steps) == (
        "dr_grpo",
        "none",
        2,
        4,
    )
    assert (config.activation_checkpointing, config.bf16) == (False, False)
    exact = grpo_config(
        TrainConfig(recipe=trl_equivalent_recipe(GRPO), num_minibatches=1), tmp_path, exact=True, use_cpu=True
    )
    assert exact.beta == 0.04 and exact.use_bias_correction_kl is False
    # the traps chapter 14 and trl_settings rely on are GRPOConfig's defaults
    defaults = {f.name: f.default for f in dataclasses.fields(trl.GRPOConfig)}
    assert (defaults["loss_type"], defaults["scale_rewards"], defaults["use_bias_correction_kl"]) == (
        "dapo",
        "group",
        True,
    )
    assert (
        defaults["use_vllm"],
        defaults["vllm_importance_sampling_correction"],
        defaults["vllm_importance_sampling_mode"],
        defaults["vllm_importance_sampling_clip_max"],
    ) == (False, True, "sequence_mask", 3.0)  # what trl_gaps(..., use_vllm=True) says
    # following the message of exact=True gives a config that exact=True accepts, for every preset
    for _key, recipe in PRESETS.items():
        with pytest.raises(ValueError, match="cannot express") as info:
            grpo_config(TrainConfig(recipe=recipe), tmp_path, exact=True, use_cpu=True)
        message = str(info.value)
        if "trl_equivalent_recipe(recipe)" in message:
            recipe = trl_equivalent_recipe(recipe)
        if "overlong_filter=False" in message:
            recipe = recipe.replace(overlong_filter=False)
        minibatches = 1 if "num_minibatches=1" in message else TrainConfig().num_minibatches
        fixed = grpo_config(TrainConfig(recipe=recipe, num_minibatches=minibatches), tmp_path, exact=True, use_cpu=True)
        assert isinstance(fixed, trl.GRPOConfig) and fixed.steps_per_generation == 1


@pytest.mark.trl
def test_testbed_run(trl, tmp_path: Path) -> None:
    from safetensors.torch import save_model

    profile = Profile(
        "tiny",
        "cpu",
        "test-sized",
        model=dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64),
        task=dict(digits=(1,), num_train=40, num_heldout=8),
        train=dict(group_size=4, prompts_per_step=4, num_minibatches=2, lr=1e-3, max_new_tokens=4, pool_size=16),
    )
    sft = tmp_path / "sft"
    sft.mkdir()
    save_model(tiny_model(seed=0, **profile.model), str(sft / "model.safetensors"))
    run = trl_testbed_run(profile, "grpo", sft_dir=sft, rollout_batches=2, workdir=tmp_path / "trl")
    assert len(run["logs"]) == 2 and run["optimizer_steps"] == 4
    # TRL's share of silent groups in one generation batch: a whole number of its 4 groups
    shares = np.array([entry["frac_reward_zero_std"] for entry in run["logs"]]) * 4
    np.testing.assert_allclose(shares, np.round(shares), atol=1e-6)
    assert run["settings"]["generation_batch_size"] == 16
