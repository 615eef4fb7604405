"""The group-size law and the objectives the division ascends (chapters 5 and 6)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from stddial_book.core.checks import (
    ArrayLike,
    check_broadcast,
    check_group_size_array,
    check_int,
    check_number,
    check_unit_interval,
    like,
    to_numpy,
)
from stddial_book.theory.recipes import as_recipe

if TYPE_CHECKING:  # pragma: no cover
    from stddial_book.theory.recipes import Recipe
from stddial_book.theory.silent import MAX_GROUP_SIZE, expected_group_std

__all__ = [
    "gradient_fidelity",
    "attenuated_fidelity",
    "group_size_law",
    "minimal_group_size",
    "arcsine_objective",
    "difficulty_weight",
    "large_group_gradient",
]


def _interior(solve_rate: ArrayLike, what: str) -> np.ndarray:
    p = to_numpy(solve_rate, "solve_rate")
    check_unit_interval(p, "solve_rate")
    if np.any((p <= 0.0) | (p >= 1.0)):
        raise ValueError(
            f"{what} is defined for 0 < solve_rate < 1 only (at p = 0 or 1 every group is silent "
            "and the large-group gradient √(p(1 − p)) is 0); drop those prompts first."
        )
    return p


def gradient_fidelity(solve_rate: ArrayLike, group_size: ArrayLike) -> ArrayLike:
    """φ(G, p) = E[g]/√(p(1 − p)): the fraction of the large-group (arcsine) gradient a group of
    G realises, with E[g] the exact binomial sum :func:`expected_group_std`.

    Bay and Yearick (2026), eq. (fidelity); chapter 5. Defined for 0 < p < 1: ``solve_rate`` is p, strictly
    between 0 and 1, and ``group_size`` is G ≥ 2 (at most 10¹²); both may be arrays and broadcast.
    """
    p = _interior(solve_rate, "the gradient fidelity")
    value = to_numpy(expected_group_std(p, group_size), "E[g]") / np.sqrt(p * (1.0 - p))
    return like(value, solve_rate if np.ndim(solve_rate) >= np.ndim(group_size) else group_size)


def attenuated_fidelity(solve_rate: ArrayLike, group_size: ArrayLike) -> ArrayLike:
    """The large-G expansion of φ: 1 − 1/(8 G p (1 − p)) (second-order delta method).

    Bay and Yearick (2026), Corollary 1; chapter 5 derives it in SymPy. Accurate in the interior
    and for large G; near p ∈ {0, 1} it overstates φ (silent groups are not in it). It falls below
    the most negative float (and is returned as ``-inf``) only when 8 G p(1 − p) is below about 1e-308.
    ``solve_rate`` is p, strictly between 0 and 1, and ``group_size`` is G, a positive whole
    number; both may be arrays and broadcast.
    """
    p = _interior(solve_rate, "the attenuation")
    g = check_group_size_array(group_size)
    check_broadcast(solve_rate=p, group_size=g)
    with np.errstate(over="ignore", divide="ignore"):
        value = 1.0 - 1.0 / (8.0 * g * p * (1.0 - p))
    return like(value, solve_rate if np.ndim(p) >= np.ndim(g) else group_size)


def group_size_law(tolerance: ArrayLike, solve_rate: ArrayLike) -> ArrayLike:
    """G*(ε, p) = 1/(8 ε p (1 − p)) = w(p)²/(8ε): the group size at which the expansion
    :func:`attenuated_fidelity` reaches 1 − ε (a real number; the paper rounds it).

    Bay and Yearick (2026), Corollary 2; chapter 5. ``tolerance`` ε in (0, 1) is the fidelity shortfall
    allowed; ``solve_rate`` is p, strictly between 0 and 1; both may be arrays and broadcast. G* exceeds
    the largest float (and is returned as ``inf``) only when ε p(1 − p) is below about 1e-309.
    """
    eps = to_numpy(tolerance, "tolerance")
    if np.any(~((eps > 0.0) & (eps < 1.0))):
        raise ValueError("tolerance ε must lie strictly between 0 and 1 (fidelity 1 − ε).")
    p = _interior(solve_rate, "the group-size law")
    check_broadcast(tolerance=eps, solve_rate=p)
    with np.errstate(over="ignore", divide="ignore"):
        value = 1.0 / (8.0 * eps * p * (1.0 - p))
    return like(value, solve_rate if np.ndim(p) >= np.ndim(eps) else tolerance)


def minimal_group_size(tolerance: float, solve_rate: float, max_group_size: int = 100_000) -> int:
    """The exact smallest G ≥ 2 with φ(G, p) ≥ 1 − ε: the requirement that G* approximates.

    φ never falls as G grows (the mean of G samples is the average of its leave-one-out means, and
    E f(p̂) rises for a concave f), so the answer is found by bisection: a bracket from the law's G*
    (:func:`group_size_law`), widened by doubling, then halved; about 2·log₂ G evaluations of φ instead
    of a scan of every G. Each evaluation sums the binomial terms that matter (within 15 standard
    deviations of Gp), as :func:`gradient_fidelity` does, so the answer is the first G at which
    ``gradient_fidelity`` reaches 1 − ε. Raises past ``max_group_size``, which may be at most :data:`MAX_GROUP_SIZE`
    (10¹²); beyond G ≈ 10⁸ consecutive G differ in φ by less than float64 resolves, so large
    answers are exact only to that resolution. Near p ∈ {0, 1} the answer exceeds G*, because silent
    groups cost more than the expansion says. Chapter 5 reproduces the paper's Table 2 with it.

    ``tolerance`` is ε, a number in (0, 1); ``solve_rate`` is p, a number strictly between 0 and 1;
    ``max_group_size`` (default 100 000) is the largest G searched.
    """
    eps = check_number(tolerance, "tolerance")
    if not 0.0 < eps < 1.0:
        raise ValueError(f"tolerance ε must lie strictly between 0 and 1; got {tolerance!r}.")
    p = float(_interior(np.asarray(check_number(solve_rate, "solve_rate")), "the minimal group size"))
    max_group_size = check_int(max_group_size, "max_group_size", minimum=2)
    if max_group_size > MAX_GROUP_SIZE:
        raise ValueError(
            f"max_group_size={max_group_size} is above {MAX_GROUP_SIZE:.0e}, the largest G this search "
            f"takes; pass max_group_size <= {MAX_GROUP_SIZE} (the law gives G* ≈ "
            f"{float(group_size_law(eps, p)):.3g} for ε = {eps:g}, p = {p:g})."
        )
    target = 1.0 - eps
    law = float(group_size_law(eps, p))

    def reaches(size: int) -> bool:
        """φ(size) ≥ target, as gradient_fidelity computes φ (a full sum up to G = 4096, banded above)."""
        if size < 2:
            return False  # one sample has no spread: φ = 0
        return bool(to_numpy(gradient_fidelity(p, size), "phi") >= target)

    # φ never falls as G grows, so if G = max_group_size misses the target, all smaller do
    if not reaches(max_group_size):
        raise ValueError(
            f"no G ≤ {max_group_size} reaches fidelity {target} at p = {p}; raise max_group_size "
            f"(up to {MAX_GROUP_SIZE:.0e}; the large-G law gives G* ≈ {law:.3g})."
        )
    # bracket: lo misses the target (1 always does), hi reaches it; start at the law's G*
    guess = int(min(max(law, 2.0), float(max_group_size)))
    if reaches(guess):
        lo, hi = guess // 2, guess
        while reaches(lo):
            lo, hi = lo // 2, lo
    else:
        lo, hi = guess, min(2 * guess, max_group_size)
        while not reaches(hi):
            lo, hi = hi, min(2 * hi, max_group_size)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    return int(hi)


def arcsine_objective(solve_rate: ArrayLike) -> ArrayLike:
    """2·arcsin√p: the per-prompt objective GRPO ascends for large groups (Dr. GRPO: p itself).

    Thrampoulidis et al. (2026); Bay and Yearick (2026), §6; chapter 6. Its derivative in p is
    :func:`difficulty_weight`. ``solve_rate`` is p in [0, 1], a number or an array (the result has its shape).
    """
    p = to_numpy(solve_rate, "solve_rate")
    check_unit_interval(p, "solve_rate")
    return like(2.0 * np.arcsin(np.sqrt(p)), solve_rate)


def difficulty_weight(solve_rate: ArrayLike) -> ArrayLike:
    """w(p) = d/dp 2·arcsin√p = 1/√(p(1 − p)): GRPO's weight on a unit of solve-rate gain at p.

    The question-level difficulty bias of Liu et al. (2025), exactly (Bay and Yearick, 2026,
    eq. (weight)); w(1/2) = 2, and Dr. GRPO's weight is 1. Chapter 6. Defined for 0 < p < 1:
    ``solve_rate`` is p strictly between 0 and 1, a number or an array (the result has its shape).
    """
    p = _interior(solve_rate, "the difficulty weight")
    return like(1.0 / np.sqrt(p * (1.0 - p)), solve_rate)


def large_group_gradient(solve_rate: ArrayLike, recipe: Recipe) -> ArrayLike:
    """The G → ∞ limit of a recipe's expected per-prompt gradient for a Bernoulli-logit prompt.

    √(p(1 − p)) when the recipe divides by the std (GRPO, DAPO: the θ-gradient of 2·arcsin√p),
    p(1 − p) when it does not (Dr. GRPO: the θ-gradient of p). These are the weights of the
    source paper's "gradient budget" (Bay and Yearick, 2026, §7); chapters 6 and 7. ``solve_rate`` is p
    in [0, 1], a number or an array (the result has its shape); ``recipe`` is a
    :class:`~stddial_book.theory.recipes.Recipe` or a preset name, of which only ``scale_std`` matters.
    """
    recipe = as_recipe(recipe)
    p = to_numpy(solve_rate, "solve_rate")
    check_unit_interval(p, "solve_rate")
    variance = p * (1.0 - p)
    return like(np.sqrt(variance) if recipe.scale_std else variance, solve_rate)
