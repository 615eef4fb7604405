"""Reading a run's log: final accuracies, update mass, curves, the identity and clipping during training (chapters 10-13)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from stddial_book.core.checks import check_group_size, check_int, to_numpy
from stddial_book.rl.runlog import metric_series

__all__ = [
    "extreme_mass_share",
    "final_eval",
    "buckets",
    "update_mass",
    "curve",
    "identity_from_log",
    "identity_during_training",
    "identity_numbers",
    "gradient_scale",
    "mass_by_sigma",
    "run_summary",
    "clipping_numbers",
    "minibatch_clipping",
    "logged_update_norm",
    "check_records",
    "check_run_group_size",
    "training_steps",
]


def check_records(records: list[dict[str, Any]], name: str = "records") -> list[dict[str, Any]]:
    """``records`` as a list, after checking it is what :func:`stddial_book.rl.runlog.load_run` returns.

    ``name`` is what the error messages call it (default ``"records"``)."""
    if isinstance(records, (str, bytes, dict)) or not isinstance(records, Sequence):
        raise TypeError(f"{name} must be the list of metric records load_run returns; got {type(records).__name__}.")
    wrong = next((r for r in records if not isinstance(r, dict)), None)
    if wrong is not None:
        raise TypeError(
            f"{name} must hold one dict per logged step (as load_run returns); found "
            f"{type(wrong).__name__} {wrong!r:.40}."
        )
    return list(records)


def check_run_group_size(records: list[dict[str, Any]], group_size: Any) -> int:
    """``group_size`` as an int G ≥ 2, after checking it is the G the run's log was written with.

    Three things in a training log tell G: a generated group's k correct is at most G
    (``groups_generated/k``), a step generated G samples per group (``samples/step_generated``
    over the number of groups), and a group's σ is sqrt(k (G − k)) / G for some k (``groups/sigma``).
    A wrong G otherwise gives a silently wrong answer (a silent-fraction R² far below zero, an extreme
    share of 0); the message names the G the log holds. ``records`` is the run's log
    (the per-step metric dicts :func:`stddial_book.rl.runlog.load_run` returns second)."""
    G = check_group_size(group_size)
    hint = "pass the run's own group size (provenance['config']['train']['group_size'])"
    for r in check_records(records):
        ks = r.get("groups_generated/k")
        if ks is None:
            continue
        k = np.asarray(ks, dtype=np.float64)
        if k.size and (k.max() > G or k.min() < 0):
            raise ValueError(
                f"group_size={G} does not match the run: step {r.get('step')} logs a group with "
                f"k = {int(k.max()) if k.max() > G else int(k.min())} correct, outside 0..{G}; {hint}."
            )
        generated = r.get("samples/step_generated")
        if (
            k.size
            and isinstance(generated, (int, float))
            and not isinstance(generated, bool)
            and generated != G * k.size
        ):
            per = generated / k.size
            raise ValueError(
                f"group_size={G} does not match the run: step {r.get('step')} generated {generated:g} "
                f"samples in {k.size} groups, {per:g} per group; {hint} (here {per:g})."
            )
        sigma = r.get("groups/sigma")
        if sigma:
            levels = np.sqrt(np.arange(G + 1) * (G - np.arange(G + 1))) / G
            values = np.asarray(sigma, dtype=np.float64).reshape(-1)
            odd = values[~np.isclose(levels[None, :], values[:, None], atol=1e-5).any(axis=1)]
            if odd.size:
                raise ValueError(
                    f"group_size={G} does not match the run: step {r.get('step')} logs a group with "
                    f"σ = {odd[0]:g}, which no k of G = {G} binary rewards gives; {hint}."
                )
    return G


def final_eval(records: list[dict[str, Any]]) -> dict[str, float]:
    """The last evaluation of a run: ``eval/...`` metrics without the prefix.

    ``records`` is the run's log (the per-step metric dicts :func:`stddial_book.rl.runlog.load_run` returns second)."""
    records = check_records(records)
    evals = [r for r in records if "eval/accuracy_sampled" in r]
    if not evals:
        raise ValueError("this run log holds no evaluation; train with eval_every > 0.")
    return {k[len("eval/") :]: v for k, v in evals[-1].items() if k.startswith("eval/")}


