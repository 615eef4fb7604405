"""The dial in TRL: a book recipe as trl.GRPOConfig settings (chapter 14).

What TRL cannot express is in :mod:`stddial_book.bridges.trl_differences`, the reward side in
:mod:`stddial_book.bridges.trl_rewards`; their public names are importable from here too.
"""

from __future__ import annotations

import math
import os
from typing import Any

from stddial_book.bridges.trl_differences import TRL_STD_EPS, TRLGap, trl_equivalent_recipe, trl_gaps  # noqa: F401
from stddial_book.bridges.trl_keywords import (
    DEFAULT_NUM_MINIBATCHES,
    DEFAULT_PROMPTS_PER_STEP,
    TRL_CHECKED_VERSION,  # noqa: F401
    check_bool,
    check_grpo_settings,
    check_temperature,
    grpo_config_from,
)
from stddial_book.bridges.trl_rewards import reward_settings  # noqa: F401
from stddial_book.core.checks import check_int
from stddial_book.theory.recipes import Recipe, as_recipe

# TRL_CHECKED_VERSION, TRL_STD_EPS, TRLGap, trl_gaps, trl_equivalent_recipe and reward_settings are importable
# from here too, but listed in the __all__ of the modules that define them only: one public name, one home, so
# that `from stddial_book import <name>` finds each (and the API reference documents each once).
__all__ = [
    "TRL_LOSS_TYPES",
    "DEFAULT_PER_DEVICE_BATCH",
    "trl_settings",
    "trl_settings_for",
    "grpo_config",
]


#: The book's loss aggregation → TRL's ``loss_type``. TRL's "grpo" is the per-sequence token mean,
#: "dr_grpo" the token sum over (completions × ``max_completion_length``), "dapo" the token sum over
#: the unmasked tokens of the generation batch (rescaled per optimizer step).
TRL_LOSS_TYPES: dict[str, str] = {
    "seq-mean-token-mean": "grpo",
    "seq-mean-token-sum-norm": "dr_grpo",
    "token-mean": "dapo",
}


#: The per-device batch :func:`trl_settings` chooses when none is given: TRL's own default
#: ``per_device_train_batch_size`` (``GRPOConfig``), the batch TRL's examples train real models with.
DEFAULT_PER_DEVICE_BATCH = 8


def _default_micro_batch(minibatch: int, num_processes: int) -> int:
    """The samples of one forward/backward pass over all processes when ``micro_batch_size`` is None: on each
    process the largest divisor of its share of the optimizer step that is at most
    :data:`DEFAULT_PER_DEVICE_BATCH`; the rest of the step goes into gradient accumulation."""
    if minibatch % num_processes:
        raise ValueError(
            f"the optimizer step of {minibatch} samples does not split over num_processes={num_processes} "
            "processes; choose prompts_per_step and num_minibatches so that it does."
        )
    share = minibatch // num_processes
    per_device = max(d for d in range(1, min(share, DEFAULT_PER_DEVICE_BATCH) + 1) if share % d == 0)
    return per_device * num_processes


