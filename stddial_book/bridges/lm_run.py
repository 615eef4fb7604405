"""GRPO, Dr. GRPO and DAPO on a real language model with TRL's GRPOTrainer and LoRA (chapter 15).

:func:`run_lm` trains one recipe, in TRL's own settings (:func:`~stddial_book.bridges.trl_settings.trl_settings`:
``scale_rewards``, ``loss_type``, the clip range, DAPO's ``mask_truncated_completions``), with LoRA adapters
(``peft``; Hu et al., 2021), answers verified by ``math-verify`` and the dial's diagnostics recorded every
step (:class:`~stddial_book.bridges.dial_diagnostics.DialDiagnostics`). What TRL cannot express of the
recipe, DAPO's dynamic sampling first, is left out and listed in the result (:func:`~stddial_book.bridges.trl_differences.trl_gaps`).
:func:`record_lm` runs the three recipes and writes their records: the call a reader makes on a GPU.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from stddial_book.bridges.dial_diagnostics import DialDiagnostics
from stddial_book.bridges.lm_data import load_model_and_tokenizer, load_prompts
from stddial_book.bridges.lm_rewards import CorrectnessReward, FormatReward, Recorded
from stddial_book.bridges.lm_setup import (
    LMRunConfig,
    detect_precision,
    memory_estimate_gib,
    process_layout,
    run_precision,
    time_estimate,
)
from stddial_book.bridges.trl_check import quiet_trainer as _quiet_trainer
from stddial_book.bridges.trl_check import quiet_transformers as _quiet
from stddial_book.bridges.trl_check import random_states_kept as _random_states_kept
from stddial_book.bridges.trl_differences import trl_gaps
from stddial_book.bridges.trl_keywords import TRL_CHECKED_VERSION
from stddial_book.bridges.trl_keywords import grpo_config_from as _grpo_config_from
from stddial_book.bridges.trl_keywords import import_trl as _import_trl
from stddial_book.bridges.trl_rewards import reward_settings
from stddial_book.bridges.trl_settings import trl_settings
from stddial_book.core.outdir import claim_dir
from stddial_book.theory.recipes import RECIPES, as_recipe

__all__ = ["lm_reward_funcs", "lm_grpo_settings", "run_lm", "record_lm"]


def import_lm_extras() -> Any:
    """``peft``, or an ImportError naming the extra that brings it and ``math-verify``."""
    try:
        import math_verify  # noqa: F401
        import peft
    except ImportError as err:
        raise ImportError(
            f"the language-model run needs peft and math-verify ({err.name} is missing): "
            "pip install 'stddial-book[lm]' (or pip install peft math-verify)."
        ) from None
    return peft


def lm_reward_funcs(recipe: Any, config: LMRunConfig) -> tuple[dict[str, Any], list[float]]:
    """The run's reward functions by name (the verifier first) and TRL's ``reward_weights`` for them.

    The verifier gives the recipe's two values (DAPO's ±1); the format reward enters with
    ``config.format_weight``; DAPO adds TRL's soft overlong punishment (Yu et al., 2025) with weight 1.
    ``recipe`` is a preset name or a ``Recipe``; ``config`` the :class:`~stddial_book.bridges.lm_setup.LMRunConfig`,
    whose ``verifier`` and ``max_new_tokens`` (the overlong punishment's length) are read too.
    """
    settings = reward_settings(recipe, max_new_tokens=config.max_new_tokens)
    funcs: dict[str, Any] = {
        "correctness": CorrectnessReward(settings["reward_correct"], settings["reward_wrong"], config.verifier),
        "format": FormatReward(),
    }
    weights = [1.0, float(config.format_weight)]
    if settings["soft_overlong_punishment"] is not None:
        rewards = _import_trl("the soft overlong punishment", "trl.rewards")
        funcs["overlong"] = Recorded(rewards.get_soft_overlong_punishment(**settings["soft_overlong_punishment"]))
        weights.append(1.0)
    return funcs, weights


def lm_grpo_settings(
    recipe: Any, config: LMRunConfig, precision: dict[str, Any], num_processes: int | None = None
) -> dict[str, Any]:
    """The ``GRPOConfig`` keywords of the run: :func:`trl_settings` for the recipe (one optimizer step per
    generation batch), the optimizer, the run length, precision and quiet logging. ``num_processes``: the
    data-parallel processes (None: this launch's, :func:`~stddial_book.bridges.lm_setup.process_layout`); a
    step stays P·G completions, ``micro_batch_size`` of them a pass over all processes, so it must divide by
    the number of processes (a ValueError says so).

    ``recipe`` is a preset name or a ``Recipe``. ``config`` is the
    :class:`~stddial_book.bridges.lm_setup.LMRunConfig`: its sizes and ``temperature`` go through
    :func:`trl_settings`, and ``learning_rate``, ``max_steps``, ``seed`` (also ``data_seed``) and
    ``activation_checkpointing`` are set under the same names. ``precision`` is
    :func:`~stddial_book.bridges.lm_setup.precision_for`'s dict: its ``bf16`` and ``fp16`` become
    ``GRPOConfig``'s, and device ``"cpu"`` sets ``use_cpu``."""
    processes = process_layout()["world_size"] if num_processes is None else num_processes
    settings = trl_settings(
        recipe,
        group_size=config.group_size,
        max_new_tokens=config.max_new_tokens,
        prompts_per_step=config.prompts_per_step,
        num_minibatches=1,
        micro_batch_size=config.micro_batch_size,
        num_processes=processes,
        temperature=config.temperature,
    )
    if processes > 1:  # every LoRA weight gets its gradient each pass: DDP need not search for unused ones
        settings["ddp_find_unused_parameters"] = False
    settings.update(
        learning_rate=config.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_steps=config.max_steps,
        seed=config.seed,
        data_seed=config.seed,
        bf16=precision["bf16"],
        fp16=precision["fp16"],
        use_cpu=precision["device"] == "cpu",
        activation_checkpointing=config.activation_checkpointing,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        log_completions=False,
        dataloader_num_workers=0,
        dataloader_pin_memory=False,
    )
    return settings


def _lora_config(config: LMRunConfig) -> Any:
    """LoRA on every linear layer of the model (not the output head)."""
    peft = import_lm_extras()
    return peft.LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=0.0,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )


def _memory_check(config: LMRunConfig, model: Any, precision: dict[str, Any]) -> dict[str, float]:
    """The memory estimate before training; a warning line when it exceeds the GPU's memory."""
    import torch

    dtype_bytes = torch.finfo(getattr(torch, precision["dtype"])).bits // 8
    num_params = sum(p.numel() for p in model.parameters())
    estimate = memory_estimate_gib(config, model.config, num_params, dtype_bytes)
    if precision["device"] == "cuda":
        total = torch.cuda.get_device_properties(0).total_memory / 2.0**30
        estimate["device_gib"] = total
        if estimate["total"] > 0.9 * total and process_layout()["rank"] == 0:  # one warning, not one a process
            print(
                f"warning: the run is estimated to need {estimate['total']:.1f} GiB of the GPU's {total:.1f} GiB; "
                "lower micro_batch_size or max_new_tokens.",
                flush=True,
            )
    return estimate


def build_trainer(
    recipe: Any,
    config: LMRunConfig,
    workdir: Path,
    precision: dict[str, Any],
    print_every: int,
    overrides: dict[str, Any] | None = None,
):
    """The model, prompts, reward functions, ``GRPOTrainer`` and the attached dial callback; ``overrides``
    go over :func:`lm_grpo_settings` (the recorded runs' checkpoints)."""
    trl = _import_trl("run_lm")
    lora = _lora_config(config)
    model, tokenizer = load_model_and_tokenizer(config.model_id, precision["dtype"])
    prompts = load_prompts(
        config.dataset_id, config.dataset_config, config.split, config.num_prompts, config.system_prompt
    )
    memory = _memory_check(config, model, precision)
    funcs, weights = lm_reward_funcs(recipe, config)
    settings = {**lm_grpo_settings(recipe, config, precision), **(overrides or {})}
    with _quiet():
        args = _grpo_config_from(settings, workdir / "trl", {"reward_weights": weights})
        trainer = trl.GRPOTrainer(
            model=model,
            reward_funcs=list(funcs.values()),
            args=args,
            train_dataset=prompts,
            processing_class=tokenizer,
            peft_config=lora,
        )
    _quiet_trainer(trainer)
    callback = DialDiagnostics(recipe=recipe, group_size=config.group_size, print_every=print_every, trainer=trainer)
    trainer.add_callback(callback)
    return (
        trainer,
        callback,
        {"memory_gib": memory, "settings": settings, "num_params": sum(p.numel() for p in model.parameters())},
    )


def run_lm(recipe: Any, config: LMRunConfig, workdir: str | os.PathLike, *, print_every: int = 0) -> dict[str, Any]:
    """Train ``config.model_id`` on ``config.dataset_id`` with TRL for one recipe ("grpo", "dr_grpo", "dapo").

    Device and dtype follow the machine (:func:`~stddial_book.bridges.lm_setup.detect_precision`); nothing
    names a device. ``recipe`` is a preset name or a ``Recipe``; ``config`` an
    :class:`~stddial_book.bridges.lm_setup.LMRunConfig`. ``workdir`` is claimed as the tool's (a new or empty
    directory); TRL writes into its ``trl`` folder. ``print_every`` prints the dial's progress line every that
    many optimizer steps (default 0: none). Returns a dict:
    ``records`` (the dial's diagnostics and progress, one per optimizer step), ``history`` (TRL's log),
    ``gaps`` (what TRL cannot express of the recipe), ``memory_gib`` (the estimate made before training),
    ``time_estimate`` (T4), ``precision``, ``settings``, ``wall_s``, ``config``, ``trl_version``.
    """
    recipe = as_recipe(recipe)
    if not isinstance(config, LMRunConfig):
        raise TypeError(
            f"config must be an LMRunConfig (colab_t4_config() or tiny_config(...)); got {type(config).__name__}."
        )
    trl = _import_trl("run_lm")
    workdir = claim_dir(workdir, "lm", flag="workdir")
    precision = run_precision(detect_precision(), config.dtype)
    with _random_states_kept():
        trainer, callback, info = build_trainer(recipe, config, workdir, precision, print_every)
        with _quiet():
            start = time.perf_counter()
            trainer.train()
            wall = time.perf_counter() - start
    return {
        "recipe": recipe.name,
        "records": callback.records,
        "history": list(trainer.state.log_history),
        "gaps": [dataclasses.asdict(g) for g in trl_gaps(recipe, group_size=config.group_size, num_minibatches=1)],
        "time_estimate": time_estimate(config, info["num_params"]),
        "precision": precision,
        "wall_s": wall,
        "config": dataclasses.asdict(config),
        "trl_version": trl.__version__,
        "trl_checked_version": TRL_CHECKED_VERSION,
        **info,
    }


def record_lm(
    out: str | os.PathLike,
    config: LMRunConfig | None = None,
    recipes: tuple[str, ...] = RECIPES,
    *,
    print_every: int = 5,
) -> dict[str, Any]:
    """Run each recipe on ``config`` (the Colab T4 run by default) and write ``out/<recipe>.json``.

    The call to make in Colab on a GPU; each recipe gets its own working directory under ``out``.
    ``recipes`` are the preset names to run, in order (default all three); ``print_every`` prints the dial's
    progress line every that many optimizer steps (default 5; 0: none). Returns the results by recipe.
    """
    from stddial_book.bridges.lm_setup import colab_t4_config

    config = colab_t4_config() if config is None else config
    out = claim_dir(out, "lm-record", flag="out")
    results = {}
    for name in recipes:
        result = run_lm(name, config, out / f"{name}-work", print_every=print_every)
        (out / f"{name}.json").write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
        results[name] = result
    return results
