"""Figures of the source paper's results, recomputed by the package (chapters 5, 6 and 7)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from stddial_book.core.checks import check_int, to_numpy
from stddial_book.presentation.style import (
    RECIPE_COLORS,
    RECIPE_NAMES,
    STACKED_WIDTH,
    TYPE_SIZES,
    legible_figure,
    stacked_figure,
)
from stddial_book.theory.recipes import DR_GRPO, GRPO, RECIPES

__all__ = [
    "silent_probability_figure",
    "expected_weight_figure",
    "fidelity_figure",
    "objective_figure",
    "difficulty_weight_figure",
    "big_math_histogram_figure",
    "silent_by_group_size_figure",
    "budget_by_decile_figure",
    "dapo_allcorrect_figure",
    "controlled_silent_figure",
    "controlled_mass_figure",
    "controlled_quartile_figure",
    "pool_bands_figure",
    "pool_silent_figure",
    "pool_mass_figure",
]


_P_COLORS = {0.5: "#1b9e77", 0.3: "#7570b3", 0.1: "#d95f02", 0.05: "#e7298a"}


_DECILE_LABELS = [f"{lo / 10:.1f}–{(lo + 1) / 10:.1f}" for lo in range(10)]  # solve_rates.decile_of's tenths


_G_COLORS = {2: "#fdae61", 4: "#f46d43", 8: "#d73027", 16: "#74add1", 32: "#4575b4", 64: "#313695"}


def _g_color(group_size: int) -> str | None:
    return _G_COLORS.get(int(group_size))


def _group_sizes(group_sizes: object, name: str = "group_sizes") -> list[int]:
    """A non-empty list of group sizes G ≥ 1 to draw one curve each."""
    if (
        isinstance(group_sizes, (str, bytes, dict))
        or not isinstance(group_sizes, (list, tuple, np.ndarray))
        or len(group_sizes) == 0
    ):
        raise ValueError(
            f"{name} must be a non-empty list of group sizes, e.g. (2, 8, 64); got {type(group_sizes).__name__}."
        )
    return [check_int(g, f"each of {name}", minimum=1) for g in group_sizes]


def _values(values: object, name: str, size: int | None = None) -> np.ndarray:
    """A 1-D array of finite numbers (of ``size`` entries when given)."""
    arr = to_numpy(values, name)
    if arr.ndim != 1 or (size is not None and arr.size != size):
        raise ValueError(
            f"{name} must be 1-D{f' with {size} entries' if size is not None else ''}; got shape {arr.shape}."
        )
    return arr


def _check_named(mapping: object, name: str, what: str) -> dict:
    """A non-empty dict whose keys are strings (the legend's labels)."""
    if not isinstance(mapping, dict) or not mapping or not all(isinstance(k, str) for k in mapping):
        raise ValueError(
            f"{name} must be a non-empty dict of label -> {what}; got "
            f"{type(mapping).__name__ if not isinstance(mapping, dict) else 'an empty or unlabelled dict'}."
        )
    return mapping


#: What :func:`stddial_book.experiments.controlled.study.controlled_run_study` returns that chapter 8's figures read.
_CONTROLLED_KEYS = (
    "silent_measured/grpo",
    "silent_expected/grpo",
    "num_prompts",
    "decile_share/grpo",
    "decile_share/dr_grpo",
    "decile_share_closed/grpo",
    "decile_share_closed/dr_grpo",
    "quartile/grpo",
    "quartile/dr_grpo",
    "quartile/dapo",
    "quartile/dr_grpo_matched",
    "dapo_groups_drawn",
)


def _check_controlled(study: object) -> dict:
    if not isinstance(study, dict) or any(key not in study for key in _CONTROLLED_KEYS):
        raise ValueError(
            "study must be what stddial_book.experiments.controlled.study.controlled_run_study returns (a dict with "
            "quartile/<run>, decile_share/<run>, silent_measured/grpo, ...)."
        )
    return study


def _check_pool_study(study: object) -> dict:
    """What :func:`stddial_book.experiments.testbed.predictions.pool_study` returns, for recipes the figures know."""
    if not isinstance(study, dict) or not study:
        raise ValueError("study must be a non-empty pool_study result (recipe key -> its seeds' numbers).")
    for key, entry in study.items():
        if key not in RECIPE_NAMES:
            raise ValueError(
                f"study has recipe key {' '.join(repr(key).split())[:40]}; the figures draw {sorted(RECIPE_NAMES)}."
            )
        if (
            not isinstance(entry, dict)
            or any(f not in entry for f in ("samples", "bands", "silent", "mass"))
            or not entry["samples"]
        ):
            raise ValueError(
                f"study[{key!r}] must be what pool_study returns for a recipe (samples, bands, silent, "
                "mass, one entry per seed)."
            )
    return study


@legible_figure
@stacked_figure
def silent_probability_figure(group_sizes: tuple[int, ...] = (2, 4, 8, 16, 64), delta: float = 0.05) -> plt.Figure:
    """Chapter 5: P(silent | p, G) = p^G + (1 − p)^G for several G (top), and its inverse, the
    smallest G with P(silent) ≤ δ (bottom, :func:`stddial_book.theory.silent.tries_needed`). ``group_sizes``
    are the G drawn on top, whole numbers ≥ 1; ``delta`` is δ, in (0, 1) (0.05 by default)."""
    from stddial_book.theory.silent import silent_probability, tries_needed

    group_sizes = _group_sizes(group_sizes)
    p = np.linspace(0.0, 1.0, 401)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8), constrained_layout=True)
    for g in group_sizes:
        left.plot(p, silent_probability(p, g), color=_g_color(g), lw=2, label=f"G = {g}")
    left.set(xlabel="solve rate p", ylabel="P(silent)", ylim=(0, 1.02), title="P(silent) = pᴳ + (1 − p)ᴳ")
    left.legend(frameon=False, loc="upper center", ncol=2)
    inner = np.linspace(0.005, 0.995, 397)
    right.semilogy(inner, tries_needed(inner, delta), color="k", lw=1.5)
    marked = np.array([0.05, 0.5, 0.95])
    right.plot(marked, tries_needed(marked, delta), "o", color="k", ms=5)
    for p_mark, offset, align in ((0.05, (9, 0), "left"), (0.5, (0, 9), "center")):
        right.annotate(
            f"G = {int(tries_needed(p_mark, delta))}",
            (p_mark, tries_needed(p_mark, delta)),
            xytext=offset,
            textcoords="offset points",
            ha=align,
            va="center",
            fontsize=TYPE_SIZES["legend"],
        )
    right.set_yticks([5, 10, 20, 50, 100, 200, 500])
    right.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
    right.yaxis.set_minor_formatter(plt.NullFormatter())
    right.set(xlabel="solve rate p", ylabel="smallest G", title=f"group size with P(silent) ≤ {delta:g}")
    return fig


