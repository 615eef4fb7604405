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
from test_ablation import START, _hard, _log

from stddial_book.core.resources import data_path
from stddial_book.experiments import ablation as ab
from stddial_book.experiments import ablation_report as ar

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
    assert header[:4] == ["G", "optimizer", "clip", "seeds"] and header[-2:] == [
        "divide − no_divide",
        "filter − divide",
    ]
    assert [r[0] for r in rows] == ["8", "32"]  # the design's order
    g8, g32 = rows
    assert g32[4:6] == ["0.625", "0.188"] and g32[6] == "–"  # no filter arm recorded
    assert g32[7].startswith("+0.438 [") and g32[7].endswith("*") and g32[8] == "–"
    assert g8[7].startswith("+0.000") and not g8[7].endswith("*")
    with pytest.raises(ValueError, match="measure must be one of"):
        ar.contrast_rows(_study(), "accuracy")


def test_explanations_follow_the_contrasts() -> None:
    verdicts = {e["explanation"]: e for e in ar.explanations(_study())}
    assert verdicts["G = 8 is where the gap is smallest"]["verdict"] == "supported"
    assert verdicts["G = 8 is where the gap is smallest"]["shows"].startswith("1 of 1")
    assert verdicts["the gradient clip is a second normaliser"]["verdict"] == "untested"  # no cell without it
    assert verdicts["Adam absorbs the scale σ against σ²"]["verdict"] == "supported"  # 1.05 is within 10%
    allocation = verdicts["the allocation alone (σ against σ² per group, equal step length) matters"]
    assert allocation["verdict"] == "supported" and allocation["shows"] == "1 of 2 cells beyond noise"


def test_an_effect_at_g8_only_does_not_support_the_group_size_explanation() -> None:
    study = _study()
    g8, g32 = study["cells"]["G8-adamw-clip"], study["cells"]["G32-adamw-clip"]
    g8["divide-no_divide"], g32["divide-no_divide"] = g32["divide-no_divide"], g8["divide-no_divide"]
    verdicts = {e["explanation"]: e["verdict"] for e in ar.explanations(study)}
    assert verdicts["G = 8 is where the gap is smallest"] == "not supported"


def test_the_figure_has_a_row_per_cell_and_a_panel_per_measure() -> None:
    import matplotlib.pyplot as plt

    from stddial_book.presentation.ablation_figure import ablation_figure

    fig = ablation_figure(_study())
    left, right = fig.axes[:2]
    assert [t.get_text() for t in left.get_yticklabels()] == [
        "pooled (exploratory)",
        "G = 32, AdamW, clip",
        "G = 8, AdamW, clip",
    ]
    assert "hardest quartile" in left.get_title() and "held-out" in right.get_title()
    filled = [line for line in left.lines if line.get_marker() == "o" and line.get_markerfacecolor() != "white"]
    assert len(filled) == 2  # G = 32's division, and the division pooled over the cells
    plt.close(fig)


def test_a_summary_that_is_not_a_study_is_refused() -> None:
    with pytest.raises(ValueError, match="ablation_study"):
        ar.ablation_numbers({"cells": {}})


