"""The figure of ``python -m stddial_book diagnose``: a pool's silent groups, DAPO's refill cost and its gradient
mass by tenth of p, stacked in one narrow column so that it reads on a phone; and the writer of ``--out``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from stddial_book.core.outdir import check_claimable, claim_dir
from stddial_book.presentation.style import RECIPE_COLORS, legible_figure

__all__ = ["diagnose_figure", "write_diagnosis", "DIAGNOSIS_FILES"]

#: The files ``write_diagnosis`` puts into its output directory (it refuses to replace any of them).
DIAGNOSIS_FILES = ("diagnose.png", "diagnose.json", "diagnose.txt")


@legible_figure
def diagnose_figure(report: dict) -> plt.Figure:
    """Three panels from :func:`stddial_book.experiments.diagnose.report.diagnose`'s dict: silent fraction by G (closed form
    and subsampled), DAPO's draws per kept group by G, and each recipe's gradient mass by tenth of p. ``report`` is
    that dict."""
    if not isinstance(report, dict) or "silent_fraction" not in report:
        raise TypeError("report must be the dict stddial_book.experiments.diagnose.report.diagnose returns.")
    fig, axes = plt.subplots(3, 1, figsize=(5.0, 10.5), layout="constrained")
    sizes = report["group_sizes"]
    g_star = report["group_size_law"]["G_star"]
    _silent_panel(axes[0], report, sizes)
    _draws_panel(axes[1], report, sizes)
    for ax in axes[:2]:
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(g) for g in sizes])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        if g_star is not None and sizes[0] <= g_star <= sizes[-1]:
            ax.axvline(g_star, color="0.4", linestyle=":", linewidth=1.5)
    if g_star is not None and sizes[0] <= g_star <= sizes[-1]:
        eps = report["group_size_law"]["epsilon"]
        axes[0].annotate(
            f"G* = {g_star:.0f}\n(ε = {eps:g})", (g_star, 0.97), xycoords=("data", "axes fraction"), va="top", ha="left"
        )
    _mass_panel(axes[2], report["gradient_mass_by_decile"])
    pool = report["pool"]
    fig.suptitle(f"{Path(str(pool['name'])).name}: {pool['prompts']:,} prompts", fontsize=12)
    return fig


def _silent_panel(ax, report: dict, sizes: list[int]) -> None:
    closed = [100 * report["silent_fraction"][str(g)] for g in sizes]
    ax.plot(sizes, closed, "o-", color="black", label="closed form, p = k/n")
    sub = [(g, report["silent_fraction_subsampled"][str(g)]) for g in sizes]
    sub = [(g, 100 * v) for g, v in sub if v is not None]
    if sub:
        ax.plot(*zip(*sub), "s", markerfacecolor="none", markersize=10, color="#d62728", label="subsampled from n")
    ax.set_ylim(0, 100)
    ax.set_ylabel("silent groups (%)")
    ax.set_xlabel("group size G")
    ax.legend(loc="lower left")


def _draws_panel(ax, report: dict, sizes: list[int]) -> None:
    draws = [(g, report["dapo_draws_per_kept_group"][str(g)]) for g in sizes]
    draws = [(g, v) for g, v in draws if v is not None]
    if draws:
        ax.plot(*zip(*draws), "o-", color=RECIPE_COLORS["DAPO"])
        ax.set_ylim(1, max(1.1, 1.05 * max(v for _, v in draws)))
    if len(draws) < len(sizes):
        ax.text(
            0.5,
            0.5,
            "where no point is drawn, every\ngroup is silent: the refill\nnever fills a batch",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="0.3",
        )
        ax.set_xlim(sizes[0] / 1.3, sizes[-1] * 1.3)
    ax.set_ylabel("DAPO: groups drawn\nper group kept")
    ax.set_xlabel("group size G")


def _mass_panel(ax, mass: dict) -> None:
    x = np.arange(10)
    width = 0.4
    ax.bar(x - width / 2, 100 * np.asarray(mass["GRPO"]), width, color=RECIPE_COLORS["GRPO"], label="GRPO, DAPO")
    ax.bar(x + width / 2, 100 * np.asarray(mass["Dr. GRPO"]), width, color=RECIPE_COLORS["Dr. GRPO"], label="Dr. GRPO")
    ax.step(x, 100 * np.asarray(mass["prompts"]), where="mid", color="0.5", linestyle="--", label="prompts")
    ax.set_xticks(x, [f"{i / 10:.1f}".lstrip("0") if i else "0" for i in x])
    ax.set_xlabel("solve rate p (tenth, from its left edge)")
    ax.set_ylabel("share (%)")
    ax.set_title("gradient budget (G → ∞) by tenth of p")
    ax.legend(loc="upper center")
    ax.grid(axis="y", alpha=0.3)


def write_diagnosis(report: dict, out: str | os.PathLike, text: str | None = None) -> list[Path]:
    """Write the figure, the report as JSON and (if given) the text into ``out``, a directory the tool claims
    (:func:`stddial_book.core.outdir.claim_dir`: new, empty, or marked by the tool). Nothing is replaced: a
    directory already holding one of :data:`DIAGNOSIS_FILES` is refused before anything is written. ``report`` is
    the dict :func:`stddial_book.experiments.diagnose.report.diagnose` returns; ``text`` is the report as text,
    written to ``diagnose.txt`` (None, the default: no text file). Returns the paths written."""
    directory = check_claimable(out, "--out")
    taken = [name for name in DIAGNOSIS_FILES if (directory / name).exists() or (directory / name).is_symlink()]
    if taken:
        raise ValueError(f"--out {directory} already holds {taken[0]}; nothing was changed: choose a new --out.")
    fig = diagnose_figure(report)
    try:
        body = json.dumps(report, indent=2, allow_nan=False) + "\n"
        directory = claim_dir(directory, "diagnose")
        written = [directory / DIAGNOSIS_FILES[0], directory / DIAGNOSIS_FILES[1]]
        with open(written[0], "xb") as handle:  # "x": never replace a file
            fig.savefig(handle, format="png", dpi=100)
        with open(written[1], "x") as handle:
            handle.write(body)
        if text is not None:
            written.append(directory / DIAGNOSIS_FILES[2])
            with open(written[2], "x") as handle:
                handle.write(text)
    finally:
        plt.close(fig)
    return written
