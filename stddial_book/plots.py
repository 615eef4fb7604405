"""The book's figures (matplotlib). Each function returns a ``Figure`` and computes what it shows
from the package, so a figure can never disagree with the code it illustrates."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .identity import update_weight
from .recipes import DAPO, DR_GRPO, GRPO, Recipe, group_advantages

__all__ = ["RECIPE_COLORS", "dial_figure", "mean_abs_advantage_figure", "training_dashboard", "sampling_cost_figure",
           "comparison_figure"]

#: One colour per preset, used by every figure of the book.
RECIPE_COLORS = {"GRPO": "#1f77b4", "Dr. GRPO": "#d62728", "DAPO": "#2ca02c"}


def dial_figure(group_size: int = 8) -> plt.Figure:
    """Chapter 1: how strongly each recipe weights a group, as a function of its pass rate.

    Left: the update weight w(p̂) of GRPO (σ), Dr. GRPO (σ²) and DAPO (σ on mixed groups; the
    silent groups at p̂ = 0 and 1 are discarded and replaced). Right: the same weights for the
    G + 1 possible groups of size G.
    """
    grid = np.linspace(0.0, 1.0, 401)
    ks = np.arange(group_size + 1)
    rates = ks / group_size
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    for recipe, style in ((GRPO, "-"), (DR_GRPO, "-"), (DAPO, "--")):
        color = RECIPE_COLORS[recipe.name]
        left.plot(grid, update_weight(grid, recipe), style, color=color, label=recipe.name, lw=2)
    silent = np.array([0.0, 1.0])
    left.plot(silent, np.zeros(2), "x", color=RECIPE_COLORS["DAPO"], ms=10, mew=2,
              label="silent: DAPO discards")
    left.set(xlabel=r"group pass rate $\hat p = k/G$", ylabel=r"update weight $w$",
             title=r"$\frac{1}{G}\sum_i A_i g_i = w\,(\bar g_+ - \bar g_-)$")
    left.legend(frameon=False)
    width = 0.27
    for offset, recipe in zip((-width, 0.0, width), (GRPO, DR_GRPO, DAPO)):
        weights = update_weight(rates, recipe)
        right.bar(ks + offset, weights, width=width, color=RECIPE_COLORS[recipe.name], label=recipe.name)
    right.set(xlabel=f"correct samples k of G = {group_size}", ylabel="update weight w",
              title=f"the {group_size + 1} possible groups of {group_size} samples", xticks=ks)
    for k_silent in (0, group_size):
        right.annotate("silent", (k_silent, 0.0), xytext=(0, 12), textcoords="offset points",
                       ha="center", fontsize=9)
    return fig


def mean_abs_advantage_figure(group_size: int = 8, recipes: tuple[Recipe, ...] = (GRPO, DR_GRPO)
                              ) -> plt.Figure:
    """Chapter 3: mean |A| measured from :func:`group_advantages` (dots) against 2w (lines)."""
    ks = np.arange(group_size + 1)
    grid = np.linspace(0.0, 1.0, 401)
    fig, ax = plt.subplots(figsize=(6, 3.6), constrained_layout=True)
    for recipe in recipes:
        color = RECIPE_COLORS.get(recipe.name, None)
        rewards = (np.arange(group_size)[None, :] < ks[:, None]).astype(float).reshape(-1)
        measured = np.abs(group_advantages(rewards, group_size, recipe)).reshape(-1, group_size).mean(1)
        ax.plot(grid, 2 * update_weight(grid, recipe), color=color, lw=2,
                label=f"{recipe.name}: closed form 2w")
        ax.plot(ks / group_size, measured, "o", color=color, ms=7, mfc="white", mew=2,
                label=f"{recipe.name}: group_advantages")
    ax.set(xlabel=r"$\hat p = k/G$", ylabel=r"mean $|A_i|$", title=f"G = {group_size}")
    ax.legend(frameon=False, fontsize=9)
    return fig


def identity_errors_figure(errors: dict[str, list[float]], ks: list[int]) -> plt.Figure:
    """Chapter 4: relative error of the identity on real gradients, per group, log scale."""
    fig, ax = plt.subplots(figsize=(7, 3.4), constrained_layout=True)
    width = 0.8 / len(errors)
    x = np.arange(len(ks))
    for i, (label, values) in enumerate(errors.items()):
        ax.bar(x + (i - (len(errors) - 1) / 2) * width, values, width=width, label=label)
    ax.set_yscale("log")
    ax.set(xticks=x, xticklabels=[f"k={k}" for k in ks], ylabel="relative error",
           title="autograd gradient of the loss vs w (ḡ₊ − ḡ₋), one group of G = 8 each")
    ax.legend(frameon=False, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=len(errors))
    return fig


def drift_figure(study: dict[str, np.ndarray]) -> plt.Figure:
    """Chapter 4: per minibatch step, how far group updates stray from the identity, and why.

    Left: median over groups (band: the middle half) of the total deviation and of the part the
    ratio alone causes (clip switched off), with the share of tokens clipped on the x labels.
    Right: each group's deviation against the share of its own tokens clipped.
    """
    from .gradcheck import drift_summary

    summary = drift_summary(study)
    steps = np.array([row["step"] for row in summary])
    with plt.rc_context({"font.size": 11}):
        return _drift_axes(study, summary, steps)


def _drift_axes(study: dict[str, np.ndarray], summary: list[dict[str, float]], steps: np.ndarray) -> plt.Figure:
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.8), constrained_layout=True)
    ax = axes[0]
    for key, label, color in (("rel_error", "clipped loss (what training uses)", "k"),
                              ("ratio_error", "same loss, clip switched off", "0.55")):
        values = [study[key][study["step"] == s] for s in steps]
        ax.plot(steps, [np.median(v) for v in values], "o-", color=color, label=label)
        ax.fill_between(steps, [np.percentile(v, 25) for v in values],
                        [np.percentile(v, 75) for v in values], color=color, alpha=0.15, lw=0)
    ax.set_xticks(steps, [f"{s}\n{row['clipped']:.0%}" for s, row in zip(steps, summary)])
    ax.set(xlabel="Adam steps (below: tokens clipped)", ylabel="deviation from the identity",
           title="median over groups")
    ax.legend(frameon=False, fontsize=9.5, loc="upper left")
    ax = axes[1]
    cmap = plt.get_cmap("viridis")
    moved = study["step"] > 0
    points = ax.scatter(100 * study["clipped"][moved], study["rel_error"][moved], c=study["step"][moved],
                        cmap=cmap, s=22, vmin=1, vmax=steps.max())
    fig.colorbar(points, ax=ax, label="Adam steps", ticks=steps[1:])
    ax.set(xlabel="tokens of the group clipped (%)", ylabel="deviation",
           title="one point per group and step")
    return fig


def silent_prompts_figure(group_sizes: tuple[int, ...] = (2, 4, 8, 16, 64), delta: float = 0.05) -> plt.Figure:
    """Chapter 5: P(silent | p, G), E[σ̂ | p, G], expected update weight per recipe, tries needed."""
    from .identity import expected_group_std, expected_update_weight, silent_probability, tries_needed

    p = np.linspace(0.0, 1.0, 401)
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), constrained_layout=True)
    ax = axes[0, 0]
    for g in group_sizes:
        ax.plot(p, silent_probability(p, g), label=f"G = {g}")
    ax.set(xlabel="solve rate p", ylabel="P(silent)", title=r"$P(\mathrm{silent}) = p^G + (1-p)^G$")
    ax.legend(frameon=False, fontsize=8)
    ax = axes[0, 1]
    for g in group_sizes:
        ax.plot(p, expected_group_std(p, g), label=f"G = {g}")
    ax.plot(p, np.sqrt(p * (1 - p)), "k--", lw=1, label=r"$\sqrt{p(1-p)}$")
    ax.set(xlabel="solve rate p", ylabel=r"$E[\hat\sigma]$", title="expected group std")
    ax.legend(frameon=False, fontsize=8)
    ax = axes[1, 0]
    g = 8
    for recipe in (GRPO, DR_GRPO):
        ax.plot(p, expected_update_weight(p, g, recipe), color=RECIPE_COLORS[recipe.name], lw=2, label=recipe.name)
    ax.set(xlabel="solve rate p", ylabel="E[w]", title=f"expected update weight per prompt, G = {g}")
    ax.legend(frameon=False, fontsize=8)
    ax = axes[1, 1]
    inner = np.linspace(0.005, 0.995, 397)
    ax.semilogy(inner, tries_needed(inner, delta), color="k")
    ax.set(xlabel="solve rate p", ylabel="smallest G", title=f"group size with P(silent) ≤ {delta}")
    return fig


def silent_fraction_figure(curves: dict[str, np.ndarray], group_sizes: np.ndarray,
                           reference: tuple[int, float] | None = None) -> plt.Figure:
    """Chapter 7: silent fraction against G for several solve-count tables."""
    fig, ax = plt.subplots(figsize=(7, 4), constrained_layout=True)
    for name, curve in curves.items():
        ax.plot(group_sizes, curve, label=name, lw=2 if name.startswith("union") else 1.2)
    if reference is not None:
        ax.plot([reference[0]], [reference[1]], "k*", ms=12, label="Big-Math, source paper")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="group size G", ylabel="silent fraction", ylim=(0, 1.02))
    ax.legend(frameon=False, fontsize=8)
    return fig


def update_mass_figure(bin_edges: np.ndarray, shares: dict[str, np.ndarray], counts: np.ndarray) -> plt.Figure:
    """Chapter 7: share of each recipe's expected update mass per solve-rate bin, and prompt share."""
    fig, ax = plt.subplots(figsize=(8, 3.8), constrained_layout=True)
    centers = np.arange(len(bin_edges) - 1)
    width = 0.8 / (len(shares) + 1)
    ax.bar(centers - width * len(shares) / 2, counts / counts.sum(), width=width, color="0.7", label="prompts")
    for i, (name, share) in enumerate(shares.items()):
        ax.bar(centers - width * len(shares) / 2 + width * (i + 1), share, width=width,
               color=RECIPE_COLORS.get(name), label=name)
    labels = [f"{lo:.2f}–{hi:.2f}" for lo, hi in zip(bin_edges[:-1], bin_edges[1:])]
    ax.set(xticks=centers, ylabel="share", xlabel="stored solve rate k/n")
    ax.set_xticklabels(labels, rotation=30, fontsize=8)
    ax.legend(frameon=False, fontsize=8)
    return fig


