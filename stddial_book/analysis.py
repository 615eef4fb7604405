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

__all__ = ["extreme_mass_share", "final_eval", "buckets", "update_mass", "curve", "seed_summary",
           "identity_from_log", "recorded_runs", "RECORDED_DIR", "pool_history", "hypergeometric_expectation",
           "initial_bands", "band_trajectories", "silent_check", "silent_fit", "identity_during_training", "mass_by_band", "pool_study", "prediction_numbers", "identity_numbers", "dapo_cost", "comparison_screen", "welch",
           "gradient_scale"]

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


def _check_run_group_size(records: list[dict[str, Any]], group_size: Any) -> int:
    """``group_size`` as an int G ≥ 2, after checking it is the G the run's log was written with.

    Three things in a training log tell G: a generated group's k correct is at most G
    (``groups_generated/k``), a step generated G samples per group (``samples/step_generated``
    over the number of groups), and a group's σ is sqrt(k (G − k)) / G for some k (``groups/sigma``).
    A wrong G otherwise gives a silently wrong answer (a silent-fraction R² far below zero, an extreme
    share of 0); the message names the G the log holds."""
    G = check_group_size(group_size)
    hint = "pass the run's own group size (provenance['config']['train']['group_size'])"
    for r in _check_records(records):
        ks = r.get("groups_generated/k")
        if ks is None:
            continue
        k = np.asarray(ks, dtype=np.float64)
        if k.size and (k.max() > G or k.min() < 0):
            raise ValueError(f"group_size={G} does not match the run: step {r.get('step')} logs a group with "
                             f"k = {int(k.max()) if k.max() > G else int(k.min())} correct, outside 0..{G}; {hint}.")
        generated = r.get("samples/step_generated")
        if k.size and isinstance(generated, (int, float)) and not isinstance(generated, bool) \
                and generated != G * k.size:
            per = generated / k.size
            raise ValueError(f"group_size={G} does not match the run: step {r.get('step')} generated {generated:g} "
                             f"samples in {k.size} groups, {per:g} per group; {hint} (here {per:g}).")
        sigma = r.get("groups/sigma")
        if sigma:
            levels = np.sqrt(np.arange(G + 1) * (G - np.arange(G + 1))) / G
            odd = [s for s in np.asarray(sigma, dtype=np.float64) if not np.isclose(levels, s, atol=1e-5).any()]
            if odd:
                raise ValueError(f"group_size={G} does not match the run: step {r.get('step')} logs a group with "
                                 f"σ = {odd[0]:g}, which no k of G = {G} binary rewards gives; {hint}.")
    return G


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
    group_size = _check_run_group_size(records, group_size)
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
    G = group_size = _check_run_group_size(records, group_size)
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
    if isinstance(runs, (str, bytes, dict)) or not isinstance(runs, Sequence):
        raise TypeError(f"runs must be a list of run logs (one list of records per run); got {type(runs).__name__}.")
    runs = [_check_records(records, "each run") for records in runs]
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
    num_bands = check_int(num_bands, "num_bands", minimum=1)  # initial_bands has checked it
    G = _check_run_group_size(records, group_size)
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

    if not isinstance(runs, dict) or not runs:
        raise ValueError("runs must be a non-empty dict: recipe key ('grpo', 'dr_grpo', 'dapo') -> the records of its "
                         "seeds.")
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
    solve rate gains most, and ``fastest_gain``; ``seeds``; ``samples`` (generated per run)."""
    if not isinstance(study, dict) or key not in study:
        has = sorted(study) if isinstance(study, dict) else type(study).__name__
        raise ValueError(f"study has no recipe {' '.join(repr(key).split())[:40]}; it has {has}.")
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

    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1, hint="It is L_max, a number of tokens.")
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
    group_size = _check_run_group_size(records, group_size)
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


def _signed(value: float, digits: int = 3) -> str:
    """``value`` with its sign at ``digits`` decimals, and no sign where it rounds to zero
    (``-0.0002`` shows as ``0.000``, not ``-0.000``)."""
    text = f"{value:+.{digits}f}"
    return f"{0.0:.{digits}f}" if float(text) == 0 else text


def comparison_screen(values: dict[str, dict[str, Sequence[float]]], level: float = 0.05) -> dict[str, Any]:
    """Every pair of recipes compared on every metric, each difference against the seed noise
    (Welch standard error), with the Bonferroni threshold z* for a two-sided family-wise ``level``
    over all the comparisons made (chapter 13).

    ``values`` maps a metric label to {recipe name: one value per seed}. Returns ``header`` and
    ``rows`` for :func:`stddial_book.display.table` (cells "difference ± se", a * where |z| > z*),
    ``passed`` (labels of the comparisons beyond z*), ``passed_details`` (for each of them the
    metric, the recipes ``a`` and ``b`` and Welch's ``difference``, ``se`` and ``z`` for a − b) and
    ``summary`` (``tests``, ``passed``, ``passed_names``, ``z_star``, ``level``, ``not_testable``: the
    comparisons with a single seed on either side, whose cells say "not testable with one seed" and
    which never pass).
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
    rows, passed, details, untestable = [], [], [], 0
    for label, per_recipe in values.items():
        row = [label]
        for a, b in pairs:
            result = _welch_or_untestable(per_recipe[a], per_recipe[b])
            beyond = bool(abs(result["z"]) > z_star)  # False for NaN: one seed decides nothing
            if math.isnan(result["z"]):
                untestable += 1
                row.append(f"{_signed(result['difference'])} ({NOT_TESTABLE})")
            else:
                row.append(f"{_signed(result['difference'])} ± {result['se']:.3f}{' *' if beyond else ''}")
            if beyond:
                passed.append(f"{label}, {a} − {b}")
                details.append({"metric": label, "a": a, "b": b, **result})
        rows.append(row)
    return {"header": ["final value"] + [f"{a} − {b}" for a, b in pairs], "rows": rows, "passed": passed,
            "passed_details": details,
            "summary": {"tests": tests, "passed": len(passed), "passed_names": "; ".join(passed) or "none",
                        "z_star": z_star, "level": level, "not_testable": untestable}}


def welch(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """mean(a) − mean(b), its standard error (Welch, unequal variances) and z = difference / se.

    With no noise (se = 0) z is ±inf for a difference and 0 for none. With fewer than two values on
    either side the noise cannot be measured (a single seed's standard error is unknown, not 0):
    ``ValueError``, not testable with one seed.
    """
    ma, sa = seed_summary(a)
    mb, sb = seed_summary(b)
    if min(_count(a), _count(b)) < 2:
        raise ValueError(f"a difference is {NOT_TESTABLE}: welch needs at least two values (seeds) on each side to "
                         f"measure their noise; got {_count(a)} and {_count(b)}. Run more seeds.")
    se = math.sqrt(sa**2 + sb**2) if max(sa, sb) < 1e150 else math.hypot(sa, sb)  # no overflow in the squares
    diff = ma - mb
    if not (math.isfinite(diff) and math.isfinite(se)):
        raise ValueError(f"the difference of means {ma:g} − {mb:g} overflows float64; rescale the values.")
    z = diff / se if se > 0 else (float("inf") * np.sign(diff) if diff != 0 else 0.0)
    return {"difference": diff, "se": se, "z": z}


def _welch_or_untestable(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """:func:`welch`, or the difference of the means with ``se`` and ``z`` NaN where a side has one seed."""
    if min(_count(a), _count(b)) < 2:
        return {"difference": seed_summary(a)[0] - seed_summary(b)[0], "se": float("nan"), "z": float("nan")}
    return welch(a, b)


def _count(values: Sequence[float]) -> int:
    """How many values (seeds) ``values`` holds; it has passed :func:`seed_summary`'s checks."""
    return int(to_numpy(values, "values").size)


#: What a comparison shows when a recipe has a single seed: its noise cannot be measured.
NOT_TESTABLE = "not testable with one seed"


# --- one run, and the testbed, in numbers (chapters 9-12) -------------------------------------
# Each function returns a dict (or arrays) that a chapter glues with display.glue_all, so the
# computation of a quoted number lives here, tested, and not in a chapter's glue cell.

__all__ += ["mass_by_sigma", "run_summary", "warm_start_numbers", "pass_rate_by_carries", "heldout_start",
            "pool_start", "pool_gain", "silent_sides", "parameter_counts", "profile_table", "run_resources",
            "resource_table"]


def mass_by_sigma(records: list[dict[str, Any]], group_size: int) -> dict[str, np.ndarray]:
    """Share of a run's mixed groups, and of its update mass, at each level of the group std σ.

    A group of G binary rewards with k correct has σ = sqrt(k (G − k)) / G, the same for k and
    G − k, so the σ the log records names the pair {k, G − k}. Returns ``k`` (the smaller of the
    pair, 1 to G // 2), ``sigma`` (σ at that level), ``groups`` (share of the mixed groups that
    reached an update) and ``mass`` (share of their summed weights w). GRPO weights a level by σ,
    Dr. GRPO by σ², so ``mass`` leans towards k = G/2 more under Dr. GRPO; ``mass[0]`` is
    :func:`extreme_mass_share`. Chapters 10-12.
    """
    G = _check_run_group_size(records, group_size)
    sigma, weight = identity_from_log(records)
    k = np.arange(1, G // 2 + 1)
    levels = np.sqrt(k * (G - k)) / G
    match = np.isclose(sigma[:, None], levels[None, :], atol=1e-5)
    mixed = sigma > 1e-5
    if np.any(mixed & ~match.any(axis=1)):
        odd = sigma[mixed & ~match.any(axis=1)][0]
        raise ValueError(f"a logged group has σ = {odd:g}, which no k of G = {G} binary rewards gives; pass the "
                         "run's group_size.")
    if not match.any() or weight[mixed].sum() <= 0:
        raise ValueError("no mixed group reached an update in this run (every group was silent).")
    return {"k": k, "sigma": levels, "groups": match.sum(axis=0) / match.sum(),
            "mass": (weight[:, None] * match).sum(axis=0) / weight[mixed].sum()}


def run_summary(provenance: dict[str, Any], records: list[dict[str, Any]], group_size: int) -> dict[str, Any]:
    """One RL run in the numbers chapters 10-12 quote, from :func:`stddial_book.runs.load_run`.

    ``profile``, ``device``, ``time`` (wall seconds), ``samples`` (generated), ``kept``,
    ``updates`` (optimizer steps); held-out accuracy at the start and end, sampled (``acc0``,
    ``acc1``, and per bucket ``acc0_D2``, ``acc1_D2``, ...) and greedy (``greedy0``, ``greedy1``);
    ``silent``, the mean over steps of the silent fraction of the generated groups; ``G``;
    ``extreme``, the share of the update mass that went to groups with k = 1 or G − 1
    (:func:`extreme_mass_share`); ``len0`` and ``len1``, the mean completion length over the first
    and the last four steps.
    """
    if not isinstance(provenance, dict):
        raise TypeError(f"provenance must be the dict load_run returns first; got {type(provenance).__name__}.")
    records = _check_records(records)
    G = _check_run_group_size(records, group_size)
    steps = [r for r in records if r["step"] > 0]
    if not steps:
        raise ValueError("this run log holds no training step.")
    first, last = final_eval(records[:1]), final_eval(records)
    out: dict[str, Any] = {"profile": provenance.get("profile"), "device": provenance.get("device"),
                           "time": provenance.get("wall_time_s"), "samples": steps[-1]["samples/generated"],
                           "kept": steps[-1]["samples/kept"], "updates": steps[-1]["updates"],
                           "acc0": first["accuracy_sampled"], "acc1": last["accuracy_sampled"],
                           "greedy0": first["accuracy_greedy"], "greedy1": last["accuracy_greedy"]}
    for b in buckets(records):
        out[f"acc0_{b}"] = first[f"accuracy_sampled/{b}"]
        out[f"acc1_{b}"] = last[f"accuracy_sampled/{b}"]
    lengths = [r["completions/mean_length"] for r in steps]
    out.update(silent=float(np.mean([r["dial/silent_fraction"] for r in steps])), G=G,
               extreme=extreme_mass_share(records, G), len0=float(np.mean(lengths[:4])),
               len1=float(np.mean(lengths[-4:])))
    return out


def warm_start_numbers(sft_dir) -> dict[str, Any]:
    """Chapter 9: how the warm start in ``sft_dir`` ended (its ``sft.json``): ``steps``, ``stop``
    (the probe's estimate when the stopping rule fired), ``target``, ``pass`` (the held-out pass
    rate measured again with fresh samples), ``pass_n`` (how many samples) and ``time`` (s).
    ``stop`` and ``pass_n`` are None for a warm start recorded before they were logged."""
    from pathlib import Path

    from .runs import read_json

    summary = read_json(Path(sft_dir) / "sft.json")
    return {"steps": summary["steps"], "stop": summary.get("stop_estimate"), "target": summary["target_pass_rate"],
            "pass": summary["pass_rate"], "pass_n": summary.get("pass_rate_samples"), "time": summary["wall_time_s"]}


def pass_rate_by_carries(evaluation, problems) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Chapter 9: per bucket, the carry counts present and the sampled pass rate at each, from an
    :class:`~stddial_book.train.EvalResult` of ``problems`` (in the same order)."""
    _check_evaluation(evaluation)
    problems = _check_problems(problems)
    carries = np.array([p.carries for p in problems])
    if carries.size != evaluation.successes.size:
        raise ValueError(f"the evaluation covers {evaluation.successes.size} prompts but {carries.size} problems were "
                         "given; pass the problems it evaluated, in order.")
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
    pass rate over the bucket's carry counts (:func:`pass_rate_by_carries`)."""
    _check_evaluation(evaluation)
    G = evaluation.num_samples
    out: dict[str, Any] = {"G": G, "silent": evaluation.silent_fraction,
                           "mixed": float(np.mean((evaluation.successes > 0) & (evaluation.successes < G))),
                           "greedy": evaluation.greedy, "sampled": evaluation.sampled}
    out.update({f"sampled_{b}": v for b, v in evaluation.sampled_by_bucket.items()})
    for b, (_, rates) in pass_rate_by_carries(evaluation, problems).items():
        out[f"carry_spread_{b}"] = float(rates.max() - rates.min())
    return out


def _check_evaluation(evaluation: Any) -> None:
    """Refuse what is not a held-out evaluation (:class:`~stddial_book.train.EvalResult`)."""
    needed = ("successes", "num_samples", "buckets", "greedy", "sampled", "sampled_by_bucket", "silent_fraction")
    if any(not hasattr(evaluation, name) for name in needed):
        raise TypeError(f"evaluation must be an EvalResult (what train.evaluate returns); got "
                        f"{type(evaluation).__name__}.")


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
    (the unbiased expected silent fraction of a group of ``group_size``, chapter 13)."""
    _, n, K = pool_history(records)
    G = check_group_size(group_size)
    problems = _check_problems(problems)
    if len(problems) < K.shape[1]:
        raise ValueError(f"the pool has {K.shape[1]} prompts but only {len(problems)} problems were given; pass the "
                         "training problems the run drew its pool from.")
    p = K[0] / n
    digits = np.array([q.digits for q in list(problems)[:K.shape[1]]])
    silent_value = np.zeros(G + 1)
    silent_value[[0, G]] = 1.0
    out: dict[str, Any] = {"samples": n, "mean": float(p.mean())}
    out.update({f"mean_D{d}": float(p[digits == d].mean()) for d in sorted(set(digits.tolist()))})
    out.update(zero=float(np.mean(K[0] == 0)),
               silent=float(hypergeometric_expectation(K[0], n, G, silent_value).mean()))
    return out


def pool_gain(runs: Sequence[list[dict[str, Any]]]) -> dict[str, float]:
    """Chapter 9: how far a set of runs (seeds) moved the pool's mean solve rate, against the
    noise of measuring it. ``gain`` is the mean over runs of (last − first measurement),
    ``noise`` the standard error of one measurement of the pool mean at the first run's start,
    sqrt(Σ p(1 − p) / n) / N over its N prompts, and ``gain_ratio`` their quotient."""
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
    each unbiased from the measured counts (:func:`hypergeometric_expectation`)."""
    steps, n, K = pool_history(records)
    G = check_group_size(group_size)
    wrong, right = np.zeros(G + 1), np.zeros(G + 1)
    wrong[0], right[G] = 1.0, 1.0
    return {"step": steps, "mean": K.mean(axis=1) / n,
            "all_wrong": np.array([hypergeometric_expectation(k, n, G, wrong).mean() for k in K]),
            "all_right": np.array([hypergeometric_expectation(k, n, G, right).mean() for k in K])}


def parameter_counts(profiles: dict) -> dict[str, int]:
    """Chapter 9: the number of parameters of each profile's model (built, randomly initialised)."""
    from .model import model_for_profile

    return {name: int(sum(p.numel() for p in model_for_profile(profile).parameters()))
            for name, profile in profiles.items()}


def profile_table(profiles: dict, counts: dict[str, int]) -> tuple[list[str], list[list[str]]]:
    """Chapter 9: header and rows of the run profiles side by side, one column per profile and one
    row per setting (so the table stays narrow however many settings it shows)."""
    from .profiles import Profile

    if not isinstance(profiles, dict) or not profiles or not all(isinstance(p, Profile) for p in profiles.values()):
        raise TypeError("profiles must be a non-empty dict of name -> Profile (e.g. stddial_book.profiles.PROFILES).")
    if not isinstance(counts, dict) or set(counts) != set(profiles):
        raise ValueError("counts must give one parameter count per profile (parameter_counts(profiles)).")
    names = list(profiles)

    def row(label: str, value) -> list[str]:
        return [label] + [str(value(profiles[n], n)) for n in names]

    rows = [row("device", lambda p, n: p.device),
            row("parameters", lambda p, n: f"{counts[n] / 1e6:.2f} M"),
            row("digits D", lambda p, n: " and ".join(map(str, p.task["digits"]))),
            row("group size G", lambda p, n: p.train["group_size"]),
            row("prompts per step", lambda p, n: p.train["prompts_per_step"]),
            row("pool prompts", lambda p, n: p.train.get("pool_size") or "all"),
            row("minibatches per step", lambda p, n: p.train["num_minibatches"]),
            row("samples per run", lambda p, n: f"{p.train['sample_budget']:,}"),
            row("seeds", lambda p, n: len(p.seeds))]
    return ["setting"] + names, rows


def run_resources(sft_provenance: dict[str, Any], run_provenance: dict[str, Any]) -> dict[str, Any]:
    """Chapter 9: what a warm start and one RL run cost, from their provenance: ``device``,
    ``sft_s`` and ``run_s`` (wall seconds), ``rss_mb`` (the run's peak resident memory),
    ``gpu_mb`` (peak GPU memory, None on a CPU) and ``samples`` (the run's sample budget)."""
    for name, value in (("sft_provenance", sft_provenance), ("run_provenance", run_provenance)):
        if not isinstance(value, dict):
            raise TypeError(f"{name} must be a provenance dict (load_run's first value); got {type(value).__name__}.")
    try:
        samples = run_provenance["config"]["train"]["sample_budget"]
    except (KeyError, TypeError):
        raise ValueError("run_provenance lacks config.train.sample_budget; pass the provenance load_run returns for "
                         "an RL run.") from None
    return {"device": run_provenance.get("device"), "sft_s": sft_provenance.get("wall_time_s"),
            "run_s": run_provenance.get("wall_time_s"), "rss_mb": run_provenance.get("peak_rss_mb"),
            "gpu_mb": run_provenance.get("peak_gpu_mb"), "samples": samples}


def resource_table(resources: dict[str, dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Chapter 9: header and rows of :func:`run_resources` results side by side, one column each."""
    def shown(value, fmt: str) -> str:
        return "–" if value is None else format(value, fmt)

    needed = ("device", "samples", "sft_s", "run_s", "rss_mb", "gpu_mb")
    if not isinstance(resources, dict) or not resources or not all(
            isinstance(r, dict) and all(k in r for k in needed) for r in resources.values()):
        raise ValueError("resources must be a non-empty dict of label -> what run_resources returns.")
    labels = list(resources)
    rows = [["device"] + [str(resources[k]["device"]) for k in labels],
            ["samples per run"] + [shown(resources[k]["samples"], ",") for k in labels],
            ["warm start (s)"] + [shown(resources[k]["sft_s"], ".0f") for k in labels],
            ["RL run (s)"] + [shown(resources[k]["run_s"], ".0f") for k in labels],
            ["peak resident memory (MB)"] + [shown(resources[k]["rss_mb"], ".0f") for k in labels],
            ["peak GPU memory (MB)"] + [shown(resources[k]["gpu_mb"], ".0f") for k in labels]]
    return [""] + labels, rows


# --- chapters 12 and 13: glue-ready summaries, DAPO's refill replayed, the seed arithmetic ------
# Each function returns plain numbers (mostly a dict a chapter glues with display.glue_all).

__all__ += ["clipping_numbers", "refill_band_shares", "replay_refill", "max_rounds_study", "minibatch_clipping",
            "sample_coefficients", "screen_values", "live_comparison_numbers", "study_numbers",
            "hard_quartile_screen", "comparison_verdicts", "seed_projection"]


def _training_steps(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of training steps that generated groups (step > 0)."""
    steps = [r for r in _check_records(records) if r["step"] > 0 and "groups_generated/k" in r]
    if not steps:
        raise ValueError("this run log holds no training step with generated groups (groups_generated/k).")
    return steps


def clipping_numbers(records: list[dict[str, Any]]) -> dict[str, float]:
    """How often the clip and the length cap acted in a run (chapter 12): the mean over the steps
    that made an update of the fraction of tokens clipped at the upper bound (``clip_high``), at
    the lower bound (``clip_low``), the share of those steps with any token clipped at the upper
    bound (``clip_high_steps``), and the mean fraction of completions cut at the length cap
    (``truncated``). Each step's clip fractions are the mean over its minibatches."""
    steps = _training_steps(records)
    high = np.array([r["clip_ratio/high_mean"] for r in steps if "clip_ratio/high_mean" in r], dtype=np.float64)
    low = np.array([r["clip_ratio/low_mean"] for r in steps if "clip_ratio/low_mean" in r], dtype=np.float64)
    if high.size == 0:
        raise ValueError("this run log holds no clip_ratio metrics (no step made an update).")
    return {"clip_high": float(high.mean()), "clip_low": float(low.mean()),
            "clip_high_steps": float(np.mean(high > 0)),
            "truncated": float(np.mean([r["completions/clipped_ratio"] for r in steps]))}


def refill_band_shares(records: list[dict[str, Any]], group_size: int, redraw_tries: int = 4,
                       num_bands: int = 4) -> dict[str, np.ndarray]:
    """Share of the expected update weight per band of initial solve rate under three ways of
    handling silent groups (chapter 12): none (GRPO), DAPO's refill with new prompts (verl, this
    book's trainer) and the source paper's same-prompt redraw of up to ``redraw_tries`` draws
    (:func:`stddial_book.identity.refill_weight`). p is each pool prompt's measured solve rate at
    the start of RL (plug-in), bands as :func:`initial_bands`. Each entry sums to 1.
    """
    from .identity import expected_update_weight, refill_weight, silent_probability
    from .recipes import GRPO

    G = check_group_size(group_size)
    _, n, K = pool_history(records)
    p0 = K[0] / n
    bands = initial_bands(records, num_bands)
    f0 = float(np.mean(silent_probability(p0, G)))
    rules = {"GRPO, no refill": expected_update_weight(p0, G, GRPO),
             "new-prompt refill (verl, this book)": refill_weight(p0, G, GRPO, pool_silent_fraction=f0),
             f"same-prompt redraw, {redraw_tries} draws (the paper)": refill_weight(p0, G, GRPO,
                                                                                  redraw_tries=redraw_tries)}
    out = {}
    for name, weight in rules.items():
        weight = np.asarray(weight, dtype=np.float64)
        if weight.sum() <= 0:
            raise ValueError("every pool prompt is silent at the start (p = 0 or 1): no weight to share.")
        out[name] = np.array([weight[bands == b].sum() for b in range(num_bands)]) / weight.sum()
    return out


def replay_refill(records: list[dict[str, Any]], group_size: int, prompts_per_step: int,
                  max_rounds: int) -> dict[str, np.ndarray]:
    """DAPO's refill replayed on a run's logged groups with a cap of ``max_rounds`` rounds.

    Each step's generated groups are logged in the order they were drawn (``groups_generated/k``),
    and every round asked for exactly the groups still missing; feeding them in that order to a
    :class:`~stddial_book.sampling.DynamicSampler` reproduces the step's rounds at the run's own
    cap and shows what a lower cap would have kept from the same groups (chapter 12). Per step:
    ``rounds``, ``hit_cap``, ``groups_kept``, ``groups_generated``, and as logged
    ``logged_rounds`` and ``logged_hit_cap``.
    """
    from .sampling import DynamicSampler

    G = _check_run_group_size(records, group_size)
    prompts_per_step = check_int(prompts_per_step, "prompts_per_step", minimum=1)
    max_rounds = check_int(max_rounds, "max_rounds", minimum=1)
    out: dict[str, list] = {"rounds": [], "hit_cap": [], "groups_kept": [], "groups_generated": [],
                            "logged_rounds": [], "logged_hit_cap": []}
    for r in _training_steps(records):
        ks = np.asarray(r["groups_generated/k"], dtype=np.int64)
        if np.any(ks < 0) or np.any(ks > G):
            raise ValueError(f"step {r['step']} logs k outside 0..{G}; pass the run's group size.")
        position = [0]

        def draw(_round: int, wanted: int, ks=ks, position=position) -> tuple[np.ndarray, np.ndarray]:
            chunk = ks[position[0]:position[0] + wanted]
            position[0] += chunk.size
            correct = (np.arange(G)[None, :] < chunk[:, None]).astype(np.float64).reshape(-1)
            return np.zeros(correct.size), correct

        _, cost = DynamicSampler(prompts_per_step, G, max_rounds).fill(draw)
        out["rounds"].append(cost.rounds)
        out["hit_cap"].append(cost.hit_cap)
        out["groups_kept"].append(cost.groups_kept)
        out["groups_generated"].append(cost.groups_generated)
        out["logged_rounds"].append(int(r.get("dynamic_sampling/rounds", -1)))
        out["logged_hit_cap"].append(bool(r.get("dynamic_sampling/hit_cap", False)))
    return {k: np.asarray(v) for k, v in out.items()}


def max_rounds_study(records: list[dict[str, Any]], train: dict[str, Any], max_rounds: int = 1) -> dict[str, Any]:
    """What a DAPO run would have done with another cap on refill rounds, from its own log.

    ``train`` is the run's training configuration (``provenance["config"]["train"]``). The logged
    groups are replayed (:func:`replay_refill`) at the run's own cap (``reproduced``: the replay
    gives the logged rounds and short batches at every step) and at ``max_rounds``. Returns, as
    logged: ``steps_logged``, ``updates_logged``, ``hit_cap_logged`` (share of steps); replayed at
    ``max_rounds``: ``hit_cap`` (share of steps with a short batch), ``groups_kept`` (mean per
    step), ``kept_share`` (of the batch), ``samples_per_step`` (generated), and for the same
    sample budget ``steps`` = ⌈budget / samples per step⌉ and ``updates`` = steps × the mean of
    min(num_minibatches, groups kept) per step. The last two are estimates that assume the
    silent fraction stays as in the logged run; with ``max_rounds = 1`` every step costs exactly
    one round, so ``steps`` is exact (chapter 12).
    """
    if not isinstance(train, dict):
        raise TypeError(f"train must be the run's training configuration (a dict); got {type(train).__name__}.")
    missing = [k for k in ("group_size", "prompts_per_step", "max_rounds", "sample_budget", "num_minibatches")
               if k not in train]
    if missing:
        raise ValueError(f"train lacks {', '.join(missing)}; pass provenance['config']['train'] of the run.")
    G, per_step = train["group_size"], train["prompts_per_step"]
    own = replay_refill(records, G, per_step, train["max_rounds"])
    new = replay_refill(records, G, per_step, max_rounds)
    steps = _training_steps(records)
    samples_per_step = float(np.mean(new["groups_generated"])) * G
    num_steps = math.ceil(train["sample_budget"] / samples_per_step)
    updates_per_step = float(np.mean(np.minimum(train["num_minibatches"], new["groups_kept"])))
    return {"reproduced": bool(np.array_equal(own["rounds"], own["logged_rounds"])
                               and np.array_equal(own["hit_cap"], own["logged_hit_cap"])),
            "steps_logged": len(steps), "updates_logged": int(steps[-1]["updates"]),
            "hit_cap_logged": float(np.mean(own["logged_hit_cap"])),
            "hit_cap": float(np.mean(new["hit_cap"])), "groups_kept": float(np.mean(new["groups_kept"])),
            "kept_share": float(np.mean(new["groups_kept"])) / per_step, "samples_per_step": samples_per_step,
            "steps": num_steps, "updates": num_steps * updates_per_step}


def minibatch_clipping(checks: dict[str, np.ndarray]) -> dict[str, float]:
    """The clipped-token fraction of the identity checks made inside the update
    (:func:`identity_during_training`), first minibatch of a batch against the later ones: how
    many checks (``first_checks``, ``later_checks``), the largest fraction on the first
    (``first_max``), the mean and largest on later ones (``later_mean``, ``later_max``) and the
    share of later checks with any clipped token (``later_nonzero``). Chapter 12."""
    if not isinstance(checks, dict) or any(k not in checks for k in ("minibatch", "clipped")):
        raise ValueError("checks must be what identity_during_training returns (minibatch, clipped).")
    first = np.asarray(checks["minibatch"]) == 0
    clipped = np.asarray(checks["clipped"], dtype=np.float64)
    if not first.any() or first.all():
        raise ValueError("need checks on the first and on later minibatches (num_minibatches >= 2).")
    return {"first_checks": int(first.sum()), "first_max": float(clipped[first].max()),
            "later_checks": int((~first).sum()), "later_mean": float(clipped[~first].mean()),
            "later_max": float(clipped[~first].max()), "later_nonzero": float(np.mean(clipped[~first] > 0))}


def sample_coefficients(recipe, correct, lengths, group_size: int, max_new_tokens: int) -> np.ndarray:
    """Each sample's coefficient cᵢ in the update the recipe's loss makes at ratio 1:
    −∇L = Σᵢ cᵢ ∇ Σₜ log π(oᵢₜ), the gradient of the summed log-probabilities of sample i.

    Taken by autograd through :func:`stddial_book.losses.policy_loss` (KL off) on a batch with the
    given correctness and completion lengths, so it is what the trainer's loss does: Aᵢ / (B ℓᵢ)
    for the per-sequence token mean (GRPO), Aᵢ / (B L_max) for the sum over L_max (Dr. GRPO),
    Aᵢ / Σⱼ ℓⱼ for the token mean (DAPO), with B samples and ℓᵢ the lengths (chapters 4 and 13).
    """
    from ._arrays import check_binary
    from .probes import token_weights
    from .recipes import as_recipe, group_advantages

    recipe = as_recipe(recipe)
    G = check_group_size(group_size)
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1)
    correct = to_numpy(correct, "correct")
    check_binary(correct, "correct")
    lengths = to_numpy(lengths, "lengths")
    if correct.ndim != 1 or lengths.shape != correct.shape:
        raise ValueError(f"correct and lengths must be 1-D, one entry per sample; got shapes {correct.shape} "
                         f"and {lengths.shape}.")
    if np.any(lengths != np.round(lengths)) or lengths.min() < 1 or lengths.max() > max_new_tokens:
        raise ValueError(f"lengths must be whole token counts in 1..max_new_tokens={max_new_tokens}.")
    rewards = np.where(correct > 0, recipe.reward_correct, recipe.reward_wrong)
    weights = token_weights(lengths.astype(np.int64).tolist(), group_advantages(rewards, G, recipe),
                            recipe.replace(kl_coef=0.0), max_new_tokens)
    return weights[:, 0]  # the same on every token of a sample; token 0 is always in the mask


def screen_values(study: dict[str, Any], runs: dict[str, list[list[dict[str, Any]]]]) -> dict[str, dict[str, list[float]]]:
    """The four final values chapter 13 screens, per recipe name and seed, as
    :func:`comparison_screen` takes them: the mean solve rate of the whole pool and of its hardest
    quartile (from a :func:`pool_study` of the runs), and the held-out accuracy, sampled and
    greedy (:func:`final_eval`). ``runs`` maps a recipe key to the records of its seeds."""
    from .recipes import get_recipe

    if not isinstance(study, dict) or not isinstance(runs, dict) or set(study) != set(runs):
        raise ValueError("study and runs must cover the same recipe keys (study = pool_study(runs, G)).")
    names = {key: get_recipe(key).name for key in runs}
    return {
        "pool solve rate": {names[k]: [float(b.mean()) for b in study[k]["final"]] for k in runs},
        "hardest quartile": {names[k]: [float(b[0]) for b in study[k]["final"]] for k in runs},
        "held-out sampled": {names[k]: [final_eval(r)["accuracy_sampled"] for r in runs[k]] for k in runs},
        "held-out greedy": {names[k]: [final_eval(r)["accuracy_greedy"] for r in runs[k]] for k in runs},
    }


def live_comparison_numbers(runs: dict[str, list[list[dict[str, Any]]]], group_size: int) -> dict[str, float]:
    """Per recipe key, the seed means chapter 13 quotes: ``share_<key>``, the update mass on
    groups with k = 1 or G − 1 (:func:`extreme_mass_share`), and ``updates_<key>``, the
    optimizer steps a run made for its sample budget."""
    if not isinstance(runs, dict) or not runs:
        raise ValueError("runs must map recipe keys to the records of their seeds.")
    out: dict[str, float] = {}
    for key, seeds in runs.items():
        out[f"share_{key}"] = seed_summary([extreme_mass_share(r, group_size) for r in seeds])[0]
        out[f"updates_{key}"] = seed_summary([_training_steps(r)[-1]["updates"] for r in seeds])[0]
    return out


def study_numbers(study: dict[str, Any]) -> dict[str, float]:
    """The numbers chapter 13 quotes from a :func:`pool_study` of several recipes, flat: the range of
    the silent fraction's R² over recipes (``r2_min``, ``r2_max``), the largest RMS gap
    (``rmse_max``) and the largest realised − closed-form mass gap (``mass_gap``); per recipe key
    the hardest quartile's share of the update mass (``hard_<key>``) and its final mean solve rate,
    mean and SD over seeds (``q1_<key>``, ``q1_<key>_sd``); the hardest quartile's start
    (``q1_start``, first recipe) and the fewest seeds of a recipe (``seeds``). All from
    :func:`prediction_numbers`."""
    if not isinstance(study, dict) or not study:
        raise ValueError("study must be a non-empty pool_study result.")
    per = {key: prediction_numbers(study, key) for key in study}
    out: dict[str, float] = {"r2_min": min(p["silent_r2"] for p in per.values()),
                             "r2_max": max(p["silent_r2"] for p in per.values()),
                             "rmse_max": max(p["silent_rms"] for p in per.values()),
                             "mass_gap": max(p["mass_gap"] for p in per.values()),
                             "q1_start": next(iter(per.values()))["q1_start"],
                             "seeds": min(p["seeds"] for p in per.values())}
    for key, p in per.items():
        out[f"hard_{key}"] = p["mass_q1"]
        out[f"q1_{key}"] = p["q1_end"]
        out[f"q1_{key}_sd"] = p["q1_end_sd"]
    return out


def hard_quartile_screen(study: dict[str, Any], reference: str = "grpo", threshold: float = 3.0) -> dict[str, Any]:
    """``reference`` against every other recipe of a :func:`pool_study` on the hardest quartile's
    final mean solve rate (Welch), each difference counting only beyond ``threshold`` standard
    errors (chapter 13). Returns ``summary`` (for ``glue_all``: ``diff_<key>``, ``se_<key>``,
    ``z_<key>`` of reference − key, the ``threshold``, the number of ``tests`` and ``level``, the
    family-wise chance of a false pass under the normal approximation, tests · 2Φ(−threshold), and
    ``not_testable``, the comparisons with a single seed on either side, whose z is NaN and which never
    pass) and ``passed``, the labels of the comparisons beyond the threshold."""
    from statistics import NormalDist

    from .recipes import get_recipe

    threshold = check_number(threshold, "threshold")
    if not threshold > 0:
        raise ValueError(f"threshold is a number of standard errors and must be positive (every |z| exceeds "
                         f"{threshold:g}); got {threshold}.")
    if not isinstance(study, dict) or not isinstance(reference, str) or reference not in study or len(study) < 2:
        raise ValueError(f"study must hold {' '.join(repr(reference).split())[:40]} and at least one other recipe.")
    final = {key: [float(f[0]) for f in study[key]["final"]] for key in study}
    others = [key for key in study if key != reference]
    summary: dict[str, float] = {"threshold": threshold, "tests": len(others),
                                 "level": len(others) * 2 * NormalDist().cdf(-threshold)}
    passed = []
    summary["not_testable"] = 0
    for key in others:
        res = _welch_or_untestable(final[reference], final[key])
        summary.update({f"diff_{key}": res["difference"], f"se_{key}": res["se"], f"z_{key}": res["z"]})
        summary["not_testable"] += math.isnan(res["z"])  # a single seed: no noise to compare with
        if abs(res["z"]) > threshold:
            passed.append(f"{get_recipe(reference).name} − {get_recipe(key).name}")
    return {"summary": summary, "passed": passed}


def comparison_verdicts(live: dict[str, Any], recorded: dict[str, Any]) -> dict[str, Any]:
    """Chapter 13's verdicts over its two families of comparisons: ``live`` is what
    :func:`comparison_screen` returns for the live runs, ``recorded`` what
    :func:`hard_quartile_screen` returns for the recorded ones. Returns ``verdict`` and
    ``verdict_summary`` (the recorded screen, in words), ``bottom_line`` (both), and the
    accounting over both families: ``total_tests`` and ``total_level``, the sum of the two
    family-wise levels, which bounds the chance that any comparison of the chapter passes by
    luck (Bonferroni: the chance of a union is at most the sum of the chances)."""
    for name, screen in (("live", live), ("recorded", recorded)):
        if not isinstance(screen, dict) or "passed" not in screen or "summary" not in screen:
            raise ValueError(f"{name} must be what comparison_screen / hard_quartile_screen returns.")
    live_passed, recorded_passed = list(live["passed"]), list(recorded["passed"])
    beyond = "; ".join(recorded_passed)
    return {
        "verdict": ("Neither difference exceeds that screen." if not recorded_passed
                    else f"Beyond the screen: {beyond}."),
        "verdict_summary": ("No difference between the recipes in the hardest quartile exceeds the seed noise "
                            "there." if not recorded_passed
                            else f"In the hardest quartile, {beyond} exceeds the seed noise."),
        "bottom_line": ("The std dial decides where the update goes as its closed forms say, live and in the "
                        "recorded runs; " + ("at these budgets no recipe learns measurably more than another, "
                                             "overall or on the hardest prompts."
                                             if not live_passed and not recorded_passed
                                             else "beyond the seed noise: "
                                             + "; ".join(recorded_passed + live_passed) + ".")),
        "total_tests": int(live["summary"]["tests"] + recorded["summary"]["tests"]),
        "total_level": float(live["summary"]["level"] + recorded["summary"]["level"]),
    }


def seed_projection(values: dict[str, dict[str, Sequence[float]]], seeds: int, level: float = 0.05) -> dict[str, Any]:
    """What :func:`comparison_screen` could see with ``seeds`` seeds per recipe, if every recipe's
    mean and seed-to-seed SD stayed as measured (chapter 13's exercise).

    The screen's threshold z* depends only on the number of comparisons, not on the seeds; the
    standard error of a difference, sqrt(s_a² / n + s_b² / n), shrinks as 1/sqrt(n), so z grows
    as sqrt(n). Per comparison: ``z`` now, ``z_new`` with ``seeds`` seeds, ``needed``, the fewest
    seeds per recipe for |z| to reach z*, and ``chance``, the probability of passing with
    ``seeds`` seeds if the measured difference were the true one (normal approximation:
    Φ(|z_new| − z*) + Φ(−|z_new| − z*)). Returns ``header`` and ``rows`` for
    :func:`stddial_book.display.table` and ``summary`` (``z_star``, ``seeds_now``, ``seeds``,
    ``se_factor`` = sqrt(seeds_now / seeds), ``passed_now``, ``projected``, the comparisons whose
    ``z_new`` passes, ``projected_names``, ``likely``, those with ``chance`` > 1/2, and
    ``fewest_needed``, over the comparisons not passed now).
    """
    from itertools import combinations
    from statistics import NormalDist

    seeds = check_int(seeds, "seeds", minimum=2)
    z_star = comparison_screen(values, level)["summary"]["z_star"]
    normal = NormalDist()
    rows, now, projected, likely, needed_not_passed, counts = [], 0, [], 0, [], []
    for label, per_recipe in values.items():
        for a, b in combinations(per_recipe, 2):
            va, vb = (to_numpy(per_recipe[x], x) for x in (a, b))
            if va.size < 2 or vb.size < 2:
                raise ValueError("each recipe needs at least two seeds to measure its spread.")
            counts += [va.size, vb.size]
            spread = float(va.var(ddof=1) + vb.var(ddof=1))
            z = welch(va, vb)["z"]
            diff = float(va.mean() - vb.mean())
            z_new = diff / math.sqrt(spread / seeds) if spread > 0 else z
            needed = (max(2, math.ceil(z_star**2 * spread / diff**2)) if diff != 0 else math.inf)
            chance = normal.cdf(abs(z_new) - z_star) + normal.cdf(-abs(z_new) - z_star) if math.isfinite(z_new) else 1.0
            now += abs(z) > z_star
            if abs(z_new) > z_star:
                projected.append(f"{label}, {a} − {b}")
            likely += chance > 0.5
            if abs(z) <= z_star:
                needed_not_passed.append(needed)
            rows.append([label, f"{a} − {b}", f"{z:+.1f}", f"{z_new:+.1f}",
                         "never" if not math.isfinite(needed) else f"{needed}", f"{chance:.0%}"])
    seeds_now = min(counts)
    return {"header": ["final value", "comparison", "z now", f"z, {seeds} seeds", "seeds for z*",
                       f"chance to pass, {seeds} seeds"],
            "rows": rows,
            "summary": {"z_star": z_star, "seeds_now": seeds_now, "seeds": seeds,
                        "se_factor": math.sqrt(seeds_now / seeds), "passed_now": now,
                        "projected": len(projected), "projected_names": "; ".join(projected) or "none",
                        "likely": likely,
                        "fewest_needed": min(needed_not_passed) if needed_not_passed else math.inf}}
