"""The allocation rules on the LM testbed: settings, recorded runs, samples to a target (Part V, issue 3(c)).

Every rule trains GRPO from the reference warm start, inside the real trainer
(:func:`stddial_book.rl.trainer.train` with ``TrainConfig.allocation``), at the reference profile's
sample budget: 65,536 generated samples, screening and redraws included. Each rule gets the settings
of the controlled study (:func:`stddial_book.experiments.allocation.signal.build_rule`), so both
studies compare the rules at one step size: B = 32 prompts × 8 samples in the update. The rules that
plan every group size before drawing (Knapsack RL, the dial's rules) reallocate the B samples of a
random batch of 32 prompts each step; the rules that draw in rounds (DAPO, GRESO, SPEED,
Reinforce-Ada) draw from the whole pool and may generate up to 4 B a step. The pass-rate estimator
is the controlled study's (a Beta posterior whose counts decay by 0.9 at each visit).

The runs are recorded with ``python -m stddial_book record --profile reference --recipes grpo
--allocations ...`` into ``data/runs/allocation`` (:mod:`stddial_book.experiments.testbed.record`).
:func:`lm_allocation_study` reads them and measures what the controlled study measures, in the same
currency: generated samples to reach the pool accuracy uniform GRPO reaches after 1/15, 1/5 and all
of its budget (pool accuracy: the mean over the 256 pool prompts of k/32, measured every 16 steps),
the accuracy at the budget, the realised update norm against uniform GRPO's (the step-size control:
AdamW's step is set by its learning rate, not by the gradient's scale, so no rate is retuned; the
ratio shows whether that held), and the final accuracy by quartile of the prompts' starting
difficulty. The cells are :func:`stddial_book.experiments.allocation.signal.summarize_run_study`'s;
the comparisons, paired by seed and counted, use Student-t intervals (:func:`paired_t_comparison`):
with five seeds a percentile bootstrap would be much too narrow.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from stddial_book.experiments.allocation.controlled_run import TARGET_FRACTIONS
from stddial_book.experiments.allocation.signal import PLAN_AHEAD, build_rule
from stddial_book.experiments.testbed.logs import logged_update_norm

__all__ = [
    "LM_RULES",
    "ESTIMATOR_DECAY",
    "lm_allocation_changes",
    "pool_curve",
    "samples_to",
    "lm_run_measures",
    "load_rule_runs",
    "lm_allocation_study",
    "lm_benchmark",
    "benchmark_of",
    "paired_t_comparison",
    "load_lm_summary",
    "RUNS_PROFILE",
    "LM_ALLOCATION_SUMMARY_FILE",
    "kept_at",
    "silent_ceiling",
    "block_accuracy",
    "persistent_benchmark",
    "matched_accuracy",
    "PERSISTENT_RULES",
    "PERSISTENT_GOAL",
    "PERSISTENT_RUNS",
    "PERSISTENT_SUMMARY_FILE",
    "RECORDABLE_RULES",
]

#: The rules recorded on the LM testbed, uniform first. ``knapsack_oracle`` is not among them: it
#: needs each prompt's true pass rate at every step, which a trained model does not have.
LM_RULES = ("uniform", "dapo", "greso", "knapsack", "speed", "reinforce_ada", "dial_grpo", "dial_dr_grpo")
#: Every rule a recording may run: the study's, and Knapsack RL as its own code allocates (plug-in rates).
RECORDABLE_RULES = (*LM_RULES, "knapsack_paper")
#: The estimator's memory (the controlled study's): counts decay by this factor at each visit.
ESTIMATOR_DECAY = 0.9


def lm_allocation_changes(rule: str, prompts_per_step: int = 32, group_size: int = 8) -> dict[str, Any]:
    """The :class:`~stddial_book.rl.configs.TrainConfig` changes that run ``rule`` as the controlled
    study does: its settings and step budget from :func:`build_rule`, a random batch of
    ``prompts_per_step`` candidates a step for a plan-ahead rule, and the study's estimator.
    ``group_size`` is G, the samples per prompt of the step size B = ``prompts_per_step`` × G (default 8);
    ``rule`` is one of :data:`RECORDABLE_RULES` (``"uniform"`` needs no change: an empty dict)."""
    if rule == "uniform":
        return {}
    if rule not in RECORDABLE_RULES:
        raise ValueError(f"rule must be one of {list(RECORDABLE_RULES)}; got {rule!r}.")
    settings, budget = build_rule(rule, prompts_per_step, group_size)
    options = {k: v for k, v in dataclasses.asdict(settings).items() if v is not None and k != "recipe"}
    options["decay"] = ESTIMATOR_DECAY
    return {
        "allocation": rule,
        "allocation_options": options,
        "allocation_budget": budget,
        "allocation_candidates": prompts_per_step if rule in PLAN_AHEAD else None,
    }


def pool_curve(records: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(generated samples, pool accuracy, per-prompt k/n) at each pool measurement of a run log.

    ``records`` is the run log's list of per-step dicts (:func:`stddial_book.rl.runlog.load_run`'s
    second item); only the rows with a pool measurement (``pool/k``) count."""
    rows = [r for r in records if "pool/k" in r]
    if not rows:
        raise ValueError("this run log holds no pool measurement (pool/k); train with pool_size and eval_every.")
    generated = np.array([float(r.get("samples/generated", 0)) for r in rows])
    rates = np.array([np.asarray(r["pool/k"], dtype=np.float64) / float(r["pool/n"]) for r in rows])
    return generated, rates.mean(axis=1), rates