@legible_figure
@stacked_figure
def expected_weight_figure(group_sizes: tuple[int, ...] = (2, 4, 8, 16, 64), group_size: int = 8) -> plt.Figure:
    """Chapter 5: the expected group std E[σ̂ | p, G] for several G against √(p(1 − p)) (top), and
    each recipe's expected update weight per prompt at one G (bottom). ``group_sizes`` are the G drawn
    on top, whole numbers ≥ 2; ``group_size`` is the one G of the bottom panel (8 by default)."""
    from stddial_book.theory.silent import expected_group_std, expected_update_weight

    group_sizes = _group_sizes(group_sizes)
    p = np.linspace(0.0, 1.0, 401)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8), constrained_layout=True, sharey=True)
    for g in group_sizes:
        left.plot(p, expected_group_std(p, g), color=_g_color(g), lw=2, label=f"G = {g}")
    left.plot(p, np.sqrt(p * (1 - p)), "k--", lw=1.2, label="√(p(1 − p))")
    left.set(xlabel="solve rate p", ylabel="expected value", ylim=(0, 0.65), title="expected group std E[σ̂]")
    left.legend(frameon=False, loc="upper center", ncol=3, columnspacing=1.0)
    for recipe in (GRPO, DR_GRPO):
        right.plot(
            p, expected_update_weight(p, group_size, recipe), color=RECIPE_COLORS[recipe.name], lw=2, label=recipe.name
        )
    right.set(xlabel="solve rate p", title=f"expected update weight E[w], G = {group_size}")
    right.legend(frameon=False, loc="upper center", ncol=2)
    return fig


