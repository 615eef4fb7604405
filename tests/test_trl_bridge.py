"""The TRL bridge (chapter 14): the mapping as data (no TRL needed), and TRL's own code against the book's.

The tests marked ``trl`` feed one hand-made batch (left-padded 2- and 3-digit prompts, completions cut
off at L_max, a silent group, π_old moved so that the clip binds, a KL reference that differs from the
policy) to TRL's ``_generate_and_score_completions`` and ``_compute_loss`` and to the book's
``group_advantages`` and ``policy_loss``. Without TRL they are skipped, or fail under ``CI_STRICT=1``.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from stddial_book.bridges.trl_check import one_batch_check, trl_testbed_run
from stddial_book.bridges.trl_rewards import trl_reward_funcs
from stddial_book.bridges.trl_settings import (
    TRL_STD_EPS,
    grpo_config,
    reward_settings,
    trl_equivalent_recipe,
    trl_gaps,
    trl_settings,
    trl_settings_for,
)
from stddial_book.rl.batches import encode_prompts
from stddial_book.rl.configs import TrainConfig
from stddial_book.rl.model import CharCodec, tiny_model
from stddial_book.rl.profiles import Profile
from stddial_book.rl.rollout import completion_logprobs
from stddial_book.rl.sampling import overlong_penalty
from stddial_book.rl.tasks import make_problem
from stddial_book.theory.identity import bessel_factor, group_std
from stddial_book.theory.recipes import DAPO, DR_GRPO, GRPO, PRESETS, group_advantages

# ----------------------------------------------------------------------------------- the mapping, no TRL

OBJECTIVE = {  # per preset: the GRPOConfig settings of the objective (DESIGN §9)
    "grpo": dict(
        scale_rewards="group",
        loss_type="grpo",
        epsilon=0.2,
        epsilon_high=0.2,
        beta=0.04,
        mask_truncated_completions=False,
    ),
    "dr_grpo": dict(
        scale_rewards="none",
        loss_type="dr_grpo",
        epsilon=0.2,
        epsilon_high=0.2,
        beta=0.0,
        mask_truncated_completions=False,
    ),
    "dapo": dict(
        scale_rewards="group",
        loss_type="dapo",
        epsilon=0.2,
        epsilon_high=0.28,
        beta=0.0,
        mask_truncated_completions=True,
    ),
}


@pytest.mark.parametrize("key", sorted(PRESETS))
def test_preset_settings(key: str) -> None:
    settings = trl_settings(key, group_size=8, max_new_tokens=8)
    assert {k: settings[k] for k in OBJECTIVE[key]} == OBJECTIVE[key]
    assert settings["use_bias_correction_kl"] is False  # TRL's default multiplies the k3 term by the ratio
    assert (settings["num_generations"], settings["max_completion_length"]) == (8, 8)
    assert (settings["top_k"], settings["top_p"], settings["temperature"]) == (0, 1.0, 1.0)
    # the testbed's schedule: 32 prompts x 8 = 256 completions, two optimizer steps of 128, each rollout used
    # once; by default 8 completions a pass (TRL's own per-device default), 16 passes accumulated a step
    assert [
        settings[k]
        for k in (
            "generation_batch_size",
            "per_device_train_batch_size",
            "gradient_accumulation_steps",
            "num_iterations",
        )
    ] == [256, 8, 16, 1]
    assert trl_settings(PRESETS[key], group_size=8, max_new_tokens=8) == settings


def test_schedule_micro_batches_and_processes() -> None:
    s = trl_settings("grpo", group_size=4, max_new_tokens=8, prompts_per_step=16, num_minibatches=4, micro_batch_size=8)
    assert (s["generation_batch_size"], s["per_device_train_batch_size"], s["gradient_accumulation_steps"]) == (
        64,
        8,
        2,
    )
    s = trl_settings(
        "grpo",
        group_size=4,
        max_new_tokens=8,
        prompts_per_step=16,
        num_minibatches=2,
        micro_batch_size=32,
        num_processes=2,
    )
    assert (s["per_device_train_batch_size"], s["gradient_accumulation_steps"]) == (16, 1)
    # TRL's steps_per_generation = generation batch / (per device x processes) = optimizer steps x accumulation
    assert s["generation_batch_size"] // (s["per_device_train_batch_size"] * 2) == 2 * s["gradient_accumulation_steps"]


@pytest.mark.parametrize(
    "group_size, prompts_per_step, num_minibatches, num_processes, per_device, accumulation",
    [
        (12, 32, 1, 1, 8, 48),  # 384 completions a step: 8 a pass, not 384
        (12, 32, 2, 1, 8, 24),
        (7, 5, 1, 1, 7, 5),  # 35 a step: the largest divisor under 8 is 7
        (8, 32, 2, 2, 8, 8),  # 64 a process
        (3, 1, 1, 1, 3, 1),  # a step smaller than 8 goes in one pass
        (37, 1, 1, 1, 1, 37),  # a prime step: one sample a pass
    ],
)
def test_the_default_per_device_batch_fits(
    group_size: int, prompts_per_step: int, num_minibatches: int, num_processes: int, per_device: int, accumulation: int
) -> None:
    """Without micro_batch_size a pass holds at most DEFAULT_PER_DEVICE_BATCH samples a device (TRL's own
    default), the largest divisor of the process's share of the step, and the rest is accumulated."""
    from stddial_book.bridges.trl_settings import DEFAULT_PER_DEVICE_BATCH

    s = trl_settings(
        "grpo",
        group_size=group_size,
        max_new_tokens=8,
        prompts_per_step=prompts_per_step,
        num_minibatches=num_minibatches,
        num_processes=num_processes,
    )
    assert (s["per_device_train_batch_size"], s["gradient_accumulation_steps"]) == (per_device, accumulation)
    assert s["per_device_train_batch_size"] <= DEFAULT_PER_DEVICE_BATCH
    step = prompts_per_step * group_size // num_minibatches
    assert s["per_device_train_batch_size"] * num_processes * s["gradient_accumulation_steps"] == step


