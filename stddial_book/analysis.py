"""Reading training logs: final accuracies, update mass per bucket, seed statistics (chapters 10-13).

Everything here takes the records of :func:`stddial_book.runs.load_run` (one dict per logged
step) and returns plain numbers or arrays, so chapters can glue them and tests can check them.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ._arrays import check_group_size, check_int, check_number, to_numpy, unit_scale
from .runs import RECORDED_DIR, metric_series, recorded_runs  # re-exported: chapters import them from here

__all__ = ["extreme_mass_share", "final_eval", "buckets", "update_mass", "curve", "seed_summary", "difference_vs_noise",
           "identity_from_log", "recorded_runs", "RECORDED_DIR", "pool_history", "hypergeometric_expectation",
           "initial_bands", "band_trajectories", "silent_check", "silent_fit", "identity_during_training", "mass_by_band", "pool_study", "prediction_numbers", "identity_numbers", "dapo_cost", "comparison_screen", "welch",
           "gradient_scale", "difference_phrase"]

#: Where committed reference run logs live: ``data/runs/<profile>/<recipe>-seed<k>/`` in the
#: repository, shipped inside the package (:mod:`stddial_book.resources`).


def _check_records(records: list[dict[str, Any]], name: str = "records") -> list[dict[str, Any]]:
    """``records`` as a list, after checking it is what :func:`stddial_book.runs.load_run` returns."""
    if isinstance(records, (str, bytes, dict)) or not isinstance(records, Sequence):
        raise TypeError(f"{name} must be the list of metric records load_run returns; got {type(records).__name__}.")
    wrong = next((r for r in records if not isinstance(r, dict)), None)
    if wrong is not None:
        raise TypeError(f"{name} must hold one dict per logged step (as load_run returns); found "
                        f"{type(wrong).__name__} {wrong!r:.40}.")
    return list(records)


def final_eval(records: list[dict[str, Any]]) -> dict[str, float]:
    """The last evaluation of a run: ``eval/...`` metrics without the prefix."""
    records = _check_records(records)
    evals = [r for r in records if "eval/accuracy_sampled" in r]
    if not evals:
        raise ValueError("this run log holds no evaluation; train with eval_every > 0.")
    return {k[len("eval/"):]: v for k, v in evals[-1].items() if k.startswith("eval/")}


def buckets(records: list[dict[str, Any]]) -> list[str]:
    """The difficulty buckets a run evaluated, in sorted order."""
    prefix = "eval/accuracy_sampled/"
    records = _check_records(records)
    return sorted({k[len(prefix):] for r in records for k in r if k.startswith(prefix)})


def update_mass(records: list[dict[str, Any]]) -> dict[str, float]:
    """Total update mass per bucket over a run: Σ over steps of Σ_groups w / groups per step.

    w = mean|A|/2 of each group that reached the update (σ for GRPO and DAPO, σ² for Dr. GRPO,
    chapter 3); silent groups add nothing. Buckets with no mixed group add 0.
    """
    prefix = "dial/update_mass/"
    records = _check_records(records)
    totals: dict[str, float] = {}
    for r in records:
        for k, v in r.items():
            if k.startswith(prefix):
                totals[k[len(prefix):]] = totals.get(k[len(prefix):], 0.0) + float(v)
    return dict(sorted(totals.items()))


def curve(records: list[dict[str, Any]], name: str, x: str = "samples/generated") -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of a metric against another (by default the samples generated so far)."""
    steps, values = metric_series(records, name)
    xs = dict(zip(*metric_series(records, x)))
    return np.array([xs[s] for s in steps], dtype=float), values


