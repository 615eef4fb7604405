"""What chapter 13 reads from the recorded dial-only ablation (:mod:`stddial_book.experiments.ablation.study`).

The recorded runs stay in the repository (``data/runs/ablation``); the package ships their study
(``data/ablation/ablation.json.gz``, :func:`~stddial_book.experiments.ablation.study.ablation_study` of
that folder plus the power analysis of the reference runs), written by ``tools/ship_ablation.py``
and recomputed from the logs by ``tests/test_ablation_report.py``. This module turns it into the
chapter's numbers, tables and verdicts:

* :func:`ablation_numbers`: the counts (runs, seeds, comparisons, detections), the step-size
  control (each arm's realised update norm over ``divide``'s under AdamW, how often the clip binds)
  and the range of minimum detectable effects the seeds reached;
* :func:`contrast_rows`: one table row per cell with each contrast's difference, its family-wise
  interval and Bonferroni p;
* :func:`explanations`: the candidate explanations of chapter 13's null, each with what it predicts
  and whether the recorded contrasts bear it out; the verdicts are computed, not written (in words:
  :mod:`stddial_book.experiments.ablation.words`).

A contrast counts as *detected* when its family-wise interval (Student t with Welch's degrees of
freedom, level 1 − α/m over the m comparisons) excludes zero and its Bonferroni-adjusted Welch p is
below α; for a t interval the two agree. The percentile bootstrap intervals the study keeps beside
them decide nothing: with 12 seeds an arm their far tails are too narrow. The cells taken together
are in :mod:`stddial_book.experiments.ablation.pooled`.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import numpy as np

from stddial_book.experiments.ablation.pooled import CONTRAST_NAMES, effect_differences
from stddial_book.experiments.ablation.study import ARMS, CELLS, CONTRASTS, MEASURES, Cell

__all__ = [
    "ABLATION_SUMMARY_FILE",
    "RUNS_FOLDER",
    "load_ablation_summary",
    "cell_order",
    "detected",
    "detections",
    "ablation_numbers",
    "contrast_rows",
    "control_rows",
    "explanations",
    "step_matched",
    "cell_of",
    "cell_words",
    "cell_phrase",
    "dial_hits",
    "other_quartiles",
]

#: The shipped study, under the package's data folder.
ABLATION_SUMMARY_FILE = ("ablation", "ablation.json.gz")
#: The recorded runs, in the repository only (``data/runs/ablation``).
RUNS_FOLDER = ("runs", "ablation")

#: How close no_divide's realised step must be to divide's (ratio of mean update norms) for a
#: contrast to measure the allocation alone, as explanation 3 asks of Adam.
STEP_TOLERANCE = 0.1


def load_ablation_summary() -> dict[str, Any] | None:
    """The shipped study of the recorded ablation, or None when it has not been made yet."""
    from stddial_book.core.resources import data_path

    path = data_path(*ABLATION_SUMMARY_FILE)
    if not path.is_file():
        return None
    return json.loads(gzip.decompress(path.read_bytes()))


def _check(summary: dict[str, Any]) -> None:
    needed = ("cells", "comparisons", "alpha", "means", "seeds", "values")
    if not isinstance(summary, dict) or any(k not in summary for k in needed):
        raise ValueError(
            "summary must be what stddial_book.experiments.ablation.study.ablation_study returns "
            f"(it needs {', '.join(needed)}); load it with load_ablation_summary()."
        )


def cell_order(summary: dict[str, Any]) -> list[str]:
    """The recorded cells' keys in the design's order (G, then optimizer, then clip). ``summary`` is the
    study (:func:`load_ablation_summary` or :func:`~stddial_book.experiments.ablation.study.ablation_study`)."""
    _check(summary)
    return [c.key for c in CELLS if c.key in summary["cells"]]


def cell_of(key: str) -> Cell:
    """The design's :class:`~stddial_book.experiments.ablation.study.Cell` of a cell key ``key``
    (e.g. ``G8-sgd-clip``); a key outside the design raises StopIteration."""
    return next(c for c in CELLS if c.key == key)


def _optimizer(cell: Cell) -> str:
    return "AdamW" if cell.optimizer == "adamw" else "SGD"


def _cell_columns(cell: Cell) -> list[str]:
    """A table row's leading columns: G, the optimizer, the clip."""
    return [str(cell.group_size), _optimizer(cell), "1.0" if cell.clip else "none"]


