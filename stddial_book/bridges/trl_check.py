"""The book's update against TRL's GRPOTrainer on one batch, and a short TRL run on the testbed (chapter 14)."""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import random
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stddial_book.bridges.trl_batch import (
    BookTokens,
    book_rewards,
    book_tokens,
    check_batch,
    gradient_difference,
    reference_logprobs,
    truncated,
)
from stddial_book.bridges.trl_differences import trl_equivalent_recipe
from stddial_book.bridges.trl_keywords import TRL_CHECKED_VERSION, grpo_config_from, import_trl
from stddial_book.bridges.trl_rewards import reward_settings, trl_reward_funcs
from stddial_book.bridges.trl_settings import grpo_config, trl_settings, trl_settings_for
from stddial_book.core.checks import check_int
from stddial_book.theory.recipes import Recipe, as_recipe

__all__ = ["one_batch_check", "trl_testbed_run", "quiet_transformers", "random_states_kept", "quiet_trainer"]


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
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
def random_states_kept() -> Iterator[None]:
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


def quiet_trainer(trainer: Any) -> None:
    """No progress bars or printed logs from the Trainer (the chapters print their own numbers): removes the
    ``PrinterCallback`` and ``ProgressCallback`` of ``trainer``, a ``transformers`` Trainer."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


def _save_reference(model: Any, directory: Path) -> str:
    """Save ``model`` where TRL loads its KL reference from (it rebuilds the reference from a path)."""
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory, safe_serialization=True)
    return str(directory)


def _check_model(model: Any, name: str) -> None:
    if not (
        callable(getattr(model, "parameters", None))
        and hasattr(model, "config")
        and callable(getattr(model, "save_pretrained", None))
    ):
        raise TypeError(f"{name} must be a transformers causal LM (the testbed model); got {type(model).__name__}.")


def one_batch_check(
    recipe: Recipe | str,
    policy: Any,
    problems: Sequence[Any],
    completions: Sequence[Sequence[int]],
    *,
    group_size: int,
    max_new_tokens: int,
    workdir: str | os.PathLike,
    old_logprobs: Any = None,
    ref_model: Any = None,
    trl_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """TRL's code and the book's on one batch: how far advantages, loss and gradient differ (chapter 14).

    TRL side: a ``GRPOTrainer`` set by :func:`trl_settings` for ``recipe`` (one optimizer step on the
    whole batch), with :func:`trl_reward_funcs` as its rewards and only generation replaced by
    ``completions``; its own ``_generate_and_score_completions`` tokenises the prompts, scores the
    completions, takes advantages and the reference log-probs, and its ``_compute_loss`` gives the loss,
    whose gradient is taken. Book side: the verifier and the recipe's reward shaping,
    :func:`~stddial_book.theory.recipes.group_advantages` and :func:`~stddial_book.rl.losses.policy_loss` with
    :func:`trl_equivalent_recipe` (Shao et al., 2024; Liu et al., 2025; Yu et al., 2025 without dynamic
    sampling). ``policy`` itself is not changed: both sides work on copies.

    ``recipe`` is the book recipe (a preset name or a :class:`~stddial_book.theory.recipes.Recipe`); ``policy``
    the model being updated (π_θ). ``problems`` holds one :class:`~stddial_book.rl.tasks.Problem` per sample,
    each prompt G times in a row; ``completions`` per sample, its completion's token ids (EOS included when it
    ended, unpadded). ``group_size`` is G (TRL's ``num_generations``); ``max_new_tokens`` the L_max the
    completions were sampled with (``max_completion_length``). ``workdir`` is a directory for TRL's output
    (``output_dir`` is its ``trl`` folder) and the saved KL reference. ``old_logprobs`` is the (B, T ≥ longest
    completion) log π_old of the tokens, as the sampler recorded them (``Rollout.logprobs``); None: π_old = π_θ
    (ratio 1, as TRL with one step per rollout). ``ref_model`` is the KL reference (used when the recipe's
    β > 0); None: the policy itself. ``trl_overrides`` are GRPOConfig settings that replace the mapping's on
    TRL's side only (to show a trap, e.g. ``{"use_bias_correction_kl": True}``).

    Returns:
        A dict: ``advantages`` (max |A_TRL − A_book|), ``loss_trl``, ``loss_book``, ``loss`` (their
        |difference|), ``gradient`` (max |g_TRL − g_book| over all weights), ``gradient_scale`` (max
        |g_book|), ``clip_fraction`` (tokens where the clip was active), ``frac_reward_zero_std``
        (TRL's metric), ``silent_fraction`` (groups unanimous in correctness), ``kl`` (mean k3 KL
        over tokens, when β > 0), and the arrays ``advantages_trl``, ``advantages_book``, ``rewards``.
    """
    recipe = as_recipe(recipe)
    group_size, max_new_tokens = _check_arguments(policy, ref_model, group_size, max_new_tokens, workdir, trl_overrides)
    vocab_size = policy.get_input_embeddings().weight.shape[0]
    problems, completions = check_batch(problems, completions, old_logprobs, group_size, max_new_tokens, vocab_size)
    reward_settings(recipe, max_new_tokens=max_new_tokens)  # an empty overlong band fails before TRL starts
    trl = import_trl("one_batch_check")
    trl_policy, book_model = copy.deepcopy(policy), copy.deepcopy(policy)  # both sides work on copies
    reference = ref_model if ref_model is not None else policy
    with quiet_transformers(), random_states_kept():
        trainer = _one_batch_trainer(
            trl, recipe, trl_policy, reference, problems, group_size, max_new_tokens, Path(workdir), trl_overrides
        )
        return _one_batch_check(
            trainer, book_model, reference, recipe, problems, completions, group_size, max_new_tokens, old_logprobs
        )


def _check_arguments(
    policy: Any, ref_model: Any, group_size: Any, max_new_tokens: Any, workdir: Any, trl_overrides: Any
) -> tuple[int, int]:
    """Refuse what :func:`one_batch_check` cannot take, naming it; returns G and L_max as whole numbers."""
    _check_model(policy, "policy")
    if ref_model is not None:
        _check_model(ref_model, "ref_model")
    group_size = check_int(group_size, "group_size", minimum=2, hint="A group of one sample has no spread.")
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1, hint="It is L_max, the generation cap.")
    if not isinstance(workdir, (str, os.PathLike)):
        raise TypeError(f"workdir must be a directory path (str or Path); got {type(workdir).__name__}.")
    if trl_overrides is not None and not isinstance(trl_overrides, dict):
        raise TypeError(f"trl_overrides must be a dict of GRPOConfig settings; got {type(trl_overrides).__name__}.")
    return group_size, max_new_tokens


def _prompt_dataset(problems: Sequence[Any]) -> Any:
    """A ``datasets.Dataset`` of the problems' ``prompt`` and ``answer`` (the reward functions read ``answer``)."""
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [p.prompt for p in problems], "answer": [p.answer for p in problems]})


