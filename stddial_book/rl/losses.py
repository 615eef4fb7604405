"""The clipped surrogate, the three loss aggregations and the k3 KL (chapters 2 and 4).

Per token, with ratio ρ = exp(log π − log π_old) and the sample's advantage A,

    ℓ = −min(ρ A, clip(ρ, 1 − ε_low, 1 + ε_high) A)  [+ β · k3 KL]

(Schulman et al., 2017; the k3 estimator exp(r) − r − 1 with r = log π_ref − log π, as in
Shao et al., 2024). The per-token losses are then aggregated as the recipe says (DESIGN §8):

* ``seq-mean-token-mean`` (GRPO): mean over each sequence's tokens, then mean over sequences;
* ``seq-mean-token-sum-norm`` (Dr. GRPO): sum over tokens divided by the fixed generation cap
  L_max (never the padded width), then mean over sequences (Liu et al., 2025);
* ``token-mean`` (DAPO): sum over all tokens divided by the number of unmasked tokens of the
  whole optimizer step (Yu et al., 2025).

For gradient accumulation pass ``step_num_tokens`` / ``step_num_sequences``, the counts of the
whole optimizer step: each micro-batch's loss is then its share, and the micro-batch losses add
up to the loss of the step computed in one piece, however the step is split.

No aggregation looks at groups: a step whose groups have different sizes (ragged groups) is
aggregated the same way, and each group then weighs by its share of the step's sequences or
tokens (the *Ragged groups* note of :mod:`stddial_book.theory.recipes` writes the weights out).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from stddial_book.core.checks import as_mask, check_int, check_number, check_tensor
from stddial_book.theory.recipes import Recipe, as_recipe

__all__ = ["LossOutput", "policy_loss", "k3_kl", "clip_metrics"]


@dataclass
class LossOutput:
    """The aggregated loss (a scalar tensor with grad) and detached metrics (TRL's names).

    ``loss`` is that scalar; ``metrics`` maps each metric's name (``clip_ratio/low_mean``, ...) to a
    float.
    """

    loss: torch.Tensor
    metrics: dict[str, float]


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(π ‖ π_ref): exp(r) − r − 1 with r = log π_ref − log π (≥ 0).

    It overflows to ``inf`` where r exceeds about 88 (float32) or 709 (float64): the reference
    gives the token e^r times the policy's probability, and the estimate is that large.
    ``logprobs`` and ``ref_logprobs`` are log π and log π_ref of the same tokens, float tensors of one
    shape (e.g. (B, T)); the result has that shape.
    """
    check_tensor(logprobs, "logprobs", kind="float")
    check_tensor(ref_logprobs, "ref_logprobs", kind="float")
    if ref_logprobs.shape != logprobs.shape:
        raise ValueError(
            f"ref_logprobs has shape {tuple(ref_logprobs.shape)} but logprobs has "
            f"{tuple(logprobs.shape)}; pass log-probs of the same tokens."
        )
    r = ref_logprobs - logprobs
    return torch.exp(r) - r - 1.0


def clip_metrics(
    ratio: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, clip_low: float, clip_high: float
) -> dict[str, float]:
    """Fractions of unmasked tokens whose clipped term was the active one (TRL's definitions).

    ``low``: ρ < 1 − ε_low with A < 0; ``high``: ρ > 1 + ε_high with A > 0; ``region``: either.
    ``ratio`` (B, T) holds ρ per token; ``advantages`` A per token, of the same shape; ``mask`` (B, T)
    is true on the tokens counted; ``clip_low`` and ``clip_high`` are ε_low and ε_high. Returns the
    three fractions as ``clip_ratio/low_mean``, ``clip_ratio/high_mean`` and ``clip_ratio/region_mean``.
    """
    check_tensor(ratio, "ratio", kind="float")
    check_tensor(advantages, "advantages", kind="real")
    mask = as_mask(mask, "mask", tuple(ratio.shape))
    if advantages.shape != ratio.shape:
        raise ValueError(
            f"advantages must have the ratio's shape {tuple(ratio.shape)} (expand per-sample "
            f"advantages to the tokens); got {tuple(advantages.shape)}."
        )
    clip_low, clip_high = check_number(clip_low, "clip_low"), check_number(clip_high, "clip_high")
    with torch.no_grad():
        low = (ratio < 1.0 - clip_low) & (advantages < 0) & mask
        high = (ratio > 1.0 + clip_high) & (advantages > 0) & mask
        count = mask.sum().clamp(min=1)
        return {
            "clip_ratio/low_mean": float(low.sum() / count),
            "clip_ratio/high_mean": float(high.sum() / count),
            "clip_ratio/region_mean": float((low | high).sum() / count),
        }


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    recipe: Recipe,
    *,
    max_new_tokens: int | None = None,
    ref_logprobs: torch.Tensor | None = None,
    truncated: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    step_num_tokens: int | None = None,
    step_num_sequences: int | None = None,
) -> LossOutput:
    """The recipe's clipped-surrogate loss over a batch of completions.

    The arguments:

    - ``logprobs``: (B, T) log π(o_t) of the completion tokens under the current policy (with grad).
    - ``old_logprobs``: (B, T) the same under the policy that sampled them (no grad needed).
    - ``advantages``: (B,) one advantage per sample, broadcast to its tokens, or (B, T).
    - ``mask``: (B, T) true for completion tokens (EOS included), false for prompt and padding.
    - ``recipe``: the dial's settings (clip range, KL coefficient, aggregation, overlong filter), a
      :class:`~stddial_book.theory.recipes.Recipe` or a preset name.
    - ``max_new_tokens``: L_max, the fixed generation cap; required by ``seq-mean-token-sum-norm``.
    - ``ref_logprobs``: (B, T) log π_ref, required when ``recipe.kl_coef > 0``.
    - ``truncated``: (B,) true for samples cut off at L_max; masked out if ``recipe.overlong_filter``.
    - ``entropy``: (B, T) per-token entropies from the same forward pass, for the metric only.
    - ``step_num_tokens``, ``step_num_sequences``: counts of the whole optimizer step when the step is
      split into micro-batches (default: this batch's own counts).

    Returns:
        :class:`LossOutput` with the loss and the metrics ``clip_ratio/low_mean``,
        ``clip_ratio/high_mean``, ``clip_ratio/region_mean``, ``kl`` (when a reference is given)
        and ``entropy`` (when given), each a mean over the unmasked tokens.
    """
    recipe = as_recipe(recipe)
    mask, truncated = _check_inputs(logprobs, old_logprobs, advantages, mask, ref_logprobs, truncated, entropy)
    if max_new_tokens is not None:
        max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1, hint="It is L_max, the generation cap.")
    if step_num_tokens is not None:
        step_num_tokens = check_int(step_num_tokens, "step_num_tokens")
    if step_num_sequences is not None:
        step_num_sequences = check_int(step_num_sequences, "step_num_sequences")
    if truncated is not None and recipe.overlong_filter:
        mask = mask & ~truncated[:, None]
    lengths = mask.sum(dim=1)
    _check_step_counts(mask, step_num_tokens, step_num_sequences)
    adv = advantages[:, None] if advantages.dim() == 1 else advantages
    adv = adv.to(logprobs.dtype)
    per_token, metrics = _per_token_loss(logprobs, old_logprobs, adv, mask, recipe, ref_logprobs, entropy)
    per_token = torch.where(mask, per_token, torch.zeros_like(per_token))
    loss = _aggregate(per_token, mask, lengths, recipe, max_new_tokens, step_num_tokens, step_num_sequences)
    return LossOutput(loss=loss, metrics=metrics)


