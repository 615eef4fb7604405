"""Per-prompt solve counts and the silent-fraction analysis of real data (chapters 5 and 7).

A solve-count table holds, for each prompt, k successes out of n sampled rollouts
(:class:`SolveCounts`). All curves are computed on its k-histogram (:class:`KHistogram`), so a
table of 251k prompts costs no more than one of 65 distinct k values.

Two models turn a prompt's stored counts into the chance that a fresh group of G is silent:

* **Bernoulli**: the prompt's solve rate is p = k/n and P(silent) = p^G + (1 − p)^G;
* **hypergeometric**: the group is G of the n stored rollouts drawn without replacement, and
  P(silent) = [C(k, G) + C(n − k, G)] / C(n, G) (exact for the stored samples, needs G ≤ n).

Loaders: Big-Math (Albalak et al., 2025; ``llama8b_solve_rate`` of 64 Llama-3.1-8B samples) from
the hub or a local parquet of the same schema; the DeepScaleR difficulty files of the AdaRFT
authors (k of 128 Qwen2.5-Math-7B samples).
"""

from __future__ import annotations

import csv
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ._arrays import check_group_size_array, check_int, check_unit_interval, to_numpy
from .outdir import check_claimable, claim_dir
from .resources import data_path, sha256  # sha256: provenance of the derived tables
from .identity import expected_update_weight
from .recipes import Recipe, as_recipe

__all__ = [
    "SolveCounts", "KHistogram", "BIG_MATH_REPO", "BIG_MATH_CONFIGS", "big_math_histogram", "BIG_MATH_COLUMN", "BIG_MATH_ROLLOUTS",
    "DEEPSCALER_ROLLOUTS", "load_big_math", "union_of_deepscaler",
    "silent_fraction", "expected_update_mass", "dapo_oversampling", "build_deepscaler_tables",
    "load_committed_histograms", "DEEPSCALER_SOURCE", "model_solve_counts",
    "PAPER_BANDS", "gradient_budget", "band_shares", "decile_of", "decile_shares",
]

#: Where the DeepScaleR difficulty files come from (see the provenance JSON beside the tables).
DEEPSCALER_SOURCE = {
    "repository": "https://github.com/uscnlp-lime/verl",
    "commit": "bf2dd7e675b4dca3c0de972544ddd9e7929c8dd9",
    "path": "verl/data/deepscaler_<name>_train.parquet",
    "paper": "Shi et al., 2025, Efficient Reinforcement Finetuning via Adaptive Curriculum Learning (arXiv 2504.05520)",
    "meaning": "k = 128 * (1 - difficulty/100) successes of 128 Qwen2.5-Math-7B samples",
}
TABLE_NAME = "deepscaler_k_histograms"
DEFAULT_DATA_DIR = data_path("solve_rates")  # data/solve_rates/ in the repository, shipped in the package

#: The source paper's Big-Math (Bay and Yearick, 2026, §6): the ungated mirror, config ``all``.
BIG_MATH_REPO = "open-r1/Big-Math-RL-Verified-Processed"
#: Hub datasets of Big-Math's schema, with the config each needs.
BIG_MATH_CONFIGS = {BIG_MATH_REPO: "all", "SynthLabsAI/Big-Math-RL-Verified": None}
BIG_MATH_COLUMN = "llama8b_solve_rate"
BIG_MATH_ROLLOUTS = 64
DEEPSCALER_ROLLOUTS = 128


