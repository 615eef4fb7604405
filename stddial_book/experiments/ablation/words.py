"""Chapter 13's dial-only ablation in words: the result sentence, the reading of the verdicts, the
pooled cells and the controls, and the bottom line's clause, each built from the numbers of
:mod:`stddial_book.experiments.ablation.report` and :mod:`stddial_book.experiments.ablation.pooled`
so that the words follow the data (Markdown: arm names in code type)."""

from __future__ import annotations

from typing import Any

import numpy as np

from stddial_book.experiments.ablation.pooled import CONTRAST_NAMES, MEASURE_NAMES, pooled_contrasts
from stddial_book.experiments.ablation.report import (
    ablation_numbers,
    cell_of,
    cell_phrase,
    detections,
    dial_hits,
    explanations,
    other_quartiles,
)

__all__ = [
    "ablation_sentence",
    "ablation_reading",
    "ablation_reading_parts",
    "ablation_clause",
]


def ablation_sentence(summary: dict[str, Any]) -> str:
    """The ablation's result in one sentence, from its detections, each with its family-wise interval
    (Markdown: the contrasts in code type). ``summary`` is the study
    (:func:`~stddial_book.experiments.ablation.report.load_ablation_summary`)."""
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
        f"({_with_interval(d)})"
        for d in found
    )
    return _code_arms(
        f"With the recipes made identical except the normaliser, {len(found)} of {numbers['comparisons']} "
        f"comparisons {design} exceed the noise: {listed}."
    )


def _with_interval(d: dict[str, Any], digits: int = 3) -> str:
    """A contrast's difference and its family-wise interval: "+0.027 [+0.006, +0.048]"."""
    low, high = d["ci_family"]
    return f"{d['difference']:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def _listed(items: list[str]) -> str:
    """Items in running prose: "a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _reading_causes(rows: list[dict[str, Any]], numbers: dict[str, Any]) -> list[str]:
    """The reading's sentences on the group size, the clip and Adam (explanations 1 to 3)."""
    parts = []
    for row, where, elsewhere in ((rows[0], "at G = 32", "at G = 8"), (rows[1], "without the clip", "with it")):
        if row["verdict"] == "untested":
            continue
        effects = "; ".join(
            f"under {'AdamW' if opt == 'adamw' else 'SGD'} {t['predicted']:+.3f} {where} against {t['other']:+.3f} "
            f"{elsewhere} (difference {t['difference']:+.3f}, z = {t['z']:.2f}, Bonferroni p {t['p_bonferroni']:.2g})"
            for opt, t in row["tests"].items()
        )
        if row["verdict"] == "not supported":
            reach = max(t["mde"] for t in row["tests"].values())
            verdict = (
                "no difference of effects is beyond noise, which rules out only differences of effects larger than "
                f"about ±{reach:.3f} (what these tests detect four times in five)"
            )
        elif row["verdict"] == "supported":
            verdict = "larger beyond noise under every optimizer"
        else:
            verdict = "larger beyond noise under one optimizer only"
        parts.append(
            f"The division's effect on the hardest quartile, pooled {where} and {elsewhere} (exploratory: the "
            f"difference of the two tested directly, z on the pooled cells): {effects}; {verdict}."
        )
    low, high = numbers["adamw_norm_low"], numbers["adamw_norm_high"]
    sgd = f"{numbers['sgd_norm_low']:.2f} to {numbers['sgd_norm_high']:.2f}"
    if rows[2]["verdict"] == "supported":
        parts.append(
            f"Under AdamW the arms take steps of the same length ({low:.2f} to {high:.2f} times `divide`'s), so there "
            "the contrast measures the allocation alone; under SGD the steps were matched at the start only, and "
            f"`no_divide`'s end {sgd} times `divide`'s, so there the contrast also measures step length."
        )
    elif rows[2]["verdict"] == "not supported":
        parts.append(
            f"Under AdamW the arms' step lengths differ by more than a tenth ({low:.2f} to {high:.2f} times "
            "`divide`'s): Adam does not absorb the whole scale here."
        )
    return parts