def samples_to(generated: np.ndarray, accuracy: np.ndarray, target: float) -> float:
    """Generated samples at which ``accuracy`` first reaches ``target``, linear between measurements;
    NaN if it never does. ``generated`` and ``accuracy`` are equal-length 1-D arrays, one entry per
    measurement (cumulative samples and pool accuracy in [0, 1], as :func:`pool_curve` gives them)."""
    above = np.flatnonzero(np.asarray(accuracy) >= target)
    if above.size == 0:
        return float("nan")
    i = int(above[0])
    if i == 0:
        return 0.0
    a0, a1, g0, g1 = accuracy[i - 1], accuracy[i], generated[i - 1], generated[i]
    return float(g0 + (g1 - g0) * (target - a0) / (a1 - a0))


def _shares(records: list[dict[str, Any]]) -> dict[str, float]:
    steps = [r for r in records if "samples/step_generated" in r]
    generated = sum(float(r["samples/step_generated"]) for r in steps) or 1.0
    silent = sum(float(r.get("samples/step_discarded_silent", 0)) for r in steps)
    surplus = sum(float(r.get("samples/step_discarded_surplus", 0)) for r in steps)
    kept = float(records[-1].get("samples/kept", generated - silent - surplus)) if records else 0.0
    return {"kept_share": kept / generated, "silent_share": silent / generated, "surplus_share": surplus / generated}


def lm_run_measures(
    records: list[dict[str, Any]], targets, budget: float, reference_norm: float, quartile_of: np.ndarray
) -> dict[str, Any]:
    """One recorded run's numbers in the controlled study's layout (:func:`summarize_run_study`),
    plus ``quartile_accuracy``: the last measurement's pool accuracy in each quartile of the prompts'
    starting difficulty (``quartile_of[i]`` = 0 for the hardest quarter ... 3). ``records`` is the
    run's log (:func:`pool_curve`), ``targets`` the pool accuracies to time, ``budget`` the sample
    budget (generated samples) at which the accuracy is read, ``reference_norm`` uniform GRPO's mean
    logged update norm (the run's ``norm_ratio`` is its own over it); ``quartile_of`` is an int array,
    one entry per pool prompt."""
    generated, accuracy, rates = pool_curve(records)
    at_budget = float(np.interp(budget, generated, accuracy))
    grid = np.linspace(0.0, budget, 16)
    return {
        "samples_to_target": [samples_to(generated, accuracy, t) for t in targets],
        "accuracy_at_sample_budget": at_budget,
        "accuracy_at_step_budget": at_budget,  # every rule's step budget buys the same samples here
        "generated_at_step_budget": float(budget),
        "curve": [float(np.interp(g, generated, accuracy)) for g in grid],
        "norm_ratio": logged_update_norm(records) / reference_norm,
        "lr": 0.0,
        "quartile_accuracy": [float(rates[-1][quartile_of == q].mean()) for q in range(4)],
        **_shares(records),
    }