@legible_figure
@stacked_figure
def fidelity_figure(max_group_size: int = 128) -> plt.Figure:
    """Chapter 5: φ(G, p) against G with the expansion dashed; the G needed for 95% and 99%.

    ``max_group_size`` is the largest G drawn, from 2 to 4096 (128 by default).
    """
    from stddial_book.theory.group_size import (
        attenuated_fidelity,
        gradient_fidelity,
        group_size_law,
        minimal_group_size,
    )

    max_group_size = check_int(max_group_size, "max_group_size", minimum=2)
    if max_group_size > 4096:
        raise ValueError(
            f"max_group_size={max_group_size} must stay at most 4096 (each G is an exact sum; the "
            "chapter draws up to 128)."
        )
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8), constrained_layout=True)
    sizes = np.arange(2, max_group_size + 1)
    for p, color in _P_COLORS.items():
        left.plot(sizes, gradient_fidelity(np.full(sizes.shape, p), sizes), color=color, lw=2, label=f"p = {p:g}")
        left.plot(sizes, attenuated_fidelity(np.full(sizes.shape, p), sizes), color=color, lw=1, ls="--")
    left.set_xscale("log", base=2)
    left.set(
        xlabel="group size G",
        ylabel="fidelity φ(G, p)",
        ylim=(0, 1.02),
        title="exact (solid) and 1 − 1/(8Gp(1−p)) (dashed)",
    )
    left.axvline(8, color="0.6", lw=0.8, ls=":")
    left.legend(frameon=False, loc="lower right")
    p_grid = np.linspace(0.03, 0.97, 48)
    for eps, color in ((0.05, "#1f77b4"), (0.01, "#9467bd")):
        exact = [minimal_group_size(eps, p) for p in p_grid]
        right.plot(p_grid, exact, color=color, lw=2, label=f"exact, {100 * (1 - eps):.0f}%")
        right.plot(p_grid, group_size_law(eps, p_grid), color=color, lw=1, ls="--", label=f"G*, {100 * (1 - eps):.0f}%")
    right.set_yscale("log")
    right.set(xlabel="solve rate p", ylabel="group size needed", title="the group-size bathtub")
    right.legend(frameon=False)
    return fig