def _reading_allocation(summary: dict[str, Any], row: dict[str, Any], numbers: dict[str, Any]) -> list[str]:
    """The reading's sentences on explanation 4: which detections are clean (equal steps, the other
    quartiles left alone) and which do not separate the division from step length."""
    if row["verdict"] == "not supported" and not row["tests"]["hits"]:
        return [
            "The allocation alone changes the hardest quartile by less than the seeds can detect in every cell "
            f"(below about {numbers['mde_max']:.2f})."
        ]
    parts = []
    clean, hits = row["tests"]["clean"], row["tests"]["hits"]

    def others(d: dict[str, Any]) -> tuple[str, str] | None:
        o = other_quartiles(summary, d["cell"])
        return None if o is None else (f"{o['difference']:+.3f}", f"{o['p']:.2g}")

    if clean:
        where = _listed([f"{cell_phrase(d['cell'])} ({_with_interval(d)})" for d in clean])
        moved = [others(d) for d in clean if others(d)]
        parts.append(
            f"With steps of equal length the division lifts the hardest quartile beyond noise at {where}"
            + (
                f", while the other three quartiles move by {_listed([m[0] for m in moved])} (Welch p "
                f"{_listed([m[1] for m in moved])})"
                if moved
                else ""
            )
            + ": the clean evidence that the allocation matters."
        )
    for d in (d for d in hits if d not in clean):
        ratio = summary["cells"][d["cell"]]["norm_ratio"]["no_divide"]
        moved = others(d)
        parts.append(
            f"At {cell_phrase(d['cell'])} ({_with_interval(d)}) `no_divide`'s steps are {ratio:.2f} of `divide`'s"
            + (
                f" and the division also moves the other three quartiles by {moved[0]} (Welch p {moved[1]})"
                if moved
                else ""
            )
            + ", as a longer step would: that detection does not separate the division from step length."
        )
    return parts


def _reading_pooled(summary: dict[str, Any]) -> list[str]:
    """The reading's sentences on the cells taken together (exploratory)."""
    pooled = pooled_contrasts(summary)
    key = "divide-no_divide/hardest_quartile"
    within = [
        (name, pooled[f"{key}/{group}"])
        for group, name in (("adamw", "AdamW"), ("sgd", "SGD"))
        if f"{key}/{group}" in pooled
    ]
    every = pooled.get(f"{key}/all")
    if not within or every is None:
        return []
    listed = _listed([f"{_pooled_interval(p)} under {name}" for name, p in within])
    text = (
        "Pooled within each optimizer (exploratory: added after the per-cell estimates were seen), the division's "
        f"difference on the hardest quartile is {listed}."
    )
    if every["cells"] > 1:
        text += (
            f" Over all {every['cells']} cells the differences disagree more than their noise allows (Cochran's Q = "
            f"{every['q']:.1f} on {every['q_df']} degrees of freedom, p = {every['q_p']:.1g}, I² = {every['i2']:.0%}), "
            "so no single number is the division's effect; a random-effects mean, which allows for that, is "
            f"{_pooled_interval(every)}."
        )
    return [text]


def _pooled_interval(p: dict[str, Any]) -> str:
    low, high = p["ci_family"]
    return f"{p['estimate']:+.3f} [{low:+.3f}, {high:+.3f}]"


def _reading_filter(summary: dict[str, Any], numbers: dict[str, Any]) -> list[str]:
    """The reading's sentences on DAPO's filter: its contrast by group size, and the steps it makes."""
    found = [d for d in detections(summary) if d["contrast"] == "filter-divide" and d["measure"] == "hardest_quartile"]
    by_g = {g: [d["difference"] for d in found if cell_of(d["cell"]).group_size == g] for g in (8, 32)}
    if not by_g[8] or not by_g[32] or not np.isfinite(numbers["filter_updates_8_low"]):
        return []
    hits = [cell_phrase(d["cell"]) for d in found if d["detected"]]
    return [
        f"`filter` − `divide` on the hardest quartile runs from {min(by_g[8]):+.3f} to {max(by_g[8]):+.3f} at G = 8"
        + (f" (beyond noise at {_listed(hits)})" if hits else "")
        + f" and from {min(by_g[32]):+.3f} to {max(by_g[32]):+.3f} at G = 32. For the same samples the filter makes "
        f"{numbers['filter_updates_8_low']:.0f} to {numbers['filter_updates_8_high']:.0f} optimizer steps at G = 8, "
        f"where many groups are silent and discarded, and {numbers['filter_updates_32_low']:.0f} to "
        f"{numbers['filter_updates_32_high']:.0f} at G = 32, against `divide`'s {numbers['divide_updates']:.0f}: "
        "dropping the silent groups costs steps, and the filter's loss is largest where it drops the most "
        "(a reading of the pattern, not a test)."
    ]


