"""Chapter 13's reading of the dial-only ablation: numbers, tables, verdicts and the figure, on a
hand-made study whose answers are worked by hand; and the shipped study recomputed from the
recorded runs."""

from __future__ import annotations

import copy
import functools
import gzip
import json
import math

import numpy as np
import pytest
from scipy import stats
from test_ablation import START, _hard, _log

from stddial_book.core.resources import data_path
from stddial_book.experiments.ablation import pooled as ap
from stddial_book.experiments.ablation import report as ar
from stddial_book.experiments.ablation import study as ab
from stddial_book.experiments.ablation import words as aw

DIVIDE = (0.5, 0.625, 0.75, 0.625)  # mean 0.625
LOW = (0.125, 0.25, 0.125, 0.25)  # mean 0.1875


def _study() -> dict:
    """A fresh copy of :func:`_base_study` (the tests change their copies)."""
    return copy.deepcopy(_base_study())


@functools.cache
def _base_study() -> dict:
    """Two AdamW cells with the clip, divide and no_divide only (m = 2 cells × 1 contrast × 2
    measures = 4). At G = 32 no_divide ends far lower (0.4375 below: Welch t = 7, p × 4 < 0.05, and
    every resample keeps the difference ≥ 0.25); at G = 8 the arms end alike. Held-out is equal
    everywhere. no_divide's update norms are 1.05 × divide's; gradient norms 0.5 and 2.0."""
    runs = {}
    for seed, (high, low) in enumerate(zip(DIVIDE, LOW)):
        runs[f"divide-G32-adamw-clip-seed{seed}"] = _log(START, _hard(high), 0.3)
        runs[f"no_divide-G32-adamw-clip-seed{seed}"] = _log(START, _hard(low), 0.3, norm=1.05)
        runs[f"divide-G8-adamw-clip-seed{seed}"] = _log(START, _hard(high), 0.3)
        runs[f"no_divide-G8-adamw-clip-seed{seed}"] = _log(START, _hard(high), 0.3, norm=1.05)
    return ab.ablation_summary(runs, draws=4000)


def test_detected_needs_both_the_interval_and_the_adjusted_p() -> None:
    assert ar.detected({"ci_family": [0.1, 0.3], "p_bonferroni": 0.01}, 0.05)
    assert not ar.detected({"ci_family": [-0.1, 0.3], "p_bonferroni": 0.01}, 0.05)  # interval spans 0
    assert not ar.detected({"ci_family": [0.1, 0.3], "p_bonferroni": 0.2}, 0.05)  # p too large
    assert not ar.detected({"ci_family": None, "p_bonferroni": float("nan")}, 0.05)  # one seed


def test_numbers_of_a_hand_made_study() -> None:
    numbers = ar.ablation_numbers(_study())
    assert numbers["runs"] == 16 and numbers["seeds_min"] == numbers["seeds_max"] == 4
    assert numbers["cells"] == 2 and numbers["comparisons"] == 4
    assert numbers["detected"] == numbers["detected_dial"] == 1 and numbers["detected_filter"] == 0
    assert numbers["largest_dial"] == pytest.approx(0.4375) and numbers["largest_dial_cell"] == "G32-adamw-clip"
    assert numbers["adamw_norm_low"] == pytest.approx(1.05) == numbers["adamw_norm_high"]
    assert numbers["clip_binds_divide"] == pytest.approx(0.5) == numbers["clip_binds_no_divide"]
    assert numbers["start"] == 0.0 and numbers["hardest_prompts"] == 2
    assert 0 < numbers["mde_min"] <= numbers["mde_max"]  # G = 8's arms are the same: its SD is G = 32's over √2


