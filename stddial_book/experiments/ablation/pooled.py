"""The dial-only ablation's cells taken together (chapter 13): exploratory analyses, added after the
per-cell estimates of :mod:`stddial_book.experiments.ablation.report` were seen.

* :func:`inverse_variance`: the cells' differences pooled with weights 1/se², with Cochran's Q,
  I² and the DerSimonian-Laird random-effects mean beside the fixed-effect one;
* :func:`pooled_contrasts` and :func:`pooled_rows`: each contrast pooled within each optimizer
  (the cells under AdamW and under SGD disagree more than their noise allows) and over all cells by
  random effects, a family of its own (Bonferroni over its rows);
* :func:`effect_differences`: the difference of the division's effect between the cells where an
  explanation of chapter 13's null predicts it and the others (G = 32 against G = 8, no clip
  against clip), within each optimizer, tested directly instead of counting detections.

Pooled estimates use the normal distribution (:data:`scipy.stats.norm`): each cell's standard error
rests on 22 degrees of freedom or more, and the pooled ones on several cells.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from stddial_book.experiments.ablation.study import CELLS, CONTRASTS, MEASURES, Cell

__all__ = ["inverse_variance", "cell_differences", "pooled_contrasts", "pooled_rows", "effect_differences", "GROUPS"]

#: The pooled rows of each contrast and measure: the cells under each optimizer (fixed effect),
#: and every cell (random effects).
GROUPS: dict[str, tuple[str, Callable[[Cell], bool]]] = {
    "adamw": ("AdamW cells", lambda c: c.optimizer == "adamw"),
    "sgd": ("SGD cells", lambda c: c.optimizer == "sgd"),
    "all": ("all cells, random effects", lambda c: True),
}

CONTRAST_NAMES = {"divide-no_divide": "divide − no_divide", "filter-divide": "filter − divide"}
MEASURE_NAMES = {"hardest_quartile": "hardest quartile", "heldout": "held-out"}


def inverse_variance(differences, variances) -> dict[str, float]:
    """Pool estimates ``differences`` with squared standard errors ``variances``.

    Fixed effect: weights w_i = 1/v_i, mean Σ w_i d_i / Σ w_i, se 1/sqrt(Σ w_i). Cochran's
    Q = Σ w_i (d_i − mean)² on k − 1 degrees of freedom (its p from :data:`scipy.stats.chi2`: are
    the differences one common difference plus noise?), I² = max(0, (Q − (k − 1)) / Q), the share
    of their spread that noise does not explain. DerSimonian-Laird: between-cell variance
    τ² = max(0, (Q − (k − 1)) / (Σ w − Σ w² / Σ w)), weights 1/(v_i + τ²), mean and se as above
    (``random_difference``, ``random_se``). ``weights`` are the fixed-effect shares (sum 1)."""
    from scipy import stats

    d, v = np.asarray(differences, dtype=np.float64), np.asarray(variances, dtype=np.float64)
    if d.size == 0 or d.shape != v.shape or np.any(v <= 0):
        raise ValueError("need one positive squared standard error per difference, and at least one difference.")
    w = 1.0 / v
    mean = float(np.sum(w * d) / np.sum(w))
    q = float(np.sum(w * (d - mean) ** 2))
    df = d.size - 1
    tau2 = max(0.0, (q - df) / (np.sum(w) - np.sum(w**2) / np.sum(w))) if df > 0 else 0.0
    w_random = 1.0 / (v + tau2)
    return {
        "difference": mean,
        "se": float(np.sqrt(1.0 / np.sum(w))),
        "q": q,
        "q_df": df,
        "q_p": float(stats.chi2.sf(q, df)) if df > 0 else float("nan"),
        "i2": max(0.0, (q - df) / q) if q > 0 and df > 0 else 0.0,
        "tau2": float(tau2),
        "random_difference": float(np.sum(w_random * d) / np.sum(w_random)),
        "random_se": float(np.sqrt(1.0 / np.sum(w_random))),
        "weights": (w / np.sum(w)).tolist(),
    }


def cell_differences(
    summary: dict[str, Any], contrast: str, measure: str, where: Callable[[Cell], bool] = lambda c: True
) -> list[tuple[str, float, float]]:
    """(cell key, difference of means, its squared Welch standard error s_a²/n_a + s_b²/n_b) of
    ``contrast`` ("divide-no_divide") on ``measure`` (any per-seed value of the study) in every
    recorded cell where ``where`` holds and both arms have two seeds or more, in the design's order;
    a cell without noise (all seeds equal) has no weight to give and is left out. ``summary`` is
    :func:`~stddial_book.experiments.ablation.study.ablation_summary`'s dict (its seed-by-seed
    ``values`` are read); ``where`` is a predicate on a :class:`Cell` (default: every cell)."""
    a, b = contrast.split("-")
    out = []
    for cell in CELLS:
        arms = summary["values"].get(cell.key)
        if arms is None or a not in arms or b not in arms or not where(cell):
            continue
        x, y = np.asarray(arms[a][measure], float), np.asarray(arms[b][measure], float)
        if min(x.size, y.size) < 2:
            continue
        variance = float(x.var(ddof=1) / x.size + y.var(ddof=1) / y.size)
        if variance > 0:
            out.append((cell.key, float(x.mean() - y.mean()), variance))
    return out


def pooled_contrasts(summary: dict[str, Any], level: float = 0.05) -> dict[str, dict[str, Any]]:
    """Each contrast on each measure pooled over the cells of each :data:`GROUPS` row: exploratory,
    and counted as a family of its own (Bonferroni over its rows, ``comparisons``).

    Per ``"<contrast>/<measure>/<group>"``: :func:`inverse_variance` of the cells' differences
    (within an optimizer the fixed-effect mean is the ``estimate``; over all cells, whose
    heterogeneity is large, the random-effects mean), its ``ci_family`` (normal, level
    1 − ``level``/m), ``p_bonferroni`` (two-sided, × m), the ``positive`` count of cells with a
    difference above 0 out of ``cells``, and the two-sided sign test's p of that count
    (:func:`scipy.stats.binomtest`; the cells as replications, either sign equally likely under no
    difference). ``summary`` is :func:`~stddial_book.experiments.ablation.study.ablation_summary`'s
    dict; ``level`` is the family-wise error rate α in (0, 1) (default 0.05)."""
    from scipy import stats

    rows = []
    for a, b in CONTRASTS:
        for measure in MEASURES:
            for group, (_name, where) in GROUPS.items():
                found = cell_differences(summary, f"{a}-{b}", measure, where)
                if found:
                    rows.append((f"{a}-{b}/{measure}/{group}", group, found))
    m = len(rows)
    z = float(stats.norm.isf(level / (2 * m))) if m else float("nan")
    out = {}
    for name, group, found in rows:
        d = np.array([f[1] for f in found])
        pooled = inverse_variance(d, [f[2] for f in found])
        estimate, se = (
            (pooled["random_difference"], pooled["random_se"])
            if group == "all"
            else (pooled["difference"], pooled["se"])
        )
        positive = int(np.sum(d > 0))
        out[name] = {
            **pooled,
            "estimate": estimate,
            "estimate_se": se,
            "ci_family": [estimate - z * se, estimate + z * se],
            "p_bonferroni": min(1.0, float(2 * stats.norm.sf(abs(estimate) / se)) * m),
            "positive": positive,
            "cells": int(d.size),
            "cell_keys": [f[0] for f in found],
            "sign_p": float(stats.binomtest(positive, d.size, 0.5).pvalue),
            "comparisons": m,
        }
    return out


def pooled_rows(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of :func:`pooled_contrasts`: each contrast, measure and group of cells, the
    pooled difference with its family-wise interval (a * where it excludes 0, so that the Bonferroni
    p is below α), the cells with a positive difference with the sign test's p, and the cells'
    heterogeneity (Cochran's Q with its p, and I²). ``summary`` is
    :func:`~stddial_book.experiments.ablation.study.ablation_summary`'s dict; its ``alpha`` sets the
    level of the * (the intervals are :func:`pooled_contrasts`'s at its default level, 0.05)."""
    header = [
        "contrast",
        "measure",
        "cells",
        "pooled difference [family-wise interval]",
        "cells > 0 (sign test p)",
        "Cochran's Q (p), I²",
    ]
    rows = []
    for name, result in pooled_contrasts(summary).items():
        contrast, measure, group = name.split("/")
        low, high = result["ci_family"]
        mark = " *" if (low > 0 or high < 0) and result["p_bonferroni"] < summary["alpha"] else ""
        rows.append(
            [
                CONTRAST_NAMES[contrast],
                MEASURE_NAMES[measure],
                GROUPS[group][0],
                f"{result['estimate']:+.4f} [{low:+.4f}, {high:+.4f}]{mark}",
                f"{result['positive']} of {result['cells']} ({result['sign_p']:.2g})",
                f"{result['q']:.1f} on {result['q_df']} df ({result['q_p']:.1g}), {result['i2']:.0%}",
            ]
        )
    return header, rows


