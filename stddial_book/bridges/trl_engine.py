"""The engine's update against TRL's GRPOTrainer on one batch of a Hugging Face policy (chapters 14-16).

:func:`shared_batch` samples one batch with the engine's own sampler from an
:class:`~stddial_book.rl.hf_policy.HFPolicy` (each prompt's G completions on its shared KV cache).
:func:`policy_trl_check` then gives that very batch to both sides:

* TRL: a ``GRPOTrainer`` on a copy of the policy's ``peft`` model (the same LoRA adapters), set by
  :func:`~stddial_book.bridges.trl_settings.trl_settings` for the recipe (one optimizer step on the whole
  batch), its prompts as chats that its own code tokenises, its generation replaced by the batch's
  completions, its reward the policy's verifier with the recipe's two values; its
  ``_generate_and_score_completions`` takes the advantages and the reference log-probs (adapters off),
  its ``_compute_loss`` the loss, whose gradient is taken.
* the engine: the policy's verifier, :func:`~stddial_book.theory.recipes.group_advantages`, the per-token
  log-probabilities of :func:`~stddial_book.rl.rollout.shared_prompt_logprobs` (each prompt encoded once,
  as the trainer's passes do; π_ref the policy with its adapters off) and
  :func:`~stddial_book.rl.losses.policy_loss`, with
  :func:`~stddial_book.bridges.trl_differences.trl_equivalent_recipe` (TRL's Bessel std and 1e-4).

Both use the sampler's log-probabilities as π_old, so when the adapters have moved since the batch was
sampled the ratio is not 1 and the clip can bind. Recipes whose reward TRL shapes with a length penalty,
or whose refill TRL cannot express, are refused in one line: the comparison is GRPO's and Dr. GRPO's.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stddial_book.bridges.trl_check import quiet_trainer as _quiet_trainer
from stddial_book.bridges.trl_check import quiet_transformers as _quiet
from stddial_book.bridges.trl_check import random_states_kept as _random_states_kept
from stddial_book.bridges.trl_differences import trl_equivalent_recipe
from stddial_book.bridges.trl_keywords import TRL_CHECKED_VERSION
from stddial_book.bridges.trl_keywords import grpo_config_from as _grpo_config_from
from stddial_book.bridges.trl_keywords import import_trl as _import_trl
from stddial_book.bridges.trl_settings import trl_settings
from stddial_book.core.checks import check_int
from stddial_book.theory.recipes import Recipe, as_recipe

__all__ = ["shared_batch", "policy_trl_check"]


def shared_batch(policy: Any, problems: Sequence[Any], *, group_size: int, max_new_tokens: int, seed: int = 0):
    """``group_size`` completions of each problem from ``policy`` with the engine's sampler (temperature 1),
    seeded: ``(rows, rollout)``, the problem of every row (each G times in a row) and the
    :class:`~stddial_book.rl.rollout.Rollout` (prompt rows repeated, sampler log-probs as π_old).

    ``policy`` is an :class:`~stddial_book.rl.hf_policy.HFPolicy`; ``problems`` one problem per prompt;
    ``group_size`` is G (at least 2); ``max_new_tokens`` L_max, the generation cap; ``seed`` seeds the
    sampler's own ``torch.Generator`` on the policy's device (default 0)."""
    import torch

    from stddial_book.rl.policy import Policy
    from stddial_book.rl.rollout import sample

    if not isinstance(policy, Policy):
        raise TypeError(
            f"policy must be a stddial_book.rl.policy.Policy (hf_policy(...)); got {type(policy).__name__}."
        )
    group_size = check_int(group_size, "group_size", minimum=2, hint="A group of one sample has no spread.")
    problems = policy.check_problems(problems, "problems")
    device = next(policy.model.parameters()).device
    ids, mask = policy.encode(problems, device)
    generator = torch.Generator(device=device).manual_seed(check_int(seed, "seed", minimum=0))
    was_training = policy.model.training
    policy.model.eval()
    rollout = sample(
        policy.model, ids, max_new_tokens, policy.eos_id, policy.pad_id, prompt_mask=mask, generator=generator,
        num_samples=group_size,
    )  # fmt: skip
    policy.model.train(was_training)
    return [p for p in problems for _ in range(group_size)], rollout


class _VerifierReward:
    """TRL reward function: the policy's verifier on TRL's decoded completions, as the recipe's two values
    (the dataset's ``prompt_index`` column names each row's problem)."""

    __name__ = "verifier"

    def __init__(self, policy: Any, problems: list[Any], recipe: Recipe) -> None:
        self.policy, self.problems, self.recipe = policy, problems, recipe

    def __call__(self, completions: Sequence[Any], prompt_index: Sequence[int], **kwargs: Any) -> list[float]:
        texts = [c if isinstance(c, str) else "".join(m.get("content", "") for m in c) for c in completions]
        correct = self.policy.verify(texts, [self.problems[int(i)] for i in prompt_index])
        return [self.recipe.reward_correct if c > 0 else self.recipe.reward_wrong for c in correct]


def _check_recipe(recipe: Recipe) -> Recipe:
    if recipe.overlong_penalty or recipe.dynamic_sampling or recipe.overlong_filter:
        raise ValueError(
            f"policy_trl_check compares GRPO-like recipes without DAPO's refill, length penalty or overlong "
            f"filter; got {recipe.name!r} (use 'grpo' or 'dr_grpo')."
        )
    return recipe


def _trainer(
    trl: Any, recipe: Recipe, policy: Any, problems: list[Any], group_size: int, max_new_tokens: int, workdir: Path
):
    """``GRPOTrainer`` on a copy of the policy's peft model: one optimizer step on the whole batch, quiet."""
    from datasets import Dataset

    device = next(policy.model.parameters()).device
    rows = len(problems)
    settings = trl_settings(
        recipe, group_size=group_size, max_new_tokens=max_new_tokens, prompts_per_step=rows // group_size,
        num_minibatches=1, micro_batch_size=rows,
    )  # fmt: skip
    overrides = {
        "use_cpu": device.type == "cpu", "report_to": "none", "save_strategy": "no", "logging_steps": 1,
        "disable_tqdm": True, "dataloader_num_workers": 0, "log_completions": False, "seed": 0,
        "learning_rate": 1e-4, "bf16": False, "fp16": False, "activation_checkpointing": False,
    }  # fmt: skip
    firsts = list(range(0, rows, group_size))
    dataset = Dataset.from_dict({"prompt": [_chat(policy, problems[i]) for i in firsts], "prompt_index": firsts})
    trainer = trl.GRPOTrainer(
        model=copy.deepcopy(policy.peft_model),
        args=_grpo_config_from(settings, workdir / "trl", overrides),
        reward_funcs=[_VerifierReward(policy, problems, recipe)],
        train_dataset=dataset,
        processing_class=policy.tokenizer,
    )
    _quiet_trainer(trainer)
    if "ref" in trainer.model.peft_config:
        # TRL's π_ref for a given PeftModel is a copy of its adapters at construction; the engine's is the
        # base model (adapters off). For fresh adapters (B = 0) the two are one model; without the copy TRL
        # takes the base model too, so the KL terms compare whatever the adapters hold now.
        trainer.model.delete_adapter("ref")
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's training loop, which does not run here
    trainer.model.train()
    return trainer


