"""The dial in TRL: a book recipe as trl.GRPOConfig settings, and what TRL cannot express (chapter 14)."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from stddial_book.core.checks import check_int
from stddial_book.theory.recipes import Recipe, as_recipe

__all__ = [
    "TRL_CHECKED_VERSION",
    "TRL_STD_EPS",
    "TRL_LOSS_TYPES",
    "TRLGap",
    "trl_settings",
    "trl_settings_for",
    "trl_gaps",
    "trl_equivalent_recipe",
    "reward_settings",
    "grpo_config",
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
        knob: the :class:`~stddial_book.theory.recipes.Recipe` field (or ``minibatches``, the schedule).
        book: what the book's recipe does.
        trl: what TRL does instead.
        effect: what follows for the update, in numbers where there is one.
    """

    knob: str
    book: str
    trl: str
    effect: str


def _check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(
            f"{name} must be True or False; got {type(value).__name__} {' '.join(repr(value).split())[:40]}."
        )
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
_BOOL_SETTINGS = (
    "bf16",
    "fp16",
    "use_bias_correction_kl",
    "mask_truncated_completions",
    "activation_checkpointing",
    "gradient_checkpointing",
    "use_cpu",
    "use_vllm",
    "log_completions",
    "disable_tqdm",
)


def _check_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Refuse a ``GRPOConfig`` keyword of the wrong type or outside its range, naming it (TRL itself would
    take the string "1e-5" or NaN as a learning rate and fail, or train wrongly, much later)."""
    for name, value in settings.items():
        if name in _BOOL_SETTINGS and not isinstance(value, (bool, np.bool_)):
            raise TypeError(
                f"GRPOConfig setting {name} must be True or False; got {type(value).__name__} "
                f"{' '.join(repr(value).split())[:40]}."
            )
        rule = _NUMERIC_SETTINGS.get(name)
        if rule is None:
            continue
        kind, low, low_in, high, high_in, optional = rule
        if value is None and optional:
            continue
        what = "a whole number" if kind == "int" else "a number"
        if (
            isinstance(value, (bool, np.bool_))
            or not isinstance(value, (int, float, np.integer, np.floating))
            or (kind == "int" and isinstance(value, (float, np.floating)) and not float(value).is_integer())
        ):
            raise TypeError(
                f"GRPOConfig setting {name} must be {what}{' or None' if optional else ''}; got "
                f"{type(value).__name__} {' '.join(repr(value).split())[:40]}. Pass e.g. {name}={_example(name)} "
                "(a number, not text)."
            )
        bounds = []
        if low is not None:
            bounds.append(f"{'>=' if low_in else '>'} {low:g}")
        if high is not None:
            bounds.append(f"{'<=' if high_in else '<'} {high:g}")
        inside = (
            math.isfinite(value)
            and (low is None or (value >= low if low_in else value > low))
            and (high is None or (value <= high if high_in else value < high))
        )
        if name == "max_steps" and value in (0,):
            inside = False
        if not inside:
            extra = " (or -1: train by epochs)" if name == "max_steps" else ""
            raise ValueError(
                f"GRPOConfig setting {name} must be a finite number {' and '.join(bounds)}{extra}; got "
                f"{value!r}. Pass e.g. {name}={_example(name)}."
            )
    return settings


def _example(name: str) -> str:
    """A valid value of a numeric GRPOConfig setting, for error messages."""
    return {
        "learning_rate": "1e-5",
        "max_grad_norm": "1.0",
        "temperature": "1.0",
        "top_p": "1.0",
        "beta": "0.04",
        "epsilon": "0.2",
        "epsilon_high": "0.28",
        "num_generations": "8",
        "max_steps": "100",
        "seed": "0",
    }.get(name, "1")


def _check_temperature(value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(
            f"temperature must be a number; got {type(value).__name__} {' '.join(repr(value).split())[:40]}."
        )
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"temperature must be a finite number > 0; got {value!r}.")
    return float(value)


def _schedule(
    group_size: int, prompts_per_step: int, num_minibatches: int, micro_batch_size: int | None, num_processes: int
) -> dict[str, int]:
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


def trl_settings(
    recipe: Recipe | str,
    *,
    group_size: int,
    max_new_tokens: int,
    prompts_per_step: int = _DEFAULT_PROMPTS_PER_STEP,
    num_minibatches: int = _DEFAULT_NUM_MINIBATCHES,
    micro_batch_size: int | None = None,
    num_processes: int = 1,
    temperature: float = 1.0,
) -> dict[str, Any]:
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
        recipe: a :class:`~stddial_book.theory.recipes.Recipe` or a preset name
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
        group_size, "group_size", minimum=2, hint="A group of one sample has no spread to learn from."
    )
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1, hint="It is L_max, the generation cap.")
    prompts_per_step = check_int(prompts_per_step, "prompts_per_step", minimum=1)
    num_minibatches = check_int(num_minibatches, "num_minibatches", minimum=1)
    if micro_batch_size is not None:
        micro_batch_size = check_int(micro_batch_size, "micro_batch_size", minimum=1)
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
    settings.update(_schedule(group_size, prompts_per_step, num_minibatches, micro_batch_size, num_processes))
    return _check_settings(settings)


def trl_settings_for(config: Any, *, num_processes: int = 1) -> dict[str, Any]:
    """:func:`trl_settings` for a :class:`~stddial_book.rl.configs.TrainConfig`, plus its optimizer and run length.

    Adds AdamW at the config's constant learning rate without weight decay, its gradient-norm clip,
    ``max_steps`` = the rollout batches its sample budget buys × its optimizer steps per batch, the
    seed, fp32 (GRPOConfig defaults to bf16) and no activation checkpointing (GRPOConfig turns it on by
    default): what the book's trainer does (chapters 9-13, 14).
    """
    from stddial_book.rl.configs import TrainConfig

    if not isinstance(config, TrainConfig):
        raise TypeError(
            f"config must be a stddial_book.rl.configs.TrainConfig (e.g. profile.train_config('grpo')); got "
            f"{type(config).__name__}. For a bare recipe use trl_settings(recipe, group_size=..., "
            "max_new_tokens=...)."
        )
    settings = trl_settings(
        config.recipe,
        group_size=config.group_size,
        max_new_tokens=config.max_new_tokens,
        prompts_per_step=config.prompts_per_step,
        num_minibatches=config.num_minibatches,
        micro_batch_size=config.micro_batch_size,
        num_processes=num_processes,
        temperature=config.temperature,
    )
    rollouts = math.ceil(config.sample_budget / (config.prompts_per_step * config.group_size))
    settings.update(
        {
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
        }
    )
    return _check_settings(settings)


def _smallest_mixed_std(group_size: int, gap: float) -> float:
    """Bessel's std of a group of two reward values ``gap`` apart with one sample on one side: gap/√G."""
    return gap / math.sqrt(group_size)