@legible_figure
@stacked_figure
def objective_figure(num_groups: int = 2000, seed: int = 0) -> plt.Figure:
    """Chapter 6: the two implicit objectives, and the expected gradient in θ with Monte-Carlo
    markers at G = 64 (and the exact curves at G = 8). ``num_groups`` is the number of Monte-Carlo groups
    per marker, 2 to 100,000 (2000 by default); ``seed`` (≥ 0) seeds their draws."""
    from stddial_book.experiments.controlled.bernoulli import monte_carlo_gradient
    from stddial_book.theory.group_size import arcsine_objective, large_group_gradient
    from stddial_book.theory.silent import expected_group_std, expected_group_variance

    num_groups = check_int(num_groups, "num_groups", minimum=2)
    if num_groups > 100_000:
        raise ValueError(
            f"num_groups={num_groups} Monte-Carlo groups per marker would take minutes; pass at most "
            "100000 (the chapter draws 2000)."
        )
    seed = check_int(seed, "seed", minimum=0)
    p = np.linspace(0.0, 1.0, 401)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8), constrained_layout=True)
    left.plot(p, p, color=RECIPE_COLORS["Dr. GRPO"], lw=2, label="Dr. GRPO: p")
    left.plot(
        p, arcsine_objective(p) / np.pi, color=RECIPE_COLORS["GRPO"], lw=2, label=r"GRPO: $(2/\pi)\arcsin\sqrt{p}$"
    )
    left.set(xlabel="solve rate p", ylabel="objective (scaled to [0, 1])", title="what each recipe ascends")
    left.legend(frameon=False)
    markers = np.linspace(0.05, 0.95, 13)
    for recipe, exact in ((GRPO, expected_group_std), (DR_GRPO, expected_group_variance)):
        color = RECIPE_COLORS[recipe.name]
        right.plot(p, large_group_gradient(p, recipe), color=color, lw=2, label=f"{recipe.name}, G → ∞")
        right.plot(p, exact(p, 8), color=color, lw=1, ls="--", label=f"{recipe.name}, exact at G = 8")
        mean, se = monte_carlo_gradient(markers, 64, recipe, num_groups, seed=seed)
        right.errorbar(markers, mean, yerr=2 * se, fmt="o", ms=4, color=color, capsize=0)
    right.plot([], [], "ko", ms=4, label="Monte Carlo, G = 64 (±2 s.e.)")
    right.set(xlabel="solve rate p", ylabel="expected gradient in θ", title="Bernoulli-logit prompt p = ς(θ)")
    # below both panels: inside, the legend would cover the Dr. GRPO curve and its markers
    fig.legend(
        *right.get_legend_handles_labels(),
        loc="outside lower center",
        ncol=2,  # the panels are stacked six inches wide (stacked_figure)
        frameon=False,
        fontsize=TYPE_SIZES["legend"],
    )
    return fig


@legible_figure
def difficulty_weight_figure() -> plt.Figure:
    """Chapter 6: ω(p) = 1/√(p(1 − p)) on a log scale, against Dr. GRPO's flat weight."""
    from stddial_book.theory.group_size import difficulty_weight

    p = np.linspace(0.005, 0.995, 397)
    fig, ax = plt.subplots(figsize=(6.5, 3.6), constrained_layout=True)
    ax.semilogy(p, difficulty_weight(p), color=RECIPE_COLORS["GRPO"], lw=2, label="GRPO: ω(p) = 1/√(p(1−p))")
    ax.semilogy(p, np.ones_like(p), color=RECIPE_COLORS["Dr. GRPO"], lw=2, label="Dr. GRPO: ω = 1")
    ax.plot([0.05, 0.5, 0.95], difficulty_weight(np.array([0.05, 0.5, 0.95])), "ko", ms=4)
    ax.set_yticks([1, 2, 5, 10])
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(plt.NullFormatter())
    ax.set(xlabel="solve rate p", ylabel="weight on a unit of solve rate", title="the difficulty weight")
    ax.legend(frameon=False)
    return fig


@legible_figure
def big_math_histogram_figure(hist) -> plt.Figure:
    """Chapter 7: how many Big-Math problems Llama-3.1-8B solved k times of 64.

    ``hist`` is the :class:`~stddial_book.corpora.histograms.KHistogram` to draw
    (:func:`~stddial_book.corpora.solve_tables.big_math_histogram` gives Big-Math's).
    """
    from stddial_book.corpora.histograms import KHistogram

    if not isinstance(hist, KHistogram):
        raise TypeError(f"hist must be a KHistogram (big_math_histogram() gives one); got {type(hist).__name__}.")
    k = np.arange(hist.num_rollouts + 1)
    fig, ax = plt.subplots(figsize=(7.5, 3.4), constrained_layout=True)
    colors = ["#d62728" if j in (0, hist.num_rollouts) else "0.45" for j in k]
    ax.bar(k, hist.counts, width=0.85, color=colors)
    ax.set(
        xlabel="k, correct of 64 samples",
        ylabel="problems",
        xlim=(-1, hist.num_rollouts + 1),
        title="Big-Math: never (k = 0) and always (k = 64) solved in red",
    )
    return fig


