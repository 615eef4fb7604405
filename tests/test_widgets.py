"""The chapter 5 explorer: a live ipywidgets version for a kernel, and a self-contained HTML one that
works on the static site. The HTML one only draws numbers the package computed, so they are checked
here against the closed forms; its markup must load nothing from the network."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from stddial_book.presentation.widgets import (
    explorer_note,
    silent_explorer,
    silent_explorer_data,
    silent_explorer_html,
)
from stddial_book.theory.identity import update_weight
from stddial_book.theory.recipes import PRESETS
from stddial_book.theory.silent import expected_update_weight, silent_probability


def test_explorer_data_are_the_closed_forms() -> None:
    group_sizes, solve_rates = (2, 8), (0.0, 0.3, 1.0)
    data = silent_explorer_data(group_sizes=group_sizes, solve_rates=solve_rates)
    for key, recipe in PRESETS.items():
        for gi, G in enumerate(group_sizes):
            cell = data["recipes"][key]["by_g"][gi]
            assert np.allclose(cell["weights"], update_weight(np.arange(G + 1) / G, recipe, G), atol=1e-5)
            assert cell["weights"][0] == 0 and cell["weights"][G] == 0  # silent outcomes carry no weight
            j = G // 2
            for pi, p in enumerate(solve_rates):
                row = cell["by_p"][pi]
                assert sum(row["pmf"]) == pytest.approx(1.0, abs=1e-4)
                assert row["pmf"][j] == pytest.approx(math.comb(G, j) * p**j * (1 - p) ** (G - j), abs=1e-5)
                assert row["silent"] == pytest.approx(float(silent_probability(p, G)), abs=1e-4)
                assert row["silent"] == pytest.approx(row["pmf"][0] + row["pmf"][G], abs=1e-4)
                assert row["expected_w"] == pytest.approx(float(expected_update_weight(p, G, recipe)), abs=1e-4)


def test_explorer_html_is_self_contained() -> None:
    markup = silent_explorer_html(group_size=16, solve_rate=0.1, recipe_name="Dr. GRPO").data
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", markup)  # nothing from the network
    payload = re.search(r'<script type="application/json">(.*?)</script>', markup, re.S).group(1)
    data = json.loads(payload)
    assert data["group_sizes"][int(re.search(r'class="g"[^>]*value="(\d+)"', markup).group(1))] == 16
    assert data["solve_rates"][int(re.search(r'class="p"[^>]*value="(\d+)"', markup).group(1))] == 0.1
    assert '<option value="dr_grpo" selected>' in markup
    ids = re.findall(r'id="(stddial-explorer-[0-9a-f]+)"', markup)
    assert len(ids) == 1 and ids[0] in re.search(r"<script>(.*?)</script>", markup, re.S).group(1)
    assert ids[0] not in silent_explorer_html().data  # two explorers on a page


def test_explorer_refuses_bad_settings() -> None:
    with pytest.raises(ValueError, match="unknown recipe"):
        silent_explorer_html(recipe_name="ppo")
    with pytest.raises(ValueError, match="group sizes >= 2"):
        silent_explorer_data(group_sizes=(1,))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        silent_explorer_data(solve_rates=(1.5,))


def test_live_explorer_builds() -> None:
    widget = silent_explorer()
    assert [c.description for c in widget.children[:3]] == ["G", "p", "recipe"]


def test_dapo_view_says_why_its_numbers_are_grpos() -> None:
    data = silent_explorer_data(group_sizes=(4, 8), solve_rates=(0.3,))
    dapo, grpo = data["recipes"]["dapo"], data["recipes"]["grpo"]
    assert dapo["by_g"] == grpo["by_g"]  # the same weights and E[w] ...
    note = dapo["note"]  # ... and the view says why, and where DAPO differs
    assert note.startswith("DAPO divides by σ like GRPO") and "±1 rewards" in note
    assert "discards silent groups" in note and "1/(1 − f)" in note and "tokens" in note
    assert grpo["note"] == "" and data["recipes"]["dr_grpo"]["note"] == ""
    markup = silent_explorer_html(recipe_name="dapo").data
    assert 'class="note"' in markup and ".note" in markup
    assert (
        explorer_note("dapo")
        == json.loads(re.search(r'<script type="application/json">(.*?)</script>', markup, re.S).group(1))["recipes"][
            "dapo"
        ]["note"]
    )


def test_the_colab_explorers_figure_stacks_its_panels_at_the_books_phone_width() -> None:
    """silent_explorer's figure (Colab, chapter 5): two panels in one column, STACKED_WIDTH inches wide (labels
    legible on a phone), their bars the binomial pmf of k and each k's update weight."""
    import matplotlib.pyplot as plt
    from scipy.stats import binom

    from stddial_book.presentation.style import STACKED_WIDTH
    from stddial_book.presentation.widgets import silent_explorer_figure

    fig = silent_explorer_figure(12, 0.25, "dr_grpo")
    try:
        top, bottom = fig.axes
        assert fig.get_size_inches()[0] == pytest.approx(STACKED_WIDTH)
        assert top.get_position().y0 > bottom.get_position().y1  # one above the other
        k = np.arange(13)
        assert [b.get_height() for b in top.patches] == pytest.approx(binom.pmf(k, 12, 0.25))
        weights = update_weight(k / 12, PRESETS["dr_grpo"], 12)
        assert [b.get_height() for b in bottom.patches] == pytest.approx(weights)
        assert top.get_title() == f"P(silent) = {silent_probability(0.25, 12):.3f} (grey bars)"
    finally:
        plt.close(fig)
