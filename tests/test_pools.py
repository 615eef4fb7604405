"""Chapter 7's pool numbers, checked on pools small enough to work out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from stddial_book.corpora.histograms import KHistogram
from stddial_book.corpora.pools import budget_bands, deepscaler_provenance, pool_numbers
from stddial_book.corpora.solve_tables import load_committed_histograms


def test_pool_numbers_by_hand() -> None:
    """n = 4 stored samples; 2 prompts never solved, 1 always, 1 with k = 2 (p̂ = 1/2). At G = 2:
    Bernoulli P(silent | 1/2) = 1/4 + 1/4 = 1/2; drawing 2 of the 4 stored samples (2 right, 2
    wrong) without replacement, P(both alike) = 2 · (2/4)(1/3) = 1/3."""
    hist = KHistogram(4, np.array([2, 0, 1, 0, 1]))
    numbers = pool_numbers(hist, group_size=2)
    assert numbers["n"] == 4
    assert numbers["never"] == 0.5 and numbers["always"] == 0.25 and numbers["irreducible"] == 0.75
    assert numbers["mean"] == pytest.approx((0.5 + 1.0) / 4)
    assert numbers["silent_2"] == pytest.approx((2 + 1 + 0.5) / 4)
    assert numbers["silent_2_sub"] == pytest.approx((2 + 1 + 1 / 3) / 4)


def test_pool_numbers_refuses_a_group_larger_than_the_stored_samples() -> None:
    with pytest.raises(ValueError, match="stored samples"):
        pool_numbers(KHistogram(4, np.array([0, 1, 1, 1, 0])), group_size=8)
    with pytest.raises(ValueError, match="no prompts"):
        pool_numbers(KHistogram(4, np.zeros(5)), group_size=2)
    with pytest.raises(TypeError, match="hist must be a KHistogram"):
        pool_numbers([0, 1, 1, 1, 0])


def test_budget_bands_by_hand() -> None:
    """n = 20: one prompt at p̂ = 0.05 (extreme) and one at 0.5 (medium). Large-group weights:
    Dr. GRPO p(1 − p) = 0.0475 and 0.25, GRPO √(p(1 − p)) = 0.2179 and 0.5."""
    counts = np.zeros(21)
    counts[1] = counts[10] = 1
    bands = budget_bands(KHistogram(20, counts), group_sizes=(None, 8))
    assert bands["ext_dr"] == pytest.approx(0.0475 / 0.2975)
    assert bands["med_dr"] == pytest.approx(0.25 / 0.2975)
    root = np.sqrt(0.0475)
    assert bands["ext_grpo"] == pytest.approx(root / (root + 0.5))
    assert bands["ext_dr_8"] == pytest.approx(bands["ext_dr"])  # (G − 1)/G cancels in a share
    assert bands["ext_grpo_8"] < bands["ext_grpo"]  # the finite group attenuates the extreme
    assert set(bands) == {f"{b}_{r}{s}" for b in ("ext", "med") for r in ("dr", "grpo") for s in ("", "_8")}
    with pytest.raises(TypeError, match="group_sizes must be a list of group sizes"):
        budget_bands(KHistogram(20, counts), group_sizes=8)


def test_provenance_describes_the_committed_union() -> None:
    provenance = deepscaler_provenance()
    union = load_committed_histograms()["union"]
    assert provenance["union"]["unique_problems"] == union.num_prompts
    assert provenance["source"]["commit"] and provenance["union"]["texts_with_several_k"] >= 0