def buckets(records: list[dict[str, Any]]) -> list[str]:
    """The difficulty buckets a run evaluated, in sorted order.

    ``records`` is the run's log (the per-step metric dicts :func:`stddial_book.rl.runlog.load_run` returns second)."""
    prefix = "eval/accuracy_sampled/"
    records = check_records(records)
    return sorted({k[len(prefix) :] for r in records for k in r if k.startswith(prefix)})


def update_mass(records: list[dict[str, Any]]) -> dict[str, float]:
    """Total update mass per bucket over a run: Σ over steps of Σ_groups w / groups per step.

    w = mean|A|/2 of each group that reached the update (σ for GRPO and DAPO, σ² for Dr. GRPO,
    chapter 3); silent groups add nothing. Buckets with no mixed group add 0. ``records`` is the run's
    log (the per-step metric dicts :func:`stddial_book.rl.runlog.load_run` returns second).
    """
    prefix = "dial/update_mass/"
    records = check_records(records)
    totals: dict[str, float] = {}
    for r in records:
        for k, v in r.items():
            if k.startswith(prefix):
                totals[k[len(prefix) :]] = totals.get(k[len(prefix) :], 0.0) + float(v)
    return dict(sorted(totals.items()))


def curve(records: list[dict[str, Any]], name: str, x: str = "samples/generated") -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of a metric against another (by default the samples generated so far).

    ``records`` is the run's log (the per-step metric dicts :func:`stddial_book.rl.runlog.load_run` returns second);
    ``name`` is the logged metric for y and ``x`` the one for x, which must be logged at every step ``name`` is."""
    steps, values = metric_series(records, name)
    xs = dict(zip(*metric_series(records, x)))
    return np.array([xs[s] for s in steps], dtype=float), values


def identity_from_log(records: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """(σ, w) of every group that reached an update, pooled over the run (chapter 13's check).

    ``records`` is the run's log (the per-step metric dicts :func:`stddial_book.rl.runlog.load_run` returns second)."""
    records = check_records(records)
    sig = [s for r in records for s in r.get("groups/sigma", [])]
    w = [x for r in records for x in r.get("groups/weight", [])]
    sig, w = to_numpy(sig, "groups/sigma", allow_empty=True), to_numpy(w, "groups/weight", allow_empty=True)
    if sig.shape != w.shape or np.any(sig < 0) or np.any(w < 0):
        raise ValueError(
            "the log's groups/sigma and groups/weight must pair up as non-negative numbers "
            "(one σ and one w per group); is it a training run's metrics.jsonl?"
        )
    return sig, w


def extreme_mass_share(records: list[dict[str, Any]], group_size: int) -> float:
    """Share of a run's update mass that went to groups with k = 1 or k = G − 1 correct.

    Those groups have the smallest non-zero σ = sqrt(G − 1)/G; GRPO weights them by σ and
    Dr. GRPO by σ², so the share is where the std division shows most directly (chapter 13).
    ``records`` is the run's log (the per-step metric dicts :func:`stddial_book.rl.runlog.load_run` returns second);
    ``group_size`` is the run's G, checked against the log (:func:`check_run_group_size`).
    """
    group_size = check_run_group_size(records, group_size)
    sigma, weight = identity_from_log(records)
    if weight.sum() == 0:
        raise ValueError("no group reached an update in this run.")
    edge = math.sqrt(group_size - 1) / group_size
    return float(weight[np.isclose(sigma, edge, atol=1e-5)].sum() / weight.sum())


def identity_during_training(runs: Sequence[list[dict[str, Any]]]) -> dict[str, np.ndarray]:
    """Every in-update identity check of a set of runs (``identity_check_every``), pooled:
    per checked group its relative error, minibatch index (0 = ratio 1), clipped-token fraction
    and σ. Chapters 10-12. ``runs`` is a list of run logs, one list of metric records per run."""
    if isinstance(runs, (str, bytes, dict)) or not isinstance(runs, Sequence):
        raise TypeError(f"runs must be a list of run logs (one list of records per run); got {type(runs).__name__}.")
    runs = [check_records(records, "each run") for records in runs]
    out: dict[str, list] = {"rel_error": [], "minibatch": [], "clipped": [], "sigma": []}
    for records in runs:
        for r in records:
            for name in out:
                out[name].extend(r.get(f"identity/{name}", []))
    if not out["rel_error"]:
        raise ValueError("these runs hold no identity check; train with identity_check_every > 0.")
    return {k: np.asarray(v, dtype=np.float64 if k != "minibatch" else np.int64) for k, v in out.items()}


def gradient_scale(
    records: list[dict[str, Any]], reference: list[dict[str, Any]], max_new_tokens: int
) -> dict[str, float]:
    """How much smaller Dr. GRPO's gradient is than GRPO's, from the two runs' logs (chapter 11).

    ``records`` is a Dr. GRPO run and ``reference`` a GRPO run. Two factors: the mean update
    weight over all logged groups (σ² against σ, silent groups counting 0), and the length
    normaliser (Dr. GRPO divides each sample's summed log-probs by L_max, GRPO by the sample's
    own length ℓ, so a sample weighs about ℓ̄ / L_max as much). Their product is the factor a
    plain gradient step at one learning rate would apply to every update; Adam divides it out.
    ``max_new_tokens`` is L_max, the runs' completion length cap in tokens.
    """

    def mean_weight(run: list[dict[str, Any]]) -> float:
        weights = [w for r in run if "groups/weight" in r for w in r["groups/weight"]]
        if not weights:
            raise ValueError("no groups/weight in the log: is it a training run's metrics.jsonl?")
        return float(np.mean(weights))

    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1, hint="It is L_max, a number of tokens.")
    records, reference = check_records(records), check_records(reference, "reference")
    base = mean_weight(reference)
    if base <= 0:
        raise ValueError("the reference run's groups all have weight 0 (every group silent): no ratio to take.")
    weight_ratio = mean_weight(records) / base
    lengths = [r["completions/mean_length"] for r in records if "completions/mean_length" in r]
    if not lengths:
        raise ValueError("no completions/mean_length in the log: is it a training run's metrics.jsonl?")
    length_factor = float(np.mean(lengths)) / max_new_tokens
    return {"weight_ratio": weight_ratio, "length_factor": length_factor, "scale_ratio": weight_ratio * length_factor}