def trl_gaps(
    recipe: Recipe | str,
    *,
    group_size: int = 8,
    num_minibatches: int = _DEFAULT_NUM_MINIBATCHES,
    use_vllm: bool = False,
) -> list[TRLGap]:
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
    group_size = check_int(
        group_size, "group_size", minimum=2, hint="A group of one sample has no spread to learn from."
    )
    num_minibatches = check_int(num_minibatches, "num_minibatches", minimum=1)
    use_vllm = _check_bool(use_vllm, "use_vllm")
    gaps: list[TRLGap] = []
    if recipe.dynamic_sampling:
        gaps.append(
            TRLGap(
                "dynamic_sampling",
                "drops groups whose samples all agree (σ = 0) and refills the batch with new prompts",
                "keeps them with advantage 0 and only logs their share as frac_reward_zero_std",
                "A batch whose silent fraction is f holds (1 − f) of the informative groups DAPO's would; under the "
                "token-level loss the silent groups' tokens also count in the normaliser, so every informative token "
                "weighs less, by the informative share of the tokens. Filtering needs a custom rollout_func or "
                "sampler; TRL has no refill.",
            )
        )
    if recipe.scale_std and recipe.std_correction == 0:
        factor = math.sqrt((group_size - 1) / group_size)
        effect = (
            f"Every mixed group's advantage, and so the advantage term of the loss, is multiplied by "
            f"sqrt((G − 1)/G) = {factor:.4f} at G = {group_size}; the KL term is not. "
        )
        if recipe.kl_coef > 0:
            effect += (
                f"Against the advantage term the KL term then weighs as β/{factor:.4f} = "
                f"{recipe.kl_coef / factor:.4g} instead of β = {recipe.kl_coef:g}, and Adam's "
                "normalisation removes only the common scale: like a β raised by sqrt(G/(G − 1))."
            )
        else:
            effect += "With β = 0 that is one constant on the whole loss, which Adam's normalisation all but removes."
        gaps.append(
            TRLGap(
                "std_correction",
                "divides by the population std σ (ddof 0), which makes the identity exact",
                "divides by Bessel's sample std s = σ·sqrt(G/(G − 1)) (ddof 1)",
                effect,
            )
        )
    if recipe.scale_std and recipe.std_eps != TRL_STD_EPS:
        spread = recipe.reward_correct - recipe.reward_wrong
        s_min = _smallest_mixed_std(group_size, spread)
        relative = abs(TRL_STD_EPS - recipe.std_eps) / (s_min + min(TRL_STD_EPS, recipe.std_eps))
        gaps.append(
            TRLGap(
                "std_eps",
                f"adds {recipe.std_eps:g} to the std",
                f"adds {TRL_STD_EPS:g} (fixed in the trainer, not a GRPOConfig setting)",
                f"A group's weight becomes s/(s + {TRL_STD_EPS:g}) of the eps-free one; for binary rewards "
                f"{spread:g} apart the smallest mixed-group s is {s_min:.3f} at G = {group_size}, so the change is "
                f"at most {relative:.1e} relative. Rewards on a finer scale have a smaller s and a larger change"
                + (": the length penalty makes reward gaps as small as 1/L_cache." if recipe.overlong_penalty else "."),
            )
        )
    if recipe.overlong_filter:
        gaps.append(
            TRLGap(
                "overlong_filter",
                "masks samples cut off at L_max out of the loss and out of their group's mean and std",
                "mask_truncated_completions masks them out of the loss only; their rewards still shape the group's "
                "mean and std",
                _overlong_statistics_effect(recipe, group_size),
            )
        )
    if num_minibatches > 1:
        effect = (
            "The per-step loss matches the book's only in expectation over the shuffle; summed over the "
            "steps of a batch, the per-sequence (GRPO) and L_max (Dr. GRPO) losses still weigh every "
            "completion as the book does."
        )
        if recipe.loss_aggregation == "token-mean":
            effect = (
                "Each step's token-level loss is divided by the generation batch's tokens over the number of "
                "optimizer steps per batch instead of the step's own token count, so a step with more tokens "
                "than average weighs more; equal when all steps hold the same number of tokens. " + effect
            )
        gaps.append(
            TRLGap(
                "minibatches",
                "splits a rollout batch into optimizer steps of whole groups",
                "shuffles the completions of the generation batch and splits them into steps_per_generation slices",
                effect,
            )
        )
    if use_vllm:
        gaps.append(
            TRLGap(
                "sampler",
                "takes π_old from its sampler, which is the training model itself",
                "with use_vllm=True recomputes π_old with the training model and, by default "
                '(vllm_importance_sampling_correction=True, mode "sequence_mask"), multiplies each '
                "completion's policy loss by its ratio π_train/π_vLLM, zeroing completions whose ratio "
                "leaves [vllm_importance_sampling_clip_min, vllm_importance_sampling_clip_max] (max 3)",
                "An importance-sampling correction for the numerical mismatch between vLLM and the trainer, "
                "which the book's loss does not have; set vllm_importance_sampling_correction=False to leave it "
                "out, or use_vllm=False (the default) to sample with the training model.",
            )
        )
    return gaps