def dial_hits(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The division's contrasts on the hardest quartile that are beyond noise, out of ``found``
    (the comparison dicts :func:`detections` returns)."""
    return [
        d for d in found if d["detected"] and d["contrast"] == "divide-no_divide" and d["measure"] == "hardest_quartile"
    ]


def detected(result: dict[str, Any], alpha: float) -> bool:
    """Whether one comparison of :func:`~stddial_book.experiments.ablation.study._contrast` is beyond
    noise: its family-wise interval excludes 0 and its Bonferroni p is below ``alpha``. ``result`` is
    that comparison's dict (its ``ci_family`` and ``p_bonferroni`` are read; a missing or non-finite
    one is not beyond noise); ``alpha`` is the family-wise error rate in (0, 1)."""
    interval, p = result.get("ci_family"), result.get("p_bonferroni")
    if interval is None or p is None or not np.isfinite(p):
        return False
    return bool((interval[0] > 0 or interval[1] < 0) and p < alpha)


def detections(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Every comparison made, in cell order: cell, contrast, measure, difference, detected. ``summary``
    is the study (:func:`load_ablation_summary`); its ``alpha`` decides what is detected."""
    out = []
    for key in cell_order(summary):
        for a, b in CONTRASTS:
            entry = summary["cells"][key].get(f"{a}-{b}")
            if entry is None:
                continue
            for measure in MEASURES:
                result = entry[measure]
                out.append(
                    {
                        "cell": key,
                        "contrast": f"{a}-{b}",
                        "measure": measure,
                        "difference": result["difference"],
                        "ci_family": result.get("ci_family"),
                        "boot_family": result.get("boot_family"),
                        "p": result.get("p"),
                        "mde": result.get("mde"),
                        "detected": detected(result, summary["alpha"]),
                    }
                )
    return out


def _arm_mean(summary, key: str, arm: str, name: str) -> float:
    return float(np.mean(summary["values"][key][arm][name]))


