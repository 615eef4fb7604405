"""The Bernoulli-logit prompt: sampled gradients against the closed forms (Bay and Yearick, 2026)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from stddial_book import DR_GRPO, GRPO
from stddial_book.experiments.controlled.bernoulli import monte_carlo_gradient, sampled_gradients
from stddial_book.theory.silent import expected_group_std, expected_group_variance

P = np.linspace(0.02, 0.98, 25)


@pytest.mark.parametrize(
    "recipe, closed_form", [(GRPO, expected_group_std), (DR_GRPO, expected_group_variance)], ids=["grpo", "dr_grpo"]
)
def test_monte_carlo_lands_on_the_exact_closed_form(recipe, closed_form) -> None:
    mean, se = monte_carlo_gradient(P, 64, recipe, num_groups=2000, seed=1)
    z = (mean - closed_form(P, 64)) / se
    assert np.max(np.abs(z)) < 4.5  # 25 points: a 4.5-SE miss has probability ~2e-4 under the closed form


def test_monte_carlo_can_tell_the_finite_group_from_the_limit() -> None:
    """At G = 8 and p = 0.05 the exact E[g] is 0.54 of √(p(1 − p)); the check sees the gap."""
    mean, se = monte_carlo_gradient(np.array([0.05]), 8, GRPO, num_groups=4000, seed=2)
    assert abs(mean[0] - np.sqrt(0.05 * 0.95)) / se[0] > 10
    assert abs(mean[0] - expected_group_std(0.05, 8)) / se[0] < 4


def test_one_group_is_the_identity() -> None:
    """Per group the sampled GRPO gradient is σ̂ and Dr. GRPO's σ̂² (ḡ₊ − ḡ₋ = 1 for this policy)."""
    p = np.full(200, 0.3)
    grpo = sampled_gradients(p, 8, GRPO, np.random.default_rng(5))
    dr = sampled_gradients(p, 8, DR_GRPO, np.random.default_rng(5))
    np.testing.assert_allclose(dr, grpo**2, atol=1e-12)
    assert set(np.round(grpo * 8, 9)) <= {round(np.sqrt(k * (8 - k)), 9) for k in range(9)}


def test_bad_input() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"solve_rate must lie in \[0, 1\]"):
        sampled_gradients(np.array([1.5]), 8, GRPO, rng)
    with pytest.raises(ValueError, match="non-empty 1-D array"):
        sampled_gradients(np.array([]), 8, GRPO, rng)
    with pytest.raises(ValueError, match="num_groups must be at least 2"):
        monte_carlo_gradient(np.array([0.5]), 8, GRPO, num_groups=1)


# --- the controlled run (Bay and Yearick, 2026, §8) -------------------------------------------

from stddial_book import DAPO
from stddial_book.experiments.controlled.bernoulli import ControlledRun, controlled_run, initial_solve_rates
from stddial_book.experiments.controlled.study import (
    controlled_run_study,
    hardest_quartile,
    matched_lr,
    silent_r2,
    value_at_budget,
)
from stddial_book.theory.silent import expected_group_std as e_sigma

SMALL = ControlledRun(num_prompts=800, steps=40)


def test_each_update_is_the_groups_std() -> None:
    """Every GRPO update is √(k(G − k))/G for some k (the identity), and Dr. GRPO's its square."""
    p0 = np.full(400, 0.4)
    run = controlled_run(p0, GRPO, SMALL, seed=3)
    allowed = np.sqrt(np.arange(9) * (8 - np.arange(9))) / 8
    assert np.all(np.min(np.abs(run.gain[..., None] - allowed), axis=-1) < 1e-12)
    assert np.allclose(run.expected_gain[0], e_sigma(0.4, 8))
    theta_gap = np.log(run.p[1] / (1 - run.p[1])) - np.log(p0 / (1 - p0))
    np.testing.assert_allclose(theta_gap, SMALL.lr * run.gain[0], atol=1e-9)


def test_dapo_redraws_only_silent_groups_and_counts_them() -> None:
    p0 = np.r_[np.full(300, 0.02), np.full(300, 0.5)]
    run = controlled_run(p0, DAPO, SMALL, seed=1)
    assert np.all(run.groups_drawn >= p0.size) and np.all(run.groups_drawn <= SMALL.redraw_tries * p0.size)
    assert np.all(run.groups_kept == (run.gain != 0).sum(axis=1))
    grpo = controlled_run(p0, GRPO, SMALL, seed=1)
    assert run.groups_kept[0] > grpo.groups_kept[0]  # redraws rescue silent groups


