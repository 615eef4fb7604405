"""Following a fixed prompt pool through a run: unbiased closed forms, bands, silent and mass checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stddial_book import DR_GRPO, GRPO
from stddial_book.experiments.testbed.predictions import (
    band_trajectories,
    hypergeometric_expectation,
    initial_bands,
    mass_by_band,
    pool_history,
    silent_check,
)
from stddial_book.theory.silent import expected_update_weight, silent_probability


@pytest.mark.parametrize("n, G, p", [(16, 8, 0.3), (32, 8, 0.05), (8, 8, 0.6), (12, 4, 0.9)])
def test_hypergeometric_estimate_is_unbiased(n, G, p) -> None:
    """Averaged over k ~ Binomial(n, p), the estimate equals the Binomial(G, p) expectation exactly."""
    silent = np.zeros(G + 1)
    silent[[0, G]] = 1.0
    k = np.arange(n + 1)
    weight_k = np.array([math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in k])
    assert weight_k @ hypergeometric_expectation(k, n, G, silent) == pytest.approx(silent_probability(p, G), abs=1e-12)
    from stddial_book.theory.identity import update_weight

    w = np.asarray(update_weight(np.arange(G + 1) / G, GRPO, G))
    assert weight_k @ hypergeometric_expectation(k, n, G, w) == pytest.approx(
        expected_update_weight(p, G, GRPO), abs=1e-12
    )
    with pytest.raises(ValueError, match="at least G"):
        hypergeometric_expectation(k, G - 1, G, silent)


def fake_run() -> list[dict]:
    """Three pool prompts measured at steps 0 and 2; two training steps of two groups each (G = 4)."""
    return [
        {"step": 0, "pool/k": [0, 8, 4], "pool/n": 8},
        {
            "step": 1,
            "groups_generated/prompt": [0, 2],
            "groups_generated/k": [0, 2],
            "groups/prompt": [2],
            "groups/weight": [0.5],
        },
        {
            "step": 2,
            "groups_generated/prompt": [1, 2],
            "groups_generated/k": [4, 1],
            "groups/prompt": [2],
            "groups/weight": [0.433013],
            "pool/k": [2, 8, 6],
            "pool/n": 8,
        },
        {
            "step": 3,
            "groups_generated/prompt": [0, 1],
            "groups_generated/k": [1, 4],
            "groups/prompt": [0],
            "groups/weight": [0.433013],
        },
    ]


def test_pool_history_bands_and_trajectories() -> None:
    records = fake_run()
    steps, n, K = pool_history(records)
    assert steps.tolist() == [0, 2] and n == 8 and K.tolist() == [[0, 8, 4], [2, 8, 6]]
    assert initial_bands(records, 3).tolist() == [0, 2, 1]  # hardest first
    _, traj = band_trajectories(records, 3)
    assert traj[:, 1].tolist() == [0.25, 0.75, 1.0]
    with pytest.raises(ValueError, match="pool"):
        pool_history([{"step": 0}])


def test_silent_check_interpolates_between_measurements() -> None:
    check = silent_check(fake_run(), 4)
    assert check["step"].tolist() == [1, 2, 3]
    assert check["measured"].tolist() == [0.5, 0.5, 0.5]

    def s(k):  # unbiased P(silent) of a prompt measured k of 8, for G = 4
        return hypergeometric_expectation(np.array([k]), 8, 4, np.r_[1.0, 0, 0, 0, 1.0])[0]

    # step 1 is drawn by the starting policy: the step-0 measurement; prompt 0 (0 of 8) is surely silent
    assert check["predicted"][0] == pytest.approx((1 + s(4)) / 2)
    # step 2 is drawn after one update: halfway between the measurements at steps 0 and 2
    assert check["predicted"][1] == pytest.approx((1 + 0.5 * s(4) + 0.5 * s(6)) / 2)
    # step 3 follows the last measurement (step 2)
    assert check["predicted"][2] == pytest.approx((s(2) + 1) / 2)


def test_mass_by_band_shares() -> None:
    for recipe in (GRPO, DR_GRPO):
        shares = mass_by_band(fake_run(), recipe, 4, num_bands=3)
        assert shares["realised"].sum() == pytest.approx(1) and shares["expected"].sum() == pytest.approx(1)
    grpo = mass_by_band(fake_run(), GRPO, 4, num_bands=3)
    assert grpo["realised"][2] == 0  # the always-solved prompt never reached the update
    assert grpo["realised"][1] == pytest.approx((0.5 + 0.433013) / (0.5 + 2 * 0.433013))
    # expected, by hand: G = 4 drawn from n = 8 stored samples (hypergeometric). Prompt 2 measured 4 of 8
    # at step 0 gives j = 1, 2, 3 correct with probabilities 16/70, 36/70, 16/70; prompt 0 measured 2 of 8
    # at step 2 gives j = 1, 2 with 40/70, 15/70; prompts at 0 or 8 of 8 are surely silent. Prompt 2 is
    # drawn at steps 1 and 2 (step-0 measurement), prompt 0 at step 3 (step-2 measurement).
    # GRPO: w = σ = √3/4 at j = 1, 3 and 1/2 at j = 2
    band1 = 2 * (32 * math.sqrt(3) / 4 + 36 / 2) / 70
    band0 = (40 * math.sqrt(3) / 4 + 15 / 2) / 70
    np.testing.assert_allclose(grpo["expected"], np.array([band0, band1, 0]) / (band0 + band1), rtol=1e-12)
    # Dr. GRPO: w = σ² = 3/16 at j = 1, 3 and 1/4 at j = 2
    band1 = 2 * (32 * 3 / 16 + 36 / 4) / 70
    band0 = (40 * 3 / 16 + 15 / 4) / 70
    dr = mass_by_band(fake_run(), DR_GRPO, 4, num_bands=3)
    np.testing.assert_allclose(dr["expected"], np.array([band0, band1, 0]) / (band0 + band1), rtol=1e-12)


def test_welch_by_hand() -> None:
    from stddial_book.experiments.statistics import welch

    out = welch([1.0, 2.0, 3.0], [0.0, 0.0, 2.0])
    se = math.sqrt(1.0 / 3 + (4.0 / 3) / 3)  # sample variances 1 and 4/3, three seeds each
    assert out["difference"] == pytest.approx(2 - 2 / 3) and out["se"] == pytest.approx(se)
    assert out["t"] == pytest.approx((2 - 2 / 3) / se)
    # Welch's degrees of freedom: se⁴ / ((1/3)²/2 + (4/9)²/2)
    assert out["df"] == pytest.approx(se**4 / ((1 / 3) ** 2 / 2 + (4 / 9) ** 2 / 2))


def test_pool_study_over_fake_seeds() -> None:
    from stddial_book.experiments.testbed.predictions import pool_study

    records = fake_run()
    for r in records:
        r["samples/generated"] = 8 * r["step"]
    records[-1]["eval/accuracy_sampled"] = 0.5
    study = pool_study({"grpo": [records, records]}, 4, num_bands=3)
    entry = study["grpo"]
    assert len(entry["final"]) == 2 and entry["final"][0].tolist() == [0.25, 0.75, 1.0]
    assert entry["samples"][0].tolist() == [0.0, 16.0] and entry["heldout"] == [0.5, 0.5]
