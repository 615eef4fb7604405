"""The book's training-run figures (matplotlib, chapters 9-13). Each function returns a Figure and computes what it shows
from the package, so a figure can never disagree with the code it illustrates; the dial and identity figures of chapters
1, 3 and 4 are in :mod:`stddial_book.presentation.identity_plots`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from stddial_book.presentation.style import RECIPE_COLORS, TYPE_SIZES, legible_figure, stacked_figure

__all__ = [
    "sampling_cost_figure",
    "comparison_figure",
    "seed_spread_figure",
    "accuracy_figure",
    "run_dial_figure",
    "identity_check_figure",
    "run_metrics_figure",
    "prediction_checks_figure",
    "quartile_progress_figure",
    "warm_start_figure",
    "start_difficulty_figure",
    "pool_start_figure",
    "silent_sides_figure",
]


def _spread_labels(ends: list[tuple[float, int, str]], gap: float) -> list[tuple[float, int, str]]:
    """End labels (y, band, colour) moved apart, in order, so that neighbours are at least
    ``gap`` apart in y; labels already far enough apart stay where their curves end."""
    placed: list[tuple[float, int, str]] = []
    for y, band, color in sorted(ends):
        if placed and y - placed[-1][0] < gap:
            y = placed[-1][0] + gap
        placed.append((y, band, color))
    return placed


def _xs(records, name):
    from stddial_book.experiments.testbed.logs import curve

    return curve(records, name)


def _thousands(records: list[dict], name: str) -> tuple[np.ndarray, np.ndarray]:
    x, y = _xs(records, name)
    return x / 1000, y


_SAMPLES = "samples generated (thousands)"


@legible_figure
@stacked_figure
def accuracy_figure(records: list[dict], title: str = "") -> plt.Figure:
    """Chapters 10-12: one run's held-out accuracy against the samples generated so far: sampled
    (T = 1) and greedy over all held-out prompts (top), sampled per digit count (bottom). ``records`` is
    a run's metric records (the list of dicts :func:`~stddial_book.rl.runlog.load_run` returns); ``title``, if not empty (the default), is
    written above the panels."""
    from stddial_book.experiments.testbed.logs import buckets

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5), constrained_layout=True, sharey=True)
    for name, style, label in (
        ("eval/accuracy_sampled", "-o", "sampled (T = 1)"),
        ("eval/accuracy_greedy", "--s", "greedy"),
    ):
        left.plot(*_thousands(records, name), style, ms=4, label=label)
    left.set(xlabel=_SAMPLES, ylabel="held-out accuracy", ylim=(0, 1.02), title="all held-out prompts")
    left.legend(loc="best", framealpha=0.85, edgecolor="none")
    for b in buckets(records):
        right.plot(*_thousands(records, f"eval/accuracy_sampled/{b}"), "-o", ms=4, label=f"D = {b.lstrip('D')}")
    right.set(xlabel=_SAMPLES, title="sampled, per digit count D")
    # "best" keeps the legend off the curves, which end in different corners run to run
    right.legend(loc="best", framealpha=0.85, edgecolor="none")
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


@legible_figure
@stacked_figure
def run_dial_figure(runs: dict[str, list[dict]], group_size: int) -> plt.Figure:
    """Chapters 10-12: the dial in a run's log. Top: the silent fraction of each step's generated
    groups. Bottom: the share of the update mass at each level of the group std σ, i.e. each pair
    {k, G − k} of correct counts (:func:`stddial_book.experiments.testbed.logs.mass_by_sigma`), per run in
    ``runs`` (label -> records), with the share of the mixed groups of the first run as outlines.
    ``group_size`` is the runs' G."""
    from stddial_book.experiments.testbed.logs import mass_by_sigma

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5), constrained_layout=True)
    labels = list(runs)
    width = 0.8 / len(labels)
    for i, (label, records) in enumerate(runs.items()):
        color = RECIPE_COLORS.get(label.split(" (")[0], f"C{i}")
        left.plot(*_thousands(records, "dial/silent_fraction"), color=color, label=label)
        shares = mass_by_sigma(records, group_size)
        x = np.arange(len(shares["k"])) - 0.4 + width * (i + 0.5)
        right.bar(x, shares["mass"], width=width, color=color, alpha=0.85, label=f"{label}: update mass")
        if i == 0:
            right.bar(
                np.arange(len(shares["k"])),
                shares["groups"],
                width=0.8,
                fill=False,
                edgecolor="0.3",
                ls="--",
                label=f"{label}: mixed groups",
            )
    left.set(xlabel=_SAMPLES, ylabel="silent fraction", ylim=(0, 1), title="silent groups per step")
    left.legend(frameon=False, loc="upper right")
    k = shares["k"]
    right.set(
        xticks=np.arange(len(k)),
        xticklabels=[f"{a}|{group_size - a}" if 2 * a != group_size else f"{a}" for a in k],
        xlabel=f"correct samples k | G − k  (G = {group_size})",
        ylabel="share",
        title="where the update mass goes",
    )
    right.set_ylim(0, 1.4 * right.get_ylim()[1])
    right.legend(frameon=False, loc="upper left")
    return fig


