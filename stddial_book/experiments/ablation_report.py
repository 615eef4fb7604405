"""What chapter 13 reads from the recorded dial-only ablation (:mod:`stddial_book.experiments.ablation`).

The recorded runs stay in the repository (``data/runs/ablation``); the package ships their study
(``data/ablation/ablation.json.gz``, :func:`~stddial_book.experiments.ablation.ablation_study` of
that folder plus the power analysis of the reference runs), written by ``tools/ship_ablation.py``
and recomputed from the logs by ``tests/test_ablation_report.py``. This module turns it into the
chapter's numbers, tables and verdicts:

* :func:`ablation_numbers`: the counts (runs, seeds, comparisons, detections), the step-size
  control (each arm's realised update norm over ``divide``'s under AdamW, how often the clip binds)
  and the range of minimum detectable effects the seeds reached;
* :func:`contrast_rows`: one table row per cell with each contrast's difference, its family-wise
  interval and Bonferroni p;
* :func:`explanations`: the candidate explanations of chapter 13's null, each with what it predicts
  and whether the recorded contrasts bear it out; the verdicts are computed, not written.

A contrast counts as *detected* when its family-wise bootstrap interval (level 1 − α/m over the m
comparisons) excludes zero and its Bonferroni-adjusted Welch p is below α: both, so that neither
the bootstrap's nor the t-test's assumptions decide alone.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import numpy as np

from stddial_book.experiments.ablation import ARMS, CELLS, CONTRASTS, MEASURES, Cell

__all__ = [
    "SUMMARY_FILE",
    "RUNS_FOLDER",
    "load_ablation_summary",
    "cell_order",
    "detected",
    "detections",
    "ablation_numbers",
    "contrast_rows",
    "control_rows",
    "explanations",
    "ablation_sentence",
    "ablation_reading",
    "ablation_clause",
    "cell_words",
    "cell_phrase",
    "pooled_contrasts",
    "pooled_rows",
]

#: The shipped study, under the package's data folder.
SUMMARY_FILE = ("ablation", "ablation.json.gz")
#: The recorded runs, in the repository only (``data/runs/ablation``).
RUNS_FOLDER = ("runs", "ablation")

CONTRAST_NAMES = {"divide-no_divide": "divide − no_divide", "filter-divide": "filter − divide"}
MEASURE_NAMES = {"hardest_quartile": "hardest quartile", "heldout": "held-out"}


def load_ablation_summary() -> dict[str, Any] | None:
    """The shipped study of the recorded ablation, or None when it has not been made yet."""
    from stddial_book.core.resources import data_path

    path = data_path(*SUMMARY_FILE)
    if not path.is_file():
        return None
    return json.loads(gzip.decompress(path.read_bytes()))


def _check(summary: dict[str, Any]) -> None:
    needed = ("cells", "comparisons", "alpha", "means", "seeds", "values")
    if not isinstance(summary, dict) or any(k not in summary for k in needed):
        raise ValueError(
            "summary must be what stddial_book.experiments.ablation.ablation_study returns "
            f"(it needs {', '.join(needed)}); load it with load_ablation_summary()."
        )


def cell_order(summary: dict[str, Any]) -> list[str]:
    """The recorded cells' keys in the design's order (G, then optimizer, then clip)."""
    _check(summary)
    return [c.key for c in CELLS if c.key in summary["cells"]]


def _cell(key: str) -> Cell:
    return next(c for c in CELLS if c.key == key)


def _optimizer(cell: Cell) -> str:
    return "AdamW" if cell.optimizer == "adamw" else "SGD"


def _cell_columns(cell: Cell) -> list[str]:
    """A table row's leading columns: G, the optimizer, the clip."""
    return [str(cell.group_size), _optimizer(cell), "1.0" if cell.clip else "none"]