@legible_figure
def silent_by_group_size_figure(
    curves: dict[str, np.ndarray],
    group_sizes: np.ndarray,
    markers: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
) -> plt.Figure:
    """Chapter 7: silent fraction against G for several pools; optional markers (e.g. subsampled).

    ``group_sizes`` are the G of the x axis (≥ 1); ``curves`` maps each pool's label to its silent
    fractions, one per G; ``markers`` maps a label to a pair (group sizes, silent fractions) drawn as
    triangles (None, the default: no markers).
    """
    group_sizes = _values(group_sizes, "group_sizes")
    if np.any(group_sizes < 1):
        raise ValueError("group_sizes must hold group sizes G >= 1 (the x axis is logarithmic).")
    curves = {
        name: _values(curve, f"curves[{name!r}]", group_sizes.size)
        for name, curve in _check_named(curves, "curves", "one silent fraction per group size").items()
    }
    if markers is not None:
        checked = {}
        for name, pair in _check_named(markers, "markers", "a pair (sizes, values)").items():
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ValueError(f"markers[{name!r}] must be a pair (group sizes, silent fractions).")
            sizes = _values(pair[0], f"markers[{name!r}] sizes")
            checked[name] = (sizes, _values(pair[1], f"markers[{name!r}] values", sizes.size))
        markers = checked
    fig, ax = plt.subplots(figsize=(STACKED_WIDTH, 5.4), constrained_layout=True)
    for name, curve in curves.items():
        ax.plot(group_sizes, curve, lw=2.5 if name.startswith("Big-Math") else 1.5, label=name)
    for name, (sizes, values) in (markers or {}).items():
        ax.plot(sizes, values, "k^", ms=7, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(group_sizes)
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set(xlabel="group size G", ylabel="silent fraction", ylim=(0, 1.0))
    # below the axes, in two columns: inside it hides curves, and beside them it squeezes the plot on a phone
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    return fig


@legible_figure
def budget_by_decile_figure(shares: dict[str, np.ndarray], prompt_share: np.ndarray, title: str) -> plt.Figure:
    """Chapter 7: each recipe's share of the gradient budget per tenth of p̂, beside the prompts'.

    ``shares`` maps each bar's label (a recipe's name, such as ``"GRPO"``, or ``"GRPO, G = 8"`` for a
    finite G, drawn lighter) to its ten shares; ``prompt_share`` holds the prompts' ten shares;
    ``title`` is the panel's title.
    """
    shares = {
        name: _values(share, f"shares[{name!r}]", 10)
        for name, share in _check_named(shares, "shares", "ten shares, one per tenth of p̂").items()
    }
    prompt_share = _values(prompt_share, "prompt_share", 10)
    if not isinstance(title, str):
        raise TypeError(f"title must be a string; got {type(title).__name__}.")
    fig, ax = plt.subplots(figsize=(8, 3.6), constrained_layout=True)
    centers = np.arange(10)
    width = 0.8 / (len(shares) + 1)
    ax.bar(centers - 0.4 + width / 2, prompt_share, width=width, color="0.75", label="prompts")
    for i, (name, share) in enumerate(shares.items()):
        base = name.split(",")[0]
        finite = "G = " in name  # a finite-G variant of a recipe drawn beside its large-group bar: lighter
        ax.bar(
            centers - 0.4 + width * (i + 1.5),
            share,
            width=width,
            color=RECIPE_COLORS.get(base, None),
            alpha=0.5 if finite else 1.0,
            label=name,
        )
    ax.set(xticks=centers, ylabel="share", xlabel="stored solve rate p̂", title=title)
    ax.set_xticklabels(_DECILE_LABELS, rotation=30)
    ax.legend(frameon=False, ncol=2)
    return fig


@legible_figure
@stacked_figure
def dapo_allcorrect_figure(fit) -> plt.Figure:
    """Chapter 7: DAPO's logged all-correct fraction with E[p^32] and the generic curve (top); and
    E[p^32] against the pool's mean solve rate, the competence (bottom); the panels stack for a phone.
    ``fit`` is the :class:`~stddial_book.corpora.dapo_fig3b.ConsistencyFit` that
    :func:`~stddial_book.corpora.dapo_fig3b.fit_consistency` returns."""
    from stddial_book.corpora.dapo_fig3b import ConsistencyFit

    if not isinstance(fit, ConsistencyFit):
        raise TypeError(f"fit must be what dapo_curve.fit_consistency returns; got {type(fit).__name__}.")
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8), constrained_layout=True)
    steps = np.linspace(0, fit.steps[-1], 300)
    a, b = fit.generic_params
    left.plot(fit.steps, fit.logged, color="#08306b", lw=1.5, label="DAPO Fig. 3b, digitised")
    left.plot(fit.steps, fit.predicted, color="#b5532a", lw=2.5, label=f"E[p³²], one free τ (R² = {fit.r2:.2f})")
    left.plot(
        steps,
        a * (1 - np.exp(-steps / b)),
        color="0.5",
        ls="--",
        lw=1.2,
        label=f"a(1 − exp(−t/b)) (R² = {fit.generic_r2:.2f})",
    )
    left.axhline(fit.plateau, color="0.6", lw=0.8, ls=":")
    left.set(xlabel="training step", ylabel="all 32 samples correct", ylim=(0, 0.65))
    left.legend(frameon=False, loc="lower right")
    right.plot(fit.curve_means, fit.curve_allcorrect, color="#b5532a", lw=2.5)
    right.plot([fit.frozen_mean], [fit.frozen], "o", mfc="white", mec="#08306b", ms=7, label="Big-Math as it is")
    right.plot([fit.end_mean], [fit.plateau], "D", color="#08306b", ms=6, label="at DAPO's plateau")
    right.set(xlabel="mean solve rate of the sharpened pool", ylabel="E[p³²]")
    right.legend(frameon=False, loc="upper left")
    return fig