def ablation_numbers(summary: dict[str, Any]) -> dict[str, Any]:
    """The chapter's glued numbers (prefix them when gluing): counts, the controls, the MDEs.

    ``runs``, ``seeds_min``/``seeds_max`` (per arm and cell), ``cells``, ``comparisons``,
    ``detected`` (of them) and ``detected_dial``/``detected_filter`` (per contrast, hardest quartile
    and held-out together), ``expected_false`` (the comparisons × α/m a family-wise level allows at
    most: α), ``mde_min``/``mde_max`` (the hardest quartile's realised MDE over the cells),
    ``largest_dial`` (the largest |divide − no_divide| on the hardest quartile, and ``largest_dial_cell``),
    ``adamw_norm_low``/``adamw_norm_high`` (no_divide's and filter's update norm over divide's in the
    AdamW cells), ``clip_binds_divide``/``clip_binds_no_divide`` (the share of steps whose gradient
    norm exceeds the clip at 1.0, over the clipped cells), ``start`` and ``hardest_prompts``; and
    :func:`_interval_numbers`' intervals, held-out margin, SGD step ratios and step counts. ``summary``
    is the study (:func:`load_ablation_summary`)."""
    _check(summary)
    order = cell_order(summary)
    found = detections(summary)
    seeds = [n for key in order for n in summary["seeds"][key].values()]
    quartile = [d for d in found if d["measure"] == "hardest_quartile"]
    dial = [d for d in quartile if d["contrast"] == "divide-no_divide"]
    biggest = max(dial, key=lambda d: abs(d["difference"])) if dial else None
    mdes = [d["mde"] for d in quartile if d["mde"] is not None and np.isfinite(d["mde"])]
    adamw = [k for k in order if cell_of(k).optimizer == "adamw"]
    ratios = [
        summary["cells"][k]["norm_ratio"][arm]
        for k in adamw
        for arm in ARMS
        if arm != "divide" and arm in summary["cells"][k].get("norm_ratio", {})
    ]
    clipped = [k for k in order if cell_of(k).clip]

    def binds(arm: str) -> float:
        shares = [_arm_mean(summary, k, arm, "grad_above_one") for k in clipped if arm in summary["values"][k]]
        return float(np.mean(shares)) if shares else float("nan")

    extra = _interval_numbers(summary, order, found, biggest)
    return extra | {
        "runs": int(sum(seeds)),
        "seeds_min": int(min(seeds)),
        "seeds_max": int(max(seeds)),
        "cells": len(order),
        "comparisons": int(summary["comparisons"]),
        "alpha": float(summary["alpha"]),
        "detected": sum(d["detected"] for d in found),
        "detected_dial": sum(d["detected"] for d in found if d["contrast"] == "divide-no_divide"),
        "detected_filter": sum(d["detected"] for d in found if d["contrast"] == "filter-divide"),
        "mde_min": float(min(mdes)) if mdes else float("nan"),
        "mde_max": float(max(mdes)) if mdes else float("nan"),
        "largest_dial": float(biggest["difference"]) if biggest else float("nan"),
        "largest_dial_cell": biggest["cell"] if biggest else "",
        "adamw_norm_low": float(min(ratios)) if ratios else float("nan"),
        "adamw_norm_high": float(max(ratios)) if ratios else float("nan"),
        "clip_binds_divide": binds("divide"),
        "clip_binds_no_divide": binds("no_divide"),
        "start": float(summary.get("start", float("nan"))),
        "hardest_prompts": int(summary.get("hardest_prompts", 0)),
    }


def _interval_numbers(
    summary: dict[str, Any], order: list[str], found: list[dict[str, Any]], biggest: dict[str, Any] | None
) -> dict[str, Any]:
    """:func:`ablation_numbers`' ``largest_dial_low``/``largest_dial_high`` (that contrast's
    family-wise interval), ``boot_only`` (comparisons not beyond noise whose bootstrap family interval
    nevertheless excludes 0), ``heldout_low``/``heldout_high`` (the lowest and highest end of the
    held-out family-wise intervals), ``heldout_margin`` (the difference the design was sized to
    detect, the power analysis's MDE, 0.04 when absent) and ``heldout_within``/``heldout_comparisons``
    (the held-out comparisons whose family-wise interval lies inside ±margin: equivalent at that
    margin by two one-sided tests at the family-wise level), ``sgd_norm_low``/``sgd_norm_high``
    (no_divide's update norm over divide's in the SGD cells), ``filter_updates_8_low``/``_high`` and
    ``filter_updates_32_low``/``_high`` (the filter arm's optimizer steps per run at each G) and
    ``divide_updates`` (divide's, the most)."""
    nan = float("nan")
    held = [d["ci_family"] for d in found if d["measure"] == "heldout" and d["ci_family"] is not None]
    margin = float((summary.get("power") or {}).get("mde", 0.04))
    sgd = [summary["cells"][k]["norm_ratio"].get("no_divide") for k in order if cell_of(k).optimizer == "sgd"]
    sgd = [r for r in sgd if r is not None]

    def updates(arm: str, group_size: int | None = None) -> list[float]:
        return [
            u
            for k in order
            if arm in summary["values"][k] and group_size in (None, cell_of(k).group_size)
            for u in summary["values"][k][arm].get("updates", [])
        ]

    def boot_only(d: dict[str, Any]) -> bool:
        boot = d["boot_family"]
        return not d["detected"] and boot is not None and (boot[0] > 0 or boot[1] < 0)

    out = {
        "largest_dial_low": float(biggest["ci_family"][0]) if biggest and biggest["ci_family"] else nan,
        "largest_dial_high": float(biggest["ci_family"][1]) if biggest and biggest["ci_family"] else nan,
        "boot_only": sum(boot_only(d) for d in found),
        "heldout_low": float(min(ci[0] for ci in held)) if held else nan,
        "heldout_high": float(max(ci[1] for ci in held)) if held else nan,
        "heldout_margin": margin,
        "heldout_within": sum(-margin < ci[0] and ci[1] < margin for ci in held),
        "heldout_comparisons": len(held),
        "sgd_norm_low": float(min(sgd)) if sgd else nan,
        "sgd_norm_high": float(max(sgd)) if sgd else nan,
        "divide_updates": float(max(updates("divide"), default=nan)),
    }
    for g in (8, 32):
        steps = updates("filter", g)
        out[f"filter_updates_{g}_low"] = float(min(steps)) if steps else nan
        out[f"filter_updates_{g}_high"] = float(max(steps)) if steps else nan
    return out


