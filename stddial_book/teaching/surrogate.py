"""The clipped surrogate of PPO, token by token (chapters 2 and 12).

The engine's :func:`stddial_book.rl.losses.policy_loss` computes the same
per-token loss, adds the k3 KL term when β > 0, masks overlong samples for
DAPO, aggregates, and reports clipping metrics; tests/test_teaching.py checks
that, with β = 0, it is this function followed by
:func:`~stddial_book.teaching.aggregation.aggregate_loss`.
"""

from __future__ import annotations

import torch

__all__ = ["clipped_surrogate"]


def clipped_surrogate(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
) -> torch.Tensor:
    """Per-token loss −min(ρA, clip(ρ, 1 − ε_low, 1 + ε_high)A), shape (B, T).

    ``logprobs`` (B, T) are log π_θ of the sampled tokens (with grad),
    ``old_logprobs`` the same under the policy that sampled them,
    ``advantages`` (B,) one A_i per sample, shared by its tokens;
    ``clip_low`` and ``clip_high`` are ε_low and ε_high (0.2 each)
    (Schulman et al., 2017; DAPO's clip-higher sets ε_high > ε_low).
    """
    ratio = torch.exp(logprobs - old_logprobs.detach())  # ρ = π_θ / π_old
    clipped_ratio = ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    A = advantages[:, None].to(logprobs.dtype)  # broadcast to the tokens
    return -torch.minimum(ratio * A, clipped_ratio * A)
