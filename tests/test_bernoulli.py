"""The Bernoulli-logit prompt: sampled gradients against the closed forms (Bay and Yearick, 2026)."""

from __future__ import annotations

import numpy as np
import pytest

from stddial_book import DR_GRPO, GRPO
from stddial_book.bernoulli import monte_carlo_gradient, sampled_gradients
from stddial_book.identity import expected_group_std, expected_group_variance

P = np.linspace(0.02, 0.98, 25)


@pytest.mark.parametrize("recipe, closed_form", [(GRPO, expected_group_std), (DR_GRPO, expected_group_variance)],
                         ids=["grpo", "dr_grpo"])
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
    with pytest.raises(ValueError):
        sampled_gradients(np.array([1.5]), 8, GRPO, rng)
    with pytest.raises(ValueError):
        sampled_gradients(np.array([]), 8, GRPO, rng)
    with pytest.raises(ValueError):
        monte_carlo_gradient(np.array([0.5]), 8, GRPO, num_groups=1)


# --- the controlled run (Bay and Yearick, 2026, §8) -------------------------------------------

from stddial_book import DAPO  # noqa: E402
from stddial_book.bernoulli import (ControlledRun, controlled_run, controlled_run_study, hardest_quartile,  # noqa: E402
                                    initial_solve_rates, matched_lr, silent_r2, value_at_budget)
from stddial_book.identity import expected_group_std as e_sigma  # noqa: E402

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
    from stddial_book.identity import expected_group_variance

    assert lr * expected_group_variance(p0, 8).mean() == pytest.approx(SMALL.lr * e_sigma(p0, 8).mean())


def test_quartile_and_budget_helpers() -> None:
    mask = hardest_quartile(np.array([0.5, 0.1, 0.1, 0.9, 0.2, 0.3, 0.05, 0.7]))
    assert mask.sum() == 2 and mask[6] and mask[1]
    run = controlled_run(np.full(40, 0.3), DAPO, ControlledRun(num_prompts=40, steps=5), seed=0)
    curve = np.arange(6, dtype=float)
    assert value_at_budget(run, curve, 0) == 0 and value_at_budget(run, curve, run.groups_drawn.sum()) == 5
    with pytest.raises(ValueError, match="drew"):
        value_at_budget(run, curve, run.groups_drawn.sum() + 1)


def test_study_shapes_and_bad_settings() -> None:
    study = controlled_run_study(np.arange(65) / 64, np.ones(65), seeds=2, config=SMALL)
    assert study["quartile/grpo"].shape == (2, SMALL.steps + 1)
    assert study["silent_measured/grpo"].shape == (2, SMALL.steps)
    for bad in (dict(num_prompts=2), dict(lr=0.0), dict(clip=(0.5, 0.4)), dict(group_size=1)):
        with pytest.raises(ValueError):
            ControlledRun(**bad)
    with pytest.raises(ValueError):
        controlled_run_study(np.arange(65) / 64, np.ones(65), seeds=1, config=SMALL)


def test_quartile_gap_is_paired_and_signed() -> None:
    from stddial_book.bernoulli import quartile_gap

    study = controlled_run_study(np.arange(65) / 64, np.ones(65), seeds=2, config=SMALL)
    assert np.allclose(quartile_gap(study, "grpo", "grpo"), 0.0)
    assert np.all(quartile_gap(study, "grpo", "dr_grpo") > 0)  # same lr: σ̂ > σ̂² moves GRPO further
    assert np.allclose(quartile_gap(study, "grpo", "dapo"), -quartile_gap(study, "dapo", "grpo"))
