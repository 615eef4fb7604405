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

from stddial_book.bridges.trl_rewards import trl_reward_funcs
from stddial_book.bridges.trl_settings import (
    TRL_CHECKED_VERSION,
    _grpo_config_from,
    _import_trl,
    _overlong_cache,
    grpo_config,
    reward_settings,
    trl_equivalent_recipe,
    trl_settings,
    trl_settings_for,
)
from stddial_book.core.checks import check_int
from stddial_book.theory.recipes import Recipe, as_recipe

__all__ = ["one_batch_check", "trl_testbed_run"]


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
    if not (
        callable(getattr(model, "parameters", None))
        and hasattr(model, "config")
        and callable(getattr(model, "save_pretrained", None))
    ):
        raise TypeError(f"{name} must be a transformers causal LM (the testbed model); got {type(model).__name__}.")


def _check_batch(
    problems: Any, completions: Any, group_size: int, max_new_tokens: int, vocab_size: int
) -> tuple[list[Any], list[list[int]]]:
    """Problems (G in a row per prompt) and completions (token-id lists, EOS only last) for one_batch_check."""
    from stddial_book.rl.model import CharCodec
    from stddial_book.rl.tasks import Problem

    for name, value in (("problems", problems), ("completions", completions)):
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise TypeError(f"{name} must be a list, one entry per sample; got {type(value).__name__}.")
    problems, completions = list(problems), list(completions)
    if not all(isinstance(p, Problem) for p in problems):
        raise TypeError("problems must hold stddial_book.rl.tasks.Problem objects, each repeated G times in a row.")
    if len(problems) != len(completions):
        raise ValueError(
            f"got {len(completions)} completions for {len(problems)} problems; pass one problem per "
            "sample (each prompt G times in a row)."
        )
    if not problems or len(problems) % group_size:
        raise ValueError(f"the batch of {len(problems)} samples does not divide into groups of G = {group_size}.")
    for start in range(0, len(problems), group_size):
        if len(set(problems[start : start + group_size])) != 1:
            raise ValueError(
                f"samples {start} to {start + group_size - 1} are not one prompt's group; TRL groups "
                "samples by position, so repeat each problem G times in a row."
            )
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
            raise ValueError(
                f"completion {i} has {len(ids)} tokens; completions hold 1 to max_new_tokens={max_new_tokens}."
            )
        if any(not 0 <= t < vocab_size for t in ids) or codec.pad_id in ids:
            raise ValueError(
                f"completion {i} holds padding or ids outside the vocabulary: {ids}; pass each "
                "completion's own tokens, unpadded."
            )
        if codec.eos_id in ids[:-1] or (len(ids) < max_new_tokens and ids[-1] != codec.eos_id):
            raise ValueError(
                f"completion {i} ({ids}) must end at its first EOS or be cut off at exactly "
                f"max_new_tokens={max_new_tokens}; it does neither."
            )
        out.append(ids)
    return problems, out


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

    Args:
        recipe: the book recipe (a preset name or a :class:`~stddial_book.theory.recipes.Recipe`).
        policy: the model being updated (π_θ).
        problems: one :class:`~stddial_book.rl.tasks.Problem` per sample, each prompt G times in a row.
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
            raise ValueError(
                f"old_logprobs must have shape ({len(completions)}, ≥ {width}); got {tuple(old_logprobs.shape)}."
            )
    reward_settings(recipe, max_new_tokens=max_new_tokens)  # an empty overlong band fails before TRL starts
    trl = _import_trl("one_batch_check")
    from datasets import Dataset

    from stddial_book.rl.model import make_tokenizer

    workdir = Path(workdir)
    device = next(policy.parameters()).device
    settings = trl_settings(
        recipe,
        group_size=group_size,
        max_new_tokens=max_new_tokens,
        prompts_per_step=len(problems) // group_size,
        num_minibatches=1,
    )
    trl_policy = copy.deepcopy(policy)
    book_model = copy.deepcopy(policy)
    reference = ref_model if ref_model is not None else policy
    unique = problems[::group_size]
    dataset = Dataset.from_dict({"prompt": [p.prompt for p in unique], "answer": [p.answer for p in unique]})
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
    with _quiet(), _random_states_kept():
        # TRL builds its KL reference from the path in the policy's config: point it at the reference's weights
        trl_policy.config._name_or_path = _save_reference(reference, workdir / "reference")
        trainer = trl.GRPOTrainer(
            model=trl_policy,
            args=_grpo_config_from(settings, workdir / "trl", overrides),
            reward_funcs=trl_reward_funcs(recipe, max_new_tokens=max_new_tokens),
            train_dataset=dataset,
            processing_class=make_tokenizer(),
        )
        _quiet_trainer(trainer)
        return _one_batch_check(
            trainer, book_model, reference, recipe, problems, completions, group_size, max_new_tokens, old_logprobs
        )


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

    from stddial_book.rl.batches import encode_prompts
    from stddial_book.rl.losses import policy_loss
    from stddial_book.rl.model import CharCodec
    from stddial_book.rl.rollout import completion_logprobs
    from stddial_book.rl.sampling import nonsilent_groups, overlong_penalty
    from stddial_book.rl.tasks import rewards as verify
    from stddial_book.theory.recipes import group_advantages

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
    # set by Trainer's training loop, which does not run here
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    book_model.to(next(trainer.model.parameters()).device).train()
    device = next(book_model.parameters()).device
    inputs = [{"prompt": p.prompt, "answer": p.answer} for p in problems]
    width = max(len(ids) for ids in completions)
    old = None if old_logprobs is None else old_logprobs[:, :width].detach().to(device)

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
    rewards = np.where(correct > 0, recipe.reward_correct, recipe.reward_wrong)
    lengths = np.array([len(ids) for ids in completions])
    if recipe.overlong_penalty:
        cache = _overlong_cache(recipe, max_new_tokens)
        rewards = rewards + overlong_penalty(lengths, max_new_tokens, cache)
    advantages = group_advantages(rewards, group_size, book)
    prompt_ids, prompt_mask = encode_prompts(problems, codec, device)
    completion_ids = torch.full((len(completions), width), codec.pad_id, dtype=torch.long, device=device)
    for row, ids in enumerate(completions):
        completion_ids[row, : len(ids)] = torch.tensor(ids, device=device)
    mask = completion_ids != codec.pad_id
    truncated = torch.tensor(
        [len(ids) == max_new_tokens and ids[-1] != codec.eos_id for ids in completions], device=device
    )
    logprobs = completion_logprobs(book_model, prompt_ids, prompt_mask, completion_ids, mask)
    ref = None
    if book.kl_coef > 0:
        with torch.no_grad():
            reference = copy.deepcopy(reference).to(device)
            ref = completion_logprobs(reference, prompt_ids, prompt_mask, completion_ids, mask)
    old_book = logprobs.detach() if old is None else torch.where(mask, old, 0.0)
    advantages_t = torch.as_tensor(advantages, device=device)
    result = policy_loss(
        logprobs,
        old_book,
        advantages_t,
        mask,
        book,
        max_new_tokens=max_new_tokens,
        ref_logprobs=ref,
        truncated=truncated,
    )
    result.loss.backward()

    unanimous = ~nonsilent_groups(correct, group_size)
    if not torch.equal(out["prompt_ids"].to(device), prompt_ids) or not torch.equal(
        out["completion_ids"].to(device), completion_ids
    ):
        raise RuntimeError(
            "TRL's padded batch differs from the book's, so the comparison "
            "would not be like for like; the bridge was checked against TRL "
            f"{TRL_CHECKED_VERSION}: install trl=={TRL_CHECKED_VERSION}."
        )
    trl_grads = dict(trainer.model.named_parameters())
    difference, scale = 0.0, 0.0
    for name, param in book_model.named_parameters():
        theirs = trl_grads[name].grad
        ours = param.grad if param.grad is not None else torch.zeros_like(param)
        theirs = torch.zeros_like(ours) if theirs is None else theirs.to(ours.device)
        difference = max(difference, float((theirs - ours).abs().max()))
        scale = max(scale, float(ours.abs().max()))
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

    Returns:
        A dict: ``logs``, one record per rollout with TRL's metrics for it (``reward``, ``reward_std``,
        ``frac_reward_zero_std``, ``completions/mean_length``, ``completions/clipped_ratio``);
        ``history`` (TRL's per-step log); ``wall_s`` (the time of ``trainer.train()``);
        ``optimizer_steps``; ``settings`` (the GRPOConfig keywords used); ``trl_version``.
    """
    from stddial_book.experiments.testbed import load_model_from
    from stddial_book.rl.batches import make_problems
    from stddial_book.rl.model import make_tokenizer
    from stddial_book.rl.profiles import Profile

    if not isinstance(profile, Profile):
        raise TypeError(
            f"profile must be a stddial_book.rl.profiles.Profile (e.g. active_profile()); got {type(profile).__name__}."
        )
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
    pool = train_problems if config.pool_size is None else train_problems[: config.pool_size]
    dataset = Dataset.from_dict({"prompt": [p.prompt for p in pool], "answer": [p.answer for p in pool]})
    with _quiet():
        if recipe.kl_coef > 0:  # the KL reference is the starting model, as in the book's trainer
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
            data_seed=seed,
            dataloader_num_workers=0,
            dataloader_pin_memory=False,
        )
        trainer = trl.GRPOTrainer(
            model=model, reward_funcs=reward_funcs, args=args, train_dataset=dataset, processing_class=make_tokenizer()
        )
    _quiet_trainer(trainer)
    logs: list[dict[str, float]] = []
    generate_and_score = trainer._generate_and_score_completions

    @functools.wraps(generate_and_score)
    def recorded(inputs: Any) -> Any:
        out = generate_and_score(inputs)
        metrics = trainer._metrics["train"]
        logs.append(
            {
                name: float(metrics[name][-1])
                for name in (
                    "reward",
                    "reward_std",
                    "frac_reward_zero_std",
                    "completions/mean_length",
                    "completions/clipped_ratio",
                )
                if metrics.get(name)
            }
        )
        return out

    trainer._generate_and_score_completions = recorded
    with _quiet():
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