@dataclass(frozen=True)
class KHistogram:
    """How many prompts had k = 0..n successes out of n rollouts."""

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
            raise ValueError("counts must be whole numbers (how many prompts had k successes); got fractions "
                             f"such as {counts[counts != np.round(counts)][:3].tolist()}.")
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
    """k successes out of ``num_rollouts`` per prompt, with optional label columns."""

    name: str
    num_correct: np.ndarray
    num_rollouts: int
    labels: dict[str, np.ndarray] = field(default_factory=dict)
    num_missing: int = 0  # rows dropped because their solve rate was null

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string; got {type(self.name).__name__}.")
        self.num_rollouts = check_int(self.num_rollouts, "num_rollouts", minimum=1,
                                      hint="It is n, the rollouts sampled per prompt.")
        if self.num_rollouts > 2**53:
            raise ValueError(f"num_rollouts={self.num_rollouts} exceeds 2**53, beyond exact counts in float64.")
        self.num_missing = check_int(self.num_missing, "num_missing", minimum=0)
        k = to_numpy(self.num_correct, "num_correct", allow_empty=True)
        if k.ndim != 1:
            raise ValueError("num_correct must be one-dimensional (one count per prompt).")
        if np.any(k != np.round(k)):
            raise ValueError("num_correct must hold whole numbers (successes out of num_rollouts); got fractions "
                             f"such as {k[k != np.round(k)][:3].tolist()}. Round k = p · n first.")
        if k.size and (k.min() < 0 or k.max() > self.num_rollouts):
            raise ValueError(f"num_correct must lie in [0, {self.num_rollouts}].")
        self.num_correct = k.astype(np.int64)
        if not isinstance(self.labels, dict):
            raise TypeError(f"labels must be a dict of column name -> one value per prompt; got "
                            f"{type(self.labels).__name__}.")
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
                raise ValueError(f"where must be a boolean mask with one entry per prompt (shape "
                                 f"{self.num_correct.shape}); got {mask.dtype} of shape {mask.shape}.")
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
            members = [{str(x) for x in (v if isinstance(v, (list, tuple, np.ndarray)) else [v]) if x is not None}
                       for v in values]
            names = sorted(set().union(*members))
            return {name: self.histogram(np.array([name in m for m in members], dtype=bool)) for name in names}
        return {str(v): self.histogram(values == v) for v in np.unique(values)}


# --- curves ------------------------------------------------------------------------------------

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
        from .identity import hypergeometric_pmf

        ks = np.arange(n + 1)
        rows = [hypergeometric_pmf(ks, n, int(size)) for size in g[:, 0]]
        return np.array([pmf[:, 0] + pmf[:, -1] for pmf in rows])  # all wrong + all right
    raise ValueError(f"model must be 'bernoulli' or 'hypergeometric'; got {' '.join(repr(model).split())[:40]}.")


def _check_hist(hist: KHistogram) -> None:
    if not isinstance(hist, KHistogram):
        raise TypeError(f"hist must be a KHistogram (SolveCounts.histogram() gives one); got {type(hist).__name__}.")


def silent_fraction(hist: KHistogram, group_sizes: Sequence[int] | int, model: str = "bernoulli") -> np.ndarray:
    """Expected fraction of silent groups at each G, over the prompts of ``hist``."""
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
    failed): the refill would never fill a batch.
    """
    kept = 1.0 - silent_fraction(hist, group_sizes, model)
    with np.errstate(divide="ignore"):
        return np.where(kept > 0, 1.0 / np.where(kept > 0, kept, 1.0), np.inf)


def expected_update_mass(hist: KHistogram, group_size: int, recipe: Recipe) -> np.ndarray:
    """Expected update weight per prompt with k = 0..n stored successes, for groups of G.

    E[w(p̂)] with p̂ = j/G and j ~ Binomial(G, k/n), w from :func:`stddial_book.identity.update_weight`;
    for a recipe with dynamic sampling the weights are divided by the non-silent fraction of the
    whole table (the refill). Multiply by ``hist.counts`` for the mass each k receives.
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


# --- where the gradient budget goes --------------------------------------------------------------

#: The source paper's difficulty bands (Bay and Yearick, 2026, §7): extreme is 0 < p̂ < 0.1 or
#: 0.9 < p̂ < 1 (prompts that are never or always solved are silent and excluded), medium is
#: 0.4 ≤ p̂ ≤ 0.6.
PAPER_BANDS = {
    "extreme": lambda p: ((p > 0) & (p < 0.1)) | ((p > 0.9) & (p < 1)),
    "medium": lambda p: (p >= 0.4) & (p <= 0.6),
}