def _reading_heldout(summary: dict[str, Any], numbers: dict[str, Any]) -> list[str]:
    """The reading's sentences on the held-out control: detections, or intervals and equivalence."""
    held = [d for d in detections(summary) if d["measure"] == "heldout" and d["detected"]]
    if held:
        listed = "; ".join(f"{CONTRAST_NAMES[d['contrast']]} at {cell_phrase(d['cell'])}" for d in held)
        return [f"On the held-out prompts, beyond noise: {listed}."]
    margin, within, total = numbers["heldout_margin"], numbers["heldout_within"], numbers["heldout_comparisons"]
    text = (
        "On the held-out prompts no contrast is beyond noise in any cell, which is not the same as no change: the "
        f"family-wise intervals run from {numbers['heldout_low']:+.3f} to {numbers['heldout_high']:+.3f}"
    )
    if within == total:
        return [
            text + f". All {total} lie inside ±{margin:.2f}, the difference the design was sized to detect, so by "
            f"an equivalence test at that margin (two one-sided tests at the family-wise level) held-out accuracy "
            f"changes by less than {margin:.2f} in every cell."
        ]
    return [text + f"; {within} of {total} lie inside ±{margin:.2f}, the difference the design was sized to detect."]


def ablation_reading_parts(summary: dict[str, Any]) -> dict[str, str]:
    """The chapter's reading, one paragraph per topic (Markdown; empty where there is nothing to
    say): ``causes`` (explanations 1 to 3: the group size, the clip, the step length), ``allocation``
    (explanation 4: which detections are clean), ``pooled`` (the cells together, exploratory),
    ``filter`` (DAPO's filter and the steps it makes) and ``heldout`` (the transfer control).
    ``summary`` is the study (:func:`~stddial_book.experiments.ablation.report.load_ablation_summary`)."""
    rows = explanations(summary)
    numbers = ablation_numbers(summary)
    parts = {
        "causes": _reading_causes(rows, numbers),
        "allocation": _reading_allocation(summary, rows[3], numbers),
        "pooled": _reading_pooled(summary),
        "filter": _reading_filter(summary, numbers),
        "heldout": _reading_heldout(summary, numbers),
    }
    return {key: _code_arms(" ".join(text)) for key, text in parts.items()}


def ablation_reading(summary: dict[str, Any]) -> str:
    """The chapter's reading of :func:`~stddial_book.experiments.ablation.report.explanations`, the
    pooled cells and the controls, in words (:func:`ablation_reading_parts`, joined). ``summary`` is the
    study (:func:`~stddial_book.experiments.ablation.report.load_ablation_summary`)."""
    return " ".join(part for part in ablation_reading_parts(summary).values() if part)


def _code_arms(text: str) -> str:
    """The contrasts' names in code type (Markdown)."""
    return text.replace("divide − no_divide", "`divide` − `no_divide`").replace(
        "filter − divide", "`filter` − `divide`"
    )


def ablation_clause(summary: dict[str, Any]) -> str:
    """The ablation's result as a clause that can close another sentence (the chapter's bottom line);
    the pooled numbers in it are labelled exploratory. ``summary`` is the study
    (:func:`~stddial_book.experiments.ablation.report.load_ablation_summary`)."""
    numbers = ablation_numbers(summary)
    found = detections(summary)
    rows = explanations(summary)
    hard = dial_hits(found)
    held = [d for d in found if d["detected"] and d["measure"] == "heldout"]
    margin = numbers["heldout_margin"]
    if held:
        held_words = f"and changes held-out accuracy beyond noise in {len(held)} comparisons"
    elif numbers["heldout_within"] == numbers["heldout_comparisons"]:
        held_words = f"and changes held-out accuracy by less than {margin:.2f} in every cell (an equivalence test)"
    else:
        held_words = "and changes held-out accuracy by less than the seeds can detect in every cell"
    if not hard:
        return (
            "and with the recipes identical except the normaliser, the division by σ changes the hardest quartile "
            f"by less than the seeds can detect in every one of the {numbers['cells']} cells of the ablation "
            f"(smallest detectable differences {numbers['mde_min']:.2f} to {numbers['mde_max']:.2f}) {held_words}"
        )
    clean = rows[3]["tests"]["clean"]
    biggest = max(hard, key=lambda d: abs(d["difference"]))
    pooled = pooled_contrasts(summary)
    key = "divide-no_divide/hardest_quartile"
    within = "; ".join(
        f"{_pooled_interval(pooled[f'{key}/{g}'])} under {name}"
        for g, name in (("adamw", "AdamW"), ("sgd", "SGD"))
        if f"{key}/{g}" in pooled
    )
    clean_words = (
        f"{len(clean)} of them with steps of equal length, where it measures the allocation alone"
        if clean
        else "none of them with steps of equal length"
    )
    return (
        "but with the recipes identical except the normaliser, dividing by σ lifts the hardest quartile beyond noise "
        f"in {len(hard)} of {numbers['cells']} cells ({clean_words}; the largest {_with_interval(biggest)} at "
        f"{cell_phrase(biggest['cell'])}; pooled within optimizer, exploratory: {within}) " + held_words
    )
