"""The paper's predictions checked on a run: the silent fraction, mass by band, the pool's history (chapters 10-13)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stddial_book.core.checks import check_group_size, check_int, to_numpy
from stddial_book.experiments.testbed.logs import check_records, check_run_group_size, final_eval

__all__ = [
    "pool_history",
    "hypergeometric_expectation",
    "initial_bands",
    "band_trajectories",
    "silent_check",
    "silent_fit",
    "mass_by_band",
    "pool_study",
    "prediction_numbers",
]


def pool_history(records: list[dict[str, Any]]) -> tuple[np.ndarray, int, np.ndarray]:
    """(steps, n, K) of a run's pool measurements: ``K[i, x]`` correct of ``n`` samples for pool
    prompt x at ``steps[i]`` (step 0 is the start of RL). Needs a run with ``pool_size`` set.
    ``records`` is the run's log (the per-step metric dicts :func:`~stddial_book.rl.runlog.load_run` returns)."""
    rows = [r for r in check_records(records) if "pool/k" in r]
    if not rows:
        raise ValueError("this run log holds no pool measurement; train with pool_size set.")
    ns = {int(r["pool/n"]) for r in rows}
    if len(ns) != 1:
        raise ValueError(f"the pool was measured with different sample counts {sorted(ns)}.")
    if min(ns) < 1:
        raise ValueError(f"pool/n is {min(ns)}: the pool must be measured with at least one sample per prompt.")
    return (np.array([r["step"] for r in rows]), ns.pop(), np.array([r["pool/k"] for r in rows], dtype=np.int64))


def hypergeometric_expectation(k: np.ndarray, n: int, group_size: int, values: np.ndarray) -> np.ndarray:
    """Σⱼ P(j | G of the n measured samples, k of them correct) · values[j], per prompt.

    Averaging a function of j over all G-subsets of n Bernoulli(p) samples is an unbiased estimate
    of its expectation under j ~ Binomial(G, p) (a U-statistic), so a pool measured with n ≥ G
    samples gives unbiased silent probabilities and expected update weights, with no plug-in bias.
    ``k`` is each prompt's correct count of its ``n`` measured samples (an int array, one entry per prompt);
    ``group_size`` is G (at most ``n``); ``values`` holds one value per j = 0..G (shape (G + 1,)).
    """
    from stddial_book.theory.silent import hypergeometric_pmf

    values = to_numpy(values, "values")
    if values.shape != (group_size + 1,):
        raise ValueError(
            f"values must hold one value per j = 0..G ({group_size + 1} values); got shape {values.shape}."
        )
    return hypergeometric_pmf(k, n, group_size) @ values


def initial_bands(records: list[dict[str, Any]], num_bands: int = 4) -> np.ndarray:
    """Band of each pool prompt by its solve rate at the start of RL: 0 is the hardest
    ``1/num_bands`` of the pool (by rank, ties broken by pool order), as in the source paper.
    ``records`` is the run's log (with pool measurements, :func:`pool_history`); ``num_bands`` (default 4:
    quartiles) is at least 1 and at most the pool's size."""
    _, _, K = pool_history(records)
    num_bands = check_int(num_bands, "num_bands", minimum=1)
    if num_bands > K.shape[1]:
        raise ValueError(f"num_bands={num_bands} exceeds the {K.shape[1]} pool prompts; some bands would be empty.")
    order = np.argsort(K[0], kind="stable")
    bands = np.empty(order.size, dtype=np.int64)
    bands[order] = np.arange(order.size) * num_bands // order.size
    return bands


