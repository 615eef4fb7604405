"""The numbers chapters 9-12 glue: one run's summary, the warm start, the held-out start, the pool,
the profile and resource tables (stddial_book.experiments.testbed.logs, 'one run, and the testbed, in numbers')."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from stddial_book.experiments.testbed import logs
from stddial_book.experiments.testbed import numbers as testbed_numbers
from stddial_book.rl.evaluate import EvalResult
from stddial_book.rl.profiles import PROFILES
from stddial_book.rl.tasks import make_problem

S1, S2 = math.sqrt(3) / 4, 0.5  # σ of k = 1 (or 3) and k = 2 correct of G = 4


def run_log() -> list[dict]:
    """Step 0 (evaluation only) and five training steps of a G = 4 run with two buckets."""
    records = [
        {
            "step": 0,
            "eval/accuracy_sampled": 0.25,
            "eval/accuracy_greedy": 0.5,
            "eval/accuracy_sampled/D2": 0.4,
            "eval/accuracy_sampled/D3": 0.1,
        }
    ]
    for step in range(1, 6):
        records.append(
            {
                "step": step,
                "samples/generated": 16 * step,
                "samples/kept": 12 * step,
                "updates": 2 * step,
                "dial/silent_fraction": 0.1 * step,
                "completions/mean_length": float(step),
                "groups/sigma": [round(S1, 6), 0.0, round(S2, 6), round(S1, 6)],
                "groups/weight": [round(S1, 6), 0.0, round(S2, 6), round(S1, 6)],
            }
        )
    records[-1].update(
        {
            "eval/accuracy_sampled": 0.75,
            "eval/accuracy_greedy": 1.0,
            "eval/accuracy_sampled/D2": 0.9,
            "eval/accuracy_sampled/D3": 0.6,
        }
    )
    return records


def test_mass_by_sigma_splits_groups_and_weights_by_level() -> None:
    shares = logs.mass_by_sigma(run_log(), 4)
    assert shares["k"].tolist() == [1, 2]
    assert shares["sigma"] == pytest.approx([S1, S2])
    assert shares["groups"] == pytest.approx([2 / 3, 1 / 3])  # the silent group counts in neither
    assert shares["mass"] == pytest.approx([2 * S1 / (2 * S1 + S2), S2 / (2 * S1 + S2)], abs=1e-6)
    assert shares["mass"][0] == pytest.approx(logs.extreme_mass_share(run_log(), 4))
    with pytest.raises(ValueError, match="no k of G = 6"):
        logs.mass_by_sigma(run_log(), 6)  # σ = 0.433 is k = 1 of 4 (or 2 of 8), no k of 6
    silent = [{"step": 1, "groups/sigma": [0.0], "groups/weight": [0.0]}]
    with pytest.raises(ValueError, match="every group was silent"):
        logs.mass_by_sigma(silent, 4)


def test_run_summary_reads_first_and_last_evaluation_and_step_means() -> None:
    provenance = {"profile": "quick", "device": "cpu (test)", "wall_time_s": 12.5}
    out = logs.run_summary(provenance, run_log(), 4)
    assert (out["profile"], out["device"], out["time"], out["G"]) == ("quick", "cpu (test)", 12.5, 4)
    assert (out["samples"], out["kept"], out["updates"]) == (80, 60, 10)
    assert (out["acc0"], out["acc1"], out["greedy0"], out["greedy1"]) == (0.25, 0.75, 0.5, 1.0)
    assert (out["acc0_D2"], out["acc1_D2"], out["acc0_D3"], out["acc1_D3"]) == (0.4, 0.9, 0.1, 0.6)
    assert out["silent"] == pytest.approx(0.3)  # mean of 0.1 .. 0.5
    assert out["len0"] == pytest.approx(2.5) and out["len1"] == pytest.approx(3.5)  # steps 1-4 and 2-5
    assert out["extreme"] == pytest.approx(2 * S1 / (2 * S1 + S2), abs=1e-6)
    with pytest.raises(ValueError, match="no training step"):
        logs.run_summary(provenance, run_log()[:1], 4)
    with pytest.raises(TypeError, match="provenance"):
        logs.run_summary([provenance], run_log(), 4)


def test_warm_start_numbers_reads_sft_json(tmp_path) -> None:
    (tmp_path / "sft.json").write_text(
        json.dumps(
            {
                "steps": 700,
                "pass_rate": 0.41,
                "stop_estimate": 0.45,
                "reached": True,
                "target_pass_rate": 0.3,
                "pass_rate_samples": 4096,
                "wall_time_s": 99.0,
            }
        )
    )
    assert testbed_numbers.warm_start_numbers(tmp_path) == {
        "steps": 700,
        "stop": 0.45,
        "target": 0.3,
        "pass": 0.41,
        "pass_n": 4096,
        "time": 99.0,
    }
    (tmp_path / "sft.json").write_text(
        json.dumps({"steps": 9, "pass_rate": 0.3, "target_pass_rate": 0.3, "wall_time_s": 1.0})
    )  # recorded before the re-measurement
    assert testbed_numbers.warm_start_numbers(tmp_path)["stop"] is None
    with pytest.raises(ValueError, match="does not exist"):
        testbed_numbers.warm_start_numbers(tmp_path / "nowhere")


def held_out() -> tuple[EvalResult, list]:
    """Five problems: D = 2 with 0, 1 and 1 carries, D = 3 with 0 and 3 carries; 4 samples each."""
    problems = [
        make_problem(10, 10, 2),
        make_problem(15, 15, 2),
        make_problem(19, 19, 2),
        make_problem(100, 100, 3),
        make_problem(999, 1, 3),
    ]
    assert [p.carries for p in problems] == [0, 1, 1, 0, 3]
    successes = np.array([4, 1, 3, 2, 0])
    buckets = np.array(["D2", "D2", "D2", "D3", "D3"])
    evaluation = EvalResult(
        greedy=0.6,
        sampled=float((successes / 4).mean()),
        greedy_by_bucket={},
        sampled_by_bucket={"D2": 8 / 12, "D3": 2 / 8},
        successes=successes,
        num_samples=4,
        buckets=buckets,
    )
    return evaluation, problems


def test_pass_rate_by_carries_and_heldout_start() -> None:
    evaluation, problems = held_out()
    by_carries = testbed_numbers.pass_rate_by_carries(evaluation, problems)
    assert by_carries["D2"][0].tolist() == [0, 1] and by_carries["D2"][1].tolist() == [1.0, 0.5]
    assert by_carries["D3"][0].tolist() == [0, 3] and by_carries["D3"][1].tolist() == [0.5, 0.0]
    out = testbed_numbers.heldout_start(evaluation, problems)
    assert out["G"] == 4 and out["greedy"] == 0.6
    assert out["silent"] == pytest.approx(2 / 5) and out["mixed"] == pytest.approx(3 / 5)  # 4 of 4 and 0 of 4
    assert out["carry_spread_D2"] == pytest.approx(0.5) and out["carry_spread_D3"] == pytest.approx(0.5)
    assert out["sampled_D2"] == pytest.approx(8 / 12)
    with pytest.raises(ValueError, match="in order"):
        testbed_numbers.pass_rate_by_carries(evaluation, problems[:4])


def pool_log(first: list[int], last: list[int], n: int = 8) -> list[dict]:
    return [{"step": 0, "pool/k": first, "pool/n": n}, {"step": 4, "pool/k": last, "pool/n": n}]


def test_pool_start_and_silent_sides_are_unbiased_estimates() -> None:
    problems = [make_problem(10, 10, 2), make_problem(11, 11, 2), make_problem(100, 100, 3)]
    records = pool_log([0, 8, 4], [2, 8, 6])
    out = testbed_numbers.pool_start(records, problems, 4)
    assert out["samples"] == 8 and out["mean"] == pytest.approx(0.5)
    assert out["mean_D2"] == pytest.approx(0.5) and out["mean_D3"] == pytest.approx(0.5)
    assert out["zero"] == pytest.approx(1 / 3)
    # a group of 4 drawn from 8 samples with 4 correct is silent with probability 2 / C(8, 4)
    assert out["silent"] == pytest.approx((1 + 1 + 2 / 70) / 3)
    sides = testbed_numbers.silent_sides(records, 4)
    assert sides["step"].tolist() == [0, 4] and sides["mean"] == pytest.approx([0.5, 2 / 3])
    assert sides["all_wrong"][0] == pytest.approx((1 + 0 + 1 / 70) / 3)
    assert sides["all_right"][0] == pytest.approx((0 + 1 + 1 / 70) / 3)
    # k = 2 of 8: all wrong with probability C(6, 4) / C(8, 4); k = 6: all right with the same
    assert sides["all_wrong"][1] == pytest.approx((15 / 70) / 3)
    assert sides["all_right"][1] == pytest.approx((1 + 15 / 70) / 3)
    with pytest.raises(ValueError, match="training problems"):
        testbed_numbers.pool_start(records, problems[:2], 4)


def test_pool_gain_against_measurement_noise() -> None:
    runs = [pool_log([0, 8, 4], [2, 8, 6]), pool_log([4, 4, 4], [4, 4, 8])]
    out = testbed_numbers.pool_gain(runs)
    assert out["gain"] == pytest.approx(((16 / 24 - 12 / 24) + (16 / 24 - 12 / 24)) / 2)
    noise = math.sqrt((0 + 0 + 0.25) / 8) / 3  # p = 0, 1, 1/2 at the first run's start
    assert out["noise"] == pytest.approx(noise)
    assert out["gain_ratio"] == pytest.approx(out["gain"] / noise)
    with pytest.raises(ValueError, match="non-empty"):
        testbed_numbers.pool_gain([])


def test_parameter_counts_match_the_llama_layout() -> None:
    counts = testbed_numbers.parameter_counts({"quick": PROFILES["quick"]})
    V, h, i, layers = 14, 128, 512, 4  # tied embeddings; q, k, v, o; gate, up, down; two norms a layer
    assert counts == {"quick": V * h + layers * (4 * h * h + 3 * h * i + 2 * h) + h}


def test_profile_and_resource_tables_are_one_column_per_profile() -> None:
    header, rows = testbed_numbers.profile_table(PROFILES, dict.fromkeys(PROFILES, 2000000))
    assert header == ["setting", *PROFILES]
    assert all(len(row) == len(header) for row in rows)
    assert {r[0]: r[1:] for r in rows}["parameters"] == ["2.00 M"] * len(PROFILES)
    sft = {"wall_time_s": 100.4}
    run = {
        "device": "cpu (test)",
        "wall_time_s": 30.6,
        "peak_rss_mb": 800.2,
        "config": {"train": {"sample_budget": 8192}},
    }
    live = testbed_numbers.run_resources(sft, run)
    assert live == {
        "device": "cpu (test)",
        "sft_s": 100.4,
        "run_s": 30.6,
        "rss_mb": 800.2,
        "gpu_mb": None,
        "samples": 8192,
    }
    header, rows = testbed_numbers.resource_table({"quick": live, "other": dict(live, gpu_mb=512.0)})
    table = {r[0]: r[1:] for r in rows}
    assert header == ["", "quick", "other"]
    assert table["peak GPU memory (MB)"] == ["–", "512"] and table["RL run (s)"] == ["31", "31"]
    assert table["samples per run"] == ["8,192", "8,192"]
    with pytest.raises(TypeError, match="provenance"):
        testbed_numbers.run_resources(None, run)