def test_silent_fraction_follows_the_closed_form() -> None:
    hist_p = np.arange(65) / 64
    counts = np.ones(65)
    p0 = initial_solve_rates(hist_p, counts, SMALL, np.random.default_rng(0))
    assert p0.min() >= 0.02 and p0.max() <= 0.98
    assert silent_r2(controlled_run(p0, GRPO, SMALL, seed=0)) > 0.95


def test_matched_lr_equalises_the_mean_first_step() -> None:
    p0 = np.linspace(0.05, 0.95, 101)
    lr = matched_lr(p0, GRPO, DR_GRPO, SMALL)
    from stddial_book.theory.silent import expected_group_variance

    assert lr * expected_group_variance(p0, 8).mean() == pytest.approx(SMALL.lr * e_sigma(p0, 8).mean())


def test_quartile_and_budget_helpers() -> None:
    mask = hardest_quartile(np.array([0.5, 0.1, 0.1, 0.9, 0.2, 0.3, 0.05, 0.7]))
    assert mask.sum() == 2 and mask[6] and mask[1]
    run = controlled_run(np.full(40, 0.3), DAPO, ControlledRun(num_prompts=40, steps=5), seed=0)
    curve = np.arange(6, dtype=float)
    assert value_at_budget(run, curve, 0) == 0 and value_at_budget(run, curve, run.groups_drawn.sum()) == 5
    # linear between step boundaries: half the first step's groups is half a step, the first two
    # steps' groups and a quarter of the third's are 2.25 steps
    first, second, third = run.groups_drawn[:3].astype(float)
    assert value_at_budget(run, curve, first / 2) == pytest.approx(0.5, abs=1e-12)
    assert value_at_budget(run, curve, first + second + third / 4) == pytest.approx(2.25, abs=1e-12)
    with pytest.raises(ValueError, match="drew"):
        value_at_budget(run, curve, run.groups_drawn.sum() + 1)


def test_study_shapes_and_bad_settings() -> None:
    study = controlled_run_study(np.arange(65) / 64, np.ones(65), seeds=2, config=SMALL)
    assert study["quartile/grpo"].shape == (2, SMALL.steps + 1)
    assert study["silent_measured/grpo"].shape == (2, SMALL.steps)
    for bad, message in (
        (dict(num_prompts=2), "num_prompts must be at least 4"),
        (dict(lr=0.0), "lr must be a positive finite number"),
        (dict(clip=(0.5, 0.4)), "clip must satisfy 0 < low < high < 1"),
        (dict(group_size=1), "group_size must be at least 2"),
    ):
        with pytest.raises(ValueError, match=message):
            ControlledRun(**bad)
    with pytest.raises(ValueError, match="seeds must be at least 2"):
        controlled_run_study(np.arange(65) / 64, np.ones(65), seeds=1, config=SMALL)


def test_the_study_is_computed_once_and_read_back_identically(tmp_path, monkeypatch) -> None:
    """Chapters 8 and 13 and the reproduction page share one study through the cache: the first call
    computes it, the next reads it back bit for bit; another payload or changed code computes afresh."""
    from stddial_book.experiments.controlled import study as controlled
    from stddial_book.experiments.testbed import runs as testbed

    monkeypatch.setenv(testbed.ENV_CACHE, str(tmp_path))
    calls = []
    real = controlled._study
    monkeypatch.setattr(controlled, "_study", lambda *a: calls.append(a) or real(*a))
    rates, counts = np.arange(65) / 64, np.ones(65)
    first = controlled_run_study(rates, counts, seeds=2, config=SMALL)
    again = controlled_run_study(rates, counts, seeds=2, config=SMALL)
    direct = real(rates, counts, 2, SMALL)
    assert len(calls) == 1 and len(list(tmp_path.glob("controlled-*.npz"))) == 1
    assert sorted(first) == sorted(again) == sorted(direct)
    for name in direct:
        assert np.array_equal(first[name], direct[name]) and np.array_equal(again[name], direct[name])
        assert first[name].dtype == direct[name].dtype
    controlled_run_study(rates, counts * 2, seeds=2, config=SMALL)  # other counts: another study
    controlled_run_study(rates, counts, seeds=2, config=ControlledRun(num_prompts=32, steps=3, lr=0.25))
    assert len(calls) == 3
    monkeypatch.setattr(testbed, "code_fingerprint", lambda *a: "edited-code")
    controlled_run_study(rates, counts, seeds=2, config=SMALL)
    assert len(calls) == 4 and len(list(tmp_path.glob("controlled-*.npz"))) == 4
    assert not list(tmp_path.glob(".*.partial"))