def _interval(result: dict[str, Any], digits: int = 3) -> str:
    ci = result.get("ci_family")
    diff = f"{result['difference']:+.{digits}f}"
    return diff if ci is None else f"{diff} [{ci[0]:+.{digits}f}, {ci[1]:+.{digits}f}]"


def contrast_rows(summary: dict[str, Any], measure: str = "hardest_quartile") -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a table: per cell (G, optimizer, clip), each contrast's difference with its
    family-wise interval, a * where :func:`detected` (the columns a reader comes for, first), then
    the seeds and each arm's mean of ``measure``. ``summary`` is the study (:func:`load_ablation_summary`);
    ``measure`` is ``"hardest_quartile"`` (the default) or ``"heldout"``."""
    _check(summary)
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {list(MEASURES)}; got {measure!r}.")
    header = ["G", "optimizer", "clip", *(CONTRAST_NAMES[f"{a}-{b}"] for a, b in CONTRASTS), "seeds", *ARMS]
    rows = []
    for key in cell_order(summary):
        cell, entry = cell_of(key), summary["cells"][key]
        means = [f"{summary['means'][key][arm][measure]:.3f}" if arm in summary["means"][key] else "–" for arm in ARMS]
        contrasts = []
        for a, b in CONTRASTS:
            result = entry.get(f"{a}-{b}", {}).get(measure)
            if result is None:
                contrasts.append("–")
                continue
            mark = " *" if detected(result, summary["alpha"]) else ""
            contrasts.append(_interval(result) + mark)
        seeds = sorted(set(summary["seeds"][key].values()))
        rows.append(
            [
                *_cell_columns(cell),
                *contrasts,
                f"{seeds[0]}–{seeds[-1]}" if len(seeds) > 1 else str(seeds[0]),
                *means,
            ]
        )
    return header, rows


def step_matched(summary: dict[str, Any], key: str) -> bool:
    """Whether no_divide's realised steps in cell ``key`` are as long as divide's, within
    :data:`STEP_TOLERANCE` (the ratio of their mean update norms): there the division's contrast
    measures the allocation (σ against σ² per group) alone. ``summary`` is the study
    (:func:`load_ablation_summary`); ``key`` a recorded cell's key (e.g. ``G8-sgd-clip``)."""
    ratio = summary["cells"][key].get("norm_ratio", {}).get("no_divide")
    return ratio is not None and abs(ratio - 1.0) <= STEP_TOLERANCE


