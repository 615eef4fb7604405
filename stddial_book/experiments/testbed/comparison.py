"""What chapter 13 compares of the testbed's runs: the final values it screens per recipe and seed, the
update mass and optimizer steps it quotes from the live runs, and the flat numbers of a pool study of
several recipes. The tests over seeds themselves are :mod:`stddial_book.experiments.statistics`."""

from __future__ import annotations

from typing import Any

from stddial_book.experiments.statistics import seed_summary
from stddial_book.experiments.testbed.logs import extreme_mass_share, final_eval, training_steps
from stddial_book.experiments.testbed.predictions import prediction_numbers
from stddial_book.theory.recipes import get_recipe

__all__ = ["screen_values", "live_comparison_numbers", "study_numbers"]


def screen_values(
    study: dict[str, Any], runs: dict[str, list[list[dict[str, Any]]]]
) -> dict[str, dict[str, list[float]]]:
    """The four final values chapter 13 screens, per recipe name and seed, as
    :func:`~stddial_book.experiments.statistics.comparison_screen` takes them: the mean solve rate of
    the whole pool and of its hardest quartile (from a
    :func:`~stddial_book.experiments.testbed.predictions.pool_study` of the runs), and the held-out
    accuracy, sampled and greedy (:func:`~stddial_book.experiments.testbed.logs.final_eval`).
    ``runs`` maps a recipe key to the records of its seeds; ``study`` is
    :func:`~stddial_book.experiments.testbed.predictions.pool_study` of those runs (the same recipe keys)."""
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
    """Per recipe key, the seed means chapter 13 quotes: ``share_<key>``, the update mass on groups
    with k = 1 or G − 1 (:func:`~stddial_book.experiments.testbed.logs.extreme_mass_share`), and
    ``updates_<key>``, the optimizer steps a run made for its sample budget. ``runs`` maps a recipe key to
    the records of its seeds (one run log per seed); ``group_size`` is the runs' G."""
    if not isinstance(runs, dict) or not runs:
        raise ValueError("runs must map recipe keys to the records of their seeds.")
    out: dict[str, float] = {}
    for key, seeds in runs.items():
        out[f"share_{key}"] = seed_summary([extreme_mass_share(r, group_size) for r in seeds])[0]
        out[f"updates_{key}"] = seed_summary([training_steps(r)[-1]["updates"] for r in seeds])[0]
    return out


def study_numbers(study: dict[str, Any]) -> dict[str, float]:
    """The numbers chapter 13 quotes from a
    :func:`~stddial_book.experiments.testbed.predictions.pool_study` of several recipes, flat: the
    range of the silent fraction's R² over recipes (``r2_min``, ``r2_max``), the largest RMS gap
    (``rmse_max``) and the largest realised − closed-form mass gap (``mass_gap``); per recipe key
    the hardest quartile's share of the update mass (``hard_<key>``) and its final mean solve rate,
    mean and SD over seeds (``q1_<key>``, ``q1_<key>_sd``); the hardest quartile's start
    (``q1_start``, first recipe) and the fewest seeds of a recipe (``seeds``). All from
    :func:`~stddial_book.experiments.testbed.predictions.prediction_numbers`. ``study`` is a non-empty
    :func:`~stddial_book.experiments.testbed.predictions.pool_study` result (recipe key -> its entry)."""
    if not isinstance(study, dict) or not study:
        raise ValueError("study must be a non-empty pool_study result.")
    per = {key: prediction_numbers(study, key) for key in study}
    out: dict[str, float] = {
        "r2_min": min(p["silent_r2"] for p in per.values()),
        "r2_max": max(p["silent_r2"] for p in per.values()),
        "rmse_max": max(p["silent_rms"] for p in per.values()),
        "mass_gap": max(p["mass_gap"] for p in per.values()),
        "q1_start": next(iter(per.values()))["q1_start"],
        "seeds": min(p["seeds"] for p in per.values()),
    }
    for key, p in per.items():
        out[f"hard_{key}"] = p["mass_q1"]
        out[f"q1_{key}"] = p["q1_end"]
        out[f"q1_{key}_sd"] = p["q1_end_sd"]
    return out