def gradient_budget(hist: KHistogram, recipe: Recipe, group_size: int | None = None) -> np.ndarray:
    """Each stored k's share of a recipe's total gradient budget over the pool (sums to 1).

    With ``group_size=None`` the large-group weights of :func:`stddial_book.identity.large_group_gradient`
    (√(p(1 − p)) for GRPO, p(1 − p) for Dr. GRPO: the paper's budget); with a G, each prompt's
    expected update weight at that G (:func:`expected_update_mass`), which is what a run at that
    group size spends. Chapter 7.
    """
    from .identity import large_group_gradient

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
    """The share of ``budget`` (per k, from :func:`gradient_budget`) in each of :data:`PAPER_BANDS`."""
    budget = _check_budget(hist, budget)
    return {name: float(budget[rule(hist.solve_rates)].sum()) for name, rule in PAPER_BANDS.items()}


def decile_of(solve_rate: np.ndarray) -> np.ndarray:
    """The tenth of p each solve rate falls in, 0..9: [0, .1), [.1, .2), …, [.9, 1], as the paper bins."""
    p = to_numpy(solve_rate, "solve_rate", allow_empty=True)
    check_unit_interval(p, "solve_rate")
    return np.digitize(p, np.linspace(0.0, 1.0, 11)[1:-1])


def decile_shares(hist: KHistogram, budget: np.ndarray) -> np.ndarray:
    """The share of ``budget`` in each tenth of p̂ (:func:`decile_of`)."""
    budget = _check_budget(hist, budget)
    return np.bincount(decile_of(hist.solve_rates), weights=budget, minlength=10)


def _check_budget(hist: KHistogram, budget: np.ndarray) -> np.ndarray:
    """``budget`` as a float array with one finite entry per k = 0..n of ``hist``."""
    _check_hist(hist)
    arr = to_numpy(budget, "budget")
    if arr.shape != (hist.num_rollouts + 1,):
        raise ValueError(f"budget must have one entry per k = 0..{hist.num_rollouts} (shape "
                         f"({hist.num_rollouts + 1},), as gradient_budget(hist, ...) returns); got {arr.shape}.")
    return arr


# --- loaders -----------------------------------------------------------------------------------

def _as_path(path: Any, name: str) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or Path); got {type(path).__name__}.")
    return Path(path)