@legible_figure
def identity_check_figure(runs: list[list[dict]]) -> plt.Figure:
    """Chapters 10-12: every identity check made inside the update (``identity_check_every``),
    pooled over ``runs``: the relative error of a checked group's update against w(ḡ₊ − ḡ₋),
    on a log scale, against the samples generated when it was checked; circles for the first
    minibatch of a step (ratio 1), triangles for later ones (filled where some token was clipped)."""
    fig, ax = plt.subplots(figsize=(8, 3.6), constrained_layout=True)
    points = {0: ([], [], []), 1: ([], [], [])}
    for records in runs:
        for r in records:
            for m, e, c in zip(
                r.get("identity/minibatch", []), r.get("identity/rel_error", []), r.get("identity/clipped", [])
            ):
                xs, ys, cs = points[int(m > 0)]
                xs.append(r["samples/generated"] / 1000)
                ys.append(e)
                cs.append(c)
    if not points[0][0]:
        raise ValueError("these runs hold no identity check; train with identity_check_every > 0.")
    xs, ys, _ = points[0]
    ax.semilogy(xs, ys, "o", color="C0", ms=6, alpha=0.7, label="first minibatch (ratio 1)")
    xs, ys, cs = map(np.asarray, points[1])
    if xs.size:
        hit = cs > 0
        ax.semilogy(xs[~hit], ys[~hit], "^", color="C3", mfc="none", ms=7, label="later, nothing clipped")
        ax.semilogy(xs[hit], ys[hit], "^", color="C3", ms=7, label="later, some tokens clipped")
    ax.set(
        xlabel="samples generated when checked (thousands)",
        ylabel=r"relative error vs $w(\bar g_+ - \bar g_-)$",
        title=f"{len(runs)} runs, every checked group",
    )
    # beside the axes: the checked groups can fall anywhere in the plot
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return fig


_METRICS = {
    "kl": ("kl", "KL to the warm start (k3)", "nats per token"),
    "entropy": ("entropy", "entropy of the policy", "nats per token"),
    "length": ("completions/mean_length", "mean completion length", "tokens"),
}


@legible_figure
@stacked_figure
def run_metrics_figure(
    records: list[dict], panels: tuple[str, ...] = ("kl", "clip"), max_new_tokens: int | None = None
) -> plt.Figure:
    """Chapters 10-12: logged training metrics of one run against the samples generated, one
    panel each (at most three): ``kl``, ``entropy``, ``length`` (the mean completion length,
    with the cap ``max_new_tokens`` dotted when given) and ``clip`` (the fractions of tokens
    clipped below, A < 0, and above, A > 0). ``records`` is a run's metric records (the list of dicts :func:`~stddial_book.rl.runlog.load_run` returns);
    ``panels`` names the panels in order (``kl`` and ``clip`` by default)."""
    panels = tuple(panels)
    unknown = [p for p in panels if p not in (*_METRICS, "clip")]
    if unknown or not 1 <= len(panels) <= 3:
        raise ValueError(f"panels must be one to three of {sorted((*_METRICS, 'clip'))}; got {panels}.")
    fig, axes = plt.subplots(1, len(panels), figsize=(min(10.0, 1.2 + 3.4 * len(panels)), 3.4), constrained_layout=True)
    for ax, panel in zip(np.atleast_1d(axes), panels):
        if panel == "clip":
            for name, label in (("clip_ratio/low_mean", "below (A < 0)"), ("clip_ratio/high_mean", "above (A > 0)")):
                x, y = _thousands(records, name)
                ax.plot(x, 100 * y, label=label)
            ax.set(ylabel="tokens clipped (%)", title="clipped tokens per step")
            ax.legend(frameon=False)
        else:
            name, title, unit = _METRICS[panel]
            ax.plot(*_thousands(records, name), color="0.25")
            ax.set(ylabel=unit, title=title)
            if panel == "length" and max_new_tokens is not None:
                ax.axhline(max_new_tokens, color="0.5", ls=":", label=r"cap $L_{\max}$")
                ax.set_ylim(0, max_new_tokens + 1)
                ax.legend(frameon=False)
        ax.set_xlabel(_SAMPLES)
    return fig


