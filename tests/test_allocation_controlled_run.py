"""Chapter 8's controlled run with allocated group sizes (Part V): the training run's update against
chapter 8's, reproducible seeds, the step-size control and the budget accounting. Tiny sizes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from stddial_book.experiments.allocation.controlled_run import (
    AllocatedRun,
    AllocatedRunResult,
    allocated_run,
    allocation_gradient,
    allocation_run_study,
    mean_update_norm,
    norm_matched_lr,
    samples_to_target,
)
from stddial_book.experiments.allocation.signal import STUDY_RULES, build_rule, summarize_run_study
from stddial_book.experiments.controlled.bernoulli import sampled_gradients
from stddial_book.rl.allocation_base import Allocation

TINY = AllocatedRun(batch_prompts=4, steps=8)


@pytest.mark.parametrize("recipe", ["grpo", "dr_grpo"])
def test_uniform_step_is_chapter_8s_update(recipe) -> None:
    p = np.random.default_rng(3).uniform(0.05, 0.95, size=12)
    expected = sampled_gradients(p, 8, recipe, np.random.default_rng(5))
    answers = np.random.default_rng(5).random((12, 8)) < p[:, None]
    a = Allocation()
    a.keep(np.arange(12), np.full(12, 8), answers.sum(axis=1))
    assert allocation_gradient(p, a, recipe, step_samples=96) == pytest.approx(expected, abs=1e-12)


def test_ragged_group_weighs_by_its_samples() -> None:
    a = Allocation()
    a.keep([0, 1], [8, 16], [4, 8])  # both σ̂ = 1/2
    grad = allocation_gradient(np.array([0.5, 0.5, 0.3]), a, "grpo", step_samples=24)
    assert grad.tolist() == pytest.approx([0.5, 1.0, 0.0])


def test_runs_are_reproducible_and_the_budget_adds_up() -> None:
    p0 = np.linspace(0.1, 0.9, 16)
    for rule in STUDY_RULES:
        one = allocated_run(p0, rule, "grpo", TINY, seed=4)
        two = allocated_run(p0, rule, "grpo", TINY, seed=4)
        assert np.array_equal(one.accuracy, two.accuracy) and np.array_equal(one.generated, two.generated)
        spent = np.diff(one.generated)
        assert np.array_equal(spent, one.kept + one.discarded_silent + one.discarded_surplus), rule
        _, cap = build_rule(rule, TINY.batch_prompts)
        assert spent.max() <= cap
        assert len(one.update_norm) >= TINY.steps and one.generated[-1] >= TINY.sample_budget
    other = allocated_run(p0, "uniform", "grpo", TINY, seed=5)
    assert not np.array_equal(other.accuracy, allocated_run(p0, "uniform", "grpo", TINY, seed=4).accuracy)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_matched_rate_matches_uniform_grpos_step(optimizer) -> None:
    config = dataclasses.replace(TINY, optimizer=optimizer, steps=20, stop_at=0.0)
    p0 = np.linspace(0.05, 0.95, 32)
    ref = mean_update_norm(allocated_run(p0, "uniform", "grpo", config, 10_001), config.steps)
    for rule in ("speed", "reinforce_ada"):
        raw = mean_update_norm(allocated_run(p0, rule, "grpo", config, 10_001), config.steps) / ref
        lr = norm_matched_lr(p0, rule, "grpo", config, ref)
        matched = mean_update_norm(allocated_run(p0, rule, "grpo", config, 10_001, lr), config.steps) / ref
        assert abs(matched - 1) < 0.1 and abs(matched - 1) < abs(raw - 1), (rule, raw, matched)


def test_samples_to_target_interpolates() -> None:
    result = AllocatedRunResult(
        1.0, np.array([0.0, 10.0, 30.0]), np.array([0.2, 0.4, 0.8]), *(np.zeros(2) for _ in range(5)), np.zeros(3)
    )
    assert samples_to_target(result, 0.2) == 0.0
    assert samples_to_target(result, 0.6) == pytest.approx(20.0)
    assert np.isnan(samples_to_target(result, 0.9))


def test_study_reports_the_control_and_counts_comparisons() -> None:
    rules = ("uniform", "dapo", "dial_grpo")
    study = allocation_run_study(
        pools=("bimodal",), rules=rules, recipes=("grpo",), optimizers=("sgd",), seeds=3, num_prompts=16, config=TINY
    )
    summary = summarize_run_study(study)
    cells = summary["cells"]
    assert set(cells) == {f"bimodal/sgd/grpo/{r}" for r in rules}
    assert cells["bimodal/sgd/grpo/uniform"]["lr"] == 0.5
    for cell in cells.values():
        assert cell["seeds"] == 3 and len(cell["samples_to_target"]) == 3
        assert 0.5 < cell["norm_ratio"]["mean"] < 2.0
    # each non-uniform rule against uniform, each non-DAPO rule against DAPO, at three targets
    assert len(summary["comparisons"]) == (2 + 2) * 3
    assert summary["comparisons_counted"] <= 12
    assert len(summary["targets"]["bimodal/sgd"]) == 3
