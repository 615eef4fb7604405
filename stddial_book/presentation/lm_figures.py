"""Chapter 15's figures of the recorded SmolLM2 runs (:mod:`stddial_book.experiments.smollm2.study`'s summary).

Panels are stacked in one column of :data:`~stddial_book.presentation.style.STACKED_WIDTH` inches, so that
their labels stay legible on a phone.
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from stddial_book.bridges.lm_diagnostics import PASS_RATE_BANDS, band_counts
from stddial_book.experiments.smollm2.study import group_sigmas, sigma_shares
from stddial_book.presentation.style import RECIPE_COLORS, RECIPE_NAMES, STACKED_WIDTH, legible

__all__ = ["lm_learning_figure", "lm_dial_figure", "lm_sigma_figure", "lm_pilot_figure"]


def _by_recipe(study: dict[str, Any], curve: str) -> dict[str, np.ndarray]:
    """recipe -> (seeds, steps) array of one per-step curve."""
    out = {}
    for recipe in study["recipes"]:
        rows = [run["curves"][curve] for run in study["runs"] if run["recipe"] == recipe]
        out[recipe] = np.array(rows, float)
    return out


def _band(ax: Any, values: np.ndarray, color: str, label: str, style: str = "-") -> None:
    """The seeds' mean per step, with the band from the lowest to the highest seed."""
    steps = np.arange(1, values.shape[1] + 1)
    ax.plot(steps, values.mean(axis=0), style, color=color, label=label, lw=2)
    ax.fill_between(steps, values.min(axis=0), values.max(axis=0), color=color, alpha=0.18, lw=0)


def lm_learning_figure(study: dict[str, Any]) -> plt.Figure:
    """Top: the batch pass rate per step (mean over seeds, band from lowest to highest seed). Bottom: the
    mean completion length, with the cap on new tokens dashed. ``study`` is the runs' summary,
    as :func:`stddial_book.experiments.smollm2.study.load_study` returns it."""
    fig, axes = plt.subplots(2, 1, figsize=(STACKED_WIDTH, 6.4), sharex=True, constrained_layout=True)
    for recipe, values in _by_recipe(study, "pass_rate").items():
        _band(axes[0], values, RECIPE_COLORS[RECIPE_NAMES[recipe]], RECIPE_NAMES[recipe])
    for recipe, values in _by_recipe(study, "mean_length").items():
        _band(axes[1], values, RECIPE_COLORS[RECIPE_NAMES[recipe]], RECIPE_NAMES[recipe])
    cap = study["max_new_tokens"]
    axes[1].axhline(cap, color="0.4", ls="--", lw=1)
    axes[1].text(study["steps"], cap - 1.0, f"the cap, {cap} tokens", ha="right", va="top", color="0.3", fontsize=10)
    seeds = len(study["seeds"])
    axes[0].set(ylabel="batch pass rate", ylim=(0, 1.02), title=f"Reward per step ({seeds} seeds: mean and range)")
    axes[1].set(xlabel="optimizer step", ylabel="mean completion tokens", ylim=(0, cap + 2))
    axes[0].legend(loc="lower right")
    return legible(fig)


def lm_dial_figure(study: dict[str, Any], predicted: dict[str, float]) -> plt.Figure:
    """Top and middle: the share of groups silent because all G completions failed, and because all passed,
    per step (mean and range over seeds), each with what the base model's measured pool predicts for the first
    step (a diamond at step 1; ``predicted["wrong"]``, ``predicted["right"]``). Bottom: each recipe's share of
    Σ|A| by the group's pass-rate band, labelled by the counts k of G right it holds, averaged over the steps
    that had any. ``study`` is the runs' summary (as
    :func:`stddial_book.experiments.smollm2.study.load_study` returns it); ``predicted`` maps ``"wrong"``
    and ``"right"`` to the predicted shares, fractions in [0, 1]."""
    fig, axes = plt.subplots(3, 1, figsize=(STACKED_WIDTH, 8.6), constrained_layout=True)
    curves = {"wrong": _by_recipe(study, "silent_wrong"), "right": _by_recipe(study, "silent_right")}
    G = study["group_size"]
    titles = {
        "wrong": f"Groups silent because all G = {G} failed",
        "right": f"Groups silent because all G = {G} passed",
    }
    for ax, side in zip(axes, ("wrong", "right")):
        for recipe in study["recipes"]:
            _band(ax, curves[side][recipe], RECIPE_COLORS[RECIPE_NAMES[recipe]], RECIPE_NAMES[recipe])
        ax.plot([1], [predicted[side]], "D", color="0.15", ms=8, zorder=5, label="predicted for step 1")
        ax.set(xlabel="optimizer step", ylabel="share of groups", ylim=(0, 1.02), title=titles[side])
    axes[0].legend(loc="upper right")
    edges = study["bands"]
    if list(edges) != list(PASS_RATE_BANDS):
        raise ValueError(f"the summary's mass bands {edges} are not the callback's {list(PASS_RATE_BANDS)}.")
    width = 0.8 / len(study["recipes"])
    for i, recipe in enumerate(study["recipes"]):
        mass = np.mean([run["mass_by_band"] for run in study["runs"] if run["recipe"] == recipe], axis=0)
        x = np.arange(len(mass)) + (i - (len(study["recipes"]) - 1) / 2) * width
        axes[2].bar(x, mass, width=width, color=RECIPE_COLORS[RECIPE_NAMES[recipe]], label=RECIPE_NAMES[recipe])
    axes[2].set_xticks(range(len(edges) - 1), _band_labels(G))
    top = max(bar.get_height() for bar in axes[2].patches)
    axes[2].set(
        xlabel=f"the group's count of right answers, of G = {G}",
        ylabel="share of Σ|A|",
        title="Where each update's mass sat",
    )
    axes[2].set_ylim(0, top * 1.35)  # room for the legend above the bars
    axes[2].legend(ncol=len(study["recipes"]), loc="upper center")
    return legible(fig)