@legible_figure
def controlled_silent_figure(study: dict) -> plt.Figure:
    """Chapter 8 (a): the measured silent fraction per step against the closed form (GRPO).

    ``study`` is the dict :func:`stddial_book.experiments.controlled.study.controlled_run_study` returns.
    """
    _check_controlled(study)
    measured, expected = study["silent_measured/grpo"], study["silent_expected/grpo"]
    steps = np.arange(measured.shape[1])
    fig, ax = plt.subplots(figsize=(6.5, 3.5), constrained_layout=True)
    ax.plot(steps, expected.mean(axis=0), color="k", lw=2, label="closed form, mean of pᴳ + (1 − p)ᴳ")
    ax.plot(steps, measured[0], ".", color=RECIPE_COLORS["GRPO"], ms=3, label="measured (one seed)")
    ax.set(
        xlabel="step", ylabel="silent fraction", ylim=(0, 1), title=f"GRPO, {int(study['num_prompts'][0]):,} prompts"
    )
    ax.legend(frameon=False, loc="lower right")
    return fig


@legible_figure
def controlled_mass_figure(study: dict) -> plt.Figure:
    """Chapter 8 (b): update mass per tenth of the initial p at the first step, measured (bars,
    mean over seeds) against the finite-G closed form (markers). ``study`` is the dict
    :func:`stddial_book.experiments.controlled.study.controlled_run_study` returns."""
    _check_controlled(study)
    fig, ax = plt.subplots(figsize=(8, 3.5), constrained_layout=True)
    centers = np.arange(10)
    for offset, (key, name) in zip((-0.2, 0.2), (("grpo", "GRPO"), ("dr_grpo", "Dr. GRPO"))):
        measured = study[f"decile_share/{key}"]
        ax.bar(
            centers + offset,
            measured.mean(axis=0),
            width=0.38,
            yerr=2 * measured.std(axis=0, ddof=1),
            color=RECIPE_COLORS[name],
            alpha=0.75,
            ecolor="0.45",
            label=f"{name}, measured (±2 SD)",
        )
        ax.plot(centers + offset, study[f"decile_share_closed/{key}"].mean(axis=0), "kD", ms=4)
    ax.plot([], [], "kD", ms=4, label="finite-G closed form")
    top = max(float(study[f"decile_share/{k}"].mean(axis=0).max()) for k in ("grpo", "dr_grpo"))
    ax.set(
        xticks=centers, ylabel="share of the step's update", xlabel="initial solve rate p", ylim=(0, 1.7 * top)
    )  # headroom for the two-row legend
    ax.set_xticklabels(_DECILE_LABELS, rotation=30)
    ax.legend(frameon=False, ncol=2, loc="upper center")
    return fig


