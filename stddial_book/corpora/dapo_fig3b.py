"""DAPO's logged all-correct fraction against the closed form E_p[p^32] (chapter 7).

DAPO (Yu et al., 2025, Figure 3b) logs, over its Qwen2.5-32B run, the fraction of prompts whose
32 evaluation samples were all correct. For a prompt of solve rate p that probability is p^32,
so the logged fraction is E_p[p^32] over the prompt pool: the all-correct branch of the silent
mass p^G + (1 − p)^G (Bay and Yearick, 2026, §5). The paper checks that the shape of the logged
curve follows from this with one free timescale; this module redoes the check:

- the pool is Big-Math's solve-rate histogram (:mod:`stddial_book.corpora.bigmath_figure`), sharpened
  as p ↦ p^(1/T) (T = 1 is the frozen Big-Math pool; larger T moves every prompt toward mastery);
- the end temperature T_end is fixed by the data: E[p^(32/T_end)] equals the plateau, the mean of
  the last 8 logged points;
- the policy's competence (mean solve rate) rises from Big-Math's mean to that at T_end along
  c(t) = 1 − exp(−t/τ), rescaled so that c = 1 at the last logged step, with τ the only free
  parameter; at each step T is the temperature whose mean solve rate is the competence, and the
  prediction is E[p^(32/T)];
- R² of the prediction against the 60 logged points, a bootstrap over the points, and a generic
  two-parameter curve a(1 − exp(−t/b)) for comparison.

The digitised points come from the source paper's repository; :func:`build_dapo_table` copies
them into ``data/dapo/`` with provenance (sha256 of the source file).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stddial_book.core.checks import check_int, check_number, check_pool, check_unit_interval, to_numpy

__all__ = [
    "DAPO_SOURCE",
    "load_dapo_fig3b",
    "build_dapo_table",
    "ConsistencyFit",
    "fit_consistency",
    "consistency_numbers",
    "sharpened_moment",
    "DAPO_FIG3B_TABLE",
    "EVAL_SAMPLES",
    "PLATEAU_POINTS",
]

DAPO_FIG3B_TABLE = "dapo_fig3b_allcorrect"
EVAL_SAMPLES = 32  # DAPO's avg@32: a prompt counts when all 32 samples are right
PLATEAU_POINTS = 8  # the plateau is the mean of the last 8 logged points (the paper's choice)
MAX_BOOTSTRAP = 10_000  # resamples fit_consistency takes at most (each refits the timescale, ~10 ms)

#: The digitised points ship with the package: ``data_path(*SOURCE_FILE)`` (data/sources/dapo-fig3b/).
SOURCE_FILE = ("sources", "dapo-fig3b", "dapo_fig3b_accuracy1_fraction.csv")

#: Where the digitised points come from (data/sources/dapo-fig3b/SOURCE.md).
DAPO_SOURCE = {
    "figure": "Yu et al. (2025), DAPO: An Open-Source LLM Reinforcement Learning System at Scale, "
    "arXiv 2503.14476, Figure 3b (proportion of prompts with accuracy 1 over 32 samples)",
    "digitised_by": "https://github.com/bay-yearick-lab/grpo-standard-deviation-identity",
    "commit": "b67492903f387f3b2db74c366c35d6cb4a426182",
    "path": "data/dapo/dapo_fig3b_accuracy1_fraction.csv",
    "blob": "114e647f3d4d5b76188910ef112c47e83ad0e485",
    "sha256": "adb57efe9cfe3620d0d5102eeb804b0d156fc6ce85ae785b7e5f19eda3669439",
    "method": "pixel extraction of the published figure; axis calibration RMS < 2 steps (x), < 0.0002 (y)",
}


def _read_points(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(steps, fractions) of a two-column CSV; comment lines (``#``) and one header line are skipped, every
    other line must hold a finite step and a fraction (``ValueError`` naming the file and line)."""
    fix = "pass DAPO's digitised Figure 3b (data/dapo/dapo_fig3b_allcorrect.csv or its source CSV)."
    steps, values = [], []
    header_seen = False
    try:
        with open(path, newline="") as handle:
            for line, row in enumerate(csv.reader(handle), start=1):
                cells = [cell.strip() for cell in row]
                if not any(cells) or cells[0].startswith("#"):
                    continue  # blank lines and comments
                try:
                    step, value = (float(c) for c in cells[:2]) if len(cells) >= 2 else (None, None)
                except ValueError:
                    step = value = None
                if step is None:
                    if not header_seen and not cells[0][:1].isdigit() and cells[0][:1] not in "-+.":
                        header_seen = True  # the header line
                        continue
                    raise ValueError(f"{path}, line {line}: expected a step and a fraction, found {row!r:.60}; {fix}")
                if not (np.isfinite(step) and np.isfinite(value)):
                    raise ValueError(
                        f"{path}, line {line}: the step and fraction must be finite numbers, found {row!r:.60}; {fix}"
                    )
                steps.append(step)
                values.append(value)
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist; {fix}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise ValueError(f"{path} cannot be read as a CSV table ({err}); {fix}") from None
    if len(steps) < PLATEAU_POINTS + 2:
        raise ValueError(f"{path} holds {len(steps)} points; expected DAPO's 60.")
    steps_arr, values_arr = np.array(steps), np.array(values)
    if np.any(np.diff(steps_arr) <= 0) or np.any((values_arr < 0) | (values_arr > 1)):
        raise ValueError(f"{path}: steps must increase and fractions lie in [0, 1].")
    return steps_arr, values_arr