@legible_figure
@stacked_figure
def prediction_checks_figure(studies: dict[str, dict], key: str) -> plt.Figure:
    """Chapters 10-12: two of the source paper's predictions for one recipe, for each set of runs
    in ``studies`` (label -> :func:`~stddial_book.experiments.testbed.predictions.pool_study`): top, the measured silent
    fraction of each stretch between pool measurements against its closed form; bottom, the
    share of the update mass per quartile of initial solve rate, realised (bars) against the
    closed form (diamonds). ``key`` is the recipe's key in each study (``"grpo"``, ``"dr_grpo"`` or
    ``"dapo"``)."""
    from stddial_book.presentation.style import RECIPE_NAMES

    fig, (silent, mass) = plt.subplots(1, 2, figsize=(9, 3.8), constrained_layout=True)
    width = 0.8 / len(studies)
    color = RECIPE_COLORS[RECIPE_NAMES[key]]
    for i, (label, study) in enumerate(studies.items()):
        entry = study[key]
        m = np.concatenate([c["interval_measured"] for c in entry["silent"]])
        p = np.concatenate([c["interval_predicted"] for c in entry["silent"]])
        silent.plot(
            p,
            m,
            "os"[i % 2],
            ms=5,
            alpha=0.75,
            mfc="none" if i else None,
            color="0.2",
            label=f"{label} ({len(entry['silent'])} seeds)",
        )
        realised = np.array([x["realised"] for x in entry["mass"]]).mean(axis=0)
        expected = np.array([x["expected"] for x in entry["mass"]]).mean(axis=0)
        x = np.arange(realised.size) - 0.4 + width * (i + 0.5)
        mass.bar(x, realised, width=width, color=color, alpha=0.9 - 0.45 * i, label=f"{label}, realised")
        mass.plot(x, expected, "kD", ms=4)
    low = min(silent.get_xlim()[0], silent.get_ylim()[0])
    high = max(silent.get_xlim()[1], silent.get_ylim()[1])
    silent.plot([low, high], [low, high], "k--", lw=1, label="measured = closed form")
    silent.set(xlabel=r"closed form $E[p^G + (1-p)^G]$", ylabel="measured silent fraction", title="1. silent groups")
    silent.legend(frameon=False, loc="upper left")
    mass.plot([], [], "kD", ms=4, label="closed form")
    mass.set(
        xticks=range(realised.size),
        xticklabels=["Q1\nhardest"]
        + [f"Q{b + 1}" for b in range(1, realised.size - 1)]
        + [f"Q{realised.size}\neasiest"],
        ylabel="share of the update mass",
        title="2. update mass by quartile",
    )
    mass.set_ylim(0, 1.45 * mass.get_ylim()[1])
    mass.legend(frameon=False, loc="upper left")
    return fig


