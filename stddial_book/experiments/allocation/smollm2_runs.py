"""Part V on a pretrained model: the allocation rules' recorded runs on SmolLM2-135M-Instruct's arithmetic pool
(data/runs/smollm2_allocation/PLAN.md), analysed as the plan fixed before the runs.

The primary comparison and its ceiling are the testbed studies'
(:func:`~stddial_book.experiments.allocation.testbed_runs.benchmark_of`); what this module adds is what only a
real model's runs have: held-out accuracy on questions never trained on, and the persistence of silence on the
pool (the questions with no right answer at the start and at the end)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from stddial_book.experiments.allocation.testbed_runs import benchmark_of, load_rule_runs, pool_curve

__all__ = [
    "SMOLLM2_RULES",
    "SMOLLM2_RUNS",
    "SMOLLM2_SUMMARY_FILE",
    "SILENT_STEPS",
    "heldout_ends",
    "silence_persistence",
    "generated_silence",
    "paired_change",
    "fastest_besides_dapo",
    "smollm2_benchmark",
]

#: The plan's rules, uniform GRPO first.
SMOLLM2_RULES = ("uniform", "dapo", "greso", "knapsack_paper", "dial_grpo")
#: Where the recorded runs live in a checkout (data/runs/smollm2_allocation), and the summary the package ships.
SMOLLM2_RUNS = "smollm2_allocation"
SMOLLM2_SUMMARY_FILE = ("allocation", "allocation_smollm2.json.gz")
#: Training steps averaged at each end of a run for the silent fraction of its generated groups.
SILENT_STEPS = 5


def heldout_ends(records: list[dict[str, Any]]) -> dict[str, float]:
    """A run's held-out accuracy at its first and its last evaluation, sampled (one completion a question at
    the run's temperature) and greedy. ``records`` is the run's log (per-step dicts; the evaluation rows
    hold ``eval/accuracy_sampled`` and ``eval/accuracy_greedy``)."""
    rows = [r for r in records if "eval/accuracy_sampled" in r]
    if not rows:
        raise ValueError("this run log holds no held-out evaluation (eval/accuracy_sampled); train with eval_every.")
    return {
        f"{kind}_{end}": float(row[f"eval/accuracy_{kind}"])
        for kind in ("sampled", "greedy")
        for end, row in (("start", rows[0]), ("end", rows[-1]))
    }


def silence_persistence(records: list[dict[str, Any]]) -> dict[str, float]:
    """Which pool questions were never solved: the share with no right answer among their pool samples at the
    first measurement, at the last, at both, and of those unsolved at the first, the share still unsolved at
    the last (how persistent silence is, which bounds what skipping can save). ``records`` is the run's log
    (:func:`~stddial_book.experiments.allocation.testbed_runs.pool_curve`)."""
    _, _, rates = pool_curve(records)
    start, end = rates[0] == 0.0, rates[-1] == 0.0
    return {
        "unsolved_start": float(start.mean()),
        "unsolved_end": float(end.mean()),
        "unsolved_both": float((start & end).mean()),
        "still_unsolved": float((start & end).sum() / max(int(start.sum()), 1)),
    }


def generated_silence(records: list[dict[str, Any]], steps: int = SILENT_STEPS) -> dict[str, float]:
    """The share of a run's generated groups that were silent (unanimous in correctness), averaged over its
    first ``steps`` and its last ``steps`` training steps (``dial/silent_fraction``, which counts every group
    generated, those a rule discarded included). ``records`` is the run's log."""
    values = [float(r["dial/silent_fraction"]) for r in records if "dial/silent_fraction" in r]
    if not values:
        raise ValueError("this run log holds no training step (dial/silent_fraction).")
    return {"first": float(np.mean(values[:steps])), "last": float(np.mean(values[-steps:]))}


def paired_change(before, after, level: float = 0.95) -> dict[str, Any]:
    """Mean of ``after`` − ``before`` (paired by seed, equal-length sequences of numbers) with its Student-t
    interval at ``level`` (scipy.stats.ttest_rel); None for the interval with fewer than two pairs."""
    from scipy import stats

    diff = np.asarray(after, dtype=np.float64) - np.asarray(before, dtype=np.float64)
    if diff.size < 2:
        return {"mean": float(diff.mean()) if diff.size else None, "ci": [None, None], "pairs": int(diff.size)}
    ci = stats.ttest_rel(after, before).confidence_interval(level)
    return {"mean": float(diff.mean()), "ci": [float(ci.low), float(ci.high)], "pairs": int(diff.size)}


