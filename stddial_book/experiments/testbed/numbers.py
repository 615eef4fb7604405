"""The testbed in numbers: the warm start, held-out and pool starts, model sizes and the resources of runs (chapters 9-12)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stddial_book.core.checks import check_group_size
from stddial_book.experiments.testbed.predictions import hypergeometric_expectation, pool_history

__all__ = [
    "warm_start_numbers",
    "pass_rate_by_carries",
    "heldout_start",
    "pool_start",
    "pool_gain",
    "silent_sides",
    "parameter_counts",
    "profile_table",
    "run_resources",
    "resource_table",
]


def warm_start_numbers(sft_dir) -> dict[str, Any]:
    """Chapter 9: how the warm start in ``sft_dir`` ended (its ``sft.json``): ``steps``, ``stop``
    (the probe's estimate when the stopping rule fired), ``target``, ``pass`` (the held-out pass
    rate measured again with fresh samples), ``pass_n`` (how many samples) and ``time`` (s).
    ``stop`` and ``pass_n`` are None for a warm start recorded before they were logged."""
    from stddial_book.rl.runlog import run_json

    summary = run_json(sft_dir, "sft.json")  # a folder, or a recorded run stored in its study's tables
    return {
        "steps": summary["steps"],
        "stop": summary.get("stop_estimate"),
        "target": summary["target_pass_rate"],
        "pass": summary["pass_rate"],
        "pass_n": summary.get("pass_rate_samples"),
        "time": summary["wall_time_s"],
    }


def pass_rate_by_carries(evaluation, problems) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Chapter 9: per bucket, the carry counts present and the sampled pass rate at each, from an
    :class:`~stddial_book.rl.evaluate.EvalResult` of ``problems`` (in the same order). ``evaluation`` is that
    result; ``problems`` is the list of task problems it evaluated (from ``make_problems``)."""
    _check_evaluation(evaluation)
    problems = _check_problems(problems)
    carries = np.array([p.carries for p in problems])
    if carries.size != evaluation.successes.size:
        raise ValueError(
            f"the evaluation covers {evaluation.successes.size} prompts but {carries.size} problems were "
            "given; pass the problems it evaluated, in order."
        )
    rate = evaluation.successes / evaluation.num_samples
    out = {}
    for b in sorted(set(evaluation.buckets.tolist())):
        sel = evaluation.buckets == b
        present = np.unique(carries[sel])
        out[b] = (present, np.array([rate[sel & (carries == c)].mean() for c in present]))
    return out


def heldout_start(evaluation, problems) -> dict[str, Any]:
    """Chapter 9: where RL starts on the held-out prompts, from an ``EvalResult`` with G samples
    each: ``G``, ``silent`` (all G samples agree), ``mixed`` (the rest), ``greedy``, ``sampled``,
    ``sampled_D2``, ... per bucket, and ``carry_spread_D2``, ...: the largest minus the smallest
    pass rate over the bucket's carry counts (:func:`pass_rate_by_carries`). ``evaluation`` is that
    :class:`~stddial_book.rl.evaluate.EvalResult`, ``problems`` the task problems it evaluated, in order."""
    _check_evaluation(evaluation)
    G = evaluation.num_samples
    out: dict[str, Any] = {
        "G": G,
        "silent": evaluation.silent_fraction,
        "mixed": float(np.mean((evaluation.successes > 0) & (evaluation.successes < G))),
        "greedy": evaluation.greedy,
        "sampled": evaluation.sampled,
    }
    out.update({f"sampled_{b}": v for b, v in evaluation.sampled_by_bucket.items()})
    for b, (_, rates) in pass_rate_by_carries(evaluation, problems).items():
        out[f"carry_spread_{b}"] = float(rates.max() - rates.min())
    return out


def _check_evaluation(evaluation: Any) -> None:
    """Refuse what is not a held-out evaluation (:class:`~stddial_book.rl.evaluate.EvalResult`)."""
    needed = ("successes", "num_samples", "buckets", "greedy", "sampled", "sampled_by_bucket", "silent_fraction")
    if any(not hasattr(evaluation, name) for name in needed):
        raise TypeError(
            f"evaluation must be an EvalResult (what train.evaluate returns); got {type(evaluation).__name__}."
        )