def load_rule_runs(directory: Path, recipe: str, rules=LM_RULES) -> dict[str, list[tuple[dict, list]]]:
    """Each rule's recorded runs as (provenance, log) pairs, for the seeds that every rule found has
    (comparisons pair runs by seed, so a seed some rule has not finished yet is left out of all of them).
    ``directory`` holds the runs (folders, or a study's tables), ``recipe`` names them (``{recipe}-seed0``
    for uniform groups, ``{recipe}-{rule}-seed0`` otherwise), ``rules`` lists the rules to look for; a rule
    without runs is left out, uniform must be there."""
    from fnmatch import fnmatchcase

    from stddial_book.rl.runlog import load_run, run_folders

    found: dict[str, dict[int, Path]] = {}
    runs = run_folders(directory)  # folders, or runs stored in the study's tables
    for rule in rules:
        middle = "" if rule == "uniform" else f"-{rule}"
        paths = [p for p in runs if fnmatchcase(p.name, f"{recipe}{middle}-seed*")]
        by_seed = {int(p.name.rsplit("seed", 1)[1]): p for p in paths if p.name.rsplit("seed", 1)[1].isdigit()}
        if by_seed:
            found[rule] = by_seed
    if "uniform" not in found:
        raise ValueError(f"{directory} holds no uniform {recipe} run ({recipe}-seed0, ...), the study's reference.")
    seeds = sorted(set.intersection(*(set(by_seed) for by_seed in found.values())))
    if not seeds:
        raise ValueError(f"{directory}: no seed was recorded under every rule found ({sorted(found)}).")
    return {rule: [load_run(by_seed[s]) for s in seeds] for rule, by_seed in found.items()}


def lm_allocation_study(directory: str | Path, recipe: str = "grpo", rules=LM_RULES) -> dict[str, Any]:
    """The recorded LM-testbed runs of every rule in ``directory``, measured and compared: the
    targets from uniform GRPO's mean curve, each run's :func:`lm_run_measures`, then
    :func:`summarize_run_study` (``cells``, counted ``comparisons``, ``headline``) with the per-rule
    quartile accuracies beside it. ``recipe`` picks the runs by name (``{recipe}-seed0``,
    ``{recipe}-{rule}-seed0``, ...; default ``"grpo"``); ``rules`` lists the rules to look for (default
    :data:`LM_RULES`; a rule without runs is left out, uniform must be there); only seeds every found
    rule has are used."""
    return _study_of(load_rule_runs(Path(directory), recipe, rules), recipe)


def _study_of(runs: dict[str, list[tuple[dict, list]]], recipe: str, middle: int = 1) -> dict[str, Any]:
    """:func:`lm_allocation_study` on runs already loaded (:func:`load_rule_runs`), its headline at target
    index ``middle``."""
    from stddial_book.experiments.allocation.signal import mean_ci, summarize_run_study

    budget = float(runs["uniform"][0][0]["config"]["train"]["sample_budget"])
    curves = [pool_curve(records) for _, records in runs["uniform"]]
    # uniform GRPO's mean pool curve (each seed's linear between its measurements) at each fraction of the budget
    targets = [float(np.mean([np.interp(f * budget, g, a) for g, a, _ in curves])) for f in TARGET_FRACTIONS]
    start = np.mean([rates[0] for _, _, rates in curves], axis=0)  # each prompt's starting k/n, over seeds
    order = np.argsort(start, kind="stable")
    quartile_of = np.empty(start.size, dtype=np.int64)
    quartile_of[order] = np.arange(start.size) * 4 // start.size
    reference_norm = float(np.mean([logged_update_norm(records) for _, records in runs["uniform"]]))
    measured = {
        f"lm/adamw/{recipe}/{rule}": [
            lm_run_measures(rec, targets, budget, reference_norm, quartile_of) for _, rec in pairs
        ]
        for rule, pairs in runs.items()
    }
    summary = summarize_run_study({"runs": measured, "targets": targets, "reference_norm": {"lm": reference_norm}})
    summary.update(_t_comparisons(measured, len(targets), middle))
    summary["quartiles"] = {
        key.rsplit("/", 1)[1]: [mean_ci([r["quartile_accuracy"][q] for r in value]) for q in range(4)]
        for key, value in measured.items()
    }
    summary["seeds"] = {rule: len(pairs) for rule, pairs in runs.items()}
    summary["commits"] = sorted({prov.get("git_commit", "") for pairs in runs.values() for prov, _ in pairs})
    summary["sample_budget"] = budget
    return summary


