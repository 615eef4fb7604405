"""The trainer's optimizer choice and its optional gradient clip (the dial-only ablation's factors).

AdamW with the 1.0 clip stays the default and leaves every recorded setting as it was; plain SGD
steps by θ − lr · g; ``max_grad_norm`` 0 leaves the gradient as it is; an SGD run resumes exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY, fresh

from stddial_book.rl import profiles
from stddial_book.rl.batches import Batch
from stddial_book.rl.checkpoints import TrainState
from stddial_book.rl.configs import TrainConfig
from stddial_book.rl.model import CharCodec, tiny_model
from stddial_book.rl.rollout import completion_logprobs
from stddial_book.rl.runlog import load_run, run_json
from stddial_book.rl.tasks import make_problem
from stddial_book.rl.trainer import train
from stddial_book.rl.update import build_optimizer, clip_gradient, update_policy
from stddial_book.teaching.rl_step import sample_groups
from stddial_book.theory.recipes import GRPO, group_advantages

RECORDED = Path(__file__).resolve().parents[1] / "data" / "runs" / "reference"


@pytest.mark.parametrize("recipe", ["grpo", "dr_grpo", "dapo"])
def test_default_settings_read_as_the_recorded_runs_wrote_them(recipe) -> None:
    """The reference profile's settings are, key for key, those the committed provenance of a run
    recorded before the optimizer field existed: no new key at the defaults, none changed."""
    provenance = run_json(RECORDED / f"{recipe}-seed2", "provenance.json")
    config = profiles.PROFILES["reference"].train_config(recipe, 2)
    assert config.optimizer == "adamw" and config.max_grad_norm == 1.0
    assert config.to_dict() == provenance["config"]["train"]
    assert "optimizer" not in config.to_dict()


def test_the_optimizer_and_the_clip_are_checked_and_recorded() -> None:
    sgd = TrainConfig("grpo", optimizer="sgd", max_grad_norm=None)
    assert sgd.max_grad_norm == 0.0 and sgd.to_dict()["optimizer"] == "sgd"
    assert sgd.to_dict()["max_grad_norm"] == 0.0
    assert TrainConfig("grpo", max_grad_norm=0).to_dict() == TrainConfig("grpo", max_grad_norm=None).to_dict()
    with pytest.raises(ValueError, match="optimizer must be one of"):
        TrainConfig("grpo", optimizer="adam")
    with pytest.raises(ValueError, match=r"max_grad_norm must be a finite number >= 0"):
        TrainConfig("grpo", max_grad_norm=-1.0)
    with pytest.raises(ValueError, match="max_grad_norm must be a finite number"):
        TrainConfig("grpo", max_grad_norm=float("inf"))
    with pytest.raises(ValueError, match="lr must be a finite number > 0"):
        TrainConfig("grpo", lr=0.0)


def test_plain_sgd_steps_by_lr_times_the_gradient() -> None:
    """Gradients set by hand: one SGD step moves every parameter by exactly −lr · g."""
    model = tiny_model(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, seed=3, dtype=torch.float64)
    lr = 0.25
    optimizer = build_optimizer(model, TrainConfig("grpo", optimizer="sgd", lr=lr))
    assert isinstance(optimizer, torch.optim.SGD)
    before = [p.detach().clone() for p in model.parameters()]
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(p.shape, generator=gen, dtype=p.dtype) for p in model.parameters()]
    for p, g in zip(model.parameters(), grads):
        p.grad = g.clone()
    optimizer.step()
    for p, b, g in zip(model.parameters(), before, grads):
        torch.testing.assert_close(p.detach(), b - lr * g, rtol=0, atol=1e-15)
    assert isinstance(build_optimizer(model, TrainConfig("grpo")), torch.optim.AdamW)


def test_clip_off_leaves_the_gradient_as_it_is() -> None:
    """A gradient of norm 5: clipping at 1 scales it to norm 1; max_grad_norm 0 keeps every entry."""
    model = tiny_model(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, seed=1, dtype=torch.float64)
    params = list(model.parameters())
    flat = torch.zeros(sum(p.numel() for p in params), dtype=torch.float64)
    flat[0], flat[-1] = 3.0, 4.0  # norm 5 by hand
    offset = 0
    for p in params:
        p.grad = flat[offset : offset + p.numel()].reshape(p.shape).clone()
        offset += p.numel()
    kept = [p.grad.clone() for p in params]
    assert clip_gradient(model, 0.0) == pytest.approx(5.0, rel=1e-15)
    assert all(torch.equal(p.grad, g) for p, g in zip(params, kept))
    assert clip_gradient(model, 1.0) == pytest.approx(5.0, rel=1e-15)
    assert params[0].grad.reshape(-1)[0] == pytest.approx(3.0 / 5.0, rel=1e-5)
    assert params[-1].grad.reshape(-1)[-1] == pytest.approx(4.0 / 5.0, rel=1e-5)


def _batch(model, G: int = 4, num_prompts: int = 3) -> Batch:
    """Groups sampled from ``model`` itself, correctness fixed (mixed in every group), 0/1 rewards."""
    codec = CharCodec()
    ids = torch.tensor([codec.encode(make_problem(10 + 7 * i, 31 + 5 * i, 2).prompt) for i in range(num_prompts)])
    sampled = sample_groups(model, ids, G, 6, codec, torch.Generator().manual_seed(5))
    rows = G * num_prompts
    correct = (np.arange(rows) % G < 1 + np.arange(rows) // G % (G - 1)).astype(np.float64)
    return Batch(
        sampled["prompt_ids"],
        torch.ones_like(sampled["prompt_ids"], dtype=torch.bool),
        sampled["completion_ids"],
        sampled["mask"],
        sampled["truncated"],
        sampled["logprobs"],
        correct,
        correct.copy(),
        np.array(["D2"] * rows),
        np.arange(rows) // G,
    )


def _gradient(model, batch: Batch, config: TrainConfig) -> list[torch.Tensor]:
    """The policy loss's gradient over the whole batch at the current weights, by autograd in one piece."""
    from stddial_book.rl.losses import policy_loss

    advantages = torch.as_tensor(group_advantages(batch.rewards, config.group_size, config.recipe))
    logp = completion_logprobs(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.mask)
    loss = policy_loss(logp, batch.logprobs, advantages, batch.mask, config.recipe, max_new_tokens=6).loss
    return list(torch.autograd.grad(loss, list(model.parameters())))


