"""The dial in TRL: a book recipe as ``trl.GRPOConfig`` settings, what TRL cannot express, and checks (chapter 14).

Readers who scale up train with TRL's ``GRPOTrainer`` (von Werra et al., 2020), not with the book's loop.
This module maps a :class:`~stddial_book.recipes.Recipe` (GRPO, Shao et al., 2024; Dr. GRPO, Liu et al.,
2025; DAPO, Yu et al., 2025) onto TRL's settings and says, as data, where the two differ:

* :func:`trl_settings` / :func:`trl_settings_for` return the keyword arguments of ``GRPOConfig`` as a
  plain dict (no TRL needed): the dial (``scale_rewards``), the aggregation (``loss_type``), the clip
  range, β, the overlong filter, sampling and the batch schedule.
* :func:`trl_gaps` lists what a recipe asks for and TRL computes differently (dynamic sampling, the
  std convention, TRL's fixed std epsilon, the overlong filter's group statistics, how several
  optimizer steps per rollout are cut, and with vLLM TRL's importance-sampling correction);
  :func:`trl_equivalent_recipe` is the book recipe that computes exactly what TRL computes.
* :func:`reward_settings` / :func:`trl_reward_funcs` carry a recipe's reward values and DAPO's soft
  overlong penalty into TRL reward functions (TRL has that penalty as
  ``trl.rewards.get_soft_overlong_punishment``).
* :func:`grpo_config` builds the ``GRPOConfig``; :func:`one_batch_check` feeds one batch through TRL's
  own ``_generate_and_score_completions`` and ``_compute_loss`` and through the book's
  :func:`~stddial_book.recipes.group_advantages` and :func:`~stddial_book.losses.policy_loss`, and
  reports how far advantages, loss and gradient differ; :func:`trl_testbed_run` trains the book's
  testbed model with ``GRPOTrainer``.

The book itself never needs TRL: only :func:`grpo_config`, :func:`trl_reward_funcs` (for DAPO's
penalty), :func:`one_batch_check` and :func:`trl_testbed_run` import it, inside. Every setting name
and its meaning were read from TRL's source at version :data:`TRL_CHECKED_VERSION`
(``trl/trainer/grpo_config.py`` and ``grpo_trainer.py``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import math
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ._arrays import check_int
from .recipes import Recipe, as_recipe

__all__ = [
    "TRL_CHECKED_VERSION", "TRL_STD_EPS", "TRL_LOSS_TYPES", "TRLGap",
    "trl_settings", "trl_settings_for", "trl_gaps", "trl_equivalent_recipe",
    "reward_settings", "trl_reward_funcs", "grpo_config", "one_batch_check", "trl_testbed_run",
]

#: The TRL release whose source this mapping was checked against.
TRL_CHECKED_VERSION = "1.16.0"

#: What TRL adds to the group's std before dividing (hard-coded in ``GRPOTrainer``, not a setting).
TRL_STD_EPS = 1e-4

#: The book's loss aggregation → TRL's ``loss_type``. TRL's "grpo" is the per-sequence token mean,
#: "dr_grpo" the token sum over (completions × ``max_completion_length``), "dapo" the token sum over
#: the unmasked tokens of the generation batch (rescaled per optimizer step).
TRL_LOSS_TYPES: dict[str, str] = {
    "seq-mean-token-mean": "grpo",
    "seq-mean-token-sum-norm": "dr_grpo",
    "token-mean": "dapo",
}

# The defaults of the batch schedule: TrainConfig's (tests check they agree).
_DEFAULT_PROMPTS_PER_STEP = 32
_DEFAULT_NUM_MINIBATCHES = 2


@dataclass(frozen=True)
class TRLGap:
    """One thing a recipe asks for that TRL computes differently (a row of chapter 14's table).

    Attributes:
        knob: the :class:`~stddial_book.recipes.Recipe` field (or ``minibatches``, the schedule).
        book: what the book's recipe does.
        trl: what TRL does instead.
        effect: what follows for the update, in numbers where there is one.
    """

    knob: str
    book: str
    trl: str
    effect: str


# --------------------------------------------------------------------------- settings (no TRL needed)


def _check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False; got {type(value).__name__} {' '.join(repr(value).split())[:40]}.")
    return bool(value)


#: Every numeric ``GRPOConfig`` setting the bridge writes or a caller commonly overrides: (kind, low,
#: low inclusive, high, high inclusive, None allowed). ``kind`` "int" needs a whole number, "float" any
#: finite number; ``low``/``high`` None means unbounded. Special values TRL gives a meaning are allowed
#: (``max_steps=-1``: train by epochs; ``max_grad_norm=0``: no clipping).
_NUMERIC_SETTINGS: dict[str, tuple[str, float | None, bool, float | None, bool, bool]] = {
    "learning_rate": ("float", 0.0, False, None, False, False),
    "max_grad_norm": ("float", 0.0, True, None, False, True),
    "weight_decay": ("float", 0.0, True, None, False, False),
    "warmup_steps": ("int", 0, True, None, False, False),
    "warmup_ratio": ("float", 0.0, True, 1.0, True, False),
    "max_steps": ("int", -1, True, None, False, False),
    "seed": ("int", 0, True, None, False, False),
    "data_seed": ("int", 0, True, None, False, True),
    "temperature": ("float", 0.0, False, None, False, False),
    "top_k": ("int", 0, True, None, False, True),
    "top_p": ("float", 0.0, False, 1.0, True, False),
    "min_p": ("float", 0.0, True, 1.0, True, True),
    "repetition_penalty": ("float", 0.0, False, None, False, False),
    "epsilon": ("float", 0.0, True, 1.0, False, False),
    "epsilon_high": ("float", 0.0, True, None, False, True),
    "beta": ("float", 0.0, True, None, False, False),
    "top_entropy_quantile": ("float", 0.0, True, 1.0, True, False),
    "num_generations": ("int", 2, True, None, False, False),
    "max_completion_length": ("int", 1, True, None, False, False),
    "generation_batch_size": ("int", 1, True, None, False, True),
    "per_device_train_batch_size": ("int", 1, True, None, False, False),
    "gradient_accumulation_steps": ("int", 1, True, None, False, False),
    "num_iterations": ("int", 1, True, None, False, False),
    "logging_steps": ("float", 0.0, False, None, False, False),
    "dataloader_num_workers": ("int", 0, True, None, False, False),
}

#: ``GRPOConfig`` settings the bridge writes that must be True or False.
_BOOL_SETTINGS = ("bf16", "fp16", "use_bias_correction_kl", "mask_truncated_completions", "activation_checkpointing",
                  "gradient_checkpointing", "use_cpu", "use_vllm", "log_completions", "disable_tqdm")


def _check_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Refuse a ``GRPOConfig`` keyword of the wrong type or outside its range, naming it (TRL itself would
    take the string "1e-5" or NaN as a learning rate and fail, or train wrongly, much later)."""
    for name, value in settings.items():
        if name in _BOOL_SETTINGS and not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"GRPOConfig setting {name} must be True or False; got {type(value).__name__} "
                            f"{' '.join(repr(value).split())[:40]}.")
        rule = _NUMERIC_SETTINGS.get(name)
        if rule is None:
            continue
        kind, low, low_in, high, high_in, optional = rule
        if value is None and optional:
            continue
        what = "a whole number" if kind == "int" else "a number"
        if (isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating))
                or (kind == "int" and isinstance(value, (float, np.floating)) and not float(value).is_integer())):
            raise TypeError(f"GRPOConfig setting {name} must be {what}{' or None' if optional else ''}; got "
                            f"{type(value).__name__} {' '.join(repr(value).split())[:40]}. Pass e.g. {name}={_example(name)} "
                            "(a number, not text).")
        bounds = []
        if low is not None:
            bounds.append(f"{'>=' if low_in else '>'} {low:g}")
        if high is not None:
            bounds.append(f"{'<=' if high_in else '<'} {high:g}")
        inside = math.isfinite(value) and (low is None or (value >= low if low_in else value > low)) \
            and (high is None or (value <= high if high_in else value < high))
        if name == "max_steps" and value in (0,):
            inside = False
        if not inside:
            extra = " (or -1: train by epochs)" if name == "max_steps" else ""
            raise ValueError(f"GRPOConfig setting {name} must be a finite number {' and '.join(bounds)}{extra}; got "
                             f"{value!r}. Pass e.g. {name}={_example(name)}.")
    return settings