def _one_batch_trainer(
    trl: Any,
    recipe: Recipe,
    trl_policy: Any,
    reference: Any,
    problems: list[Any],
    group_size: int,
    max_new_tokens: int,
    workdir: Path,
    trl_overrides: dict[str, Any] | None,
) -> Any:
    """TRL's ``GRPOTrainer`` for the one-batch check: :func:`trl_settings` with one optimizer step on the whole
    batch, quiet, on ``trl_policy``'s device, with ``reference`` as its KL reference; ``trl_overrides`` on top."""
    from stddial_book.rl.model import make_tokenizer

    device = next(trl_policy.parameters()).device
    settings = trl_settings(
        recipe,
        group_size=group_size,
        max_new_tokens=max_new_tokens,
        prompts_per_step=len(problems) // group_size,
        num_minibatches=1,
        micro_batch_size=len(problems),  # the whole batch in one pass, as the book's step takes it
    )
    overrides = {
        "use_cpu": device.type == "cpu",
        "report_to": "none",
        "save_strategy": "no",
        "logging_steps": 1,
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
        "log_completions": False,
        "seed": 0,
        "learning_rate": 1e-4,
        "bf16": False,
        "fp16": False,
        "activation_checkpointing": False,
        **(trl_overrides or {}),
    }
    # TRL builds its KL reference from the path in the policy's config: point it at the reference's weights
    trl_policy.config._name_or_path = _save_reference(reference, workdir / "reference")
    trainer = trl.GRPOTrainer(
        model=trl_policy,
        args=grpo_config_from(settings, workdir / "trl", overrides),
        reward_funcs=trl_reward_funcs(recipe, max_new_tokens=max_new_tokens),
        train_dataset=_prompt_dataset(problems[::group_size]),
        processing_class=make_tokenizer(),
    )
    quiet_trainer(trainer)
    return trainer


