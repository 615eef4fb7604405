"""Reading training logs: final accuracies, update mass per bucket, seed statistics (chapters 10-13).

Everything here takes the records of :func:`stddial_book.runs.load_run` (one dict per logged
step) and returns plain numbers or arrays, so chapters can glue them and tests can check them.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .resources import data_path
from .runs import metric_series

__all__ = ["extreme_mass_share", "final_eval", "buckets", "update_mass", "curve", "seed_summary", "difference_vs_noise",
           "identity_from_log", "recorded_runs", "RECORDED_DIR"]

#: Where committed reference run logs live: ``data/runs/<profile>/<recipe>-seed<k>/`` in the
#: repository, shipped inside the package (:mod:`stddial_book.resources`).
RECORDED_DIR = data_path("runs")


def final_eval(records: list[dict[str, Any]]) -> dict[str, float]:
    """The last evaluation of a run: ``eval/...`` metrics without the prefix."""
    evals = [r for r in records if "eval/accuracy_sampled" in r]
    if not evals:
        raise ValueError("this run log holds no evaluation; train with eval_every > 0.")
    return {k[len("eval/"):]: v for k, v in evals[-1].items() if k.startswith("eval/")}


def buckets(records: list[dict[str, Any]]) -> list[str]:
    """The difficulty buckets a run evaluated, in sorted order."""
    prefix = "eval/accuracy_sampled/"
    return sorted({k[len(prefix):] for r in records for k in r if k.startswith(prefix)})


def update_mass(records: list[dict[str, Any]]) -> dict[str, float]:
    """Total update mass per bucket over a run: Σ over steps of Σ_groups w / groups per step.

    w = mean|A|/2 of each group that reached the update (σ for GRPO and DAPO, σ² for Dr. GRPO,
    chapter 3); silent groups add nothing. Buckets with no mixed group add 0.
    """
    prefix = "dial/update_mass/"
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
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("no values to summarise.")
    sem = arr.std(ddof=1) / math.sqrt(arr.size) if arr.size > 1 else 0.0
    return float(arr.mean()), float(sem)


def difference_vs_noise(a: Sequence[float], b: Sequence[float], z: float = 2.0) -> dict[str, float | bool]:
    """Is mean(a) − mean(b) larger than ``z`` standard errors of the difference (Welch)?

    Returns the difference, its standard error and ``exceeds``. With three seeds this is a rough
    screen, not a test at a stated level; the chapter says so.
    """
    ma, sa = seed_summary(a)
    mb, sb = seed_summary(b)
    se = math.sqrt(sa**2 + sb**2)
    diff = ma - mb
    return {"difference": diff, "se": se, "exceeds": bool(abs(diff) > z * se) if se > 0 else diff != 0}


def identity_from_log(records: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """(σ, w) of every group that reached an update, pooled over the run (chapter 13's check)."""
    sig = [s for r in records for s in r.get("groups/sigma", [])]
    w = [x for r in records for x in r.get("groups/weight", [])]
    return np.array(sig, dtype=float), np.array(w, dtype=float)


def recorded_runs(profile: str = "full", root: str | os.PathLike | None = None) -> dict[str, list[Path]]:
    """Committed run directories per recipe key (``grpo``, ``dr_grpo``, ``dapo``), seeds sorted.

    An empty dict means no run of that profile has been recorded yet; chapters then say so.
    """
    base = Path(root) if root is not None else RECORDED_DIR
    found: dict[str, list[Path]] = {}
    for path in sorted((base / profile).glob("*-seed*")):
        if (path / "metrics.jsonl").exists():
            if not (path / "provenance.json").exists():
                raise ValueError(f"{path} has metrics but no provenance.json; a recorded run must carry its provenance.")
            found.setdefault(path.name.rsplit("-seed", 1)[0], []).append(path)
    return found


def extreme_mass_share(records: list[dict[str, Any]], group_size: int) -> float:
    """Share of a run's update mass that went to groups with k = 1 or k = G − 1 correct.

    Those groups have the smallest non-zero σ = sqrt(G − 1)/G; GRPO weights them by σ and
    Dr. GRPO by σ², so the share is where the std division shows most directly (chapter 13).
    """
    sigma, weight = identity_from_log(records)
    if weight.sum() == 0:
        raise ValueError("no group reached an update in this run.")
    edge = math.sqrt(group_size - 1) / group_size
    return float(weight[np.isclose(sigma, edge, atol=1e-5)].sum() / weight.sum())