def _xs(records, name):
    from .analysis import curve

    return curve(records, name)


def training_dashboard(records: list[dict], title: str) -> plt.Figure:
    """Chapters 10-12: one run at a glance, every panel against the samples generated so far.

    Held-out accuracy (sampled and greedy), sampled accuracy per difficulty bucket, the silent
    fraction of each step's groups, the update mass each bucket received, the identity checked
    inside the update (when the run logged it), response length, entropy and the clip fractions.
    """
    from .analysis import buckets, update_mass

    fig, axes = plt.subplots(2, 4, figsize=(15, 6.4), constrained_layout=True)
    ax = axes[0, 0]
    for name, style, label in (("eval/accuracy_sampled", "-o", "sampled (T = 1)"),
                               ("eval/accuracy_greedy", "--s", "greedy")):
        x, y = _xs(records, name)
        ax.plot(x, y, style, ms=3, label=label)
    ax.set(title="held-out accuracy", xlabel="samples generated", ylim=(0, 1.02))
    ax.legend(frameon=False, loc="lower right")
    ax = axes[0, 1]
    for b in buckets(records):
        x, y = _xs(records, f"eval/accuracy_sampled/{b}")
        ax.plot(x, y, "-", label=b)
    ax.set(title="sampled accuracy per bucket", xlabel="samples generated", ylim=(0, 1.02))
    ax.legend(frameon=False, fontsize=7, ncol=2, loc="lower right")
    ax = axes[0, 2]
    x, y = _xs(records, "dial/silent_fraction")
    ax.plot(x, y, color="0.3")
    ax.set(title="silent fraction of generated groups", xlabel="samples generated", ylim=(0, 1))
    ax = axes[0, 3]
    mass = update_mass(records)
    ax.bar(list(mass), list(mass.values()), color="#8c564b")
    ax.set(title="update mass per bucket (Σ w / groups)", ylabel="mass")
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    ax = axes[1, 0]
    checked = [r for r in records if r.get("identity/rel_error")]
    if checked:  # the identity checked inside the update (TrainConfig.identity_check_every)
        for index, marker, label in ((0, "o", "minibatch 1 (ratio 1)"), (1, "^", "later minibatches")):
            xs = [r["samples/generated"] for r in checked for m in r["identity/minibatch"] if (m > 0) == bool(index)]
            ys = [e for r in checked for e, m in zip(r["identity/rel_error"], r["identity/minibatch"])
                  if (m > 0) == bool(index)]
            ax.semilogy(xs, ys, marker, ms=4, alpha=0.6, label=label)
        ax.set(title="identity check per group", xlabel="samples generated",
               ylabel=r"relative error vs $w(\bar g_+ - \bar g_-)$")
        ax.legend(frameon=False, fontsize=7)
    else:
        ax.text(0.5, 0.5, "no identity check in this log\n(identity_check_every = 0)", ha="center", va="center",
                transform=ax.transAxes, color="0.4")
        ax.set(title="identity check", xticks=[], yticks=[])
    for (name, ttl), ax in zip((("completions/mean_length", "response length (tokens)"), ("entropy", "entropy (nats/token)")),
                               axes[1, 1:3]):
        x, y = _xs(records, name)
        ax.plot(x, y, color="0.3")
        ax.set(title=ttl, xlabel="samples generated")
    ax = axes[1, 3]
    for name, label in (("clip_ratio/low_mean", "low (A < 0)"), ("clip_ratio/high_mean", "high (A > 0)")):
        x, y = _xs(records, name)
        ax.plot(x, y, label=label)
    ax.set(title="clipped token fraction", xlabel="samples generated")
    ax.legend(frameon=False)
    fig.suptitle(title)
    return fig


