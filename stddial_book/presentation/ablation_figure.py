"""Chapter 13's figure of the dial-only ablation: every planned contrast with its intervals."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from stddial_book.presentation.style import _legible

__all__ = ["ablation_figure"]

_CONTRAST_STYLE = {
    "divide-no_divide": ("divide − no_divide (the division)", "#1f77b4", "o"),
    "filter-divide": ("filter − divide (DAPO's filter)", "#2ca02c", "s"),
}
_PANELS = {"hardest_quartile": "hardest quartile, final pool accuracy", "heldout": "held-out accuracy (transfer)"}


@_legible
def ablation_figure(summary: dict) -> plt.Figure:
    """One row per cell of the design, one panel per measure: each contrast's difference of means
    (marker), its 95% bootstrap interval (thick) and its family-wise interval at 1 − α/m (thin),
    with the cell's minimum detectable effect of the division marked (±, grey ticks). A contrast
    that is beyond noise (:func:`stddial_book.experiments.ablation_report.detected`) is filled,
    the others hollow. The bottom row pools each contrast over the cells
    (:func:`~stddial_book.experiments.ablation_report.pooled_contrasts`, exploratory), with its
    family-wise interval."""
    from stddial_book.experiments.ablation_report import cell_order, cell_words, detected, pooled_contrasts

    order = cell_order(summary)
    pooled = pooled_contrasts(summary)
    rows = len(order) + 1  # the cells, then the pooled row at the bottom
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 0.55 * rows + 2.2), sharey=True, constrained_layout=True)
    for ax, (measure, title) in zip(axes, _PANELS.items()):
        ax.axvline(0.0, color="0.4", lw=1)
        ax.axhline(0.5, color="0.8", lw=1)
        for offset, (contrast, (_label, color, marker)) in zip((0.17, -0.17), _CONTRAST_STYLE.items()):
            result = pooled.get(f"{contrast}/{measure}")
            if result is not None:
                ax.plot(result["ci_family"], [offset] * 2, color=color, lw=1.2)
                filled = detected(result, summary["alpha"])
                ax.plot(
                    result["difference"],
                    offset,
                    marker,
                    ms=7,
                    color=color,
                    markerfacecolor=color if filled else "white",
                )
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
    axes[0].set_yticks(range(rows), ["pooled (exploratory)"] + [cell_words(k) for k in reversed(order)])
    axes[0].set_ylim(-0.7, rows - 0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, frameon=False)
    return fig
