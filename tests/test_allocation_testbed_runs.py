"""The allocation rules on the LM testbed: their settings, and the study that reads their recorded runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stddial_book.experiments.allocation.signal import PLAN_AHEAD, build_rule
from stddial_book.experiments.allocation.testbed_runs import (
    ESTIMATOR_DECAY,
    LM_RULES,
    lm_allocation_changes,
    lm_allocation_study,
    lm_benchmark,
    samples_to,
)
from stddial_book.rl.profiles import PROFILES

REFERENCE = PROFILES["reference"]


@pytest.mark.parametrize("rule", LM_RULES)
def test_each_rule_runs_at_the_controlled_studys_step_size(rule) -> None:
    """The trainer's config for each rule has the controlled study's budget per step, candidates (a
    batch of 32 for a plan-ahead rule, the pool otherwise), settings and estimator memory."""
    config = REFERENCE.train_config("grpo", 0, **lm_allocation_changes(rule))
    assert config.allocation == rule
    settings, budget = build_rule(rule, 32, 8)
    assert config.step_budget == budget
    if rule == "uniform":
        assert config.allocation_rule() is None
        return
    assert config.allocation_candidates == (32 if rule in PLAN_AHEAD else None)
    assert config.allocation_rule() == settings
    assert config.pool_estimator()["decay"] == ESTIMATOR_DECAY


def test_the_oracle_and_unknown_rules_are_refused() -> None:
    with pytest.raises(ValueError, match="rule must be one of"):
        lm_allocation_changes("knapsack_oracle")
    with pytest.raises(ValueError, match="rule must be one of"):
        lm_allocation_changes("greedy")


def test_samples_to_a_target_by_hand() -> None:
    generated = np.array([0.0, 100.0, 200.0, 300.0])
    accuracy = np.array([0.2, 0.3, 0.5, 0.6])
    assert samples_to(generated, accuracy, 0.4) == pytest.approx(150.0)  # halfway from 0.3 to 0.5
    assert samples_to(generated, accuracy, 0.2) == 0.0
    assert samples_to(generated, accuracy, 0.55) == pytest.approx(250.0)
    assert np.isnan(samples_to(generated, accuracy, 0.61))
    # first crossing, not the last: a dip after reaching the target does not move it
    assert samples_to(generated, np.array([0.2, 0.5, 0.3, 0.6]), 0.4) == pytest.approx(200.0 / 3)


def _write_run(path, rule: str, seed: int, accuracies, norms, budget: int = 400, block: int = 0) -> None:
    """A recorded run: four pool prompts measured with n = 4 at 0, 100, ..., budget samples (the first
    ``block`` of them declared the profile's block, as ``record`` writes it)."""
    path.mkdir(parents=True)
    rows = []
    for i, level in enumerate(accuracies):
        # prompt difficulties 0 < 1 < 2 < 3 in every run; their mean is ``level``
        k = np.clip(np.round(4 * (level + np.array([-0.3, -0.1, 0.1, 0.3]))), 0, 4).astype(int)
        rows.append({"step": i, "samples/generated": 100 * i, "pool/k": k.tolist(), "pool/n": 4})
        if i:
            rows.append(
                {
                    "step": i,
                    "samples/step_generated": 100,
                    "update_norm": norms,
                    "samples/generated": 100 * i,
                    "samples/kept": 100 * i,
                }
            )
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    provenance = {
        "git_commit": "c0ffee",
        "config": {"train": {"sample_budget": budget, "allocation": rule, "pool_size": 4}},
    }
    if block:
        provenance["config"]["pool_block"] = {"size": block, "digits": 4, "seed": 1}
    (path / "provenance.json").write_text(json.dumps(provenance))


def test_the_study_measures_each_rule_against_uniform_grpos_targets(tmp_path) -> None:
    """Targets come from uniform GRPO's mean curve at 1/15, 1/5 and all of its budget; a rule whose
    curve runs ahead reaches them sooner, in samples read off by hand; the norm ratio is the control."""
    uniform = [0.25, 0.5, 0.5, 0.75, 0.75]
    faster = [0.25, 0.75, 0.75, 0.75, 0.75]
    for seed in range(3):
        _write_run(tmp_path / f"grpo-seed{seed}", "uniform", seed, uniform, 1.0)
        _write_run(tmp_path / f"grpo-knapsack-seed{seed}", "knapsack", seed, faster, 2.0)
    study = lm_allocation_study(tmp_path)
    # uniform's curve: 0.25 at 0, 0.5 at 100, 0.75 at 300; at 400/15 ≈ 26.7 samples it is 0.25 + 0.25·26.7/100
    expected = [0.25 + 0.25 * (400 / 15) / 100, 0.25 + 0.25 * 80 / 100, 0.75]
    assert study["targets"] == pytest.approx(expected)
    knapsack = study["cells"]["lm/adamw/grpo/knapsack"]
    uniform_cell = study["cells"]["lm/adamw/grpo/uniform"]
    # knapsack: 0.25 → 0.75 over the first 100 samples, so a target t is reached at 100 (t − 0.25)/0.5
    assert knapsack["samples_to_target"][2]["mean"] == pytest.approx(100.0)
    assert uniform_cell["samples_to_target"][2]["mean"] == pytest.approx(300.0)
    assert knapsack["samples_to_target"][1]["mean"] == pytest.approx(100 * (expected[1] - 0.25) / 0.5)
    assert knapsack["norm_ratio"]["mean"] == pytest.approx(2.0)
    assert study["seeds"] == {"uniform": 3, "knapsack": 3}
    assert study["commits"] == ["c0ffee"]
    # the hardest quarter (prompt 0) ends at k = round(4·0.45) = 2 of 4 under both rules
    assert study["quartiles"]["uniform"][0]["mean"] == pytest.approx(0.5)
    assert study["comparisons_counted"] == 3  # knapsack against uniform at three targets (no DAPO run)


def test_the_paired_comparison_by_hand() -> None:
    """Per-seed ratios b/a of samples to target, their geometric mean and a Student-t interval on the
    log ratio: equal ratios give a point; two seeds at ratios 1 and 4 give 2 with t(1 df) = 12.706."""
    from stddial_book.experiments.allocation.testbed_runs import paired_t_comparison

    def runs(values):
        return [{"samples_to_target": [v]} for v in values]

    exact = paired_t_comparison(runs([100, 200, 400]), runs([200, 400, 800]), 0)
    assert exact["ratio_b_over_a"] == pytest.approx(2.0) and exact["ratio_ci"] == pytest.approx([2.0, 2.0])
    assert exact["within_noise"] is False and exact["difference"] == pytest.approx(-700 / 3)
    noisy = paired_t_comparison(runs([100, 100]), runs([100, 400]), 0)
    half = 12.7062047 * np.log(4) / 2  # t · sd(log ratios) / √2, sd = log 4 / √2
    assert noisy["ratio_b_over_a"] == pytest.approx(2.0)
    assert noisy["ratio_ci"] == pytest.approx([2 * np.exp(-half), 2 * np.exp(half)], rel=1e-6)
    assert noisy["within_noise"] is True and noisy["interval"] == "Student t, 95%, 1 df"
    assert noisy["detectable_ratio"] == pytest.approx(np.exp((12.7062047 + 1.3763819) * np.log(4) / 2), rel=1e-6)
    never = paired_t_comparison(runs([100, float("nan")]), runs([200, 300]), 0)
    assert never["pairs"] == 1 and never["within_noise"] is None  # one pair: no comparison


def test_a_seed_some_rule_lacks_is_left_out_of_every_rule(tmp_path) -> None:
    """Comparisons pair runs by seed: a seed recorded under uniform only (a recording still going)
    is left out, so every rule is measured on the same seeds."""
    for seed in range(2):
        _write_run(tmp_path / f"grpo-seed{seed}", "uniform", seed, [0.25, 0.5, 0.5, 0.75, 0.75], 1.0)
    _write_run(tmp_path / "grpo-seed2", "uniform", 2, [0.25, 0.25, 0.25, 0.25, 0.25], 1.0)
    for seed in range(2):
        _write_run(tmp_path / f"grpo-knapsack-seed{seed}", "knapsack", seed, [0.25, 0.75, 0.75, 0.75, 0.75], 1.0)
    study = lm_allocation_study(tmp_path)
    assert study["seeds"] == {"uniform": 2, "knapsack": 2}
    assert study["targets"][2] == pytest.approx(0.75)  # seed 2's flat curve would have lowered it


def test_the_study_needs_uniform_grpo(tmp_path) -> None:
    _write_run(tmp_path / "grpo-knapsack-seed0", "knapsack", 0, [0.25, 0.5], 1.0, budget=100)
    with pytest.raises(ValueError, match="no uniform grpo run"):
        lm_allocation_study(tmp_path)


RECORDED = Path(__file__).resolve().parents[1] / "data" / "runs" / "allocation"


@pytest.mark.skipif(not RECORDED.is_dir(), reason="the recorded LM allocation runs are not in this checkout")
def test_the_shipped_summary_is_what_the_recorded_runs_give() -> None:
    """Chapter 16 reads the summary the package ships (the forty logs stay out of the wheel): it must
    be exactly what bench/bench_allocation_lm.py computes from the committed logs now."""
    from stddial_book.experiments.allocation.testbed_runs import LM_ALLOCATION_SUMMARY_FILE, lm_benchmark

    shipped, fresh = shipped_and_recomputed(LM_ALLOCATION_SUMMARY_FILE, lm_benchmark(RECORDED))
    assert set(shipped["seeds"]) == set(LM_RULES)


def shipped_and_recomputed(summary_file: tuple[str, str], study: dict) -> tuple[dict, dict]:
    """The summary the package ships (``summary_file`` under its data) and ``study``, the benchmark computed
    from the committed logs now, as JSON reads them back; fails unless the two agree (the bootstrap's
    version-dependent intervals and the shipped copy's ``analysed`` stamp aside)."""
    from stddial_book.experiments.allocation.testbed_runs import load_lm_summary

    shipped = load_lm_summary(summary_file)
    assert shipped is not None, f"data/{'/'.join(summary_file)} is missing: run its bench script"
    shipped.pop("analysed")
    fresh = json.loads(json.dumps(study))
    assert _same(_without_bootstrap_intervals(fresh), _without_bootstrap_intervals(shipped))
    return shipped, fresh


def _without_bootstrap_intervals(study: dict) -> dict:
    """``study`` without the cells' descriptive intervals, which come from scipy's bootstrap, whose draws
    depend on its version (.ci/lowest runs an older scipy): everything else must agree, the comparisons'
    t intervals included."""
    study.pop("bootstrap")
    for cell in study["cells"].values():
        for entry in (*cell["samples_to_target"], cell["accuracy_at_sample_budget"], cell["accuracy_at_step_budget"]):
            entry.pop("ci")
    for rows in study.get("quartiles", {}).values():  # the SmolLM2 study has none
        for entry in rows:
            entry.pop("ci")
    return study


def _same(a, b) -> bool:
    """Equal JSON values, floats to a relative 1e-6: another numpy or scipy rounds the last bits differently
    (scipy 1.11's Student-t quantile differs from 1.17's in the tenth digit: 1.2e-9 on one interval end)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return a == pytest.approx(b, rel=1e-6, nan_ok=True)
    return a == b


def test_kept_samples_and_the_silent_ceiling_by_hand() -> None:
    """The persistent study's ceiling (data/runs/persistent/PLAN.md): DAPO's generated samples to a
    target ÷ what it kept by then, per seed, geometric mean, Student-t interval on the logs."""
    from scipy import stats

    from stddial_book.experiments.allocation.testbed_runs import kept_at, silent_ceiling

    log_a = [
        {"step": 0},
        {"samples/generated": 100, "samples/kept": 50},
        {"samples/generated": 200, "samples/kept": 150},
    ]
    log_b = [{"samples/generated": 100, "samples/kept": 25}, {"samples/generated": 300, "samples/kept": 75}]
    assert kept_at(log_a, 150) == pytest.approx(100.0)  # halfway between 50 and 150
    assert kept_at(log_a, 40) == pytest.approx(20.0)  # from the origin
    assert np.isnan(kept_at(log_a, 201)) and np.isnan(kept_at(log_a, float("nan")))
    ceiling = silent_ceiling([{"samples_to_target": [150.0]}, {"samples_to_target": [200.0]}], [log_a, log_b], 0)
    assert ceiling["per_seed"] == pytest.approx([1.5, 4.0])  # 150/100; 200/50
    logs = np.log([1.5, 4.0])
    half = stats.t.ppf(0.975, 1) * logs.std(ddof=1) / np.sqrt(2)
    assert ceiling["value"] == pytest.approx(np.sqrt(6.0))
    assert ceiling["ratio_ci"] == pytest.approx([np.sqrt(6.0) * np.exp(-half), np.sqrt(6.0) * np.exp(half)])
    lone = silent_ceiling([{"samples_to_target": [float("nan")]}, {"samples_to_target": [200.0]}], [log_a, log_b], 0)
    assert lone["pairs"] == 1 and lone["ratio_ci"] == [None, None]


def test_block_accuracy_splits_the_pool_at_the_declared_block() -> None:
    from stddial_book.experiments.allocation.testbed_runs import block_accuracy

    log = [
        {"samples/generated": 0, "pool/k": [0, 0, 4, 8], "pool/n": 8},
        {"samples/generated": 64, "pool/k": [0, 2, 8, 8], "pool/n": 8},
    ]
    got = block_accuracy(log, 2)
    assert got == pytest.approx(
        {"block_start": 0.0, "block_end": 0.125, "block_silent_end": 0.5, "rest_start": 0.75, "rest_end": 1.0}
    )


PERSISTENT = Path(__file__).resolve().parents[1] / "data" / "runs" / "persistent"


@pytest.mark.skipif(not (PERSISTENT / "metrics.parquet").is_file(), reason="the persistent-silence runs are not here")
def test_the_shipped_persistent_summary_is_what_its_recorded_runs_give() -> None:
    """Chapter 16's persistent-silence section reads the summary the package ships: it must be exactly
    what bench/bench_allocation_persistent.py computes from the committed logs now, and the headline in
    bench/results/allocation.json must be its headline."""
    from stddial_book.experiments.allocation.testbed_runs import (
        PERSISTENT_RULES,
        PERSISTENT_SUMMARY_FILE,
        persistent_benchmark,
    )

    shipped, fresh = shipped_and_recomputed(PERSISTENT_SUMMARY_FILE, persistent_benchmark(PERSISTENT))
    assert shipped["seeds"] == dict.fromkeys(PERSISTENT_RULES, 5)
    assert shipped["secondary_knapsack_paper"]["seeds"]["knapsack_paper"] == 5
    bench = json.loads((PERSISTENT.parents[2] / "bench" / "results" / "allocation.json").read_text())
    assert _same(bench["samples_to_target_vs_dapo_persistent"], fresh["samples_to_target_vs_dapo"])
    # the block (171 four-digit sums) is declared by the profile the runs were recorded with
    assert shipped["block_size"] == 171


def test_the_persistent_benchmark_reads_the_block_from_the_runs_config(tmp_path) -> None:
    """persistent_benchmark on hand-made runs: the block size comes from each run's config (where
    record writes the profile's pool_block), the ceiling and the block accuracies from the logs."""
    from stddial_book.experiments.allocation.testbed_runs import PERSISTENT_RULES, persistent_benchmark

    for seed in (0, 1):
        for i, rule in enumerate(PERSISTENT_RULES):
            _write_run(
                tmp_path / (f"grpo-seed{seed}" if rule == "uniform" else f"grpo-{rule}-seed{seed}"),
                rule,
                seed,
                [0.25, 0.5, 0.75],
                1.0 + 0.1 * i + 0.05 * seed,
                budget=300,
                block=2,
            )
    study = persistent_benchmark(tmp_path)
    assert study["block_size"] == 2
    # at level 0.25 the four prompts hold k = round(4·(0.25 + [-0.3, -0.1, 0.1, 0.3])) = [0, 1, 1, 2] of 4
    assert study["blocks"]["uniform"]["block_start"] == pytest.approx(0.125)
    assert study["blocks"]["uniform"]["rest_start"] == pytest.approx(0.375)
    # these runs keep every sample they generate: no rule could save anything over DAPO for silence
    assert study["samples_to_target_vs_dapo"]["ceiling"]["value"] == pytest.approx(1.0)
    assert study["samples_to_target_vs_dapo"]["ceiling"]["pairs"] == 2


def test_each_pair_of_rules_is_counted_once_and_the_headline_follows_middle(tmp_path) -> None:
    """Uniform against DAPO is DAPO against uniform inverted: kept for reading, counted once. The headline is at
    the target index ``middle``, and a study without DAPO runs has no headline and no ceiling (no crash)."""
    uniform, faster = [0.25, 0.5, 0.5, 0.75, 0.75], [0.25, 0.75, 0.75, 0.75, 0.75]
    slower = [0.25, 0.25, 0.5, 0.5, 0.75]
    for seed in range(3):
        _write_run(tmp_path / f"grpo-seed{seed}", "uniform", seed, uniform, 1.0 + 0.1 * seed)
        _write_run(tmp_path / f"grpo-knapsack-seed{seed}", "knapsack", seed, faster, 1.0)
        _write_run(tmp_path / f"grpo-dapo-seed{seed}", "dapo", seed, slower, 1.0)
    study = lm_benchmark(tmp_path, rules=("uniform", "dapo", "knapsack"))
    inverse = study["comparisons"]["lm/adamw/grpo/uniform_vs_dapo/target1"]
    assert inverse["inverse_of"] == "lm/adamw/grpo/dapo_vs_uniform/target1"
    made = [c for c in study["comparisons"].values() if c["within_noise"] is not None]
    assert study["comparisons_counted"] == len(made) - 3  # one inverse a target
    assert study["expected_false_alarms"] == pytest.approx(0.05 * study["comparisons_counted"])
    assert study["samples_to_target_vs_dapo"]["best_rule"] == "knapsack"
    at_last = lm_benchmark(tmp_path, middle=2, rules=("uniform", "dapo", "knapsack"))
    last = at_last["comparisons"]["lm/adamw/grpo/knapsack_vs_dapo/target2"]["ratio_b_over_a"]
    assert at_last["samples_to_target_vs_dapo"]["value"] == pytest.approx(last)
    assert at_last["samples_to_target_vs_dapo"]["ceiling"]["value"] == pytest.approx(1.0)
    for seed in range(3):  # DAPO among the rules asked for, but not recorded
        _write_run(tmp_path / "no_dapo" / f"grpo-seed{seed}", "uniform", seed, uniform, 1.0)
        _write_run(tmp_path / "no_dapo" / f"grpo-knapsack-seed{seed}", "knapsack", seed, faster, 1.0)
    no_dapo = lm_benchmark(tmp_path / "no_dapo", rules=("uniform", "dapo", "knapsack"))
    assert no_dapo["samples_to_target_vs_dapo"]["value"] is None and "ceiling_vs_dapo" not in no_dapo