def test_contrast_table_of_a_hand_made_study() -> None:
    header, rows = ar.contrast_rows(_study())
    # the contrasts a reader comes for right after the cell, the arms' means after them
    assert header == ["G", "optimizer", "clip", "divide − no_divide", "filter − divide", "seeds", *ar.ARMS]
    assert [r[0] for r in rows] == ["8", "32"]  # the design's order
    g8, g32 = rows
    assert g32[6:8] == ["0.625", "0.188"] and g32[8] == "–"  # no filter arm recorded
    assert g32[3].startswith("+0.438 [") and g32[3].endswith("*") and g32[4] == "–"
    assert g8[3].startswith("+0.000") and not g8[3].endswith("*")
    with pytest.raises(ValueError, match="measure must be one of"):
        ar.contrast_rows(_study(), "accuracy")


def test_explanations_follow_the_contrasts() -> None:
    """G = 32's division effect 0.4375 (se² 1/256) against G = 8's 0 (se² 1/192): difference 0.4375,
    se sqrt(7/768), z = 4.58, far beyond noise under AdamW, the only optimizer recorded."""
    verdicts = {e["explanation"]: e for e in ar.explanations(_study())}
    assert verdicts["G = 8 is where the gap is smallest"]["verdict"] == "supported"
    test = verdicts["G = 8 is where the gap is smallest"]["tests"]["adamw"]
    assert test["difference"] == pytest.approx(0.4375) and test["z"] == pytest.approx(0.4375 / math.sqrt(7 / 768))
    assert verdicts["G = 8 is where the gap is smallest"]["shows"].startswith("G = 32 − G = 8 effect: AdamW +0.438")
    assert verdicts["the gradient clip is a second normaliser"]["verdict"] == "untested"  # no cell without it
    assert verdicts["Adam absorbs the scale σ against σ²"]["verdict"] == "supported"  # 1.05 is within 10%
    allocation = verdicts["the allocation alone (σ against σ² per group, equal step length) matters"]
    assert allocation["verdict"] == "supported"  # no_divide's steps are 1.05 × divide's: equal within 10%
    assert allocation["shows"] == "1 of 2 cells beyond noise, 1 of them with steps of equal length (within 10%)"


def test_an_effect_at_g8_only_does_not_support_the_group_size_explanation() -> None:
    study = _study()
    g8, g32 = study["values"]["G8-adamw-clip"], study["values"]["G32-adamw-clip"]
    g8["no_divide"], g32["no_divide"] = g32["no_divide"], g8["no_divide"]  # the effect moves to G = 8
    verdicts = {e["explanation"]: e for e in ar.explanations(study)}
    assert verdicts["G = 8 is where the gap is smallest"]["verdict"] == "not supported"
    test = verdicts["G = 8 is where the gap is smallest"]["tests"]["adamw"]
    assert test["z"] < 0
    # the non-detection carries the size it could miss: (z at 0.05/2 + z at 80% power) × se, one test here
    reach = (stats.norm.isf(0.05 / 2) + stats.norm.ppf(0.8)) * test["se"]
    assert test["mde"] == pytest.approx(reach)
    words = verdicts["G = 8 is where the gap is smallest"]["verdict_words"]
    assert words == f"not supported; a difference of effects up to ±{reach:.3f} could go undetected"


def test_the_figure_has_a_row_per_cell_and_a_panel_per_measure() -> None:
    import matplotlib.pyplot as plt

    from stddial_book.presentation.ablation_figure import ablation_figure

    fig = ablation_figure(_study())
    left, right = fig.axes[:2]
    assert [t.get_text() for t in left.get_yticklabels()] == [
        "pooled, all: random effects\n(exploratory)",
        "pooled, AdamW\n(exploratory)",
        "G = 32, AdamW, clip",
        "G = 8, AdamW, clip",
    ]
    assert "hardest quartile" in left.get_title() and "held-out" in right.get_title()
    filled = [line for line in left.lines if line.get_marker() == "o" and line.get_markerfacecolor() != "white"]
    assert len(filled) == 2  # G = 32's division, and the division pooled within AdamW (random effects: too wide)
    plt.close(fig)