def _dial_hits(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The division's contrasts on the hardest quartile that are beyond noise."""
    return [
        d for d in found if d["detected"] and d["contrast"] == "divide-no_divide" and d["measure"] == "hardest_quartile"
    ]


def detected(result: dict[str, Any], alpha: float) -> bool:
    """Whether one comparison of :func:`~stddial_book.experiments.ablation._contrast` is beyond
    noise: its family-wise interval excludes 0 and its Bonferroni p is below ``alpha``."""
    interval, p = result.get("ci_family"), result.get("p_bonferroni")
    if interval is None or p is None or not np.isfinite(p):
        return False
    return bool((interval[0] > 0 or interval[1] < 0) and p < alpha)


def detections(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Every comparison made, in cell order: cell, contrast, measure, difference, detected."""
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
    norm exceeds the clip at 1.0, over the clipped cells), ``start`` and ``hardest_prompts``."""
    _check(summary)
    order = cell_order(summary)
    found = detections(summary)
    seeds = [n for key in order for n in summary["seeds"][key].values()]
    quartile = [d for d in found if d["measure"] == "hardest_quartile"]
    dial = [d for d in quartile if d["contrast"] == "divide-no_divide"]
    biggest = max(dial, key=lambda d: abs(d["difference"])) if dial else None
    mdes = [d["mde"] for d in quartile if d["mde"] is not None and np.isfinite(d["mde"])]
    adamw = [k for k in order if _cell(k).optimizer == "adamw"]
    ratios = [
        summary["cells"][k]["norm_ratio"][arm]
        for k in adamw
        for arm in ARMS
        if arm != "divide" and arm in summary["cells"][k].get("norm_ratio", {})
    ]
    clipped = [k for k in order if _cell(k).clip]

    def binds(arm: str) -> float:
        shares = [_arm_mean(summary, k, arm, "grad_above_one") for k in clipped if arm in summary["values"][k]]
        return float(np.mean(shares)) if shares else float("nan")

    return {
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


def _interval(result: dict[str, Any], digits: int = 3) -> str:
    ci = result.get("ci_family")
    diff = f"{result['difference']:+.{digits}f}"
    return diff if ci is None else f"{diff} [{ci[0]:+.{digits}f}, {ci[1]:+.{digits}f}]"


def contrast_rows(summary: dict[str, Any], measure: str = "hardest_quartile") -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a table: per cell, each arm's mean of ``measure`` and each contrast's
    difference with its family-wise interval, a * where :func:`detected`."""
    _check(summary)
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {list(MEASURES)}; got {measure!r}.")
    header = ["G", "optimizer", "clip", "seeds", *ARMS, *(CONTRAST_NAMES[f"{a}-{b}"] for a, b in CONTRASTS)]
    rows = []
    for key in cell_order(summary):
        cell, entry = _cell(key), summary["cells"][key]
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
                f"{seeds[0]}–{seeds[-1]}" if len(seeds) > 1 else str(seeds[0]),
                *means,
                *contrasts,
            ]
        )
    return header, rows


def _verdict(tests: list[dict[str, Any]], control: list[dict[str, Any]]) -> tuple[str, str, tuple | None]:
    """Whether the contrasts ``tests`` show an effect that ``control`` does not: some detected, and
    a larger share of them than of the control's; with what the runs show, in words and counts."""
    if not tests:
        return "untested", "the cells it needs were not recorded", None
    hits = sum(d["detected"] for d in tests)
    base = sum(d["detected"] for d in control)
    shown = f"{hits} of {len(tests)} contrasts beyond noise there, {base} of {len(control)} elsewhere"
    counts = (hits, len(tests), base, len(control))
    if hits == 0 or hits / len(tests) <= base / max(len(control), 1):
        return "not supported", shown, counts
    return ("supported" if base == 0 else "partly supported"), shown, counts


def _adam_verdict(numbers: dict[str, Any]) -> tuple[str, str, None]:
    low, high = numbers["adamw_norm_low"], numbers["adamw_norm_high"]
    if not np.isfinite(low):
        return "untested", "no AdamW cell was recorded", None
    shown = f"no_divide's and filter's update norms are {low:.2f}–{high:.2f} × divide's under AdamW"
    return ("supported" if low >= 0.9 and high <= 1.1 else "not supported"), shown, None


def explanations(summary: dict[str, Any]) -> list[dict[str, str]]:
    """The candidate explanations of the null in chapter 13's recipe comparison, each with what it
    predicts, what the recorded contrasts show, and a verdict (``supported``; ``partly supported``
    when the effect shows more often where the explanation predicts it but also elsewhere; ``not
    supported``; or ``untested`` when the cells it needs were not recorded); ``counts`` are the
    contrasts beyond noise where it predicts them, of how many, and elsewhere, of how many.

    1. *G = 8 is where the gap is smallest*: the division's effect on the hardest quartile
       appears at G = 32 (and not, or less often, at G = 8).
    2. *The clip is a second normaliser*: it appears once the clip is off.
    3. *Adam absorbs the scale*: under AdamW, no_divide's and filter's realised steps are as long
       as divide's (within 10%), so σ against σ² changes no step length there.
    4. *The allocation alone matters* (σ against σ² per group at equal step length): the division
       changes the hardest quartile in some cell.
    """
    _check(summary)
    found = detections(summary)

    def dial(where) -> list[dict[str, Any]]:
        return [
            d
            for d in found
            if d["contrast"] == "divide-no_divide" and d["measure"] == "hardest_quartile" and where(_cell(d["cell"]))
        ]

    group = _verdict(dial(lambda c: c.group_size > 8), dial(lambda c: c.group_size == 8))
    clip = _verdict(dial(lambda c: not c.clip), dial(lambda c: c.clip))
    every = dial(lambda c: True)
    hits = sum(d["detected"] for d in every)
    allocation = (
        ("untested" if not every else ("supported" if hits else "not supported")),
        (f"{hits} of {len(every)} cells beyond noise"),
        (hits, len(every), 0, 0),
    )
    table = [
        (
            "G = 8 is where the gap is smallest",
            "divide − no_divide beyond noise on the hardest quartile at G = 32, not at G = 8",
            group,
        ),
        (
            "the gradient clip is a second normaliser",
            "divide − no_divide beyond noise without the clip, not with it",
            clip,
        ),
        (
            "Adam absorbs the scale σ against σ²",
            "under AdamW the arms take steps of the same length (within 10%) at the same rate",
            _adam_verdict(ablation_numbers(summary)),
        ),
        (
            "the allocation alone (σ against σ² per group, equal step length) matters",
            "divide − no_divide beyond noise on the hardest quartile in some cell",
            allocation,
        ),
    ]
    return [
        {"explanation": e, "predicts": p, "shows": shown, "verdict": v, "counts": counts}
        for e, p, (v, shown, counts) in table
    ]


def control_rows(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the step-size control per cell: SGD's rate per arm (the pilot's matched
    rates; AdamW's arms share the profile's), each arm's realised mean update norm over divide's,
    and the share of divide's and no_divide's steps whose gradient norm exceeds 1 (where the clip
    binds; in a cell without the clip, where it would have)."""
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
        cell, entry = _cell(key), summary["cells"][key]
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


def ablation_sentence(summary: dict[str, Any]) -> str:
    """The ablation's result in one sentence, from its detections (Markdown: the contrasts in code type)."""
    numbers = ablation_numbers(summary)
    found = [d for d in detections(summary) if d["detected"]]
    design = (
        f"in any of the {numbers['cells']} cells of the dial-only ablation ({numbers['seeds_min']}"
        + (f"–{numbers['seeds_max']}" if numbers["seeds_max"] != numbers["seeds_min"] else "")
        + " seeds an arm)"
    )
    design = design.replace("in any of the", "in the") if found else design
    if not found:
        return (
            "With the recipes made identical except the normaliser, neither dividing by σ nor DAPO's filter "
            f"changed the hardest quartile or held-out accuracy beyond noise {design}; the smallest differences "
            f"the seeds could detect on the hardest quartile were {numbers['mde_min']:.3f} to {numbers['mde_max']:.3f}."
        )
    listed = "; ".join(
        f"{CONTRAST_NAMES[d['contrast']]} on the {MEASURE_NAMES[d['measure']]} at {cell_phrase(d['cell'])} "
        f"({d['difference']:+.3f})"
        for d in found
    )
    return _code_arms(
        f"With the recipes made identical except the normaliser, {len(found)} of {numbers['comparisons']} "
        f"comparisons {design} exceed the noise: {listed}."
    )


def cell_words(key: str) -> str:
    """A cell's key in words: ``G8-sgd-noclip`` → "G = 8, SGD, no clip"."""
    cell = _cell(key)
    return f"G = {cell.group_size}, {_optimizer(cell)}, {'clip' if cell.clip else 'no clip'}"


def _counts(row: dict[str, Any]) -> tuple[int, int, int, int]:
    """(hits, cells, control hits, control cells) of an explanation row."""
    return tuple(row.get("counts") or (0, 0, 0, 0))


def cell_phrase(key: str) -> str:
    """A cell in running prose: ``G32-adamw-clip`` → "G = 32 under AdamW with the clip"."""
    cell = _cell(key)
    return f"G = {cell.group_size} under {_optimizer(cell)} {'with' if cell.clip else 'without'} the clip"


def _where(found: list[dict[str, Any]]) -> str:
    """The cells of ``found`` in running prose: "a", "a and b", "a, b and c"."""
    items = [cell_phrase(d["cell"]) for d in found]
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _gain_ratio(summary: dict[str, Any], key: str) -> float:
    """How many times as much the hardest quartile gains from its start under divide as under no_divide."""
    means, start = summary["means"][key], float(summary.get("start", 0.0))
    gain = means["no_divide"]["hardest_quartile"] - start
    return (means["divide"]["hardest_quartile"] - start) / gain if gain > 0 else float("nan")


def _reading_causes(rows: list[dict[str, Any]], numbers: dict[str, Any]) -> list[str]:
    """The reading's sentences on the group size, the clip and Adam (explanations 1 to 3)."""
    group, clip, adam = rows[:3]
    parts = []
    a, n, b, m = _counts(group)
    if group["verdict"] in ("supported", "partly supported"):
        parts.append(
            f"The division's effect is beyond noise more often at G = 32 ({a} of {n} cells) than at G = 8 ({b} of {m})."
        )
    elif group["verdict"] == "not supported":
        parts.append(
            f"A group of 32 does not make the division's effect show more often ({a} of {n} cells beyond noise, against {b} of {m} at G = 8)."
        )
    a, n, b, m = _counts(clip)
    if clip["verdict"] in ("supported", "partly supported"):
        parts.append(f"Without the clip it is beyond noise more often ({a} of {n} cells) than with it ({b} of {m}).")
    elif clip["verdict"] == "not supported":
        parts.append(
            f"Removing the clip does not make it show more often ({a} of {n} cells without the clip, {b} of {m} with it)."
        )
    low, high = numbers["adamw_norm_low"], numbers["adamw_norm_high"]
    if adam["verdict"] == "supported":
        parts.append(
            f"Under AdamW the arms take steps of the same length ({low:.2f} to {high:.2f} times `divide`'s), "
            "so there, as under SGD with steps matched at the start, the contrast measures the allocation alone."
        )
    elif adam["verdict"] == "not supported":
        parts.append(
            f"Under AdamW the arms' step lengths differ by more than a tenth ({low:.2f} to {high:.2f} times "
            "`divide`'s): Adam does not absorb the whole scale here."
        )
    return parts


def ablation_reading(summary: dict[str, Any]) -> str:
    """The chapter's reading of :func:`explanations` and :func:`pooled_contrasts`, in words, one
    sentence per explanation as its verdict has it (Markdown: arm names in code type)."""
    rows = explanations(summary)
    numbers = ablation_numbers(summary)
    found = detections(summary)
    parts = _reading_causes(rows, numbers)
    hard = _dial_hits(found)
    if rows[3]["verdict"] == "not supported":
        parts.append(
            "With step length equal, the allocation alone changes the hardest quartile by less than the seeds "
            f"can detect in every cell (below about {numbers['mde_max']:.2f})."
        )
    elif rows[3]["verdict"] == "supported":
        key = numbers["largest_dial_cell"]
        parts.append(
            f"With step length equal, the division still lifts the hardest quartile beyond noise at {_where(hard)}. "
            f"The largest difference is {numbers['largest_dial']:+.3f}, at {cell_phrase(key)}: there the hardest "
            f"quartile gains {_gain_ratio(summary, key):.1f} times as much from its start as without the division."
        )
    pooled = pooled_contrasts(summary).get("divide-no_divide/hardest_quartile")
    if pooled is not None and detected(pooled, summary["alpha"]):
        low_ci, high_ci = pooled["ci_family"]
        parts.append(
            "Pooled over the cells (an analysis added after the per-cell estimates were seen, so exploratory), "
            f"the division's difference is {pooled['difference']:+.3f} [{low_ci:+.3f}, {high_ci:+.3f}], positive "
            f"in {pooled['positive']} of {pooled['cells']} cells"
            + (": consistent across the cells, though below what any one cell can detect." if not hard else ".")
        )
    held = [d for d in found if d["measure"] == "heldout" and d["detected"]]
    if held:
        listed = "; ".join(f"{CONTRAST_NAMES[d['contrast']]} at {cell_phrase(d['cell'])}" for d in held)
        parts.append(f"On the held-out prompts, beyond noise: {listed}.")
    else:
        parts.append("On the held-out prompts no contrast is beyond noise in any cell.")
    return _code_arms(" ".join(parts))


def _code_arms(text: str) -> str:
    """The contrasts' names in code type (Markdown)."""
    return text.replace("divide − no_divide", "`divide` − `no_divide`").replace(
        "filter − divide", "`filter` − `divide`"
    )


def ablation_clause(summary: dict[str, Any]) -> str:
    """The ablation's result as a clause that can close another sentence (the chapter's bottom line)."""
    numbers = ablation_numbers(summary)
    found = detections(summary)
    hard = _dial_hits(found)
    held = [d for d in found if d["detected"] and d["measure"] == "heldout"]
    held_words = (
        "and leaves held-out accuracy unchanged in every cell"
        if not held
        else f"and changes held-out accuracy beyond noise in {len(held)} comparisons"
    )
    if not hard:
        return (
            "and with the recipes identical except the normaliser, the division by σ changes the hardest quartile "
            f"by less than the seeds can detect in every one of the {numbers['cells']} cells of the ablation "
            f"(smallest detectable differences {numbers['mde_min']:.2f} to {numbers['mde_max']:.2f}) {held_words}"
        )
    pooled = pooled_contrasts(summary)["divide-no_divide/hardest_quartile"]
    return (
        "but with the recipes identical except the normaliser, dividing by σ lifts the hardest quartile a little "
        f"in {pooled['positive']} of {pooled['cells']} cells (by {pooled['difference']:+.3f} pooled, beyond noise in "
        f"{len(hard)} of them, the most by {numbers['largest_dial']:+.3f} at {cell_phrase(numbers['largest_dial_cell'])}) "
        + held_words
    )


def pooled_contrasts(summary: dict[str, Any], level: float = 0.05) -> dict[str, dict[str, Any]]:
    """Each contrast on each measure pooled over the cells: an exploratory analysis, added after the
    per-cell estimates were seen, and counted as a family of its own (Bonferroni over its
    comparisons, ``len(CONTRASTS) × len(MEASURES)``).

    Per ``"<contrast>/<measure>"``: the inverse-variance weighted mean of the cells' differences
    (weights 1/se², se² = s_a²/n_a + s_b²/n_b, the fixed-effect estimate: it assumes one common
    difference), its ``ci_family`` (normal, level 1 − ``level``/m), ``p_bonferroni`` (two-sided, × m),
    the ``positive`` count of cells with a difference above 0 out of ``cells``, and the two-sided
    sign test's p of that count (the cells as independent replications, under no difference
    either sign is equally likely)."""
    from scipy import stats

    _check(summary)
    m = len(CONTRASTS) * len(MEASURES)
    out = {}
    for a, b in CONTRASTS:
        for measure in MEASURES:
            diffs, variances = [], []
            for key in cell_order(summary):
                arms = summary["values"][key]
                if a not in arms or b not in arms:
                    continue
                x, y = np.asarray(arms[a][measure], float), np.asarray(arms[b][measure], float)
                if min(x.size, y.size) < 2:
                    continue
                diffs.append(x.mean() - y.mean())
                variances.append(x.var(ddof=1) / x.size + y.var(ddof=1) / y.size)
            if not diffs:
                continue
            d, v = np.array(diffs), np.array(variances)
            weights = 1 / np.maximum(v, 1e-300)
            mean = float(np.sum(weights * d) / np.sum(weights))
            se = float(np.sqrt(1 / np.sum(weights)))
            z = stats.norm.ppf(1 - level / (2 * m))
            p = float(2 * stats.norm.sf(abs(mean) / se)) if se > 0 else float("nan")
            positive = int(np.sum(d > 0))
            out[f"{a}-{b}/{measure}"] = {
                "difference": mean,
                "se": se,
                "ci_family": [mean - z * se, mean + z * se],
                "p_bonferroni": min(1.0, p * m),
                "positive": positive,
                "cells": int(d.size),
                "sign_p": float(stats.binomtest(positive, d.size, 0.5).pvalue),
                "comparisons": m,
            }
    return out


def pooled_rows(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of :func:`pooled_contrasts`: each contrast and measure, the pooled difference
    with its family-wise interval (a * where it is beyond noise), the Bonferroni p, and the cells
    with a positive difference with the sign test's p."""
    header = [
        "contrast",
        "measure",
        "pooled difference [family-wise interval]",
        "Bonferroni p",
        "cells > 0 (sign test p)",
    ]
    rows = []
    for name, result in pooled_contrasts(summary).items():
        contrast, measure = name.split("/")
        low, high = result["ci_family"]
        mark = " *" if detected(result, summary["alpha"]) else ""
        rows.append(
            [
                CONTRAST_NAMES[contrast],
                MEASURE_NAMES[measure],
                f"{result['difference']:+.4f} [{low:+.4f}, {high:+.4f}]{mark}",
                f"{result['p_bonferroni']:.3g}",
                f"{result['positive']} of {result['cells']} ({result['sign_p']:.3g})",
            ]
        )
    return header, rows
