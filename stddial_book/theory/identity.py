"""The group's standard deviation and what each recipe's advantages make of it (chapters 2, 3 and 5)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from stddial_book.core.checks import (
    ArrayLike,
    check_binary,
    check_broadcast,
    check_group_size,
    check_group_size_array,
    check_unit_interval,
    like,
    to_numpy,
    unit_scale,
)
from stddial_book.theory.recipes import as_recipe

if TYPE_CHECKING:  # pragma: no cover
    from stddial_book.theory.recipes import Recipe


__all__ = [
    "pass_rate",
    "group_std",
    "std_from_pass_rate",
    "bessel_factor",
    "update_weight",
    "mean_abs_advantage",
    "rloo_advantages",
    "is_bessel",
]


def pass_rate(rewards: ArrayLike) -> ArrayLike:
    """The group's empirical pass rate p̂ = k/G of binary ``rewards`` of shape (..., G).

    Chapter 3. Raises ``ValueError`` for rewards that are not 0/1.
    """
    arr = to_numpy(rewards, "rewards")
    check_binary(arr, "rewards")
    if arr.ndim == 0:
        raise ValueError("rewards must hold a group of samples along its last axis; got a scalar.")
    return like(arr.mean(axis=-1), rewards)


def group_std(rewards: ArrayLike, correction: int = 0) -> ArrayLike:
    """Standard deviation of each group's rewards along the last axis.

    ``rewards`` is an array (numpy or torch) of shape (..., G), one group of G ≥ 2 samples along its
    last axis; the result has its leading shape. ``correction=0`` (the default) is the population std σ
    used by the identity; ``correction=1`` is Bessel's sample std s = σ·sqrt(G/(G − 1)), what TRL, verl
    and oat compute; any other ``correction`` raises ``ValueError``. For binary rewards
    σ = sqrt(p̂(1 − p̂)). Rewards may be any real numbers here (shaped rewards are fine).
    Chapter 3; the notation follows the book's appendix.
    """
    arr = to_numpy(rewards, "rewards")
    if arr.ndim == 0:
        raise ValueError("rewards must hold a group of samples along its last axis; got a scalar.")
    check_group_size(arr.shape[-1], "the group size (length of the last axis of rewards)")
    is_bessel(correction)
    unit, exponent, _ = unit_scale(arr)  # exact; no overflow in the squares of rewards near 1e200
    return like(np.ldexp(unit.std(axis=-1, ddof=correction), exponent[..., 0]), rewards)


def bessel_factor(group_size: ArrayLike) -> ArrayLike:
    """sqrt((G − 1)/G): what Bessel's std multiplies GRPO's weight and mean |A| by (0.935 at G = 8).

    ``group_size`` is G, a whole number of at least 2 or an array of them (the result has its shape).
    """
    g = check_group_size_array(group_size)
    if np.any(g < 2):
        raise ValueError("group_size must be at least 2 for Bessel's correction (it divides by G − 1).")
    return like(np.sqrt((g - 1.0) / g), group_size)


def std_from_pass_rate(pass_rate: ArrayLike, group_size: ArrayLike | None = None, correction: int = 0) -> ArrayLike:
    """σ = sqrt(p̂(1 − p̂)), or Bessel's s = σ·sqrt(G/(G − 1)) when ``correction=1``.

    ``pass_rate`` is p̂ in [0, 1], a number or an array; ``correction`` is 0 (the default, the population
    std σ) or 1 (Bessel's). ``group_size`` is G, needed only for ``correction=1``. Chapter 3.
    """
    p = to_numpy(pass_rate, "pass_rate")
    check_unit_interval(p, "pass_rate")
    sigma = np.sqrt(p * (1.0 - p))
    if is_bessel(correction):
        check_broadcast(pass_rate=p, group_size=_need_group_size(group_size))
        sigma = sigma / to_numpy(bessel_factor(group_size), "group_size")
    return like(sigma, pass_rate)


def update_weight(
    pass_rate: ArrayLike,
    recipe: Recipe,
    group_size: ArrayLike | None = None,
    nonsilent_fraction: ArrayLike | None = None,
) -> ArrayLike:
    """The weight w with which a group enters the update: (1/G) Σᵢ Aᵢ gᵢ = w (ḡ₊ − ḡ₋).

    With Δ = reward_correct − reward_wrong, σ the population std and s the std the recipe
    divides by (σ, or Bessel's σ·sqrt(G/(G − 1))), the closed form is

    * std scaling on (GRPO, DAPO):  w = Δ σ² / (Δ s + eps)  → σ when eps = 0 and s = σ;
    * std scaling off (Dr. GRPO):   w = Δ σ²                → σ² for 0/1 rewards, 2σ² for ±1.

    Silent groups (σ at or below the recipe's ``silent_tol``) get w = 0. When the recipe uses
    dynamic sampling (DAPO), silent groups are discarded and the batch is refilled, so each kept
    group's share of the batch grows by 1/``nonsilent_fraction`` (the fraction of sampled groups
    that were not silent, in (0, 1]); pass it to get the effective per-prompt weight (``None``, the
    default, applies no refill factor; recipes without dynamic sampling ignore it).

    ``pass_rate`` is the group's p̂ = k/G in [0, 1] (a number or an array; the result has its shape);
    ``recipe`` is a :class:`~stddial_book.theory.recipes.Recipe` or a preset name; ``group_size`` is G,
    needed only for a recipe that divides by Bessel's std (``None`` otherwise, checked if given). References:
    Shao et al. (2024), Liu et al. (2025), Yu et al. (2025); chapters 3 and 5.
    """
    recipe = as_recipe(recipe)
    p = to_numpy(pass_rate, "pass_rate")
    check_unit_interval(p, "pass_rate")
    if group_size is not None:  # checked even where the recipe does not need it: junk is not ignored
        check_broadcast(pass_rate=p, group_size=check_group_size_array(group_size))
    variance = p * (1.0 - p)
    sigma = np.sqrt(variance)
    gap = recipe.reward_correct - recipe.reward_wrong
    if recipe.scale_std:
        std = sigma
        if recipe.std_correction:
            check_broadcast(pass_rate=p, group_size=_need_group_size(group_size))
            std = sigma / to_numpy(bessel_factor(group_size), "group_size")
        scale = np.divide(
            1.0, gap * std + recipe.std_eps, out=np.zeros_like(std), where=(gap * std + recipe.std_eps) > 0
        )
    else:
        scale = np.ones_like(sigma)
    weight = np.where(abs(gap) * sigma > recipe.silent_tol, gap * variance * scale, 0.0)
    if recipe.dynamic_sampling and nonsilent_fraction is not None:
        kept = to_numpy(nonsilent_fraction, "nonsilent_fraction")
        if np.any((kept <= 0.0) | (kept > 1.0)):
            raise ValueError(
                "nonsilent_fraction must lie in (0, 1]; at 0 every sampled group is silent and "
                "DAPO's refill never fills the batch (cap the number of refill rounds)."
            )
        check_broadcast(pass_rate=p, nonsilent_fraction=kept)
        weight = weight / kept
    return like(weight, pass_rate)


def mean_abs_advantage(pass_rate: ArrayLike, recipe: Recipe, group_size: ArrayLike | None = None) -> ArrayLike:
    """Mean |Aᵢ| over a group with pass rate p̂: exactly twice :func:`update_weight`.

    2σ for GRPO with population std and eps = 0, 2σ·sqrt((G − 1)/G) with Bessel's std, 2σ² for
    Dr. GRPO with 0/1 rewards. ``pass_rate`` (p̂ in [0, 1]), ``recipe`` (a recipe or a preset name) and
    ``group_size`` (G, needed only for Bessel's std) are those of :func:`update_weight`. Chapter 3.
    """
    return 2.0 * update_weight(pass_rate, recipe, group_size)


def rloo_advantages(rewards: ArrayLike) -> ArrayLike:
    """Leave-one-out (RLOO) advantages Rᵢ − bᵢ with bᵢ = (1/(G − 1)) Σ_{j≠i} Rⱼ, along the last axis.

    Kool et al. (2019); Ahmadian et al. (2024). Group-mean centring is this times (G − 1)/G:
    Rᵢ − μ = (G − 1)/G · (Rᵢ − bᵢ) (Bay and Yearick, 2026, Prop. 1; chapter 3). ``rewards`` is an
    array (numpy or torch) of shape (..., G), any real rewards, G ≥ 2; the result has its shape.
    """
    arr = to_numpy(rewards, "rewards")
    if arr.ndim == 0:
        raise ValueError("rewards must hold a group of samples along its last axis; got a scalar.")
    size = check_group_size(arr.shape[-1], "the group size (length of the last axis of rewards)")
    unit, exponent, _ = unit_scale(arr)  # exact; the sum of rewards near 1e308 cannot overflow
    total = unit.sum(axis=-1, keepdims=True)
    with np.errstate(over="ignore"):
        out = np.ldexp(unit - (total - unit) / (size - 1), exponent)
    if not np.all(np.isfinite(out)):
        raise ValueError(
            f"RLOO advantages of rewards up to {np.abs(arr).max():g} in magnitude overflow float64; "
            "rescale the rewards."
        )
    return like(out, rewards)


def is_bessel(correction: int) -> bool:
    """Whether a std ``correction`` is Bessel's (1, the sample std) rather than 0 (the population std, the
    identity's σ); anything else raises ``ValueError``."""
    if (
        isinstance(correction, bool)
        or not isinstance(correction, (int, float, np.integer, np.floating))
        or correction not in (0, 1)
    ):  # the type first: 0j == 0 in Python, an array has no truth value
        raise ValueError(
            f"correction must be 0 (population std, the identity's σ) or 1 (Bessel's sample std, "
            f"as TRL, verl and oat use); got {' '.join(repr(correction).split())[:40]}."
        )
    return correction == 1


def _need_group_size(group_size: ArrayLike | None) -> ArrayLike:
    if group_size is None:
        raise ValueError("Bessel's correction needs the group size: pass group_size=G.")
    return group_size