def seed_summary(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error of the mean across seeds (0 error for a single seed)."""
    if isinstance(values, (list, tuple)) and not values:
        raise ValueError("no values to summarise.")
    arr = to_numpy(values, "values", allow_empty=True)
    if arr.size == 0:
        raise ValueError("no values to summarise.")
    if arr.ndim > 1:
        raise ValueError(f"values must be one number per seed (1-D); got shape {arr.shape}.")
    unit, exponent, _ = unit_scale(arr.reshape(-1), axis=0)  # exact; no overflow in the squares
    sem = np.ldexp(unit.std(ddof=1), exponent[0]) / math.sqrt(arr.size) if arr.size > 1 else 0.0
    return float(np.ldexp(unit.mean(), exponent[0])), float(sem)


def difference_vs_noise(a: Sequence[float], b: Sequence[float], z: float = 2.0) -> dict[str, float | bool]:
    """Is mean(a) − mean(b) larger than ``z`` standard errors of the difference (Welch)?

    Returns the difference, its standard error and ``exceeds``. With three seeds this is a rough
    screen, not a test at a stated level; the chapter says so.
    """
    z = check_number(z, "z")
    d = welch(a, b)
    diff, se = d["difference"], d["se"]
    return {"difference": diff, "se": se, "exceeds": bool(abs(diff) > z * se) if se > 0 else diff != 0}


def identity_from_log(records: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """(σ, w) of every group that reached an update, pooled over the run (chapter 13's check)."""
    records = _check_records(records)
    sig = [s for r in records for s in r.get("groups/sigma", [])]
    w = [x for r in records for x in r.get("groups/weight", [])]
    sig, w = to_numpy(sig, "groups/sigma", allow_empty=True), to_numpy(w, "groups/weight", allow_empty=True)
    if sig.shape != w.shape or np.any(sig < 0) or np.any(w < 0):
        raise ValueError("the log's groups/sigma and groups/weight must pair up as non-negative numbers "
                         "(one σ and one w per group); is it a training run's metrics.jsonl?")
    return sig, w


def extreme_mass_share(records: list[dict[str, Any]], group_size: int) -> float:
    """Share of a run's update mass that went to groups with k = 1 or k = G − 1 correct.

    Those groups have the smallest non-zero σ = sqrt(G − 1)/G; GRPO weights them by σ and
    Dr. GRPO by σ², so the share is where the std division shows most directly (chapter 13).
    """
    group_size = check_group_size(group_size)
    sigma, weight = identity_from_log(records)
    if weight.sum() == 0:
        raise ValueError("no group reached an update in this run.")
    edge = math.sqrt(group_size - 1) / group_size
    return float(weight[np.isclose(sigma, edge, atol=1e-5)].sum() / weight.sum())


# --- a fixed prompt pool followed through a run (chapters 9-13) ------------------------------

def pool_history(records: list[dict[str, Any]]) -> tuple[np.ndarray, int, np.ndarray]:
    """(steps, n, K) of a run's pool measurements: ``K[i, x]`` correct of ``n`` samples for pool
    prompt x at ``steps[i]`` (step 0 is the start of RL). Needs a run with ``pool_size`` set."""
    rows = [r for r in _check_records(records) if "pool/k" in r]
    if not rows:
        raise ValueError("this run log holds no pool measurement; train with pool_size set.")
    ns = {int(r["pool/n"]) for r in rows}
    if len(ns) != 1:
        raise ValueError(f"the pool was measured with different sample counts {sorted(ns)}.")
    if min(ns) < 1:
        raise ValueError(f"pool/n is {min(ns)}: the pool must be measured with at least one sample per prompt.")
    return (np.array([r["step"] for r in rows]), ns.pop(),
            np.array([r["pool/k"] for r in rows], dtype=np.int64))


def hypergeometric_expectation(k: np.ndarray, n: int, group_size: int, values: np.ndarray) -> np.ndarray:
    """Σⱼ P(j | G of the n measured samples, k of them correct) · values[j], per prompt.

    Averaging a function of j over all G-subsets of n Bernoulli(p) samples is an unbiased estimate
    of its expectation under j ~ Binomial(G, p) (a U-statistic), so a pool measured with n ≥ G
    samples gives unbiased silent probabilities and expected update weights, with no plug-in bias.
    """
    from .identity import hypergeometric_pmf

    values = to_numpy(values, "values")
    if values.shape != (group_size + 1,):
        raise ValueError(f"values must hold one value per j = 0..G ({group_size + 1} values); got shape {values.shape}.")
    return hypergeometric_pmf(k, n, group_size) @ values


def initial_bands(records: list[dict[str, Any]], num_bands: int = 4) -> np.ndarray:
    """Band of each pool prompt by its solve rate at the start of RL: 0 is the hardest
    ``1/num_bands`` of the pool (by rank, ties broken by pool order), as in the source paper."""
    _, _, K = pool_history(records)
    num_bands = check_int(num_bands, "num_bands", minimum=1)
    if num_bands > K.shape[1]:
        raise ValueError(f"num_bands={num_bands} exceeds the {K.shape[1]} pool prompts; some bands would be empty.")
    order = np.argsort(K[0], kind="stable")
    bands = np.empty(order.size, dtype=np.int64)
    bands[order] = np.arange(order.size) * num_bands // order.size
    return bands


def band_trajectories(records: list[dict[str, Any]], num_bands: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """(steps, mean solve rate per band and measurement), shape (num_bands, measurements)."""
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
    of groups each) before R² is taken. Chapter 11.
    """
    steps_m, n, K = pool_history(records)
    G = group_size
    silent_value = np.zeros(G + 1)
    silent_value[[0, G]] = 1.0
    per_prompt = np.array([hypergeometric_expectation(k, n, G, silent_value) for k in K])
    group_size = check_group_size(group_size)
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
        return np.array([np.average(values[interval_arr == g], weights=counts_arr[interval_arr == g])
                         for g in groups])

    m_int, p_int = pooled(measured_arr), pooled(predicted_arr)
    # the binomial (Poisson-binomial) noise of an interval's measured fraction if the closed form
    # is right: sqrt(Σ s(1 − s)) / N over its N groups
    se_int = np.array([np.sqrt(variance_arr[interval_arr == g].sum()) / counts_arr[interval_arr == g].sum()
                       for g in groups])
    spread = float(np.sum((m_int - m_int.mean()) ** 2))
    r2 = float(1 - np.sum((m_int - p_int) ** 2) / spread) if m_int.size > 1 and spread > 0 else float("nan")
    return {"step": np.asarray(step_ids), "measured": measured_arr, "predicted": predicted_arr,
            "interval_measured": m_int, "interval_predicted": p_int, "interval_se": se_int,
            "r2": np.asarray(r2)}


def silent_fit(checks: Sequence[dict[str, np.ndarray]]) -> dict[str, float]:
    """Pooled over runs (seeds): R² of measured against predicted interval silent fractions, the
    root-mean-square gap, and the RMS of the gaps in units of their binomial noise (about 1 when
    the closed form is right and the gaps are sampling noise; R² alone rewards a wide range).
    R² is NaN when the measured fractions do not vary."""
    if isinstance(checks, dict) or not isinstance(checks, Sequence) or not checks:
        raise ValueError("checks must be a non-empty list of silent_check results (one per run).")
    m = np.concatenate([c["interval_measured"] for c in checks])
    q = np.concatenate([c["interval_predicted"] for c in checks])
    se = np.concatenate([c["interval_se"] for c in checks])
    spread = float(np.sum((m - m.mean()) ** 2))
    return {"r2": float(1 - np.sum((m - q) ** 2) / spread) if spread > 0 else float("nan"),
            "rms": float(np.sqrt(np.mean((m - q) ** 2))),
            "rms_z": float(np.sqrt(np.mean(((m - q) / se) ** 2))),
            "points": int(m.size)}


def identity_during_training(runs: Sequence[list[dict[str, Any]]]) -> dict[str, np.ndarray]:
    """Every in-update identity check of a set of runs (``identity_check_every``), pooled:
    per checked group its relative error, minibatch index (0 = ratio 1), clipped-token fraction
    and σ. Chapters 10-12."""
    out: dict[str, list] = {"rel_error": [], "minibatch": [], "clipped": [], "sigma": []}
    for records in runs:
        for r in records:
            for name in out:
                out[name].extend(r.get(f"identity/{name}", []))
    if not out["rel_error"]:
        raise ValueError("these runs hold no identity check; train with identity_check_every > 0.")
    return {k: np.asarray(v, dtype=np.float64 if k != "minibatch" else np.int64) for k, v in out.items()}


def mass_by_band(records: list[dict[str, Any]], recipe, group_size: int, num_bands: int = 4) -> dict[str, np.ndarray]:
    """Share of a run's update mass per band of initial solve rate: realised (the weights of the
    groups that reached the update) against the closed form (each generated group's expected
    weight E[w] at its prompt's measured solve rate, unbiased as in :func:`silent_check`).

    w is σ̂ for GRPO and DAPO, σ̂² for Dr. GRPO (chapter 3). The shares sum to 1 each. Chapter 11.
    """
    from .identity import update_weight

    steps_m, n, K = pool_history(records)
    bands = initial_bands(records, num_bands)
    G = group_size
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
    band) and ``heldout`` (per seed: the last held-out sampled accuracy).
    """
    from .recipes import get_recipe

    out: dict[str, Any] = {}
    for key, seeds in runs.items():
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
    solve rate gains most, and ``fastest_gain``; ``seeds``; ``samples`` (generated per run)."""
    if not isinstance(study, dict) or key not in study:
        raise ValueError(f"study has no recipe {key!r}; it has {sorted(study) if isinstance(study, dict) else study!r}.")
    entry = study[key]
    fit = silent_fit(entry["silent"])
    realised = np.array([m["realised"] for m in entry["mass"]]).mean(axis=0)
    expected = np.array([m["expected"] for m in entry["mass"]]).mean(axis=0)
    first = np.array([b[:, 0] for b in entry["bands"]])
    last = np.array([b[:, -1] for b in entry["bands"]])
    sd = (lambda x: float(np.std(x, ddof=1)) if len(x) > 1 else float("nan"))
    return {"silent_r2": fit["r2"], "silent_rms": fit["rms"], "silent_rms_z": fit["rms_z"],
            "mass_gap": float(np.max(np.abs(realised - expected))), "mass_q1": float(realised[0]),
            "q1_start": float(first[:, 0].mean()), "q1_end": float(last[:, 0].mean()), "q1_end_sd": sd(last[:, 0]),
            "q4_start": float(first[:, -1].mean()), "q4_end": float(last[:, -1].mean()),
            "pool_start": float(first.mean()), "pool_end": float(last.mean()), "pool_end_sd": sd(last.mean(axis=1)),
            "fastest": int(np.argmax((last - first).mean(axis=0))) + 1,
            "fastest_gain": float(np.max((last - first).mean(axis=0))),
            "seeds": len(entry["bands"]), "samples": float(np.mean([s[-1] for s in entry["samples"]]))}


def gradient_scale(records: list[dict[str, Any]], reference: list[dict[str, Any]],
                   max_new_tokens: int) -> dict[str, float]:
    """How much smaller Dr. GRPO's gradient is than GRPO's, from the two runs' logs (chapter 11).

    ``records`` is a Dr. GRPO run and ``reference`` a GRPO run. Two factors: the mean update
    weight over all logged groups (σ² against σ, silent groups counting 0), and the length
    normaliser (Dr. GRPO divides each sample's summed log-probs by L_max, GRPO by the sample's
    own length ℓ, so a sample weighs about ℓ̄ / L_max as much). Their product is the factor a
    plain gradient step at one learning rate would apply to every update; Adam divides it out.
    """
    def mean_weight(run: list[dict[str, Any]]) -> float:
        weights = [w for r in run if "groups/weight" in r for w in r["groups/weight"]]
        if not weights:
            raise ValueError("no groups/weight in the log: is it a training run's metrics.jsonl?")
        return float(np.mean(weights))

    if not check_number(max_new_tokens, "max_new_tokens") > 0:
        raise ValueError(f"max_new_tokens is L_max and must be positive; got {max_new_tokens}.")
    records, reference = _check_records(records), _check_records(reference, "reference")
    base = mean_weight(reference)
    if base <= 0:
        raise ValueError("the reference run's groups all have weight 0 (every group silent): no ratio to take.")
    weight_ratio = mean_weight(records) / base
    lengths = [r["completions/mean_length"] for r in records if "completions/mean_length" in r]
    if not lengths:
        raise ValueError("no completions/mean_length in the log: is it a training run's metrics.jsonl?")
    length_factor = float(np.mean(lengths)) / max_new_tokens
    return {"weight_ratio": weight_ratio, "length_factor": length_factor,
            "scale_ratio": weight_ratio * length_factor}


def identity_numbers(checks: dict[str, np.ndarray]) -> dict[str, float]:
    """Summary of :func:`identity_during_training`: groups checked, the largest relative error on
    the first minibatch (ratio 1), the median and 90th percentile on later minibatches, and the
    mean fraction of a checked group's tokens clipped there."""
    if not isinstance(checks, dict) or any(k not in checks for k in ("rel_error", "minibatch", "clipped")):
        raise ValueError("checks must be what identity_during_training returns (rel_error, minibatch, clipped).")
    first = checks["minibatch"] == 0
    later = ~first
    if not first.any() or not later.any():
        raise ValueError("need checks on the first and on later minibatches (num_minibatches >= 2).")
    return {"checked": int(first.size), "first_max": float(checks["rel_error"][first].max()),
            "later_median": float(np.median(checks["rel_error"][later])),
            "later_p90": float(np.quantile(checks["rel_error"][later], 0.9)),
            "later_clipped": float(checks["clipped"][later].mean())}


def dapo_cost(records: list[dict[str, Any]], group_size: int) -> dict[str, float]:
    """What DAPO's refill cost in one run (chapter 12): samples generated per sample kept; the same
    from the measured silent fraction f of the generated groups, 1/(1 − f) (equal to the first
    when rounds ask only for the missing groups and no step hit the cap: bookkeeping); and from
    the closed form, f = E[p^G + (1 − p)^G] over the prompts drawn (:func:`silent_check`: the
    prediction); samples discarded as silent and as surplus mixed groups; steps that hit the cap."""
    group_size = check_group_size(group_size)
    steps = [r for r in _check_records(records) if r["step"] > 0 and "groups_generated/k" in r]
    if not steps:
        raise ValueError("this run log holds no training step.")
    ks = np.concatenate([np.asarray(r["groups_generated/k"]) for r in steps])
    measured = float(np.mean((ks == 0) | (ks == group_size)))
    check = silent_check(records, group_size)
    counts = np.array([len(r["groups_generated/k"]) for r in steps], dtype=np.float64)
    predicted = float(np.average(check["predicted"], weights=counts))
    last = steps[-1]
    return {"generated_per_kept": last["samples/generated"] / last["samples/kept"],
            "from_measured_f": 1.0 / (1.0 - measured), "from_closed_form_f": 1.0 / (1.0 - predicted),
            "silent_measured": measured, "silent_closed_form": predicted,
            "discarded_silent": float(sum(r.get("samples/step_discarded_silent", 0) for r in steps)),
            "discarded_surplus": float(sum(r.get("samples/step_discarded_surplus", 0) for r in steps)),
            "capped_steps": int(sum(bool(r.get("dynamic_sampling/hit_cap")) for r in steps))}


def comparison_screen(values: dict[str, dict[str, Sequence[float]]], level: float = 0.05) -> dict[str, Any]:
    """Every pair of recipes compared on every metric, each difference against the seed noise
    (Welch standard error), with the Bonferroni threshold z* for a two-sided family-wise ``level``
    over all the comparisons made (chapter 13).

    ``values`` maps a metric label to {recipe name: one value per seed}. Returns ``header`` and
    ``rows`` for :func:`stddial_book.display.table` (cells "difference ± se", a * where |z| > z*),
    ``passed`` (labels of the comparisons beyond z*), ``passed_details`` (for each of them the
    metric, the recipes ``a`` and ``b`` and Welch's ``difference``, ``se`` and ``z`` for a − b, as
    :func:`difference_phrase` takes them) and ``summary`` (``tests``, ``passed``,
    ``passed_names``, ``z_star``).
    """
    from itertools import combinations
    from statistics import NormalDist

    if not isinstance(values, dict):
        raise TypeError(f"values must be a dict metric -> {{recipe: per-seed values}}; got {type(values).__name__}.")
    if not values:
        raise ValueError("values is empty; pass at least one metric.")
    level = check_number(level, "level")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level is a family-wise error rate and must lie strictly between 0 and 1; got {level}.")
    recipes = list(next(iter(values.values())))
    for label, per_recipe in values.items():
        if not isinstance(per_recipe, dict) or set(per_recipe) != set(recipes):
            raise ValueError(f"every metric must give values for the same recipes {recipes}; {label!r} gives "
                             f"{sorted(per_recipe) if isinstance(per_recipe, dict) else type(per_recipe).__name__}.")
    pairs = list(combinations(recipes, 2))
    tests = len(values) * len(pairs)
    if tests == 0:
        raise ValueError("need at least two recipes to compare.")
    z_star = float(NormalDist().inv_cdf(1 - level / (2 * tests)))
    rows, passed, details = [], [], []
    for label, per_recipe in values.items():
        row = [label]
        for a, b in pairs:
            result = welch(per_recipe[a], per_recipe[b])
            beyond = abs(result["z"]) > z_star
            row.append(f"{result['difference']:+.3f} ± {result['se']:.3f}{' *' if beyond else ''}")
            if beyond:
                passed.append(f"{label}, {a} − {b}")
                details.append({"metric": label, "a": a, "b": b, **result})
        rows.append(row)
    return {"header": ["final value"] + [f"{a} − {b}" for a, b in pairs], "rows": rows, "passed": passed,
            "passed_details": details,
            "summary": {"tests": tests, "passed": len(passed), "passed_names": "; ".join(passed) or "none",
                        "z_star": z_star}}


def difference_phrase(detail: dict[str, Any], where: str = "") -> str:
    """One comparison that passed a screen, in words: which recipe ends higher, on what, by how
    much and how many standard errors (chapter 13's bottom line). ``detail`` holds ``metric``,
    ``a``, ``b`` and Welch's ``difference``, ``se`` and ``z`` of a − b."""
    needed = ("metric", "a", "b", "difference", "z")
    if not isinstance(detail, dict) or any(k not in detail for k in needed):
        raise ValueError(f"detail must be one of comparison_screen's passed_details (keys {list(needed)}).")
    higher, lower = (detail["a"], detail["b"]) if detail["difference"] > 0 else (detail["b"], detail["a"])
    where = f", {where}" if where else ""
    return (f"{higher} ends {abs(detail['difference']):.3f} above {lower} on {detail['metric']} "
            f"({abs(detail['z']):.1f} standard errors{where})")


def welch(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """mean(a) − mean(b), its standard error (Welch, unequal variances) and z = difference / se.

    With no noise (se = 0) z is ±inf for a difference and 0 for none.
    """
    ma, sa = seed_summary(a)
    mb, sb = seed_summary(b)
    se = math.sqrt(sa**2 + sb**2) if max(sa, sb) < 1e150 else math.hypot(sa, sb)  # no overflow in the squares
    diff = ma - mb
    if not (math.isfinite(diff) and math.isfinite(se)):
        raise ValueError(f"the difference of means {ma:g} − {mb:g} overflows float64; rescale the values.")
    z = diff / se if se > 0 else (float("inf") * np.sign(diff) if diff != 0 else 0.0)
    return {"difference": diff, "se": se, "z": z}