def test_quartile_gap_is_paired_and_signed() -> None:
    from stddial_book.experiments.controlled.study import quartile_gap

    study = controlled_run_study(np.arange(65) / 64, np.ones(65), seeds=2, config=SMALL)
    assert np.allclose(quartile_gap(study, "grpo", "grpo"), 0.0)
    assert np.all(quartile_gap(study, "grpo", "dr_grpo") > 0)  # same lr: σ̂ > σ̂² moves GRPO further
    assert np.allclose(quartile_gap(study, "grpo", "dapo"), -quartile_gap(study, "dapo", "grpo"))


# --- chapter 6's Monte-Carlo check and chapter 8's numbers and exercises ------------------------

from stddial_book.experiments.controlled.bernoulli import monte_carlo_z
from stddial_book.experiments.controlled.study import (
    controlled_gap_numbers,
    controlled_run_numbers,
    matched_gap,
    quartile_gap,
    rematched_run,
)


def test_monte_carlo_z_is_measured_from_the_finite_group_expectation() -> None:
    """At G = 2 a GRPO group's gradient is 1/2 when k = 1 and 0 otherwise, so E[g] = p(1 − p), half
    the large-group √(p(1 − p)) at p = 1/2: z must be small against the former, and the same draws
    must sit many standard errors from the latter."""
    p = np.array([0.2, 0.5, 0.8])
    z = monte_carlo_z(p, 2, GRPO, num_groups=3000, seed=4)
    assert np.all(np.abs(z) < 4.5)
    mean, se = monte_carlo_gradient(p, 2, GRPO, num_groups=3000, seed=4)
    np.testing.assert_allclose((mean - p * (1 - p)) / se, z)
    assert np.all(np.abs(mean - np.sqrt(p * (1 - p))) / se > 10)


def test_monte_carlo_z_at_a_silent_prompt_is_zero_not_nan() -> None:
    z = monte_carlo_z(np.array([0.0, 1.0]), 8, DR_GRPO, num_groups=20)
    assert np.array_equal(z, [0.0, 0.0])


def test_rematched_run_matches_the_mean_expected_step_at_every_step() -> None:
    """θ moves by lr_t · gain, so lr_t = Δθ / gain on any prompt that moved; the rematched rate must
    make Dr. GRPO's mean expected step E[σ̂²] equal GRPO's E[σ̂] at lr = 0.5, step by step."""
    from stddial_book.theory.silent import expected_group_variance

    config = ControlledRun(num_prompts=200, steps=12)
    p0 = np.linspace(0.03, 0.6, 200)
    run = rematched_run(p0, DR_GRPO, GRPO, config, seed=2)
    assert run.p.shape == (13, 200) and run.gain.shape == (12, 200)
    theta = np.log(run.p / (1 - run.p))
    rates = []
    for t in range(12):
        moved = run.gain[t] != 0
        lr_t = (theta[t + 1, moved] - theta[t, moved]) / run.gain[t, moved]
        np.testing.assert_allclose(lr_t, lr_t[0], rtol=1e-6)  # one rate for the whole pool
        mean_dr = expected_group_variance(run.p[t], 8).mean()
        assert lr_t[0] * mean_dr == pytest.approx(config.lr * e_sigma(run.p[t], 8).mean(), rel=1e-6)
        rates.append(lr_t[0])
    assert rates[-1] != pytest.approx(rates[0])  # the pool moved, and the matched rate with it


def test_rematched_run_against_itself_keeps_the_rate() -> None:
    config = ControlledRun(num_prompts=100, steps=5)
    p0 = np.linspace(0.1, 0.9, 100)
    run = rematched_run(p0, GRPO, GRPO, config, seed=0)
    theta = np.log(run.p / (1 - run.p))
    moved = run.gain != 0
    np.testing.assert_allclose((theta[1:] - theta[:-1])[moved], config.lr * run.gain[moved], rtol=1e-9)