def band_trajectories(records: list[dict[str, Any]], num_bands: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """(steps, mean solve rate per band and measurement), shape (num_bands, measurements).

    ``records`` is the run's log (with pool measurements); ``num_bands`` the bands of
    :func:`initial_bands` (default 4: quartiles of the starting solve rate)."""
    steps, n, K = pool_history(records)
    bands = initial_bands(records, num_bands)
    return steps, np.array([(K[:, bands == b] / n).mean(axis=1) for b in range(num_bands)])


def _measurement_before(steps: np.ndarray, step: int) -> int:
    """Index of the last pool measurement taken before a training step ran."""
    return int(np.searchsorted(steps, step, side="right") - 1) if step > 0 else 0


def silent_check(records: list[dict[str, Any]], group_size: int) -> dict[str, np.ndarray]:
    """Measured silent fraction of the generated groups against its unbiased closed form.

    For each training step, the prediction averages P(silent) = p^G + (1 − p)^G over the prompts
    the step actually drew, estimated without bias from the pool measurements
    (:func:`hypergeometric_expectation`) and interpolated linearly in steps between the
    measurement before the step and the one after it (the policy moves in between; holding the
    earlier value would lag). Steps are pooled into the intervals between measurements (hundreds
    of groups each) before R² is taken. Chapter 11. ``records`` is the run's log (with pool
    measurements and the generated groups); ``group_size`` is the run's G, checked against the log.
    """
    steps_m, n, K = pool_history(records)
    G = group_size = check_run_group_size(records, group_size)
    silent_value = np.zeros(G + 1)
    silent_value[[0, G]] = 1.0
    per_prompt = np.array([hypergeometric_expectation(k, n, G, silent_value) for k in K])
    step_ids, measured, predicted, interval, variance, counts = [], [], [], [], [], []
    for r in records:
        if r["step"] == 0 or "groups_generated/k" not in r:
            continue
        ks = np.asarray(r["groups_generated/k"])
        prompts = np.asarray(r["groups_generated/prompt"])
        i = _measurement_before(steps_m, r["step"] - 1)
        estimate = per_prompt[i, prompts]
        if i + 1 < len(steps_m):  # the policy that drew at step t sits between the two measurements
            frac = (r["step"] - 1 - steps_m[i]) / (steps_m[i + 1] - steps_m[i])
            estimate = (1 - frac) * estimate + frac * per_prompt[i + 1, prompts]
        step_ids.append(r["step"])
        measured.append(float(np.mean((ks == 0) | (ks == G))))
        predicted.append(float(estimate.mean()))
        variance.append(float(np.sum(estimate * (1 - estimate))))  # Σ s(1 − s) over the step's groups
        counts.append(ks.size)
        interval.append(i)
    if not step_ids:
        raise ValueError("this run log holds no training step with generated groups (groups_generated/k).")
    measured_arr, predicted_arr, interval_arr = map(np.asarray, (measured, predicted, interval))
    variance_arr = np.asarray(variance)
    groups = np.unique(interval_arr)
    counts_arr = np.asarray(counts, dtype=np.float64)  # DAPO's steps generate different numbers of groups

    def pooled(values: np.ndarray) -> np.ndarray:  # group-weighted mean per interval
        return np.array([np.average(values[interval_arr == g], weights=counts_arr[interval_arr == g]) for g in groups])

    m_int, p_int = pooled(measured_arr), pooled(predicted_arr)
    # the binomial (Poisson-binomial) noise of an interval's measured fraction if the closed form
    # is right: sqrt(Σ s(1 − s)) / N over its N groups
    se_int = np.array(
        [np.sqrt(variance_arr[interval_arr == g].sum()) / counts_arr[interval_arr == g].sum() for g in groups]
    )
    spread = float(np.sum((m_int - m_int.mean()) ** 2))
    r2 = float(1 - np.sum((m_int - p_int) ** 2) / spread) if m_int.size > 1 and spread > 0 else float("nan")
    return {
        "step": np.asarray(step_ids),
        "measured": measured_arr,
        "predicted": predicted_arr,
        "interval_measured": m_int,
        "interval_predicted": p_int,
        "interval_se": se_int,
        "r2": np.asarray(r2),
    }


def silent_fit(checks: Sequence[dict[str, np.ndarray]]) -> dict[str, float]:
    """Pooled over runs (seeds): R² of measured against predicted interval silent fractions, the
    root-mean-square gap, and the RMS of the gaps in units of their binomial noise (about 1 when
    the closed form is right and the gaps are sampling noise; R² alone rewards a wide range).
    R² is NaN when the measured fractions do not vary. ``checks`` is a non-empty list of
    :func:`silent_check` results, one per run."""
    if isinstance(checks, dict) or not isinstance(checks, Sequence) or not checks:
        raise ValueError("checks must be a non-empty list of silent_check results (one per run).")
    m = np.concatenate([c["interval_measured"] for c in checks])
    q = np.concatenate([c["interval_predicted"] for c in checks])
    se = np.concatenate([c["interval_se"] for c in checks])
    spread = float(np.sum((m - m.mean()) ** 2))
    return {
        "r2": float(1 - np.sum((m - q) ** 2) / spread) if spread > 0 else float("nan"),
        "rms": float(np.sqrt(np.mean((m - q) ** 2))),
        "rms_z": float(np.sqrt(np.mean(((m - q) / se) ** 2))),
        "points": int(m.size),
    }


def mass_by_band(records: list[dict[str, Any]], recipe, group_size: int, num_bands: int = 4) -> dict[str, np.ndarray]:
    """Share of a run's update mass per band of initial solve rate: realised (the weights of the
    groups that reached the update) against the closed form (each generated group's expected
    weight E[w] at its prompt's measured solve rate, unbiased as in :func:`silent_check`).

    w is σ̂ for GRPO and DAPO, σ̂² for Dr. GRPO (chapter 3). The shares sum to 1 each. Chapter 11.
    ``records`` is the run's log (with pool measurements); ``recipe`` the run's recipe (a Recipe or a preset
    name); ``group_size`` the run's G, checked against the log; ``num_bands`` the bands of
    :func:`initial_bands` (default 4: quartiles).
    """
    from stddial_book.theory.identity import update_weight

    steps_m, n, K = pool_history(records)
    bands = initial_bands(records, num_bands)
    num_bands = check_int(num_bands, "num_bands", minimum=1)  # initial_bands has checked it
    G = check_run_group_size(records, group_size)
    weights = np.asarray(update_weight(np.arange(G + 1) / G, recipe, G), dtype=np.float64)
    expected_per_prompt = np.array([hypergeometric_expectation(k, n, G, weights) for k in K])
    realised = np.zeros(num_bands)
    expected = np.zeros(num_bands)
    for r in records:
        if r["step"] == 0 or "groups_generated/prompt" not in r:
            continue
        i = _measurement_before(steps_m, r["step"] - 1)
        drawn = np.asarray(r["groups_generated/prompt"])
        np.add.at(expected, bands[drawn], expected_per_prompt[i, drawn])
        kept = np.asarray(r.get("groups/prompt", []), dtype=np.int64)
        if kept.size:
            np.add.at(realised, bands[kept], np.asarray(r["groups/weight"], dtype=np.float64))
    if realised.sum() <= 0 or expected.sum() <= 0:
        raise ValueError("no update mass in this run (every group was silent).")
    return {"realised": realised / realised.sum(), "expected": expected / expected.sum()}


def pool_study(runs: dict[str, list[list[dict[str, Any]]]], group_size: int, num_bands: int = 4) -> dict[str, Any]:
    """The paper's three predictions over a set of pool runs, per recipe (chapter 13).

    ``runs`` maps a recipe key (``grpo``, ``dr_grpo``, ``dapo``) to the records of its seeds.
    Returns, per recipe: ``samples`` (generated samples at each pool measurement, per seed),
    ``bands`` (mean solve rate per band and measurement, per seed), ``silent`` (per seed: the
    interval-pooled measured and predicted silent fractions and R²), ``mass`` (per seed: realised
    and expected shares per band), ``final`` (per seed: the last measurement's mean solve rate per
    band) and ``heldout`` (per seed: the last held-out sampled accuracy). ``group_size`` is the runs'
    G; ``num_bands`` the bands of :func:`initial_bands` (default 4: quartiles).
    """
    from stddial_book.theory.recipes import get_recipe

    if not isinstance(runs, dict) or not runs:
        raise ValueError(
            "runs must be a non-empty dict: recipe key ('grpo', 'dr_grpo', 'dapo') -> the records of its seeds."
        )
    group_size, num_bands = check_group_size(group_size), check_int(num_bands, "num_bands", minimum=1)
    out: dict[str, Any] = {}
    for key, seeds in runs.items():
        if isinstance(seeds, (str, bytes, dict)) or not isinstance(seeds, Sequence) or not seeds:
            raise ValueError(f"runs[{key!r}] must be a non-empty list of run logs, one per seed.")
        recipe = get_recipe(key)
        entry: dict[str, list] = {"samples": [], "bands": [], "silent": [], "mass": [], "final": [], "heldout": []}
        for records in seeds:
            steps, traj = band_trajectories(records, num_bands)
            generated = {r["step"]: r.get("samples/generated", 0) for r in records}
            entry["samples"].append(np.array([generated.get(int(s), 0) for s in steps], dtype=float))
            entry["bands"].append(traj)
            entry["final"].append(traj[:, -1])
            entry["silent"].append(silent_check(records, group_size))
            entry["mass"].append(mass_by_band(records, recipe, group_size, num_bands))
            entry["heldout"].append(final_eval(records)["accuracy_sampled"])
        out[key] = entry
    return out


def prediction_numbers(study: dict[str, Any], key: str) -> dict[str, float]:
    """The numbers a recipe chapter quotes from one :func:`pool_study` (chapters 10-13), flat:
    ``silent_r2``, ``silent_rms``, ``silent_rms_z`` (:func:`silent_fit`); ``mass_gap``, the largest
    |realised − closed-form| share over quartiles (seed means), and ``mass_q1``, the hardest
    quartile's realised share; ``q1_start``, ``q1_end``, ``q1_end_sd``, ``q4_start``, ``q4_end``
    (mean solve rate of the hardest and easiest quartile, mean and SD over seeds); ``pool_start``,
    ``pool_end``, ``pool_end_sd`` (the whole pool); ``fastest``, the quartile (1-based) whose mean
    solve rate gains most, and ``fastest_gain``; ``seeds``; ``samples`` (generated per run).
    ``study`` is the :func:`pool_study` result and ``key`` the recipe key to read from it."""
    if not isinstance(study, dict) or key not in study:
        has = sorted(study) if isinstance(study, dict) else type(study).__name__
        raise ValueError(f"study has no recipe {' '.join(repr(key).split())[:40]}; it has {has}.")
    entry = study[key]
    fit = silent_fit(entry["silent"])
    realised = np.array([m["realised"] for m in entry["mass"]]).mean(axis=0)
    expected = np.array([m["expected"] for m in entry["mass"]]).mean(axis=0)
    first = np.array([b[:, 0] for b in entry["bands"]])
    last = np.array([b[:, -1] for b in entry["bands"]])
    sd = lambda x: float(np.std(x, ddof=1)) if len(x) > 1 else float("nan")
    return {
        "silent_r2": fit["r2"],
        "silent_rms": fit["rms"],
        "silent_rms_z": fit["rms_z"],
        "mass_gap": float(np.max(np.abs(realised - expected))),
        "mass_q1": float(realised[0]),
        "q1_start": float(first[:, 0].mean()),
        "q1_end": float(last[:, 0].mean()),
        "q1_end_sd": sd(last[:, 0]),
        "q4_start": float(first[:, -1].mean()),
        "q4_end": float(last[:, -1].mean()),
        "pool_start": float(first.mean()),
        "pool_end": float(last.mean()),
        "pool_end_sd": sd(last.mean(axis=1)),
        "fastest": int(np.argmax((last - first).mean(axis=0))) + 1,
        "fastest_gain": float(np.max((last - first).mean(axis=0))),
        "seeds": len(entry["bands"]),
        "samples": float(np.mean([s[-1] for s in entry["samples"]])),
    }
