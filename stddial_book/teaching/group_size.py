"""The group-size law and the smallest group that meets it exactly (chapter 5).

The engine's versions are :func:`stddial_book.theory.group_size.group_size_law`,
:func:`~stddial_book.theory.group_size.gradient_fidelity` and
:func:`~stddial_book.theory.group_size.minimal_group_size`, which bisects
instead of scanning, sums only the binomial terms that matter for huge G and
checks its input; tests/test_teaching.py ties these versions to them.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["g_star", "fidelity", "smallest_group_size"]


def g_star(tolerance: float, solve_rate: float) -> float:
    """The group-size law G* = 1/(8 ε p(1 − p)) (Bay and Yearick, 2026),
    for a ``tolerance`` ε in (0, 1) and a ``solve_rate`` p in (0, 1)."""
    return 1.0 / (8.0 * tolerance * solve_rate * (1.0 - solve_rate))


def fidelity(solve_rate: float, group_size: int) -> float:
    """φ(G, p) = E[σ̂]/sqrt(p(1 − p)), E[σ̂] an exact binomial sum over k.

    σ̂ = sqrt(k(G − k))/G is the std of a group with k of G right, and
    k ~ Binomial(G, p); ``solve_rate`` is p, 0 < p < 1, and ``group_size``
    is G.
    """
    p, G = solve_rate, group_size
    k = np.arange(G + 1)
    lgamma = np.vectorize(math.lgamma)  # log Γ(n + 1) = log n!
    log_choose = lgamma(G + 1) - lgamma(k + 1) - lgamma(G - k + 1)
    log_pmf = log_choose + k * math.log(p) + (G - k) * math.log1p(-p)
    sigma_hat = np.sqrt(k * (G - k)) / G
    return float(np.exp(log_pmf) @ sigma_hat) / math.sqrt(p * (1.0 - p))


def smallest_group_size(
    tolerance: float,
    solve_rate: float,
    max_group_size: int = 100_000,
) -> int:
    """The smallest G ≥ 2 whose fidelity reaches 1 − ε: the exact requirement
    that G* approximates. φ never falls as G grows, so a scan upward from
    G = 2 stops at the answer. ``tolerance`` is ε, ``solve_rate`` is p and
    ``max_group_size`` is where the scan gives up."""
    for G in range(2, max_group_size + 1):
        if fidelity(solve_rate, G) >= 1.0 - tolerance:
            return G
    target = 1.0 - tolerance
    raise ValueError(f"no G <= {max_group_size} reaches fidelity {target}")
