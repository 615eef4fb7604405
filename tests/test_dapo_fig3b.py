"""DAPO's Figure 3b against E_p[p^32] on Big-Math (Bay and Yearick, 2026, §5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stddial_book.core.resources import data_path
from stddial_book.corpora.bigmath_figure import load_big_math_histogram
from stddial_book.corpora.dapo_fig3b import (
    SOURCE_FILE,
    build_dapo_table,
    fit_consistency,
    load_dapo_fig3b,
    sharpened_moment,
)

# The digitised points, vendored under data/sources/dapo-fig3b/ (see its SOURCE.md) and shipped
# with the package.
SOURCE = data_path(*SOURCE_FILE)


@pytest.fixture(scope="module")
def fit():
    hist = load_big_math_histogram()
    steps, logged = load_dapo_fig3b()
    return fit_consistency(hist.solve_rates, hist.counts, steps, logged, bootstrap=200, seed=0)


def test_the_papers_numbers(fit) -> None:
    assert round(fit.r2, 2) == 0.92  # closed form, one free timescale
    assert round(fit.generic_r2, 2) == 0.98  # generic two-parameter saturating curve
    assert round(fit.plateau, 2) == 0.57 and round(fit.frozen, 2) == 0.12  # the figure's annotations
    assert round(fit.frozen_mean, 2) == 0.48 and round(fit.end_mean, 2) == 0.94
    assert fit.generic_r2 > fit.r2  # the consistency check is not a unique fit: the paper's point


def test_prediction_ends_on_the_plateau_and_starts_at_the_frozen_pool(fit) -> None:
    hist = load_big_math_histogram()
    w = hist.counts / hist.counts.sum()
    assert fit.predicted[-1] == pytest.approx(fit.plateau, abs=1e-3)
    assert sharpened_moment(hist.solve_rates, w, 1.0 / fit.end_temperature, 32)[0] == pytest.approx(
        fit.plateau, abs=1e-9
    )
    assert np.all(np.diff(fit.predicted) >= 0)
    assert fit.curve_allcorrect[0] == pytest.approx(fit.frozen, abs=1e-6)


def test_the_check_can_fail(fit) -> None:
    """A fraction that falls over training is no saturating rise: R² goes negative."""
    hist = load_big_math_histogram()
    steps, logged = load_dapo_fig3b()
    falling = np.linspace(0.9, 0.5, logged.size)  # plateau 0.52, above the frozen pool's 0.12
    bad = fit_consistency(hist.solve_rates, hist.counts, steps, falling, bootstrap=0)
    assert bad.r2 < 0


def test_sharpened_moment_by_hand() -> None:
    p = np.array([0.0, 0.25, 1.0])
    w = np.array([0.5, 0.25, 0.25])
    assert sharpened_moment(p, w, 1.0, 2)[0] == pytest.approx(0.25 * 0.0625 + 0.25)
    assert sharpened_moment(p, w, 0.5, 2)[0] == pytest.approx(0.25 * 0.25 + 0.25)


def test_committed_table_is_made_from_the_source(tmp_path: Path) -> None:
    table = build_dapo_table(SOURCE, tmp_path)
    assert table.read_text() == data_path("dapo", table.name).read_text()
    steps, logged = load_dapo_fig3b(table)
    assert steps.size == 60 and steps[0] == 71 and logged[-1] == pytest.approx(0.565)


def test_a_different_file_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "x.csv"
    other.write_text("step,allcorrect_fraction\n1,0.1\n")
    with pytest.raises(ValueError, match="sha256"):
        build_dapo_table(other, tmp_path)


def test_consistency_numbers_read_the_fit(fit) -> None:
    from stddial_book.corpora.dapo_fig3b import consistency_numbers

    numbers = consistency_numbers(fit)
    assert numbers["r2"] == fit.r2 and numbers["tau"] == fit.tau and numbers["end_mean"] == fit.end_mean
    assert numbers["boot_low"] == pytest.approx(np.percentile(fit.bootstrap_r2, 10))
    assert numbers["boot_low"] <= numbers["boot_high"]
    empty = fit_consistency(
        load_big_math_histogram().solve_rates, load_big_math_histogram().counts, fit.steps, fit.logged, bootstrap=0
    )
    assert np.isnan(consistency_numbers(empty)["boot_low"])  # no resamples: undefined, not 0
    with pytest.raises(ValueError, match=r"percentiles must be a pair \(low, high\) with 0 <= low <= high <= 100"):
        consistency_numbers(fit, percentiles=(90, 10))


def test_the_bootstrap_refits_all_resamples_at_once_as_one_at_a_time() -> None:
    """The vectorised refit (the fast path of the bootstrap) against the scalar one it replaces:
    golden-section search on many intervals takes each interval's own steps, and fit_taus gives
    fit_tau's τ on every resample (exactly here; 1e-12 leaves room for another numpy's row sums)."""
    from stddial_book.corpora import dapo_fig3b as module

    rng = np.random.default_rng(3)
    centres, widths = rng.uniform(-2, 2, 25), rng.uniform(0.1, 3, 25)
    lo, hi = centres - widths * rng.uniform(0.2, 1, 25), centres + widths * rng.uniform(0.2, 1, 25)
    many = module._golden_many(lambda z: (z - centres) ** 2 + 0.1 * np.abs(z - centres) ** 3, lo, hi)
    for j in range(25):
        one = module._golden(lambda z, c=centres[j]: (z - c) ** 2 + 0.1 * abs(z - c) ** 3, lo[j], hi[j])
        assert many[j] == one
    hist = load_big_math_histogram()
    steps, logged = load_dapo_fig3b()
    p, w = hist.solve_rates, hist.counts / hist.counts.sum()
    model = module._competence_model(
        p, w, module._plateau_inverse_temperature(p, w, float(logged[-module.PLATEAU_POINTS :].mean())), steps, logged
    )
    indices = rng.integers(0, steps.size, (12, steps.size))
    fast = model.fit_taus(indices)
    slow = np.array([model.fit_tau(index) for index in indices])
    assert np.allclose(fast, slow, rtol=1e-12, atol=0)
    assert not np.allclose(fast, fast[::-1], rtol=1e-6)  # the resamples differ, so the check can fail


def test_the_bootstrap_is_scipys() -> None:
    """bootstrap_r2 is scipy.stats.bootstrap's percentile bootstrap of the refit's R² (resampling the
    logged points' indices): its 10th and 90th percentiles are scipy's 80% percentile interval from
    the same random stream, and each resample's R² is the one-at-a-time refit's."""
    from scipy import stats

    from stddial_book.corpora import dapo_fig3b as module

    hist = load_big_math_histogram()
    steps, logged = load_dapo_fig3b()
    p, w = hist.solve_rates, hist.counts / hist.counts.sum()
    model = module._competence_model(
        p, w, module._plateau_inverse_temperature(p, w, float(logged[-module.PLATEAU_POINTS :].mean())), steps, logged
    )
    values = model.bootstrap_r2(40, seed=5)
    assert values.size == 40 and np.all(values <= 1)

    def one_at_a_time(index: np.ndarray, axis: int = -1) -> np.ndarray:
        rows = np.asarray(index).reshape(-1, steps.size)
        fits = [model.fit_tau(i) for i in rows]
        return np.array([module._r2(logged[i], model.predict(t, steps[i])) for i, t in zip(rows, fits)]).reshape(
            np.shape(index)[:-1]
        )

    scipy_ci = stats.bootstrap(
        (np.arange(steps.size),),
        one_at_a_time,
        n_resamples=40,
        vectorized=True,
        method="percentile",
        confidence_level=0.8,
        random_state=np.random.default_rng(5),
    )
    assert np.allclose(np.sort(values), np.sort(scipy_ci.bootstrap_distribution), rtol=1e-9, atol=1e-12)
    low, high = scipy_ci.confidence_interval
    assert np.percentile(values, [10, 90]) == pytest.approx([low, high], rel=1e-9)