@pytest.mark.parametrize("clip", ["off", "binding"])
def test_the_trainers_sgd_update_is_theta_minus_lr_g(clip) -> None:
    """The trainer's own update (``update_policy``, one minibatch) under plain SGD: θ' = θ − lr · g, with g
    the policy loss's gradient taken by hand; clipped at a tenth of ‖g‖, θ' = θ − lr · g / 10 (to
    torch's 1e-6 in the clip's denominator, c / (‖g‖ + 1e-6))."""
    model = tiny_model(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, seed=0, dtype=torch.float64)
    batch = _batch(model)
    recipe = GRPO.replace(kl_coef=0.0)
    probe = TrainConfig(recipe, group_size=4, prompts_per_step=3, num_minibatches=1, max_new_tokens=6)
    grad = _gradient(model, batch, probe)
    norm = float(torch.sqrt(sum((g**2).sum() for g in grad)))
    scale = 1.0 if clip == "off" else 0.1 * norm / (norm + 1e-6)
    lr = 0.5
    config = TrainConfig(
        recipe,
        group_size=4,
        prompts_per_step=3,
        num_minibatches=1,
        max_new_tokens=6,
        optimizer="sgd",
        lr=lr,
        max_grad_norm=0.0 if clip == "off" else 0.1 * norm,
    )
    before = [p.detach().clone() for p in model.parameters()]
    advantages = group_advantages(batch.rewards, 4, recipe)
    metrics = update_policy(
        model, build_optimizer(model, config), batch, advantages, config, TrainState(0, "cpu"), None
    )
    assert metrics["grad_norm"] == pytest.approx(norm, rel=1e-9)
    assert metrics["update_norm"] == pytest.approx(lr * scale * norm, rel=1e-9)
    for p, b, g in zip(model.parameters(), before, grad):
        torch.testing.assert_close(p.detach(), b - lr * scale * g, rtol=0, atol=1e-12)


def test_an_sgd_run_without_clip_resumes_exactly(problems, warm, tmp_path) -> None:
    """Stop an SGD run (clip off) after 3 steps, resume: the weights and the log of one straight run;
    the checkpoint of an AdamW run does not resume into it (another configuration)."""
    train_set, heldout = problems
    config = TINY.train_config("grpo", sample_budget=320, pool_size=12, optimizer="sgd", lr=0.05, max_grad_norm=0)
    straight = fresh(warm)
    train(straight, train_set, heldout, config, tmp_path / "a")
    interrupted = fresh(warm)
    assert train(interrupted, train_set, heldout, config, tmp_path / "b", stop_after=3).stopped_early
    resumed = fresh(warm)
    train(resumed, train_set, heldout, config, tmp_path / "b", resume=True)
    for (name, p), q in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(p, q), name
    assert not torch.equal(straight.state_dict()["lm_head.weight"], fresh(warm).state_dict()["lm_head.weight"])

    def clean(records):
        return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in records]

    assert clean(load_run(tmp_path / "a")[1]) == clean(load_run(tmp_path / "b")[1])
    assert load_run(tmp_path / "a")[0]["config"]["train"]["optimizer"] == "sgd"
    adamw = TINY.train_config("grpo", sample_budget=320, pool_size=12)
    train(fresh(warm), train_set, heldout, adamw, tmp_path / "c", stop_after=2)
    with pytest.raises(ValueError, match="different configuration"):
        train(fresh(warm), train_set, heldout, config, tmp_path / "c", resume=True)
