"""The three ways to turn per-token losses into one number (chapters 2 and 11).

The engine's version is :func:`stddial_book.rl.losses._aggregate` (called by
``policy_loss``); it also takes the token and sequence counts of a whole
optimizer step, so that gradient accumulation over micro-batches gives the
same loss. tests/test_teaching.py ties the two together.
"""

from __future__ import annotations

import torch

__all__ = ["aggregate_loss"]


def aggregate_loss(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    loss_aggregation: str,
    max_new_tokens: int | None = None,
) -> torch.Tensor:
    """One loss from ``per_token`` losses of shape (B, T); ``mask`` is true on
    completion tokens (EOS included), false on padding.

    ``loss_aggregation`` is GRPO's ``"seq-mean-token-mean"``, Dr. GRPO's
    ``"seq-mean-token-sum-norm"`` or DAPO's ``"token-mean"``;
    ``max_new_tokens`` is L_max, needed by Dr. GRPO's only.
    """
    per_token = torch.where(mask, per_token, torch.zeros_like(per_token))
    if loss_aggregation == "seq-mean-token-mean":  # GRPO
        lengths = mask.sum(dim=1).clamp(min=1)  # an empty row adds 0
        return (per_token.sum(dim=1) / lengths).mean()
    if loss_aggregation == "seq-mean-token-sum-norm":  # Dr. GRPO
        # the fixed generation cap L_max, never the padded width
        return (per_token.sum(dim=1) / max_new_tokens).mean()
    if loss_aggregation == "token-mean":  # DAPO
        # every token of the batch counts the same, whatever its length
        return per_token.sum() / mask.sum()
    raise ValueError(f"unknown loss_aggregation {loss_aggregation!r}")