def _overlong_statistics_effect(recipe: Recipe, group_size: int) -> str:
    """What TRL's group statistics over cut-off samples do, with a worked group when G allows one."""
    from stddial_book.theory.recipes import group_advantages

    low = (
        "the wrong answer's reward plus the full length penalty, the lowest there is"
        if recipe.overlong_penalty
        else "the wrong answer's reward"
    )
    text = (
        "In a group with cut-off samples TRL measures the kept samples against a baseline that includes the "
        f"cut-off ones' rewards ({low}), so the kept samples' advantages rise"
    )
    if not 4 <= group_size <= 4096:  # the worked group needs 4 samples; beyond 4096 it would only cost memory
        return text + "; with no sample cut off the two agree."
    cut = recipe.reward_wrong - (1.0 if recipe.overlong_penalty else 0.0)
    rewards = np.array([recipe.reward_correct, recipe.reward_wrong, recipe.reward_wrong] + [cut] * (group_size - 3))
    valid = np.arange(group_size) < 3
    same_std = trl_equivalent_recipe(recipe)  # the same std convention on both sides: only the filter differs
    theirs = float(group_advantages(rewards, group_size, same_std)[1])
    ours = float(group_advantages(rewards, group_size, same_std, valid=valid)[1])
    return (
        text + f": at G = {group_size}, with 1 right, 2 short wrong and {group_size - 3} cut-off samples, a short "
        f"wrong answer gets A = {theirs:+.3f} in TRL and {ours:+.3f} in the book's trainer (both with TRL's "
        "std). With no sample cut off the two agree; the one-batch check takes TRL's statistics."
    )


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
    name = recipe.name if recipe.name.endswith("(TRL)") else f"{recipe.name} (TRL)"
    return recipe.replace(name=name, **changes)