def _read_parquet(path: str | os.PathLike, columns: list[str] | None = None):
    """A parquet file as a pyarrow table; ``ValueError`` naming the file when it is missing or not parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = _as_path(path, "path")
    if not path.is_file():
        raise ValueError(f"{path} does not exist (or is not a file); pass the path of a parquet file.")
    try:
        return pq.read_table(path, columns=columns)
    except (pa.ArrowException, OSError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"{path} could not be read as a parquet file ({reason:.120}); pass an intact parquet "
                         "file (download or copy it again).") from None


def _read_counts_csv(path: Path, columns: Sequence[str], fix: str) -> list[dict[str, Any]]:
    """The rows of a committed count table (a CSV whose header is ``columns``), its ``k`` and ``count``
    parsed as non-negative whole numbers; ``ValueError`` naming the file, the line and ``fix`` otherwise."""
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
            raise ValueError(f"{path}, line {line}: expected {len(columns)} values ({','.join(columns)}), found "
                             f"{len(row)}; {fix}")
        record: dict[str, Any] = {c: cell.strip() for c, cell in zip(columns, row)}
        for key in ("k", "count"):
            try:
                value = int(record[key])
            except ValueError:
                raise ValueError(f"{path}, line {line}: {key} must be a whole number, found {record[key]!r:.20}; "
                                 f"{fix}") from None
            if value < 0:
                raise ValueError(f"{path}, line {line}: {key} must be >= 0, found {value}; {fix}")
            record[key] = value
        out.append(record)
    if not out:
        raise ValueError(f"{path} holds no rows below its header; {fix}")
    return out


def load_big_math(source: str | os.PathLike | None = None, config: str | None = None) -> SolveCounts:
    """Big-Math's per-problem solve counts: k = round(64 · llama8b_solve_rate).

    ``source`` is a hub dataset id or a local parquet file of the dataset's schema (columns
    ``llama8b_solve_rate``, and ``source`` and ``domain`` when present; ``domain`` is a list of
    strings per problem). ``None`` means the source paper's dataset,
    ``open-r1/Big-Math-RL-Verified-Processed`` (config ``all``, N = 215,608); the original
    ``SynthLabsAI/Big-Math-RL-Verified`` (about 251k rows, some without a solve rate) works too.
    Hub datasets are read with ``datasets.load_dataset``, which fails at once offline with a
    message naming the alternatives. Rows whose solve rate is null are counted in
    ``num_missing`` and excluded. (Bay and Yearick, 2026, §6; chapter 7.)
    """
    source = BIG_MATH_REPO if source is None else source
    _as_path(source, "source")
    if config is not None and not isinstance(config, str):
        raise TypeError(f"config must be a dataset config name (a string such as 'all') or None; got "
                        f"{type(config).__name__}.")
    if Path(source).suffix == ".parquet" or Path(source).is_file():
        if not Path(source).is_file():
            raise ValueError(f"{source} does not exist; pass a parquet file of Big-Math's schema or a hub dataset id.")
        return _big_math_counts(_read_parquet(source), str(source))
    return _big_math_counts(_load_hub_table(str(source), config if config is not None else BIG_MATH_CONFIGS.get(str(source))),
                            str(source))


def _load_hub_table(repo: str, config: str | None):
    """A hub dataset's train split as a pyarrow table, through ``datasets.load_dataset``."""
    from .model import hub_unavailable_reason

    reason = hub_unavailable_reason()
    if reason is not None:
        raise RuntimeError(
            f"cannot fetch {repo}: {reason}. Pass a local parquet file of its schema to load_big_math(path), "
            "or use the committed histogram (stddial_book.solve_rates.big_math_histogram)."
        )
    import datasets

    dataset = datasets.load_dataset(repo, config, split="train")
    return dataset.with_format("arrow")[:]


def _big_math_counts(table, name: str) -> SolveCounts:
    if BIG_MATH_COLUMN not in table.column_names:
        raise ValueError(
            f"{name} has no {BIG_MATH_COLUMN!r} column (it has {table.column_names}); pass a "
            f"parquet file or dataset of {BIG_MATH_REPO}'s schema."
        )
    import pyarrow.types as patypes

    column = table.column(BIG_MATH_COLUMN)
    if patypes.is_boolean(column.type):
        raise ValueError(f"{name}: column {BIG_MATH_COLUMN!r} holds booleans, not solve rates (True/False would be read "
                         f"as rates 1 and 0); pass the dataset's own column of rates k/{BIG_MATH_ROLLOUTS} in [0, 1].")
    if not (patypes.is_floating(column.type) or patypes.is_integer(column.type) or patypes.is_null(column.type)):
        raise ValueError(f"{name}: column {BIG_MATH_COLUMN!r} is of type {column.type}, not numeric solve rates; pass the "
                         f"dataset's own column of rates k/{BIG_MATH_ROLLOUTS} (floats in [0, 1]).")
    all_rates = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)
    missing = np.isnan(all_rates)
    present = np.flatnonzero(~missing)
    rates = all_rates[present]
    if rates.size == 0:
        raise ValueError(f"{name}: column {BIG_MATH_COLUMN!r} holds no solve rate ({len(all_rates)} rows, all null); "
                         "pass a file or dataset of Big-Math's schema with its rates filled in.")
    outside = np.flatnonzero((rates < 0) | (rates > 1))
    if outside.size:
        row = int(present[outside[0]])
        raise ValueError(f"{name}: {BIG_MATH_COLUMN} must lie in [0, 1] (a solve rate k/{BIG_MATH_ROLLOUTS}); row {row} "
                         f"holds {float(rates[outside[0]])!r}. If the column holds counts k, divide them by {BIG_MATH_ROLLOUTS}.")
    scaled = rates * BIG_MATH_ROLLOUTS
    k = np.round(scaled)
    off = np.flatnonzero(np.abs(scaled - k) > 1e-6)
    if off.size:
        row = int(present[off[0]])
        raise ValueError(f"{name}: {BIG_MATH_COLUMN} must be a multiple of 1/{BIG_MATH_ROLLOUTS} (k successes of "
                         f"{BIG_MATH_ROLLOUTS} rollouts), but row {row} holds {float(rates[off[0]])!r} (= {scaled[off[0]]:.4g}/"
                         f"{BIG_MATH_ROLLOUTS}) and {off.size} row(s) in all are off the grid; pass the dataset's own "
                         f"column, or solve rates from another number of rollouts through SolveCounts directly.")
    k = k.astype(np.int64)
    labels = {}
    for column in ("source", "domain"):
        if column in table.column_names:
            values = table.column(column).to_pylist()
            kept = np.empty(int((~missing).sum()), dtype=object)
            kept[:] = [v for v, drop in zip(values, missing) if not drop]
            labels[column] = kept
    return SolveCounts("Big-Math", k, BIG_MATH_ROLLOUTS, labels, num_missing=int(missing.sum()))