def other_quartiles(summary: dict[str, Any], key: str) -> dict[str, float] | None:
    """divide − no_divide on the other three quartiles' final pool accuracy in cell ``key``
    (:func:`~stddial_book.experiments.statistics.welch`): a reallocation to the hard prompts leaves
    them alone, a longer step lifts them too. None where the study has no such values. ``summary`` is
    the study (:func:`load_ablation_summary`); ``key`` a recorded cell's key (e.g. ``G8-sgd-clip``)."""
    from stddial_book.experiments.statistics import welch

    arms = summary["values"][key]
    if any("other_quartiles" not in arms.get(arm, {}) for arm in ("divide", "no_divide")):
        return None
    return welch(arms["divide"]["other_quartiles"], arms["no_divide"]["other_quartiles"])


def _effect_verdict(tests: dict[str, dict[str, Any]], factor: str, alpha: float) -> tuple[str, str, dict]:
    """Whether the division's effect is larger where ``factor``'s explanation predicts it, by the
    direct test of the difference of effects (:func:`effect_differences`) under each optimizer."""
    rows = {key.split("/")[1]: t for key, t in tests.items() if key.startswith(f"{factor}/")}
    if not rows:
        return "untested", "the cells it needs were not recorded", {}
    shown = "; ".join(
        f"{'AdamW' if opt == 'adamw' else 'SGD'} {t['difference']:+.3f} (z = {t['z']:.2f}; detectable at 80% power: "
        f"±{t['mde']:.3f})"
        for opt, t in rows.items()
    )
    label = next(iter(rows.values()))["label"]
    hits = [t["difference"] > 0 and t["p_bonferroni"] < alpha for t in rows.values()]
    verdict = "supported" if all(hits) else "partly supported" if any(hits) else "not supported"
    return verdict, f"{label} effect: {shown}", rows


def _adam_verdict(numbers: dict[str, Any]) -> tuple[str, str, dict]:
    low, high = numbers["adamw_norm_low"], numbers["adamw_norm_high"]
    if not np.isfinite(low):
        return "untested", "no AdamW cell was recorded", {}
    shown = f"no_divide's and filter's update norms are {low:.2f}–{high:.2f} × divide's under AdamW"
    tolerance = STEP_TOLERANCE
    return ("supported" if low >= 1 - tolerance and high <= 1 + tolerance else "not supported"), shown, {}