def test_a_summary_that_is_not_a_study_is_refused() -> None:
    with pytest.raises(ValueError, match="ablation_study"):
        ar.ablation_numbers({"cells": {}})


def _close(shipped, fresh, path="") -> None:
    """Equal to a relative 1e-6 (another scipy rounds a Student-t interval end differently: 3e-9 relative between
    scipy 1.11 and 1.17), leaving out the bootstrap intervals (their draws depend on scipy's and numpy's
    versions); the Student-t intervals, which decide, are compared."""
    if isinstance(shipped, dict):
        keys = {k for k in shipped if k not in ("boot95", "boot_family")}
        assert keys == {k for k in fresh if k not in ("boot95", "boot_family")}, path
        for key in keys:
            _close(shipped[key], fresh[key], f"{path}/{key}")
    elif isinstance(shipped, list):
        assert len(shipped) == len(fresh), path
        for i, (a, b) in enumerate(zip(shipped, fresh)):
            _close(a, b, f"{path}[{i}]")
    elif isinstance(shipped, float) and math.isnan(shipped):
        assert isinstance(fresh, float) and math.isnan(fresh), path
    elif isinstance(shipped, (int, float)) and not isinstance(shipped, bool):
        assert fresh == pytest.approx(shipped, rel=1e-6, abs=1e-12), path
    else:
        assert shipped == fresh, path


def test_the_shipped_study_is_the_recorded_runs_study() -> None:
    """The wheel ships the study; the runs stay in the repository (data/runs/ablation), where this
    recomputes it, power analysis included, from the logs."""
    from stddial_book.rl.runlog import load_run, recorded_runs

    runs = data_path(*ar.RUNS_FOLDER)
    if not runs.is_dir():
        pytest.skip("the recorded ablation runs are in the repository only, not in an installed wheel")
    shipped = ar.load_ablation_summary()
    assert shipped is not None, "data/ablation/ablation.json.gz is missing: run tools/ship_ablation.py --out NEW"
    fresh = ab.ablation_study(runs)
    reference = {k: [load_run(p)[1] for p in v] for k, v in recorded_runs("reference").items()}
    fresh["power"] = ab.power_analysis(reference, samples=ab.RUN_SAMPLES)
    _close(shipped, json.loads(json.dumps(fresh)))
    assert gzip.decompress(data_path(*ar.ABLATION_SUMMARY_FILE).read_bytes()).startswith(b"{")
    assert np.all([c in shipped["cells"] for c in ar.cell_order(shipped)])


def test_the_sentence_and_the_reading_follow_the_verdicts() -> None:
    study = _study()
    sentence = aw.ablation_sentence(study)
    assert sentence.startswith(
        "With the recipes made identical except the normaliser, 1 of 4 comparisons in the 2 cells"
    )
    low, high = study["cells"]["G32-adamw-clip"]["divide-no_divide"]["hardest_quartile"]["ci_family"]
    assert (
        f"`divide` − `no_divide` on the hardest quartile at G = 32 under AdamW with the clip (+0.438 [{low:+.3f}, "
        f"{high:+.3f}])" in sentence
    )
    parts = aw.ablation_reading_parts(study)
    assert parts["causes"].startswith("The division's effect on the hardest quartile, pooled at G = 32 and at G = 8")
    assert "larger beyond noise under every optimizer" in parts["causes"]
    assert "without the clip" not in parts["causes"]  # the clip's explanation is untested: every cell clips
    assert "1.05 to 1.05 times `divide`'s" in parts["causes"]
    assert parts["allocation"].startswith(
        "With steps of equal length the division lifts the hardest quartile beyond noise at G = 32 under AdamW"
    )
    assert (
        "the other three quartiles move by +0.000 (Welch p 1)" in parts["allocation"]
    )  # the hand-made logs leave them alone
    assert parts["heldout"].startswith("On the held-out prompts no contrast is beyond noise in any cell")
    assert "All 2 lie inside ±0.04" in parts["heldout"]  # every held-out difference is exactly 0
    assert aw.ablation_reading(study).startswith(parts["causes"])
    clause = aw.ablation_clause(study)
    assert clause.startswith(
        "but with the recipes identical except the normaliser, dividing by σ lifts the hardest quartile beyond noise "
        "in 1 of 2 cells (1 of them with steps of equal length"
    )
    assert "pooled within optimizer, exploratory: +0.250 [" in clause
    assert clause.endswith("and changes held-out accuracy by less than 0.04 in every cell (an equivalence test)")
    g8, g32 = study["cells"]["G8-adamw-clip"], study["cells"]["G32-adamw-clip"]
    g32["divide-no_divide"] = g8["divide-no_divide"]  # no effect anywhere
    assert aw.ablation_sentence(study).startswith(
        "With the recipes made identical except the normaliser, neither dividing by σ nor DAPO's filter changed"
    )
    null = aw.ablation_reading_parts(study)
    assert "less than the seeds can detect in every cell" in null["allocation"]
    assert aw.ablation_clause(study).startswith("and with the recipes identical except the normaliser, the division")


