"""Part V on SmolLM2 (stddial_book.experiments.allocation.smollm2_runs): the descriptive numbers by hand, and
the whole analysis on hand-made run logs laid out as the engine writes them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stddial_book.experiments.allocation.smollm2_runs import (
    SMOLLM2_RULES,
    generated_silence,
    heldout_ends,
    paired_change,
    silence_persistence,
    smollm2_benchmark,
)


def _log(pool_k, heldout, silent, step_samples: int = 100) -> list[dict]:
    """A run log: one measurement row (pool k of n = 2, held-out accuracies) per entry of ``pool_k`` at
    0, step_samples, ... generated samples, one training row between measurements."""
    rows = []
    for i, (k, acc) in enumerate(zip(pool_k, heldout)):
        if i:
            rows.append(
                {
                    "step": i,
                    "dial/silent_fraction": silent[i - 1],
                    "samples/step_generated": step_samples,
                    "samples/generated": step_samples * i,
                    "samples/kept": step_samples * i,
                    "update_norm": 1.0,
                }
            )
        rows.append(
            {
                "step": i,
                "pool/k": list(k),
                "pool/n": 2,
                "samples/generated": step_samples * i,
                "eval/accuracy_sampled": acc,
                "eval/accuracy_greedy": acc + 0.1,
            }
        )
    return rows


def test_the_held_out_ends_are_the_first_and_last_evaluations() -> None:
    log = _log([[0, 0], [1, 0], [2, 1]], [0.1, 0.3, 0.4], [0.5, 0.25])
    assert heldout_ends(log) == pytest.approx(
        {"sampled_start": 0.1, "sampled_end": 0.4, "greedy_start": 0.2, "greedy_end": 0.5}
    )
    with pytest.raises(ValueError, match="no held-out evaluation"):
        heldout_ends([{"step": 1, "reward": 0.5}])


def test_the_persistence_of_silence_by_hand() -> None:
    # four questions, 2 samples each: unsolved at the start 0 and 1; at the end only 0
    log = _log([[0, 0, 1, 2], [0, 1, 2, 2]], [0.0, 0.0], [0.5])
    assert silence_persistence(log) == pytest.approx(
        {"unsolved_start": 0.5, "unsolved_end": 0.25, "unsolved_both": 0.25, "still_unsolved": 0.5}
    )


def test_the_generated_silence_averages_each_end_of_the_run() -> None:
    log = _log([[0]] * 7, [0.0] * 7, [1.0, 0.8, 0.6, 0.4, 0.2, 0.0])
    assert generated_silence(log, steps=2) == pytest.approx({"first": 0.9, "last": 0.1})
    with pytest.raises(ValueError, match="no training step"):
        generated_silence([{"step": 0, "pool/k": [0], "pool/n": 2}])


def test_the_paired_change_is_students_t_by_hand() -> None:
    from scipy import stats

    before, after = [0.1, 0.2, 0.15], [0.3, 0.35, 0.4]
    diff = np.subtract(after, before)
    half = stats.t.ppf(0.975, 2) * diff.std(ddof=1) / np.sqrt(3)
    change = paired_change(before, after)
    assert change["mean"] == pytest.approx(diff.mean())
    assert change["ci"] == pytest.approx([diff.mean() - half, diff.mean() + half])
    assert paired_change([0.1], [0.2])["ci"] == [None, None]


def _write(path, log, seed: int) -> None:
    path.mkdir(parents=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
    provenance = {"git_commit": "c0ffee", "seed": seed, "config": {"train": {"sample_budget": 400, "pool_size": 4}}}
    (path / "provenance.json").write_text(json.dumps(provenance))


def test_the_study_on_hand_made_runs(tmp_path) -> None:
    """Every rule on three seeds; greso's pool curve runs ahead of the others, so it is the best rule, and the
    headline is DAPO ÷ greso with the ceiling beside it; the descriptive numbers are the seeds' means."""
    slow = [[0, 0, 1, 1], [0, 1, 1, 2], [0, 1, 2, 2], [1, 1, 2, 2], [1, 2, 2, 2]]
    fast = [[0, 0, 1, 1], [1, 1, 2, 2], [1, 2, 2, 2], [2, 2, 2, 2], [2, 2, 2, 2]]
    for seed in range(3):
        for rule in SMOLLM2_RULES:
            name = f"grpo-seed{seed}" if rule == "uniform" else f"grpo-{rule}-seed{seed}"
            curve = fast if rule == "greso" else slow
            heldout = [0.1, 0.2, 0.3, 0.3, 0.4 + 0.05 * seed]
            _write(tmp_path / name, _log(curve, heldout, [0.5, 0.4, 0.3, 0.2]), seed)
    study = smollm2_benchmark(tmp_path)
    assert study["seeds"] == dict.fromkeys(SMOLLM2_RULES, 3)
    assert study["samples_to_target_vs_dapo"]["best_rule"] == "greso"
    assert study["samples_to_target_vs_dapo"]["value"] > 1.0
    assert study["samples_to_target_vs_dapo"]["ceiling"]["value"] == pytest.approx(1.0)  # nothing discarded
    assert study["heldout"]["dapo"]["sampled_end"] == pytest.approx(0.45)
    assert study["heldout"]["dapo"]["sampled_change"]["mean"] == pytest.approx(0.35)
    assert study["persistence"]["greso"]["unsolved_start"] == pytest.approx(0.5)
    assert study["persistence"]["greso"]["unsolved_end"] == 0.0
    assert study["generated_silence"]["uniform"] == pytest.approx({"first": 0.35, "last": 0.35})
    assert study["pool_size"] == 4
    assert study["seed_ids"] == [0, 1, 2] and "quartiles" not in study
    # greso is fastest; besides DAPO that is still greso, with the same comparison as the headline's
    assert study["fastest_besides_dapo"]["rule"] == "greso"
    assert study["fastest_besides_dapo"]["ratio_b_over_a"] == pytest.approx(study["samples_to_target_vs_dapo"]["value"])
    assert study["measured_at"] == [0.0, 100.0, 200.0, 300.0, 400.0]
    generated, accuracy = study["pool_curves"]["greso"][2]
    assert generated == study["measured_at"] and accuracy == pytest.approx([0.25, 0.75, 0.875, 1.0, 1.0])