def build_dapo_table(source_csv: str | Path, out_dir: str | Path | None = None) -> Path:
    """Copy the digitised points into ``data/dapo/`` as a plain two-column table, with provenance.

    ``source_csv`` is the digitising repository's CSV of the points (its sha256 is checked); ``out_dir``
    is the folder written to (None, the default: the package's ``data/dapo``). Returns the CSV's path.
    """
    from stddial_book.core.resources import data_path, require_sha256, write_table

    if not isinstance(source_csv, (str, Path)):
        raise TypeError(f"source_csv must be a file path (str or Path); got {type(source_csv).__name__}.")
    source_csv = Path(source_csv)
    require_sha256(source_csv, DAPO_SOURCE["sha256"], "the digitised DAPO points")
    steps, values = _read_points(source_csv)
    out = Path(out_dir) if out_dir is not None else data_path("dapo")
    return write_table(
        out,
        DAPO_FIG3B_TABLE,
        ["step", "allcorrect_fraction"],
        ([int(s), float(v)] for s, v in zip(steps, values)),
        {
            "source": DAPO_SOURCE,
            "licence": "the points are measurements read off DAPO's published figure; cite DAPO (Yu et al., 2025) "
            "and the digitising repository",
            "rows": int(steps.size),
            "made_by": "python -m stddial_book.corpora.dapo_fig3b --csv <dapo_fig3b_accuracy1_fraction.csv>",
        },
    )


