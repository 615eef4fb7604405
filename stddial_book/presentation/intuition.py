"""Chapter 1's first figure: how long one step on a prompt is, for each number k of correct samples.

One GRPO step on a prompt is exactly σ (ḡ₊ − ḡ₋), one Dr. GRPO step σ² (ḡ₊ − ḡ₋), with
σ = sqrt(k(G − k))/G the std of the group's 0/1 rewards: the direction ḡ₊ − ḡ₋ (correct samples'
mean score minus the wrong ones') is the same, only its scale differs. The figure draws the two
scales as bars over k = 0..G and marks the silent groups at both ends. It is drawn narrow, with
large type and few elements, so that it stays readable on a phone's screen.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from stddial_book.presentation.style import RECIPE_COLORS, TYPE_SIZES
from stddial_book.theory.identity import group_std, update_weight
from stddial_book.theory.recipes import DR_GRPO, GRPO

__all__ = ["step_scales", "step_scale_figure", "PHONE_TYPE_SCALE"]

#: How much larger than the book's :data:`~stddial_book.presentation.style.TYPE_SIZES` this
#: figure's type is: it is 6.4 inches wide (shown at about full size in the text column, at about
#: half size on a 390 px phone screen), so its tick labels stay near the body text's size there.
PHONE_TYPE_SCALE = 1.35


def step_scales(group_size: int = 8) -> dict[str, np.ndarray]:
    """For k = 0..G correct samples: ``k``, the group's std ``sigma`` (from the rewards themselves),
    and the scale by which each recipe multiplies ḡ₊ − ḡ₋ (``GRPO``: σ, ``Dr. GRPO``: σ²), from
    :func:`~stddial_book.theory.identity.update_weight`. ``group_size`` is G (8 by default)."""
    ks = np.arange(group_size + 1)
    rewards = (np.arange(group_size)[None, :] < ks[:, None]).astype(float)  # k ones, then G − k zeros
    rates = ks / group_size
    return {
        "k": ks,
        "sigma": np.asarray(group_std(rewards)),
        GRPO.name: np.asarray(update_weight(rates, GRPO)),
        DR_GRPO.name: np.asarray(update_weight(rates, DR_GRPO)),
    }


def step_scale_figure(group_size: int = 8) -> plt.Figure:
    """Bars of GRPO's step scale σ and Dr. GRPO's σ² for every k of G; the silent ends (k = 0 and
    k = G, where σ = 0 and no recipe moves) marked with a cross and labelled.

    ``group_size`` is G (8 by default). The bar containers carry the recipes' names as labels, so a
    test can read the plotted heights back (``ax.containers``)."""
    scales = step_scales(group_size)
    ks = scales["k"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2), constrained_layout=True)
    width = 0.4
    for offset, recipe, power in ((-width / 2, GRPO, "σ"), (width / 2, DR_GRPO, "σ²")):
        ax.bar(
            ks + offset,
            scales[recipe.name],
            width=width,
            color=RECIPE_COLORS[recipe.name],
            label=f"{recipe.name}: {power}",
        )
    silent = np.array([0, group_size])
    ax.plot(silent, np.zeros(2), "x", color="black", ms=12, mew=3, label="_silent", clip_on=False)
    for k in silent:
        ax.annotate("silent", (k, 0.0), xytext=(0, 14), textcoords="offset points", ha="center")
    ax.set(
        xlabel=f"correct samples k of G = {group_size}",
        ylabel="scale of the step",
        title=r"one step $=$ scale $\times\ (\bar g_{+} - \bar g_{-})$",
        xticks=ks,
        ylim=(0.0, 0.65),
    )
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(frameon=False, loc="upper right")
    return _phone_type(fig)


def _phone_type(fig: plt.Figure) -> plt.Figure:
    """The book's type sizes scaled by :data:`PHONE_TYPE_SCALE`, annotations at the legend's size."""
    sizes = {name: size * PHONE_TYPE_SCALE for name, size in TYPE_SIZES.items()}
    for ax in fig.axes:
        ax.title.set_fontsize(sizes["title"])
        ax.xaxis.label.set_fontsize(sizes["label"])
        ax.yaxis.label.set_fontsize(sizes["label"])
        ax.tick_params(labelsize=sizes["ticks"])
        for text in ax.texts:
            text.set_fontsize(sizes["legend"])
        legend = ax.get_legend()
        if legend is not None:
            for text in legend.get_texts():
                text.set_fontsize(sizes["legend"])
    return fig
