"""Judging a difference between runs by their seeds, as chapter 13 does.

:func:`welch_t` is Welch's test of a difference of two means (the seed-to-seed noise of each
side measured from its own seeds); :func:`pool_cells` pools one difference measured in several
cells, weighting each by the inverse of its squared standard error, and asks with Cochran's Q
whether the cells share one difference at all. The engine's versions (the chapter's screens and
pooled rows) check their inputs and handle the edge cases; tests/test_teaching.py ties these
to them and to scipy.stats.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

__all__ = ["welch_t", "pool_cells"]


def welch_t(a, b) -> dict[str, float]:
    """Welch's t test of mean(a) - mean(b), two-sided, from the seeds of each side.

    ``a`` and ``b`` hold one measurement per seed (at least two each).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size  # each mean's squared standard error
    se = math.sqrt(va + vb)
    t = (a.mean() - b.mean()) / se
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))  # Welch-Satterthwaite
    p = 2 * stats.t.sf(abs(t), df)  # Student t: the standard error is itself estimated from few seeds
    return {"difference": float(a.mean() - b.mean()), "se": se, "t": float(t), "df": float(df), "p": float(p)}


def pool_cells(differences, variances) -> dict[str, float]:
    """One difference pooled over cells (fixed effect), with Cochran's Q and I squared.

    ``differences`` holds each cell's difference and ``variances`` its squared standard error.
    """
    d, v = np.asarray(differences, dtype=float), np.asarray(variances, dtype=float)
    w = 1 / v  # a cell measured more precisely counts more
    pooled = np.sum(w * d) / np.sum(w)
    se = math.sqrt(1 / np.sum(w))
    q = np.sum(w * (d - pooled) ** 2)  # chi-squared on k - 1 df if every cell has the same difference
    df = d.size - 1
    i2 = max(0.0, (q - df) / q) if q > 0 else 0.0  # the share of the cells' spread noise does not explain
    return {"difference": float(pooled), "se": se, "q": float(q), "q_p": float(stats.chi2.sf(q, df)), "i2": float(i2)}