def _check_step_counts(mask: torch.Tensor, step_num_tokens: int | None, step_num_sequences: int | None) -> None:
    """The optimizer step's counts cover at least this batch: its loss tokens (``mask``) and its
    sequences (rows), so the micro-batch losses add up to the step's (chapter 2)."""
    if step_num_tokens is not None and step_num_tokens < int(mask.sum()):
        raise ValueError(
            f"step_num_tokens={step_num_tokens} is smaller than the {int(mask.sum())} loss tokens "
            "given; it counts the whole optimizer step, so it is at least this batch's count."
        )
    if step_num_sequences is not None and step_num_sequences < mask.shape[0]:
        raise ValueError(
            f"step_num_sequences={step_num_sequences} is smaller than the {mask.shape[0]} "
            "sequences given; it counts the whole optimizer step."
        )


def _per_token_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    recipe: Recipe,
    ref_logprobs: torch.Tensor | None,
    entropy: torch.Tensor | None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The per-token loss −min(ρ A, clip(ρ, 1 − ε_low, 1 + ε_high) A) [+ β · k3 KL] before
    masking and aggregation, and the metrics: clip fractions, ``kl`` (with a reference) and
    ``entropy`` (when given), means over the unmasked tokens (chapters 2 and 4)."""
    ratio = torch.exp(logprobs - old_logprobs.detach())
    clipped = torch.clamp(ratio, 1.0 - recipe.clip_low, 1.0 + recipe.clip_high)
    per_token = -torch.minimum(ratio * adv, clipped * adv)
    metrics = clip_metrics(ratio, adv.expand_as(ratio), mask, recipe.clip_low, recipe.clip_high)
    if recipe.kl_coef > 0.0 and ref_logprobs is None:
        raise ValueError(
            f"recipe {recipe.name!r} has kl_coef={recipe.kl_coef} but no ref_logprobs were "
            "given; pass the reference policy's log-probs or use recipe.replace(kl_coef=0.0)."
        )
    if ref_logprobs is not None:
        kl = k3_kl(logprobs, ref_logprobs.detach())
        metrics["kl"] = float((kl.detach() * mask).sum() / mask.sum().clamp(min=1))
        if recipe.kl_coef > 0.0:
            per_token = per_token + recipe.kl_coef * kl
    if entropy is not None:
        metrics["entropy"] = float((entropy.detach() * mask).sum() / mask.sum().clamp(min=1))
    return per_token, metrics


def _aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    lengths: torch.Tensor,
    recipe: Recipe,
    max_new_tokens: int | None,
    step_num_tokens: int | None,
    step_num_sequences: int | None,
) -> torch.Tensor:
    num_sequences = step_num_sequences if step_num_sequences is not None else per_token.shape[0]
    if recipe.loss_aggregation == "token-mean":
        num_tokens = step_num_tokens if step_num_tokens is not None else int(mask.sum())
        if num_tokens <= 0:
            raise ValueError("the step has no unmasked completion tokens; check the mask.")
        return per_token.sum() / num_tokens
    if recipe.loss_aggregation == "seq-mean-token-sum-norm":
        if max_new_tokens is None:
            raise ValueError(
                f"{recipe.name!r} normalises by the fixed generation cap "
                "L_max: pass max_new_tokens (not the padded width, which "
                "changes with the batch)."
            )
        if int(lengths.max()) > max_new_tokens:
            raise ValueError(
                f"a completion has {int(lengths.max())} tokens, more than "
                f"max_new_tokens={max_new_tokens}; pass the cap the samples "
                "were generated with."
            )
        return per_token.sum() / (max_new_tokens * num_sequences)
    # seq-mean-token-mean: sequences with no unmasked token (filtered)
    # contribute zero
    per_sequence = per_token.sum(dim=1) / lengths.clamp(min=1)
    return per_sequence.sum() / num_sequences


def _check_inputs(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    ref_logprobs: torch.Tensor | None,
    truncated: torch.Tensor | None,
    entropy: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Validate the loss inputs; returns the mask and ``truncated`` as booleans."""
    check_tensor(logprobs, "logprobs", kind="float")
    if logprobs.dim() != 2:
        raise ValueError(f"logprobs must have shape (batch, tokens); got {tuple(logprobs.shape)}.")
    for name, tensor in (("old_logprobs", old_logprobs), ("ref_logprobs", ref_logprobs), ("entropy", entropy)):
        if tensor is not None or name == "old_logprobs":
            check_tensor(tensor, name, kind="float")
    check_tensor(advantages, "advantages", kind="real")
    check_tensor(mask, "mask")
    if truncated is not None:
        check_tensor(truncated, "truncated")
    others = {
        "old_logprobs": old_logprobs,
        "advantages": advantages,
        "mask": mask,
        "ref_logprobs": ref_logprobs,
        "truncated": truncated,
        "entropy": entropy,
    }
    _check_alignment(logprobs, others)
    if truncated is not None:
        truncated = as_mask(truncated, "truncated", (logprobs.shape[0],))
    mask = as_mask(mask, "mask")
    if not bool(mask.any()):
        raise ValueError("mask selects no token; it must be true on completion tokens (EOS included).")
    _check_finite(logprobs, old_logprobs, advantages, mask, ref_logprobs, entropy)
    return mask, truncated