def load_dapo_fig3b(path: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(training step, all-correct fraction) of DAPO's Figure 3b, from the committed table.

    ``path`` is the CSV to read instead (None, the default: the table shipped in ``data/dapo/``).
    """
    from stddial_book.core.resources import data_path

    if path is not None and not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a CSV file path (str or Path) or None; got {type(path).__name__}.")
    path = Path(path) if path is not None else data_path("dapo", f"{DAPO_FIG3B_TABLE}.csv")
    if not path.is_file():
        raise ValueError(
            f"{path} is missing; it ships with the package (data/dapo/). Rebuild it with "
            "python -m stddial_book.corpora.dapo_fig3b --csv <dapo_fig3b_accuracy1_fraction.csv>."
        )
    return _read_points(path)


def sharpened_moment(
    solve_rates: np.ndarray, weights: np.ndarray, inverse_temperature: np.ndarray, power: float
) -> np.ndarray:
    """E[(p^(1/T))^power] over a pool (``weights`` sum to 1), for each 1/T given.

    ``solve_rates`` holds the pool's p in [0, 1] and ``weights`` one weight each; ``inverse_temperature``
    is one 1/T > 0 or a 1-D array of them (one result each); ``power`` is the moment, a positive number
    (32 for DAPO's all-correct fraction).
    """
    p, weights = check_pool(solve_rates, weights)
    p = p[None, :]
    inv_t = np.atleast_1d(to_numpy(inverse_temperature, "inverse_temperature"))
    if inv_t.ndim != 1 or np.any(inv_t <= 0):
        raise ValueError("inverse_temperature must be one or a 1-D list of positive numbers 1/T (T > 0).")
    inv_t = inv_t[:, None]
    power = check_number(power, "power")
    if not power > 0:
        raise ValueError(f"power must be positive (the moment, e.g. 32); got {power}.")
    with np.errstate(divide="ignore"):
        powered = np.where(p > 0, np.exp(power * inv_t * np.log(np.where(p > 0, p, 1.0))), 0.0)
    return powered @ weights


@dataclass
class ConsistencyFit:
    """The outcome of :func:`fit_consistency` (all fractions in [0, 1]).

    * ``steps`` and ``logged``: the training steps and DAPO's logged all-correct fractions fitted;
    * ``predicted``: E[p^32] along the fitted competence curve, at the logged steps;
    * ``tau``: the one free timescale τ, in training steps; ``r2``: the prediction's R²;
    * ``plateau``: the mean of the last ``PLATEAU_POINTS`` (8) logged fractions;
    * ``frozen``: E[p^32] of the unsharpened pool (T = 1); ``frozen_mean`` and ``end_mean``: the
      pool's mean solve rate at T = 1 and at ``end_temperature``, the T_end whose E[p^32] is the plateau;
    * ``generic_r2`` and ``generic_params``: R² and (a, b) of the generic curve a(1 − exp(−t/b));
    * ``bootstrap_r2``: R² of the refitted model on each bootstrap resample;
    * ``curve_means`` and ``curve_allcorrect``: a grid of mean solve rates (competence) and E[p^32]
      along it, for the competence figure.
    """

    steps: np.ndarray
    logged: np.ndarray
    predicted: np.ndarray  # E[p^32] along the fitted competence curve, at the logged steps
    tau: float  # the one free timescale, in training steps
    r2: float
    plateau: float
    frozen: float  # E[p^32] of the unsharpened pool (T = 1)
    frozen_mean: float  # the pool's mean solve rate at T = 1
    end_mean: float  # its mean solve rate at T_end
    end_temperature: float
    generic_r2: float  # a(1 − exp(−t/b)), two free parameters
    generic_params: tuple[float, float]
    bootstrap_r2: np.ndarray  # R² of the refitted model on each bootstrap resample
    curve_means: np.ndarray  # a grid of mean solve rates (competence) ...
    curve_allcorrect: np.ndarray  # ... and E[p^32] along it, for the competence figure


def _r2(y: np.ndarray, prediction: np.ndarray) -> float:
    return float(1.0 - np.sum((y - prediction) ** 2) / np.sum((y - y.mean()) ** 2))


def _golden(f, lo: float, hi: float, iterations: int = 80) -> float:
    """The minimiser of a unimodal ``f`` on [lo, hi] (golden-section search)."""
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    a, b = lo, hi
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iterations):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = f(d)
    return (a + b) / 2.0


def _golden_many(f, lo: np.ndarray, hi: np.ndarray, iterations: int = 80) -> np.ndarray:
    """:func:`_golden` on many intervals at once: ``f`` maps an array of points (one per interval)
    to their values; each interval follows exactly the steps :func:`_golden` takes on it alone."""
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    a, b = np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64)
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iterations):
        left = fc < fd  # the minimum lies in [a, d]: b moves to d, d to c, a new c
        a, b = np.where(left, a, c), np.where(left, d, b)
        c_new, d_new = b - ratio * (b - a), a + ratio * (b - a)
        c, d = np.where(left, c_new, d), np.where(left, c, d_new)
        values = f(np.where(left, c, d))
        fc, fd = np.where(left, values, fd), np.where(left, fc, values)
    return (a + b) / 2.0


def _fit_log_scale(loss, lo: float, hi: float, grid_loss=None) -> float:
    """Minimise ``loss`` over a positive scale: a log grid, then golden section around the best.
    ``grid_loss``, if given, evaluates ``loss`` at every grid point at once (the same numbers)."""
    grid = np.geomspace(lo, hi, 240)
    values = [loss(x) for x in grid] if grid_loss is None else grid_loss(grid)
    i = int(np.argmin(values))
    left, right = np.log(grid[max(i - 1, 0)]), np.log(grid[min(i + 1, grid.size - 1)])
    return float(np.exp(_golden(lambda z: loss(np.exp(z)), left, right)))


def fit_consistency(
    solve_rates: np.ndarray,
    counts: np.ndarray,
    steps: np.ndarray,
    logged: np.ndarray,
    bootstrap: int = 1000,
    seed: int = 0,
) -> ConsistencyFit:
    """The paper's consistency check of E_p[p^32] against DAPO's logged all-correct fraction.

    ``solve_rates`` and ``counts`` describe the prompt pool (Big-Math: k/64 and the 65 counts).
    ``steps`` (positive, increasing) and ``logged`` (fractions in [0, 1]) are the logged curve, one
    fraction per step, at least ``PLATEAU_POINTS`` + 2 = 10 points. ``bootstrap`` is the number of
    bootstrap resamples of the points (0 to 10,000; 1000 by default, 0 for none) and ``seed`` (≥ 0)
    seeds them. See the module docstring for the model; the fits minimise squared error.
    """
    p, w = check_pool(solve_rates, counts)
    if w.sum() <= 0:
        raise ValueError("solve_rates and counts must have one entry per solve rate, with counts summing above 0.")
    w = w / w.sum()
    steps, logged = _checked_curve(steps, logged)
    bootstrap = check_int(bootstrap, "bootstrap", minimum=0)
    if bootstrap > MAX_BOOTSTRAP:
        raise ValueError(
            f"bootstrap={bootstrap} resamples would take hours (each refits the timescale); pass at most "
            f"{MAX_BOOTSTRAP} (the chapter uses 1000)."
        )
    seed = check_int(seed, "seed", minimum=0)
    plateau = float(logged[-PLATEAU_POINTS:].mean())
    frozen = float(sharpened_moment(p, w, 1.0, EVAL_SAMPLES)[0])
    if not frozen < plateau < float(np.sum(w[p == 1.0])) + 1.0:
        raise ValueError(f"the plateau {plateau:.3f} must lie above the frozen pool's E[p^32] = {frozen:.3f}.")
    inv_t_end = _plateau_inverse_temperature(p, w, plateau)
    model = _competence_model(p, w, inv_t_end, steps, logged)
    tau = model.fit_tau(np.arange(steps.size))
    predicted = model.predict(tau, steps)
    a, b = _generic_fit(steps, logged)
    return ConsistencyFit(
        steps,
        logged,
        predicted,
        tau,
        _r2(logged, predicted),
        plateau,
        frozen,
        float(model.means[0]),
        float(model.means[-1]),
        1.0 / inv_t_end,
        _r2(logged, a * (1.0 - np.exp(-steps / b))),
        (a, b),
        model.bootstrap_r2(bootstrap, seed),
        model.means,
        model.allcorrect,
    )


def _checked_curve(steps: np.ndarray, logged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``steps`` and ``logged`` as arrays, refused unless 1-D and paired, with enough points for the
    plateau, positive increasing steps and fractions in [0, 1]."""
    steps = to_numpy(steps, "steps")
    logged = to_numpy(logged, "logged")
    if steps.ndim != 1 or steps.shape != logged.shape or steps.size < PLATEAU_POINTS + 2:
        raise ValueError(
            f"steps and logged must be 1-D with one logged fraction per step, at least "
            f"{PLATEAU_POINTS + 2} points; got shapes {steps.shape} and {logged.shape}."
        )
    if np.any(steps <= 0) or np.any(np.diff(steps) <= 0):
        raise ValueError("steps must be positive training steps in increasing order.")
    check_unit_interval(logged, "logged")
    return steps, logged


def _plateau_inverse_temperature(p: np.ndarray, w: np.ndarray, plateau: float) -> float:
    """1/T_end: the inverse temperature at which E[p^(32/T)] equals the plateau, by bisection
    (E[p^(32/T)] rises as 1/T falls)."""
    lo, hi = 1e-6, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if sharpened_moment(p, w, mid, EVAL_SAMPLES)[0] > plateau else (lo, mid)
    return (lo + hi) / 2.0


@dataclass(frozen=True)
class _CompetenceModel:
    """E[p^32] as the pool's mean solve rate (its competence) rises: ``means`` and ``allcorrect``
    tabulate both along 1/T from 1/T_end to 1, ordered by the mean; the logged curve is fitted
    with one timescale τ."""

    steps: np.ndarray
    logged: np.ndarray
    means: np.ndarray
    allcorrect: np.ndarray

    def predict(self, tau: float, at: np.ndarray) -> np.ndarray:
        """E[p^32] at steps ``at`` when the competence goes from the frozen pool's mean to the
        plateau's along c(t) = (1 − e^(−t/τ)) / (1 − e^(−t_last/τ))."""
        frozen_mean, end_mean = float(self.means[0]), float(self.means[-1])
        competence = (1.0 - np.exp(-at / tau)) / (1.0 - np.exp(-self.steps[-1] / tau))
        return np.interp(frozen_mean + competence * (end_mean - frozen_mean), self.means, self.allcorrect)

    def predict_many(self, taus: np.ndarray, at: np.ndarray) -> np.ndarray:
        """:meth:`predict` for every τ of ``taus`` at once: one row per τ, the same numbers."""
        frozen_mean, end_mean = float(self.means[0]), float(self.means[-1])
        taus = np.asarray(taus, dtype=np.float64)[:, None]
        competence = (1.0 - np.exp(-at[None, :] / taus)) / (1.0 - np.exp(-self.steps[-1] / taus))
        return np.interp(frozen_mean + competence * (end_mean - frozen_mean), self.means, self.allcorrect)

    def fit_tau(self, index: np.ndarray) -> float:
        """The τ of least squared error over the logged points ``index``."""
        logged, steps = self.logged[index], self.steps[index]
        return _fit_log_scale(
            lambda tau: float(np.sum((logged - self.predict(tau, steps)) ** 2)),
            10.0,
            1e6,
            grid_loss=lambda taus: ((logged - self.predict_many(taus, steps)) ** 2).sum(axis=1),
        )

    def bootstrap_r2(self, resamples: int, seed: int) -> np.ndarray:
        """R² of the refitted model on each pairs-bootstrap resample of the logged points, drawn by
        :func:`scipy.stats.bootstrap` (its ``bootstrap_distribution``): the statistic resamples the
        points' indices, refits τ on every resample at once as :meth:`fit_tau` would
        (:meth:`fit_taus`) and returns the refit's R². A resample whose logged values are all equal
        has no R² and is dropped."""
        from scipy import stats

        if resamples == 0:
            return np.array([])

        def r2_of_refit(index: np.ndarray, axis: int = -1) -> np.ndarray:
            rows = np.asarray(index, dtype=np.int64).reshape(-1, self.steps.size)
            out = np.full(len(rows), np.nan)
            varied = np.ptp(self.logged[rows], axis=1) > 0
            if varied.any():
                taus = self.fit_taus(rows[varied])
                out[varied] = [_r2(self.logged[i], self.predict(t, self.steps[i])) for i, t in zip(rows[varied], taus)]
            return out.reshape(np.shape(index)[:-1])

        result = stats.bootstrap(
            (np.arange(self.steps.size),),
            r2_of_refit,
            n_resamples=resamples,
            vectorized=True,
            method="percentile",
            random_state=np.random.default_rng(seed),
        )
        values = np.asarray(result.bootstrap_distribution, dtype=np.float64)
        return values[np.isfinite(values)]

    def fit_taus(self, indices: np.ndarray) -> np.ndarray:
        """:meth:`fit_tau` for each row of ``indices`` (resamples of the logged points), the same
        numbers: the log grid per row, then one golden-section search run on every row at once."""
        logged, steps = self.logged[indices], self.steps[indices]
        grid = np.geomspace(10.0, 1e6, 240)
        best = np.array([np.argmin(((y - self.predict_many(grid, x)) ** 2).sum(axis=1)) for y, x in zip(logged, steps)])
        left, right = np.log(grid[np.maximum(best - 1, 0)]), np.log(grid[np.minimum(best + 1, grid.size - 1)])
        frozen_mean, end_mean = float(self.means[0]), float(self.means[-1])

        def losses(z: np.ndarray) -> np.ndarray:
            tau = np.exp(z)[:, None]
            competence = (1.0 - np.exp(-steps / tau)) / (1.0 - np.exp(-self.steps[-1] / tau))
            predicted = np.interp(frozen_mean + competence * (end_mean - frozen_mean), self.means, self.allcorrect)
            return ((logged - predicted) ** 2).sum(axis=1)  # row sums: the same numbers as one np.sum per row

        return np.exp(_golden_many(losses, left, right))


def _competence_model(
    p: np.ndarray, w: np.ndarray, inv_t_end: float, steps: np.ndarray, logged: np.ndarray
) -> _CompetenceModel:
    """The model on a fine grid of 1/T from 1/T_end up to 1: the mean solve rate (which falls as 1/T
    rises) and E[p^32] along it, sorted by the mean."""
    grid = np.geomspace(inv_t_end, 1.0, 4000)
    means = sharpened_moment(p, w, grid, 1.0)
    allcorrect = sharpened_moment(p, w, grid, EVAL_SAMPLES)
    order = np.argsort(means)
    return _CompetenceModel(steps, logged, means[order], allcorrect[order])


def _generic_fit(steps: np.ndarray, logged: np.ndarray) -> tuple[float, float]:
    """(a, b) of the generic curve a(1 − exp(−t/b)) of least squared error: b by search, a by least
    squares at each b."""

    def generic(b: float) -> tuple[float, float]:
        basis = 1.0 - np.exp(-steps / b)
        a = float(basis @ logged / (basis @ basis))
        return a, float(np.sum((logged - a * basis) ** 2))

    b = _fit_log_scale(lambda b: generic(b)[1], 10.0, 1e6)
    return generic(b)[0], b


def consistency_numbers(fit: ConsistencyFit, percentiles: tuple[float, float] = (10, 90)) -> dict[str, float]:
    """The numbers chapter 7 quotes from a :func:`fit_consistency` result: ``r2`` and
    ``generic_r2`` (the two-parameter curve's), ``boot_low`` and ``boot_high`` (the given
    percentiles of the bootstrap R²; NaN without bootstrap resamples, where they are undefined),
    ``tau``, ``plateau``, ``frozen`` (E[p^32] of Big-Math as it is), ``frozen_mean`` and
    ``end_mean`` (the pool's mean solve rate at T = 1 and at the plateau). ``fit`` is the
    :class:`ConsistencyFit`; ``percentiles`` the pair (low, high) in [0, 100] (10 and 90 by default)."""
    if not isinstance(fit, ConsistencyFit):
        raise TypeError(f"fit must be what fit_consistency returns (a ConsistencyFit); got {type(fit).__name__}.")
    if (
        not isinstance(percentiles, (tuple, list))
        or len(percentiles) != 2
        or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in percentiles)
        or not 0 <= percentiles[0] <= percentiles[1] <= 100
    ):
        raise ValueError(
            f"percentiles must be a pair (low, high) with 0 <= low <= high <= 100; got "
            f"{' '.join(repr(percentiles).split())[:40]}."
        )
    low, high = np.percentile(fit.bootstrap_r2, percentiles) if fit.bootstrap_r2.size else (float("nan"), float("nan"))
    return {
        "r2": fit.r2,
        "generic_r2": fit.generic_r2,
        "boot_low": float(low),
        "boot_high": float(high),
        "tau": fit.tau,
        "plateau": fit.plateau,
        "frozen": fit.frozen,
        "frozen_mean": fit.frozen_mean,
        "end_mean": fit.end_mean,
    }


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Copy DAPO's digitised Figure 3b into data/dapo/ with provenance.")
    parser.add_argument("--csv", required=True, help="dapo_fig3b_accuracy1_fraction.csv")
    parser.add_argument("--out", default=None, help="output folder (default: the package's data/dapo)")
    args = parser.parse_args(argv)
    try:
        print(f"wrote {build_dapo_table(args.csv, args.out)}")
    except (ValueError, OSError) as err:
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    main()