def _band_labels(G: int) -> list[str]:
    """Each pass-rate band of the mass panel as the counts k of G right it holds (the callback's own bands)."""
    return [f"k = {lo}" if lo == hi else f"k = {lo}–{hi}" if lo >= 0 else "none" for lo, hi in band_counts(G)]


def lm_sigma_figure(study: dict[str, Any], window: int = 10) -> plt.Figure:
    """The distribution of σ over the groups of the first and of the last ``window`` steps: for each recipe
    (all its seeds pooled), the share of groups at each value of σ = sqrt(k(G − k))/G, σ = 0 being the
    silent groups. ``study`` is the runs' summary with each run's per-step ``k_counts``; ``window`` must be
    at least 1 and at most half the shortest run, so that the two panels do not overlap."""
    shortest = min(len(run["k_counts"]) for run in study["runs"])
    if not 1 <= window <= shortest // 2:
        raise ValueError(f"window={window}: give 1 to {shortest // 2}, half the shortest run ({shortest} steps).")
    recipes = study["recipes"]
    G = study["group_size"]
    sigmas = sorted(set(group_sigmas(G)))
    fig, axes = plt.subplots(2, 1, figsize=(STACKED_WIDTH, 6.4), sharex=True, sharey=True, constrained_layout=True)
    width = 0.8 / len(recipes)
    for ax, (title, part) in zip(
        axes, ((f"The first {window} steps", slice(0, window)), (f"The last {window} steps", slice(-window, None)))
    ):
        for i, recipe in enumerate(recipes):
            rows = [row for run in study["runs"] if run["recipe"] == recipe for row in run["k_counts"][part]]
            shares = sigma_shares(rows)
            x = np.arange(len(sigmas)) + (i - (len(recipes) - 1) / 2) * width
            ax.bar(x, [shares[sigma] for sigma in sigmas], width=width, color=RECIPE_COLORS[RECIPE_NAMES[recipe]],
                   label=RECIPE_NAMES[recipe])  # fmt: skip
        ax.set(ylabel="share of groups", ylim=(0, 1.02), title=title)
    axes[1].set_xticks(range(len(sigmas)), [f"{sigma:.2f}" for sigma in sigmas])
    axes[1].set(xlabel="the group's σ (0: silent)")
    axes[0].legend(ncol=len(recipes), loc="upper right")
    return legible(fig)


def lm_pilot_figure(study: dict[str, Any]) -> plt.Figure:
    """Each piloting recipe's batch pass rate per step at each learning rate (one panel a recipe, stacked),
    the chosen rate drawn thick and the rule's window shaded; the title names the pilots' seed where the
    summary records it (``pilot_seeds``).

    ``study`` is the runs' summary, as :func:`stddial_book.experiments.smollm2.study.load_study` returns it:
    its ``pilots`` (every recipe that piloted its own rate), else the first plan's GRPO ``pilot``.
    """
    pilots = study.get("pilots") or {"grpo": study["pilot"]}
    pilots = {r: pilots[r] for r in sorted(pilots, key=list(RECIPE_NAMES).index)}  # GRPO, Dr. GRPO, DAPO
    named = study.get("pilot_seeds") or []
    seeds = f", seed{'s' if len(named) > 1 else ''} {', '.join(map(str, named))}" if named else ""
    fig, axes = plt.subplots(len(pilots), 1, figsize=(STACKED_WIDTH, 0.4 + 3.0 * len(pilots)), sharex=True,
                             squeeze=False, constrained_layout=True)  # fmt: skip
    for ax, (recipe, pilot) in zip(axes[:, 0], pilots.items()):
        curves = pilot["curves"]
        shades = plt.cm.viridis(np.linspace(0.1, 0.8, len(curves)))
        for (rate, curve), shade in zip(sorted(curves.items(), key=lambda kv: float(kv[0])), shades):
            chosen = float(rate) == pilot["chosen"]
            ax.plot(range(1, len(curve) + 1), curve, color=shade, lw=2.5 if chosen else 1.3,
                    label=f"lr {float(rate):g}" + (" (chosen)" if chosen else ""))  # fmt: skip
        steps = len(next(iter(curves.values())))
        ax.axvspan(steps - pilot["window"] + 0.5, steps + 0.5, color="0.85", zorder=0)
        ax.set(ylabel="batch pass rate", ylim=(0, 1.02), title=f"{RECIPE_NAMES[recipe]} pilot{seeds}")
        ax.legend(loc="upper left")
    axes[-1, 0].set(xlabel="optimizer step")
    return legible(fig)