def _chat(policy: Any, problem: Any) -> list[dict[str, str]]:
    """A problem as the chat the policy prompts (TRL applies the same template)."""
    messages = [{"role": "system", "content": policy.system_prompt}] if policy.system_prompt else []
    return [*messages, {"role": "user", "content": problem.question}]


def _completion_lists(rollout: Any) -> list[list[int]]:
    """Each row's completion tokens, unpadded (EOS kept where it ended)."""
    return [ids[: int(n)] for ids, n in zip(rollout.completion_ids.tolist(), rollout.mask.sum(dim=1).tolist())]


def _trl_side(trainer: Any, policy: Any, problems: list[Any], rollout: Any, group_size: int) -> tuple[dict, Any]:
    """TRL's scored batch (given completions instead of sampling, the sampler's π_old) and its loss, backward."""
    expected = [policy.prompt_ids(problems[i]) for i in range(0, len(problems), group_size)]
    queue = _completion_lists(rollout)

    def generate(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        seen = [list(ids) for ids in prompt_ids][::group_size]
        if seen != expected:
            raise RuntimeError(
                "TRL tokenised the prompts differently from the policy (another chat template?); the bridge "
                f"was checked against TRL {TRL_CHECKED_VERSION}."
            )
        return [queue.pop(0) for _ in prompt_ids], None

    trainer._generate_single_turn = generate
    inputs = [{"prompt": _chat(policy, p), "prompt_index": i - i % group_size} for i, p in enumerate(problems)]
    out = trainer._generate_and_score_completions(inputs)
    width = out["completion_mask"].shape[1]
    out["old_per_token_logps"] = rollout.logprobs[:, :width].to(out["completion_mask"].device) * out["completion_mask"]
    loss = trainer._compute_loss(trainer.model, out)
    loss.backward()
    return out, loss


def _engine_side(policy: Any, recipe: Recipe, problems: list[Any], rollout: Any, group_size: int, max_new_tokens: int):
    """The engine's loss on the batch with TRL's conventions, backward: (loss output, advantages, rewards)."""
    import torch

    from stddial_book.rl.losses import policy_loss
    from stddial_book.rl.rollout import shared_prompt_logprobs
    from stddial_book.theory.recipes import group_advantages

    book = trl_equivalent_recipe(recipe)
    correct = policy.verify(policy.decode(rollout.completion_ids), problems)
    rewards = np.where(correct > 0, recipe.reward_correct, recipe.reward_wrong)
    advantages = group_advantages(rewards, group_size, book)
    rows = len(problems)
    firsts = torch.arange(0, rows, group_size, device=rollout.prompt_ids.device)
    inputs = (
        rollout.prompt_ids[firsts], rollout.prompt_mask[firsts],
        torch.arange(rows, device=firsts.device) // group_size, rollout.completion_ids, rollout.mask,
    )  # fmt: skip
    ref = None
    if book.kl_coef > 0:
        with torch.no_grad():
            ref = shared_prompt_logprobs(policy.reference(None), *inputs)
    logprobs = shared_prompt_logprobs(policy.model, *inputs)
    dtype = logprobs.dtype
    result = policy_loss(
        logprobs, rollout.logprobs.to(dtype), torch.as_tensor(advantages, dtype=dtype, device=logprobs.device),
        rollout.mask, book, max_new_tokens=max_new_tokens, ref_logprobs=ref, truncated=rollout.truncated,
    )  # fmt: skip
    result.loss.backward()
    return result, advantages, rewards


def _lora_gradients(trl_model: Any, policy: Any) -> tuple[float, float, int]:
    """max |g_TRL − g_engine| and max |g_engine| over the trainable (LoRA) weights, and how many there are."""
    import torch

    theirs = dict(trl_model.get_base_model().named_parameters())
    difference = scale = 0.0
    count = 0
    for name, param in policy.model.named_parameters():
        if not param.requires_grad:
            continue
        count += 1
        ours = param.grad if param.grad is not None else torch.zeros_like(param)
        other = theirs[name].grad
        other = torch.zeros_like(ours) if other is None else other.to(ours.device)
        difference = max(difference, float((other - ours).abs().max()))
        scale = max(scale, float(ours.abs().max()))
    return difference, scale, count


def policy_trl_check(
    recipe: Recipe | str,
    policy: Any,
    problems: Sequence[Any],
    rollout: Any,
    *,
    group_size: int,
    max_new_tokens: int,
    workdir: str | os.PathLike,
) -> dict[str, Any]:
    """TRL's GRPOTrainer and the engine on one batch of ``policy``'s completions: how far advantages, loss and
    LoRA gradients differ (see the module). ``problems`` and ``rollout`` are what :func:`shared_batch` returns;
    the policy's gradients are overwritten (zeroed first), its weights unchanged.

    ``recipe`` is ``"grpo"``, ``"dr_grpo"`` or a ``Recipe`` without DAPO's refill, length penalty or overlong
    filter (others are refused); ``policy`` an :class:`~stddial_book.rl.hf_policy.HFPolicy`. ``group_size`` is
    G (TRL's ``num_generations``) and ``max_new_tokens`` the L_max the batch was sampled with
    (``max_completion_length``). ``workdir`` is a directory for TRL's output (``output_dir`` is its ``trl``
    folder).

    Returns a dict: ``advantages`` (the largest absolute difference of the two sides' advantages),
    ``loss_trl``, ``loss_engine``, ``loss`` (their absolute difference), ``gradient`` (the largest absolute
    difference of the LoRA weights' gradients), ``gradient_scale`` (the engine's largest absolute gradient
    entry), ``lora_tensors``, ``clip_fraction``, ``kl`` (when β > 0), ``silent_fraction`` and ``rewards``.
    """
    from stddial_book.rl.policy import Policy

    recipe = _check_recipe(as_recipe(recipe))
    if not isinstance(policy, Policy) or not hasattr(policy, "peft_model"):
        raise TypeError(f"policy must be an HFPolicy (rl.hf_policy.hf_policy); got {type(policy).__name__}.")
    group_size = check_int(group_size, "group_size", minimum=2)
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1)
    problems = policy.check_problems(problems, "problems")
    if len(problems) != rollout.completion_ids.shape[0] or len(problems) % group_size:
        raise ValueError(
            f"{len(problems)} problems for {rollout.completion_ids.shape[0]} completions in groups of {group_size}; "
            "pass what shared_batch returned."
        )
    if not isinstance(workdir, (str, os.PathLike)):
        raise TypeError(f"workdir must be a directory path (str or Path); got {type(workdir).__name__}.")
    trl = _import_trl("policy_trl_check")
    policy.model.zero_grad(set_to_none=True)
    policy.model.train()
    with _quiet(), _random_states_kept():
        trainer = _trainer(trl, recipe, policy, problems, group_size, max_new_tokens, Path(workdir))
        out, trl_loss = _trl_side(trainer, policy, problems, rollout, group_size)
        result, advantages, rewards = _engine_side(policy, recipe, problems, rollout, group_size, max_new_tokens)
    difference, scale, count = _lora_gradients(trainer.model, policy)
    advantages_trl = out["advantages"].detach().double().cpu().numpy()
    correct = np.asarray(rewards) == recipe.reward_correct
    k = correct.reshape(-1, group_size).sum(axis=1)
    report = {
        "advantages": float(np.abs(advantages_trl - advantages).max()),
        "loss_trl": float(trl_loss.detach()),
        "loss_engine": float(result.loss.detach()),
        "gradient": difference,
        "gradient_scale": scale,
        "lora_tensors": count,
        "clip_fraction": result.metrics["clip_ratio/region_mean"],
        "silent_fraction": float(((k == 0) | (k == group_size)).mean()),
        "rewards": np.asarray(rewards, dtype=float),
    }
    report["loss"] = abs(report["loss_trl"] - report["loss_engine"])
    if "kl" in result.metrics:
        report["kl"] = result.metrics["kl"]
    return report