def identity_numbers(checks: dict[str, np.ndarray]) -> dict[str, float]:
    """Summary of :func:`identity_during_training`: groups checked, the largest relative error on
    the first minibatch (ratio 1), the median and 90th percentile on later minibatches, and the
    mean fraction of a checked group's tokens clipped there. ``checks`` is the dict
    :func:`identity_during_training` returns."""
    if not isinstance(checks, dict) or any(k not in checks for k in ("rel_error", "minibatch", "clipped")):
        raise ValueError("checks must be what identity_during_training returns (rel_error, minibatch, clipped).")
    first = checks["minibatch"] == 0
    later = ~first
    if not first.any() or not later.any():
        raise ValueError("need checks on the first and on later minibatches (num_minibatches >= 2).")
    return {
        "checked": int(first.size),
        "first_max": float(checks["rel_error"][first].max()),
        "later_median": float(np.median(checks["rel_error"][later])),
        "later_p90": float(np.quantile(checks["rel_error"][later], 0.9)),
        "later_clipped": float(checks["clipped"][later].mean()),
    }


def mass_by_sigma(records: list[dict[str, Any]], group_size: int) -> dict[str, np.ndarray]:
    """Share of a run's mixed groups, and of its update mass, at each level of the group std σ.

    A group of G binary rewards with k correct has σ = sqrt(k (G − k)) / G, the same for k and
    G − k, so the σ the log records names the pair {k, G − k}. Returns ``k`` (the smaller of the
    pair, 1 to G // 2), ``sigma`` (σ at that level), ``groups`` (share of the mixed groups that
    reached an update) and ``mass`` (share of their summed weights w). GRPO weights a level by σ,
    Dr. GRPO by σ², so ``mass`` leans towards k = G/2 more under Dr. GRPO; ``mass[0]`` is
    :func:`extreme_mass_share`. Chapters 10-12. ``records`` is the run's log
    (the per-step metric dicts :func:`stddial_book.rl.runlog.load_run` returns second);
    ``group_size`` is the run's G, checked against the log (:func:`check_run_group_size`).
    """
    G = check_run_group_size(records, group_size)
    sigma, weight = identity_from_log(records)
    k = np.arange(1, G // 2 + 1)
    levels = np.sqrt(k * (G - k)) / G
    match = np.isclose(sigma[:, None], levels[None, :], atol=1e-5)
    mixed = sigma > 1e-5
    if np.any(mixed & ~match.any(axis=1)):
        odd = sigma[mixed & ~match.any(axis=1)][0]
        raise ValueError(
            f"a logged group has σ = {odd:g}, which no k of G = {G} binary rewards gives; pass the run's group_size."
        )
    if not match.any() or weight[mixed].sum() <= 0:
        raise ValueError("no mixed group reached an update in this run (every group was silent).")
    return {
        "k": k,
        "sigma": levels,
        "groups": match.sum(axis=0) / match.sum(),
        "mass": (weight[:, None] * match).sum(axis=0) / weight[mixed].sum(),
    }


def run_summary(provenance: dict[str, Any], records: list[dict[str, Any]], group_size: int) -> dict[str, Any]:
    """One RL run in the numbers chapters 10-12 quote, from :func:`stddial_book.rl.runlog.load_run`.

    ``profile``, ``device``, ``time`` (wall seconds), ``samples`` (generated), ``kept``,
    ``updates`` (optimizer steps); held-out accuracy at the start and end, sampled (``acc0``,
    ``acc1``, and per bucket ``acc0_D2``, ``acc1_D2``, ...) and greedy (``greedy0``, ``greedy1``);
    ``silent``, the mean over steps of the silent fraction of the generated groups; ``G``;
    ``extreme``, the share of the update mass that went to groups with k = 1 or G − 1
    (:func:`extreme_mass_share`); ``len0`` and ``len1``, the mean completion length over the first
    and the last four steps. ``provenance`` and ``records`` are the two items
    :func:`~stddial_book.rl.runlog.load_run` returns; ``group_size`` is the run's G, checked against the log.
    """
    if not isinstance(provenance, dict):
        raise TypeError(f"provenance must be the dict load_run returns first; got {type(provenance).__name__}.")
    records = check_records(records)
    G = check_run_group_size(records, group_size)
    steps = [r for r in records if r["step"] > 0]
    if not steps:
        raise ValueError("this run log holds no training step.")
    first, last = final_eval(records[:1]), final_eval(records)
    out: dict[str, Any] = {
        "profile": provenance.get("profile"),
        "device": provenance.get("device"),
        "time": provenance.get("wall_time_s"),
        "samples": steps[-1]["samples/generated"],
        "kept": steps[-1]["samples/kept"],
        "updates": steps[-1]["updates"],
        "acc0": first["accuracy_sampled"],
        "acc1": last["accuracy_sampled"],
        "greedy0": first["accuracy_greedy"],
        "greedy1": last["accuracy_greedy"],
    }
    for b in buckets(records):
        out[f"acc0_{b}"] = first[f"accuracy_sampled/{b}"]
        out[f"acc1_{b}"] = last[f"accuracy_sampled/{b}"]
    lengths = [r["completions/mean_length"] for r in steps]
    out.update(
        silent=float(np.mean([r["dial/silent_fraction"] for r in steps])),
        G=G,
        extreme=extreme_mass_share(records, G),
        len0=float(np.mean(lengths[:4])),
        len1=float(np.mean(lengths[-4:])),
    )
    return out


def logged_update_norm(records: list[dict[str, Any]]) -> float:
    """The mean ``update_norm`` (the length of a step's whole parameter change) over the records of a
    run's log that carry one; NaN if none does. ``records`` is the run's log
    (the per-step metric dicts :func:`stddial_book.rl.runlog.load_run` returns second)."""
    norms = [float(r["update_norm"]) for r in records if "update_norm" in r]
    return float(np.mean(norms)) if norms else float("nan")


def training_steps(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of training steps that generated groups (step > 0).

    ``records`` is the run's log (the per-step metric dicts :func:`stddial_book.rl.runlog.load_run` returns second)."""
    steps = [r for r in check_records(records) if r["step"] > 0 and "groups_generated/k" in r]
    if not steps:
        raise ValueError("this run log holds no training step with generated groups (groups_generated/k).")
    return steps


def clipping_numbers(records: list[dict[str, Any]]) -> dict[str, float]:
    """How often the clip and the length cap acted in a run (chapter 12): the mean over the steps
    that made an update of the fraction of tokens clipped at the upper bound (``clip_high``), at
    the lower bound (``clip_low``), the share of those steps with any token clipped at the upper
    bound (``clip_high_steps``), and the mean fraction of completions cut at the length cap
    (``truncated``). Each step's clip fractions are the mean over its minibatches. ``records`` is the
    run's log (the per-step metric dicts :func:`stddial_book.rl.runlog.load_run` returns second)."""
    steps = training_steps(records)
    high = np.array([r["clip_ratio/high_mean"] for r in steps if "clip_ratio/high_mean" in r], dtype=np.float64)
    low = np.array([r["clip_ratio/low_mean"] for r in steps if "clip_ratio/low_mean" in r], dtype=np.float64)
    if high.size == 0:
        raise ValueError("this run log holds no clip_ratio metrics (no step made an update).")
    return {
        "clip_high": float(high.mean()),
        "clip_low": float(low.mean()),
        "clip_high_steps": float(np.mean(high > 0)),
        "truncated": float(np.mean([r["completions/clipped_ratio"] for r in steps])),
    }


def minibatch_clipping(checks: dict[str, np.ndarray]) -> dict[str, float]:
    """The clipped-token fraction of the identity checks made inside the update
    (:func:`identity_during_training`), first minibatch of a batch against the later ones: how
    many checks (``first_checks``, ``later_checks``), the largest fraction on the first
    (``first_max``), the mean and largest on later ones (``later_mean``, ``later_max``) and the
    share of later checks with any clipped token (``later_nonzero``). Chapter 12. ``checks`` is the dict
    :func:`identity_during_training` returns."""
    if not isinstance(checks, dict) or any(k not in checks for k in ("minibatch", "clipped")):
        raise ValueError("checks must be what identity_during_training returns (minibatch, clipped).")
    first = np.asarray(checks["minibatch"]) == 0
    clipped = np.asarray(checks["clipped"], dtype=np.float64)
    if not first.any() or first.all():
        raise ValueError("need checks on the first and on later minibatches (num_minibatches >= 2).")
    return {
        "first_checks": int(first.sum()),
        "first_max": float(clipped[first].max()),
        "later_checks": int((~first).sum()),
        "later_mean": float(clipped[~first].mean()),
        "later_max": float(clipped[~first].max()),
        "later_nonzero": float(np.mean(clipped[~first] > 0)),
    }
