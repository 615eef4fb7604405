"""Chapters 12 and 13: DAPO's refill replayed, clip and loss coefficients, the recipes compared,
the seed arithmetic, and their figures. Expectations are computed by hand in the comments."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from stddial_book.experiments.statistics import (
    comparison_screen,
    comparison_verdicts,
    hard_quartile_screen,
    seed_projection,
)
from stddial_book.experiments.testbed.comparison import live_comparison_numbers, screen_values, study_numbers
from stddial_book.experiments.testbed.logs import clipping_numbers, minibatch_clipping
from stddial_book.experiments.testbed.refill import (
    max_rounds_study,
    refill_band_shares,
    replay_refill,
    sample_coefficients,
)
from stddial_book.theory.recipes import DAPO, DR_GRPO, GRPO

# --- DAPO's refill replayed (chapter 12) ------------------------------------------------------


def refill_log() -> list[dict]:
    """G = 4, two groups per step. Step 1 drew [0, 2] (one mixed), then [4] (silent), then [1]:
    full after 3 rounds. Step 2 drew [2, 3]: full after one round."""
    return [
        {"step": 0},
        {
            "step": 1,
            "groups_generated/k": [0, 2, 4, 1],
            "dynamic_sampling/rounds": 3,
            "dynamic_sampling/hit_cap": False,
            "updates": 2,
        },
        {
            "step": 2,
            "groups_generated/k": [2, 3],
            "dynamic_sampling/rounds": 1,
            "dynamic_sampling/hit_cap": False,
            "updates": 4,
        },
    ]


TRAIN = {"group_size": 4, "prompts_per_step": 2, "num_minibatches": 2, "sample_budget": 40, "max_rounds": 8}


def test_replay_refill_reproduces_the_log_and_caps_rounds() -> None:
    own = replay_refill(refill_log(), 4, 2, max_rounds=8)
    assert own["rounds"].tolist() == [3, 1] == own["logged_rounds"].tolist()
    assert own["hit_cap"].tolist() == [False, False] and own["groups_kept"].tolist() == [2, 2]
    assert own["groups_generated"].tolist() == [4, 2]
    one = replay_refill(refill_log(), 4, 2, max_rounds=1)
    assert one["rounds"].tolist() == [1, 1] and one["hit_cap"].tolist() == [True, False]
    assert one["groups_kept"].tolist() == [1, 2] and one["groups_generated"].tolist() == [2, 2]
    two = replay_refill(refill_log(), 4, 2, max_rounds=2)  # round 2 draws the silent [4]
    assert two["groups_kept"].tolist() == [1, 2] and two["hit_cap"].tolist() == [True, False]
    with pytest.raises(ValueError, match="outside"):
        replay_refill(refill_log(), 2, 2, max_rounds=1)  # k = 4 > G = 2


def test_max_rounds_study_by_hand() -> None:
    study = max_rounds_study(refill_log(), TRAIN, max_rounds=1)
    assert study["reproduced"] is True
    assert study["steps_logged"] == 2 and study["updates_logged"] == 4 and study["hit_cap_logged"] == 0.0
    assert study["hit_cap"] == 0.5  # step 1 ends short
    assert study["groups_kept"] == 1.5 and study["kept_share"] == 0.75
    assert study["samples_per_step"] == 8.0  # one round of 2 groups of 4
    assert study["steps"] == 5  # ⌈40 / 8⌉
    assert study["updates"] == pytest.approx(5 * 1.5)  # min(2 minibatches, groups kept) = 1 and 2
    wrong = refill_log()
    wrong[1]["dynamic_sampling/rounds"] = 2
    assert max_rounds_study(wrong, TRAIN, max_rounds=1)["reproduced"] is False


def test_clipping_numbers_by_hand() -> None:
    records = [
        {"step": 0},
        {
            "step": 1,
            "groups_generated/k": [1],
            "clip_ratio/high_mean": 0.0,
            "clip_ratio/low_mean": 0.01,
            "completions/clipped_ratio": 0.0,
        },
        {
            "step": 2,
            "groups_generated/k": [1],
            "clip_ratio/high_mean": 0.02,
            "clip_ratio/low_mean": 0.03,
            "completions/clipped_ratio": 0.5,
        },
        {"step": 3, "groups_generated/k": [0], "completions/clipped_ratio": 0.25},
    ]  # no update
    out = clipping_numbers(records)
    assert out["clip_high"] == pytest.approx(0.01) and out["clip_low"] == pytest.approx(0.02)
    assert out["clip_high_steps"] == 0.5
    assert out["truncated"] == pytest.approx(0.75 / 3)


def test_minibatch_clipping_by_hand() -> None:
    checks = {"minibatch": np.array([0, 1, 0, 1, 1]), "clipped": np.array([0.0, 0.1, 0.0, 0.0, 0.3])}
    out = minibatch_clipping(checks)
    assert out["first_checks"] == 2 and out["first_max"] == 0.0
    assert out["later_checks"] == 3 and out["later_mean"] == pytest.approx(0.4 / 3)
    assert out["later_max"] == 0.3 and out["later_nonzero"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="later minibatches"):
        minibatch_clipping({"minibatch": np.array([0, 0]), "clipped": np.array([0.0, 0.0])})


def test_refill_band_shares_by_hand() -> None:
    # four pool prompts measured 0, 2, 4, 8 of 8: p = 0, 1/4, 1/2, 1, one prompt per band.
    # G = 2: E[w] = P(k = 1) σ = 2p(1 − p) / 2 = p(1 − p) = 0, 3/16, 1/4, 0.
    records = [{"step": 0, "pool/k": [0, 2, 4, 8], "pool/n": 8}]
    shares = refill_band_shares(records, 2, redraw_tries=2)
    grpo, refill, redraw = shares.values()
    np.testing.assert_allclose(grpo, [0, 3 / 7, 4 / 7, 0])
    np.testing.assert_allclose(refill, grpo)  # the same factor 1/(1 − f) for every prompt
    # two draws multiply E[w] by 1 + s, s = p² + (1 − p)² = 5/8 and 1/2
    weights = np.array([0, 3 / 16 * 13 / 8, 1 / 4 * 3 / 2, 0])
    np.testing.assert_allclose(redraw, weights / weights.sum())


# --- a sample's coefficient in the update (chapter 13, exercise 1) -----------------------------


def test_sample_coefficients_follow_each_aggregation() -> None:
    correct, lengths = np.array([1, 1, 0, 0]), np.array([2, 4, 1, 3])
    # GRPO: A = ±1 (std 1/2 divides ±1/2), divided by B ℓᵢ = 4 ℓᵢ
    np.testing.assert_allclose(
        sample_coefficients(GRPO, correct, lengths, 4, 4), [1 / 8, 1 / 16, -1 / 4, -1 / 12], atol=1e-15
    )
    # Dr. GRPO: A = ±1/2, divided by B L_max = 16
    np.testing.assert_allclose(
        sample_coefficients(DR_GRPO, correct, lengths, 4, 4), [1 / 32, 1 / 32, -1 / 32, -1 / 32], atol=1e-15
    )
    # DAPO: ±1 rewards, A = ±1, divided by all tokens of the step, Σℓ = 10
    np.testing.assert_allclose(sample_coefficients(DAPO, correct, lengths, 4, 4), [0.1, 0.1, -0.1, -0.1], atol=1e-15)
    variant = GRPO.replace(scale_std=False, kl_coef=0.0)
    ratio = sample_coefficients(variant, correct, lengths, 4, 4) / sample_coefficients(DR_GRPO, correct, lengths, 4, 4)
    np.testing.assert_allclose(ratio, 4 / lengths)  # L_max / ℓ
    with pytest.raises(ValueError, match="whole token counts"):
        sample_coefficients(GRPO, correct, [2, 5, 1, 3], 4, 4)  # 5 > L_max


# --- the recipes compared (chapter 13) ---------------------------------------------------------


def eval_record(sampled: float, greedy: float) -> dict:
    return {"step": 8, "eval/accuracy_sampled": sampled, "eval/accuracy_greedy": greedy}


def test_screen_values_by_hand() -> None:
    study = {
        "grpo": {"final": [np.array([0.1, 0.5]), np.array([0.3, 0.7])]},
        "dapo": {"final": [np.array([0.2, 0.2]), np.array([0.0, 0.4])]},
    }
    runs = {
        "grpo": [[eval_record(0.4, 0.5)], [eval_record(0.6, 0.7)]],
        "dapo": [[eval_record(0.1, 0.2)], [eval_record(0.3, 0.4)]],
    }
    values = screen_values(study, runs)
    assert values["pool solve rate"] == {"GRPO": [0.3, 0.5], "DAPO": [0.2, 0.2]}
    assert values["hardest quartile"] == {"GRPO": [0.1, 0.3], "DAPO": [0.2, 0.0]}
    assert values["held-out sampled"] == {"GRPO": [0.4, 0.6], "DAPO": [0.1, 0.3]}
    assert values["held-out greedy"] == {"GRPO": [0.5, 0.7], "DAPO": [0.2, 0.4]}
    with pytest.raises(ValueError, match="same recipe keys"):
        screen_values(study, {"grpo": runs["grpo"]})


def test_live_comparison_numbers_by_hand() -> None:
    edge = math.sqrt(3) / 4  # σ of k = 1 of G = 4

    def run(updates: int) -> list[dict]:
        return [
            {
                "step": 1,
                "groups_generated/k": [1, 2],
                "groups/sigma": [round(edge, 6), 0.5],
                "groups/weight": [round(edge, 6), 0.5],
                "updates": updates,
            }
        ]

    out = live_comparison_numbers({"grpo": [run(2), run(4)]}, 4)
    assert out["share_grpo"] == pytest.approx(round(edge, 6) / (round(edge, 6) + 0.5))
    assert out["updates_grpo"] == 3.0


def fake_entry(
    q1_final: list[float], r2_points: tuple[list[float], list[float]], mass: list[float], expected: list[float]
) -> dict:
    """A pool_study entry with two bands, measured at the start (0.1, 0.6) and at the end."""
    measured, predicted = (np.array(x) for x in r2_points)
    return {
        "samples": [np.array([0.0, 100.0])] * len(q1_final),
        "bands": [np.array([[0.1, q], [0.6, 0.8]]) for q in q1_final],
        "final": [np.array([q, 0.8]) for q in q1_final],
        "silent": [
            {"interval_measured": measured, "interval_predicted": predicted, "interval_se": np.full(measured.size, 0.1)}
        ],
        "mass": [{"realised": np.array(mass), "expected": np.array(expected)}] * len(q1_final),
    }


def test_study_numbers_and_hard_quartile_screen_by_hand() -> None:
    study = {
        "grpo": fake_entry([0.5, 0.6, 0.7], ([0.1, 0.3], [0.1, 0.3]), [0.3, 0.7], [0.25, 0.75]),
        "dr_grpo": fake_entry([0.1, 0.2, 0.3], ([0.1, 0.3], [0.2, 0.3]), [0.2, 0.8], [0.2, 0.8]),
        "dapo": fake_entry([0.5, 0.6, 0.7], ([0.1, 0.3], [0.1, 0.3]), [0.3, 0.7], [0.3, 0.7]),
    }
    out = study_numbers(study)
    # dr_grpo's silent fit: gaps (−0.1, 0) around a spread of 0.02: R² = 1 − 0.01/0.02
    assert out["r2_min"] == pytest.approx(0.5) and out["r2_max"] == pytest.approx(1.0)
    assert out["rmse_max"] == pytest.approx(math.sqrt(0.01 / 2))
    assert out["mass_gap"] == pytest.approx(0.05)
    assert out["hard_grpo"] == pytest.approx(0.3) and out["hard_dr_grpo"] == pytest.approx(0.2)
    assert out["q1_grpo"] == pytest.approx(0.6) and out["q1_grpo_sd"] == pytest.approx(0.1)
    assert out["q1_start"] == pytest.approx(0.1) and out["seeds"] == 3

    hard = hard_quartile_screen(study, "grpo")
    s = hard["summary"]
    # 0.6 − 0.2 over sqrt(0.01/3 + 0.01/3) = 4.899 standard errors; equal spreads and seeds: Welch's
    # df = 2 · (3 − 1) = 4, and P(|T_4| > 4.899) = 0.00805 (tables), below 0.05 / 2
    assert s["diff_dr_grpo"] == pytest.approx(0.4) and s["se_dr_grpo"] == pytest.approx(math.sqrt(0.02 / 3))
    assert s["t_dr_grpo"] == pytest.approx(0.4 / math.sqrt(0.02 / 3)) and s["df_dr_grpo"] == pytest.approx(4)
    assert s["p_dr_grpo"] == pytest.approx(0.00805, abs=5e-6)
    assert s["diff_dapo"] == pytest.approx(0.0, abs=1e-12) and s["p_dapo"] == pytest.approx(1.0)
    assert s["tests"] == 2 and s["level"] == 0.05 and s["p_star"] == pytest.approx(0.025)
    assert hard["passed"] == ["GRPO − Dr. GRPO"]
    assert hard_quartile_screen(study, "grpo", level=0.01)["passed"] == []  # 0.00805 > 0.01 / 2


def test_comparison_verdicts_add_the_families() -> None:
    live = comparison_screen({"m": {"a": [1.0, 2.0, 3.0], "b": [1.5, 2.5, 3.5]}})
    quiet = {"summary": {"tests": 2, "level": 0.005}, "passed": []}
    out = comparison_verdicts(live, quiet)
    assert out["total_tests"] == 3 and out["total_level"] == pytest.approx(0.055)
    assert "no recipe learns measurably more" in out["bottom_line"]
    assert out["verdict"] == "Neither difference exceeds that screen."
    loud = {"summary": {"tests": 2, "level": 0.005}, "passed": ["GRPO − DAPO"]}
    out = comparison_verdicts(live, loud)
    assert "GRPO − DAPO" in out["verdict"] and "GRPO − DAPO" in out["bottom_line"]
    with pytest.raises(ValueError, match="comparison_screen"):
        comparison_verdicts(live, {"passed": []})


def test_seed_projection_by_hand() -> None:
    values = {"m": {"a": [1.0, 2.0, 3.0], "b": [0.0, 1.0, 2.0]}}  # difference 1, each SD 1
    # one comparison at 5%, two-sided; equal spreads, n seeds each: Welch's df = 2(n − 1), and
    # t = 1 / sqrt(2/n). From a t table: t*(4 df) = 2.776, t*(10 df) = 2.228; at 8 seeds t = 2.000
    # < t*(14 df) = 2.145, at 9 seeds t = 2.121 > t*(16 df) = 2.120: 9 seeds needed (a normal
    # threshold, 1.96, would have said 8)
    out = seed_projection(values, seeds=6)
    s = out["summary"]
    assert s["p_star"] == 0.05 and s["se_factor"] == pytest.approx(math.sqrt(0.5))
    assert s["t_star_now_low"] == pytest.approx(2.776, abs=5e-4) == s["t_star_now_high"]
    assert s["t_star_low"] == pytest.approx(2.228, abs=5e-4)
    assert s["passed_now"] == 0 and s["projected"] == 0 and s["likely"] == 0
    assert s["fewest_needed"] == 9
    row = out["rows"][0]
    assert row[2:6] == [f"{1 / math.sqrt(2 / 3):+.1f}", f"{1 / math.sqrt(2 / 6):+.1f}", "2.2", "9"]
    # with the seeds it needs, the projected t passes; one fewer does not
    assert seed_projection(values, seeds=9)["summary"]["projected"] == 1
    assert seed_projection(values, seeds=8)["summary"]["projected"] == 0
    assert seed_projection(values, seeds=9)["summary"]["projected_names"] == "m, a − b"


# --- the figures (chapters 12 and 13) ---------------------------------------------------------


def test_sampling_cost_figure_counts_full_and_short_steps() -> None:
    from stddial_book.presentation.plots import sampling_cost_figure

    records = [
        {
            "step": s,
            "samples/generated": 16 * s,
            "samples/kept": 8 * s,
            "dynamic_sampling/rounds": r,
            "dynamic_sampling/hit_cap": c,
        }
        for s, r, c in ((1, 2, False), (2, 3, True), (3, 2, False))
    ]
    fig = sampling_cost_figure(records, "t")
    assert len(fig.axes) == 2 and fig.get_size_inches()[0] <= 10
    bars = [p.get_height() for p in fig.axes[1].patches]
    assert bars == [0, 2, 0, 0, 0, 1]  # filled at 1, 2, 3 rounds; short at 1, 2, 3 rounds


def test_comparison_and_spread_figures_show_the_numbers() -> None:
    from stddial_book.experiments.testbed.logs import mass_by_sigma
    from stddial_book.presentation.plots import comparison_figure, seed_spread_figure

    edge = round(math.sqrt(3) / 4, 6)

    def run(acc: float) -> list[dict]:
        return [
            {"step": 0, "samples/generated": 0, "eval/accuracy_sampled": 0.2},
            {
                "step": 1,
                "samples/generated": 100,
                "groups/sigma": [edge, 0.5],
                "groups/weight": [edge, 0.5],
                "eval/accuracy_sampled": acc,
            },
        ]

    runs = {"GRPO": [run(0.4), run(0.6)], "DAPO": [run(0.3), run(0.5)]}
    fig = comparison_figure(runs, 4)
    assert len(fig.axes) == 2 and fig.get_size_inches()[0] <= 10
    heights = [p.get_height() for p in fig.axes[0].patches]
    # GRPO's mass at k = 1 and k = 2 of 4: weights σ = √3/4 and 1/2, shares of their sum
    np.testing.assert_allclose(heights[:2], [edge / (edge + 0.5), 0.5 / (edge + 0.5)], rtol=1e-12)
    np.testing.assert_allclose(heights[:2], mass_by_sigma(runs["GRPO"][0], 4)["mass"], rtol=1e-12)
    grpo_line = fig.axes[1].get_lines()[0]
    assert grpo_line.get_ydata()[-1] == pytest.approx(0.5)  # mean of 0.4 and 0.6 at the end
    values = {"m1": {"GRPO": [0.1, 0.2, 0.3], "DAPO": [0.4, 0.5, 0.6]}, "m2": {"GRPO": [1, 2, 3], "DAPO": [1, 1, 1]}}
    fig = seed_spread_figure(values)
    dots = [line for line in fig.axes[0].get_lines() if line.get_marker() == "o"]
    assert sum(len(line.get_ydata()) for line in dots) == 12
    assert fig.get_size_inches()[0] <= 10


def test_screen_cells_show_no_negative_zero() -> None:
    """A difference that rounds to zero is shown as 0.000, not -0.000; others keep their sign."""
    screen = comparison_screen(
        {
            "tiny": {"a": [1.0, 2.0, 3.0], "b": [1.0002, 2.0002, 3.0002]},
            "large": {"a": [1.0, 2.0, 3.0], "b": [0.5, 1.5, 2.5]},
        }
    )
    cells = {row[0]: row[1] for row in screen["rows"]}
    assert cells["tiny"].startswith("0.000 ± ")
    assert cells["large"].startswith("+0.500 ± ")


def test_screen_and_projection_say_their_counts_in_words() -> None:
    # a − b differs by 10 with SDs of 0.1 on one metric (passes), by 0 on another (does not)
    values = {
        "loud": {"a": [10.0, 10.1, 9.9], "b": [0.0, 0.1, -0.1]},
        "quiet": {"a": [1.0, 2.0, 3.0], "b": [1.0, 2.0, 3.0]},
    }
    s = comparison_screen(values)["summary"]
    assert s["passed_count"] == "one of the 2 comparisons exceeds"
    assert s["passed_sentence"] == "One exceeds it (loud, a − b); every other difference is within the noise"
    quiet = comparison_screen({"quiet": values["quiet"]})["summary"]
    assert quiet["passed_count"] == "no comparison exceeds"
    assert quiet["passed_sentence"] == "None of them exceeds it: every difference is within the noise"
    projection = seed_projection({"m": {"a": [1.0, 2.0, 3.0], "b": [0.0, 1.0, 2.0]}}, seeds=6)["summary"]
    assert projection["projected_sentence"] == "none of the comparisons would pass with 6 seeds"  # not "0 ... (none)"
    assert projection["likely_count"] == "none"
    projection = seed_projection({"m": {"a": [1.0, 2.0, 3.0], "b": [0.0, 1.0, 2.0]}}, seeds=9)["summary"]
    assert projection["projected_sentence"] == "one of the comparisons would pass with 9 seeds (m, a − b)"