@legible_figure
@stacked_figure
def quartile_progress_figure(studies: dict[str, dict], key: str) -> plt.Figure:
    """Chapters 10-12: the third prediction, where learning happens: the mean solve rate of each
    quartile of initial solve rate against the samples generated, mean over seeds with ± 2 SD
    shaded, one panel per set of runs in ``studies`` (their budgets differ, so each gets its axis);
    ``studies`` and ``key`` (the recipe's key) are as for :func:`prediction_checks_figure`."""
    from stddial_book.presentation.style import BAND_COLORS

    fig, axes = plt.subplots(1, len(studies), figsize=(9, 3.6), constrained_layout=True, sharey=True)
    for ax, (label, study) in zip(np.atleast_1d(axes), studies.items()):
        entry = study[key]
        ends: list[tuple[float, int, str]] = []
        grid = np.linspace(0, min(float(s[-1]) for s in entry["samples"]), 40)
        for band in range(len(entry["bands"][0])):
            curves = np.array([np.interp(grid, s, b[band]) for s, b in zip(entry["samples"], entry["bands"])])
            mean = curves.mean(axis=0)
            sd = curves.std(axis=0, ddof=1) if len(curves) > 1 else 0 * grid
            color = BAND_COLORS[band % len(BAND_COLORS)]
            ax.plot(grid / 1000, mean, color=color, lw=2)
            ax.fill_between(grid / 1000, mean - 2 * sd, mean + 2 * sd, color=color, alpha=0.15, lw=0)
            if ax is np.atleast_1d(axes)[0]:  # name the curves once, at their right ends
                ends.append((float(mean[-1]), band, color))
        for y, band, color in _spread_labels(ends, gap=0.07):
            ax.annotate(
                f"Q{band + 1}",
                (grid[-1] / 1000, y),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                color=color,
                fontsize=TYPE_SIZES["legend"],
                fontweight="bold",
            )
        ax.set(xlabel=_SAMPLES, title=f"{label} ({len(entry['bands'])} seeds)", ylim=(0, 1))
        ax.set_xlim(right=grid[-1] / 1000 * 1.12)
    np.atleast_1d(axes)[0].set_ylabel("mean solve rate of quartile Q")
    return fig


@legible_figure
def warm_start_figure(records: list[dict], numbers: dict, batch_size: int) -> plt.Figure:
    """Chapter 9: the warm start's held-out pass rate as the probe estimated it at each check
    (the stopping rule), the target, and the pass rate measured again with fresh samples at the
    end (``numbers`` from :func:`stddial_book.experiments.testbed.numbers.warm_start_numbers`).
    ``records`` are the warm start's metric records; ``batch_size`` its SFT batch size, for the axis label."""
    from stddial_book.rl.runlog import metric_series

    steps, rate = metric_series(records, "sft/pass_rate")
    fig, ax = plt.subplots(figsize=(6.5, 3.4), constrained_layout=True)
    ax.plot(steps, rate, "o-", ms=3, label="probe estimate (stopping rule)")
    ax.plot(steps[-1], numbers["pass"], "s", color="C3", ms=7, label="measured again, fresh samples")
    ax.axhline(numbers["target"], color="0.5", ls=":", label="target")
    top = max(float(np.max(rate)), numbers["pass"], numbers["target"])
    ax.set(
        xlabel=f"SFT step (batch of {batch_size})", ylabel="held-out pass rate (T = 1)", ylim=(0, 1.6 * top)
    )  # headroom: the legend sits above the curve and the target
    ax.legend(loc="upper left", framealpha=0.85, edgecolor="none")
    return fig


@legible_figure
@stacked_figure
def start_difficulty_figure(evaluation, problems) -> plt.Figure:
    """Chapter 9: where RL starts, from an ``EvalResult`` of ``problems`` with G samples each.
    Top: how many of the G samples were right, per digit count. Bottom: the pass rate against
    the number of carries in the sum, per digit count. ``evaluation`` is that
    :class:`~stddial_book.rl.evaluate.EvalResult`, ``problems`` the held-out problems it evaluated, in
    its order."""
    from stddial_book.experiments.testbed.numbers import pass_rate_by_carries

    G = evaluation.num_samples
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5), constrained_layout=True)
    for b, (carries, rates) in pass_rate_by_carries(evaluation, problems).items():
        sel = evaluation.buckets == b
        left.hist(evaluation.successes[sel], bins=np.arange(G + 2) - 0.5, alpha=0.6, label=f"D = {b.lstrip('D')}")
        right.plot(carries, rates, "o-", label=f"D = {b.lstrip('D')}")
    left.set(xlabel=f"successes k of G = {G}", ylabel="held-out prompts", title="after the warm start")
    left.set_ylim(0, 1.25 * left.get_ylim()[1])
    left.legend(frameon=False, loc="upper center", ncol=2)
    right.set(xlabel="carries in the sum", ylabel="pass rate", ylim=(0, 1), title="digits against carries")
    right.xaxis.get_major_locator().set_params(integer=True)
    right.legend(frameon=False)
    return fig


