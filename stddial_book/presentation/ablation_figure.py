"""Chapter 13's figure of the dial-only ablation: every planned contrast with its intervals."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from stddial_book.presentation.style import STACKED_WIDTH, legible_figure

__all__ = ["ablation_figure"]

_CONTRAST_STYLE = {
    "divide-no_divide": ("divide − no_divide (the division)", "#1f77b4", "o"),
    "filter-divide": ("filter − divide (DAPO's filter)", "#2ca02c", "s"),
}
_POOLED = {"adamw": "AdamW", "sgd": "SGD", "all": "all: random effects"}
_PANELS = {"hardest_quartile": "hardest quartile, final pool accuracy", "heldout": "held-out accuracy (transfer)"}


@legible_figure
def ablation_figure(summary: dict) -> plt.Figure:
    """One row per cell of the design, one panel per measure (stacked, for a phone): each contrast's difference of means
    (marker), its 95% interval (thick) and its family-wise interval at 1 − α/m (thin), both Student t
    with Welch's degrees of freedom, with the cell's minimum detectable effect of the division marked
    (±, grey ticks). A contrast that is beyond noise
    (:func:`stddial_book.experiments.ablation.report.detected`) is filled, the others hollow. The
    bottom rows pool each contrast over the cells
    (:func:`~stddial_book.experiments.ablation.pooled.pooled_contrasts`, exploratory): within AdamW,
    within SGD, and over all cells by random effects, each with its family-wise interval. ``summary`` is the
    ablation study's summary dict, as
    :func:`~stddial_book.experiments.ablation.report.load_ablation_summary` returns it."""
    from stddial_book.experiments.ablation.pooled import GROUPS, pooled_contrasts
    from stddial_book.experiments.ablation.report import cell_order, cell_words, detected

    order = cell_order(summary)
    pooled = pooled_contrasts(summary)
    groups = [g for g in GROUPS if any(name.endswith(f"/{g}") for name in pooled)]
    rows = len(order) + len(groups)  # the cells, then the pooled rows at the bottom
    # the two panels stacked, STACKED_WIDTH wide: on a phone the figure is shown at about 0.6 of its
    # size, and the book's 11- to 13-point labels stay at 9 px or more (side by side, at 9.5 inches,
    # they came out at 6 to 7 px)
    fig, axes = plt.subplots(2, 1, figsize=(STACKED_WIDTH, 2 * (0.5 * rows + 1.1) + 0.6), constrained_layout=True)
    labels = [f"pooled, {_POOLED[g]}\n(exploratory)" for g in reversed(groups)]
    labels += [cell_words(k) for k in reversed(order)]
    for ax, (measure, title) in zip(axes, _PANELS.items()):
        ax.axvline(0.0, color="0.4", lw=1)
        ax.axhline(len(groups) - 0.5, color="0.8", lw=1)
        _draw_pooled(ax, pooled, groups, measure, summary["alpha"])
        for row, key in enumerate(order):
            y = rows - 1 - row
            for offset, (contrast, (label, color, marker)) in zip((0.17, -0.17), _CONTRAST_STYLE.items()):
                result = summary["cells"][key].get(contrast, {}).get(measure)
                if result is None:
                    continue
                if result.get("ci_family"):
                    ax.plot(result["ci_family"], [y + offset] * 2, color=color, lw=1.2)
                    ax.plot(result["ci95"], [y + offset] * 2, color=color, lw=3.5, solid_capstyle="butt")
                filled = detected(result, summary["alpha"])
                ax.plot(
                    result["difference"],
                    y + offset,
                    marker,
                    ms=7,
                    color=color,
                    markerfacecolor=color if filled else "white",
                    label=label if row == 0 else None,
                )
            mde = summary["cells"][key].get("divide-no_divide", {}).get(measure, {}).get("mde")
            if mde is not None and np.isfinite(mde):
                ax.plot([-mde, mde], [y + 0.17] * 2, "|", color="0.55", ms=11, mew=1.5)
        ax.set_title(title)
        ax.set_xlabel("difference of the arms' means")
        ax.grid(axis="x", color="0.9")
        ax.set_yticks(range(rows), labels)
        ax.set_ylim(-0.7, rows - 0.3)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=1, frameon=False)
    return fig


def _draw_pooled(ax, pooled: dict, groups: list[str], measure: str, alpha: float) -> None:
    """The pooled rows at the bottom of a panel: each contrast's estimate and family-wise interval."""
    from stddial_book.experiments.ablation.report import detected

    for y, group in enumerate(reversed(groups)):
        for offset, (contrast, (_label, color, marker)) in zip((0.17, -0.17), _CONTRAST_STYLE.items()):
            result = pooled.get(f"{contrast}/{measure}/{group}")
            if result is None:
                continue
            ax.plot(result["ci_family"], [y + offset] * 2, color=color, lw=1.2)
            filled = detected(result, alpha)
            ax.plot(
                result["estimate"], y + offset, marker, ms=7, color=color, markerfacecolor=color if filled else "white"
            )