def _example(name: str) -> str:
    """A valid value of a numeric GRPOConfig setting, for error messages."""
    return {"learning_rate": "1e-5", "max_grad_norm": "1.0", "temperature": "1.0", "top_p": "1.0", "beta": "0.04",
            "epsilon": "0.2", "epsilon_high": "0.28", "num_generations": "8", "max_steps": "100",
            "seed": "0"}.get(name, "1")


def _check_temperature(value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"temperature must be a number; got {type(value).__name__} {' '.join(repr(value).split())[:40]}.")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"temperature must be a finite number > 0; got {value!r}.")
    return float(value)


def _schedule(group_size: int, prompts_per_step: int, num_minibatches: int, micro_batch_size: int | None,
              num_processes: int) -> dict[str, int]:
    """TRL's batch settings for P prompts × G samples a rollout, used for ``num_minibatches`` optimizer steps.

    TRL generates ``generation_batch_size`` completions at once and cuts them into
    ``steps_per_generation`` = generation batch / (per-device batch × processes) slices, one per call of
    ``training_step``; the optimizer steps every ``gradient_accumulation_steps`` slices. So a minibatch
    (one optimizer step) is ``gradient_accumulation_steps`` slices of ``per_device_train_batch_size`` on
    each process.
    """
    batch = prompts_per_step * group_size
    if prompts_per_step % num_minibatches:
        raise ValueError(
            f"a rollout batch of prompts_per_step={prompts_per_step} groups does not split into "
            f"num_minibatches={num_minibatches} optimizer steps of whole groups; pick a divisor of {prompts_per_step}."
        )
    minibatch = batch // num_minibatches
    micro = minibatch if micro_batch_size is None else micro_batch_size
    if minibatch % micro:
        raise ValueError(
            f"micro_batch_size={micro} does not divide the optimizer step of {minibatch} samples "
            f"(prompts_per_step · G / num_minibatches); pick a divisor or None."
        )
    if micro % num_processes:
        raise ValueError(
            f"the micro-batch of {micro} samples does not split over num_processes={num_processes} processes; "
            "choose a micro_batch_size divisible by the number of processes."
        )
    return {
        "generation_batch_size": batch,
        "per_device_train_batch_size": micro // num_processes,
        "gradient_accumulation_steps": minibatch // micro,
        "num_iterations": 1,
    }


def trl_settings(recipe: Recipe | str, *, group_size: int,
                 max_new_tokens: int,
                 prompts_per_step: int = _DEFAULT_PROMPTS_PER_STEP,
                 num_minibatches: int = _DEFAULT_NUM_MINIBATCHES,
                 micro_batch_size: int | None = None, num_processes: int = 1,
                 temperature: float = 1.0) -> dict[str, Any]:
    """The ``trl.GRPOConfig`` keyword arguments that set TRL's dial as
    ``recipe`` sets the book's (chapter 14).

    A plain dict; TRL need not be installed. The objective:
    ``scale_rewards`` "group" divides each group's centred rewards by their
    std (GRPO, DAPO; Shao et al., 2024; Yu et al., 2025), "none" does not
    (Dr. GRPO; Liu et al., 2025); ``loss_type`` is the aggregation
    (:data:`TRL_LOSS_TYPES`), with ``max_completion_length`` = L_max also
    Dr. GRPO's normaliser; ``epsilon`` / ``epsilon_high`` the clip range;
    ``beta`` the k3 KL coefficient, with ``use_bias_correction_kl=False``
    because TRL's default multiplies the k3 term by the importance ratio,
    which leaves its value at ratio 1 but changes its gradient;
    ``mask_truncated_completions`` DAPO's overlong filter. Sampling is pure
    temperature sampling (``top_k=0``, ``top_p=1``). The schedule: a
    generation batch of P·G completions, split into ``num_minibatches``
    optimizer steps (of ``gradient_accumulation_steps`` micro-batches each),
    each rollout used once (``num_iterations=1``). What TRL cannot express
    is in :func:`trl_gaps`; DAPO's reward values and length penalty go into
    reward functions (:func:`reward_settings`).

    Args:
        recipe: a :class:`~stddial_book.recipes.Recipe` or a preset name
            ("grpo", "dr_grpo", "dapo").
        group_size: G, samples per prompt (``num_generations``), at least 2.
        max_new_tokens: L_max, the generation cap
            (``max_completion_length``).
        prompts_per_step: P, groups per rollout batch (TrainConfig's
            default 32).
        num_minibatches: optimizer steps per rollout batch (TrainConfig's
            default 2); must divide P.
        micro_batch_size: samples per forward/backward pass inside an
            optimizer step (None: the whole step).
        num_processes: data-parallel processes TRL runs on.
        temperature: the sampling temperature (1 = the policy itself).

    Raises:
        ValueError: an unknown preset, G < 2, or a batch that does not split
            into whole optimizer steps.
        TypeError: arguments of the wrong type.
    """
    recipe = as_recipe(recipe)
    group_size = check_int(
        group_size, "group_size", minimum=2,
        hint="A group of one sample has no spread to learn from.")
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1,
                               hint="It is L_max, the generation cap.")
    prompts_per_step = check_int(prompts_per_step, "prompts_per_step",
                                 minimum=1)
    num_minibatches = check_int(num_minibatches, "num_minibatches", minimum=1)
    if micro_batch_size is not None:
        micro_batch_size = check_int(micro_batch_size, "micro_batch_size",
                                     minimum=1)
    num_processes = check_int(num_processes, "num_processes", minimum=1)
    temperature = _check_temperature(temperature)
    settings: dict[str, Any] = {
        # the dial and the aggregation
        "scale_rewards": "group" if recipe.scale_std else "none",
        "loss_type": TRL_LOSS_TYPES[recipe.loss_aggregation],
        # the reward functions are summed, then one advantage is taken
        "multi_objective_aggregation": "sum_then_normalize",
        "importance_sampling_level": "token",
        # clip, KL, overlong filter
        "epsilon": recipe.clip_low,
        "epsilon_high": recipe.clip_high,
        "beta": recipe.kl_coef,
        "use_bias_correction_kl": False,
        "mask_truncated_completions": recipe.overlong_filter,
        "top_entropy_quantile": 1.0,  # every token in the loss
        # groups and sampling
        "num_generations": group_size,
        "max_completion_length": max_new_tokens,
        "temperature": temperature,
        "top_k": 0,
        "top_p": 1.0,
        "min_p": None,
        "repetition_penalty": 1.0,
    }
    settings.update(_schedule(group_size, prompts_per_step, num_minibatches,
                              micro_batch_size, num_processes))
    return _check_settings(settings)


