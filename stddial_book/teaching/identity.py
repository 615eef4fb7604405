"""One GRPO step on one prompt, two ways: the identity (chapters 3 and 4).

The engine checks the identity on real gradients in
:func:`stddial_book.rl.gradcheck.identity_check` (per-sample scores from the
model, the weight from :func:`stddial_book.theory.identity.update_weight`);
tests/test_teaching.py ties this version to both.
"""

from __future__ import annotations

import torch

__all__ = ["identity_sides"]


def identity_sides(
    advantages: torch.Tensor,
    scores: torch.Tensor,
    correct: torch.Tensor,
    scale_std: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Both sides of (1/G) Σ A_i g_i = σ (ḡ₊ − ḡ₋) for one mixed group.

    ``advantages`` (G,) from 0/1 rewards, ``scores`` (G, D) one score g_i a
    row (the gradient of sample i's log-probability), ``correct`` (G,) bool.
    ``scale_std`` is True for GRPO's weight σ (the default); with
    ``scale_std=False`` (Dr. GRPO) the weight is σ² instead of σ.
    """
    G = len(advantages)
    lhs = (advantages[:, None] * scores).sum(dim=0) / G
    k = int(correct.sum())  # 0 < k < G: a silent group has no ḡ₊ or ḡ₋
    group_std = (k * (G - k)) ** 0.5 / G  # σ = sqrt(k(G − k)) / G
    weight = group_std if scale_std else group_std**2
    g_plus = scores[correct].mean(dim=0)  # ḡ₊: mean score of the right
    g_minus = scores[~correct].mean(dim=0)  # ḡ₋: mean score of the wrong
    return lhs, weight * (g_plus - g_minus)
