"""The language-model run of chapter 15 on its tiny CPU path: TRL trains a local random-init Qwen2 model
for two steps per recipe, the dial callback records its diagnostics, the rewards verify with math-verify,
the hub path refuses at once offline, and the dtype follows the device's capability."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")
pytest.importorskip("math_verify")

from stddial_book.bridges.lm_data import (
    build_tiny_model,
    gsm8k_gold,
    load_model_and_tokenizer,
    load_prompts,
    write_tiny_gsm8k,
)
from stddial_book.bridges.lm_diagnostics import batch_diagnostics
from stddial_book.bridges.lm_rewards import CorrectnessReward, FormatReward, has_format, is_correct
from stddial_book.bridges.lm_run import run_lm
from stddial_book.bridges.lm_setup import (
    colab_t4_config,
    precision_for,
    time_estimate,
    tiny_config,
)

pytestmark = pytest.mark.trl


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    data = write_tiny_gsm8k(root / "tiny.jsonl")
    model = build_tiny_model(root / "model", data)
    return root, tiny_config(str(model), str(data))


@pytest.mark.parametrize("recipe", ["grpo", "dr_grpo", "dapo"])
def test_tiny_run_trains_two_steps_and_logs_the_dial(tiny, recipe):
    root, config = tiny
    result = run_lm(recipe, config, root / f"work-{recipe}")
    records = result["records"]
    assert [r["step"] for r in records] == [1, 2]
    for record in records:
        assert record["groups"] == config.prompts_per_step
        assert sum(record["k_counts"]) == config.prompts_per_step
        assert 0.0 <= record["silent_fraction"] <= 1.0
        assert record["mass_in_silent"] == 0.0
        assert record["advantage_gap"] < 1e-5  # TRL's advantages are the book's (TRL-equivalent recipe)
        if recipe == "dapo":  # the length penalty shapes the reward: the closed form does not apply
            assert record["identity_gap"] is None and "shaped" in record["identity_note"]
        else:
            assert record["identity_gap"] < 1e-5
        assert record["elapsed_s"] > 0 and "eta_s" in record
    assert result["precision"]["dtype"] == "float32"
    assert result["settings"]["scale_rewards"] == ("none" if recipe == "dr_grpo" else "group")
    gaps = {g["knob"] for g in result["gaps"]}
    assert ("dynamic_sampling" in gaps) == (recipe == "dapo")
    assert result["memory_gib"]["total"] > 0


@pytest.mark.parametrize("recipe", ["grpo", "dr_grpo", "dapo"])
def test_fewer_completions_a_pass_give_the_same_steps(tiny, recipe):
    """--micro-batch-size is a memory knob: TRL accumulates the passes of a step into one update, so a step of
    64 completions in 4 passes of 16 trains as in one pass of 64 (same samples, gradient norms to float32
    rounding), for each recipe's loss, DAPO's token-level normalisation included. Three steps at a large
    rate, so that the updates change what the next steps sample."""
    root, config = tiny
    history = {}
    for micro in (64, 16):
        sized = config.replace(
            prompts_per_step=8, group_size=8, max_steps=3, micro_batch_size=micro, learning_rate=0.02
        )
        result = run_lm(recipe, sized, root / f"micro-{recipe}-{micro}")
        history[micro] = [(h["reward"], h["grad_norm"]) for h in result["history"] if "grad_norm" in h]
    assert len(history[64]) == 3 and [r for r, _ in history[64]] == [r for r, _ in history[16]]
    assert [g for _, g in history[16]] == pytest.approx([g for _, g in history[64]], rel=1e-4, abs=1e-8)
    assert any(g > 0 for _, g in history[64])  # the steps moved the weights


def test_diagnostics_of_a_hand_batch():
    # G = 4: one silent group (0 of 4), one at 1 of 4, one at 2 of 4
    passed = np.array([0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0], dtype=bool)
    rewards = passed.astype(float)
    groups = rewards.reshape(-1, 4)
    std = groups.std(axis=1, ddof=1, keepdims=True)
    adv = ((groups - groups.mean(axis=1, keepdims=True)) / (std + 1e-4)).reshape(-1)
    record = batch_diagnostics(passed, rewards, adv, 4, "grpo")
    assert record["k_counts"] == [1, 1, 1, 0, 0]
    assert record["silent_fraction"] == pytest.approx(1 / 3)
    assert record["sigma_mean"] == pytest.approx((0 + np.sqrt(3) / 4 + 0.5) / 3)
    assert record["advantage_gap"] < 1e-12 and record["identity_gap"] < 1e-12
    assert sum(record["mass_by_band"]) == pytest.approx(1.0)
    assert record["mass_by_band"][2] == 0.0 and record["mass_by_band"][0] > 0 and record["mass_by_band"][1] > 0


def test_rewards_verify_with_math_verify_and_format_is_separate():
    assert gsm8k_gold("She has 3 + 4 = <<3+4=7>>7 apples.\n#### 1,234") == "1234"
    assert is_correct("So the total is \\boxed{72}.", "72")
    assert is_correct("3 + 4 = 7, so she has 7 apples", "7")  # no box: the last number
    assert is_correct("\\boxed{\\frac{144}{2}}", "72")  # equivalence, not string match
    assert not is_correct("\\boxed{71}", "72")
    assert not is_correct("no number here", "72")
    # a format-only answer: boxed, wrong
    completions = [[{"role": "assistant", "content": "\\boxed{5}"}], "the answer is 72", "\\boxed{72}"]
    correct = CorrectnessReward(1.0, -1.0)(completions, ["72", "72", "72"])
    assert correct == [-1.0, 1.0, 1.0]
    assert FormatReward()(completions) == [1.0, 0.0, 1.0]
    assert not has_format("\\boxed{1} or \\boxed{2}")


def test_hub_path_refuses_at_once_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RuntimeError, match="HF_HUB_OFFLINE is set"):
        load_prompts("openai/gsm8k", "main")
    with pytest.raises(RuntimeError, match="not a local path"):
        load_model_and_tokenizer("stddial-book-test/no-such-model")


def test_dtype_follows_the_capability():
    assert precision_for("cuda", (7, 5))["dtype"] == "float16"  # T4
    assert precision_for("cuda", (8, 0))["dtype"] == "bfloat16"  # A100
    assert precision_for("cuda", (9, 0))["bf16"] is True
    assert precision_for("cpu") == {"device": "cpu", "dtype": "float32", "bf16": False, "fp16": False}
    with pytest.raises(ValueError):
        precision_for("cuda")


def test_detect_precision_reads_the_mocked_gpu(monkeypatch):
    import torch

    from stddial_book.bridges.lm_setup import detect_precision

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert detect_precision()["fp16"] is True


def test_t4_estimate_is_about_half_an_hour():
    minutes = time_estimate(colab_t4_config(), num_params=494_032_768)["minutes"]
    assert 25 <= minutes <= 45
