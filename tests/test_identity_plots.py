"""The figures of chapters 1, 3 and 4 (stddial_book.presentation.plots): what they show, and legible sizes."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from stddial_book.presentation.identity_plots import (
    dial_figure,
    drift_figure,
    identity_errors_figure,
    mean_abs_advantage_figure,
)


def _check_legible(fig: plt.Figure) -> None:
    """At most 9.5 in wide (so the text column shrinks it little) and no text under 10 pt."""
    assert fig.get_size_inches()[0] <= 9.5
    fig.canvas.draw()
    sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text) if t.get_text().strip()]
    assert sizes and min(sizes) >= 10


def test_dial_figure_draws_the_closed_form_weights() -> None:
    fig = dial_figure(8)
    left, right = fig.axes
    curves = {line.get_label(): line for line in left.get_lines()}
    # 0/1 rewards: GRPO's weight is σ = sqrt(p̂(1 − p̂)), Dr. GRPO's σ² (DESIGN §3)
    x, y = curves["GRPO"].get_data()
    np.testing.assert_allclose(y, np.sqrt(x * (1 - x)), atol=1e-15)
    x, y = curves["Dr. GRPO"].get_data()
    np.testing.assert_allclose(y, x * (1 - x), atol=1e-15)
    heights = [bar.get_height() for bar in right.patches]
    assert len(heights) == 3 * 9  # three recipes, G + 1 groups
    k = np.arange(9)
    np.testing.assert_allclose(heights[:9], np.sqrt(k * (8 - k)) / 8, atol=1e-15)  # GRPO
    np.testing.assert_allclose(heights[9:18], k * (8 - k) / 64, atol=1e-15)  # Dr. GRPO
    np.testing.assert_allclose(heights[18:], np.sqrt(k * (8 - k)) / 8, atol=1e-15)  # DAPO: ±1 rewards cancel
    _check_legible(fig)
    plt.close(fig)


def test_mean_abs_advantage_figure_dots_sit_on_twice_the_weight() -> None:
    fig = mean_abs_advantage_figure(8)
    ax = fig.axes[0]
    dots = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert len(dots) == 2
    for line, weight in zip(dots, (lambda p: np.sqrt(p * (1 - p)), lambda p: p * (1 - p))):
        x, y = line.get_data()
        np.testing.assert_allclose(y, 2 * weight(x), atol=1e-12)  # mean |A| = 2σ (GRPO), 2σ² (Dr. GRPO)
    _check_legible(fig)
    plt.close(fig)


def test_identity_errors_figure_has_one_bar_per_group_and_comparison() -> None:
    errors = {"a": [1e-15, 2e-15], "b": [0.5, 1.0]}
    fig = identity_errors_figure(errors, [1, 2])
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    assert sorted(bar.get_height() for bar in ax.patches) == sorted(errors["a"] + errors["b"])
    _check_legible(fig)
    plt.close(fig)


def test_drift_figure_plots_the_median_per_step() -> None:
    steps = np.repeat([0, 1, 2], 3)
    study = {
        "step": steps,
        "group": np.tile([0, 1, 2], 3),
        "tokens": np.full(9, 10),
        "clipped": np.array([0, 0, 0, 0, 0.1, 0, 0.2, 0.3, 0.1]),
        "clipped_high": np.zeros(9),
        "rel_error": np.array([0, 0, 0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.9]),
        "ratio_error": np.array([0, 0, 0, 0.1, 0.1, 0.1, 0.2, 0.2, 0.2]),
        "clip_error": np.zeros(9),
        "norm_ratio": np.ones(9),
    }
    fig = drift_figure(study)
    total = fig.axes[0].get_lines()[0]
    np.testing.assert_allclose(total.get_ydata(), [0.0, 0.2, 0.5])
    _check_legible(fig)
    plt.close(fig)