def sampling_cost_figure(records: list[dict], title: str = "") -> plt.Figure:
    """Chapter 12: DAPO's dynamic sampling, samples generated against samples that reached an update."""
    from .runs import metric_series

    steps, generated = metric_series(records, "samples/generated")
    _, kept = metric_series(records, "samples/kept")
    _, rounds = metric_series(records, "dynamic_sampling/rounds")  # logged from step 1 on
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4), constrained_layout=True)
    left.plot(steps, generated, label="generated")
    left.plot(steps, kept, label="kept (mixed groups)")
    left.fill_between(steps, kept, generated, alpha=0.2, label="discarded (silent groups)")
    left.set(xlabel="step", ylabel="samples (cumulative)", title="what dynamic sampling paid")
    left.legend(frameon=False)
    counts = np.bincount(rounds.astype(int))
    right.bar(np.arange(len(counts))[1:], counts[1:], color=RECIPE_COLORS["DAPO"])
    right.set(xlabel="rollout rounds to fill the batch", ylabel="steps", title="rounds per step")
    if title:
        fig.suptitle(title)
    return fig


def comparison_figure(runs: dict[str, list[list[dict]]]) -> plt.Figure:
    """Chapter 13: the three recipes side by side, mean ± standard error over seeds.

    ``runs`` maps a recipe name to the records of each of its seeds. Panels: final sampled
    accuracy per bucket, the share of update mass per bucket, held-out accuracy against samples
    generated (DAPO's discarded samples included), and σ against w read off the logs.
    """
    from .analysis import buckets, curve, final_eval, identity_from_log, seed_summary, update_mass

    names = list(runs)
    all_buckets = buckets(runs[names[0]][0])
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.9), constrained_layout=True)
    width = 0.8 / len(names)
    x = np.arange(len(all_buckets))
    for i, name in enumerate(names):
        color = RECIPE_COLORS.get(name)
        finals = [final_eval(r) for r in runs[name]]
        stats = [seed_summary([f[f"accuracy_sampled/{b}"] for f in finals]) for b in all_buckets]
        axes[0].bar(x + (i - (len(names) - 1) / 2) * width, [m for m, _ in stats], width,
                    yerr=[s for _, s in stats], color=color, label=name, capsize=2)
        shares = []
        for records in runs[name]:
            mass = update_mass(records)
            total = sum(mass.values()) or 1.0
            shares.append([mass.get(b, 0.0) / total for b in all_buckets])
        shares = np.array(shares)
        err = shares.std(axis=0, ddof=1) / np.sqrt(len(shares)) if len(shares) > 1 else None
        axes[1].bar(x + (i - (len(names) - 1) / 2) * width, shares.mean(axis=0), width, yerr=err,
                    color=color, label=name, capsize=2)
        curves = [curve(r, "eval/accuracy_sampled") for r in runs[name]]
        xs = curves[0][0]
        ys = np.array([c[1][: len(xs)] for c in curves if len(c[1]) >= len(xs)])
        mean = ys.mean(axis=0)
        axes[2].plot(xs, mean, color=color, label=name)
        if len(ys) > 1:
            se = ys.std(axis=0, ddof=1) / np.sqrt(len(ys))
            axes[2].fill_between(xs, mean - se, mean + se, color=color, alpha=0.2)
        sigma, weight = identity_from_log(runs[name][0])
        axes[3].plot(sigma, weight, ".", color=color, alpha=0.25, ms=4, label=name)
    for ax in axes[:2]:
        ax.set_xticks(x, all_buckets, rotation=45, fontsize=7)
    axes[0].set(title="final sampled accuracy per bucket", ylim=(0, 1.02))
    axes[1].set(title="share of update mass per bucket")
    axes[2].set(title="held-out sampled accuracy", xlabel="samples generated (discarded included)")
    grid = np.linspace(0, 0.5, 50)
    axes[3].plot(grid, grid, "k:", lw=1, label=r"$w = \sigma$")
    axes[3].plot(grid, grid**2, "k--", lw=1, label=r"$w = \sigma^2$")
    axes[3].set(title="identity read off the logs", xlabel=r"group $\sigma$", ylabel=r"$w$ = mean|A|/2")
    for ax in axes:
        ax.legend(frameon=False, fontsize=7)
    return fig