def trl_settings_for(config: Any, *, num_processes: int = 1) -> dict[str, Any]:
    """:func:`trl_settings` for a :class:`~stddial_book.train.TrainConfig`, plus its optimizer and run length.

    Adds AdamW at the config's constant learning rate without weight decay, its gradient-norm clip,
    ``max_steps`` = the rollout batches its sample budget buys × its optimizer steps per batch, the
    seed, fp32 (GRPOConfig defaults to bf16) and no activation checkpointing (GRPOConfig turns it on by
    default): what the book's trainer does (chapters 9-13, 14).
    """
    from .train import TrainConfig

    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a stddial_book.train.TrainConfig (e.g. profile.train_config('grpo')); got "
                        f"{type(config).__name__}. For a bare recipe use trl_settings(recipe, group_size=..., "
                        "max_new_tokens=...).")
    settings = trl_settings(config.recipe, group_size=config.group_size, max_new_tokens=config.max_new_tokens,
                            prompts_per_step=config.prompts_per_step, num_minibatches=config.num_minibatches,
                            micro_batch_size=config.micro_batch_size, num_processes=num_processes,
                            temperature=config.temperature)
    rollouts = math.ceil(config.sample_budget / (config.prompts_per_step * config.group_size))
    settings.update({
        "learning_rate": config.lr,
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "weight_decay": 0.0,
        "optim": "adamw_torch",
        "max_grad_norm": config.max_grad_norm,
        "max_steps": rollouts * config.num_minibatches,
        "seed": config.seed,
        "bf16": False,
        "fp16": False,
        "activation_checkpointing": False,
    })
    return _check_settings(settings)


def _smallest_mixed_std(group_size: int, gap: float) -> float:
    """Bessel's std of a group of two reward values ``gap`` apart with one sample on one side: gap/√G."""
    return gap / math.sqrt(group_size)


def trl_gaps(recipe: Recipe | str, *, group_size: int = 8,
             num_minibatches: int = _DEFAULT_NUM_MINIBATCHES, use_vllm: bool = False) -> list[TRLGap]:
    """What ``recipe`` asks for and TRL's ``GRPOTrainer`` computes differently, with what follows (chapter 14).

    Set by :func:`trl_settings`, TRL matches the dial, the aggregation (Dr. GRPO's L_max normaliser is
    exactly TRL's ``dr_grpo``), the clip range, the k3 KL and the overlong filter. What remains:

    * ``dynamic_sampling`` (DAPO, Yu et al., 2025): TRL keeps silent groups with advantage 0 and logs
      their share as ``frac_reward_zero_std``; it has no drop-and-refill, and under the token-level loss
      the silent groups' tokens still count in the normaliser.
    * ``std_correction``: TRL divides by Bessel's sample std, the population std times sqrt(G/(G − 1)),
      so the advantage term (not the KL term) shrinks by sqrt((G − 1)/G) (0.9354 at G = 8; for 4 of 8
      correct, 0.5 against 0.535). With β = 0 that is one constant on the whole loss; with β > 0 it
      acts, under Adam, like β raised by sqrt(G/(G − 1)).
    * ``std_eps``: TRL adds a fixed :data:`TRL_STD_EPS` to the std.
    * ``overlong_filter`` (DAPO): the book's trainer leaves samples cut off at L_max out of the loss and
      out of their group's mean and std; TRL's ``mask_truncated_completions`` masks the loss only.
    * ``minibatches`` (with several optimizer steps per rollout): TRL shuffles the completions of the
      generation batch before cutting it, so a group can straddle steps, and its token-level loss
      divides each step by the batch's tokens over the number of steps, not by the step's own count.
    * ``sampler`` (only with ``use_vllm=True``): TRL then recomputes π_old with the training model and,
      by default (``vllm_importance_sampling_correction=True``, mode ``"sequence_mask"``), multiplies
      each completion's policy loss by its importance ratio π_train/π_vLLM, zeroing completions whose
      ratio leaves [``vllm_importance_sampling_clip_min``, ``_clip_max``] (default max 3); the book
      takes π_old from its sampler, the training model itself, and has no such correction.

    DAPO's reward shaping (±1 rewards, the soft overlong penalty) is not a gap: it goes into reward
    functions (:func:`reward_settings`). :func:`trl_equivalent_recipe` removes every gap but the schedule
    and the overlong filter's group statistics.
    """
    recipe = as_recipe(recipe)
    group_size = check_int(group_size, "group_size", minimum=2,
                           hint="A group of one sample has no spread to learn from.")
    num_minibatches = check_int(num_minibatches, "num_minibatches", minimum=1)
    use_vllm = _check_bool(use_vllm, "use_vllm")
    gaps: list[TRLGap] = []
    if recipe.dynamic_sampling:
        gaps.append(TRLGap(
            "dynamic_sampling",
            "drops groups whose samples all agree (σ = 0) and refills the batch with new prompts",
            "keeps them with advantage 0 and only logs their share as frac_reward_zero_std",
            "A batch whose silent fraction is f holds (1 − f) of the informative groups DAPO's would; under the "
            "token-level loss the silent groups' tokens also count in the normaliser, so every informative token "
            "weighs less, by the informative share of the tokens. Filtering needs a custom rollout_func or "
            "sampler; TRL has no refill.",
        ))
    if recipe.scale_std and recipe.std_correction == 0:
        factor = math.sqrt((group_size - 1) / group_size)
        effect = (f"Every mixed group's advantage, and so the advantage term of the loss, is multiplied by "
                  f"sqrt((G − 1)/G) = {factor:.4f} at G = {group_size}; the KL term is not. ")
        if recipe.kl_coef > 0:
            effect += (f"Against the advantage term the KL term then weighs as β/{factor:.4f} = "
                       f"{recipe.kl_coef / factor:.4g} instead of β = {recipe.kl_coef:g}, and Adam's "
                       "normalisation removes only the common scale: like a β raised by sqrt(G/(G − 1)).")
        else:
            effect += ("With β = 0 that is one constant on the whole loss, which Adam's normalisation all "
                       "but removes.")
        gaps.append(TRLGap(
            "std_correction",
            "divides by the population std σ (ddof 0), which makes the identity exact",
            "divides by Bessel's sample std s = σ·sqrt(G/(G − 1)) (ddof 1)",
            effect,
        ))
    if recipe.scale_std and recipe.std_eps != TRL_STD_EPS:
        spread = recipe.reward_correct - recipe.reward_wrong
        s_min = _smallest_mixed_std(group_size, spread)
        relative = abs(TRL_STD_EPS - recipe.std_eps) / (s_min + min(TRL_STD_EPS, recipe.std_eps))
        gaps.append(TRLGap(
            "std_eps",
            f"adds {recipe.std_eps:g} to the std",
            f"adds {TRL_STD_EPS:g} (fixed in the trainer, not a GRPOConfig setting)",
            f"A group's weight becomes s/(s + {TRL_STD_EPS:g}) of the eps-free one; for binary rewards "
            f"{spread:g} apart the smallest mixed-group s is {s_min:.3f} at G = {group_size}, so the change is "
            f"at most {relative:.1e} relative. Rewards on a finer scale have a smaller s and a larger change"
            + (": the length penalty makes reward gaps as small as 1/L_cache." if recipe.overlong_penalty
               else "."),
        ))
    if recipe.overlong_filter:
        gaps.append(TRLGap(
            "overlong_filter",
            "masks samples cut off at L_max out of the loss and out of their group's mean and std",
            "mask_truncated_completions masks them out of the loss only; their rewards still shape the group's "
            "mean and std",
            _overlong_statistics_effect(recipe, group_size),
        ))
    if num_minibatches > 1:
        effect = ("The per-step loss matches the book's only in expectation over the shuffle; summed over the "
                  "steps of a batch, the per-sequence (GRPO) and L_max (Dr. GRPO) losses still weigh every "
                  "completion as the book does.")
        if recipe.loss_aggregation == "token-mean":
            effect = ("Each step's token-level loss is divided by the generation batch's tokens over the number of "
                      "optimizer steps per batch instead of the step's own token count, so a step with more tokens "
                      "than average weighs more; equal when all steps hold the same number of tokens. " + effect)
        gaps.append(TRLGap(
            "minibatches",
            "splits a rollout batch into optimizer steps of whole groups",
            "shuffles the completions of the generation batch and splits them into steps_per_generation slices",
            effect,
        ))
    if use_vllm:
        gaps.append(TRLGap(
            "sampler",
            "takes π_old from its sampler, which is the training model itself",
            "with use_vllm=True recomputes π_old with the training model and, by default "
            "(vllm_importance_sampling_correction=True, mode \"sequence_mask\"), multiplies each "
            "completion's policy loss by its ratio π_train/π_vLLM, zeroing completions whose ratio "
            "leaves [vllm_importance_sampling_clip_min, vllm_importance_sampling_clip_max] (max 3)",
            "An importance-sampling correction for the numerical mismatch between vLLM and the trainer, "
            "which the book's loss does not have; set vllm_importance_sampling_correction=False to leave it "
            "out, or use_vllm=False (the default) to sample with the training model.",
        ))
    return gaps