def test_a_detection_with_unequal_steps_is_not_clean_evidence() -> None:
    """no_divide's steps at 0.8 of divide's: the detection cannot separate the division from step length."""
    study = _study()
    study["cells"]["G32-adamw-clip"]["norm_ratio"]["no_divide"] = 0.8
    row = {e["explanation"]: e for e in ar.explanations(study)}[
        "the allocation alone (σ against σ² per group, equal step length) matters"
    ]
    assert row["verdict"] == "not supported" and row["tests"]["clean"] == [] and len(row["tests"]["hits"]) == 1
    reading = aw.ablation_reading_parts(study)["allocation"]
    assert "`no_divide`'s steps are 0.80 of `divide`'s" in reading
    assert reading.endswith("that detection does not separate the division from step length.")
    assert "none of them with steps of equal length" in aw.ablation_clause(study)


def test_equal_effects_at_both_group_sizes_do_not_support_the_group_size_explanation() -> None:
    study = _study()
    study["values"]["G8-adamw-clip"] = copy.deepcopy(study["values"]["G32-adamw-clip"])  # the same effect at 8
    row = {e["explanation"]: e for e in ar.explanations(study)}["G = 8 is where the gap is smallest"]
    assert row["tests"]["adamw"]["difference"] == pytest.approx(0.0, abs=1e-12)
    assert row["verdict"] == "not supported"


def test_cells_in_words() -> None:
    assert ar.cell_words("G8-sgd-noclip") == "G = 8, SGD, no clip"
    assert ar.cell_phrase("G32-adamw-clip") == "G = 32 under AdamW with the clip"


def test_inverse_variance_by_hand() -> None:
    """G = 32: difference 0.4375, se² = 1/256; G = 8: 0, se² = 1/192. Fixed effect: weights 256 and 192,
    mean 256 · 0.4375 / 448 = 0.25, se √(1/448). Q = 256 · 0.1875² + 192 · 0.25² = 9 + 12 = 21 on 1 df,
    I² = 20/21; τ² = 20 / (448 − (256² + 192²)/448) = 8960/98304; random-effects weights
    1/(1/256 + τ²) = 10.5205 and 1/(1/192 + τ²) = 10.3784: mean 0.4375 · 10.5205 / 20.8989 = 0.2202."""
    from scipy import stats

    out = ap.inverse_variance([0.4375, 0.0], [1 / 256, 1 / 192])
    assert out["difference"] == pytest.approx(0.25) and out["se"] == pytest.approx(math.sqrt(1 / 448))
    assert out["q"] == pytest.approx(21) and out["q_df"] == 1 and out["i2"] == pytest.approx(20 / 21)
    assert out["q_p"] == pytest.approx(stats.chi2.sf(21, 1))
    assert out["tau2"] == pytest.approx(8960 / 98304)
    assert out["random_difference"] == pytest.approx(0.2202, abs=1e-4)
    assert out["weights"] == pytest.approx([256 / 448, 192 / 448])
    one = ap.inverse_variance([0.1, 0.1, 0.1], [1.0, 2.0, 4.0])  # identical cells: no heterogeneity
    assert one["q"] == pytest.approx(0) and one["i2"] == 0 and one["tau2"] == 0
    with pytest.raises(ValueError, match="positive squared standard error"):
        ap.inverse_variance([0.1], [0.0])