def paired_t_comparison(runs_a: list[dict], runs_b: list[dict], target: int, level: float = 0.95) -> dict:
    """Rule a against rule b at target index ``target``, paired by seed over the seeds where both
    reached it, for a handful of seeds: the per-seed ratio b/a of samples to target, its geometric
    mean and a Student-t interval on the log ratio (a percentile bootstrap of five values is far too
    narrow), the mean difference a − b with its t interval, and ``within_noise`` (the ratio's
    interval holds 1). ``runs_a`` and ``runs_b`` are per-seed :func:`lm_run_measures` dicts in the same
    seed order; ``level`` is the intervals' confidence level in (0, 1) (default 0.95)."""
    from scipy import stats

    a = np.array([r["samples_to_target"][target] for r in runs_a], dtype=np.float64)
    b = np.array([r["samples_to_target"][target] for r in runs_b], dtype=np.float64)
    both = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    n = int(both.sum())
    if n < 2:
        return {"pairs": n, "difference": None, "ci": [None, None], "ratio_b_over_a": None, "within_noise": None}
    a, b = a[both], b[both]
    t = float(stats.t.ppf(0.5 + level / 2, n - 1))
    logs, diffs = np.log(b / a), a - b
    half_log, half_diff = t * logs.std(ddof=1) / np.sqrt(n), t * diffs.std(ddof=1) / np.sqrt(n)
    low, high = float(np.exp(logs.mean() - half_log)), float(np.exp(logs.mean() + half_log))
    return {
        "pairs": n,
        "difference": float(diffs.mean()),
        "ci": [float(diffs.mean() - half_diff), float(diffs.mean() + half_diff)],
        "ratio_b_over_a": float(np.exp(logs.mean())),
        "ratio_ci": [low, high],
        "within_noise": bool(low <= 1.0 <= high),
        "interval": f"Student t, {level:.0%}, {n - 1} df",
        # the smallest ratio this many seeds would detect 80% of the time at this spread
        "detectable_ratio": float(np.exp((t + stats.t.ppf(0.8, n - 1)) * logs.std(ddof=1) / np.sqrt(n))),
    }


def _t_comparisons(measured: dict[str, list[dict]], num_targets: int, middle: int = 1) -> dict[str, Any]:
    """Every rule against uniform and against DAPO at every target (:func:`paired_t_comparison`),
    counted, and the headline: DAPO against the rule with the fewest mean samples to target ``middle``
    among those that reached it on every seed."""
    prefix = "lm/adamw/grpo/"
    rules = [key.removeprefix(prefix) for key in measured]
    comparisons = {}
    for base in ("uniform", "dapo"):
        for rule in rules:
            if base in rules and rule != base:
                for j in range(num_targets):
                    comparisons[f"{prefix}{rule}_vs_{base}/target{j}"] = paired_t_comparison(
                        measured[prefix + rule], measured[prefix + base], j
                    )
    for j in range(num_targets):  # uniform against DAPO is DAPO against uniform inverted: one comparison, counted once
        inverse = comparisons.get(f"{prefix}uniform_vs_dapo/target{j}")
        if inverse is not None and f"{prefix}dapo_vs_uniform/target{j}" in comparisons:
            inverse["inverse_of"] = f"{prefix}dapo_vs_uniform/target{j}"
    made = [c for c in comparisons.values() if c["within_noise"] is not None and "inverse_of" not in c]
    means = {
        rule: np.mean([r["samples_to_target"][middle] for r in measured[prefix + rule]])
        for rule in rules
        if all(np.isfinite(r["samples_to_target"][middle]) for r in measured[prefix + rule])
    }
    headline = {}
    if means and "dapo" in rules:
        best = min(means, key=means.get)
        cmp = paired_t_comparison(measured[prefix + best], measured[prefix + "dapo"], middle)
        headline[prefix.rstrip("/")] = {"best_rule": best, "dapo_over_best": cmp.get("ratio_b_over_a"), **cmp}
    return {
        "comparisons": comparisons,
        "comparisons_counted": len(made),
        "outside_noise": sum(not c["within_noise"] for c in made),
        "expected_false_alarms": 0.05 * len(made),
        "headline": headline,
        "intervals": "paired by seed; Student t on the log of the per-seed ratio of samples to target",
    }


