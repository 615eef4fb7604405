"""The cost accounting behind the "This edition" page's GPU estimate (stddial_book.rl.costs)."""

from __future__ import annotations

import math

import pytest

from stddial_book.rl import costs
from stddial_book.rl.profiles import PROFILES, Profile


def _profile(**train) -> Profile:
    base = PROFILES["quick"]
    return Profile(
        "t",
        "cpu",
        "test",
        model=dict(base.model),
        task=dict(base.task),
        sft=dict(base.sft),
        train=dict(base.train, **train),
        seeds=(0,),
    )


def test_run_work_counts_a_hand_worked_run() -> None:
    # prompts "999+999=" are 8 tokens, the cap is 8: a sequence of 16 tokens, 15 processed when
    # sampling (the last token is never fed back)
    profile = _profile(
        prompts_per_step=2,
        group_size=4,
        num_minibatches=2,
        sample_budget=24,
        eval_every=2,
        eval_samples=3,
        pool_size=5,
        pool_samples=2,
        max_new_tokens=8,
    )
    profile.task["num_heldout"] = 10
    assert costs._lengths(profile) == (8, 8)
    work = costs.run_work(profile, "dr_grpo")
    steps, per_step = 3, 8  # ceil(24 / 8)
    evals = steps // 2 + 1  # at the start and at step 2
    eval_sequences = 10 * 3 + 10 + 5 * 2  # sampled, greedy, pool
    assert work.train_passes == steps * 2 and work.train_tokens == steps * per_step * 16
    assert work.forward_passes == 0  # Dr. GRPO has no KL penalty
    assert work.generate_tokens == (steps * per_step + evals * eval_sequences) * 15
    assert work.generate_passes == steps * 8 + evals * 3 * 8  # three chunks of at most 256 per evaluation
    grpo = costs.run_work(profile, "grpo")  # the KL reference model's forward passes
    assert grpo.forward_passes == steps * 2 and grpo.forward_tokens == steps * per_step * 16


def test_flops_and_the_estimate_take_the_larger_of_overhead_and_arithmetic() -> None:
    work = costs.RunWork(generate_passes=10, generate_tokens=1000, train_passes=4, train_tokens=400)
    assert work.flops(5) == 2 * 5 * 1000 + 6 * 5 * 400
    # arithmetic per generate pass: 2*5*100/1000 = 1 s; per train pass 6*5*100/1000 = 3 s
    overheads = {"generate_s": 0.5, "train_s": 7.0}
    assert costs.estimate_seconds(work, 5, overheads, 1000.0) == pytest.approx(10 * 1.0 + 4 * 7.0)
    assert (work + work).train_tokens == 800


def test_the_skeleton_dispatches_the_same_tensors_with_little_arithmetic() -> None:
    from stddial_book.rl.model import tiny_model

    profile = PROFILES["full"]
    real, skeleton = tiny_model(**profile.model), tiny_model(**costs.skeleton_config(profile))
    assert len(list(real.parameters())) == len(list(skeleton.parameters()))
    assert sum(p.numel() for p in skeleton.parameters()) < sum(p.numel() for p in real.parameters()) / 100
    assert costs.parameter_count(profile) == sum(p.numel() for p in real.parameters())


def test_measured_overheads_and_throughput_are_positive_and_the_estimate_scales_with_seeds() -> None:
    profile = PROFILES["quick"]
    overheads = costs.measure_overheads(profile, repeats=3)
    assert all(0 < v < 5 for v in overheads.values())
    assert 1e8 < costs.measure_cpu_throughput(profile, rows=16, repeats=1) < 1e13
    estimate = costs.full_profile_estimates(overheads)
    chapters = estimate["chapters"]
    assert set(chapters) == {"09_testbed", "10_grpo_run", "11_dr_grpo_run", "12_dapo_run"}
    full = PROFILES["full"]
    one_run = costs.estimate_seconds(
        costs.run_work(full, "dapo"), estimate["num_params"], overheads, estimate["throughput"]
    )
    assert math.isclose(chapters["12_dapo_run"], len(full.seeds) * one_run)
    assert chapters["10_grpo_run"] > chapters["11_dr_grpo_run"]  # GRPO's KL reference passes
    check = costs.check_on_cpu(profile, "grpo", [10.0, 1.0, 30.0], overheads, 1e10)
    assert check["measured_s"] == 10.0 and check["ratio"] == pytest.approx(10.0 / check["predicted_s"])
