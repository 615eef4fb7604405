"""The TRL bridge's mapping (chapter 14), as data: a recipe's ``GRPOConfig`` settings, the schedule, the gaps,
the equivalent recipe, the rewards' settings and bad input. No TRL needed (the comparison with TRL's own code is
tests/test_trl_check.py)."""

from __future__ import annotations

import dataclasses
import math
import sys

import numpy as np
import pytest

from stddial_book.bridges.trl_check import one_batch_check
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
from stddial_book.rl.configs import TrainConfig
from stddial_book.rl.model import CharCodec, tiny_model
from stddial_book.rl.tasks import make_problem
from stddial_book.theory.identity import group_std
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