def _check_alignment(logprobs: torch.Tensor, others: dict[str, torch.Tensor | None]) -> None:
    """Every given tensor of ``others`` sits on the device of ``logprobs``; the per-token ones share
    its shape (batch, tokens), and the advantages are one per sample or one per token (chapter 2)."""
    for name, tensor in others.items():
        if tensor is not None and tensor.device != logprobs.device:
            raise ValueError(
                f"{name} is on {tensor.device} but logprobs on {logprobs.device}; move it there "
                "with .to(logprobs.device)."
            )
    shape = logprobs.shape
    for name in ("old_logprobs", "mask", "ref_logprobs", "entropy"):
        tensor = others[name]
        if tensor is not None and tensor.shape != shape:
            raise ValueError(
                f"{name} has shape {tuple(tensor.shape)} but logprobs has {tuple(shape)}; "
                "all per-token tensors must share (batch, tokens)."
            )
    advantages = others["advantages"]
    if advantages.shape not in ((shape[0],), shape):
        raise ValueError(
            f"advantages must have shape ({shape[0]},) (one per sample) or {tuple(shape)}; "
            f"got {tuple(advantages.shape)}."
        )


def _check_finite(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    ref_logprobs: torch.Tensor | None,
    entropy: torch.Tensor | None,
) -> None:
    """No NaN or infinity on the unmasked tokens of the log-probs, the advantages and the entropies
    (chapter 2)."""
    for name, tensor in (("logprobs", logprobs), ("old_logprobs", old_logprobs), ("ref_logprobs", ref_logprobs)):
        if tensor is not None and not bool(torch.isfinite(torch.where(mask, tensor, torch.zeros_like(tensor))).all()):
            raise ValueError(
                f"{name} contain NaN or infinity on unmasked tokens; check the forward pass "
                "(and the sampler's log-probs for old_logprobs)."
            )
    adv = advantages if advantages.dim() == 2 else advantages[:, None].expand(logprobs.shape)
    if not bool(torch.isfinite(torch.where(mask, adv.to(logprobs.dtype), torch.zeros_like(logprobs))).all()):
        raise ValueError(
            "advantages contain NaN or infinity; group_advantages never returns them, so check how they were computed."
        )
    if entropy is not None and not bool(torch.isfinite(torch.where(mask, entropy, torch.zeros_like(entropy))).all()):
        raise ValueError("entropy contains NaN or infinity on unmasked tokens; check the forward pass.")
