"""The numbers and tables chapters 2 to 4 show about the identity (stddial_book.experiments.identity.report)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from stddial_book import DR_GRPO, GRPO, group_advantages
from stddial_book.experiments.identity.report import (
    advantage_table,
    clip_shares,
    drift_after,
    drift_numbers,
    eps_shortfall_gap,
    numeric_identity_errors,
    ratio_one_errors,
)
from stddial_book.rl.gradcheck import build_group, drift_study, drift_summary
from stddial_book.rl.model import tiny_model
from stddial_book.rl.tasks import make_problem

EXACT = GRPO.replace(kl_coef=0.0)


def _small_model():
    return tiny_model(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, dtype=torch.float64)


@pytest.fixture(scope="module")
def drift_setup():
    """Four groups of four samples and a drift study of three Adam steps in which the clip binds."""
    model = _small_model()
    gen = torch.Generator().manual_seed(1)
    groups = [build_group(model, make_problem(10 + i, 20 + i, 2), 4, 1 + i % 3, 5, gen) for i in range(4)]
    study = drift_study(model, groups, EXACT, 5, steps=3, lr=1e-2)
    return model, groups, study


# --- chapter 2 --------------------------------------------------------------------------------


def test_advantage_table_shows_hand_computed_advantages_and_marks_silent_groups() -> None:
    correct = np.concatenate([np.arange(4) < k for k in (1, 0, 4)]).astype(float)
    advantages = {
        "GRPO": group_advantages(correct, 4, GRPO).reshape(-1, 4),
        "Dr. GRPO": group_advantages(correct, 4, DR_GRPO).reshape(-1, 4),
    }
    text = advantage_table(advantages, [1, 0, 4]).data
    lines = text.splitlines()
    assert lines[0] == "| correct samples | GRPO: A₊ / A₋ | Dr. GRPO: A₊ / A₋ |"
    # k = 1 of 4: σ = √3/4, GRPO A₊ = (3/4)/σ = √3 = 1.732, A₋ = −(1/4)/σ = −0.577; Dr. GRPO 0.75 / −0.25
    assert lines[2] == "| 1 of 4 | +1.732 / −0.577 | +0.750 / −0.250 |"
    # no correct sample: no A₊; no wrong sample: no A₋; both silent, advantage 0 (never NaN)
    assert lines[3] == "| 0 of 4 | — / 0 (silent) | — / 0 (silent) |"
    assert lines[4] == "| 4 of 4 | 0 / — (silent) | 0 / — (silent) |"
    assert "nan" not in text.lower()


def test_advantage_table_refuses_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="one row"):
        advantage_table({"GRPO": np.zeros((2, 4))}, [1, 2, 3])
    with pytest.raises(ValueError, match="exceeds the group size"):
        advantage_table({"GRPO": np.zeros((1, 4))}, [5])
    with pytest.raises(TypeError, match="advantages must map each recipe's name"):
        advantage_table([np.zeros((1, 4))], [1])


# --- chapter 3 --------------------------------------------------------------------------------


def test_numeric_identity_errors_counts_every_mixed_group_and_finds_rounding_only() -> None:
    checks = numeric_identity_errors(max_group_size=6, dim=3, seed=1)
    assert checks["n_numeric_groups"] == 1 + 2 + 3 + 4 + 5  # G = 2..6, k = 1..G-1
    for key in ("err_mean_abs", "err_grpo", "err_dr"):
        assert 0.0 <= checks[key] < 1e-13


# --- chapter 4 --------------------------------------------------------------------------------


def test_ratio_one_errors_separates_the_right_normaliser_from_the_wrong_one() -> None:
    model = _small_model()
    gen = torch.Generator().manual_seed(0)
    groups = [build_group(model, make_problem(57, 68, 2), 6, k, 6, gen) for k in (1, 3)]
    per_sequence = DR_GRPO.replace(loss_aggregation="seq-mean-token-mean")
    errors = ratio_one_errors(
        model, groups, {"grpo": (EXACT, EXACT), "dr": (DR_GRPO, DR_GRPO), "wrong": (per_sequence, DR_GRPO)}, 6
    )
    assert list(errors) == ["grpo", "dr", "wrong"] and all(len(v) == 2 for v in errors.values())
    assert max(errors["grpo"] + errors["dr"]) < 1e-10
    assert min(errors["wrong"]) > 0.01
    # ε/σ exactly: the gap is rounding; a recipe that already has an ε is not the exact reference
    assert eps_shortfall_gap(model, groups, EXACT, 6, 0.05) < 1e-9
    assert eps_shortfall_gap(model, groups, EXACT.replace(std_eps=0.05), 6, 0.05) > 1e-3


def test_drift_numbers_reads_a_hand_made_summary() -> None:
    row = {"clipped_high": 0.0, "rel_error_median_clipped_groups": math.nan, "rel_error_median_unclipped_groups": 0.0}
    summary = [
        {
            **row,
            "step": 0,
            "clipped": 0.0,
            "groups_clipped": 0.0,
            "rel_error_median": 1e-15,
            "ratio_error_median": 1e-15,
        },
        {
            **row,
            "step": 1,
            "clipped": 0.04,
            "clipped_high": 0.03,
            "groups_clipped": 0.5,
            "rel_error_median": 0.2,
            "ratio_error_median": 0.05,
            "rel_error_median_clipped_groups": 0.4,
            "rel_error_median_unclipped_groups": 0.05,
        },
        {**row, "step": 2, "clipped": 0.1, "groups_clipped": 1.0, "rel_error_median": 0.6, "ratio_error_median": 0.1},
    ]
    numbers = drift_numbers(summary)
    assert numbers["clipped_1"] == 0.04 and numbers["groups_clipped_2"] == 1.0
    assert numbers["dev_0"] == 1e-15 and numbers["ratio_dev_2"] == 0.1
    assert numbers["first_clip_step"] == 1 and numbers["first_clip_share"] == 0.04
    assert numbers["first_clip_high"] == pytest.approx(0.75)
    assert numbers["dev_clipped_groups"] == 0.4 and numbers["dev_unclipped_groups"] == 0.05
    assert (numbers["clipped_last"], numbers["dev_last"], numbers["ratio_dev_last"]) == (0.1, 0.6, 0.1)
    never = drift_numbers(summary[:1])
    assert math.isnan(never["first_clip_step"]) and math.isnan(never["first_clip_high"])
    with pytest.raises(TypeError, match="summary must be the non-empty list drift_summary returns"):
        drift_numbers({})


def test_clip_shares_takes_drift_studys_steps(drift_setup) -> None:
    """The cheap measurement agrees with drift_study's clip shares step by step (which it computes
    through identity_drift, per group), and leaves the model as it was."""
    model, groups, study = drift_setup
    before = [p.detach().clone() for p in model.parameters()]
    shares = clip_shares(model, groups, EXACT, 5, steps=3, lr=1e-2)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before))
    summary = drift_summary(study)
    assert [row["step"] for row in shares] == [0, 1, 2, 3]
    for mine, theirs in zip(shares, summary):
        assert mine["high"] == pytest.approx(theirs["clipped_high"], abs=1e-6)  # float32 metrics
        assert mine["low"] + mine["high"] == pytest.approx(theirs["clipped"], abs=1e-6)
    assert max(row["low"] + row["high"] for row in shares) > 0  # the clip binds at this lr
    # a wider clip range clips no more on the high side
    wider = clip_shares(model, groups, EXACT.replace(clip_high=10.0), 5, steps=3, lr=1e-2)
    assert max(row["high"] for row in wider) == 0.0


def test_drift_after_reproduces_drift_studys_last_step(drift_setup) -> None:
    model, groups, study = drift_setup
    last = drift_after(model, groups, EXACT, 5, steps=3, lr=1e-2, measured=[0, 2])
    assert last["group"].tolist() == [0, 2] and set(last["step"]) == {3}
    assert set(last) == set(study)
    at = study["step"] == 3
    for key in ("rel_error", "ratio_error", "clip_error", "clipped", "norm_ratio"):
        np.testing.assert_allclose(last[key], study[key][at][[0, 2]], rtol=1e-9, atol=1e-12)
    assert drift_summary(last)[0]["step"] == 3
    with pytest.raises(ValueError, match="indices"):
        drift_after(model, groups, EXACT, 5, steps=1, lr=1e-2, measured=[4])
    with pytest.raises(ValueError, match="lr"):
        clip_shares(model, groups, EXACT, 5, steps=1, lr=0.0)