def _check_problems(problems: Any) -> list[Any]:
    """``problems`` as a list of task problems (anything with ``carries`` and ``digits``)."""
    if isinstance(problems, (str, bytes, dict)) or not isinstance(problems, Sequence):
        raise TypeError(f"problems must be a list of Problem (from make_problems); got {type(problems).__name__}.")
    wrong = next((q for q in problems if not (hasattr(q, "carries") and hasattr(q, "digits"))), None)
    if wrong is not None:
        raise TypeError(f"problems must hold Problem objects (from make_problems); found {type(wrong).__name__}.")
    return list(problems)


def pool_start(records: list[dict[str, Any]], problems, group_size: int) -> dict[str, Any]:
    """Chapter 9: the RL pool at the start of a run. ``problems`` are the training problems (the
    pool is their first ``pool_size``). Returns ``samples`` (per prompt), ``mean`` (solve rate),
    ``mean_D2``, ... per digit count, ``zero`` (share of prompts never solved) and ``silent``
    (the unbiased expected silent fraction of a group of ``group_size``, chapter 13). ``records`` is the
    run's log (per-step metric dicts with pool measurements, as :func:`~stddial_book.rl.runlog.load_run` returns)."""
    _, n, K = pool_history(records)
    G = check_group_size(group_size)
    problems = _check_problems(problems)
    if len(problems) < K.shape[1]:
        raise ValueError(
            f"the pool has {K.shape[1]} prompts but only {len(problems)} problems were given; pass the "
            "training problems the run drew its pool from."
        )
    p = K[0] / n
    digits = np.array([q.digits for q in list(problems)[: K.shape[1]]])
    silent_value = np.zeros(G + 1)
    silent_value[[0, G]] = 1.0
    out: dict[str, Any] = {"samples": n, "mean": float(p.mean())}
    out.update({f"mean_D{d}": float(p[digits == d].mean()) for d in sorted(set(digits.tolist()))})
    out.update(
        zero=float(np.mean(K[0] == 0)), silent=float(hypergeometric_expectation(K[0], n, G, silent_value).mean())
    )
    return out


def pool_gain(runs: Sequence[list[dict[str, Any]]]) -> dict[str, float]:
    """Chapter 9: how far a set of runs (seeds) moved the pool's mean solve rate, against the
    noise of measuring it. ``gain`` is the mean over runs of (last − first measurement),
    ``noise`` the standard error of one measurement of the pool mean at the first run's start,
    sqrt(Σ p(1 − p) / n) / N over its N prompts, and ``gain_ratio`` their quotient. ``runs`` is a
    non-empty list of run logs (one list of metric records per seed), each with pool measurements."""
    if isinstance(runs, dict) or not isinstance(runs, Sequence) or not runs:
        raise ValueError("runs must be a non-empty list of run logs (one per seed).")
    gains = []
    for records in runs:
        _, n, K = pool_history(records)
        gains.append(K[-1].mean() / n - K[0].mean() / n)
    _, n, K = pool_history(runs[0])
    p = K[0] / n
    noise = float(np.sqrt(np.sum(p * (1 - p)) / n) / p.size)
    gain = float(np.mean(gains))
    return {"gain": gain, "noise": noise, "gain_ratio": gain / noise if noise > 0 else float("inf")}


def silent_sides(records: list[dict[str, Any]], group_size: int) -> dict[str, np.ndarray]:
    """Chapter 9: at every pool measurement of a run, the pool's mean solve rate and its expected
    silent fraction at ``group_size`` split into all-wrong (k = 0) and all-right (k = G) groups,
    each unbiased from the measured counts (:func:`hypergeometric_expectation`). ``records`` is the run's
    log (per-step metric dicts with pool measurements); ``group_size`` is the G of the groups, at least 2."""
    steps, n, K = pool_history(records)
    G = check_group_size(group_size)
    wrong, right = np.zeros(G + 1), np.zeros(G + 1)
    wrong[0], right[G] = 1.0, 1.0
    return {
        "step": steps,
        "mean": K.mean(axis=1) / n,
        "all_wrong": np.array([hypergeometric_expectation(k, n, G, wrong).mean() for k in K]),
        "all_right": np.array([hypergeometric_expectation(k, n, G, right).mean() for k in K]),
    }


def parameter_counts(profiles: dict) -> dict[str, int]:
    """Chapter 9: the number of parameters of each profile's model (built, randomly initialised).

    ``profiles`` maps a name to a :class:`~stddial_book.rl.profiles.Profile`; the result has the same names."""
    from stddial_book.rl.model import model_for_profile

    return {
        name: int(sum(p.numel() for p in model_for_profile(profile).parameters())) for name, profile in profiles.items()
    }