def _overlong_statistics_effect(recipe: Recipe, group_size: int) -> str:
    """What TRL's group statistics over cut-off samples do, with a worked group when G allows one."""
    from .recipes import group_advantages

    low = ("the wrong answer's reward plus the full length penalty, the lowest there is" if recipe.overlong_penalty
           else "the wrong answer's reward")
    text = ("In a group with cut-off samples TRL measures the kept samples against a baseline that includes the "
            f"cut-off ones' rewards ({low}), so the kept samples' advantages rise")
    if not 4 <= group_size <= 4096:  # the worked group needs 4 samples; beyond 4096 it would only cost memory
        return text + "; with no sample cut off the two agree."
    cut = recipe.reward_wrong - (1.0 if recipe.overlong_penalty else 0.0)
    rewards = np.array([recipe.reward_correct, recipe.reward_wrong, recipe.reward_wrong] + [cut] * (group_size - 3))
    valid = np.arange(group_size) < 3
    same_std = trl_equivalent_recipe(recipe)  # the same std convention on both sides: only the filter differs
    theirs = float(group_advantages(rewards, group_size, same_std)[1])
    ours = float(group_advantages(rewards, group_size, same_std, valid=valid)[1])
    return (text + f": at G = {group_size}, with 1 right, 2 short wrong and {group_size - 3} cut-off samples, a short "
            f"wrong answer gets A = {theirs:+.3f} in TRL and {ours:+.3f} in the book's trainer (both with TRL's "
            "std). With no sample cut off the two agree; the one-batch check takes TRL's statistics.")


def trl_equivalent_recipe(recipe: Recipe | str) -> Recipe:
    """The book recipe that computes what TRL computes when set by
    :func:`trl_settings`.

    Bessel's std plus TRL's fixed 1e-4 where the recipe divides by the std,
    and no dynamic sampling (TRL keeps silent groups at advantage 0);
    everything else TRL expresses already. Chapter 14 checks that
    advantages, loss and gradient then agree with TRL's own code to float32
    rounding. One thing no recipe field expresses: under the overlong filter
    the book's trainer takes a group's mean and std over its samples that
    were not cut off, TRL over all of them (:func:`trl_gaps`); they agree on
    a batch without cut-off samples, and ``group_advantages`` without
    ``valid`` computes TRL's.
    """
    recipe = as_recipe(recipe)
    changes: dict[str, Any] = {"dynamic_sampling": False}
    if recipe.scale_std:
        changes.update(std_correction=1, std_eps=TRL_STD_EPS)
    name = (recipe.name if recipe.name.endswith("(TRL)")
            else f"{recipe.name} (TRL)")
    return recipe.replace(name=name, **changes)


def _overlong_cache(recipe: Recipe, max_new_tokens: int) -> int:
    """L_cache in tokens, rounded as :attr:`stddial_book.train.TrainConfig.overlong_cache` rounds it."""
    return int(round(recipe.overlong_cache_fraction * max_new_tokens))