def explanations(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The candidate explanations of the null in chapter 13's recipe comparison, each with what it
    predicts, what the recorded contrasts show, and a verdict (``supported``; ``partly supported``;
    ``not supported``; or ``untested`` when the cells it needs were not recorded); ``tests`` holds
    what the verdict rests on, ``verdict_words`` the verdict with the size a non-detection could miss.

    1. *G = 8 is where the gap is smallest*: the division's effect on the hardest quartile is larger
       at G = 32 than at G = 8, tested directly under each optimizer (:func:`effect_differences`,
       exploratory; a difference in detections is not a detected difference): supported where it is
       larger beyond noise under both optimizers, partly under one.
    2. *The clip is a second normaliser*: larger without the clip than with it, tested the same way.
    3. *Adam absorbs the scale*: under AdamW, no_divide's and filter's realised steps are as long
       as divide's (within :data:`STEP_TOLERANCE`), so σ against σ² changes no step length there.
    4. *The allocation alone matters* (σ against σ² per group at equal step length): the division
       changes the hardest quartile beyond noise in a cell where the two arms' realised steps are
       equally long (:func:`step_matched`); a detection where they are not does not separate the
       division from step length.

    ``summary`` is the study (:func:`load_ablation_summary`); its ``alpha`` is the family-wise level.
    """
    _check(summary)
    found = detections(summary)
    tests = effect_differences(summary, summary["alpha"])
    group = _effect_verdict(tests, "group_size", summary["alpha"])
    clip = _effect_verdict(tests, "clip", summary["alpha"])
    hard = dial_hits(found)
    every = [d for d in found if d["contrast"] == "divide-no_divide" and d["measure"] == "hardest_quartile"]
    clean = [d for d in hard if step_matched(summary, d["cell"])]
    allocation = (
        ("untested" if not every else ("supported" if clean else "not supported")),
        (
            f"{len(hard)} of {len(every)} cells beyond noise, {len(clean)} of them with steps of equal length "
            f"(within {STEP_TOLERANCE:.0%})"
        ),
        {"hits": hard, "clean": clean},
    )
    table = [
        (
            "G = 8 is where the gap is smallest",
            "divide − no_divide larger on the hardest quartile at G = 32 than at G = 8",
            group,
        ),
        (
            "the gradient clip is a second normaliser",
            "divide − no_divide larger without the clip than with it",
            clip,
        ),
        (
            "Adam absorbs the scale σ against σ²",
            "under AdamW the arms take steps of the same length (within 10%) at the same rate",
            _adam_verdict(ablation_numbers(summary)),
        ),
        (
            "the allocation alone (σ against σ² per group, equal step length) matters",
            "divide − no_divide beyond noise on the hardest quartile in a cell with steps of equal length",
            allocation,
        ),
    ]
    keys = ("explanation", "predicts", "shows", "verdict", "verdict_words", "tests")
    return [dict(zip(keys, (e, p, shown, v, _verdict_words(v, t), t))) for e, p, (v, shown, t) in table]


def _verdict_words(verdict: str, tests: dict[str, Any]) -> str:
    """``verdict`` for the chapter's table; a "not supported" that rests on tests of a difference of
    effects says how large a difference those tests could miss (their largest 80%-power ``mde``)."""
    reach = [t["mde"] for t in tests.values() if isinstance(t, dict) and "mde" in t]
    if verdict == "not supported" and reach:
        return f"not supported; a difference of effects up to ±{max(reach):.3f} could go undetected"
    return verdict


def control_rows(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the step-size control per cell: SGD's rate per arm (the pilot's matched
    rates; AdamW's arms share the profile's), each arm's realised mean update norm over divide's,
    and the share of divide's and no_divide's steps whose gradient norm exceeds 1 (where the clip
    binds; in a cell without the clip, where it would have). ``summary`` is the study
    (:func:`load_ablation_summary`); the SGD rates come from its ``pilot`` entry."""
    _check(summary)
    pilot = summary.get("pilot") or {}
    rates = pilot.get("sgd_lr", {})
    header = [
        "G",
        "optimizer",
        "clip",
        "SGD rate: divide / no_divide / filter",
        "update norm ÷ divide's: no_divide / filter",
        "gradient norm > 1: divide / no_divide",
    ]
    rows = []
    for key in cell_order(summary):
        cell, entry = cell_of(key), summary["cells"][key]
        if cell.optimizer == "sgd":
            rate = " / ".join(f"{rates[f'{arm}-{key}']:.3g}" if f"{arm}-{key}" in rates else "–" for arm in ARMS)
        else:
            rate = "(AdamW, one rate)"
        ratio = entry.get("norm_ratio", {})
        norms = " / ".join(f"{ratio[arm]:.2f}" if arm in ratio else "–" for arm in ("no_divide", "filter"))
        above = " / ".join(
            f"{_arm_mean(summary, key, arm, 'grad_above_one'):.0%}" if arm in summary["values"][key] else "–"
            for arm in ("divide", "no_divide")
        )
        rows.append(_cell_columns(cell) + [rate, norms, above])
    return header, rows


def cell_words(key: str) -> str:
    """A cell's key ``key`` in words: ``G8-sgd-noclip`` → "G = 8, SGD, no clip"."""
    cell = cell_of(key)
    return f"G = {cell.group_size}, {_optimizer(cell)}, {'clip' if cell.clip else 'no clip'}"


def cell_phrase(key: str) -> str:
    """A cell, given by its key ``key``, in running prose: ``G32-adamw-clip`` → "G = 32 under AdamW with the
    clip"."""
    cell = cell_of(key)
    return f"G = {cell.group_size} under {_optimizer(cell)} {'with' if cell.clip else 'without'} the clip"