def profile_table(profiles: dict, counts: dict[str, int]) -> tuple[list[str], list[list[str]]]:
    """Chapter 9: header and rows of the run profiles side by side, one column per profile and one
    row per setting (so the table stays narrow however many settings it shows). ``profiles`` maps a name to
    a :class:`~stddial_book.rl.profiles.Profile`; ``counts`` gives each name its parameter count
    (:func:`parameter_counts`)."""
    from stddial_book.rl.profiles import Profile

    if not isinstance(profiles, dict) or not profiles or not all(isinstance(p, Profile) for p in profiles.values()):
        raise TypeError(
            "profiles must be a non-empty dict of name -> Profile (e.g. stddial_book.rl.profiles.PROFILES)."
        )
    if not isinstance(counts, dict) or set(counts) != set(profiles):
        raise ValueError("counts must give one parameter count per profile (parameter_counts(profiles)).")
    names = list(profiles)

    def row(label: str, value) -> list[str]:
        return [label] + [str(value(profiles[n], n)) for n in names]

    rows = [
        row("device", lambda p, n: p.device),
        row("parameters", lambda p, n: f"{counts[n] / 1e6:.2f} M"),
        row("digits D", lambda p, n: " and ".join(map(str, p.task["digits"]))),
        row("group size G", lambda p, n: p.train["group_size"]),
        row("prompts per step", lambda p, n: p.train["prompts_per_step"]),
        row("pool prompts", lambda p, n: p.train.get("pool_size") or "all"),
        row("minibatches per step", lambda p, n: p.train["num_minibatches"]),
        row("samples per run", lambda p, n: f"{p.train['sample_budget']:,}"),
        row("seeds", lambda p, n: len(p.seeds)),
    ]
    return ["setting"] + names, rows


def run_resources(sft_provenance: dict[str, Any], run_provenance: dict[str, Any]) -> dict[str, Any]:
    """Chapter 9: what a warm start and one RL run cost, from their provenance: ``device``,
    ``sft_s`` and ``run_s`` (wall seconds), ``rss_mb`` (the run's peak resident memory),
    ``gpu_mb`` (peak GPU memory, None on a CPU) and ``samples`` (the run's sample budget).
    ``sft_provenance`` and ``run_provenance`` are the provenance dicts of the warm start and of the RL run
    (the first value :func:`~stddial_book.rl.runlog.load_run` returns)."""
    for name, value in (("sft_provenance", sft_provenance), ("run_provenance", run_provenance)):
        if not isinstance(value, dict):
            raise TypeError(f"{name} must be a provenance dict (load_run's first value); got {type(value).__name__}.")
    try:
        samples = run_provenance["config"]["train"]["sample_budget"]
    except (KeyError, TypeError):
        raise ValueError(
            "run_provenance lacks config.train.sample_budget; pass the provenance load_run returns for an RL run."
        ) from None
    return {
        "device": run_provenance.get("device"),
        "sft_s": sft_provenance.get("wall_time_s"),
        "run_s": run_provenance.get("wall_time_s"),
        "rss_mb": run_provenance.get("peak_rss_mb"),
        "gpu_mb": run_provenance.get("peak_gpu_mb"),
        "samples": samples,
    }


def resource_table(resources: dict[str, dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Chapter 9: header and rows of :func:`run_resources` results side by side, one column each.

    ``resources`` maps a column label to one :func:`run_resources` result."""

    def shown(value, fmt: str) -> str:
        return "–" if value is None else format(value, fmt)

    needed = ("device", "samples", "sft_s", "run_s", "rss_mb", "gpu_mb")
    if (
        not isinstance(resources, dict)
        or not resources
        or not all(isinstance(r, dict) and all(k in r for k in needed) for r in resources.values())
    ):
        raise ValueError("resources must be a non-empty dict of label -> what run_resources returns.")
    labels = list(resources)
    rows = [
        ["device"] + [str(resources[k]["device"]) for k in labels],
        ["samples per run"] + [shown(resources[k]["samples"], ",") for k in labels],
        ["warm start (s)"] + [shown(resources[k]["sft_s"], ".0f") for k in labels],
        ["RL run (s)"] + [shown(resources[k]["run_s"], ".0f") for k in labels],
        ["peak resident memory (MB)"] + [shown(resources[k]["rss_mb"], ".0f") for k in labels],
        ["peak GPU memory (MB)"] + [shown(resources[k]["gpu_mb"], ".0f") for k in labels],
    ]
    return [""] + labels, rows