def _one_batch_check(
    trainer: Any,
    book_model: Any,
    reference: Any,
    recipe: Recipe,
    problems: list[Any],
    completions: list[list[int]],
    group_size: int,
    max_new_tokens: int,
    old_logprobs: Any,
) -> dict[str, Any]:
    """The comparison itself (see :func:`one_batch_check`); ``trainer`` holds
    TRL's copy of the policy.
    """
    import torch

    from stddial_book.rl.losses import policy_loss
    from stddial_book.rl.rollout import completion_logprobs
    from stddial_book.rl.sampling import nonsilent_groups
    from stddial_book.theory.recipes import group_advantages

    _replace_generation(trainer, problems, completions)
    device = _ready_to_step(trainer, book_model)
    width = max(len(ids) for ids in completions)
    old = None if old_logprobs is None else old_logprobs[:, :width].detach().to(device)
    inputs = [{"prompt": p.prompt, "answer": p.answer} for p in problems]

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
    correct, rewards = book_rewards(recipe, problems, completions, max_new_tokens)
    advantages = group_advantages(rewards, group_size, book)
    tokens = book_tokens(problems, completions, device)  # prompt ids and mask, completion ids and mask
    logprobs = completion_logprobs(book_model, *tokens)
    ref = reference_logprobs(reference, tokens) if book.kl_coef > 0 else None
    old_book = logprobs.detach() if old is None else torch.where(tokens.mask, old, 0.0)
    result = policy_loss(
        logprobs,
        old_book,
        torch.as_tensor(advantages, device=device),
        tokens.mask,
        book,
        max_new_tokens=max_new_tokens,
        ref_logprobs=ref,
        truncated=truncated(completions, max_new_tokens, device),
    )
    result.loss.backward()

    unanimous = ~nonsilent_groups(correct, group_size)
    _check_same_batch(out, tokens)
    return _comparison(trainer, book_model, out, trl_loss, result, advantages, rewards, unanimous)


def _ready_to_step(trainer: Any, book_model: Any) -> Any:
    """Both models in training mode on TRL's device, with the trainer's state its training loop would set;
    returns the device."""
    # set by Trainer's training loop, which does not run here
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    book_model.to(next(trainer.model.parameters()).device).train()
    return next(book_model.parameters()).device