def test_matched_gap_is_the_studys_matched_comparison() -> None:
    hist_p, counts = np.arange(65) / 64, np.ones(65)
    study = controlled_run_study(hist_p, counts, seeds=2, config=SMALL)
    np.testing.assert_allclose(
        matched_gap(hist_p, counts, seeds=2, config=SMALL),
        quartile_gap(study, "grpo", "dr_grpo_matched"),
        rtol=0,
        atol=1e-15,
    )
    rematched = matched_gap(hist_p, counts, seeds=2, config=SMALL, rematch=True)
    assert rematched.shape == (2,) and np.all(np.isfinite(rematched))
    with pytest.raises(TypeError, match="rematch must be True or False"):
        matched_gap(hist_p, counts, seeds=2, config=SMALL, rematch="yes")


def test_controlled_run_numbers_by_hand() -> None:
    """A made-up study of 2 seeds and 2 steps (3 step boundaries): every number is read off on paper."""
    study = {
        "quartile/grpo": [[0.1, 0.3, 0.7], [0.1, 0.2, 0.5]],  # mean 0.1, 0.25, 0.6
        "quartile/dr_grpo": [[0.1, 0.2, 0.3], [0.1, 0.1, 0.2]],  # mean 0.1, 0.15, 0.25
        "quartile/dr_grpo_matched": [[0.1, 0.3, 0.5], [0.1, 0.3, 0.5]],  # mean 0.1, 0.3, 0.5
        "quartile/dapo": [[0.1, 0.5, 0.9], [0.1, 0.4, 0.7]],  # end 0.8
        "silent_r2/grpo": [0.97, 0.99],
        "silent_r2/dr_grpo": [0.95, 0.98],
        "silent_measured/grpo": [[0.2, 0.3], [0.4, 0.5]],  # last step: 0.4
        "extreme_share/grpo": [0.2, 0.4],
        "extreme_share/dr_grpo": [0.1, 0.1],
        "dapo_oversampling": [1.5, 2.5],
        "matched_lr": [2.0, 4.0],
    }
    study = {name: np.array(value) for name, value in study.items()}
    numbers = controlled_run_numbers(study, mid=1)
    expected = {
        "n_seeds": 2,
        "silent_r2_min": 0.97,
        "silent_r2_dr_min": 0.95,
        "silent_end": 0.4,
        "ext_grpo": 0.3,
        "ext_grpo_sd": np.sqrt(0.02),
        "ext_dr": 0.1,
        "ext_dr_sd": 0.0,
        "q_grpo_end": 0.6,
        "q_dr_end": 0.25,
        "q_dapo_end": 0.8,
        "mid": 1,
        "q_grpo_mid": 0.25,
        "q_dr_grpo_mid": 0.15,
        "q_dr_grpo_matched_mid": 0.3,
        "oversampling": 2.0,
        "matched_lr": 3.0,
        # GRPO's mean curve is at or above the matched Dr. GRPO's at step 2 (0.6 >= 0.5), not at 1
        "steps_ahead": 1,
        "n_steps": 2,
    }
    assert numbers.keys() == expected.keys()
    for name, value in expected.items():
        assert numbers[name] == pytest.approx(value, abs=1e-12), name
    with pytest.raises(ValueError, match=r"mid must be a step of the run, 0\.\.2"):
        controlled_run_numbers(study, mid=3)


def test_controlled_run_numbers_of_one_seed_have_no_spread() -> None:
    """With one seed the SDs over seeds are undefined and reported as NaN, not 0."""
    one = {
        "quartile/grpo": [[0.1, 0.2]],
        "quartile/dr_grpo": [[0.1, 0.2]],
        "quartile/dr_grpo_matched": [[0.1, 0.2]],
        "quartile/dapo": [[0.1, 0.2]],
        "silent_r2/grpo": [0.9],
        "silent_r2/dr_grpo": [0.9],
        "silent_measured/grpo": [[0.5]],
        "extreme_share/grpo": [0.2],
        "extreme_share/dr_grpo": [0.1],
        "dapo_oversampling": [1.0],
        "matched_lr": [1.0],
    }
    numbers = controlled_run_numbers({name: np.array(value) for name, value in one.items()}, mid=0)
    assert np.isnan(numbers["ext_grpo_sd"]) and np.isnan(numbers["ext_dr_sd"])
    assert numbers["steps_ahead"] == 1 and numbers["n_steps"] == 1  # equal curves count as "at or above"