@legible_figure
def pool_start_figure(records: list[dict], problems) -> plt.Figure:
    """Chapter 9: the RL pool's solve rates at the start of a run (its first measurement),
    stacked by digit count; ``problems`` are the training problems the pool was taken from.
    ``records`` is a run's metric records (the list of dicts :func:`~stddial_book.rl.runlog.load_run` returns), with its pool measurements."""
    from stddial_book.experiments.testbed.predictions import pool_history

    _, n, K = pool_history(records)
    p = K[0] / n
    digits = np.array([q.digits for q in list(problems)[: p.size]])
    fig, ax = plt.subplots(figsize=(6.5, 3.4), constrained_layout=True)
    values = sorted(set(digits.tolist()))
    ax.hist(
        [p[digits == d] for d in values], bins=np.linspace(0, 1, 17), stacked=True, label=[f"D = {d}" for d in values]
    )
    ax.set(xlabel=f"solve rate at the start of RL ({n} samples per prompt)", ylabel="pool prompts")
    ax.legend(frameon=False)
    return fig


@legible_figure
def silent_sides_figure(sides: list[dict], group_size: int) -> plt.Figure:
    """Chapter 9: the silent fraction at G against the pool's mean solve rate, split into
    all-wrong and all-right groups, one point per pool measurement of each run (``sides``:
    :func:`stddial_book.experiments.testbed.numbers.silent_sides` results). ``group_size`` is the G the
    sides were computed at, for the axis label."""
    fig, ax = plt.subplots(figsize=(6.5, 3.6), constrained_layout=True)
    for key, color, label in (
        ("all_wrong", "C3", "all wrong (k = 0)"),
        ("all_right", "C2", "all right (k = G)"),
        (None, "0.2", "silent (either)"),
    ):
        for i, side in enumerate(sides):
            y = side["all_wrong"] + side["all_right"] if key is None else side[key]
            ax.plot(
                side["mean"],
                y,
                "o" if key else "s",
                color=color,
                ms=4,
                alpha=0.6,
                mfc=color if key else "none",
                label=label if i == 0 else None,
            )
    ax.set(xlabel="mean solve rate of the pool", ylabel=f"share of groups of G = {group_size}", ylim=(0, None))
    ax.legend(frameon=False)
    return fig


@legible_figure
@stacked_figure
def sampling_cost_figure(records: list[dict], title: str = "") -> plt.Figure:
    """Chapter 12: DAPO's dynamic sampling. Top: samples generated and samples that reached an
    update, cumulative over steps (the gap is the silent groups thrown away). Bottom: how many
    rollout rounds each step took to fill its batch, the steps that hit the cap on rounds (a
    short batch) shown apart. ``records`` is a run's metric records (the list of dicts :func:`~stddial_book.rl.runlog.load_run` returns) of a
    DAPO run; ``title``, if not empty (the default), is written above the panels."""
    from stddial_book.rl.runlog import metric_series

    steps, generated = metric_series(records, "samples/generated")
    _, kept = metric_series(records, "samples/kept")
    _, rounds = metric_series(records, "dynamic_sampling/rounds")  # logged from step 1 on
    _, capped = metric_series(records, "dynamic_sampling/hit_cap")
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.6), constrained_layout=True)
    left.plot(steps, generated / 1000, color="0.25", label="generated")
    left.plot(steps, kept / 1000, color=RECIPE_COLORS["DAPO"], label="kept (mixed groups)")
    left.fill_between(steps, kept / 1000, generated / 1000, color="0.6", alpha=0.25, label="discarded (silent groups)")
    left.set(xlabel="step", ylabel="samples, cumulative (thousands)", title="what dynamic sampling paid")
    left.legend(frameon=False, loc="upper left")
    rounds, capped = rounds.astype(int), capped.astype(bool)
    ticks = np.arange(1, rounds.max() + 1)
    full = np.array([np.sum((rounds == r) & ~capped) for r in ticks])
    short = np.array([np.sum((rounds == r) & capped) for r in ticks])
    right.bar(ticks, full, color=RECIPE_COLORS["DAPO"], label="batch filled")
    if short.any():  # no legend entry for a kind of step the run never had
        right.bar(ticks, short, bottom=full, color="0.55", label="hit the cap: short batch")
    right.set(xlabel="rollout rounds in the step", ylabel="steps", title="rounds per step", xticks=ticks)
    right.set_ylim(0, 1.3 * max(1, (full + short).max()))  # room for the legend
    right.legend(frameon=False, loc="upper left")
    if title:
        fig.suptitle(title)
    return fig