def reward_settings(recipe: Recipe | str, *, max_new_tokens: int) -> dict[str, Any]:
    """The reward side of ``recipe`` for TRL's reward functions (chapter 14).

    Returns ``reward_correct`` and ``reward_wrong`` (what the verifier's 1 and 0 become; DAPO's paper used
    ±1) and ``soft_overlong_punishment``: ``None``, or the keyword arguments of
    ``trl.rewards.get_soft_overlong_punishment`` (``max_completion_len`` = L_max, ``soft_punish_cache`` =
    L_cache), whose penalty equals :func:`stddial_book.sampling.overlong_penalty` for completions up to
    L_max (Yu et al., 2025, eq. 13). TRL sums the reward functions before taking advantages, as the
    book's trainer adds the penalty to the shaped reward.

    Raises:
        ValueError: the recipe has an overlong penalty whose band rounds to no token at this L_max.
    """
    recipe = as_recipe(recipe)
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1, hint="It is L_max, the generation cap.")
    overlong = None
    if recipe.overlong_penalty:
        cache = _overlong_cache(recipe, max_new_tokens)
        if cache < 1:
            raise ValueError(
                f"the overlong penalty band L_cache = round({recipe.overlong_cache_fraction} · {max_new_tokens}) is "
                "empty; raise max_new_tokens or overlong_cache_fraction."
            )
        overlong = {"max_completion_len": max_new_tokens, "soft_punish_cache": cache}
    return {"reward_correct": float(recipe.reward_correct), "reward_wrong": float(recipe.reward_wrong),
            "soft_overlong_punishment": overlong}


class _AdditionReward:
    """TRL reward function: the book's verifier on ``completion_ids`` (TRL's decoded text drops EOS).

    A completion is correct iff it is exactly the reversed sum followed by EOS; it then gets
    ``correct``, else ``wrong``. Reads the dataset's ``answer`` column, as TRL passes every column.
    """

    __name__ = "addition_reward"

    def __init__(self, correct: float, wrong: float) -> None:
        from .model import CharCodec

        self.correct, self.wrong = correct, wrong
        self.codec = CharCodec()

    def __call__(self, completion_ids: Sequence[Sequence[int]], answer: Sequence[str], **kwargs: Any) -> list[float]:
        from .tasks import EOS

        _check_reward_rows(completion_ids, answer, kwargs)
        wrong = next((a for a in answer if not isinstance(a, str)), None)
        if wrong is not None:
            raise TypeError(f"the dataset's answer column must hold strings (the reversed sum, as Problem.answer); "
                            f"found {type(wrong).__name__} {wrong!r:.40}. Build the dataset from Problem.answer.")
        return [self.correct if self.codec.decode(ids) == ans + EOS else self.wrong
                for ids, ans in zip(completion_ids, answer)]


#: Keyword arguments TRL passes to every reward function that are not one value per completion.
_NOT_PER_ROW = frozenset({"trainer_state", "log_extra", "log_metric"})


def _check_reward_rows(completion_ids: Any, answer: Any, kwargs: dict[str, Any]) -> None:
    """Refuse per-completion inputs of different lengths (``zip`` would silently drop the extra rows)."""
    for name, values in (("completion_ids", completion_ids), ("answer", answer)):
        if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
            raise TypeError(f"{name} must be a list with one entry per completion; got {type(values).__name__}.")
    rows = len(completion_ids)
    columns = {"answer": answer}
    columns.update({name: value for name, value in kwargs.items()
                    if name not in _NOT_PER_ROW and isinstance(value, (list, tuple, np.ndarray))})
    for name, values in columns.items():
        if len(values) != rows:
            raise ValueError(f"the reward function got {rows} completions but {len(values)} values of {name!r}; TRL "
                             f"passes one value of every dataset column per completion, so pass {name} with one "
                             "entry per completion (each prompt's row repeated G times).")


def trl_reward_funcs(recipe: Recipe | str, *, max_new_tokens: int) -> list[Callable[..., list[float]]]:
    """The reward functions to pass to ``GRPOTrainer`` for ``recipe`` (see :func:`reward_settings`).

    The verifier with the recipe's reward values, and for DAPO TRL's own soft overlong punishment.
    The dataset needs an ``answer`` column. Imports TRL only when the recipe has the length penalty.
    """
    settings = reward_settings(recipe, max_new_tokens=max_new_tokens)
    funcs: list[Callable[..., list[float]]] = [_AdditionReward(settings["reward_correct"], settings["reward_wrong"])]
    if settings["soft_overlong_punishment"] is not None:
        rewards = _import_trl("the soft overlong punishment", "trl.rewards")
        funcs.append(rewards.get_soft_overlong_punishment(**settings["soft_overlong_punishment"]))
    return funcs


# --------------------------------------------------------------------------- TRL itself


def _import_trl(what: str, module: str = "trl") -> Any:
    """Import ``module`` of TRL, or an ImportError that says how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(
            f"{what} needs TRL, which is not installed: pip install trl (the book checked TRL "
            f"{TRL_CHECKED_VERSION}; in this repository: pip install -r bench/requirements-trl.txt)."
        ) from None


def _grpo_config_from(settings: dict[str, Any], output_dir: str | os.PathLike, overrides: dict[str, Any]) -> Any:
    """A ``GRPOConfig`` from settings, with ``overrides`` on top; refuses names this TRL does not have."""
    kwargs = _check_settings({**settings, **overrides})  # before TRL is imported: the error needs no TRL
    trl = _import_trl("grpo_config")
    fields = {f.name for f in dataclasses.fields(trl.GRPOConfig)}
    if "activation_checkpointing" in kwargs and "activation_checkpointing" not in fields:
        kwargs["gradient_checkpointing"] = kwargs.pop("activation_checkpointing")  # older transformers' name
    unknown = sorted(set(kwargs) - fields)
    if unknown:
        raise ValueError(f"TRL {trl.__version__} has no GRPOConfig setting {', '.join(unknown)}; the bridge was "
                         f"checked against TRL {TRL_CHECKED_VERSION}.")
    return trl.GRPOConfig(output_dir=str(output_dir), **kwargs)


def grpo_config(config: Any, output_dir: str | os.PathLike, *, exact: bool = False, num_processes: int = 1,
                **overrides: Any) -> Any:
    """A ``trl.GRPOConfig`` for a :class:`~stddial_book.train.TrainConfig` (:func:`trl_settings_for`).

    ``overrides`` are further ``GRPOConfig`` settings (logging, ``use_cpu``, ...) and win over the
    mapping. With ``exact=True``, a recipe TRL cannot express (:func:`trl_gaps`, at the config's group
    size and optimizer steps per rollout, and ``use_vllm`` if overridden) raises ``ValueError`` naming
    the gaps and the fix: :func:`trl_equivalent_recipe`, without the overlong filter where the recipe
    has one (TRL keeps cut-off samples in their group's statistics), and one optimizer step per rollout.

    Raises:
        ImportError: TRL is not installed (the message says ``pip install trl``).
        ValueError: ``exact`` and a gap; a setting this TRL version does not have.
        TypeError: ``config`` is not a TrainConfig, ``output_dir`` not a path, ``exact`` not a bool.
    """
    settings = trl_settings_for(config, num_processes=num_processes)
    if not isinstance(output_dir, (str, os.PathLike)):
        raise TypeError(f"output_dir must be a directory path (str or Path); got {type(output_dir).__name__}.")
    if _check_bool(exact, "exact"):
        gaps = trl_gaps(config.recipe, group_size=config.group_size, num_minibatches=config.num_minibatches,
                        use_vllm=bool(overrides.get("use_vllm", False)))
        if gaps:
            listed = "; ".join(f"{gap.knob}: the book {gap.book}, TRL {gap.trl}" for gap in gaps)
            raise ValueError(f"TRL cannot express {config.recipe.name!r} exactly ({listed}). "
                             f"{_exact_fix({gap.knob for gap in gaps})}")
    return _grpo_config_from(settings, output_dir, overrides)


def _exact_fix(knobs: set[str]) -> str:
    """What to change so that ``grpo_config(..., exact=True)`` accepts a config with these gaps."""
    fixes = []
    if knobs & {"dynamic_sampling", "std_correction", "std_eps"}:
        fixes.append("recipe=trl_equivalent_recipe(recipe)")
    if "overlong_filter" in knobs:
        fixes.append("overlong_filter=False in that recipe (TRL keeps cut-off samples in their group's mean "
                     "and std; recipe.replace(overlong_filter=False))")
    if "minibatches" in knobs:
        fixes.append("num_minibatches=1")
    if "sampler" in knobs:
        fixes.append("use_vllm=False")
    return f"For a config TRL runs exactly use {', '.join(fixes)}; or exact=False."


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No progress bars, info logs or the deprecation warning TRL triggers in transformers while TRL runs."""
    import warnings

    from transformers.utils import logging as hf_logging

    bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning)
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def _random_states_kept() -> Iterator[None]:
    """Restore Python's, numpy's and torch's CPU random states afterwards (Trainer reseeds them).

    ``fork_rng(devices=[])`` restores torch's CPU generator only, not the CUDA ones.
    """
    import torch

    python_state, numpy_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)


