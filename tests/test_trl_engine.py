"""The engine against TRL's GRPOTrainer on one shared batch of a Hugging Face policy's completions (issue 37).

The engine samples the batch (each prompt's G completions on its shared KV cache) with fresh LoRA adapters;
the adapters are then moved (B drawn at random), so the policy differs from π_old (the sampler's log-probs,
given to both sides: the clip binds on some tokens) and from π_ref (the base model: the KL term is not zero).
TRL's ``_generate_and_score_completions`` and ``_compute_loss`` and the engine's ``group_advantages``,
``shared_prompt_logprobs`` and ``policy_loss`` then take advantages, loss and LoRA gradients of that batch
(bridges.trl_engine.policy_trl_check).

Tolerances reached, float32 throughout (GRPO, Dr. GRPO): on the tiny Qwen2 model the losses agree to a relative
4.7e-7, 6.1e-7 and the LoRA gradients to 1.0e-6, 1.3e-6 of their largest entry (asserted: 1e-5); on
SmolLM2-135M-Instruct (30 layers, 420 LoRA tensors, 16 completions of up to 16 tokens) the losses to 4.5e-5,
1.4e-5 and the gradients to 2.1e-5, 2.4e-5 (asserted: 1e-4). TRL takes advantages in float32, the engine in
float64: they agree to 1e-8. Without TRL these tests are skipped, or fail under ``CI_STRICT=1``.
"""

from __future__ import annotations

import os
from importlib import metadata

import numpy as np
import pytest
import torch
from test_hf_policy import HELD_OUT, POOL, odd_length, warm_start

from stddial_book.bridges.lm_data import build_tiny_model
from stddial_book.bridges.lm_pool import ANSWER_PROMPT
from stddial_book.bridges.trl_engine import policy_trl_check, shared_batch
from stddial_book.rl.hf_policy import hf_policy
from stddial_book.rl.text_tasks import read_text_problems

pytestmark = pytest.mark.trl


@pytest.fixture(scope="module", autouse=True)
def trl():
    try:
        import trl as module
    except ImportError:
        if os.environ.get("CI_STRICT") == "1":
            pytest.fail("TRL is not installed in a strict CI run: pip install -r bench/requirements-trl.txt")
        pytest.skip("TRL is not installed (pip install -r bench/requirements-trl.txt)")
    return module


def move_adapters(policy, scale: float, seed: int = 0) -> None:
    """Draw the adapters' B matrices at random (LoRA starts them at 0): π_θ moves away from π_old and π_ref."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * scale)


def check(recipe, policy, problems, *, group_size, max_new_tokens, scale, workdir, seed=1):
    rows, rollout = shared_batch(policy, problems, group_size=group_size, max_new_tokens=max_new_tokens, seed=seed)
    move_adapters(policy, scale)
    return policy_trl_check(
        recipe, policy, rows, rollout, group_size=group_size, max_new_tokens=max_new_tokens, workdir=workdir
    )


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    path = build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"), POOL)
    warm_start(path, steps=20)  # some replies end early, some run to the cap
    return path


@pytest.mark.parametrize("recipe", ["grpo", "dr_grpo"])
def test_tiny_model_losses_and_lora_gradients_equal_trls(recipe, tiny_folder, tmp_path) -> None:
    policy = hf_policy(tiny_folder, lora_r=4, lora_alpha=8, system_prompt=ANSWER_PROMPT, verifier=odd_length)
    problems = read_text_problems(POOL)[::40]  # 6 prompts of 4 tiers, several prompt lengths
    report = check(recipe, policy, problems, group_size=4, max_new_tokens=5, scale=0.1, workdir=tmp_path)
    assert report["silent_fraction"] < 1 and report["clip_fraction"] > 0 and report["lora_tensors"] == 28
    assert report["gradient_scale"] > 1e-3
    assert report["advantages"] < 1e-6
    assert report["loss"] <= 1e-5 * abs(report["loss_engine"])
    assert report["gradient"] <= 1e-5 * report["gradient_scale"]
    if recipe == "grpo":
        assert report["kl"] > 0  # π_θ ≠ π_ref: the KL term is compared too


def test_a_silent_only_or_refill_recipe_is_refused(tiny_folder, tmp_path) -> None:
    policy = hf_policy(tiny_folder, lora_r=2, lora_alpha=4, system_prompt=ANSWER_PROMPT, verifier=odd_length)
    rows, rollout = shared_batch(policy, read_text_problems(POOL)[:2], group_size=2, max_new_tokens=3)
    with pytest.raises(ValueError, match="'grpo' or 'dr_grpo'") as caught:
        policy_trl_check("dapo", policy, rows, rollout, group_size=2, max_new_tokens=3, workdir=tmp_path)
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="pass what shared_batch returned"):
        policy_trl_check("grpo", policy, rows[:-1], rollout, group_size=2, max_new_tokens=3, workdir=tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["grpo", "dr_grpo"])
def test_smollm2_losses_and_lora_gradients_equal_trls(recipe, tmp_path) -> None:
    """SmolLM2-135M-Instruct (Q4_1, dequantized) with the book's LoRA (r 16, alpha 32, every linear layer) and
    its own last-number verifier, on four held-out questions it solves about a third of the time."""
    from stddial_book.bridges.smollm2 import SMOLLM2_DISTRIBUTION, SMOLLM2_INSTALL, smollm2_model_dir

    try:
        metadata.distribution(SMOLLM2_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        if os.environ.get("CI_STRICT") == "1":
            pytest.fail(f"CI installs {SMOLLM2_DISTRIBUTION} (make .venv); it is missing")
        pytest.skip(f"{SMOLLM2_DISTRIBUTION} is not installed: {SMOLLM2_INSTALL}")
    policy = hf_policy(smollm2_model_dir(), lora_r=16, lora_alpha=32, system_prompt=ANSWER_PROMPT)
    by_id = {p.prompt_id: p for p in read_text_problems(HELD_OUT)}
    problems = [by_id[i] for i in ("1d+1d-h002", "1d+1d-h014", "1d*1d-h005", "2d*1d-h002")]
    report = check(recipe, policy, problems, group_size=4, max_new_tokens=16, scale=0.01, workdir=tmp_path, seed=0)
    assert report["silent_fraction"] < 1 and report["lora_tensors"] == 420
    assert set(np.unique(report["rewards"])) == {0.0, 1.0}
    assert report["advantages"] < 1e-6
    assert report["loss"] <= 1e-4 * abs(report["loss_engine"])
    assert report["gradient"] <= 1e-4 * report["gradient_scale"]