#: The explanations :func:`effect_differences` tests: where each predicts the larger effect, and
#: the cells it compares them with.
FACTORS: dict[str, tuple[Callable[[Cell], bool], Callable[[Cell], bool], str]] = {
    "group_size": (lambda c: c.group_size > 8, lambda c: c.group_size == 8, "G = 32 − G = 8"),
    "clip": (lambda c: not c.clip, lambda c: c.clip, "no clip − clip"),
}


def effect_differences(summary: dict[str, Any], level: float = 0.05) -> dict[str, dict[str, Any]]:
    """The division's effect on the hardest quartile where an explanation predicts it larger minus
    where it does not, within each optimizer: a difference of two fixed-effect pooled effects (each
    over the cells on its side), se = sqrt(se₁² + se₂²), z and its two-sided p
    (:data:`scipy.stats.norm`), Bonferroni over the differences made (``comparisons``).
    Exploratory. Per ``"<factor>/<optimizer>"`` (:data:`FACTORS`; optimizer "adamw" or "sgd"):
    ``difference``, ``se``, ``z``, ``p``, ``p_bonferroni``, ``label``, the two sides'
    ``predicted`` and ``other`` pooled effects, and ``mde``, the difference of effects this test
    detects with 80% power at its Bonferroni level, (z_{1 − α/(2m)} + z_{0.8}) · se: a difference
    not detected may still be as large as that. ``summary`` is
    :func:`~stddial_book.experiments.ablation.study.ablation_summary`'s dict; ``level`` is the
    family-wise error rate α in (0, 1) that the Bonferroni p and the MDE use (default 0.05)."""
    from scipy import stats

    found = {}
    for factor, (predicted, other, label) in FACTORS.items():
        for optimizer in ("adamw", "sgd"):
            sides = []
            for where in (predicted, other):
                cells = cell_differences(
                    summary,
                    "divide-no_divide",
                    "hardest_quartile",
                    lambda c, w=where: c.optimizer == optimizer and w(c),
                )
                sides.append(inverse_variance([c[1] for c in cells], [c[2] for c in cells]) if cells else None)
            if all(sides):
                found[f"{factor}/{optimizer}"] = (label, *sides)
    m = len(found)
    out = {}
    reach = float(stats.norm.isf(level / (2 * max(m, 1))) + stats.norm.ppf(0.8)) if m else float("nan")
    for key, (label, high, low) in found.items():
        diff = high["difference"] - low["difference"]
        se = float(np.hypot(high["se"], low["se"]))
        z = diff / se
        p = float(2 * stats.norm.sf(abs(z)))
        out[key] = {
            "label": label,
            "difference": diff,
            "se": se,
            "z": z,
            "p": p,
            "p_bonferroni": min(1.0, p * m),
            "predicted": high["difference"],
            "other": low["difference"],
            "comparisons": m,
            "mde": reach * se,
        }
    return out