def _schedule(
    group_size: int, prompts_per_step: int, num_minibatches: int, micro_batch_size: int | None, num_processes: int
) -> dict[str, int]:
    """TRL's batch settings for P prompts × G samples a rollout, used for ``num_minibatches`` optimizer steps.

    TRL generates ``generation_batch_size`` completions at once and cuts them into
    ``steps_per_generation`` = generation batch / (per-device batch × processes) slices, one per call of
    ``training_step``; the optimizer steps every ``gradient_accumulation_steps`` slices. So a minibatch
    (one optimizer step) is ``gradient_accumulation_steps`` slices of ``per_device_train_batch_size`` on
    each process. Without ``micro_batch_size`` the slice follows :func:`_default_micro_batch`.
    """
    batch = prompts_per_step * group_size
    if prompts_per_step % num_minibatches:
        raise ValueError(
            f"a rollout batch of prompts_per_step={prompts_per_step} groups does not split into "
            f"num_minibatches={num_minibatches} optimizer steps of whole groups; pick a divisor of {prompts_per_step}."
        )
    minibatch = batch // num_minibatches
    micro = _default_micro_batch(minibatch, num_processes) if micro_batch_size is None else micro_batch_size
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
    prompts_per_step: int = DEFAULT_PROMPTS_PER_STEP,
    num_minibatches: int = DEFAULT_NUM_MINIBATCHES,
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
    is in :func:`~stddial_book.bridges.trl_differences.trl_gaps`; DAPO's reward values and length penalty go into
    reward functions (:func:`~stddial_book.bridges.trl_rewards.reward_settings`).

    ``recipe`` is a :class:`~stddial_book.theory.recipes.Recipe` or a preset
    name ("grpo", "dr_grpo", "dapo"). ``group_size`` is G, samples per
    prompt (``num_generations``), at least 2; ``max_new_tokens`` L_max, the
    generation cap (``max_completion_length``). ``prompts_per_step`` is P,
    groups per rollout batch (TrainConfig's default 32; the generation batch
    is P·G, ``generation_batch_size``); ``num_minibatches`` the optimizer
    steps per rollout batch (TrainConfig's default 2), which must divide P.
    ``micro_batch_size`` is the samples per forward/backward pass inside an
    optimizer step, over all processes (``per_device_train_batch_size``
    times ``num_processes``). None: on each process the largest divisor of
    its share of the step (P·G / num_minibatches / num_processes) that is at
    most 8 (TRL's own default per-device batch), the rest accumulated: at
    G = 12 and the defaults, 8 a pass, 24 passes a step, not 192 at once.
    ``num_processes`` is the data-parallel processes TRL runs on (default
    1); ``temperature`` the sampling temperature (1, the default, samples
    the policy itself).

    Raises:
        ValueError: an unknown preset, G < 2, or a batch that does not split
            into whole optimizer steps.
        TypeError: arguments of the wrong type.
    """
    recipe = as_recipe(recipe)
    sizes = _checked_sizes(
        group_size, max_new_tokens, prompts_per_step, num_minibatches, micro_batch_size, num_processes
    )
    return _mapped_settings(recipe, **sizes, temperature=check_temperature(temperature))


def _checked_sizes(
    group_size: Any,
    max_new_tokens: Any,
    prompts_per_step: Any,
    num_minibatches: Any,
    micro_batch_size: Any,
    num_processes: Any,
) -> dict[str, Any]:
    """The sizes of :func:`trl_settings` as whole numbers, checked in their order (G ≥ 2, the rest ≥ 1; no
    micro-batch size: None)."""
    return {
        "group_size": check_int(
            group_size, "group_size", minimum=2, hint="A group of one sample has no spread to learn from."
        ),
        "max_new_tokens": check_int(
            max_new_tokens, "max_new_tokens", minimum=1, hint="It is L_max, the generation cap."
        ),
        "prompts_per_step": check_int(prompts_per_step, "prompts_per_step", minimum=1),
        "num_minibatches": check_int(num_minibatches, "num_minibatches", minimum=1),
        "micro_batch_size": None
        if micro_batch_size is None
        else check_int(micro_batch_size, "micro_batch_size", minimum=1),
        "num_processes": check_int(num_processes, "num_processes", minimum=1),
    }


def _mapped_settings(
    recipe: Recipe,
    *,
    group_size: int,
    max_new_tokens: int,
    prompts_per_step: int,
    num_minibatches: int,
    micro_batch_size: int | None,
    num_processes: int,
    temperature: float,
) -> dict[str, Any]:
    """The mapping of :func:`trl_settings` on checked arguments: the recipe's objective, pure temperature
    sampling and the batch schedule (:func:`_schedule`) as ``GRPOConfig`` keywords (chapter 14)."""
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
    return check_grpo_settings(settings)


def trl_settings_for(config: Any, *, num_processes: int = 1) -> dict[str, Any]:
    """:func:`trl_settings` for a :class:`~stddial_book.rl.configs.TrainConfig`, plus its optimizer and run length.

    Adds AdamW at the config's constant learning rate without weight decay, its gradient-norm clip,
    ``max_steps`` = the rollout batches its sample budget buys × its optimizer steps per batch, the
    seed, fp32 (GRPOConfig defaults to bf16) and no activation checkpointing (GRPOConfig turns it on by
    default): what the book's trainer does (chapters 9-13, 14). Its passes are the config's: the whole
    optimizer step in one pass where its ``micro_batch_size`` is None (the book's tiny model; for a large
    one set ``micro_batch_size``, or call :func:`trl_settings`, whose default fits). ``config`` is that
    TrainConfig; ``num_processes`` the data-parallel processes TRL runs on (default 1).
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
        # the config's None is the book's trainer's: the whole optimizer step in one pass
        micro_batch_size=config.micro_batch_size
        or config.prompts_per_step * config.group_size // config.num_minibatches,
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
            "optim": {"adamw": "adamw_torch", "sgd": "sgd"}[getattr(config, "optimizer", "adamw")],
            "max_grad_norm": config.max_grad_norm,
            "max_steps": rollouts * config.num_minibatches,
            "seed": config.seed,
            "bf16": False,
            "fp16": False,
            "activation_checkpointing": False,
        }
    )
    return check_grpo_settings(settings)


def grpo_config(
    config: Any, output_dir: str | os.PathLike, *, exact: bool = False, num_processes: int = 1, **overrides: Any
) -> Any:
    """A ``trl.GRPOConfig`` for a :class:`~stddial_book.rl.configs.TrainConfig` (:func:`trl_settings_for`).

    ``overrides`` are further ``GRPOConfig`` settings (logging, ``use_cpu``, ...) and win over the
    mapping. With ``exact=True``, a recipe TRL cannot express (:func:`~stddial_book.bridges.trl_differences.trl_gaps`, at the config's group
    size and optimizer steps per rollout, and ``use_vllm`` if overridden) raises ``ValueError`` naming
    the gaps and the fix: :func:`~stddial_book.bridges.trl_differences.trl_equivalent_recipe`, without the overlong filter where the recipe
    has one (TRL keeps cut-off samples in their group's statistics), and one optimizer step per rollout.
    ``config`` is the TrainConfig; ``output_dir`` is ``GRPOConfig``'s, where TRL writes; ``num_processes`` the
    data-parallel processes TRL runs on (default 1).

    Raises:
        ImportError: TRL is not installed (the message says ``pip install trl``).
        ValueError: ``exact`` and a gap; a setting this TRL version does not have.
        TypeError: ``config`` is not a TrainConfig, ``output_dir`` not a path, ``exact`` not a bool.
    """
    settings = trl_settings_for(config, num_processes=num_processes)
    if not isinstance(output_dir, (str, os.PathLike)):
        raise TypeError(f"output_dir must be a directory path (str or Path); got {type(output_dir).__name__}.")
    if check_bool(exact, "exact"):
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
    return grpo_config_from(settings, output_dir, overrides)


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
