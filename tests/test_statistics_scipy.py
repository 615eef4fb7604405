"""The seed statistics of chapter 13 against scipy.stats: Welch's test (the teaching formula
against ``scipy.stats.ttest_ind(equal_var=False)``), the screen's decisions, the recorded screen,
and the projection's seeds and chance, each checked by scipy's own test on constructed samples or
by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from stddial_book.experiments import statistics


def _samples(mean: float, sd: float, n: int) -> np.ndarray:
    """n values with exactly this mean and sample SD (ddof 1)."""
    base = np.linspace(-1.0, 1.0, n)
    return mean + sd * (base - base.mean()) / base.std(ddof=1)


@pytest.mark.parametrize("seed", range(6))
def test_welch_is_scipys_welch_test(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(0.3, rng.uniform(0.01, 1.0), rng.integers(2, 13))
    b = rng.normal(0.0, rng.uniform(0.01, 1.0), rng.integers(2, 13))
    ours = statistics.welch(a, b)
    theirs = stats.ttest_ind(a, b, equal_var=False)
    assert ours["t"] == pytest.approx(theirs.statistic, rel=1e-10)
    assert ours["p"] == pytest.approx(theirs.pvalue, rel=1e-8)
    assert ours["df"] == pytest.approx(theirs.df, rel=1e-10)
    assert ours["difference"] == pytest.approx(a.mean() - b.mean(), rel=1e-12)


def test_five_against_five_seeds_is_judged_by_student_t_not_the_normal() -> None:
    """A difference of 2.77 standard errors with 5 seeds a side: the normal tail says p = 0.006,
    Student's t with Welch's df says about 0.03 (two-sided), which a Bonferroni level of 0.05/4
    does not pass."""
    a, b = _samples(1.0, 0.5, 5), _samples(0.0, 0.5, 5)
    scipy_p = stats.ttest_ind(a, b, equal_var=False).pvalue
    normal_p = 2 * stats.norm.sf(abs(stats.ttest_ind(a, b, equal_var=False).statistic))
    assert normal_p < 0.05 / 4 < scipy_p  # the old normal cutoff would have passed it
    values = {f"m{i}": {"x": list(a), "y": list(b)} for i in range(4)}  # four comparisons
    screen = statistics.comparison_screen(values)
    assert screen["passed"] == []
    assert screen["summary"]["p_star"] == pytest.approx(0.05 / 4)
    assert screen["summary"]["t_star_low"] == pytest.approx(stats.t.isf(0.05 / 8, 8))  # equal spreads: df = 8


@pytest.mark.parametrize("seed", range(4))
def test_the_screen_passes_exactly_what_scipy_rejects_at_the_bonferroni_level(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    values = {
        f"metric {m}": {r: list(rng.normal(rng.normal(0, 1.5), rng.uniform(0.2, 1), 4)) for r in "abc"}
        for m in range(3)
    }
    screen = statistics.comparison_screen(values, level=0.1)
    tests = 3 * 3
    expected = [
        f"{label}, {x} − {y}"
        for label, per in values.items()
        for x, y in (("a", "b"), ("a", "c"), ("b", "c"))
        if stats.ttest_ind(per[x], per[y], equal_var=False).pvalue < 0.1 / tests
    ]
    assert screen["passed"] == expected
    for detail in screen["passed_details"]:
        theirs = stats.ttest_ind(
            values[detail["metric"]][detail["a"]], values[detail["metric"]][detail["b"]], equal_var=False
        )
        assert detail["p"] == pytest.approx(theirs.pvalue, rel=1e-8)


def test_the_recorded_screen_is_scipys_test() -> None:
    rng = np.random.default_rng(7)
    final = {key: rng.normal(mu, 0.05, 5) for key, mu in (("grpo", 0.5), ("dr_grpo", 0.3), ("dapo", 0.49))}
    study = {key: {"final": [np.array([v, 0.9]) for v in values]} for key, values in final.items()}
    hard = statistics.hard_quartile_screen(study, "grpo")
    for key in ("dr_grpo", "dapo"):
        theirs = stats.ttest_ind(final["grpo"], final[key], equal_var=False)
        assert hard["summary"][f"t_{key}"] == pytest.approx(theirs.statistic, rel=1e-10)
        assert hard["summary"][f"p_{key}"] == pytest.approx(theirs.pvalue, rel=1e-8)
        assert hard["summary"][f"df_{key}"] == pytest.approx(theirs.df, rel=1e-10)
    assert hard["passed"] == [
        name
        for key, name in (("dr_grpo", "GRPO − Dr. GRPO"), ("dapo", "GRPO − DAPO"))
        if stats.ttest_ind(final["grpo"], final[key], equal_var=False).pvalue < 0.05 / 2
    ]


@pytest.mark.parametrize(("sd_a", "sd_b"), [(1.0, 1.0), (0.5, 1.5)])
def test_projected_seeds_are_where_scipys_test_first_passes(sd_a: float, sd_b: float) -> None:
    """Samples with the measured means and SDs at n seeds each: the projection's ``needed`` is the
    first n at which scipy's Welch test rejects at the Bonferroni level."""
    values = {"m": {"a": list(_samples(1.0, sd_a, 3)), "b": list(_samples(0.0, sd_b, 3))}}
    needed = statistics.seed_projection(values, seeds=4)["summary"]["fewest_needed"]

    def rejects(n: int) -> bool:
        return stats.ttest_ind(_samples(1.0, sd_a, n), _samples(0.0, sd_b, n), equal_var=False).pvalue < 0.05

    first = next(n for n in range(2, 200) if rejects(n))
    assert needed == first
    row = statistics.seed_projection(values, seeds=first)
    assert row["summary"]["projected"] == 1
    assert statistics.seed_projection(values, seeds=first - 1)["summary"]["projected"] == 0


def test_projected_chance_matches_simulated_welch_tests() -> None:
    """Equal spreads and seeds: if the measured difference and SD were the truth, the share of
    simulated runs whose Welch test rejects is the projection's chance (noncentral t)."""
    values = {"m": {"a": list(_samples(0.8, 1.0, 4)), "b": list(_samples(0.0, 1.0, 4))}}
    projection = statistics.seed_projection(values, seeds=10)
    chance = float(projection["rows"][0][-1].rstrip("%")) / 100
    rng = np.random.default_rng(0)
    a = rng.normal(0.8, 1.0, (20_000, 10))
    b = rng.normal(0.0, 1.0, (20_000, 10))
    simulated = np.mean(stats.ttest_ind(a, b, axis=1, equal_var=False).pvalue < 0.05)
    assert chance == pytest.approx(simulated, abs=0.015)


def test_t_threshold_is_scipys_quantile() -> None:
    assert statistics.t_threshold(0.05, 10) == pytest.approx(stats.t.ppf(0.975, 10))
    assert math.isnan(statistics.t_threshold(0.05, float("nan")))
