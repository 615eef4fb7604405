"""Allocation rules on a pool of known pass rates, without training (Part V).

The rules of :mod:`stddial_book.rl.allocation` spend generated samples; what they buy is update
signal. In the dial's currency a group of G samples with k correct moves the policy by its step
size: σ̂ = √(k(G − k))/G under GRPO (the division by σ̂ leaves σ̂, Bay and Yearick 2026) and σ̂²
under Dr. GRPO. So a step's *signal* is

    signal = Σ over the groups kept for the update of σ̂ʳ,   r = 1 (GRPO) or 2 (Dr. GRPO),

where silent groups (k = 0 or G) add 0; its expectation over the draws is what the rules compete
on. :func:`signal_by_rule` measures it per 1,000 generated samples for every rule on a pool drawn
from a k-of-n histogram (Big-Math's by default, p = k/64 per prompt, k = 0 and 64 included), beside
the rule's *ceiling*: the signal per 1,000 samples that landed in kept mixed groups, i.e. what the
rule would reach if the samples it spent on silent groups and discards were free.

:func:`build_rule` gives every rule the same step size in samples, so all of them are compared at
one scale; :mod:`stddial_book.experiments.allocation.controlled_run` trains with them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from stddial_book.core.checks import check_int
from stddial_book.corpora.histograms import KHistogram
from stddial_book.rl.allocation import RULES, allocate, bernoulli_draw, record_allocation
from stddial_book.rl.allocation_base import Allocation
from stddial_book.rl.pool_state import new_pool_state

__all__ = [
    "STUDY_RULES",
    "PLAN_AHEAD",
    "ROUND_CAP",
    "build_rule",
    "step_candidates",
    "group_signal",
    "allocation_signal",
    "histogram_pool",
    "signal_by_rule",
    "bootstrap_interval",
    "mean_ci",
    "summarize_run_study",
]

#: Every rule of :data:`stddial_book.rl.allocation.RULES`, in the order the tables list them.
STUDY_RULES = tuple(name for name in RULES if name != "knapsack_paper")  # the recorded controlled study's
#: The rules that decide every group size before drawing: each step they reallocate the samples
#: of one batch of prompts among that batch (as Knapsack RL does); the others draw from the pool.
PLAN_AHEAD = ("uniform", "knapsack", "knapsack_oracle", "dial_grpo", "dial_dr_grpo", "knapsack_paper")
#: A rule that samples in rounds may generate up to this many times the step's kept-sample target.
ROUND_CAP = 4
#: SPEED's update group: 4 screening samples + 20 more (its scripts' setting).
SPEED_GROUP = 24


def build_rule(name: str, batch_prompts: int, group_size: int = 8, max_size: int = 32) -> tuple[object, int]:
    """``(rule, step budget in generated samples)`` for rule ``name`` at one step size.

    Every rule aims at B = ``batch_prompts`` × ``group_size`` samples in the update: uniform G,
    Knapsack RL and the dial's rule spend exactly B (groups of 2..``max_size``); DAPO and GRESO fill
    ``batch_prompts`` mixed groups of G, SPEED ⌊B/24⌋ groups of 4 + 20, Reinforce-Ada starts
    ``batch_prompts`` prompts (rounds of 8, at most 4, groups of 4 balanced); these four may
    generate up to :data:`ROUND_CAP` × B samples a step. ``knapsack_oracle`` needs its true pass
    rates set each step (``dataclasses.replace(rule, solve_rates=p)``).
    """
    if name not in RULES:
        raise ValueError(f"name must be one of {sorted(RULES)}; got {name!r}.")
    batch = check_int(batch_prompts, "batch_prompts", minimum=1)
    size = check_int(group_size, "group_size", minimum=2)
    budget = batch * size
    if name == "uniform":
        return RULES[name](group_size=size), budget
    if name in ("dapo", "greso"):
        return RULES[name](group_size=size, batch_prompts=batch), ROUND_CAP * budget
    if name == "speed":
        return RULES[name](batch_prompts=max(1, budget // SPEED_GROUP)), ROUND_CAP * budget
    if name == "reinforce_ada":
        return RULES[name](batch_prompts=batch), ROUND_CAP * budget
    if name == "knapsack_paper":  # the paper's own cap (128) and a group of G for a prompt not yet seen
        return RULES[name](group_size=size), budget
    return RULES[name](max_size=max_size), budget


def step_candidates(name: str, num_prompts: int, batch_prompts: int, rng: np.random.Generator):
    """The prompts rule ``name`` may spend on this step: a random batch of ``batch_prompts`` for a
    plan-ahead rule (it reallocates that batch's samples), the whole pool (None) for the others.
    ``num_prompts`` is the pool's size (the batch is capped at it); ``rng`` (a numpy Generator) draws
    the batch, sorted prompt indices without repeats."""
    if name in PLAN_AHEAD:
        return np.sort(rng.choice(num_prompts, size=min(batch_prompts, num_prompts), replace=False))
    return None


def group_signal(group_sizes, num_correct, power: int) -> np.ndarray:
    """Each group's step size σ̂ʳ, σ̂ = √(k(G − k))/G (``power`` r = 1: GRPO, 2: Dr. GRPO).

    ``group_sizes`` (G) and ``num_correct`` (k) are array-likes of equal shape, one entry per group,
    with G >= 1 and 0 <= k <= G; the result has their shape."""
    g = np.asarray(group_sizes, dtype=np.float64)
    k = np.asarray(num_correct, dtype=np.float64)
    if power not in (1, 2):
        raise ValueError(f"power must be 1 (GRPO's σ̂) or 2 (Dr. GRPO's σ̂²); got {power!r}.")
    if np.any(g < 1) or np.any(k < 0) or np.any(k > g):
        raise ValueError("each group needs G >= 1 and 0 <= k <= G.")
    return (np.sqrt(k * (g - k)) / g) ** power


def allocation_signal(allocation: Allocation) -> dict[str, float]:
    """One step's accounting: samples generated, kept, discarded; kept mixed groups and the samples
    in them; the signal in GRPO's (σ̂) and Dr. GRPO's (σ̂²) currency, summed over kept groups.
    ``allocation`` is the :class:`~stddial_book.rl.allocation_base.Allocation` one call of
    :func:`stddial_book.rl.allocation.allocate` returned."""
    g, k = allocation.group_sizes, allocation.num_correct
    mixed = (k > 0) & (k < g)
    return {
        "generated": float(allocation.generated),
        "kept": float(allocation.kept),
        "discarded_silent": float(allocation.discarded_silent),
        "discarded_surplus": float(allocation.discarded_surplus),
        "mixed_groups": float(mixed.sum()),
        "mixed_samples": float(g[mixed].sum()),
        "signal_grpo": float(group_signal(g, k, 1).sum()) if g.size else 0.0,
        "signal_dr_grpo": float(group_signal(g, k, 2).sum()) if g.size else 0.0,
    }


def histogram_pool(histogram: KHistogram, num_prompts: int, rng: np.random.Generator) -> np.ndarray:
    """``num_prompts`` pass rates p = k/n drawn from ``histogram``'s prompts (with their weights).

    ``histogram`` is a :class:`~stddial_book.corpora.histograms.KHistogram` (its counts are the weights);
    ``rng`` (a numpy Generator) draws with replacement."""
    if not isinstance(histogram, KHistogram):
        raise TypeError(f"histogram must be a KHistogram; got {type(histogram).__name__}.")
    weights = np.asarray(histogram.counts, dtype=np.float64)
    count = check_int(num_prompts, "num_prompts", minimum=1)
    return rng.choice(histogram.solve_rates, size=count, p=weights / weights.sum())


def _run_rule(name: str, p: np.ndarray, steps: int, batch_prompts: int, seed: int, max_size: int) -> dict:
    """Totals of :func:`allocation_signal` over ``steps`` steps of rule ``name`` on fixed rates ``p``."""
    rng = np.random.default_rng([seed, STUDY_RULES.index(name)])
    rule, budget = build_rule(name, batch_prompts, max_size=max_size)
    if name == "knapsack_oracle":
        rule = dataclasses.replace(rule, solve_rates=p)
    state, draw = new_pool_state(p.size), bernoulli_draw(p, rng)
    totals: dict[str, float] = {}
    for _ in range(steps):
        cand = step_candidates(name, p.size, batch_prompts, rng)
        allocation = allocate(rule, state, budget, draw, rng, candidates=cand)
        record_allocation(state, allocation)
        for key, value in allocation_signal(allocation).items():
            totals[key] = totals.get(key, 0.0) + value
    return totals


def _row(totals: dict) -> dict[str, float]:
    per = 1000.0 / totals["generated"] if totals["generated"] else 0.0
    mixed = totals["mixed_samples"]
    row = {key: value * per for key, value in totals.items() if key != "generated"}
    row["generated"] = totals["generated"]
    row["ceiling_grpo"] = totals["signal_grpo"] * 1000.0 / mixed if mixed else 0.0
    row["ceiling_dr_grpo"] = totals["signal_dr_grpo"] * 1000.0 / mixed if mixed else 0.0
    row["share_of_ceiling"] = mixed / totals["generated"] if totals["generated"] else 0.0
    return row


def signal_by_rule(
    solve_rates=None,
    histogram: KHistogram | None = None,
    num_prompts: int = 4096,
    batch_prompts: int = 64,
    steps: int = 40,
    seed: int = 0,
    rules=STUDY_RULES,
    max_size: int = 32,
) -> dict[str, dict[str, float]]:
    """Each rule's update signal and non-silent groups per 1,000 generated samples, no training.

    The pool: ``solve_rates`` as given, or ``num_prompts`` drawn from ``histogram`` (default the
    real Big-Math k-of-64 histogram, p = k/64). Each rule runs ``steps`` steps at the step size of
    :func:`build_rule` (``batch_prompts`` × 8 samples in the update), its estimator learning the
    fixed rates as it goes. Row per rule, values per 1,000 generated samples: ``signal_grpo`` (Σ σ̂
    over kept groups), ``signal_dr_grpo`` (Σ σ̂²), ``mixed_groups`` (kept non-silent groups),
    ``kept``, ``discarded_silent``, ``discarded_surplus``; ``ceiling_grpo``/``ceiling_dr_grpo``: the
    signal per 1,000 samples in kept mixed groups (silent groups free); ``share_of_ceiling``: the
    share of generated samples that landed in kept mixed groups; ``generated``: the samples in all.
    ``seed`` seeds the pool's draw and each rule's reward draws; ``rules`` names the rules to run
    (keys of :data:`stddial_book.rl.allocation.RULES`, default :data:`STUDY_RULES`); ``max_size`` is the
    largest group (samples) the Knapsack and dial rules may give one prompt.
    """
    if solve_rates is None:
        if histogram is None:
            from stddial_book.corpora.bigmath_figure import load_big_math_histogram

            histogram = load_big_math_histogram()
        p = histogram_pool(histogram, num_prompts, np.random.default_rng([seed, 10_000]))
    else:
        p = np.asarray(solve_rates, dtype=np.float64)
    steps = check_int(steps, "steps", minimum=1)
    unknown = [name for name in rules if name not in RULES]
    if unknown:
        raise ValueError(f"unknown rules {unknown}; the rules are {sorted(RULES)}.")
    return {name: _row(_run_rule(name, p, steps, batch_prompts, seed, max_size)) for name in rules}


# --- summaries of the training study (stddial_book.experiments.allocation.controlled_run) -----------------

#: Bootstrap settings: resamples and confidence level.
BOOTSTRAP_RESAMPLES, CONFIDENCE = 2000, 0.95


def bootstrap_interval(arrays, statistic, seed: int = 0) -> tuple[float, float]:
    """A percentile bootstrap interval of ``statistic(*arrays)`` over seeds (arrays paired: resampled
    together), by :func:`scipy.stats.bootstrap`. NaN with fewer than 2 seeds; the value itself if
    they all agree. ``arrays`` is a sequence of equal-length 1-D array-likes, one value per seed;
    ``statistic`` a function of that many arrays returning a number; ``seed`` seeds the resampling.
    Returns ``(low, high)`` at :data:`CONFIDENCE` from :data:`BOOTSTRAP_RESAMPLES` resamples."""
    from scipy.stats import bootstrap

    data = [np.asarray(a, dtype=np.float64) for a in arrays]
    n = data[0].size
    if n < 2:
        return float("nan"), float("nan")
    if all(np.ptp(a) == 0 for a in data):
        value = float(statistic(*data))
        return value, value
    rng = np.random.default_rng(seed)
    res = bootstrap(
        tuple(data),
        statistic,
        paired=True,
        vectorized=False,
        n_resamples=BOOTSTRAP_RESAMPLES,
        confidence_level=CONFIDENCE,
        method="percentile",
        random_state=rng,
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def bootstrap_backend() -> str:
    """Which bootstrap :func:`bootstrap_interval` uses, with scipy's version (for a result's provenance)."""
    import scipy

    return f"scipy.stats.bootstrap {scipy.__version__}, percentile"


def mean_ci(values) -> dict:
    """The mean of the finite ``values``, its bootstrap interval at ``CONFIDENCE`` (:func:`bootstrap_interval`)
    and how many values were finite (``reached``: the runs that reached a target); ``None`` where none was."""
    arr = np.asarray(values, dtype=np.float64)
    ok = arr[np.isfinite(arr)]
    if ok.size == 0:
        return {"mean": None, "ci": [None, None], "reached": 0}
    low, high = bootstrap_interval((ok,), np.mean)
    return {"mean": float(ok.mean()), "ci": [low, high], "reached": int(ok.size)}


def summarize_cell(runs: list[dict]) -> dict:
    """One (pool, optimiser, recipe, rule) cell over seeds: mean and bootstrap interval of the
    samples to each target (over the seeds that reached it) and of the accuracies at both budgets,
    the realised update-norm ratio to uniform GRPO (the step-size control), the mean curve."""
    norms = np.array([r["norm_ratio"] for r in runs])
    to_target = np.array([r["samples_to_target"] for r in runs], dtype=np.float64)
    return {
        "samples_to_target": [mean_ci(to_target[:, j]) for j in range(to_target.shape[1])],
        "accuracy_at_sample_budget": mean_ci([r["accuracy_at_sample_budget"] for r in runs]),
        "accuracy_at_step_budget": mean_ci([r["accuracy_at_step_budget"] for r in runs]),
        "generated_at_step_budget": float(np.mean([r["generated_at_step_budget"] for r in runs])),
        "norm_ratio": {"mean": float(norms.mean()), "min": float(norms.min()), "max": float(norms.max())},
        "lr": float(runs[0]["lr"]),
        "shares": {k: float(np.mean([r[k] for r in runs])) for k in ("kept_share", "silent_share", "surplus_share")},
        "curve": np.mean([r["curve"] for r in runs], axis=0).tolist(),
        "seeds": len(runs),
    }


def paired_comparison(runs_a: list[dict], runs_b: list[dict], target: int) -> dict:
    """Rule a against rule b at target index ``target``, paired by seed over the seeds where both
    reached it: mean of (a − b) samples with its bootstrap interval, the ratio of means b/a, and
    ``within_noise`` (the interval of the difference holds 0)."""
    a = np.array([r["samples_to_target"][target] for r in runs_a], dtype=np.float64)
    b = np.array([r["samples_to_target"][target] for r in runs_b], dtype=np.float64)
    both = np.isfinite(a) & np.isfinite(b)
    if both.sum() < 2:
        return {"pairs": int(both.sum()), "difference": None, "ci": [None, None], "within_noise": None}
    a, b = a[both], b[both]
    low, high = bootstrap_interval((a - b,), np.mean)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio_ci = bootstrap_interval((a, b), lambda x, y: np.mean(y) / np.mean(x))
    return {
        "pairs": int(both.sum()),
        "difference": float(np.mean(a - b)),
        "ci": [low, high],
        "ratio_b_over_a": float(b.mean() / a.mean()) if a.mean() > 0 else None,
        "ratio_ci": list(ratio_ci),
        "within_noise": bool(low <= 0.0 <= high),
    }


def _best_rule(cells: dict, prefix: str, target: int) -> str | None:
    """The rule with the fewest mean samples to target ``target`` among those every seed brought there."""
    best, value = None, np.inf
    for key, cell in cells.items():
        if not key.startswith(prefix):
            continue
        entry = cell["samples_to_target"][target]
        if entry["reached"] == cell["seeds"] and entry["mean"] is not None and entry["mean"] < value:
            best, value = key.removeprefix(prefix), entry["mean"]
    return best


def summarize_run_study(study: dict, middle: int = 1) -> dict:
    """The training study's table: ``cells`` (:func:`summarize_cell` per pool/optimiser/recipe/rule),
    ``comparisons`` (every rule against uniform and against DAPO, same pool, optimiser and recipe,
    at every target: :func:`paired_comparison`), their count and how many fall outside noise, and
    per pool/optimiser/recipe the best rule at target ``middle`` with DAPO's samples ÷ the best's.
    ``study`` is the dict ``allocation_run_study`` of :mod:`stddial_book.experiments.allocation.controlled_run`
    returns; ``middle`` is an index into its targets (default 1, the middle one)."""
    runs = study["runs"]
    cells = {key: summarize_cell(value) for key, value in runs.items()}
    comparisons, headline = {}, {}
    groups = sorted({key.rsplit("/", 1)[0] for key in runs})
    for group in groups:
        prefix = group + "/"
        rules = [key.removeprefix(prefix) for key in runs if key.startswith(prefix)]
        num_targets = len(next(iter(runs.values()))[0]["samples_to_target"])
        for base in ("uniform", "dapo"):
            if base not in rules:
                continue
            for rule in rules:
                if rule == base:
                    continue
                for j in range(num_targets):
                    comparisons[f"{group}/{rule}_vs_{base}/target{j}"] = paired_comparison(
                        runs[prefix + rule], runs[prefix + base], j
                    )
        best = _best_rule(cells, prefix, middle)
        if best is not None and "dapo" in rules:
            cmp = paired_comparison(runs[prefix + best], runs[prefix + "dapo"], middle)
            headline[group] = {"best_rule": best, "dapo_over_best": cmp.get("ratio_b_over_a"), **cmp}
    made = [c for c in comparisons.values() if c["within_noise"] is not None]
    return {
        "cells": cells,
        "comparisons": comparisons,
        "comparisons_counted": len(made),
        "outside_noise": sum(not c["within_noise"] for c in made),
        "expected_false_alarms": (1 - CONFIDENCE) * len(made),
        "headline": headline,
        "targets": study["targets"],
        "reference_norm": study.get("reference_norm", {}),
        "bootstrap": bootstrap_backend(),
    }
