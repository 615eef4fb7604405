"""Silent groups and the expected group std: exact binomial sums, refill weights, tries needed (chapters 5 and 12)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from stddial_book.core.checks import (
    ArrayLike,
    check_broadcast,
    check_group_size,
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
from stddial_book.theory.identity import is_bessel, update_weight

__all__ = [
    "silent_probability",
    "expected_group_std",
    "expected_group_variance",
    "tries_needed",
    "expected_update_weight",
    "refill_weight",
    "hypergeometric_pmf",
]


#: The largest G the exact binomial sums take: they hold G + 1 terms (and a Python loop over them).
MAX_EXACT_GROUP_SIZE = 10**7


#: The largest G :func:`expected_group_std` (and so :func:`gradient_fidelity`) takes, and the largest answer
#: :func:`minimal_group_size` searches for. Above :data:`MAX_EXACT_GROUP_SIZE` the binomial sum runs over
#: the k within 15 standard deviations of Gp (the rest of the distribution holds below 1e-48 of its mass),
#: with each probability from Loader's saddle-point form (scipy's ``binom.pmf`` there drifts by about 1e-13
#: relative, against 1e-15 for Loader's: chapter 5's fidelity at G = 1e8..1e12 needs the latter).
MAX_GROUP_SIZE = 10**12


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


def expected_group_variance(solve_rate: ArrayLike, group_size: ArrayLike, correction: int = 0) -> ArrayLike:
    """E[σ̂² | p, G] = p(1 − p)(G − 1)/G for the population std; p(1 − p) for Bessel's (unbiased).

    Chapter 3 derives it from the first two moments of k ~ Binomial(G, p); chapter 5 plots it.
    ``solve_rate`` is p in [0, 1] and ``group_size`` is G ≥ 2 (numbers or arrays that broadcast);
    ``correction`` is 0 (the default, the population std) or 1 (Bessel's).
    """
    p = to_numpy(solve_rate, "solve_rate")
    check_unit_interval(p, "solve_rate")
    g = check_group_size_array(group_size)
    if np.any(g < 2):
        raise ValueError("group_size must be at least 2: one sample has no spread.")
    check_broadcast(solve_rate=p, group_size=g)
    value = p * (1.0 - p) * ((g - 1.0) / g if not is_bessel(correction) else 1.0)
    template = solve_rate if np.ndim(p) >= np.ndim(g) else group_size
    return like(value, template)


def expected_group_std(solve_rate: ArrayLike, group_size: ArrayLike, correction: int = 0) -> ArrayLike:
    """E[σ̂ | p, G] = Σₖ C(G, k) pᵏ (1 − p)^(G−k) sqrt(k/G · (1 − k/G)), an exact binomial sum.

    By Jensen's inequality it lies below sqrt(E[σ̂²]). ``correction`` is 0 (the default, the population
    std) or 1, which scales by sqrt(G/(G − 1)). Broadcasts over ``solve_rate`` (p in [0, 1]) and
    ``group_size`` (G ≥ 2). Chapter 5. G up to :data:`MAX_EXACT_GROUP_SIZE`
    takes all G + 1 terms up to G = 4096; larger G (up to :data:`MAX_GROUP_SIZE`) only the k within 15
    standard deviations of Gp, each probability in Loader's saddle-point form (Loader, 2000; accurate to about
    1e-15 at any G, where scipy's ``binom.pmf`` drifts by about 1e-13); up to that, ``scipy.stats.binom.pmf``.
    """
    p = to_numpy(solve_rate, "solve_rate")
    check_unit_interval(p, "solve_rate")
    g = check_group_size_array(group_size)
    if np.any(g < 2):
        raise ValueError("group_size must be at least 2: one sample has no spread.")
    if g.max() > MAX_GROUP_SIZE:
        raise ValueError(
            f"group_size {g.max():.6g} is above {MAX_GROUP_SIZE:.0e}, the largest G the binomial sum "
            "takes; for larger G use the expansions (attenuated_fidelity, expected_group_variance)."
        )
    use_bessel = is_bessel(correction)
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
        sigma_k = np.sqrt(k / size * (1.0 - k / size))
        if use_bessel:
            sigma_k = sigma_k * math.sqrt(size / (size - 1.0))
        out[sel] = _binomial_pmf(size, p_b[sel]) @ sigma_k
    template = solve_rate if np.ndim(p) >= np.ndim(g) else group_size
    return like(out, template)


def expected_update_weight(solve_rate: ArrayLike, group_size: int, recipe: Recipe) -> ArrayLike:
    """E[w(p̂) | p, G] = Σⱼ C(G, j) pʲ (1 − p)^(G−j) w(j/G): a prompt's expected update weight.

    The expectation is over the group's outcome j ~ Binomial(G, p); silent outcomes contribute 0.
    No refill factor is applied here (DAPO's depends on the whole prompt population; see
    :func:`stddial_book.corpora.histograms.expected_update_mass`). Chapter 5. ``solve_rate`` is p in [0, 1],
    a number or an array (the result has its shape); ``group_size`` is one G ≥ 2 (at most 10⁷, the exact
    sum's limit); ``recipe`` is a :class:`~stddial_book.theory.recipes.Recipe` or a preset name.
    """
    size = _check_exact_size(check_group_size(group_size))
    recipe = as_recipe(recipe)
    p = to_numpy(solve_rate, "solve_rate")
    check_unit_interval(p, "solve_rate")
    j = np.arange(size + 1, dtype=np.float64)
    pmf = _binomial_pmf(size, p.reshape(-1))
    weights = to_numpy(update_weight(j / size, recipe, size), "weights")
    return like((pmf @ weights).reshape(p.shape), solve_rate)


def refill_weight(
    solve_rate: ArrayLike,
    group_size: int,
    recipe: Recipe,
    *,
    redraw_tries: int | None = None,
    pool_silent_fraction: float | None = None,
) -> ArrayLike:
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

    E[w] is :func:`expected_update_weight`, whose ``solve_rate`` (p in [0, 1]), ``group_size`` (one G)
    and ``recipe`` (a recipe or a preset name) these are. ``redraw_tries`` is a whole number ≥ 1;
    ``pool_silent_fraction`` a number in [0, 1).
    """
    if (redraw_tries is None) == (pool_silent_fraction is None):
        raise ValueError(
            "give exactly one of redraw_tries (same-prompt redraw) and pool_silent_fraction (new-prompt refill)."
        )
    if pool_silent_fraction is not None:
        fraction = check_number(pool_silent_fraction, "pool_silent_fraction")
        if not 0 <= fraction < 1:
            raise ValueError(f"pool_silent_fraction must be in [0, 1); got {pool_silent_fraction}.")
        base = to_numpy(expected_update_weight(solve_rate, group_size, recipe), "weights")
        return like(base / (1.0 - fraction), solve_rate)
    tries = check_int(redraw_tries, "redraw_tries", minimum=1)
    base = to_numpy(expected_update_weight(solve_rate, group_size, recipe), "weights")
    silent = to_numpy(silent_probability(solve_rate, group_size), "silent")
    if tries <= 1000:
        # (1 − s^T)/(1 − s) = 1 + s + … + s^(T−1): no division, exact at
        # s = 1 (where E[w] = 0 anyway)
        factor = sum(silent**t for t in range(tries))
    else:
        # the same in closed form: a loop of T terms would take as long as T
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(silent < 1.0, -np.expm1(tries * np.log(silent)) / (1.0 - silent), float(tries))
    return like(base * factor, solve_rate)


def tries_needed(solve_rate: ArrayLike, delta: float) -> ArrayLike:
    """Smallest group size G with P(silent | p, G) = p^G + (1 − p)^G ≤ δ.

    P(silent) falls monotonically in G for 0 < p < 1, so the answer lies between
    ⌈log δ / log m⌉ and ⌈log(δ/2) / log m⌉ with m = max(p, 1 − p); a vectorised bisection finds it.
    Prompts with p = 0 or p = 1 are silent at every G: the answer is ``inf``. So is it where the
    answer, about ln(1/δ)/p, exceeds the largest float (p below about 1e-308). Chapter 5.
    ``solve_rate`` is p in [0, 1], a number or an array (the result has its shape); ``delta`` is δ,
    the largest probability of silence allowed, strictly between 0 and 1.
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


def hypergeometric_pmf(num_correct: ArrayLike, num_samples: int, group_size: int) -> np.ndarray:
    """P(j correct in a group of G drawn without replacement from n stored samples, k of them
    correct), for j = 0..G: shape (len(k), G + 1); ``scipy.stats.hypergeom.pmf(j, n, k, G)``.

    Averaging any function of j under it is an unbiased estimate of that function's expectation
    under j ~ Binomial(G, p) when the n samples are Bernoulli(p) (a U-statistic); it is also the
    subsampled silent fraction of chapter 7. Needs 1 ≤ G ≤ n (a "group" of one is allowed here:
    it is always silent, and the silent-fraction curves start there). scipy's rounding grows with n
    (each row sums to 1 within 1e-15 up to n = 10^5, 2e-9 at n = 10^7, 1e-7 at n = 10^9); n above
    10^7 is refused. ``num_correct`` is k, the correct count of each prompt's stored samples (a whole
    number or a 1-D array of them, in [0, n]); ``num_samples`` is n, the samples stored per prompt;
    ``group_size`` is G.
    """
    from scipy.stats import hypergeom

    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or group_size < 1:
        raise ValueError(f"group_size must be a positive integer; got {' '.join(repr(group_size).split())[:40]}.")
    size = _check_exact_size(int(group_size))
    num_samples = check_int(num_samples, "num_samples")
    if num_samples > 10**7:
        raise ValueError(
            f"num_samples={num_samples} is above 10^7, where scipy's hypergeometric pmf loses precision; "
            "subsample the stored samples (the pmf depends on k/n and G only through the counts)."
        )
    if num_samples < size:
        raise ValueError(f"need at least G = {size} stored samples per prompt to draw a group; got n = {num_samples}.")
    counts = to_numpy(num_correct, "num_correct")
    if counts.ndim > 1:
        raise ValueError(
            f"num_correct must be one count per prompt (a number or a 1-D array); got shape {counts.shape}."
        )
    if np.any(counts != np.round(counts)) or np.any((counts < 0) | (counts > num_samples)):
        raise ValueError(
            f"num_correct must hold whole numbers in [0, n = {num_samples}] (successes out of the n "
            f"stored samples); got values from {counts.min():g} to {counts.max():g}."
        )
    k = np.atleast_1d(counts.astype(np.int64))
    return hypergeom.pmf(np.arange(size + 1)[None, :], num_samples, k[:, None], size)


def _check_exact_size(size):
    """Refuse a G too large for an exact binomial sum (G + 1 terms); returns ``size``."""
    if size > MAX_EXACT_GROUP_SIZE:
        raise ValueError(
            f"group_size {int(size)} is too large for the exact binomial sum (G + 1 terms; at most "
            f"{MAX_EXACT_GROUP_SIZE}); for large G use the expansions (attenuated_fidelity, "
            "expected_group_variance) or large_group_gradient."
        )
    return size


def _binomial_pmf(group_size: int, solve_rate: np.ndarray) -> np.ndarray:
    """P(k correct of G | p) = C(G, k) pᵏ (1 − p)^(G−k) for k = 0..G, one row per p: ``scipy.stats.binom.pmf``."""
    from scipy.stats import binom

    k = np.arange(group_size + 1, dtype=np.float64)
    p = np.asarray(solve_rate, dtype=np.float64).reshape(-1, 1)
    # a subnormal p (below 1e-300) is 0 to every printed digit; older scipy overflows on it
    p = np.where(p < 1e-300, 0.0, p)
    return binom.pmf(k[None, :], group_size, p)


#: Terms the banded binomial sum takes at most before it samples every h-th k (h ≪ the standard deviation).
_BAND_TERMS = 20_000


#: Up to this G, :func:`expected_group_std` takes all G + 1 terms; above, only the band of k that holds the
#: binomial's mass (:func:`_banded_group_std`), which keeps the sum fast at any G.
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
    log_pmf = (
        _stirlerr(np.array([float(size)]))[0] - _stirlerr(k) - _stirlerr(rest) - _bd0(k, mean) - _bd0(rest, size * q)
    )
    pmf = np.exp(log_pmf) * np.sqrt(size / (2.0 * math.pi * k * rest))
    frac = k / size
    return float(step * np.sum(pmf * np.sqrt(frac * (1.0 - frac))))
