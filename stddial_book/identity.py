"""Closed forms of the group-standard-deviation identity (chapters 3 and 5).

For binary rewards a group of G samples with k correct has pass rate p̂ = k/G and population
standard deviation σ = sqrt(p̂(1 − p̂)). Every group-relative recipe gives the correct samples
one advantage A₊ = α(1 − p̂) and the wrong ones A₋ = −α p̂, with a recipe-dependent scale α:

* GRPO (Shao et al., 2024) divides by the std: α = 1/σ, so the group's policy-gradient term
  (1/G) Σᵢ Aᵢ gᵢ equals σ (ḡ₊ − ḡ₋) and mean |A| = 2σ;
* Dr. GRPO (Liu et al., 2025) drops the division: α = 1, giving σ² (ḡ₊ − ḡ₋) and mean |A| = 2σ²;
* DAPO (Yu et al., 2025) keeps GRPO's α but discards groups with σ = 0 and refills the batch.

In general the group term is w (ḡ₊ − ḡ₋) with the *update weight* w = α p̂(1 − p̂), and
mean |A| = 2w for every recipe. A group with σ = 0 is *silent*: w = 0 whatever the recipe.

All functions broadcast over numpy arrays or torch tensors and return the kind they were given.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ._arrays import (
    ArrayLike,
    check_binary,
    check_broadcast,
    check_group_size,
    check_group_size_array,
    check_int,
    check_number,
    check_unit_interval,
    like,
    to_numpy,
    unit_scale,
)
from .recipes import as_recipe

if TYPE_CHECKING:  # pragma: no cover
    from .recipes import Recipe

#: The largest G the exact binomial sums take: they hold G + 1 terms (and a Python loop over them).
MAX_EXACT_GROUP_SIZE = 10**7

#: The largest G :func:`expected_group_std` (and so :func:`gradient_fidelity`) takes, and the largest answer
#: :func:`minimal_group_size` searches for. Above :data:`MAX_EXACT_GROUP_SIZE` the binomial sum runs over
#: the k within 15 standard deviations of Gp (the rest of the distribution holds below 1e-48 of its mass),
#: with each probability from Loader's saddle-point form (no log-gamma of huge numbers), to about 1e-13.
MAX_GROUP_SIZE = 10**12

__all__ = [
    "pass_rate",
    "group_std",
    "std_from_pass_rate",
    "bessel_factor",
    "update_weight",
    "mean_abs_advantage",
    "silent_probability",
    "expected_group_std",
    "expected_group_variance",
    "tries_needed",
    "expected_update_weight", "refill_weight",
    "rloo_advantages",
    "gradient_fidelity",
    "attenuated_fidelity",
    "group_size_law",
    "minimal_group_size",
    "arcsine_objective",
    "difficulty_weight",
    "large_group_gradient",
    "hypergeometric_pmf",
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

    ``correction=0`` (the default) is the population std σ used by the identity; ``correction=1``
    is Bessel's sample std s = σ·sqrt(G/(G − 1)), what TRL, verl and oat compute. For binary
    rewards σ = sqrt(p̂(1 − p̂)). Rewards may be any real numbers here (shaped rewards are fine).
    Chapter 3; the notation follows the book's appendix.
    """
    arr = to_numpy(rewards, "rewards")
    if arr.ndim == 0:
        raise ValueError("rewards must hold a group of samples along its last axis; got a scalar.")
    check_group_size(arr.shape[-1], "the group size (length of the last axis of rewards)")
    _check_correction(correction)
    unit, exponent, _ = unit_scale(arr)  # exact; no overflow in the squares of rewards near 1e200
    return like(np.ldexp(unit.std(axis=-1, ddof=correction), exponent[..., 0]), rewards)


def bessel_factor(group_size: ArrayLike) -> ArrayLike:
    """sqrt((G − 1)/G): what Bessel's std multiplies GRPO's weight and mean |A| by (0.935 at G = 8)."""
    g = check_group_size_array(group_size)
    if np.any(g < 2):
        raise ValueError("group_size must be at least 2 for Bessel's correction (it divides by G − 1).")
    return like(np.sqrt((g - 1.0) / g), group_size)