RECORDED = Path(__file__).resolve().parents[1] / "data" / "runs" / "smollm2_allocation"


@pytest.mark.skipif(not (RECORDED / "metrics.parquet").is_file(), reason="the SmolLM2 allocation runs are not here")
def test_the_shipped_smollm2_summary_is_what_its_recorded_runs_give() -> None:
    """Chapter 16's SmolLM2 section reads the summary the package ships: it must be what
    bench/bench_allocation_smollm2.py computes from the committed logs now, and the key in
    bench/results/allocation.json its headline."""
    from test_allocation_testbed_runs import _same, shipped_and_recomputed

    from stddial_book.experiments.allocation.smollm2_runs import SMOLLM2_SUMMARY_FILE

    shipped, fresh = shipped_and_recomputed(SMOLLM2_SUMMARY_FILE, smollm2_benchmark(RECORDED))
    assert shipped["seeds"] == dict.fromkeys(SMOLLM2_RULES, 3)
    bench = json.loads((RECORDED.parents[2] / "bench" / "results" / "allocation.json").read_text())
    assert _same(bench["samples_to_target_vs_dapo_real"], fresh["samples_to_target_vs_dapo"])


def test_the_fastest_rule_besides_dapo_when_dapo_is_fastest() -> None:
    """When DAPO itself is the fastest rule (the primary's ratio is then 1 by construction), the rule to read
    beside it is the fastest of the others that reached the target on every seed."""
    from stddial_book.experiments.allocation.smollm2_runs import fastest_besides_dapo

    def cell(mean, reached):
        return {"seeds": 3, "samples_to_target": [{}, {"mean": mean, "reached": reached}]}

    study = {
        "cells": {
            "lm/adamw/grpo/dapo": cell(100.0, 3),
            "lm/adamw/grpo/uniform": cell(200.0, 3),
            "lm/adamw/grpo/greso": cell(150.0, 2),  # faster, but missed the target on one seed
        },
        "comparisons": {"lm/adamw/grpo/uniform_vs_dapo/target1": {"ratio_b_over_a": 0.5}},
    }
    assert fastest_besides_dapo(study) == {"rule": "uniform", "ratio_b_over_a": 0.5}
    study["cells"]["lm/adamw/grpo/uniform"] = cell(None, 0)
    assert fastest_besides_dapo(study) is None


@pytest.mark.skipif(not (RECORDED / "metrics.parquet").is_file(), reason="the SmolLM2 allocation runs are not here")
def test_the_recorded_runs_are_the_plans_from_one_clean_commit_that_holds_it() -> None:
    """Every run the plan names and no other, each with the plan's settings (tools/record_smollm2_allocation.py's
    plan_config), from one commit with nothing uncommitted, on a CPU; that commit holds the plan, added in it or
    before it (needs git and the repository's history; CI's clone has both)."""
    from conftest import load_tool, plan_precedes

    from stddial_book.bridges.smollm2 import SMOLLM2_SHA256
    from stddial_book.rl.runlog import load_run, run_folders

    tool = load_tool("record_smollm2_allocation")
    expected = {tool.run_name(rule, seed): (rule, seed) for rule in tool.RULES for seed in (0, 1, 2)}
    commits, names = set(), []
    for run in run_folders(RECORDED):
        provenance, _ = load_run(run)
        rule, seed = expected[run.name]
        names.append(run.name)
        commits.add(provenance["git_commit"])
        assert provenance["dirty"] is False and provenance["device"].startswith("cpu"), run.name
        planned = json.loads(json.dumps(tool.plan_config(rule, seed).to_dict()))
        assert provenance["config"]["train"] == planned, run.name
        policy = provenance["config"]["policy"]
        assert (policy["model"], policy["dtype"], policy["verifier"]) == (
            f"{SMOLLM2_SHA256[:16]}-float32",
            "float32",
            "verify_last_number",
        )
        assert (policy["lora"]["lora_r"], policy["lora"]["lora_alpha"], policy["lora"]["seed"]) == (16, 32, seed)
        assert policy["system_prompt"] == tool.SYSTEM_PROMPT
    assert sorted(names) == sorted(expected) and len(commits) == 1
    assert plan_precedes("data/runs/smollm2_allocation/PLAN.md", commits.pop()), (
        "the runs' commit does not hold the plan"
    )
