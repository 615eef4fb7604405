"""Group-relative advantages, one recipe a function (chapter 2).

``rewards`` holds one row per group: shape (num_groups, G). The engine's
:func:`stddial_book.theory.recipes.group_advantages` computes all three from
a flat batch and adds Bessel's std, a std epsilon, a relative silence
tolerance for shaped rewards and overflow guards; tests/test_teaching.py ties
these versions to it.
"""

from __future__ import annotations

import torch

__all__ = ["grpo_advantages", "dr_grpo_advantages", "dapo_advantages"]


def grpo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """GRPO (Shao et al., 2024): A_i = (r_i − mean) / σ within each group.

    ``rewards`` (num_groups, G), one group a row. σ is the population std
    (ddof 0). A silent group (σ = 0, all G rewards equal) gets A_i = 0
    rather than 0/0.
    """
    mean = rewards.mean(dim=1, keepdim=True)
    group_std = ((rewards - mean) ** 2).mean(dim=1, keepdim=True).sqrt()
    silent = group_std == 0
    safe_std = torch.where(silent, torch.ones_like(group_std), group_std)
    advantages = (rewards - mean) / safe_std
    return torch.where(silent, torch.zeros_like(advantages), advantages)


def dr_grpo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """Dr. GRPO (Liu et al., 2025): A_i = r_i − mean, no division by σ.

    ``rewards`` (num_groups, G), one group a row. A silent group is centred
    to exactly 0 without any special case.
    """
    mean = rewards.mean(dim=1, keepdim=True)
    return rewards - mean


def dapo_advantages(
    rewards: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DAPO (Yu et al., 2025): GRPO's advantages on the groups that are not
    silent; the silent ones are dropped from the batch altogether.

    ``rewards`` (num_groups, G), one group a row. Returns the advantages
    of the kept groups and ``keep``, one flag per group (σ > 0, i.e.
    0 < k < G for 0/1 or ±1 rewards). Refilling the batch with new groups
    is the job of ``dynamic_sampling``.
    """
    keep = rewards.amax(dim=1) > rewards.amin(dim=1)  # not all equal: σ > 0
    return grpo_advantages(rewards[keep]), keep