#: Where the recorded runs live in a checkout (``data/runs/allocation``; they are not in the wheel:
#: forty logs would take most of its data budget), and the summary the package ships instead.
RUNS_PROFILE = "allocation"
LM_ALLOCATION_SUMMARY_FILE = ("allocation", "allocation_lm.json.gz")


def lm_benchmark(directory: str | Path, middle: int = 1, rules=LM_RULES) -> dict[str, Any]:
    """:func:`lm_allocation_study` as the benchmark files hold it: the study, and the headline
    ``samples_to_target_vs_dapo`` (DAPO's mean generated samples to the middle target ÷ the best
    rule's, paired by seed, with its Student-t interval; None when no rule reached it on every seed)
    with the ceiling beside it (:func:`silent_ceiling` on the DAPO runs, also ``ceiling_vs_dapo``).
    ``directory`` holds the recorded runs; ``middle`` is the headline's target index (default 1: uniform
    GRPO's accuracy after 1/5 of its budget); ``rules`` the rules compared (default :data:`LM_RULES`)."""
    return benchmark_of(load_rule_runs(Path(directory), "grpo", rules), middle, rules)


def benchmark_of(runs: dict[str, list[tuple[dict, list]]], middle: int, rules) -> dict[str, Any]:
    """:func:`lm_benchmark` on runs already loaded by :func:`load_rule_runs` (``runs``), so a caller that
    reads them too loads them once; ``middle`` is the headline's target index, ``rules`` the rules
    compared (the ceiling is added when DAPO is among them)."""
    study = _study_of(runs, "grpo", middle)
    head = study["headline"].get("lm/adamw/grpo", {})
    study["samples_to_target_vs_dapo"] = {
        "value": head.get("dapo_over_best"),
        "best_rule": head.get("best_rule"),
        "ratio_ci": head.get("ratio_ci"),
        "within_noise": head.get("within_noise"),
        "pairs": head.get("pairs"),
        "detectable_ratio": head.get("detectable_ratio"),
        "meaning": "DAPO's mean generated samples to the middle target (uniform GRPO's pool accuracy after 1/5 "
        "of its sample budget) / the best rule's, paired by seed; LM testbed, GRPO, AdamW at one learning rate "
        "(the realised update norms are in cells[*].norm_ratio)",
    }
    study["middle_target"] = middle
    if "dapo" in rules and "dapo" in runs:
        # the ceiling beside the headline: DAPO's samples to the middle target ÷ those it kept by then
        logs = [records for _, records in runs["dapo"]]
        measured = [
            {"samples_to_target": [samples_to(g, a, t) for t in study["targets"]]}
            for g, a in (pool_curve(log)[:2] for log in logs)
        ]
        study["ceiling_vs_dapo"] = silent_ceiling(measured, logs, middle)
        study["samples_to_target_vs_dapo"]["ceiling"] = study["ceiling_vs_dapo"]
    return study


def load_lm_summary(file: tuple[str, str] = LM_ALLOCATION_SUMMARY_FILE) -> dict[str, Any] | None:
    """The shipped summary of a study of recorded LM-testbed runs, or None when it has not been made
    yet: by default the transient-silence study (``data/allocation/allocation_lm.json.gz``, written by
    ``bench/bench_allocation_lm.py``); ``PERSISTENT_SUMMARY_FILE`` gives the persistent-silence one
    (written by ``bench/bench_allocation_persistent.py``). ``file`` is the summary's path under the
    package data, as a (folder, file name) pair."""
    import gzip
    import json

    from stddial_book.core.resources import data_path

    path = data_path(*file)
    if not path.is_file():
        return None
    return json.loads(gzip.decompress(path.read_bytes()))