def smollm2_benchmark(directory: str | Path, middle: int = 1) -> dict[str, Any]:
    """The SmolLM2 allocation study as the benchmark files hold it: the testbed studies' analysis (targets
    from uniform GRPO's mean pool curve, samples to each target, the comparisons counted, the headline DAPO ÷
    best with its Student-t interval and the silent ceiling beside it) on the plan's rules, and per rule the
    descriptive numbers the plan names: held-out accuracy at the start and the end (:func:`heldout_ends`,
    the change paired by seed), the silent share of generated groups (:func:`generated_silence`) and the
    persistence of silence on the pool (:func:`silence_persistence`), means over seeds (``seed_ids``); and each
    run's measured pool curve (``pool_curves``: per rule, per seed, the generated samples and the pool accuracy at each
    measurement), for the figure. ``directory`` holds
    the recorded runs; ``middle`` is the headline's target index (default 1: uniform GRPO's pool accuracy
    after 1/5 of its budget)."""
    runs = load_rule_runs(Path(directory), "grpo", SMOLLM2_RULES)
    study = benchmark_of(runs, middle, SMOLLM2_RULES)
    study["samples_to_target_vs_dapo"]["meaning"] = (
        "DAPO's mean generated samples to the middle target (uniform GRPO's pool accuracy after 1/5 of its "
        "sample budget) / the best rule's, paired by seed; SmolLM2-135M-Instruct (Q4_1, dequantized) with LoRA "
        "on 224 arithmetic questions, GRPO, AdamW at one learning rate (the realised update norms are in "
        "cells[*].norm_ratio)"
    )
    heldout, silence, persistence = {}, {}, {}
    for rule, pairs in runs.items():
        ends = [heldout_ends(log) for _, log in pairs]
        heldout[rule] = {key: float(np.mean([e[key] for e in ends])) for key in ends[0]} | {
            "sampled_change": paired_change([e["sampled_start"] for e in ends], [e["sampled_end"] for e in ends]),
            "greedy_change": paired_change([e["greedy_start"] for e in ends], [e["greedy_end"] for e in ends]),
        }
        silence[rule] = _mean_of([generated_silence(log) for _, log in pairs])
        persistence[rule] = _mean_of([silence_persistence(log) for _, log in pairs])
    study["heldout"], study["generated_silence"], study["persistence"] = heldout, silence, persistence
    study["fastest_besides_dapo"] = fastest_besides_dapo(study, middle)
    study["pool_size"] = int(runs["uniform"][0][0]["config"]["train"]["pool_size"])
    # the testbed's accuracy by quartile of starting difficulty is left out: here most questions start with no
    # right answer (189 of 224 in the runs' first measurement), so the quartiles would split ties by file order
    study.pop("quartiles", None)
    study["seed_ids"] = [int(provenance["seed"]) for provenance, _ in runs["uniform"]]
    study["measured_at"] = [float(g) for g in pool_curve(runs["uniform"][0][1])[0]]
    # each run's measured pool curve (generated samples, pool accuracy), seeds in the order of study["seed_ids"]
    study["pool_curves"] = {
        rule: [[[float(x) for x in v] for v in pool_curve(log)[:2]] for _, log in pairs] for rule, pairs in runs.items()
    }
    return study


def fastest_besides_dapo(study: dict[str, Any], middle: int = 1) -> dict[str, Any] | None:
    """The rule other than DAPO with the fewest mean generated samples to target ``middle`` among those that
    reached it on every seed, and its paired comparison with DAPO there (DAPO's samples ÷ the rule's); None
    when no such rule exists. The plan's primary takes the best rule of all, which may be DAPO itself (a ratio
    of 1 by construction): this is the comparison to read beside it then. ``study`` is a
    :func:`~stddial_book.experiments.allocation.testbed_runs.benchmark_of` result."""
    means = {
        key.rsplit("/", 1)[1]: cell["samples_to_target"][middle]["mean"]
        for key, cell in study["cells"].items()
        if not key.endswith("/dapo") and cell["samples_to_target"][middle]["reached"] == cell["seeds"]
    }
    if not means:
        return None
    rule = min(means, key=means.get)
    return {"rule": rule, **study["comparisons"].get(f"lm/adamw/grpo/{rule}_vs_dapo/target{middle}", {})}


def _mean_of(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: float(np.mean([row[key] for row in rows])) for key in rows[0]}