def _close(shipped, fresh, path="") -> None:
    """Equal to 1e-9, leaving out the bootstrap intervals (their draws depend on scipy's and numpy's
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
        assert fresh == pytest.approx(shipped, rel=1e-9, abs=1e-12), path
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
    assert shipped is not None, "data/ablation/ablation.json.gz is missing: run tools/ship_ablation.py --study-only"
    fresh = ab.ablation_study(runs)
    reference = {k: [load_run(p)[1] for p in v] for k, v in recorded_runs("reference").items()}
    fresh["power"] = ab.power_analysis(reference, samples=ab.RUN_SAMPLES)
    _close(shipped, json.loads(json.dumps(fresh)))
    assert gzip.decompress(data_path(*ar.SUMMARY_FILE).read_bytes()).startswith(b"{")
    assert np.all([c in shipped["cells"] for c in ar.cell_order(shipped)])


def test_the_sentence_and_the_reading_follow_the_verdicts() -> None:
    study = _study()
    sentence = ar.ablation_sentence(study)
    assert sentence.startswith(
        "With the recipes made identical except the normaliser, 1 of 4 comparisons in the 2 cells"
    )
    assert "`divide` − `no_divide` on the hardest quartile at G = 32 under AdamW with the clip (+0.438)" in sentence
    reading = ar.ablation_reading(study)
    assert reading.startswith(
        "The division's effect is beyond noise more often at G = 32 (1 of 1 cells) than at G = 8 (0 of 1)."
    )
    assert "the clip" not in reading.split("AdamW")[0]  # the clip's explanation is untested: every cell clips
    assert "1.05 to 1.05 times `divide`'s" in reading
    assert "still lifts the hardest quartile beyond noise at G = 32 under AdamW with the clip." in reading
    # divide gains 0.625 from the start (0), no_divide 0.1875: 3.3 times as much
    assert "The largest difference is +0.438, at G = 32 under AdamW with the clip: there the hardest" in reading
    assert "gains 3.3 times as much from its start as without the division" in reading
    assert reading.endswith("On the held-out prompts no contrast is beyond noise in any cell.")
    clause = ar.ablation_clause(study)
    assert clause.startswith("but with the recipes identical except the normaliser, dividing by σ lifts the hardest")
    assert "in 1 of 2 cells (by +0.250 pooled, beyond noise in 1 of them" in clause
    assert clause.endswith("and leaves held-out accuracy unchanged in every cell")
    g8, g32 = study["cells"]["G8-adamw-clip"], study["cells"]["G32-adamw-clip"]
    g32["divide-no_divide"] = g8["divide-no_divide"]  # no effect anywhere
    assert ar.ablation_sentence(study).startswith(
        "With the recipes made identical except the normaliser, neither dividing by σ nor DAPO's filter changed"
    )
    null = ar.ablation_reading(study)
    assert null.startswith("A group of 32 does not make the division's effect show more often (0 of 1 cells beyond")
    assert "less than the seeds can detect in every cell" in null
    assert ar.ablation_clause(study).startswith("and with the recipes identical except the normaliser, the division")


def test_an_effect_at_both_group_sizes_does_not_support_the_group_size_explanation() -> None:
    study = _study()
    g8, g32 = study["cells"]["G8-adamw-clip"], study["cells"]["G32-adamw-clip"]
    g8["divide-no_divide"] = g32["divide-no_divide"]  # beyond noise at both sizes: not more often at 32
    row = {e["explanation"]: e for e in ar.explanations(study)}["G = 8 is where the gap is smallest"]
    assert row["counts"] == (1, 1, 1, 1) and row["verdict"] == "not supported"


def test_cells_in_words() -> None:
    assert ar.cell_words("G8-sgd-noclip") == "G = 8, SGD, no clip"
    assert ar.cell_phrase("G32-adamw-clip") == "G = 32 under AdamW with the clip"


def test_pooled_contrasts_by_hand() -> None:
    """G = 32: difference 0.4375, se² = var(DIVIDE)/4 + var(LOW)/4 = 0.0026042 + 0.0013021 = 1/256;
    G = 8: difference 0, se² = 2 · 0.0026042 = 1/192. Weights 256 and 192: pooled
    256 · 0.4375 / 448 = 0.25, se = √(1/448); one cell of two above 0 (sign test p = 1)."""
    from scipy import stats

    pooled = ar.pooled_contrasts(_study())
    assert set(pooled) == {"divide-no_divide/hardest_quartile", "divide-no_divide/heldout"}
    dial = pooled["divide-no_divide/hardest_quartile"]
    assert dial["difference"] == pytest.approx(0.25) and dial["se"] == pytest.approx(math.sqrt(1 / 448))
    z = stats.norm.ppf(1 - 0.05 / 8)  # two contrasts × two measures = 4 comparisons, two-sided
    assert dial["ci_family"] == pytest.approx([0.25 - z * math.sqrt(1 / 448), 0.25 + z * math.sqrt(1 / 448)])
    assert dial["p_bonferroni"] == pytest.approx(4 * 2 * stats.norm.sf(0.25 * math.sqrt(448)))
    assert (dial["positive"], dial["cells"], dial["sign_p"]) == (1, 2, 1.0)
    header, rows = ar.pooled_rows(_study())
    assert rows[0][:2] == ["divide − no_divide", "hardest quartile"] and rows[0][2].endswith("*")
    assert rows[0][4] == "1 of 2 (1)"
    assert "Pooled over the cells (an analysis added after" in ar.ablation_reading(_study())


def test_an_effect_more_often_at_g32_but_also_at_g8_partly_supports_it() -> None:
    """G = 32: beyond noise in both cells (with and without the clip); G = 8: in one of two."""
    study = _study()
    hit, null = study["cells"]["G32-adamw-clip"], study["cells"]["G8-adamw-clip"]
    for key, source, like in (
        ("G32-adamw-noclip", hit, "G32-adamw-clip"),
        ("G8-adamw-noclip", null, "G8-adamw-clip"),
    ):
        study["cells"][key] = dict(source)
        study["seeds"][key], study["values"][key], study["means"][key] = (
            study[part][like] for part in ("seeds", "values", "means")
        )
    study["cells"]["G8-adamw-clip"] = dict(hit)
    row = {e["explanation"]: e for e in ar.explanations(study)}["G = 8 is where the gap is smallest"]
    assert row["counts"] == (2, 2, 1, 2) and row["verdict"] == "partly supported"
    assert ar.ablation_reading(study).startswith(
        "The division's effect is beyond noise more often at G = 32 (2 of 2 cells) than at G = 8 (1 of 2)."
    )