def test_an_optimizer_step_that_does_not_split_over_the_processes_is_refused() -> None:
    with pytest.raises(ValueError, match="does not split over num_processes=3"):
        trl_settings("grpo", group_size=4, max_new_tokens=8, prompts_per_step=2, num_minibatches=1, num_processes=3)


def test_a_train_config_keeps_its_whole_step_in_one_pass() -> None:
    """trl_settings_for mirrors the book's trainer, whose micro_batch_size None is the whole optimizer step."""
    full = trl_settings_for(TrainConfig(recipe="grpo", group_size=8, prompts_per_step=32, num_minibatches=2))
    assert (full["per_device_train_batch_size"], full["gradient_accumulation_steps"]) == (128, 1)
    split = trl_settings_for(
        TrainConfig(recipe="grpo", group_size=8, prompts_per_step=32, num_minibatches=2, micro_batch_size=32)
    )
    assert (split["per_device_train_batch_size"], split["gradient_accumulation_steps"]) == (32, 4)


def test_defaults_are_train_configs() -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    mapped = trl_settings("dapo", group_size=defaults["group_size"], max_new_tokens=defaults["max_new_tokens"])
    full = trl_settings_for(TrainConfig(recipe="dapo"))
    passes = ("per_device_train_batch_size", "gradient_accumulation_steps")
    # the schedule's defaults are TrainConfig's; only how an optimizer step is cut into passes differs
    assert {k: full[k] for k in mapped if k not in passes} == {k: v for k, v in mapped.items() if k not in passes}
    assert full[passes[0]] * full[passes[1]] == mapped[passes[0]] * mapped[passes[1]]


def test_settings_for_a_train_config() -> None:
    config = TrainConfig(
        recipe="grpo", group_size=8, prompts_per_step=32, num_minibatches=2, lr=3e-4, sample_budget=1000, seed=5
    )
    s = trl_settings_for(config)
    assert s["max_steps"] == math.ceil(1000 / 256) * 2  # the rollouts the budget buys, two steps each
    assert (s["learning_rate"], s["lr_scheduler_type"], s["weight_decay"], s["max_grad_norm"]) == (
        3e-4,
        "constant",
        0.0,
        1.0,
    )
    assert (s["bf16"], s["fp16"], s["activation_checkpointing"], s["seed"]) == (False, False, False, 5)
    assert s["optim"] == "adamw_torch"
    sgd = trl_settings_for(dataclasses.replace(config, optimizer="sgd", max_grad_norm=0.0))
    assert (sgd["optim"], sgd["max_grad_norm"]) == ("sgd", 0.0)  # plain SGD, no clip: TRL's own spelling
    with pytest.raises(TypeError, match="TrainConfig"):
        trl_settings_for("grpo")