def big_math_histogram(use_hub: bool = True) -> tuple[KHistogram, str]:
    """Big-Math's k-of-64 histogram and a sentence saying where it came from.

    With the hub reachable (and ``use_hub``), the source paper's dataset through
    :func:`load_big_math`; otherwise the committed table extracted from the paper's own figure
    (:mod:`stddial_book.bigmath_figure`), which holds the same 215,608 counts.
    """
    from .bigmath_figure import load_big_math_histogram
    from .model import hub_unavailable_reason

    if not isinstance(use_hub, (bool, np.bool_)):
        raise TypeError(f"use_hub must be True or False; got {type(use_hub).__name__}.")
    reason = hub_unavailable_reason() if use_hub else "not asked to use the hub"
    if reason is None:
        return load_big_math().histogram(), f"{BIG_MATH_REPO} (config all), read from the Hugging Face hub"
    return (load_big_math_histogram(),
            "the k-of-64 histogram extracted from the source paper's figure (committed with the book; "
            f"the hub was not used: {reason})")


def _deepscaler_rows(path: str | os.PathLike) -> tuple[list[str], np.ndarray]:
    table = _read_parquet(path)
    if "extra_info" not in table.column_names or "prompt" not in table.column_names:
        raise ValueError(
            f"{path} lacks the 'prompt' and 'extra_info' columns of the DeepScaleR difficulty files "
            f"(it has {table.column_names})."
        )
    if table.num_rows == 0:
        raise ValueError(f"{path} holds no rows; pass one of the DeepScaleR difficulty files (deepscaler_*_train.parquet).")
    rows = table.select(["prompt", "extra_info"]).to_pylist()
    try:
        raw = [r["extra_info"]["difficulty"] for r in rows]
        texts = [r["prompt"][0]["content"] for r in rows]
        bad = next((i for i, d in enumerate(raw)
                    if isinstance(d, bool) or not isinstance(d, (int, float)) or not np.isfinite(d)), None)
        if bad is not None:
            raise ValueError(f"row {bad} has difficulty {raw[bad]!r}, not a number")
        difficulty = np.array(raw, dtype=np.float64)
    except (KeyError, TypeError, IndexError, ValueError) as err:
        raise ValueError(f"{path}: extra_info.difficulty or the prompt text is missing or not a number ({err}); pass "
                         "one of the DeepScaleR difficulty files (deepscaler_*_train.parquet).") from None
    k = DEEPSCALER_ROLLOUTS * (1.0 - difficulty / 100.0)
    off = np.flatnonzero((np.abs(k - np.round(k)) > 1e-6) | (k < -1e-6) | (k > DEEPSCALER_ROLLOUTS + 1e-6))
    if off.size:
        raise ValueError(f"{path}: difficulty is not 100·(1 − k/128) for an integer k in [0, 128]: row {off[0]} holds "
                         f"{float(difficulty[off[0]])!r}; pass one of the DeepScaleR difficulty files.")
    return texts, np.round(k).astype(np.int64)