@legible_figure
@stacked_figure
def controlled_quartile_figure(study: dict, num_prompts: int) -> plt.Figure:
    """Chapter 8 (c): the initially hardest quartile's mean solve rate, per step at the paper's
    learning rate (top), and per generated group with Dr. GRPO's step matched (bottom); the panels
    stack for a phone. ``study`` is the dict :func:`stddial_book.experiments.controlled.study.controlled_run_study` returns; ``num_prompts`` is
    its config's number of prompts (it turns DAPO's groups drawn into groups per prompt)."""
    _check_controlled(study)
    num_prompts = check_int(num_prompts, "num_prompts", minimum=1)
    if np.any(np.asarray(study["num_prompts"]) != num_prompts):
        raise ValueError(
            f"num_prompts={num_prompts} is not the study's ({np.asarray(study['num_prompts'])[0]}): DAPO's "
            "groups per prompt would be misread; pass config.num_prompts of the study's config."
        )
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8), constrained_layout=True, sharey=True)
    colors = {key: RECIPE_COLORS[name] for key, name in RECIPE_NAMES.items()}
    colors["dr_grpo_matched"] = RECIPE_COLORS["Dr. GRPO"]
    labels = {**RECIPE_NAMES, "dr_grpo_matched": "Dr. GRPO, matched step"}

    def band(ax, x, curves, key, ls="-"):
        mean, sd = curves.mean(axis=0), curves.std(axis=0, ddof=1)
        ax.plot(x, mean, color=colors[key], ls=ls, lw=2, label=labels[key])
        ax.fill_between(x, mean - 2 * sd, mean + 2 * sd, color=colors[key], alpha=0.2, lw=0)

    steps = np.arange(study["quartile/grpo"].shape[1])
    for key in RECIPES:
        band(left, steps, study[f"quartile/{key}"], key)
    left.set(xlabel="step", ylabel="hardest quartile, mean p", title="the paper's setting (lr 0.5)", ylim=(0, 1.02))
    left.legend(frameon=False, loc="lower right")
    band(right, steps, study["quartile/grpo"], "grpo")  # one group per prompt and step
    band(right, steps, study["quartile/dr_grpo_matched"], "dr_grpo_matched", ls="--")
    band(right, study["dapo_groups_drawn"].mean(axis=0) / num_prompts, study["quartile/dapo"], "dapo")
    right.set(xlabel="groups generated per prompt", xlim=(0, steps[-1]), title="matched step; per generated group")
    right.legend(frameon=False, loc="lower right")
    fig.get_layout_engine().set(wspace=0.06)  # keep the left panel's last tick off the right's first
    return fig


