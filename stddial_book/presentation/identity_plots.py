"""The dial and identity figures (matplotlib): the recipes' update weights (chapter 1), mean |A|
against 2w (chapter 3), and the identity on real gradients with its drift over Adam steps
(chapter 4). Each function returns a Figure computed from the package; the training-run figures
of chapters 9-13 are in :mod:`stddial_book.presentation.plots`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from stddial_book.presentation.style import RECIPE_COLORS, STACKED_WIDTH, TYPE_SIZES, legible
from stddial_book.theory.identity import update_weight
from stddial_book.theory.recipes import DAPO, DR_GRPO, GRPO, PRESETS, RECIPES, Recipe, group_advantages

__all__ = ["dial_figure", "mean_abs_advantage_figure", "identity_errors_figure", "drift_figure"]


def dial_figure(group_size: int = 8) -> plt.Figure:
    """Chapter 1: how strongly each recipe weights a group, as a function of its pass rate.

    Top: the update weight w(p̂) of GRPO (σ), Dr. GRPO (σ²) and DAPO (σ on mixed groups; the
    silent groups at p̂ = 0 and 1 are discarded and replaced). Bottom: the same weights for the
    G + 1 possible groups of size G, ``group_size`` (8 by default). The panels are stacked, six inches
    wide, so that their labels stay legible on a phone (at a 390 px screen the figure is shown at about
    0.6 of its size).
    """
    grid = np.linspace(0.0, 1.0, 401)
    ks = np.arange(group_size + 1)
    rates = ks / group_size
    fig, (left, right) = plt.subplots(2, 1, figsize=(6.0, 7.2), constrained_layout=True)
    # DAPO's curve is GRPO's: drawn dashed and thinner on top of it, so that both stay visible
    for recipe, style, width in ((GRPO, "-", 4), (DR_GRPO, "-", 2), (DAPO, "--", 2)):
        color = RECIPE_COLORS[recipe.name]
        left.plot(grid, update_weight(grid, recipe), style, color=color, label=recipe.name, lw=width)
    silent = np.array([0.0, 1.0])
    left.plot(silent, np.zeros(2), "x", color=RECIPE_COLORS["DAPO"], ms=10, mew=2, label="silent: DAPO discards")
    left.set(
        xlabel=r"group pass rate $\hat p = k/G$",
        ylabel=r"update weight $w$",
        title=r"group update $= w\,(\bar g_+ - \bar g_-)$",
    )
    left.legend(frameon=False, loc="lower center")
    width = 0.27
    for offset, recipe in zip((-width, 0.0, width), (PRESETS[key] for key in RECIPES)):
        weights = update_weight(rates, recipe)
        right.bar(ks + offset, weights, width=width, color=RECIPE_COLORS[recipe.name], label=recipe.name)
    right.set(
        xlabel=f"correct samples k of G = {group_size}",
        ylabel=r"update weight $w$",
        title=f"the {group_size + 1} possible groups of {group_size} samples",
        xticks=ks,
    )
    for k_silent in (0, group_size):
        right.annotate(
            "silent",
            (k_silent, 0.0),
            xytext=(0, 12),
            textcoords="offset points",
            ha="center",
            fontsize=TYPE_SIZES["legend"],
        )
    return legible(fig)


def mean_abs_advantage_figure(group_size: int = 8, recipes: tuple[Recipe, ...] = (GRPO, DR_GRPO)) -> plt.Figure:
    """Chapter 3: mean |A| measured from :func:`group_advantages` (dots) against 2w (lines).

    ``group_size`` is the G of the measured groups (8 by default), one for each k = 0..G; ``recipes`` are
    the :class:`~stddial_book.theory.recipes.Recipe` objects drawn (GRPO and Dr. GRPO by default).
    """
    ks = np.arange(group_size + 1)
    grid = np.linspace(0.0, 1.0, 401)
    fig, ax = plt.subplots(figsize=(6, 3.6), constrained_layout=True)
    for recipe in recipes:
        color = RECIPE_COLORS.get(recipe.name, None)
        rewards = (np.arange(group_size)[None, :] < ks[:, None]).astype(float).reshape(-1)
        measured = np.abs(group_advantages(rewards, group_size, recipe)).reshape(-1, group_size).mean(1)
        ax.plot(grid, 2 * update_weight(grid, recipe), color=color, lw=2, label=f"{recipe.name}: closed form 2w")
        ax.plot(
            ks / group_size,
            measured,
            "o",
            color=color,
            ms=7,
            mfc="white",
            mew=2,
            label=f"{recipe.name}: group_advantages",
        )
    ax.set(xlabel=r"group pass rate $\hat p = k/G$", ylabel=r"mean $|A_i|$", title=f"G = {group_size}")
    ax.legend(frameon=False, loc="lower center")
    return legible(fig)


def identity_errors_figure(errors: dict[str, list[float]], ks: list[int]) -> plt.Figure:
    """Chapter 4: relative error of the identity on real gradients, per group, log scale.

    ``errors`` maps each comparison's label to its relative errors, one per group, in the order of ``ks``,
    the groups' numbers k of correct samples (one bar group per k).
    """
    fig, ax = plt.subplots(figsize=(8, 3.6), constrained_layout=True)
    width = 0.8 / len(errors)
    x = np.arange(len(ks))
    for i, (label, values) in enumerate(errors.items()):
        ax.bar(x + (i - (len(errors) - 1) / 2) * width, values, width=width, label=label)
    ax.set_yscale("log")
    ax.set(
        xticks=x,
        xticklabels=[f"k = {k}" for k in ks],
        ylabel="relative error",
        title=r"gradient of the loss against $w\,(\bar g_+ - \bar g_-)$, one group per $k$",
    )
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=len(errors))
    return legible(fig)


def drift_figure(study: dict[str, np.ndarray]) -> plt.Figure:
    """Chapter 4: per minibatch step, how far group updates stray from the identity, and why.

    Top: median over groups (band: the middle half) of the total deviation and of the part the
    ratio alone causes (clip switched off), with the share of tokens clipped on the x labels.
    Bottom: each group's deviation against the share of its own tokens clipped. The panels stack,
    so that their labels stay legible on a phone. ``study`` is the dict of columns
    :func:`stddial_book.rl.gradcheck.drift_study` returns.
    """
    from stddial_book.rl.gradcheck import drift_summary

    summary = drift_summary(study)
    steps = np.array([row["step"] for row in summary])
    return legible(_drift_axes(study, summary, steps))


def _drift_axes(study: dict[str, np.ndarray], summary: list[dict[str, float]], steps: np.ndarray) -> plt.Figure:
    # stacked, STACKED_WIDTH wide: labels stay at 9 px or more on a phone
    fig, axes = plt.subplots(2, 1, figsize=(STACKED_WIDTH, 7.4), constrained_layout=True)
    ax = axes[0]
    top = 0.0
    for key, label, color in (
        ("rel_error", "clipped loss (what training uses)", "k"),
        ("ratio_error", "same loss, clip switched off", "0.55"),
    ):
        values = [study[key][study["step"] == s] for s in steps]
        upper = [np.percentile(v, 75) for v in values]
        top = max(top, *upper)
        ax.plot(steps, [np.median(v) for v in values], "o-", color=color, label=label)
        ax.fill_between(steps, [np.percentile(v, 25) for v in values], upper, color=color, alpha=0.15, lw=0)
    ax.set_ylim(0, 1.45 * top)  # headroom: the legend sits above the bands
    ax.set_xticks(steps, [f"{s}\n{row['clipped']:.0%}" for s, row in zip(steps, summary)])
    ax.set(
        xlabel="Adam steps (below: tokens clipped)", ylabel="deviation from the identity", title="median over groups"
    )
    ax.legend(frameon=False, loc="upper left")
    ax = axes[1]
    cmap = plt.get_cmap("viridis")
    moved = study["step"] > 0
    points = ax.scatter(
        100 * study["clipped"][moved],
        study["rel_error"][moved],
        c=study["step"][moved],
        cmap=cmap,
        s=22,
        vmin=1,
        vmax=steps.max(),
    )
    fig.colorbar(points, ax=ax, label="Adam steps", ticks=steps[1:])
    ax.set(xlabel="tokens of the group clipped (%)", ylabel="deviation", title="one point per group and step")
    return fig
