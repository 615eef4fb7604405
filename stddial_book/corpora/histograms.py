"""Per-prompt solve counts as histograms of k of n, and what the closed forms make of them: the silent fraction, DAPO's oversampling, the update mass by band (chapters 5 and 7)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from stddial_book.core.checks import check_group_size_array, check_int, check_unit_interval, to_numpy
from stddial_book.theory.recipes import Recipe, as_recipe
from stddial_book.theory.silent import expected_update_weight

__all__ = [
    "SolveCounts",
    "KHistogram",
    "silent_fraction",
    "expected_update_mass",
    "dapo_oversampling",
    "PAPER_BANDS",
    "gradient_budget",
    "band_shares",
    "decile_of",
    "decile_shares",
    "read_counts_csv",
]


@dataclass(frozen=True)
class KHistogram:
    """How many prompts had k = 0..n successes out of n rollouts.

    ``num_rollouts`` is n, the rollouts per prompt (at least 1); ``counts`` holds, for each k = 0..n,
    how many prompts had k successes: n + 1 non-negative whole numbers.
    """

    num_rollouts: int
    counts: np.ndarray  # shape (n + 1,), integer

    def __post_init__(self) -> None:
        n = check_int(self.num_rollouts, "num_rollouts", minimum=1, hint="It is n, the rollouts per prompt.")
        counts = to_numpy(self.counts, "counts")
        if counts.shape != (n + 1,):
            raise ValueError(f"counts must have n + 1 = {n + 1} entries; got {counts.shape}.")
        if np.any(counts < 0):
            raise ValueError("counts must be non-negative.")
        if np.any(counts != np.round(counts)):
            raise ValueError(
                "counts must be whole numbers (how many prompts had k successes); got fractions "
                f"such as {counts[counts != np.round(counts)][:3].tolist()}."
            )
        object.__setattr__(self, "num_rollouts", n)
        raw = np.asarray(self.counts)
        object.__setattr__(self, "counts", raw if raw.dtype.kind in "iuf" else counts)

    @property
    def num_prompts(self) -> int:
        return int(np.sum(self.counts))

    @property
    def solve_rates(self) -> np.ndarray:
        """p = k/n for k = 0..n."""
        return np.arange(self.num_rollouts + 1) / self.num_rollouts


@dataclass
class SolveCounts:
    """k successes out of ``num_rollouts`` per prompt, with optional label columns.

    ``name`` labels the table (a string); ``num_correct`` holds each prompt's k, whole numbers in
    [0, n] (a 1-D array); ``num_rollouts`` is n; ``labels`` maps a column name (such as a source or
    domain) to one value per prompt (none by default); ``num_missing`` counts the rows dropped
    because their solve rate was null (0 by default).
    """

    name: str
    num_correct: np.ndarray
    num_rollouts: int
    labels: dict[str, np.ndarray] = field(default_factory=dict)
    num_missing: int = 0  # rows dropped because their solve rate was null

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string; got {type(self.name).__name__}.")
        self.num_rollouts = check_int(
            self.num_rollouts, "num_rollouts", minimum=1, hint="It is n, the rollouts sampled per prompt."
        )
        if self.num_rollouts > 2**53:
            raise ValueError(f"num_rollouts={self.num_rollouts} exceeds 2**53, beyond exact counts in float64.")
        self.num_missing = check_int(self.num_missing, "num_missing", minimum=0)
        k = to_numpy(self.num_correct, "num_correct", allow_empty=True)
        if k.ndim != 1:
            raise ValueError("num_correct must be one-dimensional (one count per prompt).")
        if np.any(k != np.round(k)):
            raise ValueError(
                "num_correct must hold whole numbers (successes out of num_rollouts); got fractions "
                f"such as {k[k != np.round(k)][:3].tolist()}. Round k = p · n first."
            )
        if k.size and (k.min() < 0 or k.max() > self.num_rollouts):
            raise ValueError(f"num_correct must lie in [0, {self.num_rollouts}].")
        self.num_correct = k.astype(np.int64)
        if not isinstance(self.labels, dict):
            raise TypeError(
                f"labels must be a dict of column name -> one value per prompt; got {type(self.labels).__name__}."
            )
        for key, values in self.labels.items():
            if not hasattr(values, "__len__"):
                raise TypeError(f"label column {key!r} must hold one value per prompt; got {type(values).__name__}.")
            if len(values) != len(k):
                raise ValueError(f"label column {key!r} has {len(values)} values for {len(k)} prompts.")

    def histogram(self, where: np.ndarray | None = None) -> KHistogram:
        """The k-histogram of all prompts, or of those selected by a boolean mask."""
        if where is not None:
            mask = np.asarray(where)
            if mask.dtype != bool or mask.shape != self.num_correct.shape:
                raise ValueError(
                    f"where must be a boolean mask with one entry per prompt (shape "
                    f"{self.num_correct.shape}); got {mask.dtype} of shape {mask.shape}."
                )
        k = self.num_correct if where is None else self.num_correct[where]
        return KHistogram(self.num_rollouts, np.bincount(k, minlength=self.num_rollouts + 1))

    def histograms_by(self, label: str) -> dict[str, KHistogram]:
        """One k-histogram per value of a label column (e.g. source or domain)."""
        if not isinstance(label, str) or label not in self.labels:
            raise ValueError(f"no label column {' '.join(repr(label).split())[:40]}; available: {sorted(self.labels)}.")
        values = self.labels[label]
        if any(isinstance(v, (list, tuple, np.ndarray)) for v in values):
            # A list-valued label (Big-Math's ``domain``): a prompt counts once under each of its
            # values, so the histograms may together hold more prompts than the table.
            members = [
                {str(x) for x in (v if isinstance(v, (list, tuple, np.ndarray)) else [v]) if x is not None}
                for v in values
            ]
            names = sorted(set().union(*members))
            return {name: self.histogram(np.array([name in m for m in members], dtype=bool)) for name in names}
        return {str(v): self.histogram(values == v) for v in np.unique(values)}


def _silent_given_k(n: int, group_sizes: np.ndarray, model: str) -> np.ndarray:
    """(len(G), n + 1): P(silent | k, G) under the chosen model."""
    k = np.arange(n + 1, dtype=np.float64)[None, :]
    g = np.asarray(group_sizes, dtype=np.float64)[:, None]
    if not isinstance(model, str):
        raise ValueError(f"model must be 'bernoulli' or 'hypergeometric'; got {type(model).__name__}.")
    if model == "bernoulli":
        p = k / n
        return p**g + (1.0 - p) ** g
    if model == "hypergeometric":
        if np.any(g > n):
            raise ValueError(f"the hypergeometric model draws G of the n = {n} stored rollouts: need G <= {n}.")
        from stddial_book.theory.silent import hypergeometric_pmf

        ks = np.arange(n + 1)
        rows = [hypergeometric_pmf(ks, n, int(size)) for size in g[:, 0]]
        return np.array([pmf[:, 0] + pmf[:, -1] for pmf in rows])  # all wrong + all right
    raise ValueError(f"model must be 'bernoulli' or 'hypergeometric'; got {' '.join(repr(model).split())[:40]}.")


def _check_hist(hist: KHistogram) -> None:
    if not isinstance(hist, KHistogram):
        raise TypeError(f"hist must be a KHistogram (SolveCounts.histogram() gives one); got {type(hist).__name__}.")


def silent_fraction(hist: KHistogram, group_sizes: Sequence[int] | int, model: str = "bernoulli") -> np.ndarray:
    """Expected fraction of silent groups at each G, over the prompts of ``hist``.

    ``group_sizes`` is one G or a 1-D list of them (the result has one entry per G). ``model`` is
    ``"bernoulli"`` (the default: G fresh draws at p = k/n) or ``"hypergeometric"`` (G of the n
    stored rollouts, without replacement; needs G ≤ n).
    """
    _check_hist(hist)
    g = np.atleast_1d(check_group_size_array(group_sizes, "group_sizes"))
    if g.ndim != 1:
        raise ValueError(f"group_sizes must be one size or a 1-D list of sizes; got shape {g.shape}.")
    if hist.num_prompts == 0:
        raise ValueError("the histogram holds no prompts.")
    per_k = _silent_given_k(hist.num_rollouts, g, model)
    return per_k @ hist.counts / hist.num_prompts


def dapo_oversampling(hist: KHistogram, group_sizes: Sequence[int] | int, model: str = "bernoulli") -> np.ndarray:
    """DAPO's expected groups sampled per group kept: 1 / (1 − silent fraction).

    ``inf`` where every group is silent (G = 1, or a pool whose prompts are all solved or all
    failed): the refill would never fill a batch. ``hist``, ``group_sizes`` and ``model`` are those
    of :func:`silent_fraction`.
    """
    kept = 1.0 - silent_fraction(hist, group_sizes, model)
    with np.errstate(divide="ignore"):
        return np.where(kept > 0, 1.0 / np.where(kept > 0, kept, 1.0), np.inf)


def expected_update_mass(hist: KHistogram, group_size: int, recipe: Recipe) -> np.ndarray:
    """Expected update weight per prompt with k = 0..n stored successes, for groups of G.

    E[w(p̂)] with p̂ = j/G and j ~ Binomial(G, k/n), w from :func:`stddial_book.theory.identity.update_weight`;
    for a recipe with dynamic sampling the weights are divided by the non-silent fraction of the
    whole table (the refill). Multiply by ``hist.counts`` for the mass each k receives.
    ``hist`` is the pool's :class:`KHistogram`, ``group_size`` one G ≥ 2 and ``recipe`` a
    :class:`~stddial_book.theory.recipes.Recipe` or a preset name; the result has one entry per k.
    """
    _check_hist(hist)
    recipe = as_recipe(recipe)
    mass = expected_update_weight(hist.solve_rates, group_size, recipe)
    if recipe.dynamic_sampling:
        kept = 1.0 - float(silent_fraction(hist, group_size)[0])
        if kept <= 0:
            raise ValueError("every group is silent: DAPO's refill would never fill a batch.")
        mass = mass / kept
    return mass


#: The source paper's difficulty bands (Bay and Yearick, 2026, §7): extreme is 0 < p̂ < 0.1 or
#: 0.9 < p̂ < 1 (prompts that are never or always solved are silent and excluded), medium is
#: 0.4 ≤ p̂ ≤ 0.6.
PAPER_BANDS = {
    "extreme": lambda p: ((p > 0) & (p < 0.1)) | ((p > 0.9) & (p < 1)),
    "medium": lambda p: (p >= 0.4) & (p <= 0.6),
}


def gradient_budget(hist: KHistogram, recipe: Recipe, group_size: int | None = None) -> np.ndarray:
    """Each stored k's share of a recipe's total gradient budget over the pool (sums to 1).

    With ``group_size=None`` the large-group weights of :func:`stddial_book.theory.group_size.large_group_gradient`
    (√(p(1 − p)) for GRPO, p(1 − p) for Dr. GRPO: the paper's budget); with a G, each prompt's
    expected update weight at that G (:func:`expected_update_mass`), which is what a run at that
    group size spends. Chapter 7. ``hist`` is the pool's :class:`KHistogram`; ``recipe`` a
    :class:`~stddial_book.theory.recipes.Recipe` or a preset name; ``group_size`` is None (the default)
    or one G ≥ 2, as above.
    """
    from stddial_book.theory.group_size import large_group_gradient

    _check_hist(hist)
    recipe = as_recipe(recipe)
    if group_size is None:
        mass = np.asarray(large_group_gradient(hist.solve_rates, recipe)) * hist.counts
    else:
        mass = expected_update_mass(hist, group_size, recipe) * hist.counts
    total = mass.sum()
    if total <= 0:
        raise ValueError("every prompt of this histogram is silent: there is no gradient budget to share.")
    return mass / total


def band_shares(hist: KHistogram, budget: np.ndarray) -> dict[str, float]:
    """The share of ``budget`` (per k, from :func:`gradient_budget`) in each of :data:`PAPER_BANDS`.

    ``hist`` is the :class:`KHistogram` the budget was computed on (it gives each k's p̂ = k/n).
    """
    budget = _check_budget(hist, budget)
    return {name: float(budget[rule(hist.solve_rates)].sum()) for name, rule in PAPER_BANDS.items()}


def decile_of(solve_rate: np.ndarray) -> np.ndarray:
    """The tenth of p each solve rate falls in, 0..9: [0, .1), [.1, .2), …, [.9, 1], as the paper bins.

    ``solve_rate`` is p in [0, 1], a number or an array (the result has its shape).
    """
    p = to_numpy(solve_rate, "solve_rate", allow_empty=True)
    check_unit_interval(p, "solve_rate")
    return np.digitize(p, np.linspace(0.0, 1.0, 11)[1:-1])


def decile_shares(hist: KHistogram, budget: np.ndarray) -> np.ndarray:
    """The share of ``budget`` in each tenth of p̂ (:func:`decile_of`), for the k of ``hist``."""
    budget = _check_budget(hist, budget)
    return np.bincount(decile_of(hist.solve_rates), weights=budget, minlength=10)


def _check_budget(hist: KHistogram, budget: np.ndarray) -> np.ndarray:
    """``budget`` as a float array with one finite entry per k = 0..n of ``hist``."""
    _check_hist(hist)
    arr = to_numpy(budget, "budget")
    if arr.shape != (hist.num_rollouts + 1,):
        raise ValueError(
            f"budget must have one entry per k = 0..{hist.num_rollouts} (shape "
            f"({hist.num_rollouts + 1},), as gradient_budget(hist, ...) returns); got {arr.shape}."
        )
    return arr


def read_counts_csv(path: Path, columns: Sequence[str], fix: str) -> list[dict[str, Any]]:
    """The rows of a committed count table (a CSV whose header is ``columns``), its ``k`` and ``count``
    parsed as non-negative whole numbers; ``ValueError`` naming the file, the line and ``fix`` otherwise.

    ``path`` is the CSV file; ``fix`` is the sentence, appended to every error, that says how to restore it.
    """
    try:
        with open(path, newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            rows = list(reader)
    except FileNotFoundError:
        raise ValueError(f"{path} is missing; {fix}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise ValueError(f"{path} cannot be read as a CSV table ({err}); {fix}") from None
    if header is None or [h.strip() for h in header] != list(columns):
        raise ValueError(f"{path} must start with the header {','.join(columns)}; found {header!r:.60}; {fix}")
    out = []
    for line, row in enumerate(rows, start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(columns):
            raise ValueError(
                f"{path}, line {line}: expected {len(columns)} values ({','.join(columns)}), found {len(row)}; {fix}"
            )
        record: dict[str, Any] = {c: cell.strip() for c, cell in zip(columns, row)}
        for key in ("k", "count"):
            try:
                value = int(record[key])
            except ValueError:
                raise ValueError(
                    f"{path}, line {line}: {key} must be a whole number, found {record[key]!r:.20}; {fix}"
                ) from None
            if value < 0:
                raise ValueError(f"{path}, line {line}: {key} must be >= 0, found {value}; {fix}")
            record[key] = value
        out.append(record)
    if not out:
        raise ValueError(f"{path} holds no rows below its header; {fix}")
    return out