def _overlong_cache(recipe: Recipe, max_new_tokens: int) -> int:
    """L_cache in tokens, rounded as :attr:`stddial_book.rl.configs.TrainConfig.overlong_cache` rounds it."""
    return int(round(recipe.overlong_cache_fraction * max_new_tokens))


def reward_settings(recipe: Recipe | str, *, max_new_tokens: int) -> dict[str, Any]:
    """The reward side of ``recipe`` for TRL's reward functions (chapter 14).

    Returns ``reward_correct`` and ``reward_wrong`` (what the verifier's 1 and 0 become; DAPO's paper used
    ±1) and ``soft_overlong_punishment``: ``None``, or the keyword arguments of
    ``trl.rewards.get_soft_overlong_punishment`` (``max_completion_len`` = L_max, ``soft_punish_cache`` =
    L_cache), whose penalty equals :func:`stddial_book.rl.sampling.overlong_penalty` for completions up to
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
    return {
        "reward_correct": float(recipe.reward_correct),
        "reward_wrong": float(recipe.reward_wrong),
        "soft_overlong_punishment": overlong,
    }


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
        raise ValueError(
            f"TRL {trl.__version__} has no GRPOConfig setting {', '.join(unknown)}; the bridge was "
            f"checked against TRL {TRL_CHECKED_VERSION}."
        )
    return trl.GRPOConfig(output_dir=str(output_dir), **kwargs)


def grpo_config(
    config: Any, output_dir: str | os.PathLike, *, exact: bool = False, num_processes: int = 1, **overrides: Any
) -> Any:
    """A ``trl.GRPOConfig`` for a :class:`~stddial_book.rl.configs.TrainConfig` (:func:`trl_settings_for`).

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
        gaps = trl_gaps(
            config.recipe,
            group_size=config.group_size,
            num_minibatches=config.num_minibatches,
            use_vllm=bool(overrides.get("use_vllm", False)),
        )
        if gaps:
            listed = "; ".join(f"{gap.knob}: the book {gap.book}, TRL {gap.trl}" for gap in gaps)
            raise ValueError(
                f"TRL cannot express {config.recipe.name!r} exactly ({listed}). "
                f"{_exact_fix({gap.knob for gap in gaps})}"
            )
    return _grpo_config_from(settings, output_dir, overrides)


def _exact_fix(knobs: set[str]) -> str:
    """What to change so that ``grpo_config(..., exact=True)`` accepts a config with these gaps."""
    fixes = []
    if knobs & {"dynamic_sampling", "std_correction", "std_eps"}:
        fixes.append("recipe=trl_equivalent_recipe(recipe)")
    if "overlong_filter" in knobs:
        fixes.append(
            "overlong_filter=False in that recipe (TRL keeps cut-off samples in their group's mean "
            "and std; recipe.replace(overlong_filter=False))"
        )
    if "minibatches" in knobs:
        fixes.append("num_minibatches=1")
    if "sampler" in knobs:
        fixes.append("use_vllm=False")
    return f"For a config TRL runs exactly use {', '.join(fixes)}; or exact=False."