def _replace_generation(trainer: Any, problems: list[Any], completions: list[list[int]]) -> None:
    """Make ``trainer`` return the given completions instead of sampling, after checking that TRL tokenised
    the prompts as the book's :class:`~stddial_book.rl.model.CharCodec` does."""
    from stddial_book.rl.model import CharCodec

    codec = CharCodec()
    expected_prompts = [codec.encode(p.prompt) for p in problems]
    queue = list(completions)

    def generate(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        # TRL's tokenisation of the prompts must be the book's; then the
        # given completions stand in for sampling
        if [list(ids) for ids in prompt_ids] != expected_prompts:
            raise RuntimeError(
                "TRL tokenised the prompts differently from the book's "
                "CharCodec (a chat template or special tokens?); the bridge "
                f"was checked against TRL {TRL_CHECKED_VERSION}: install "
                f"trl=={TRL_CHECKED_VERSION}."
            )
        return [queue.pop(0) for _ in prompt_ids], None

    trainer._generate_single_turn = generate


def _check_same_batch(out: dict[str, Any], tokens: BookTokens) -> None:
    """Refuse a comparison where TRL's padded prompt or completion ids differ from the book's."""
    import torch

    device = tokens.prompt_ids.device
    if not torch.equal(out["prompt_ids"].to(device), tokens.prompt_ids) or not torch.equal(
        out["completion_ids"].to(device), tokens.completion_ids
    ):
        raise RuntimeError(
            "TRL's padded batch differs from the book's, so the comparison "
            "would not be like for like; the bridge was checked against TRL "
            f"{TRL_CHECKED_VERSION}: install trl=={TRL_CHECKED_VERSION}."
        )


def _comparison(
    trainer: Any,
    book_model: Any,
    out: dict[str, Any],
    trl_loss: Any,
    result: Any,
    advantages: np.ndarray,
    rewards: np.ndarray,
    unanimous: np.ndarray,
) -> dict[str, Any]:
    """The report of :func:`one_batch_check` from both sides' advantages, losses and gradients."""
    difference, scale = gradient_difference(trainer.model, book_model)
    advantages_trl = out["advantages"].detach().double().cpu().numpy()
    loss_trl, loss_book = (float(trl_loss.detach()), float(result.loss.detach()))
    report: dict[str, Any] = {
        "advantages": float(np.abs(advantages_trl - advantages).max()),
        "loss_trl": loss_trl,
        "loss_book": loss_book,
        "loss": abs(loss_trl - loss_book),
        "gradient": difference,
        "gradient_scale": scale,
        "clip_fraction": result.metrics["clip_ratio/region_mean"],
        "frac_reward_zero_std": float(trainer._metrics["train"]["frac_reward_zero_std"][-1]),
        "silent_fraction": float(unanimous.mean()),
        "advantages_trl": advantages_trl,
        "advantages_book": np.asarray(advantages, dtype=float),
        "rewards": np.asarray(rewards, dtype=float),
    }
    if "kl" in result.metrics:
        report["kl"] = result.metrics["kl"]
    return report


def trl_testbed_run(
    profile: Any,
    recipe: Recipe | str,
    *,
    sft_dir: str | os.PathLike,
    rollout_batches: int,
    workdir: str | os.PathLike,
    seed: int = 0,
    device: str | None = None,
) -> dict[str, Any]:
    """Train the testbed's warm-started model with TRL's ``GRPOTrainer`` (chapter 14).

    The profile's RL settings (:meth:`~stddial_book.rl.profiles.Profile.train_config`) for ``recipe`` through
    :func:`grpo_config`, for ``rollout_batches`` rollouts of P·G samples from the profile's pool of
    prompts, with the book's verifier and the recipe's reward shaping as reward functions
    (:func:`trl_reward_funcs`) and the SFT model as the KL reference. What TRL cannot express
    (:func:`trl_gaps`; for DAPO, dynamic sampling) is left out: the run is what TRL can do.

    ``profile`` is a :class:`~stddial_book.rl.profiles.Profile` (e.g. ``active_profile()``); ``recipe`` a
    preset name or a ``Recipe``. ``sft_dir`` is the folder of the warm-started (SFT) model. ``workdir`` is
    a directory for TRL's output (``output_dir`` is its ``trl`` folder) and, when β > 0, the saved reference.
    ``seed`` is the run's seed (``GRPOConfig``'s ``seed`` and ``data_seed``; default 0); ``device`` a torch
    device string such as ``"cpu"`` or ``"cuda"`` (None, the default: the profile's).

    Returns:
        A dict: ``logs``, one record per rollout with TRL's metrics for it (``reward``, ``reward_std``,
        ``frac_reward_zero_std``, ``completions/mean_length``, ``completions/clipped_ratio``);
        ``history`` (TRL's per-step log); ``wall_s`` (the time of ``trainer.train()``);
        ``optimizer_steps``; ``settings`` (the GRPOConfig keywords used); ``trl_version``.
    """
    from stddial_book.rl.profiles import Profile

    if not isinstance(profile, Profile):
        raise TypeError(
            f"profile must be a stddial_book.rl.profiles.Profile (e.g. active_profile()); got {type(profile).__name__}."
        )
    recipe = as_recipe(recipe)
    rollout_batches = check_int(rollout_batches, "rollout_batches", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    _check_places(sft_dir, workdir, device)
    batch = profile.train["prompts_per_step"] * profile.train["group_size"]
    config = profile.train_config(recipe, seed, sample_budget=rollout_batches * batch)
    reward_funcs = trl_reward_funcs(recipe, max_new_tokens=config.max_new_tokens)
    trl = import_trl("trl_testbed_run")
    trainer = _testbed_trainer(trl, profile, config, reward_funcs, sft_dir, Path(workdir), device or profile.device)
    logs = _record_rollouts(trainer)
    with quiet_transformers():
        start = time.perf_counter()
        trainer.train()
        wall = time.perf_counter() - start
    return {
        "logs": logs,
        "history": list(trainer.state.log_history),
        "wall_s": wall,
        "optimizer_steps": int(trainer.state.global_step),
        "settings": trl_settings_for(config),
        "trl_version": trl.__version__,
    }


def _check_places(sft_dir: Any, workdir: Any, device: Any) -> None:
    """Refuse directories that are not paths and a device that is not a string (or None)."""
    for name, value in (("sft_dir", sft_dir), ("workdir", workdir)):
        if not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"{name} must be a directory path (str or Path); got {type(value).__name__}.")
    if device is not None and not isinstance(device, str):
        raise TypeError(f"device must be a string such as 'cpu' or 'cuda', or None; got {type(device).__name__}.")


def _testbed_trainer(
    trl: Any,
    profile: Any,
    config: Any,
    reward_funcs: list[Any],
    sft_dir: str | os.PathLike,
    workdir: Path,
    device: str,
) -> Any:
    """TRL's ``GRPOTrainer`` on the testbed, quiet: the SFT model from ``sft_dir`` (also the KL reference
    when β > 0), the profile's pool of prompts, and :func:`grpo_config` of ``config``."""
    from stddial_book.experiments.testbed.runs import load_model_from
    from stddial_book.rl.batches import make_problems
    from stddial_book.rl.model import make_tokenizer

    model = load_model_from(profile, sft_dir, device=device)
    train_problems, _ = make_problems(profile.task_config())
    pool = train_problems if config.pool_size is None else train_problems[: config.pool_size]
    dataset = _prompt_dataset(pool)
    with quiet_transformers():
        if config.recipe.kl_coef > 0:  # the KL reference is the starting model, as in the book's trainer
            model.config._name_or_path = _save_reference(model, workdir / "reference")
        args = grpo_config(
            config,
            workdir / "trl",
            use_cpu=device.split(":", 1)[0] == "cpu",
            report_to="none",
            save_strategy="no",
            logging_steps=1,
            disable_tqdm=True,
            log_completions=False,
            data_seed=config.seed,
            dataloader_num_workers=0,
            dataloader_pin_memory=False,
        )
        trainer = trl.GRPOTrainer(
            model=model, reward_funcs=reward_funcs, args=args, train_dataset=dataset, processing_class=make_tokenizer()
        )
    quiet_trainer(trainer)
    return trainer


#: TRL's metrics of a generation batch that :func:`trl_testbed_run` records, one record per rollout.
_ROLLOUT_METRICS = (
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "completions/mean_length",
    "completions/clipped_ratio",
)


def _record_rollouts(trainer: Any) -> list[dict[str, float]]:
    """A list that fills, as ``trainer`` trains, with TRL's metrics of each generation batch (its last value of
    each of :data:`_ROLLOUT_METRICS` it logged)."""
    logs: list[dict[str, float]] = []
    generate_and_score = trainer._generate_and_score_completions

    @functools.wraps(generate_and_score)
    def recorded(inputs: Any) -> Any:
        out = generate_and_score(inputs)
        metrics = trainer._metrics["train"]
        logs.append({name: float(metrics[name][-1]) for name in _ROLLOUT_METRICS if metrics.get(name)})
        return out

    trainer._generate_and_score_completions = recorded
    return logs