@legible_figure
@stacked_figure
def pool_bands_figure(study: dict, bands: tuple[int, ...] = (0, 1)) -> plt.Figure:
    """Chapter 13: mean solve rate of the initially hardest bands against samples generated,
    per recipe, mean ± 2 SD over seeds (each seed read on a common grid of generated samples).
    ``study`` is the dict :func:`stddial_book.experiments.testbed.predictions.pool_study` returns; ``bands`` are the indices of the
    quartiles drawn, one panel each, 0 the hardest (the two hardest by default)."""
    _check_pool_study(study)
    if isinstance(bands, (str, bytes)) or not isinstance(bands, (tuple, list)) or not bands:
        raise ValueError(f"bands must be a non-empty tuple of band indices, e.g. (0, 1); got {type(bands).__name__}.")
    num_bands = len(next(iter(study.values()))["bands"][0])
    bands = tuple(check_int(b, "each band", minimum=0) for b in bands)
    if max(bands) >= num_bands:
        raise ValueError(f"bands must index the study's {num_bands} bands (0..{num_bands - 1}); got {bands}.")
    fig, axes = plt.subplots(1, len(bands), figsize=(9.5, 3.8), constrained_layout=True, sharey=True)
    axes = np.atleast_1d(axes)
    top = min(float(np.max(s[-1])) for entry in study.values() for s in entry["samples"])
    grid = np.linspace(0, top, 60)
    for ax, band in zip(axes, bands):
        for key, entry in study.items():
            curves = np.array([np.interp(grid, s, b[band]) for s, b in zip(entry["samples"], entry["bands"])])
            mean, sd = curves.mean(axis=0), curves.std(axis=0, ddof=1) if len(curves) > 1 else 0 * grid
            color = RECIPE_COLORS[RECIPE_NAMES[key]]
            ax.plot(grid / 1000, mean, color=color, lw=2, label=f"{RECIPE_NAMES[key]} ({len(curves)} seeds)")
            ax.fill_between(grid / 1000, mean - 2 * sd, mean + 2 * sd, color=color, alpha=0.15, lw=0)
        ax.set(xlabel="samples generated (thousands)", title=f"quartile {band + 1} of initial solve rate")
    axes[0].set(ylabel="mean solve rate of the quartile")
    axes[0].legend(frameon=False, loc="upper left")
    return fig


@legible_figure
def pool_silent_figure(study: dict) -> plt.Figure:
    """Chapter 13: measured silent fraction of the generated groups against its unbiased closed
    form, one point per interval between pool measurements and per seed. ``study`` is the dict
    :func:`stddial_book.experiments.testbed.predictions.pool_study` returns."""
    _check_pool_study(study)
    fig, ax = plt.subplots(figsize=(5.5, 4.2), constrained_layout=True)
    for key, entry in study.items():
        m = np.concatenate([c["interval_measured"] for c in entry["silent"]])
        p = np.concatenate([c["interval_predicted"] for c in entry["silent"]])
        ax.plot(p, m, "o", ms=4, alpha=0.7, color=RECIPE_COLORS[RECIPE_NAMES[key]], label=RECIPE_NAMES[key])
    low = min(ax.get_xlim()[0], ax.get_ylim()[0])
    high = max(ax.get_xlim()[1], ax.get_ylim()[1])
    ax.plot([low, high], [low, high], "k--", lw=1, label="measured = predicted")
    ax.set(xlabel=r"closed form, $\mathrm{E}[p^G + (1-p)^G]$", ylabel="measured silent fraction")
    ax.legend(frameon=False)
    return fig


@legible_figure
def pool_mass_figure(study: dict) -> plt.Figure:
    """Chapter 13: each recipe's share of its update mass per quartile of initial solve rate,
    realised (bars, mean over seeds) against the closed form (markers). ``study`` is the dict
    :func:`stddial_book.experiments.testbed.predictions.pool_study` returns."""
    _check_pool_study(study)
    fig, ax = plt.subplots(figsize=(8, 3.6), constrained_layout=True)
    keys = list(study)
    width = 0.8 / len(keys)
    num_bands = len(study[keys[0]]["mass"][0]["realised"])
    centers = np.arange(num_bands)
    for i, key in enumerate(keys):
        realised = np.array([m["realised"] for m in study[key]["mass"]])
        expected = np.array([m["expected"] for m in study[key]["mass"]])
        x = centers - 0.4 + width * (i + 0.5)
        ax.bar(
            x,
            realised.mean(axis=0),
            width=width,
            color=RECIPE_COLORS[RECIPE_NAMES[key]],
            alpha=0.8,
            label=RECIPE_NAMES[key],
        )
        ax.plot(x, expected.mean(axis=0), "kD", ms=4)
    ax.plot([], [], "kD", ms=4, label="closed form")
    ax.set(
        xticks=centers,
        xticklabels=[f"quartile {b + 1}" for b in range(num_bands)],
        xlabel="initial solve rate (quartile 1 = hardest)",
        ylabel="share of the update mass",
    )
    ax.set_ylim(0, 1.35 * ax.get_ylim()[1])
    ax.legend(frameon=False, ncol=4, loc="upper center")
    return fig
