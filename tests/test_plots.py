"""The run figures of chapters 9-12 (stddial_book.presentation.plots): legible in the book's text column (at most
10 inches wide, at most three panels, 10-point type or larger) and drawn from the logs they are given."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from stddial_book.core.resources import data_path
from stddial_book.experiments.testbed.logs import mass_by_sigma
from stddial_book.experiments.testbed.numbers import silent_sides, warm_start_numbers
from stddial_book.experiments.testbed.predictions import pool_study
from stddial_book.presentation import plots
from stddial_book.rl.evaluate import EvalResult
from stddial_book.rl.runlog import (
    load_run,
    recorded_runs,
)
from stddial_book.rl.tasks import make_problem


@pytest.fixture(scope="module")
def recorded() -> dict[str, list[list[dict]]]:
    runs = recorded_runs("reference")
    return {key: [load_run(d)[1] for d in runs[key][:2]] for key in ("grpo", "dr_grpo")}


def legible(fig: plt.Figure, panels: int) -> None:
    width, _ = fig.get_size_inches()
    assert width <= 10.0
    assert len(fig.axes) == panels
    for ax in fig.axes:
        assert ax.xaxis.label.get_fontsize() >= 10 and ax.yaxis.label.get_fontsize() >= 10
        assert all(t.get_fontsize() >= 10 for t in ax.get_xticklabels())
        legend = ax.get_legend()
        if legend is not None:
            assert all(t.get_fontsize() >= 10 for t in legend.get_texts())
    plt.close(fig)


def test_accuracy_figure_draws_every_evaluation(recorded) -> None:
    records = recorded["grpo"][0]
    fig = plots.accuracy_figure(records, "title")
    evaluations = sum("eval/accuracy_sampled" in r for r in records)
    left, right = fig.axes
    assert [len(line.get_xdata()) for line in left.get_lines()] == [evaluations, evaluations]
    assert [line.get_label() for line in right.get_lines()] == ["D = 2", "D = 3"]
    legible(fig, 2)


def test_run_dial_figure_bars_are_the_mass_shares(recorded) -> None:
    fig = plots.run_dial_figure({"Dr. GRPO": recorded["dr_grpo"][0], "GRPO": recorded["grpo"][0]}, 8)
    bars = fig.axes[1].patches
    expected = mass_by_sigma(recorded["dr_grpo"][0], 8)
    heights = [b.get_height() for b in bars[:4]]  # the first run's mass bars come first
    assert heights == pytest.approx(expected["mass"].tolist())
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == ["1|7", "2|6", "3|5", "4"]
    legible(fig, 2)


def identity_log() -> list[dict]:
    return [
        {
            "step": 1,
            "samples/generated": 256,
            "identity/minibatch": [0, 1],
            "identity/rel_error": [1e-6, 0.3],
            "identity/clipped": [0.0, 0.1],
        },
        {
            "step": 9,
            "samples/generated": 2304,
            "identity/minibatch": [0, 1],
            "identity/rel_error": [2e-6, 0.05],
            "identity/clipped": [0.0, 0.0],
        },
    ]


def test_identity_check_figure_plots_each_checked_group() -> None:
    fig = plots.identity_check_figure([identity_log(), identity_log()])
    points = {line.get_label(): len(line.get_xdata()) for line in fig.axes[0].get_lines()}
    assert points == {"first minibatch (ratio 1)": 4, "later, nothing clipped": 2, "later, some tokens clipped": 2}
    legible(fig, 1)
    with pytest.raises(ValueError, match="identity_check_every"):
        plots.identity_check_figure([[{"step": 1, "samples/generated": 1}]])


def test_run_metrics_figure_panels(recorded) -> None:
    records = recorded["grpo"][0]
    fig = plots.run_metrics_figure(records, ("kl", "clip", "length"), max_new_tokens=8)
    steps = sum(r["step"] > 0 for r in records)
    assert len(fig.axes[0].get_lines()[0].get_xdata()) == steps
    assert len(fig.axes[1].get_lines()) == 2
    legible(fig, 3)
    with pytest.raises(ValueError, match="one to three"):
        plots.run_metrics_figure(records, ("kl", "clip", "length", "entropy"))
    with pytest.raises(ValueError, match="one to three"):
        plots.run_metrics_figure(records, ("loss",))


def test_prediction_figures(recorded) -> None:
    studies = {"recorded": pool_study({"grpo": recorded["grpo"]}, 8)}
    fig = plots.prediction_checks_figure(studies, "grpo")
    realised = np.array([m["realised"] for m in studies["recorded"]["grpo"]["mass"]]).mean(axis=0)
    assert [b.get_height() for b in fig.axes[1].patches] == pytest.approx(realised.tolist())
    legible(fig, 2)
    fig = plots.quartile_progress_figure({"a": studies["recorded"], "b": studies["recorded"]}, "grpo")
    assert len(fig.axes[0].get_lines()) == 4
    legible(fig, 2)


def test_chapter_9_figures(recorded) -> None:
    sft_dir = data_path("runs", "reference", "sft")
    fig = plots.warm_start_figure(load_run(sft_dir)[1], warm_start_numbers(sft_dir), 128)
    legible(fig, 1)
    problems = [make_problem(10, 10, 2), make_problem(15, 15, 2), make_problem(100, 100, 3), make_problem(999, 1, 3)]
    evaluation = EvalResult(
        greedy=0.5,
        sampled=0.5,
        greedy_by_bucket={},
        sampled_by_bucket={},
        successes=np.array([4, 1, 2, 0]),
        num_samples=4,
        buckets=np.array(["D2", "D2", "D3", "D3"]),
    )
    fig = plots.start_difficulty_figure(evaluation, problems)
    assert [line.get_ydata().tolist() for line in fig.axes[1].get_lines()] == [[1.0, 0.25], [0.5, 0.0]]
    legible(fig, 2)
    records = recorded["grpo"][0]
    pool = [make_problem(10 + i % 80, 11, 2 + i % 2) for i in range(len(records[0]["pool/k"]))]
    fig = plots.pool_start_figure(records, pool)
    legible(fig, 1)
    fig = plots.silent_sides_figure([silent_sides(r, 8) for r in recorded["grpo"]], 8)
    assert len(fig.axes[0].get_lines()) == 3 * 2
    legible(fig, 1)


def test_end_labels_are_spread_to_the_gap_and_far_ones_stay() -> None:
    """Quartile end labels closer than the gap are pushed apart upwards, in order of height; a
    label already far enough from its neighbour stays at its curve's end."""
    from stddial_book.presentation.plots import _spread_labels

    placed = _spread_labels([(0.52, 1, "b"), (0.9, 2, "c"), (0.5, 0, "a"), (0.55, 3, "d")], gap=0.07)
    assert [band for _, band, _ in placed] == [0, 1, 3, 2]
    ys = [y for y, _, _ in placed]
    assert ys == pytest.approx([0.5, 0.57, 0.64, 0.9])


def test_side_by_side_panels_are_stacked_for_a_phone() -> None:
    """A one-row figure comes back as one column, STACKED_WIDTH inches wide (about 0.6 of its size
    in a phone's column, so the book's type stays at 9 px or more); panels that shared the y axis
    show their own tick labels and y label; any other layout is left as it was."""
    from stddial_book.presentation.paper_figures import expected_weight_figure
    from stddial_book.presentation.style import STACKED_WIDTH, _stacked

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
    left.set_ylabel("share")
    assert _stacked(fig) is fig and fig.get_size_inches()[0] == STACKED_WIDTH
    assert [ax.get_subplotspec().get_geometry()[:2] for ax in fig.axes] == [(2, 1), (2, 1)]
    assert right.get_ylabel() == "share" and right.yaxis.get_tick_params()["labelleft"]
    plt.close(fig)
    grid, _ = plt.subplots(2, 2, figsize=(8, 8))
    assert tuple(_stacked(grid).get_size_inches()) == (8, 8)
    plt.close(grid)
    shown = expected_weight_figure(group_size=8)  # a chapter's figure, stacked by its decorator
    assert shown.get_size_inches()[0] == STACKED_WIDTH and len(shown.axes) == 2
    plt.close(shown)