def _on_grid(runs: list[list[dict]], name: str, grid: np.ndarray) -> np.ndarray:
    """One row per run: a metric interpolated onto a common grid of samples generated."""
    from stddial_book.experiments.testbed.logs import curve

    return np.array([np.interp(grid, *curve(records, name)) for records in runs])


@legible_figure
@stacked_figure
def comparison_figure(runs: dict[str, list[list[dict]]], group_size: int) -> plt.Figure:
    """Chapter 13: the recipes side by side over their seeds. ``runs`` maps a recipe name to the
    records of each of its seeds; ``group_size`` is the runs' G.

    Top: the share of update mass per kind of mixed group, k or G − k correct
    (:func:`~stddial_book.experiments.testbed.logs.mass_by_sigma`), mean over seeds: the dial's direct effect.
    Bottom: held-out sampled accuracy against samples generated (DAPO's discarded samples count),
    mean over seeds with a band of ± 1 standard error of that mean.
    """
    from stddial_book.experiments.testbed.logs import mass_by_sigma

    names = list(runs)
    G = int(group_size)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8), constrained_layout=True)
    width = 0.8 / len(names)
    top = min(max(r.get("samples/generated", 0) for r in records) for seeds in runs.values() for records in seeds)
    grid = np.linspace(0, float(top), 60)  # every seed reaches the grid's end
    for i, name in enumerate(names):
        color = RECIPE_COLORS.get(name)
        shares = np.array([mass_by_sigma(records, G)["mass"] for records in runs[name]])
        x = np.arange(1, shares.shape[1] + 1) + (i - (len(names) - 1) / 2) * width
        left.bar(x, shares.mean(axis=0), width, color=color, label=name)
        curves = _on_grid(runs[name], "eval/accuracy_sampled", grid)
        mean = curves.mean(axis=0)
        se = curves.std(axis=0, ddof=1) / np.sqrt(len(curves)) if len(curves) > 1 else 0 * mean
        right.plot(grid / 1000, mean, color=color, lw=2, label=f"{name} ({len(curves)} seeds)")
        right.fill_between(grid / 1000, mean - se, mean + se, color=color, alpha=0.2, lw=0)
    ks = np.arange(1, G // 2 + 1)
    left.set_xticks(ks, [f"{k} or {G - k}" if k != G - k else f"{k}" for k in ks])
    left.set(
        xlabel=f"correct samples k of G = {G}", ylabel="share of the update mass", title="where the update mass goes"
    )
    left.set_ylim(0, 1.3 * left.get_ylim()[1])  # headroom: the legend sits above the bars
    left.legend(frameon=False, loc="upper center", ncol=len(names))
    right.set(
        xlabel="samples generated (thousands)",
        ylabel="held-out sampled accuracy",
        title="held-out accuracy, mean ± 1 SE",
    )
    right.legend(frameon=False, loc="lower right")
    return fig


@legible_figure
def seed_spread_figure(values: dict[str, dict[str, list[float]]]) -> plt.Figure:
    """Chapter 13: the final values the comparison screen tests, one dot per seed and a line at
    each recipe's mean. ``values`` is what :func:`~stddial_book.experiments.statistics.comparison_screen` takes:
    {metric: {recipe name: one value per seed}}."""
    metrics = list(values)
    names = list(next(iter(values.values())))
    fig, ax = plt.subplots(figsize=(8.5, 3.6), constrained_layout=True)
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        color = RECIPE_COLORS.get(name)
        for j, metric in enumerate(metrics):
            seeds = np.asarray(values[metric][name], dtype=float)
            x = j + (i - (len(names) - 1) / 2) * width
            ax.plot(np.full(seeds.size, x), seeds, "o", color=color, ms=6, alpha=0.75, label=name if j == 0 else None)
            ax.plot([x - 0.35 * width, x + 0.35 * width], [seeds.mean()] * 2, color=color, lw=2.5)
    ax.set_xticks(range(len(metrics)), metrics)
    ax.set(ylabel="final value", title="one dot per seed, a line at the mean")
    ax.legend(frameon=False, loc="best")
    return fig
