"""The recorded SmolLM2 runs read and analysed as their plan states (chapter 15; ``data/runs/smollm2/PLAN.md``).

:func:`read_lm_runs` reads a folder of runs written by ``record-lm`` (``<recipe>-seed<k>/`` with
``metrics.jsonl.gz``, ``eval.json.gz`` and ``provenance.json``). :func:`lm_study` turns them into one
JSON-ready summary: per run the held-out and pool accuracy before and after training, the per-step curves
(batch pass rate, silent fraction and its two sides, mean σ, completion length, truncated share, the mass in
silent groups, seconds a step) and the gradient mass by pass-rate band; per recipe the planned tests (family A:
after − before, paired Student t over seeds; family B: recipes pairwise after training, Welch t with Welch's
degrees of freedom; each family Bonferroni over its three comparisons, with the smallest difference the seeds
would detect at 80% power); the persistence of silence in the training pool; accuracy by tier. Statistics come
from ``scipy.stats``.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from stddial_book.corpora.measured_pool import read_pool_table
from stddial_book.theory.recipes import RECIPES

__all__ = [
    "LM_RECIPES",
    "PILOT_LAST_STEPS",
    "PILOT_TIE",
    "choose_learning_rate",
    "pass_rate_curve",
    "study_summary",
    "dump_study",
    "write_study",
    "load_study",
    "read_lm_runs",
    "accuracy",
    "paired_test",
    "welch_test",
    "silent_persistence",
    "remeasured_silence",
    "predicted_silence",
    "step_seconds",
    "group_sigmas",
    "sigma_shares",
    "lm_study",
    "accuracy_by_verifier",
    "pilot_curves",
    "kept_completions",
    "read_pool_counts",
    "STUDY_FILE",
    "STRICT_STUDY_FILE",
]

#: The recipes of the recorded SmolLM2 runs: every recipe of the registry.
LM_RECIPES = RECIPES
_RUN = re.compile(r"(?P<recipe>[a-z_]+)-seed(?P<seed>\d+)")
_CURVES = {
    "pass_rate": "dial/pass_rate",
    "silent_fraction": "dial/silent_fraction",
    "sigma_mean": "dial/sigma_mean",
    "mean_length": "completions/mean_length",
    "clipped_ratio": "completions/clipped_ratio",
    # Σ|A| of the groups silent by correctness: 0 where the reward is the verifier's alone (TRL zeroes them), but
    # DAPO's length penalty can spread a silent group's rewards, and TRL's division by the std then gives it mass
    "mass_in_silent": "dial/mass_in_silent",
}


def _read_gz_json(path: Path) -> Any:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


#: The pass-rate bands of the logged gradient mass (the callback's ``PASS_RATE_BANDS``; a test ties the two).
MASS_BANDS = (0.0, 0.25, 0.5, 0.75, 1.0)
PILOT_LAST_STEPS = 10
PILOT_TIE = 0.02
#: Where the wheel keeps the summary of the recorded SmolLM2 runs (``tools/ship_smollm2.py`` writes it).
STUDY_FILE = ("smollm2", "lm_study.json.gz")
#: The summary of the runs of ``data/runs/smollm2/PLAN-strict.md`` (the last-number reward, completions kept).
STRICT_STUDY_FILE = ("smollm2", "lm_study_strict.json.gz")


def choose_learning_rate(
    curves: dict[float, Sequence[float]], last: int = PILOT_LAST_STEPS, tie: float = PILOT_TIE
) -> float:
    """The plan's pilot rule: the learning rate whose batch pass-rate curve ends highest (mean of its last
    ``last`` values); among those within ``tie`` of the best, the smallest (a rate that learns as well but
    moves less is the safer one). ``curves`` maps each rate to its per-step batch pass rate."""
    if not curves:
        raise ValueError("no pilot runs: give at least one learning rate's pass-rate curve.")
    ends = {}
    for rate, curve in curves.items():
        values = [float(v) for v in curve]
        if len(values) < last or not all(math.isfinite(v) for v in values[-last:]):
            raise ValueError(f"the pilot at learning rate {rate} has fewer than {last} finite steps; rerun it.")
        ends[float(rate)] = sum(values[-last:]) / last
    best = max(ends.values())
    return min(rate for rate, end in ends.items() if end >= best - tie)


def pass_rate_curve(run: str | os.PathLike) -> list[float]:
    """A recorded run's batch pass rate per optimizer step (``dial/pass_rate`` of its ``metrics.jsonl.gz``).

    ``run`` is the run's folder; the values come sorted by step, in [0, 1]."""
    with gzip.open(Path(run) / "metrics.jsonl.gz", "rt", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    records = sorted((r for r in records if "dial/pass_rate" in r), key=lambda r: r["step"])
    return [float(r["dial/pass_rate"]) for r in records]


def _named(runs: str | os.PathLike | Mapping[str, Path]) -> dict[str, Path]:
    """``runs`` as name -> folder: a mapping as given, or a folder's subfolders by their names."""
    if isinstance(runs, Mapping):
        return {str(name): Path(path) for name, path in runs.items()}
    return {path.name: path for path in sorted(Path(runs).iterdir()) if path.is_dir()}


def read_lm_runs(runs: str | os.PathLike | Mapping[str, Path]) -> list[dict[str, Any]]:
    """Every ``<recipe>-seed<k>`` run: recipe, seed, the per-step records (sorted by step), the evaluations and the
    provenance. ``runs`` is a folder holding the runs as subfolders of those names, or a mapping from such a name
    to the run's folder (a recording not yet shipped, whose folders are named otherwise). A ValueError naming the
    run when a file is missing."""
    found = []
    for name, path in sorted(_named(runs).items()):
        match = _RUN.fullmatch(name)
        if not match:
            continue
        missing = [n for n in ("metrics.jsonl.gz", "eval.json.gz", "provenance.json") if not (path / n).is_file()]
        if missing:
            raise ValueError(f"{path} lacks {missing}: not a finished record-lm run with --eval.")
        with gzip.open(path / "metrics.jsonl.gz", "rt", encoding="utf-8") as handle:
            records = sorted((json.loads(line) for line in handle if line.strip()), key=lambda r: r["step"])
        found.append(
            {
                "recipe": match["recipe"],
                "seed": int(match["seed"]),
                "records": records,
                "eval": _read_gz_json(path / "eval.json.gz"),
                "provenance": json.loads((path / "provenance.json").read_text(encoding="utf-8")),
            }
        )
    return found


def accuracy(rows: Sequence[dict[str, Any]]) -> float:
    """The share of correct completions over a measured set (every question weighs its samples).

    ``rows`` holds one dict per question with its ``correct`` count and its ``samples`` n."""
    return sum(r["correct"] for r in rows) / sum(r["samples"] for r in rows)


def _mde(sd: float, n_eff: float, df: float, alpha: float, power: float = 0.8) -> float:
    """The smallest true difference a two-sided t test at ``alpha`` detects with probability ``power``, for a
    standard error ``sd / sqrt(n_eff)`` on ``df`` degrees of freedom: solved exactly with the noncentral t
    (``scipy.stats.nct``), not with the normal shortcut, which overstates the power of a few seeds."""
    if not (df > 0 and n_eff > 0 and math.isfinite(sd) and sd > 0):
        return float("nan")
    from scipy.optimize import brentq

    crit = stats.t.ppf(1 - alpha / 2, df)
    # rejection on either side; scipy's far lower tail can come back NaN where it is 0 to double precision
    reach = lambda shift: stats.nct.sf(crit, df, shift) + np.nan_to_num(stats.nct.cdf(-crit, df, shift)) - power
    high = crit
    while reach(high) < 0:  # power grows with the shift; double until it passes
        high *= 2.0
    shift = brentq(reach, 0.0, high)
    return float(shift * sd / math.sqrt(n_eff))


def _welch_mde(sd_a: float, n_a: int, sd_b: float, n_b: int, alpha: float, power: float = 0.8) -> float:
    """The smallest true difference Welch's test at ``alpha`` detects with probability ``power`` when the two
    samples (``n_a`` and ``n_b`` values) spread as ``sd_a`` and ``sd_b``: found by simulation, 20,000 experiments
    drawn once from a fixed seed and shifted (so the power only grows with the shift), because Welch's degrees of
    freedom vary from one experiment to the next and the noncentral t at the observed ones overstates the power
    of a few seeds (at 3 seeds a side it gives about 0.62, not 0.8)."""
    if not (n_a > 1 and n_b > 1 and math.isfinite(sd_a) and math.isfinite(sd_b) and sd_a + sd_b > 0):
        return float("nan")
    noise = np.random.default_rng(20_000).standard_normal((20_000, n_a + n_b))
    x, y = noise[:, :n_a] * sd_a, noise[:, n_a:] * sd_b
    reach = lambda shift: float(np.mean(stats.ttest_ind(x + shift, y, axis=1, equal_var=False).pvalue < alpha))
    low, high = 0.0, sd_a + sd_b  # > 0, checked above
    while reach(high) < power:  # double until the power passes
        high *= 2.0
    for _ in range(40):  # bisection on a step function: to 2⁻⁴⁰ of the bracket
        middle = (low + high) / 2
        low, high = (middle, high) if reach(middle) < power else (low, middle)
    return float(high)


def _adjusted(p: float, comparisons: int) -> float:
    """Bonferroni's adjustment of ``p`` for a family of ``comparisons`` tests; NaN stays NaN (a test with no spread
    has no p, and ``min(1.0, nan)`` would report it as 1, a non-detection)."""
    return float("nan") if math.isnan(p) else min(1.0, p * comparisons)


def paired_test(before: Sequence[float], after: Sequence[float], comparisons: int = 1) -> dict[str, float]:
    """after − before on the same seeds: mean, Student t interval at the Bonferroni level ``0.05/comparisons``,
    its p (``scipy.stats.ttest_rel``, Bonferroni-adjusted) and the smallest difference it would detect; with no
    spread in the differences (every seed moved alike) there is no t statistic, and p and the smallest
    difference are NaN.
    ``before`` and ``after`` are one value per seed, in the same seed order; ``comparisons`` is the size of the
    test's family (default 1: no adjustment)."""
    a, b = np.asarray(after, float), np.asarray(before, float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(
            f"a paired test takes one value per seed on each side, the same seeds in the same order; got "
            f"{a.size} after and {b.size} before: compare runs of the same seeds (or use welch_test)."
        )
    diff = a - b
    n = diff.size
    alpha = 0.05 / comparisons
    sd = float(diff.std(ddof=1)) if n > 1 else float("nan")
    half = float(stats.t.ppf(1 - alpha / 2, n - 1) * sd / math.sqrt(n)) if n > 1 else float("nan")
    p = float(stats.ttest_rel(a, b).pvalue) if n > 1 and sd > 0 else float("nan")
    return {
        "mean": float(diff.mean()),
        "low": float(diff.mean()) - half,
        "high": float(diff.mean()) + half,
        "p_adjusted": _adjusted(p, comparisons),
        "n": n,
        "mde": _mde(sd, n, n - 1, alpha),
    }


def welch_test(a: Sequence[float], b: Sequence[float], comparisons: int = 1) -> dict[str, float]:
    """mean(a) − mean(b): Welch's t (``scipy.stats.ttest_ind(equal_var=False)``), its interval at the Bonferroni
    level with Welch's degrees of freedom, the adjusted p and the smallest difference it would detect four times in
    five at the samples' spreads (by simulation, :func:`_welch_mde`; NaN, with the interval and df, when neither
    sample has any spread).
    ``a`` and ``b`` are two independent samples, one value per seed (two or more each, else NaN); ``comparisons`` is the
    size of the test's family, the Bonferroni level being ``0.05/comparisons`` (default 1: no adjustment)."""
    x, y = np.asarray(a, float), np.asarray(b, float)
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1)) if se > 0 else float("nan")
    alpha = 0.05 / comparisons
    diff = float(x.mean() - y.mean())
    half = float(stats.t.ppf(1 - alpha / 2, df) * se) if se > 0 else float("nan")
    p = float(stats.ttest_ind(x, y, equal_var=False).pvalue) if se > 0 else float("nan")
    return {
        "mean": diff,
        "low": diff - half,
        "high": diff + half,
        "df": df,
        "p_adjusted": _adjusted(p, comparisons),
        "mde": _welch_mde(float(x.std(ddof=1)), x.size, float(y.std(ddof=1)), y.size, alpha)
        if se > 0
        else float("nan"),
    }