def test_gaps_per_preset() -> None:
    knobs = {
        key: [g.knob for g in trl_gaps(recipe, group_size=8, num_minibatches=2)] for key, recipe in PRESETS.items()
    }
    assert knobs == {
        "grpo": ["std_correction", "std_eps", "minibatches"],
        "dr_grpo": ["minibatches"],
        "dapo": ["dynamic_sampling", "std_correction", "std_eps", "overlong_filter", "minibatches"],
    }
    assert trl_gaps(DR_GRPO, group_size=8, num_minibatches=1) == []  # the L_max normaliser is TRL's dr_grpo
    bessel = {g.knob: g for g in trl_gaps(GRPO, group_size=8, num_minibatches=1)}
    assert "0.9354" in bessel["std_correction"].effect
    # the factor scales the advantage term only: against it, GRPO's β = 0.04 weighs as 0.04 / sqrt(7/8)
    assert f"{0.04 / math.sqrt(7 / 8):.4g}" == "0.04276" and "0.04276" in bessel["std_correction"].effect
    assert "0.354" in bessel["std_eps"].effect and "2.8e-04" in bessel["std_eps"].effect
    dapo = {g.knob: g for g in trl_gaps(DAPO, group_size=8, num_minibatches=2)}
    assert "β = 0" in dapo["std_correction"].effect
    assert "0.707" in dapo["std_eps"].effect and "1/L_cache" in dapo["std_eps"].effect  # ±1: 2 apart
    assert "frac_reward_zero_std" in dapo["dynamic_sampling"].trl
    assert "number of optimizer steps" in dapo["minibatches"].effect
    # 1 right (+1), 2 short wrong (-1), 5 cut off (-1 and the full penalty -1); Bessel's std + 1e-4 on
    # both sides: TRL's statistics over all 8 samples, the book trainer's over the 3 kept ones
    rewards = np.array([1.0, -1.0, -1.0] + [-2.0] * 5)
    s_all, s_kept = np.std(rewards, ddof=1) + 1e-4, np.std(rewards[:3], ddof=1) + 1e-4
    theirs, ours = (-1 - rewards.mean()) / s_all, (-1 - rewards[:3].mean()) / s_kept
    assert f"{theirs:+.3f} in TRL and {ours:+.3f} in the book's trainer" in dapo["overlong_filter"].effect
    assert (f"{theirs:+.3f}", f"{ours:+.3f}") == ("+0.354", "-0.577")
    assert [g.knob for g in trl_gaps(DR_GRPO, group_size=8, num_minibatches=1, use_vllm=True)] == ["sampler"]
    sampler = trl_gaps(DR_GRPO, group_size=8, num_minibatches=1, use_vllm=True)[0]
    assert "vllm_importance_sampling_correction=True" in sampler.trl and "sequence_mask" in sampler.trl
    for recipe in PRESETS.values():  # the equivalent recipe leaves the schedule and the overlong filter's statistics
        left = [g.knob for g in trl_gaps(trl_equivalent_recipe(recipe), group_size=8, num_minibatches=1)]
        assert left == (["overlong_filter"] if recipe.overlong_filter else [])


def test_equivalent_recipe() -> None:
    for recipe in (GRPO, DAPO):
        eq = trl_equivalent_recipe(recipe)
        assert (eq.std_correction, eq.std_eps, eq.dynamic_sampling) == (1, TRL_STD_EPS, False)
        assert trl_equivalent_recipe(eq) == eq
    assert trl_equivalent_recipe(DR_GRPO).replace(name=DR_GRPO.name) == DR_GRPO
    four_of_eight = (np.arange(8) < 4).astype(float)
    assert float(group_std(four_of_eight)) == 0.5 and abs(float(group_std(four_of_eight, correction=1)) - 0.5345) < 1e-4
    assert group_advantages(four_of_eight, 8, GRPO)[0] == pytest.approx(1.0)
    assert group_advantages(four_of_eight, 8, trl_equivalent_recipe(GRPO))[0] == pytest.approx(
        0.5 / (0.5 * math.sqrt(8 / 7) + 1e-4)
    )