def union_of_deepscaler(paths: Sequence[str | os.PathLike]) -> tuple[SolveCounts, int]:
    """Unique problems (by text) across files, first occurrence kept in the given file order.

    Returns the table and the number of problem texts that appear with more than one k (the
    source dataset holds duplicate problems, measured separately).
    """
    if isinstance(paths, (str, bytes, os.PathLike)) or not isinstance(paths, Sequence):
        raise TypeError(f"paths must be a list of parquet files; got {type(paths).__name__}.")
    if not paths:
        raise ValueError("paths is empty; pass at least one DeepScaleR difficulty file (deepscaler_*_train.parquet).")
    return _union([_deepscaler_rows(path) for path in paths])


def _union(files_rows: Sequence[tuple[list[str], np.ndarray]]) -> tuple[SolveCounts, int]:
    seen: dict[str, int] = {}
    conflicting: set[str] = set()
    for texts, k in files_rows:
        for text, value in zip(texts, k.tolist()):
            if text in seen:
                if seen[text] != value:
                    conflicting.add(text)
            else:
                seen[text] = value
    return (SolveCounts("deepscaler_union", np.array(list(seen.values()), dtype=np.int64), DEEPSCALER_ROLLOUTS),
            len(conflicting))


def build_deepscaler_tables(shared_dir: str | os.PathLike, out_dir: str | os.PathLike = DEFAULT_DATA_DIR) -> Path:
    """Write the k-histogram of each DeepScaleR file and of their union, with provenance.

    Output: ``<out_dir>/deepscaler_k_histograms.csv`` (columns table, k, count) and
    ``deepscaler_k_histograms.provenance.json`` (source repository, commit, each file's sha256,
    the command that made them). The raw parquet files are not copied.
    """
    shared = _as_path(shared_dir, "shared_dir")
    if not shared.is_dir():
        raise ValueError(f"{shared} is not a folder; pass the folder holding the deepscaler_*_train.parquet files "
                         "(../shared/data/deepscaler-difficulty/).")
    files = sorted(shared.glob("deepscaler_*_train.parquet"))
    if not files:
        raise ValueError(f"no deepscaler_*_train.parquet files in {shared}; pass the folder that holds them "
                         "(../shared/data/deepscaler-difficulty/).")
    out = check_claimable(_as_path(out_dir, "out_dir"), "--out")  # a reader's folder is refused, before any work
    rows = {f.stem: _deepscaler_rows(f) for f in files}  # each file read once
    out = claim_dir(out, "tables")
    tables = {name: SolveCounts(name, k, DEEPSCALER_ROLLOUTS) for name, (_, k) in rows.items()}
    union, conflicting = _union(list(rows.values()))
    tables["union"] = union
    lines = ["table,k,count"]
    for name, table in tables.items():
        for k, count in enumerate(table.histogram().counts.tolist()):
            lines.append(f"{name},{k},{count}")
    (out / f"{TABLE_NAME}.csv").write_text("\n".join(lines) + "\n")
    provenance = {
        "source": DEEPSCALER_SOURCE,
        "files": {f.name: {"sha256": sha256(f), "rows": int(len(tables[f.stem].num_correct))} for f in files},
        "union": {"unique_problems": int(len(union.num_correct)), "texts_with_several_k": conflicting,
                  "rule": "unique problem texts; first occurrence kept, files in name order"},
        "made_by": "python -m stddial_book.solve_rates build-tables --shared <dir with the parquet files>",
        "caveat": "difficulty subsets built by the AdaRFT authors, not a random sample of DeepScaleR",
    }
    (out / f"{TABLE_NAME}.provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
    return out / f"{TABLE_NAME}.csv"


def load_committed_histograms(data_dir: str | os.PathLike = DEFAULT_DATA_DIR) -> dict[str, KHistogram]:
    """The committed DeepScaleR k-histograms: table name → :class:`KHistogram` (n = 128)."""
    path = _as_path(data_dir, "data_dir") / f"{TABLE_NAME}.csv"
    fix = ("it ships with the repository (data/solve_rates/); rebuild it with python -m stddial_book.solve_rates "
           "build-tables --shared <folder of the DeepScaleR parquet files>.")
    out: dict[str, list[int]] = {}
    seen: set[tuple[str, int]] = set()
    for row in _read_counts_csv(path, ("table", "k", "count"), fix):
        name, k = row["table"], row["k"]
        if not name or k > DEEPSCALER_ROLLOUTS or (name, k) in seen:
            raise ValueError(f"{path}: the row ({name!r}, k = {k}) needs a table name and k in 0..{DEEPSCALER_ROLLOUTS}, "
                             f"once per table; {fix}")
        seen.add((name, k))
        out.setdefault(name, [0] * (DEEPSCALER_ROLLOUTS + 1))[k] = row["count"]
    return {name: KHistogram(DEEPSCALER_ROLLOUTS, np.array(c)) for name, c in out.items()}


def _main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m stddial_book.solve_rates",
                                     description="Build the committed solve-rate tables.")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build-tables", help="k-histograms of the DeepScaleR difficulty files")
    build.add_argument("--shared", required=True, help="folder holding deepscaler_*_train.parquet")
    build.add_argument("--out", default=str(DEFAULT_DATA_DIR), help="where the tables go")
    args = parser.parse_args(argv)
    try:
        print(build_deepscaler_tables(args.shared, args.out))
    except (ValueError, TypeError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


def model_solve_counts(model, problems, num_rollouts: int, max_new_tokens: int, seed: int = 0,
                       batch_prompts: int = 64) -> SolveCounts:
    """The testbed model's own solve counts: k correct of ``num_rollouts`` samples per problem.

    Samples at temperature 1 with :func:`stddial_book.rollout.sample` (each prompt encoded once
    for its samples) and scores with the task's verifier; labels hold each problem's digit and
    carry counts, so curves can be split by difficulty. Fully reproducible for a given seed.
    """
    import torch

    from .model import CharCodec
    from .rollout import sample
    from .tasks import reward

    from .tasks import Problem

    num_rollouts = check_int(num_rollouts, "num_rollouts", minimum=1)
    batch_prompts = check_int(batch_prompts, "batch_prompts", minimum=1)
    if isinstance(problems, (str, Problem)) or not isinstance(problems, Sequence):
        raise TypeError(f"problems must be a list of Problem objects; got {type(problems).__name__}.")
    if not problems:
        raise ValueError("problems is empty; pass at least one task problem.")
    wrong = next((q for q in problems if not isinstance(q, Problem)), None)
    if wrong is not None:
        raise TypeError(f"problems must hold Problem objects (from tasks.make_problem); found "
                        f"{type(wrong).__name__} {wrong!r:.40}.")
    codec = CharCodec()
    device = next(model.parameters()).device  # ids and the generator follow the model (CPU or GPU)
    generator = torch.Generator(device=device).manual_seed(seed)
    counts: list[int] = []
    order = sorted(range(len(problems)), key=lambda i: len(problems[i].prompt))  # equal lengths together
    by_index: dict[int, int] = {}
    for start in range(0, len(order), batch_prompts):
        chunk = order[start:start + batch_prompts]
        lengths = {len(problems[i].prompt) for i in chunk}
        for length in sorted(lengths):
            rows = [i for i in chunk if len(problems[i].prompt) == length]
            ids = torch.tensor([codec.encode(problems[i].prompt) for i in rows], device=device)
            out = sample(model, ids, max_new_tokens, codec.eos_id, codec.pad_id, generator=generator,
                         num_samples=num_rollouts)
            texts = [codec.decode(r[m].tolist()) for r, m in zip(out.completion_ids, out.mask)]
            for j, i in enumerate(rows):
                group = texts[j * num_rollouts:(j + 1) * num_rollouts]
                by_index[i] = int(sum(reward(t, problems[i]) for t in group))
    counts = [by_index[i] for i in range(len(problems))]
    labels = {"digits": np.array([p.digits for p in problems]), "carries": np.array([p.carries for p in problems])}
    return SolveCounts("testbed", np.array(counts, dtype=np.int64), num_rollouts, labels)


if __name__ == "__main__":
    _main()