def silent_persistence(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Of the questions with no correct sample before training, how many have none after (same ids), and of
    those with every sample correct before, how many still have all correct. ``before`` and ``after`` are the
    per-question rows of the same pool measured before and after training (dicts with ``prompt_id``, ``correct``
    and ``samples``); every id of ``before`` must be in ``after``."""
    after_by_id = {r["prompt_id"]: r for r in after}
    out = {}
    for name, silent in (("never", lambda r: r["correct"] == 0), ("always", lambda r: r["correct"] == r["samples"])):
        ids = [r["prompt_id"] for r in before if silent(r)]
        stayed = sum(silent(after_by_id[i]) for i in ids)
        out[name] = {"before": len(ids), "stayed": stayed, "share": stayed / len(ids) if ids else float("nan")}
    return out


def group_sigmas(G: int) -> list[float]:
    """σ = sqrt(k(G − k))/G of a group of ``G`` binary rewards with k = 0..G right, rounded to 12 digits so that
    k and G − k give the same value (and the same key of :func:`sigma_shares`)."""
    return [round(math.sqrt(k * (G - k)) / G, 12) for k in range(G + 1)]


def sigma_shares(k_counts: Sequence[Sequence[int]]) -> dict[float, float]:
    """The share of groups at each value of σ = sqrt(k(G − k))/G, over the steps given: ``k_counts`` holds one
    row a step of the number of groups with k = 0..G right (G + 1 entries, G ≥ 1, the same G every row, at least
    one group in all). k and G − k share their σ, so the keys are the distinct values of σ, ascending, from 0 (a
    silent group) to that of k = ⌊G/2⌋ (1/2 for even G); a ValueError otherwise."""
    rows = [list(row) for row in k_counts]
    if not rows or len({len(row) for row in rows}) != 1 or len(rows[0]) < 2:
        raise ValueError("give at least one step's k counts, each with G + 1 >= 2 entries and the same G.")
    counts = np.asarray(rows, float).sum(axis=0)
    if counts.sum() <= 0:
        raise ValueError("the k counts hold no group; give the steps of a run that sampled some.")
    shares: dict[float, float] = {}
    for sigma, c in zip(group_sigmas(counts.size - 1), counts):
        shares[sigma] = shares.get(sigma, 0.0) + float(c / counts.sum())
    return dict(sorted(shares.items()))


def remeasured_silence(correct: Sequence[int], samples: int, draw: int = 16) -> dict[str, float]:
    """What :func:`silent_persistence` would find with no training at all: the base model measured twice,
    ``draw`` samples each time, with each question's pass rate known through ``correct`` of ``samples``
    stored draws (the two measurements taken as disjoint subsets of them, so a question never solved in all
    ``samples`` counts as unsolvable). Expected questions with none of ``draw`` right (``before``), expected
    of those still with none in a second ``draw`` (``stayed``), and their ratio (``share``): the share that
    re-measurement noise alone leaves silent. ``samples`` must be at least ``2 * draw``."""
    if samples < 2 * draw:
        raise ValueError(f"samples={samples} holds no two disjoint draws of {draw}; give samples >= {2 * draw}.")
    k = np.asarray(correct, dtype=int)
    before = float(stats.hypergeom(samples, k, draw).pmf(0).sum())  # none right in the first `draw`
    stayed = float(stats.hypergeom(samples, k, 2 * draw).pmf(0).sum())  # none in the first 2·draw
    return {"before": before, "stayed": stayed, "share": stayed / before if before else float("nan")}


def predicted_silence(correct: Sequence[int], samples: int, group_size: int) -> dict[str, float]:
    """Chapter 5's silent probability averaged over a measured pool, with each question's pass rate known only
    through ``correct`` of ``samples`` stored draws: a group is ``group_size`` of those draws, all wrong with the
    hypergeometric probability C(samples − k, G)/C(samples, G) and all right with C(k, G)/C(samples, G). The
    pool's mean of each (``wrong``, ``right``) and their sum (``silent``); ``group_size`` ≤ ``samples``."""
    if not 1 <= group_size <= samples or not len(correct):
        raise ValueError(f"give some counts and a group size from 1 to samples={samples} (got {group_size}).")
    k = np.asarray(correct)
    if k.ndim != 1 or not np.all((k == np.round(k)) & (k >= 0) & (k <= samples)):
        raise ValueError(f"correct holds a count that is not a whole number from 0 to samples={samples}: {k.tolist()}")
    draws = stats.hypergeom(samples, k.astype(int), group_size)
    wrong, right = float(np.mean(draws.pmf(0))), float(np.mean(draws.pmf(group_size)))
    return {"wrong": wrong, "right": right, "silent": wrong + right}


def _curves(records: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Per step: the logged curves, and the silent fraction split into all-wrong and all-right groups."""
    curves = {name: [float(r.get(key, float("nan"))) for r in records] for name, key in _CURVES.items()}
    counts = [np.asarray(r["dial/k_counts"], float) for r in records]
    curves["silent_wrong"] = [float(c[0] / c.sum()) for c in counts]
    curves["silent_right"] = [float(c[-1] / c.sum()) for c in counts]
    curves["step_s"] = step_seconds([r.get("dial/elapsed_s", float("nan")) for r in records])
    return curves


def step_seconds(elapsed: Sequence[float]) -> list[float]:
    """Each step's seconds from ``elapsed``, the callback's ``elapsed_s`` of each step (seconds since its process
    began training, logged at the step's end): the difference from the step before, or, at a run's first step
    and at the first step after a resume (where the clock starts again), the elapsed time itself."""
    out, before = [], None
    for now in (float(e) for e in elapsed):
        out.append(now - before if before is not None and now > before else now)
        before = now
    return out


def _tier(prompt_id: str) -> str:
    return prompt_id.rsplit("-", 1)[0]


def _by_tier(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    tiers: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        tiers.setdefault(_tier(row["prompt_id"]), []).append(row)
    return {tier: accuracy(group) for tier, group in tiers.items()}


def accuracy_by_verifier(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The accuracy under every verifier whose counts the rows carry (``correct_by``, on the same
    completions), and ``strict_over_lenient``: last-number's correct count over math-verify's, summed over
    the questions (how much of the lenient check's success the strict one also counts); empty for rows
    measured under one verifier only (the first recording). ``rows`` holds one dict per question with its
    ``samples`` n and ``correct_by`` (verifier name -> correct count)."""
    if not rows or any("correct_by" not in r for r in rows):
        return {}
    total = sum(r["samples"] for r in rows)
    names = sorted(set.intersection(*(set(r["correct_by"]) for r in rows)))
    out = {name: sum(r["correct_by"][name] for r in rows) / total for name in names}
    if {"last-number", "math-verify"} <= set(names) and out["math-verify"] > 0:
        out["strict_over_lenient"] = out["last-number"] / out["math-verify"]
    return out


def kept_completions(rows: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """The completions an evaluation kept, by question (``examples`` of each row; a question without any is
    left out). ``rows`` holds one dict per question, as ``record-lm`` writes them into ``eval.json.gz``."""
    return {r["prompt_id"]: list(r["examples"]) for r in rows if r.get("examples")}


def _pool_correct(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any] | None:
    """Each training question's correct count before and after training, in the pool file's order (the same
    questions in the same order both times, each measured with the same number of draws, ``samples``), or None
    for a run that measured no pool; a ValueError when the two measurements do not line up."""
    if "pool" not in before:
        return None
    rows = {"before": before["pool"], "after": after.get("pool", [])}
    ids = {when: [r["prompt_id"] for r in got] for when, got in rows.items()}
    draws = {r["samples"] for got in rows.values() for r in got}
    if not ids["before"] or ids["before"] != ids["after"] or len(draws) != 1:
        raise ValueError("the pool's measurements before and after training hold other questions or draw counts.")
    return {**{when: [r["correct"] for r in got] for when, got in rows.items()}, "samples": draws.pop()}


def _run_summary(
    run: dict[str, Any], count_tokens: Callable[[str], int] | None = None, keep_examples: bool = True
) -> dict[str, Any]:
    before, after = run["eval"]["before"], run["eval"]["after"]
    bands = np.array([r["dial/mass_by_band"] for r in run["records"]], float)
    kept = {"before": kept_completions(before["heldout"]), "after": kept_completions(after["heldout"])}
    if not keep_examples:
        kept = {"before": {}, "after": {}}
    tokens = {when: {pid: [count_tokens(t) for t in texts] for pid, texts in by_id.items()}
              for when, by_id in kept.items()} if count_tokens else {}  # fmt: skip
    return {
        **({"heldout_examples": kept} if kept["before"] or kept["after"] else {}),  # the strict runs keep them
        **({"heldout_example_tokens": tokens} if tokens and (kept["before"] or kept["after"]) else {}),
        "verifier": run["provenance"]["config"]["run"].get("verifier", "math-verify"),
        "learning_rate": run["provenance"]["config"]["run"]["learning_rate"],
        "heldout_before_by": accuracy_by_verifier(before["heldout"]),
        "heldout_after_by": accuracy_by_verifier(after["heldout"]),
        "recipe": run["recipe"],
        "seed": run["seed"],
        "heldout_before": accuracy(before["heldout"]),
        "heldout_after": accuracy(after["heldout"]),
        "pool_before": accuracy(before["pool"]) if "pool" in before else float("nan"),
        "pool_after": accuracy(after["pool"]) if "pool" in after else float("nan"),
        "tiers_before": _by_tier(before["heldout"]),
        "tiers_after": _by_tier(after["heldout"]),
        "persistence": silent_persistence(before["pool"], after["pool"]) if "pool" in before else None,
        "pool_correct": _pool_correct(before, after),
        "curves": _curves(run["records"]),
        # per step, how many groups had k = 0..G right: the distribution of σ = sqrt(k(G − k))/G over the batch
        "k_counts": [[int(round(c)) for c in r["dial/k_counts"]] for r in run["records"]],
        # averaged over the steps that had any mass (an all-silent step has none to share)
        "mass_by_band": bands[bands.sum(axis=1) > 0].mean(axis=0).tolist() if bands.size else [],
        "wall_s": float(run["provenance"].get("wall_time_s", float("nan"))),
        "device": run["provenance"].get("device"),
        "commit": run["provenance"].get("git_commit"),
    }


def lm_study(
    folder: str | os.PathLike | Mapping[str, Path], count_tokens: Callable[[str], int] | None = None
) -> dict[str, Any]:
    """The summary chapter 15 reads: every run (:func:`_run_summary`), the planned tests, the persistence of
    silence pooled per recipe, and the runs' shared facts (seeds, steps, device, commit). ``folder`` holds the
    ``<recipe>-seed<k>`` runs, or maps those names to the runs' folders (:func:`read_lm_runs`). Each run's
    entry also keeps its per-step ``k_counts`` (groups with k = 0..G right); the runs of the first seed also
    keep the completions their evaluations kept (``heldout_examples``: examples to show; every run's are in its
    log). With ``count_tokens`` (text → its number of tokens under the runs' tokenizer), those runs also record
    the token count of each kept completion (``heldout_example_tokens``, shaped like ``heldout_examples``): about
    how long each was, against the cap (a count of decoded text, not the generator's own)."""
    raw = read_lm_runs(folder)
    first_seed = min(run["seed"] for run in raw)
    # the kept completions are examples to show, not data: the first seed's suffice
    runs = [_run_summary(run, count_tokens, keep_examples=run["seed"] == first_seed) for run in raw]
    recipes = [r for r in LM_RECIPES if any(run["recipe"] == r for run in runs)]
    seeds = sorted({run["seed"] for run in runs})
    by = {r: sorted((run for run in runs if run["recipe"] == r), key=lambda run: run["seed"]) for r in recipes}
    learn = {
        r: paired_test([x["heldout_before"] for x in by[r]], [x["heldout_after"] for x in by[r]], len(recipes))
        for r in recipes
    }
    pairs = list(combinations(recipes, 2))
    differ = {
        f"{a}-{b}": welch_test([x["heldout_after"] for x in by[a]], [x["heldout_after"] for x in by[b]], len(pairs))
        for a, b in pairs
    }
    persistence = {}
    for r in recipes:
        pooled = {"never": [0, 0], "always": [0, 0]}
        for run in by[r]:
            for kind in pooled:
                pooled[kind][0] += run["persistence"][kind]["before"]
                pooled[kind][1] += run["persistence"][kind]["stayed"]
        persistence[r] = {
            k: {"before": b, "stayed": s, "share": s / b if b else float("nan")} for k, (b, s) in pooled.items()
        }
    first = raw[0]["provenance"]["config"]["run"]
    return {
        "recipes": recipes,
        "seeds": seeds,
        "group_size": first["group_size"],
        "max_new_tokens": first["max_new_tokens"],
        "learning_rate": first["learning_rate"],
        "learning_rates": {r: by[r][0]["learning_rate"] for r in recipes},
        "verifier": first.get("verifier", "math-verify"),
        "bands": list(MASS_BANDS),
        "steps": max(len(run["curves"]["pass_rate"]) for run in runs),
        "devices": sorted({str(run["device"]) for run in runs}),
        "commits": sorted({str(run["commit"]) for run in runs}),
        "runs": runs,
        "learn": learn,
        "differ": differ,
        "persistence": persistence,
    }


def read_pool_counts(path: Path) -> dict[str, Any]:
    """The table at ``path``, a pool.csv as ``measure`` writes it (:mod:`stddial_book.corpora.measured_pool`),
    by column: ids, correct counts, the sample sizes, and, where it stores every verifier's count on the same
    completions, ``correct_by`` (verifier name to counts)."""
    rows = read_pool_table(path)
    counts = {"prompt_id": [r["prompt_id"] for r in rows], "correct": [r["correct"] for r in rows],
              "samples": sorted({r["samples"] for r in rows})}  # fmt: skip
    if rows and "correct_by" in rows[0]:
        counts["correct_by"] = {name: [r["correct_by"][name] for r in rows] for name in rows[0]["correct_by"]}
    return counts


def pilot_curves(folder: str | os.PathLike | Mapping[str, Path]) -> dict[str, dict[str, list[float]]]:
    """Each recipe's pilot curves by learning rate, from runs named ``<recipe>-lr<rate>``, or ``lr<rate>`` (the
    first plan's layout, GRPO's pilot only). ``folder`` is the recording's pilot folder, or a mapping from those
    names to the pilots' folders; a ValueError when it holds no GRPO pilot."""
    found: dict[str, dict[str, list[float]]] = {}
    for name, run in sorted(_named(folder).items()):
        recipe = next((r for r in LM_RECIPES if name.startswith(f"{r}-lr")), "grpo")
        rate = name.removeprefix(f"{recipe}-").removeprefix("lr")
        found.setdefault(recipe, {})[rate] = pass_rate_curve(run)
    if "grpo" not in found:
        raise ValueError(f"{folder} holds no GRPO pilot (grpo-lr<rate>/ or lr<rate>/).")
    return found


def study_summary(
    main: str | os.PathLike | Mapping[str, Path],
    pilots: str | os.PathLike | Mapping[str, Path] | None,
    pools: Mapping[str, str | os.PathLike],
    count_tokens: Callable[[str], int] | None = None,
) -> dict[str, Any]:
    """The summary of a recording, in memory: :func:`lm_study` of the main runs (``main``, as it takes them, with
    ``count_tokens``), each recipe's pilot curves and the rate its rule picks (``pilots``, as :func:`pilot_curves`
    takes them), where the pilots ran (devices and commits, from their provenances), and the base model's measured
    pool, k of n per question (``pools`` maps ``"train"`` and ``"heldout"`` to the ``pool.csv`` files). With
    ``pilots`` None (a plan that fixed the rate, ``record_smollm2.py --learning-rate``) the pilot keys are empty
    and ``"pilot"`` is absent."""
    return {
        **lm_study(main, count_tokens),
        **_pilot_keys(pilots),
        "base_pool": {kind: read_pool_counts(Path(pools[kind])) for kind in ("train", "heldout")},
    }


def _pilot_keys(pilots: str | os.PathLike | Mapping[str, Path] | None) -> dict[str, Any]:
    """The summary's pilot keys (:func:`study_summary`): empty, without ``"pilot"``, when ``pilots`` is None."""
    if pilots is None:
        return {"pilots": {}, "pilot_devices": [], "pilot_commits": [], "pilot_seeds": []}
    pilot_runs = _named(pilots)
    provenances = [
        json.loads((run / "provenance.json").read_text(encoding="utf-8"))
        for _, run in sorted(pilot_runs.items())
        if (run / "provenance.json").is_file()
    ]
    picked = {
        recipe: {"curves": curves, "chosen": choose_learning_rate({float(k): v for k, v in curves.items()}),
                 "window": PILOT_LAST_STEPS}
        for recipe, curves in pilot_curves(pilot_runs).items()
    }  # fmt: skip
    return {
        "pilot": picked["grpo"],  # the first plan's key: GRPO's pilot, whose rate every recipe used
        "pilots": picked,
        "pilot_devices": sorted({str(p.get("device")) for p in provenances}),
        "pilot_commits": sorted({str(p.get("git_commit")) for p in provenances}),
        "pilot_seeds": sorted({int(p["seed"]) for p in provenances if p.get("seed") is not None}),
    }


def dump_study(study: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write ``study`` (:func:`study_summary`) as gzipped JSON to ``path``, which must not exist."""
    with gzip.open(Path(path), "xt", encoding="utf-8") as handle:
        json.dump(study, handle, default=float)
    return Path(path)


def write_study(
    recording: str | os.PathLike, path: str | os.PathLike, count_tokens: Callable[[str], int] | None = None
) -> Path:
    """Write the summary of a shipped recording (``main/``, ``pilot/`` unless the plan fixed the rate, and
    ``measure/``), :func:`study_summary`, to ``path``, a gzipped JSON file that must not exist. ``recording`` is
    the recording's folder; ``count_tokens`` goes to :func:`lm_study`."""
    recording = Path(recording)
    pools = {kind: recording / "measure" / kind / "pool.csv" for kind in ("train", "heldout")}
    pilots = recording / "pilot" if (recording / "pilot").is_dir() else None  # None: the plan fixed the rate
    return dump_study(study_summary(recording / "main", pilots, pools, count_tokens), path)


def load_study(path: str | os.PathLike | tuple[str, ...] | None = None) -> dict[str, Any]:
    """The shipped summary of the recorded SmolLM2 runs (chapter 15), or the one at ``path``: a file, or a
    location in the package's data such as :data:`STRICT_STUDY_FILE` (the strict plan's runs)."""
    from stddial_book.core.resources import data_path

    if path is None or isinstance(path, tuple):
        path = data_path(*(path or STUDY_FILE))
    with gzip.open(Path(path), "rt", encoding="utf-8") as handle:
        return json.load(handle)