def _quiet_trainer(trainer: Any) -> None:
    """No progress bars or printed logs from the Trainer (the chapters print their own numbers)."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


def _save_reference(model: Any, directory: Path) -> str:
    """Save ``model`` where TRL loads its KL reference from (it rebuilds the reference from a path)."""
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory, safe_serialization=True)
    return str(directory)


def _check_model(model: Any, name: str) -> None:
    if not (callable(getattr(model, "parameters", None)) and hasattr(model, "config")
            and callable(getattr(model, "save_pretrained", None))):
        raise TypeError(f"{name} must be a transformers causal LM (the testbed model); got {type(model).__name__}.")


def _check_batch(problems: Any, completions: Any, group_size: int, max_new_tokens: int,
                 vocab_size: int) -> tuple[list[Any], list[list[int]]]:
    """Problems (G in a row per prompt) and completions (token-id lists, EOS only last) for one_batch_check."""
    from .model import CharCodec
    from .tasks import Problem

    for name, value in (("problems", problems), ("completions", completions)):
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise TypeError(f"{name} must be a list, one entry per sample; got {type(value).__name__}.")
    problems, completions = list(problems), list(completions)
    if not all(isinstance(p, Problem) for p in problems):
        raise TypeError("problems must hold stddial_book.tasks.Problem objects, each repeated G times in a row.")
    if len(problems) != len(completions):
        raise ValueError(f"got {len(completions)} completions for {len(problems)} problems; pass one problem per "
                         "sample (each prompt G times in a row).")
    if not problems or len(problems) % group_size:
        raise ValueError(f"the batch of {len(problems)} samples does not divide into groups of G = {group_size}.")
    for start in range(0, len(problems), group_size):
        if len(set(problems[start:start + group_size])) != 1:
            raise ValueError(f"samples {start} to {start + group_size - 1} are not one prompt's group; TRL groups "
                             "samples by position, so repeat each problem G times in a row.")
    codec = CharCodec()
    out = []
    for i, ids in enumerate(completions):
        if isinstance(ids, (str, bytes)) or not (isinstance(ids, Sequence) or hasattr(ids, "tolist")):
            raise TypeError(f"completion {i} must be a list of token ids; got {type(ids).__name__}.")
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        if not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in ids):
            raise TypeError(f"completion {i} must hold integer token ids; got {ids!r:.60}.")
        ids = [int(t) for t in ids]
        if not 1 <= len(ids) <= max_new_tokens:
            raise ValueError(f"completion {i} has {len(ids)} tokens; completions hold 1 to max_new_tokens="
                             f"{max_new_tokens}.")
        if any(not 0 <= t < vocab_size for t in ids) or codec.pad_id in ids:
            raise ValueError(f"completion {i} holds padding or ids outside the vocabulary: {ids}; pass each "
                             "completion's own tokens, unpadded.")
        if codec.eos_id in ids[:-1] or (len(ids) < max_new_tokens and ids[-1] != codec.eos_id):
            raise ValueError(f"completion {i} ({ids}) must end at its first EOS or be cut off at exactly "
                             f"max_new_tokens={max_new_tokens}; it does neither.")
        out.append(ids)
    return problems, out


def one_batch_check(recipe: Recipe | str, policy: Any, problems: Sequence[Any], completions: Sequence[Sequence[int]],
                    *, group_size: int, max_new_tokens: int, workdir: str | os.PathLike,
                    old_logprobs: Any = None, ref_model: Any = None,
                    trl_overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """TRL's code and the book's on one batch: how far advantages, loss and gradient differ (chapter 14).

    TRL side: a ``GRPOTrainer`` set by :func:`trl_settings` for ``recipe`` (one optimizer step on the
    whole batch), with :func:`trl_reward_funcs` as its rewards and only generation replaced by
    ``completions``; its own ``_generate_and_score_completions`` tokenises the prompts, scores the
    completions, takes advantages and the reference log-probs, and its ``_compute_loss`` gives the loss,
    whose gradient is taken. Book side: the verifier and the recipe's reward shaping,
    :func:`~stddial_book.recipes.group_advantages` and :func:`~stddial_book.losses.policy_loss` with
    :func:`trl_equivalent_recipe` (Shao et al., 2024; Liu et al., 2025; Yu et al., 2025 without dynamic
    sampling). ``policy`` itself is not changed: both sides work on copies.

    Args:
        recipe: the book recipe (a preset name or a :class:`~stddial_book.recipes.Recipe`).
        policy: the model being updated (π_θ).
        problems: one :class:`~stddial_book.tasks.Problem` per sample, each prompt G times in a row.
        completions: per sample, its completion's token ids (EOS included when it ended, unpadded).
        group_size: G.
        max_new_tokens: L_max the completions were sampled with.
        workdir: a directory for TRL's output and the saved KL reference.
        old_logprobs: (B, T ≥ longest completion) log π_old of the tokens, as the sampler recorded them
            (``Rollout.logprobs``); None: π_old = π_θ (ratio 1, as TRL with one step per rollout).
        ref_model: the KL reference (used when the recipe's β > 0); None: the policy itself.
        trl_overrides: GRPOConfig settings that replace the mapping's on TRL's side only (to show a
            trap, e.g. ``{"use_bias_correction_kl": True}``).

    Returns:
        A dict: ``advantages`` (max |A_TRL − A_book|), ``loss_trl``, ``loss_book``, ``loss`` (their
        |difference|), ``gradient`` (max |g_TRL − g_book| over all weights), ``gradient_scale`` (max
        |g_book|), ``clip_fraction`` (tokens where the clip was active), ``frac_reward_zero_std``
        (TRL's metric), ``silent_fraction`` (groups unanimous in correctness), ``kl`` (mean k3 KL
        over tokens, when β > 0), and the arrays ``advantages_trl``, ``advantages_book``, ``rewards``.
    """
    import torch

    recipe = as_recipe(recipe)
    _check_model(policy, "policy")
    if ref_model is not None:
        _check_model(ref_model, "ref_model")
    group_size = check_int(group_size, "group_size", minimum=2, hint="A group of one sample has no spread.")
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1, hint="It is L_max, the generation cap.")
    if not isinstance(workdir, (str, os.PathLike)):
        raise TypeError(f"workdir must be a directory path (str or Path); got {type(workdir).__name__}.")
    if trl_overrides is not None and not isinstance(trl_overrides, dict):
        raise TypeError(f"trl_overrides must be a dict of GRPOConfig settings; got {type(trl_overrides).__name__}.")
    vocab_size = policy.get_input_embeddings().weight.shape[0]
    problems, completions = _check_batch(problems, completions, group_size, max_new_tokens, vocab_size)
    width = max(len(ids) for ids in completions)
    if old_logprobs is not None:
        if not isinstance(old_logprobs, torch.Tensor) or not old_logprobs.is_floating_point():
            raise TypeError("old_logprobs must be a float tensor of shape (batch, tokens), e.g. Rollout.logprobs.")
        if old_logprobs.dim() != 2 or old_logprobs.shape[0] != len(completions) or old_logprobs.shape[1] < width:
            raise ValueError(f"old_logprobs must have shape ({len(completions)}, ≥ {width}); got "
                             f"{tuple(old_logprobs.shape)}.")
    reward_settings(recipe, max_new_tokens=max_new_tokens)  # an empty overlong band fails before TRL starts
    trl = _import_trl("one_batch_check")
    from datasets import Dataset

    from .model import make_tokenizer

    workdir = Path(workdir)
    device = next(policy.parameters()).device
    settings = trl_settings(recipe, group_size=group_size, max_new_tokens=max_new_tokens,
                            prompts_per_step=len(problems) // group_size, num_minibatches=1)
    trl_policy = copy.deepcopy(policy)
    book_model = copy.deepcopy(policy)
    reference = ref_model if ref_model is not None else policy
    unique = problems[::group_size]
    dataset = Dataset.from_dict({"prompt": [p.prompt for p in unique], "answer": [p.answer for p in unique]})
    overrides = {"use_cpu": device.type == "cpu", "report_to": "none", "save_strategy": "no", "logging_steps": 1,
                 "disable_tqdm": True, "dataloader_num_workers": 0, "log_completions": False, "seed": 0,
                 "learning_rate": 1e-4, "bf16": False, "fp16": False, "activation_checkpointing": False,
                 **(trl_overrides or {})}
    with _quiet(), _random_states_kept():
        # TRL builds its KL reference from the path in the policy's config: point it at the reference's weights
        trl_policy.config._name_or_path = _save_reference(reference, workdir / "reference")
        trainer = trl.GRPOTrainer(model=trl_policy, args=_grpo_config_from(settings, workdir / "trl", overrides),
                                  reward_funcs=trl_reward_funcs(recipe, max_new_tokens=max_new_tokens),
                                  train_dataset=dataset, processing_class=make_tokenizer())
        _quiet_trainer(trainer)
        return _one_batch_check(trainer, book_model, reference, recipe, problems, completions, group_size,
                                max_new_tokens, old_logprobs)


def _one_batch_check(trainer: Any, book_model: Any, reference: Any,
                     recipe: Recipe, problems: list[Any],
                     completions: list[list[int]], group_size: int,
                     max_new_tokens: int,
                     old_logprobs: Any) -> dict[str, Any]:
    """The comparison itself (see :func:`one_batch_check`); ``trainer`` holds
    TRL's copy of the policy.
    """
    import torch

    from .losses import policy_loss
    from .model import CharCodec
    from .recipes import group_advantages
    from .rollout import completion_logprobs
    from .sampling import nonsilent_groups, overlong_penalty
    from .tasks import rewards as verify
    from .train import encode_prompts

    codec = CharCodec()
    expected_prompts = [codec.encode(p.prompt) for p in problems]
    queue = list(completions)

    def generate(prompt_ids, images, multimodal_fields, num_generations,
                 has_tool_images=False):
        # TRL's tokenisation of the prompts must be the book's; then the
        # given completions stand in for sampling
        if [list(ids) for ids in prompt_ids] != expected_prompts:
            raise RuntimeError(
                "TRL tokenised the prompts differently from the book's "
                "CharCodec (a chat template or special tokens?); the bridge "
                f"was checked against TRL {TRL_CHECKED_VERSION}: install "
                f"trl=={TRL_CHECKED_VERSION}.")
        return [queue.pop(0) for _ in prompt_ids], None

    trainer._generate_single_turn = generate
    # set by Trainer's training loop, which does not run here
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    book_model.to(next(trainer.model.parameters()).device).train()
    device = next(book_model.parameters()).device
    inputs = [{"prompt": p.prompt, "answer": p.answer} for p in problems]
    width = max(len(ids) for ids in completions)
    old = (None if old_logprobs is None
           else old_logprobs[:, :width].detach().to(device))

    # TRL: prompts, rewards, advantages, reference log-probs
    out = trainer._generate_and_score_completions(inputs)
    # π_old: the sampler's log-probs (else the policy's own: ratio 1)
    if old is not None:
        out["old_per_token_logps"] = old * out["completion_mask"]
    trl_loss = trainer._compute_loss(trainer.model, out)
    trl_loss.backward()

    # the book: the same batch through the verifier, group_advantages and
    # policy_loss, with TRL's recipe (group statistics over every sample, as
    # TRL's; trl_gaps: overlong filter)
    book = trl_equivalent_recipe(recipe)
    correct = verify([codec.decode(ids) for ids in completions], problems)
    rewards = np.where(correct > 0, recipe.reward_correct,
                       recipe.reward_wrong)
    lengths = np.array([len(ids) for ids in completions])
    if recipe.overlong_penalty:
        cache = _overlong_cache(recipe, max_new_tokens)
        rewards = rewards + overlong_penalty(lengths, max_new_tokens, cache)
    advantages = group_advantages(rewards, group_size, book)
    prompt_ids, prompt_mask = encode_prompts(problems, codec, device)
    completion_ids = torch.full((len(completions), width), codec.pad_id,
                                dtype=torch.long, device=device)
    for row, ids in enumerate(completions):
        completion_ids[row, :len(ids)] = torch.tensor(ids, device=device)
    mask = completion_ids != codec.pad_id
    truncated = torch.tensor(
        [len(ids) == max_new_tokens and ids[-1] != codec.eos_id
         for ids in completions], device=device)
    logprobs = completion_logprobs(book_model, prompt_ids, prompt_mask,
                                   completion_ids, mask)
    ref = None
    if book.kl_coef > 0:
        with torch.no_grad():
            reference = copy.deepcopy(reference).to(device)
            ref = completion_logprobs(reference, prompt_ids, prompt_mask,
                                      completion_ids, mask)
    old_book = (logprobs.detach() if old is None
                else torch.where(mask, old, 0.0))
    advantages_t = torch.as_tensor(advantages, device=device)
    result = policy_loss(logprobs, old_book, advantages_t, mask, book,
                         max_new_tokens=max_new_tokens, ref_logprobs=ref,
                         truncated=truncated)
    result.loss.backward()

    unanimous = ~nonsilent_groups(correct, group_size)
    if (not torch.equal(out["prompt_ids"].to(device), prompt_ids)
            or not torch.equal(out["completion_ids"].to(device),
                               completion_ids)):
        raise RuntimeError(
            "TRL's padded batch differs from the book's, so the comparison "
            "would not be like for like; the bridge was checked against TRL "
            f"{TRL_CHECKED_VERSION}: install trl=={TRL_CHECKED_VERSION}.")
    trl_grads = dict(trainer.model.named_parameters())
    difference, scale = 0.0, 0.0
    for name, param in book_model.named_parameters():
        theirs = trl_grads[name].grad
        ours = (param.grad if param.grad is not None
                else torch.zeros_like(param))
        theirs = (torch.zeros_like(ours) if theirs is None
                  else theirs.to(ours.device))
        difference = max(difference, float((theirs - ours).abs().max()))
        scale = max(scale, float(ours.abs().max()))
    advantages_trl = out["advantages"].detach().double().cpu().numpy()
    loss_trl, loss_book = (float(trl_loss.detach()),
                           float(result.loss.detach()))
    report: dict[str, Any] = {
        "advantages": float(np.abs(advantages_trl - advantages).max()),
        "loss_trl": loss_trl,
        "loss_book": loss_book,
        "loss": abs(loss_trl - loss_book),
        "gradient": difference,
        "gradient_scale": scale,
        "clip_fraction": result.metrics["clip_ratio/region_mean"],
        "frac_reward_zero_std": float(
            trainer._metrics["train"]["frac_reward_zero_std"][-1]),
        "silent_fraction": float(unanimous.mean()),
        "advantages_trl": advantages_trl,
        "advantages_book": np.asarray(advantages, dtype=float),
        "rewards": np.asarray(rewards, dtype=float),
    }
    if "kl" in result.metrics:
        report["kl"] = result.metrics["kl"]
    return report


def trl_testbed_run(profile: Any, recipe: Recipe | str, *, sft_dir: str | os.PathLike, rollout_batches: int,
                    workdir: str | os.PathLike, seed: int = 0, device: str | None = None) -> dict[str, Any]:
    """Train the testbed's warm-started model with TRL's ``GRPOTrainer`` (chapter 14).

    The profile's RL settings (:meth:`~stddial_book.profiles.Profile.train_config`) for ``recipe`` through
    :func:`grpo_config`, for ``rollout_batches`` rollouts of P·G samples from the profile's pool of
    prompts, with the book's verifier and the recipe's reward shaping as reward functions
    (:func:`trl_reward_funcs`) and the SFT model as the KL reference. What TRL cannot express
    (:func:`trl_gaps`; for DAPO, dynamic sampling) is left out: the run is what TRL can do.

    Returns:
        A dict: ``logs``, one record per rollout with TRL's metrics for it (``reward``, ``reward_std``,
        ``frac_reward_zero_std``, ``completions/mean_length``, ``completions/clipped_ratio``);
        ``history`` (TRL's per-step log); ``wall_s`` (the time of ``trainer.train()``);
        ``optimizer_steps``; ``settings`` (the GRPOConfig keywords used); ``trl_version``.
    """
    from .experiments import load_model_from
    from .model import make_tokenizer
    from .profiles import Profile
    from .train import make_problems

    if not isinstance(profile, Profile):
        raise TypeError(f"profile must be a stddial_book.profiles.Profile (e.g. active_profile()); got "
                        f"{type(profile).__name__}.")
    recipe = as_recipe(recipe)
    rollout_batches = check_int(rollout_batches, "rollout_batches", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    for name, value in (("sft_dir", sft_dir), ("workdir", workdir)):
        if not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"{name} must be a directory path (str or Path); got {type(value).__name__}.")
    if device is not None and not isinstance(device, str):
        raise TypeError(f"device must be a string such as 'cpu' or 'cuda', or None; got {type(device).__name__}.")
    batch = profile.train["prompts_per_step"] * profile.train["group_size"]
    config = profile.train_config(recipe, seed, sample_budget=rollout_batches * batch)
    reward_funcs = trl_reward_funcs(recipe, max_new_tokens=config.max_new_tokens)
    trl = _import_trl("trl_testbed_run")
    from datasets import Dataset

    device = device or profile.device
    workdir = Path(workdir)
    model = load_model_from(profile, sft_dir, device=device)
    train_problems, _ = make_problems(profile.task_config())
    pool = train_problems if config.pool_size is None else train_problems[:config.pool_size]
    dataset = Dataset.from_dict({"prompt": [p.prompt for p in pool], "answer": [p.answer for p in pool]})
    with _quiet():
        if recipe.kl_coef > 0:  # the KL reference is the starting model, as in the book's trainer
            model.config._name_or_path = _save_reference(model, workdir / "reference")
        args = grpo_config(config, workdir / "trl", use_cpu=device.split(":", 1)[0] == "cpu", report_to="none",
                           save_strategy="no", logging_steps=1, disable_tqdm=True, log_completions=False,
                           data_seed=seed, dataloader_num_workers=0, dataloader_pin_memory=False)
        trainer = trl.GRPOTrainer(model=model, reward_funcs=reward_funcs, args=args, train_dataset=dataset,
                                  processing_class=make_tokenizer())
    _quiet_trainer(trainer)
    logs: list[dict[str, float]] = []
    generate_and_score = trainer._generate_and_score_completions

    @functools.wraps(generate_and_score)
    def recorded(inputs: Any) -> Any:
        out = generate_and_score(inputs)
        metrics = trainer._metrics["train"]
        logs.append({name: float(metrics[name][-1]) for name in
                     ("reward", "reward_std", "frac_reward_zero_std", "completions/mean_length",
                      "completions/clipped_ratio") if metrics.get(name)})
        return out

    trainer._generate_and_score_completions = recorded
    with _quiet():
        start = time.perf_counter()
        trainer.train()
        wall = time.perf_counter() - start
    return {"logs": logs, "history": list(trainer.state.log_history), "wall_s": wall,
            "optimizer_steps": int(trainer.state.global_step), "settings": trl_settings_for(config),
            "trl_version": trl.__version__}