#: The rules of the persistent-silence study (data/runs/persistent/PLAN.md), uniform first.
PERSISTENT_RULES = ("uniform", "dapo", "greso", "knapsack", "dial_grpo")
#: The goal its plan states for the primary comparison: DAPO's samples to the middle target ÷ the best
#: rule's of at least this much.
PERSISTENT_GOAL = 1.5
#: Where its recorded runs live in a checkout, and the summary the package ships.
PERSISTENT_RUNS = "persistent"
PERSISTENT_SUMMARY_FILE = ("allocation", "allocation_persistent.json.gz")


def kept_at(records: list[dict[str, Any]], generated: float) -> float:
    """Samples a run had kept for its updates (not discarded as silent or surplus) by the time it had
    generated ``generated`` samples, linear between logged steps; NaN past the run's end. ``records`` is
    the run's log (per-step dicts with ``samples/generated`` and ``samples/kept``)."""
    rows = [r for r in records if "samples/generated" in r and "samples/kept" in r]
    g = np.array([0.0] + [float(r["samples/generated"]) for r in rows])
    k = np.array([0.0] + [float(r["samples/kept"]) for r in rows])
    if not np.isfinite(generated) or generated > g[-1]:
        return float("nan")
    return float(np.interp(generated, g, k))


def silent_ceiling(dapo_runs: list[dict[str, Any]], records: list[list[dict]], target: int, level=0.95) -> dict:
    """The ceiling of any rule against DAPO at target index ``target``: per seed, DAPO's generated
    samples to the target ÷ the samples it kept up to then (what DAPO would need if the groups it
    generated and discarded had cost nothing); the geometric mean with a Student-t interval on the
    logs. ``dapo_runs`` are :func:`lm_run_measures` results, ``records`` the same runs' logs; ``level``
    is the interval's confidence level in (0, 1) (default 0.95)."""
    from scipy import stats

    ratios = []
    for measured, log in zip(dapo_runs, records):
        spent = measured["samples_to_target"][target]
        kept = kept_at(log, spent)
        if np.isfinite(spent) and np.isfinite(kept) and kept > 0:
            ratios.append(spent / kept)
    n = len(ratios)
    if n < 2:
        return {"value": float(ratios[0]) if ratios else None, "ratio_ci": [None, None], "pairs": n}
    logs = np.log(ratios)
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * logs.std(ddof=1) / np.sqrt(n)
    return {
        "value": float(np.exp(logs.mean())),
        "ratio_ci": [float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))],
        "per_seed": [float(r) for r in ratios],
        "pairs": n,
        "meaning": "DAPO's generated samples to the target / the samples it kept by then, per seed: the most a "
        "rule that paid nothing for silent groups could save against DAPO on DAPO's own trajectory",
    }


def block_accuracy(records: list[dict[str, Any]], size: int) -> dict[str, float]:
    """Pool accuracy of the declared block (the pool's first ``size`` prompts) and of the rest, at the
    first and the last pool measurement, and the share of the block never solved at the last one.
    ``records`` is the run's log (:func:`pool_curve`)."""
    _, _, rates = pool_curve(records)
    return {
        "block_start": float(rates[0][:size].mean()),
        "block_end": float(rates[-1][:size].mean()),
        "block_silent_end": float(np.mean(rates[-1][:size] == 0.0)),
        "rest_start": float(rates[0][size:].mean()),
        "rest_end": float(rates[-1][size:].mean()),
    }