def test_pooled_contrasts_by_hand() -> None:
    """Within AdamW (both cells) the fixed effect, 0.25 ± √(1/448); over all cells the random-effects
    mean, 0.2202; held-out is the same in every seed (no noise to weight by), so m = 2 comparisons,
    normal family-wise intervals."""
    from scipy import stats

    pooled = ap.pooled_contrasts(_study())
    assert set(pooled) == {f"divide-no_divide/hardest_quartile/{group}" for group in ("adamw", "all")}
    dial = pooled["divide-no_divide/hardest_quartile/adamw"]
    z = stats.norm.ppf(1 - 0.05 / 4)
    assert dial["estimate"] == pytest.approx(0.25) and dial["comparisons"] == 2
    assert dial["ci_family"] == pytest.approx([0.25 - z * math.sqrt(1 / 448), 0.25 + z * math.sqrt(1 / 448)])
    assert dial["p_bonferroni"] == pytest.approx(2 * 2 * stats.norm.sf(0.25 * math.sqrt(448)))
    assert (dial["positive"], dial["cells"], dial["sign_p"]) == (1, 2, 1.0)
    every = pooled["divide-no_divide/hardest_quartile/all"]
    assert every["estimate"] == pytest.approx(0.2202, abs=1e-4) and every["i2"] == pytest.approx(20 / 21)
    header, rows = ap.pooled_rows(_study())
    assert rows[0][:3] == ["divide − no_divide", "hardest quartile", "AdamW cells"] and rows[0][3].endswith("*")
    assert rows[0][4] == "1 of 2 (1)" and rows[0][5] == "21.0 on 1 df (5e-06), 95%"
    assert "Pooled within each optimizer (exploratory" in aw.ablation_reading(_study())


def test_effect_differences_by_hand() -> None:
    """AdamW, G = 32 − G = 8: 0.4375 − 0 over √(1/256 + 1/192); one test, so Bonferroni × 1."""
    from scipy import stats

    tests = ap.effect_differences(_study())
    assert set(tests) == {"group_size/adamw"}  # no SGD cell, no cell without the clip
    t = tests["group_size/adamw"]
    z = 0.4375 / math.sqrt(1 / 256 + 1 / 192)
    assert t["z"] == pytest.approx(z) and t["p_bonferroni"] == pytest.approx(2 * stats.norm.sf(z))


def test_the_numbers_say_the_intervals_and_the_held_out_margin() -> None:
    study = _study()
    numbers = ar.ablation_numbers(study)
    result = study["cells"]["G32-adamw-clip"]["divide-no_divide"]["hardest_quartile"]
    assert [numbers["largest_dial_low"], numbers["largest_dial_high"]] == result["ci_family"]
    assert numbers["heldout_low"] == numbers["heldout_high"] == 0.0  # held-out equal everywhere
    assert numbers["heldout_margin"] == 0.04 and numbers["heldout_within"] == numbers["heldout_comparisons"] == 2
    study["power"] = {"mde": 0.001}  # a margin below... nothing: 0 lies inside any margin
    assert ar.ablation_numbers(study)["heldout_within"] == 2
    assert numbers["divide_updates"] == 2 and math.isnan(numbers["filter_updates_8_low"])  # no filter arm