def std_from_pass_rate(
    pass_rate: ArrayLike, group_size: ArrayLike | None = None, correction: int = 0
) -> ArrayLike:
    """σ = sqrt(p̂(1 − p̂)), or Bessel's s = σ·sqrt(G/(G − 1)) when ``correction=1``.

    ``group_size`` is needed only for ``correction=1``. Chapter 3.
    """
    p = to_numpy(pass_rate, "pass_rate")
    check_unit_interval(p, "pass_rate")
    sigma = np.sqrt(p * (1.0 - p))
    if _check_correction(correction):
        check_broadcast(pass_rate=p, group_size=_need_group_size(group_size))
        sigma = sigma / to_numpy(bessel_factor(group_size), "group_size")
    return like(sigma, pass_rate)


def update_weight(
    pass_rate: ArrayLike,
    recipe: "Recipe",
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
    that were not silent); pass it to get the effective per-prompt weight. References:
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
        scale = np.divide(1.0, gap * std + recipe.std_eps, out=np.zeros_like(std),
                          where=(gap * std + recipe.std_eps) > 0)
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


def mean_abs_advantage(
    pass_rate: ArrayLike, recipe: "Recipe", group_size: ArrayLike | None = None
) -> ArrayLike:
    """Mean |Aᵢ| over a group with pass rate p̂: exactly twice :func:`update_weight`.

    2σ for GRPO with population std and eps = 0, 2σ·sqrt((G − 1)/G) with Bessel's std, 2σ² for
    Dr. GRPO with 0/1 rewards. Chapter 3.
    """
    return 2.0 * update_weight(pass_rate, recipe, group_size)


def silent_probability(solve_rate: ArrayLike, group_size: ArrayLike) -> ArrayLike:
    """P(silent | p, G) = p^G + (1 − p)^G: all G samples agree (all right or all wrong).

    Broadcasts over ``solve_rate`` and ``group_size`` (G ≥ 1; G = 1 is always silent).
    Chapter 5; the source paper's silent-prompt analysis.
    """
    p = to_numpy(solve_rate, "solve_rate")
    check_unit_interval(p, "solve_rate")
    g = check_group_size_array(group_size)
    check_broadcast(solve_rate=p, group_size=g)
    template = solve_rate if np.ndim(p) >= np.ndim(g) else group_size
    return like(p**g + (1.0 - p) ** g, template)


def expected_group_variance(
    solve_rate: ArrayLike, group_size: ArrayLike, correction: int = 0
) -> ArrayLike:
    """E[σ̂² | p, G] = p(1 − p)(G − 1)/G for the population std; p(1 − p) for Bessel's (unbiased).

    Chapter 3 derives it from the first two moments of k ~ Binomial(G, p); chapter 5 plots it.
    """
    p = to_numpy(solve_rate, "solve_rate")
    check_unit_interval(p, "solve_rate")
    g = check_group_size_array(group_size)
    if np.any(g < 2):
        raise ValueError("group_size must be at least 2: one sample has no spread.")
    check_broadcast(solve_rate=p, group_size=g)
    value = p * (1.0 - p) * ((g - 1.0) / g if not _check_correction(correction) else 1.0)
    template = solve_rate if np.ndim(p) >= np.ndim(g) else group_size
    return like(value, template)