def test_controlled_gap_numbers_by_hand() -> None:
    """A made-up study of 2 seeds and 3 step boundaries: every gap is computable on paper."""
    quartile = {
        "grpo": [[0.1, 0.5, 0.9], [0.1, 0.4, 0.8]],
        "dr_grpo": [[0.1, 0.2, 0.3], [0.1, 0.2, 0.2]],
        "dr_grpo_matched": [[0.1, 0.5, 0.9], [0.1, 0.4, 0.8]],  # identical to GRPO
        "dapo": [[0.1, 0.9, 1.0], [0.1, 0.9, 1.0]],
    }
    study = {f"quartile/{k}": np.array(v) for k, v in quartile.items()}
    study["matched_lr"] = np.array([1.0, 1.0])
    study["num_prompts"] = np.array([4, 4])
    study["dapo_groups_drawn"] = np.array([[0, 8, 16], [0, 8, 16]])  # 2 groups per prompt and step
    numbers = controlled_gap_numbers(study)
    # raw: per seed mean of (0, 0.3, 0.6) = 0.3 and (0, 0.2, 0.6) = 0.2667
    assert numbers["gap_raw"] == pytest.approx((0.3 + 0.8 / 3) / 2)
    assert numbers["gap_matched"] == 0 and numbers["matched_verdict"] == "within seed noise"
    assert np.isnan(numbers["gap_matched_t"]) and np.isnan(numbers["gap_matched_p"])  # zero spread: undefined
    # DAPO per group: read at 0, 1, 2 groups per prompt, i.e. steps 0, 0.5, 1 of its curve: 0.1, 0.5, 0.9
    assert numbers["gap_dapo"] == pytest.approx(np.mean([0.0, 0.0, 0.0, 0.0, -0.1, -0.1]))
    # DAPO per step: (0, -0.4, -0.1) and (0, -0.5, -0.2) averaged over the run
    assert numbers["gap_dapo_step"] == pytest.approx(np.mean([-0.5 / 3, -0.7 / 3]))
    assert numbers["matched_share"] == 0
    # four comparisons at Bonferroni 5%/4, Student t with 1 degree of freedom (2 seeds)
    assert numbers["comparisons"] == 4 and numbers["level"] == pytest.approx(0.0125)
    assert numbers["t_crit"] == pytest.approx(stats.t.isf(0.0125 / 2, 1))
    gap = np.array([-0.5 / 3, -0.7 / 3])
    assert numbers["gap_dapo_step_t"] == pytest.approx(stats.ttest_1samp(gap, 0).statistic)
    assert numbers["gap_dapo_step_p"] == pytest.approx(stats.ttest_1samp(gap, 0).pvalue)
    assert numbers["dapo_step_verdict"] == "indistinguishable from GRPO"  # |t| = 6 < t* = 50.9 on 1 df


def test_controlled_gap_numbers_use_student_t_not_the_normal() -> None:
    """Five paired seeds with t = 3.2: beyond a normal cutoff of 3, but not beyond Student t's
    Bonferroni cutoff on 4 degrees of freedom (3.5 for two comparisons, 4.3 for four), so the gap
    is within seed noise."""
    rng = np.random.default_rng(3)
    noise = rng.normal(size=5)
    noise = (noise - noise.mean()) / noise.std(ddof=1)  # mean 0, SD 1 exactly
    gap = 3.2 / np.sqrt(5) + noise  # t = mean / (SD / sqrt(5)) = 3.2
    steps = 3
    grpo = np.tile([0.1, 0.5, 0.9], (5, 1))
    study = {
        "quartile/grpo": grpo,
        "quartile/dr_grpo": grpo - 0.2,
        "quartile/dr_grpo_matched": grpo - gap[:, None],
        "quartile/dapo": grpo,
        "matched_lr": np.ones(5),
        "num_prompts": np.full(5, 4),
        "dapo_groups_drawn": np.tile(4 * np.arange(steps), (5, 1)),
    }
    numbers = controlled_gap_numbers(study)
    assert numbers["gap_matched_t"] == pytest.approx(3.2)
    assert numbers["t_crit"] == pytest.approx(stats.t.isf(0.05 / 8, 4)) and numbers["t_crit"] > 4
    assert numbers["matched_verdict"] == "within seed noise"
    with pytest.raises(ValueError, match="alpha must lie"):
        controlled_gap_numbers(study, alpha=1.5)