def test_reward_settings() -> None:
    assert reward_settings("grpo", max_new_tokens=8) == {
        "reward_correct": 1.0,
        "reward_wrong": 0.0,
        "soft_overlong_punishment": None,
    }
    assert reward_settings("dapo", max_new_tokens=8) == {
        "reward_correct": 1.0,
        "reward_wrong": -1.0,
        "soft_overlong_punishment": {"max_completion_len": 8, "soft_punish_cache": 2},
    }
    with pytest.raises(ValueError, match="empty"):
        reward_settings("dapo", max_new_tokens=2)  # round(0.2 * 2) = 0 tokens
    verifier = trl_reward_funcs("grpo", max_new_tokens=8)[0]
    codec = CharCodec()
    assert verifier(
        completion_ids=[codec.encode("521<eos>"), codec.encode("521"), codec.encode("52<eos>")], answer=["521"] * 3
    ) == [1.0, 0.0, 0.0]


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown recipe"):
        trl_settings("ppo", group_size=8, max_new_tokens=8)
    with pytest.raises(ValueError, match="at least 2"):
        trl_settings("grpo", group_size=1, max_new_tokens=8)
    with pytest.raises(ValueError, match="at least 2"):
        trl_gaps("grpo", group_size=1)
    with pytest.raises(ValueError, match="whole groups"):
        trl_settings("grpo", group_size=8, max_new_tokens=8, prompts_per_step=32, num_minibatches=3)
    with pytest.raises(ValueError, match="micro_batch_size"):
        trl_settings("grpo", group_size=8, max_new_tokens=8, micro_batch_size=48)
    with pytest.raises(ValueError, match="processes"):
        trl_settings("grpo", group_size=8, max_new_tokens=8, micro_batch_size=8, num_processes=3)
    for bad, error, message in (
        (dict(group_size="8"), TypeError, "group_size must be a whole number; got str '8'"),
        (dict(max_new_tokens=None), TypeError, "max_new_tokens must be a whole number; got NoneType"),
        (dict(temperature="hot"), TypeError, "temperature must be a number; got str 'hot'"),
        (dict(num_minibatches=2.5), ValueError, "num_minibatches must be a whole number; got 2.5"),
    ):
        with pytest.raises(error, match=message):
            trl_settings("grpo", **{**dict(group_size=8, max_new_tokens=8), **bad})
    not_a_recipe = r"recipe must be a Recipe or a preset name \(\['dapo', 'dr_grpo', 'grpo'\]\); got "
    with pytest.raises(TypeError, match=not_a_recipe + "int 3"):
        trl_settings(3, group_size=8, max_new_tokens=8)
    with pytest.raises(TypeError, match=not_a_recipe + "NoneType None"):
        trl_gaps(None)
    with pytest.raises(TypeError, match=not_a_recipe + "float 0.5"):
        trl_equivalent_recipe(0.5)
    with pytest.raises(TypeError, match=r"output_dir must be a directory path \(str or Path\); got int"):
        grpo_config(TrainConfig(), 42)
    with pytest.raises(TypeError, match="exact must be True or False; got str 'yes'"):
        grpo_config(TrainConfig(), "out", exact="yes")
    with pytest.raises(ValueError, match="cannot express"):  # checked before TRL is imported
        grpo_config(TrainConfig(recipe="dapo"), "out", exact=True)
    with pytest.raises(ValueError) as info:  # the message names the whole fix, not only a part of it
        grpo_config(TrainConfig(recipe=trl_equivalent_recipe(DAPO), num_minibatches=1), "out", exact=True)
    assert "overlong_filter=False" in str(info.value) and "num_minibatches=1" not in str(info.value)
    with pytest.raises(ValueError, match="use_vllm=False"):
        grpo_config(
            TrainConfig(recipe=trl_equivalent_recipe(GRPO), num_minibatches=1), "out", exact=True, use_vllm=True
        )
    with pytest.raises(TypeError, match="use_vllm"):
        trl_gaps("grpo", use_vllm="yes")
    policy = tiny_model(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
    problem = make_problem(1, 2, 1)
    with pytest.raises(TypeError, match="policy"):
        one_batch_check("grpo", "model", [problem] * 2, [[1], [1]], group_size=2, max_new_tokens=4, workdir="w")
    with pytest.raises(TypeError, match="workdir"):
        one_batch_check("grpo", policy, [problem] * 2, [[1], [1]], group_size=2, max_new_tokens=4, workdir=None)
    with pytest.raises(ValueError, match="groups"):
        one_batch_check("grpo", policy, [problem] * 3, [[1]] * 3, group_size=2, max_new_tokens=4, workdir="w")
    with pytest.raises(ValueError, match="EOS"):
        one_batch_check("grpo", policy, [problem] * 2, [[5, 1], [5]], group_size=2, max_new_tokens=4, workdir="w")
    with pytest.raises(TypeError, match="token ids"):
        one_batch_check("grpo", policy, [problem] * 2, ["3<eos>", [1]], group_size=2, max_new_tokens=4, workdir="w")


def test_grpo_config_without_trl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trl", None)  # import trl now raises ImportError
    with pytest.raises(ImportError, match="pip install trl"):
        grpo_config(TrainConfig(), "out")


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
    punish = trl.rewards.get_soft_overlong_punishment(max_completion_len=L_MAX, soft_punish_cache=2)
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