def expected_group_std(
    solve_rate: ArrayLike, group_size: ArrayLike, correction: int = 0
) -> ArrayLike:
    """E[σ̂ | p, G] = Σₖ C(G, k) pᵏ (1 − p)^(G−k) sqrt(k/G · (1 − k/G)), an exact binomial sum.

    By Jensen's inequality it lies below sqrt(E[σ̂²]). ``correction=1`` scales by sqrt(G/(G − 1)).
    Broadcasts over ``solve_rate`` and ``group_size``. Chapter 5. G up to :data:`MAX_EXACT_GROUP_SIZE`
    takes all G + 1 terms up to G = 4096; larger G (up to :data:`MAX_GROUP_SIZE`) only the k within 15
    standard deviations of Gp, with each probability in Loader's saddle-point form, accurate to about
    1e-13 (log-gamma probabilities would lose about 1e-10 at G = 10⁵).
    """
    p = to_numpy(solve_rate, "solve_rate")
    check_unit_interval(p, "solve_rate")
    g = check_group_size_array(group_size)
    if np.any(g < 2):
        raise ValueError("group_size must be at least 2: one sample has no spread.")
    if g.max() > MAX_GROUP_SIZE:
        raise ValueError(f"group_size {g.max():.6g} is above {MAX_GROUP_SIZE:.0e}, the largest G the binomial sum "
                         "takes; for larger G use the expansions (attenuated_fidelity, expected_group_variance).")
    use_bessel = _check_correction(correction)
    check_broadcast(solve_rate=p, group_size=g)
    p_b, g_b = np.broadcast_arrays(p, g)
    out = np.empty(p_b.shape, dtype=np.float64)
    for size in np.unique(g_b).astype(np.int64).tolist():
        sel = g_b == size
        if size > _FULL_SUM_MAX:  # the sum over the k that matter, with probabilities accurate at any G
            out[sel] = [_banded_group_std(size, float(q)) for q in p_b[sel]]
            if use_bessel:
                out[sel] = out[sel] * math.sqrt(size / (size - 1.0))
            continue
        k = np.arange(size + 1, dtype=np.float64)
        log_choose = _log_choose(size)
        pk = p_b[sel][:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            log_pmf = (log_choose + _xlogy(k, pk) + _xlogy(size - k, 1.0 - pk))
        sigma_k = np.sqrt(k / size * (1.0 - k / size))
        if use_bessel:
            sigma_k = sigma_k * math.sqrt(size / (size - 1.0))
        out[sel] = np.exp(log_pmf) @ sigma_k
    template = solve_rate if np.ndim(p) >= np.ndim(g) else group_size
    return like(out, template)


def expected_update_weight(solve_rate: ArrayLike, group_size: int, recipe: "Recipe") -> ArrayLike:
    """E[w(p̂) | p, G] = Σⱼ C(G, j) pʲ (1 − p)^(G−j) w(j/G): a prompt's expected update weight.

    The expectation is over the group's outcome j ~ Binomial(G, p); silent outcomes contribute 0.
    No refill factor is applied here (DAPO's depends on the whole prompt population; see
    :func:`stddial_book.solve_rates.expected_update_mass`). Chapter 5.
    """
    size = _check_exact_size(check_group_size(group_size))
    recipe = as_recipe(recipe)
    p = to_numpy(solve_rate, "solve_rate")
    check_unit_interval(p, "solve_rate")
    j = np.arange(size + 1, dtype=np.float64)
    log_choose = _log_choose(size)
    flat = p.reshape(-1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        pmf = np.exp(log_choose + _xlogy(j, flat) + _xlogy(size - j, 1.0 - flat))
    weights = to_numpy(update_weight(j / size, recipe, size), "weights")
    return like((pmf @ weights).reshape(p.shape), solve_rate)


def refill_weight(solve_rate: ArrayLike, group_size: int, recipe: "Recipe",
                  *, redraw_tries: int | None = None,
                  pool_silent_fraction: float | None = None) -> ArrayLike:
    """A prompt's expected update weight per draw under one of DAPO's two
    ways of replacing silent groups (give exactly one keyword):

    * ``redraw_tries = T``, the source paper's controlled run (chapter 8): a
      silent group of the prompt is redrawn from the same prompt, at most T
      draws in all. The prompt then enters the batch unless all T groups are
      silent: E[w | mixed] (1 − s^T) = E[w] (1 − s^T) / (1 − s), with
      s = p^G + (1 − p)^G, up to T times E[w] for a prompt that is nearly
      always silent.
    * ``pool_silent_fraction = f``, verl's DAPO and this book's trainer
      (chapter 12): silent groups are dropped and the batch is refilled with
      groups of new prompts, so every prompt's weight is scaled by the same
      1/(1 − f), f the silent fraction over the prompts drawn:
      E[w] / (1 − f). The allocation across prompts is then GRPO's.

    E[w] is :func:`expected_update_weight`.
    """
    if (redraw_tries is None) == (pool_silent_fraction is None):
        raise ValueError("give exactly one of redraw_tries (same-prompt "
                         "redraw) and pool_silent_fraction (new-prompt "
                         "refill).")
    if pool_silent_fraction is not None:
        fraction = check_number(pool_silent_fraction, "pool_silent_fraction")
        if not 0 <= fraction < 1:
            raise ValueError("pool_silent_fraction must be in [0, 1); got "
                             f"{pool_silent_fraction}.")
        base = to_numpy(expected_update_weight(solve_rate, group_size,
                                               recipe), "weights")
        return like(base / (1.0 - fraction), solve_rate)
    tries = check_int(redraw_tries, "redraw_tries", minimum=1)
    base = to_numpy(expected_update_weight(solve_rate, group_size, recipe),
                    "weights")
    silent = to_numpy(silent_probability(solve_rate, group_size), "silent")
    if tries <= 1000:
        # (1 − s^T)/(1 − s) = 1 + s + … + s^(T−1): no division, exact at
        # s = 1 (where E[w] = 0 anyway)
        factor = sum(silent ** t for t in range(tries))
    else:
        # the same in closed form: a loop of T terms would take as long as T
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(silent < 1.0,
                              -np.expm1(tries * np.log(silent))
                              / (1.0 - silent),
                              float(tries))
    return like(base * factor, solve_rate)


def tries_needed(solve_rate: ArrayLike, delta: float) -> ArrayLike:
    """Smallest group size G with P(silent | p, G) = p^G + (1 − p)^G ≤ δ.

    P(silent) falls monotonically in G for 0 < p < 1, so the answer lies between
    ⌈log δ / log m⌉ and ⌈log(δ/2) / log m⌉ with m = max(p, 1 − p); a vectorised bisection finds it.
    Prompts with p = 0 or p = 1 are silent at every G: the answer is ``inf``. So is it where the
    answer, about ln(1/δ)/p, exceeds the largest float (p below about 1e-308). Chapter 5.
    """
    if not (0.0 < check_number(delta, "delta") < 1.0):
        raise ValueError(f"delta must lie strictly between 0 and 1 (a probability of silence); got {delta}.")
    p = to_numpy(solve_rate, "solve_rate")
    check_unit_interval(p, "solve_rate")
    flat = p.reshape(-1)
    out = np.full(flat.shape, np.inf)
    mixed = (flat > 0.0) & (flat < 1.0)
    q = flat[mixed]
    # logs through log1p: for p within 1e-16 of 0 or 1, 1 − p rounds to 1 and log(1 − p) to 0
    log_q, log_1mq = np.log(q), np.log1p(-q)
    log_m = np.maximum(log_q, log_1mq)
    with np.errstate(over="ignore", invalid="ignore"):  # an answer beyond the largest float is inf
        lo = np.maximum(1.0, np.ceil(np.log(delta) / log_m) - 1.0)  # P(silent) > delta at lo (or lo = 1)
        # P(silent) <= delta at hi; log δ − log 2, not log(δ/2), which is −inf for δ below 1e-323
        hi = np.maximum(lo + 1.0, np.ceil((np.log(delta) - math.log(2.0)) / log_m))
    while True:
        mid = np.floor((lo + hi) / 2.0)
        # done where lo and hi are adjacent (beyond 2**53 adjacent floats are more than 1 apart)
        with np.errstate(invalid="ignore"):
            open_ = (hi - lo > 1) & (mid > lo) & (mid < hi)
        if not open_.any():
            break
        ok = (np.exp(mid * log_q) + np.exp(mid * log_1mq) <= delta) & open_
        fail = ~ok & open_
        hi = np.where(ok, mid, hi)
        lo = np.where(fail, mid, lo)
    # where δ is met with equality, the two ways of rounding P(silent) (logs here, powers in
    # silent_probability) can disagree by an ulp: answer so that silent_probability agrees
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        short = np.isfinite(hi) & (q**hi + (1.0 - q) ** hi > delta)
    hi = np.where(short, hi + 1.0, hi)
    out[mixed] = hi
    return like(out.reshape(p.shape), solve_rate)


def rloo_advantages(rewards: ArrayLike) -> ArrayLike:
    """Leave-one-out (RLOO) advantages Rᵢ − bᵢ with bᵢ = (1/(G − 1)) Σ_{j≠i} Rⱼ, along the last axis.

    Kool et al. (2019); Ahmadian et al. (2024). Group-mean centring is this times (G − 1)/G:
    Rᵢ − μ = (G − 1)/G · (Rᵢ − bᵢ) (Bay and Yearick, 2026, Prop. 1; chapter 3). Any real
    rewards; G ≥ 2.
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
        raise ValueError(f"RLOO advantages of rewards up to {np.abs(arr).max():g} in magnitude overflow float64; "
                         "rescale the rewards.")
    return like(out, rewards)


def _interior(solve_rate: ArrayLike, what: str) -> np.ndarray:
    p = to_numpy(solve_rate, "solve_rate")
    check_unit_interval(p, "solve_rate")
    if np.any((p <= 0.0) | (p >= 1.0)):
        raise ValueError(f"{what} is defined for 0 < solve_rate < 1 only (at p = 0 or 1 every group is silent "
                         "and the large-group gradient √(p(1 − p)) is 0); drop those prompts first.")
    return p


def gradient_fidelity(solve_rate: ArrayLike, group_size: ArrayLike) -> ArrayLike:
    """φ(G, p) = E[g]/√(p(1 − p)): the fraction of the large-group (arcsine) gradient a group of
    G realises, with E[g] the exact binomial sum :func:`expected_group_std`.

    Bay and Yearick (2026), eq. (fidelity); chapter 5. Defined for 0 < p < 1.
    """
    p = _interior(solve_rate, "the gradient fidelity")
    value = to_numpy(expected_group_std(p, group_size), "E[g]") / np.sqrt(p * (1.0 - p))
    return like(value, solve_rate if np.ndim(solve_rate) >= np.ndim(group_size) else group_size)


def attenuated_fidelity(solve_rate: ArrayLike, group_size: ArrayLike) -> ArrayLike:
    """The large-G expansion of φ: 1 − 1/(8 G p (1 − p)) (second-order delta method).

    Bay and Yearick (2026), Corollary 1; chapter 5 derives it in SymPy. Accurate in the interior
    and for large G; near p ∈ {0, 1} it overstates φ (silent groups are not in it). It falls below
    the most negative float (and is returned as ``-inf``) only when 8 G p(1 − p) is below about 1e-308.
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

    Bay and Yearick (2026), Corollary 2; chapter 5. ``tolerance`` ε in (0, 1). G* exceeds the
    largest float (and is returned as ``inf``) only when ε p(1 − p) is below about 1e-309.
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
    """
    eps = check_number(tolerance, "tolerance")
    if not 0.0 < eps < 1.0:
        raise ValueError(f"tolerance ε must lie strictly between 0 and 1; got {tolerance!r}.")
    p = float(_interior(np.asarray(check_number(solve_rate, "solve_rate")), "the minimal group size"))
    max_group_size = check_int(max_group_size, "max_group_size", minimum=2)
    if max_group_size > MAX_GROUP_SIZE:
        raise ValueError(f"max_group_size={max_group_size} is above {MAX_GROUP_SIZE:.0e}, the largest G this search "
                         f"takes; pass max_group_size <= {MAX_GROUP_SIZE} (the law gives G* ≈ "
                         f"{float(group_size_law(eps, p)):.3g} for ε = {eps:g}, p = {p:g}).")
    target = 1.0 - eps
    law = float(group_size_law(eps, p))

    def reaches(size: int) -> bool:
        """φ(size) ≥ target, as gradient_fidelity computes φ (a full sum up to G = 4096, banded above)."""
        if size < 2:
            return False  # one sample has no spread: φ = 0
        return bool(to_numpy(gradient_fidelity(p, size), "phi") >= target)

    # φ never falls as G grows, so if G = max_group_size misses the target, all smaller do
    if not reaches(max_group_size):
        raise ValueError(f"no G ≤ {max_group_size} reaches fidelity {target} at p = {p}; raise max_group_size "
                         f"(up to {MAX_GROUP_SIZE:.0e}; the large-G law gives G* ≈ {law:.3g}).")
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
    :func:`difficulty_weight`.
    """
    p = to_numpy(solve_rate, "solve_rate")
    check_unit_interval(p, "solve_rate")
    return like(2.0 * np.arcsin(np.sqrt(p)), solve_rate)


def difficulty_weight(solve_rate: ArrayLike) -> ArrayLike:
    """w(p) = d/dp 2·arcsin√p = 1/√(p(1 − p)): GRPO's weight on a unit of solve-rate gain at p.

    The question-level difficulty bias of Liu et al. (2025), exactly (Bay and Yearick, 2026,
    eq. (weight)); w(1/2) = 2, and Dr. GRPO's weight is 1. Chapter 6. Defined for 0 < p < 1.
    """
    p = _interior(solve_rate, "the difficulty weight")
    return like(1.0 / np.sqrt(p * (1.0 - p)), solve_rate)


def large_group_gradient(solve_rate: ArrayLike, recipe: "Recipe") -> ArrayLike:
    """The G → ∞ limit of a recipe's expected per-prompt gradient for a Bernoulli-logit prompt.

    √(p(1 − p)) when the recipe divides by the std (GRPO, DAPO: the θ-gradient of 2·arcsin√p),
    p(1 − p) when it does not (Dr. GRPO: the θ-gradient of p). These are the weights of the
    source paper's "gradient budget" (Bay and Yearick, 2026, §7); chapters 6 and 7.
    """
    recipe = as_recipe(recipe)
    p = to_numpy(solve_rate, "solve_rate")
    check_unit_interval(p, "solve_rate")
    variance = p * (1.0 - p)
    return like(np.sqrt(variance) if recipe.scale_std else variance, solve_rate)


def hypergeometric_pmf(num_correct: ArrayLike, num_samples: int, group_size: int) -> np.ndarray:
    """P(j correct in a group of G drawn without replacement from n stored samples, k of them
    correct), for j = 0..G: shape (len(k), G + 1).

    Averaging any function of j under it is an unbiased estimate of that function's expectation
    under j ~ Binomial(G, p) when the n samples are Bernoulli(p) (a U-statistic); it is also the
    subsampled silent fraction of chapter 7. Needs 1 ≤ G ≤ n (a "group" of one is allowed here:
    it is always silent, and the silent-fraction curves start there). Computed through log-gamma,
    whose rounding grows with n (relative error about 1e-13 at n = 64, 1e-8 at n = 10^7); n above
    10^7 is refused.
    """
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or group_size < 1:
        raise ValueError(f"group_size must be a positive integer; got {' '.join(repr(group_size).split())[:40]}.")
    size = _check_exact_size(int(group_size))
    num_samples = check_int(num_samples, "num_samples")
    if num_samples > 10**7:
        raise ValueError(f"num_samples={num_samples} is above 10^7, where the log-gamma form loses precision; "
                         "subsample the stored samples (the pmf depends on k/n and G only through the counts).")
    if num_samples < size:
        raise ValueError(f"need at least G = {size} stored samples per prompt to draw a group; got n = {num_samples}.")
    counts = to_numpy(num_correct, "num_correct")
    if counts.ndim > 1:
        raise ValueError(f"num_correct must be one count per prompt (a number or a 1-D array); got shape {counts.shape}.")
    if np.any(counts != np.round(counts)) or np.any((counts < 0) | (counts > num_samples)):
        raise ValueError(f"num_correct must hold whole numbers in [0, n = {num_samples}] (successes out of the n "
                         f"stored samples); got values from {counts.min():g} to {counts.max():g}.")
    k = np.atleast_1d(counts.astype(np.int64))
    lg = np.vectorize(math.lgamma)

    def log_choose(a, b):
        return lg(a + 1) - lg(b + 1) - lg(a - b + 1)

    kk, jj = k[:, None], np.arange(size + 1)[None, :]
    valid = (jj <= kk) & (size - jj <= num_samples - kk)
    with np.errstate(invalid="ignore"):
        log_p = (log_choose(np.maximum(kk, jj), jj) + log_choose(np.maximum(num_samples - kk, size - jj), size - jj)
                 - log_choose(num_samples, size))
    return np.where(valid, np.exp(np.where(valid, log_p, 0.0)), 0.0)


def _check_exact_size(size):
    """Refuse a G too large for an exact binomial sum (G + 1 terms); returns ``size``."""
    if size > MAX_EXACT_GROUP_SIZE:
        raise ValueError(f"group_size {int(size)} is too large for the exact binomial sum (G + 1 terms; at most "
                         f"{MAX_EXACT_GROUP_SIZE}); for large G use the expansions (attenuated_fidelity, "
                         "expected_group_variance) or large_group_gradient.")
    return size


def _log_choose(size: int) -> np.ndarray:
    """log C(G, j) for j = 0..G: lgamma(G + 1) − lgamma(j + 1) − lgamma(G − j + 1), each lgamma taken once."""
    lgam = np.fromiter(map(math.lgamma, range(1, size + 2)), dtype=np.float64, count=size + 1)  # lgamma(j + 1)
    return (lgam[size] - lgam) - lgam[::-1]  # the same float operations, in the same order, as term by term


#: Terms the banded binomial sum takes at most before it samples every h-th k (h ≪ the standard deviation).
_BAND_TERMS = 20_000

#: Up to this G, :func:`expected_group_std` takes all G + 1 terms with log-gamma probabilities (as it always
#: has: the book's numbers are unchanged); above, their rounding would grow (about 1e-10 relative at
#: G = 10⁵) and the banded sum of Loader's probabilities is used.
_FULL_SUM_MAX = 4096


def _stirlerr(n: np.ndarray) -> np.ndarray:
    """log(n!) − log(√(2πn) (n/e)ⁿ), the error of Stirling's formula, for n ≥ 1 (Loader, 2000)."""
    n = np.asarray(n, dtype=np.float64)
    small = n <= 15
    out = np.empty(n.shape)
    if small.any():
        m = n[small]
        out[small] = [math.lgamma(x + 1.0) - (x + 0.5) * math.log(x) + x - 0.5 * math.log(2.0 * math.pi) for x in m]
    big = n[~small]
    inv2 = 1.0 / (big * big)
    out[~small] = (1.0 / 12 - (1.0 / 360 - (1.0 / 1260 - (1.0 / 1680 - inv2 / 1188) * inv2) * inv2) * inv2) / big
    return out


def _bd0(x: np.ndarray, mean: float) -> np.ndarray:
    """x log(x/m) + m − x without cancellation (Loader, 2000): a series in v = (x − m)/(x + m) near m."""
    diff = x - mean
    out = np.empty_like(x)
    near = np.abs(diff) < 0.1 * (x + mean)
    if not near.all():
        far = x[~near]
        with np.errstate(over="ignore"):  # a term beyond the float range only makes its probability 0
            out[~near] = far * np.log(far / mean) + mean - far
    if near.any():
        xn, dn = x[near], diff[near]
        v = dn / (xn + mean)
        total = dn * v
        term = 2.0 * xn * v
        v2 = v * v
        for j in range(1, 12):  # |v| < 0.1: each term is at least 100 times smaller than the one before
            term = term * v2
            step = term / (2 * j + 1)
            total = total + step
            if not np.any(np.abs(step) > 1e-17 * np.abs(total)):
                break
        out[near] = total
    return out


def _banded_group_std(size: int, p: float) -> float:
    """E[σ̂ | p, G] for one G, summing only the k within 15 standard deviations (plus 150) of Gp.

    Bernstein's inequality puts the rest of the binomial below 2e-48 of its mass. Each term's
    probability is Loader's saddle-point form, exp(stirlerr(G) − stirlerr(k) − stirlerr(G − k)
    − bd0(k, Gp) − bd0(G − k, G(1 − p))) · √(G / (2π k (G − k))), accurate to about 1e-15 for any G
    (log-gamma differences of huge numbers are not); k = 0 and G add nothing (σ = 0 there). Beyond
    :data:`_BAND_TERMS` terms every h-th k is taken, weighted by h: the summand is smooth on the scale of
    the standard deviation (thousands of k), so the sum changes by far less than float64 resolves.
    """
    q = 1.0 - p
    if p <= 0.0 or q <= 0.0:
        return 0.0  # every group is silent: σ̂ = 0
    mean, sd = size * p, math.sqrt(size * p * q)
    reach = 15.0 * sd + 150.0
    lo, hi = max(1, math.floor(mean - reach)), min(size - 1, math.ceil(mean + reach))
    if hi < lo:
        return 0.0
    step = max(1, -(-(hi - lo + 1) // _BAND_TERMS))
    k = np.arange(lo, hi + 1, step, dtype=np.float64)
    rest = size - k
    log_pmf = (_stirlerr(np.array([float(size)]))[0] - _stirlerr(k) - _stirlerr(rest)
               - _bd0(k, mean) - _bd0(rest, size * q))
    pmf = np.exp(log_pmf) * np.sqrt(size / (2.0 * math.pi * k * rest))
    frac = k / size
    return float(step * np.sum(pmf * np.sqrt(frac * (1.0 - frac))))


def _xlogy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x·log(y) with 0·log(0) = 0."""
    return np.where(x == 0, 0.0, x * np.log(np.where(x == 0, 1.0, y)))


def _check_correction(correction: int) -> bool:
    if (isinstance(correction, bool) or not isinstance(correction, (int, float, np.integer, np.floating))
            or correction not in (0, 1)):  # the type first: 0j == 0 in Python, an array has no truth value
        raise ValueError(
            f"correction must be 0 (population std, the identity's σ) or 1 (Bessel's sample std, "
            f"as TRL, verl and oat use); got {' '.join(repr(correction).split())[:40]}."
        )
    return correction == 1


def _need_group_size(group_size: ArrayLike | None) -> ArrayLike:
    if group_size is None:
        raise ValueError("Bessel's correction needs the group size: pass group_size=G.")
    return group_size