def persistent_benchmark(directory: str | Path, middle: int = 1) -> dict[str, Any]:
    """The persistent-silence study (data/runs/persistent/PLAN.md) as the benchmark files hold it:
    :func:`lm_benchmark` on its runs (the ceiling beside the headline included), and every rule's
    :func:`block_accuracy` (mean over the seeds every rule has). ``directory`` holds the study's
    recorded runs; ``middle`` is the headline's target index (default 1: uniform GRPO's accuracy after
    1/5 of its budget)."""
    runs = load_rule_runs(Path(directory), "grpo", PERSISTENT_RULES)
    study = benchmark_of(runs, middle, PERSISTENT_RULES)
    size = int(runs["uniform"][0][0]["config"]["pool_block"]["size"])
    study["blocks"] = _mean_blocks(runs, size)
    study["block_size"] = size
    study["pool_size"] = int(runs["uniform"][0][0]["config"]["train"]["pool_size"])
    study["samples_to_target_vs_dapo"]["meaning"] = (
        "DAPO's mean generated samples to the middle target (uniform GRPO's pool accuracy after 1/5 of its "
        "sample budget) / the best rule's, paired by seed; the persistent-silence pool (171 of 256 prompts "
        "4-digit sums), GRPO, AdamW at one learning rate (the realised update norms are in cells[*].norm_ratio)"
    )
    # the resolution of samples to the target: the pool is measured every eval_every steps, and the
    # samples between two measurements are interpolated linearly; a run that crossed the target before its
    # second measurement was timed by its mean rate of gain over its first interval
    study["middle_crossing"] = {
        rule: {
            "first_interval": sum(_crossing(log, study["targets"][middle]) == 1 for _, log in pairs),
            "runs": len(pairs),
            "second_measurement_at": float(np.mean([pool_curve(log)[0][1] for _, log in pairs])),
        }
        for rule, pairs in runs.items()
    }
    study["exploratory_matched_accuracy"] = matched_accuracy(runs, study["headline"]["lm/adamw/grpo"]["best_rule"])
    if any(p.name.startswith("grpo-knapsack_paper-seed") for p in _run_paths(Path(directory))):
        # the plan's amendment: Knapsack RL as its code allocates, secondary (not in the primary's choice)
        both = lm_allocation_study(directory, rules=("uniform", "dapo", "knapsack", "knapsack_paper"))
        study["secondary_knapsack_paper"] = {
            key: value for key, value in both["comparisons"].items() if "knapsack_paper" in key
        } | {
            "seeds": both["seeds"],
            "blocks": _mean_blocks(load_rule_runs(Path(directory), "grpo", ("uniform", "knapsack_paper")), size),
        }
    return study


def matched_accuracy(runs: dict[str, list[tuple[dict, list]]], best: str) -> dict[str, Any]:
    """Exploratory, not in the plan: every rule's pool accuracy (linear between its measurements) at the
    samples DAPO had generated at its second pool measurement, per seed; and ``best`` − DAPO there, paired
    by seed, with a Student-t interval. DAPO is measured there, not interpolated: the check does not rest
    on interpolating DAPO's long first interval. ``runs`` maps each rule to its (provenance, log) pairs,
    one per seed in the same seed order for every rule, DAPO among them; ``best`` names the rule set
    against DAPO."""
    from scipy import stats

    at = [pool_curve(log)[0][1] for _, log in runs["dapo"]]
    per_rule = {
        rule: [float(np.interp(g, *pool_curve(log)[:2])) for g, (_, log) in zip(at, pairs)]
        for rule, pairs in runs.items()
    }
    diff = np.array(per_rule[best]) - np.array(per_rule["dapo"])
    test = stats.ttest_rel(per_rule[best], per_rule["dapo"])
    ci = test.confidence_interval(0.95)
    return {
        "generated": [float(g) for g in at],
        "accuracy": per_rule,
        "best_minus_dapo": {
            "rule": best,
            "mean": float(diff.mean()),
            "ci": [float(ci.low), float(ci.high)],
            "p": float(test.pvalue),
            "df": int(diff.size - 1),
            "seeds_above": int((diff > 0).sum()),
        },
        "label": "exploratory (not in data/runs/persistent/PLAN.md)",
    }


def _crossing(records: list[dict[str, Any]], target: float) -> int:
    """Index of the first pool measurement at or above ``target`` (-1: never)."""
    _, accuracy, _ = pool_curve(records)
    above = np.flatnonzero(accuracy >= target)
    return int(above[0]) if above.size else -1


def _run_paths(directory: Path) -> list[Path]:
    from stddial_book.rl.runlog import run_folders

    return list(run_folders(directory))


def _mean_blocks(runs: dict[str, list[tuple[dict, list]]], size: int) -> dict[str, dict[str, float]]:
    return {
        rule: {key: float(np.mean([block_accuracy(log, size)[key] for _, log in pairs])) for key in _BLOCK_KEYS}
        for rule, pairs in runs.items()
    }


_BLOCK_KEYS = ("block_start", "block_end", "block_silent_end", "rest_start", "rest_end")
