"""Chapter 1's first figure draws σ = sqrt(k(G − k))/G and σ² for every k of G, read back from its bars."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from stddial_book.presentation.intuition import step_scale_figure, step_scales
from stddial_book.presentation.style import RECIPE_COLORS, TYPE_SIZES


def closed_form(k: int, G: int) -> float:
    return math.sqrt(k * (G - k)) / G


def bars(fig: plt.Figure) -> dict[str, list[tuple[float, float]]]:
    """Recipe label -> (bar centre, height) of each bar, as drawn."""
    (ax,) = fig.axes
    return {
        container.get_label(): [(p.get_x() + p.get_width() / 2, p.get_height()) for p in container.patches]
        for container in ax.containers
    }


def drawn_height(fig: plt.Figure, label: str, k: int) -> float:
    return bars(fig)[label][k][1]


@pytest.mark.parametrize("G", [8, 4, 5])
def test_bars_are_the_closed_form(G: int) -> None:
    fig = step_scale_figure(G)
    drawn = bars(fig)
    assert sorted(drawn) == ["Dr. GRPO: σ²", "GRPO: σ"]
    for label, power in (("GRPO: σ", 1), ("Dr. GRPO: σ²", 2)):
        centres, heights = zip(*drawn[label])
        assert np.round(centres).astype(int).tolist() == list(range(G + 1))
        expected = [closed_form(k, G) ** power for k in range(G + 1)]
        np.testing.assert_allclose(heights, expected, rtol=1e-12, atol=1e-15)
    plt.close(fig)


def test_std_from_the_rewards_is_the_closed_form() -> None:
    scales = step_scales(8)
    expected = np.array([closed_form(k, 8) for k in range(9)])
    np.testing.assert_allclose(scales["sigma"], expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(scales["GRPO"], scales["sigma"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(scales["Dr. GRPO"], scales["sigma"] ** 2, rtol=1e-12, atol=1e-15)


def test_silent_ends_are_marked() -> None:
    fig = step_scale_figure(8)
    (ax,) = fig.axes
    (marks,) = [line for line in ax.get_lines() if line.get_marker() == "x"]
    assert marks.get_xdata().tolist() == [0, 8] and marks.get_ydata().tolist() == [0, 0]
    labels = [(text.get_text(), text.xy[0]) for text in ax.texts]
    assert labels == [("silent", 0), ("silent", 8)]
    assert drawn_height(fig, "GRPO: σ", 0) == 0.0 and drawn_height(fig, "GRPO: σ", 8) == 0.0
    plt.close(fig)


def test_book_colours_and_phone_legible_type() -> None:
    fig = step_scale_figure(8)
    (ax,) = fig.axes
    for container in ax.containers:
        recipe = container.get_label().split(":")[0]
        assert {tuple(p.get_facecolor()) for p in container.patches} == {
            matplotlib.colors.to_rgba(RECIPE_COLORS[recipe])
        }
    width, _ = fig.get_size_inches()
    assert width <= 7.0  # narrow: shown near full size in the column, and at half size on a phone
    assert all(t.get_fontsize() > TYPE_SIZES["ticks"] for t in ax.get_xticklabels())
    assert ax.xaxis.label.get_fontsize() > TYPE_SIZES["label"] and ax.yaxis.label.get_fontsize() > TYPE_SIZES["label"]
    assert all(t.get_fontsize() > TYPE_SIZES["legend"] for t in [*ax.get_legend().get_texts(), *ax.texts])
    assert len(ax.containers) == 2 and len(ax.get_legend().get_texts()) == 2  # few elements
    plt.close(fig)
