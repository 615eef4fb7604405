"""The identity on real autograd gradients of the testbed model (chapter 4).

For one group of G completions of a prompt, :func:`per_sample_scores` computes each sample's
score gᵢ (the gradient of its summed token log-probs, normalised as the recipe's aggregation
says), and :func:`identity_check` compares the gradient of the recipe's actual loss, from
:func:`stddial_book.losses.policy_loss` at ratio 1, with the identity's prediction
w (ḡ₊ − ḡ₋), w = σ for GRPO and σ² for Dr. GRPO.

:func:`group_gradient_norms` measures, for many groups at once, how large each group's
contribution to the update is, at ratio 1 or after the policy has moved (where the clip binds).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .identity import update_weight
from .losses import policy_loss
from .recipes import Recipe, group_advantages
from .rollout import completion_logprobs

__all__ = ["GroupBatch", "build_group", "move_policy", "pearson", "flat_grad", "per_sample_scores", "identity_check",
           "group_gradient_norms", "identity_drift"]


@dataclass
class GroupBatch:
    """G completions of one prompt (or several groups stacked), as the loss consumes them."""

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor
    mask: torch.Tensor
    rewards: np.ndarray  # 0/1 correctness, one per row

    def rows(self, index) -> "GroupBatch":
        return GroupBatch(self.prompt_ids[index], self.prompt_mask[index], self.completion_ids[index],
                          self.mask[index], self.rewards[np.asarray(index)])


def build_group(model, problem, group_size: int, num_correct: int, max_new_tokens: int,
                generator: torch.Generator, codec=None) -> GroupBatch:
    """A group of ``group_size`` completions of ``problem`` with exactly ``num_correct`` correct.

    The correct rows are the exact answer followed by EOS; the others are sampled from ``model``
    at temperature 1 and kept only when the verifier marks them wrong. Rewards come from the
    verifier, so the group is one the model could have produced with some probability.
    """
    from .model import CharCodec
    from .rollout import sample
    from .tasks import reward

    codec = codec or CharCodec()
    device = next(model.parameters()).device  # every tensor follows the model (CPU or GPU)
    prompt = torch.tensor([codec.encode(problem.prompt)], device=device)
    rows: list[list[int]] = [codec.encode(problem.answer + "<eos>")] * num_correct
    while len(rows) < group_size:
        out = sample(model, prompt.repeat(group_size, 1), max_new_tokens, codec.eos_id, codec.pad_id,
                     generator=generator)
        for ids, m in zip(out.completion_ids, out.mask):
            kept = ids[m].tolist()
            if reward(codec.decode(kept), problem) == 0.0 and len(rows) < group_size:
                rows.append(kept)
    width = max(len(r) for r in rows)
    completion = torch.full((group_size, width), codec.pad_id, device=device)
    mask = torch.zeros(group_size, width, dtype=torch.bool, device=device)
    for i, r in enumerate(rows):
        completion[i, :len(r)] = torch.tensor(r, device=device)
        mask[i, :len(r)] = True
    rewards = np.array([reward(codec.decode(r), problem) for r in rows])
    assert int(rewards.sum()) == num_correct
    return GroupBatch(prompt.repeat(group_size, 1),
                      torch.ones(group_size, prompt.shape[1], dtype=torch.bool, device=device),
                      completion, mask, rewards)


def flat_grad(value: torch.Tensor, params: list[torch.Tensor]) -> torch.Tensor:
    """The gradient of a scalar with respect to ``params``, as one flat vector."""
    grads = torch.autograd.grad(value, params, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1)
                      for g, p in zip(grads, params)])


def per_sample_scores(model, batch: GroupBatch, recipe: Recipe, max_new_tokens: int) -> torch.Tensor:
    """(G, num_params): gᵢ = ∇ Σₜ log π(oᵢₜ) / nᵢ with nᵢ = ℓᵢ, L_max or ℓ̄ per the aggregation."""
    params = [p for p in model.parameters() if p.requires_grad]
    lengths = batch.mask.sum(dim=1).to(torch.float64)
    norm = {"seq-mean-token-mean": lengths,
            "seq-mean-token-sum-norm": torch.full_like(lengths, float(max_new_tokens)),
            "token-mean": torch.full_like(lengths, float(lengths.mean()))}[recipe.loss_aggregation]
    scores = []
    for i in range(batch.completion_ids.shape[0]):
        row = batch.rows([i])
        logp = completion_logprobs(model, row.prompt_ids, row.prompt_mask, row.completion_ids, row.mask)
        scores.append(flat_grad(logp.sum() / norm[i], params))
    return torch.stack(scores)


def _loss(model, batch: GroupBatch, recipe: Recipe, max_new_tokens: int,
          old_logprobs: torch.Tensor | None = None):
    logp = completion_logprobs(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.mask)
    rewards = np.where(batch.rewards == 1, recipe.reward_correct, recipe.reward_wrong)
    adv = torch.as_tensor(group_advantages(rewards, len(rewards), recipe), dtype=logp.dtype, device=logp.device)
    old = logp.detach() if old_logprobs is None else old_logprobs
    return policy_loss(logp, old, adv, batch.mask, recipe.replace(kl_coef=0.0), max_new_tokens=max_new_tokens)


def identity_check(model, batch: GroupBatch, recipe: Recipe, max_new_tokens: int,
                   reference: Recipe | None = None) -> dict[str, float]:
    """Compare −∇(recipe's loss at ratio 1) with w (ḡ₊ − ḡ₋) on real gradients of one group.

    The prediction takes w and the meaning of gᵢ (its length normaliser) from ``reference``
    (default: ``recipe`` itself). Passing a different reference shows what a mismatch costs:
    a std epsilon in ``recipe`` (the norms then differ by exactly 1 + ε/σ) or a loss normaliser
    other than the one the identity assumes. Returns the population σ of the group, w, the
    relative error ‖−∇L − w(ḡ₊ − ḡ₋)‖ / ‖w(ḡ₊ − ḡ₋)‖ and the ratio of the two norms.
    """
    reference = reference or recipe
    correct = batch.rewards == 1
    if correct.all() or not correct.any():
        raise ValueError("the identity concerns mixed groups: need 0 < k < G correct samples.")
    params = [p for p in model.parameters() if p.requires_grad]
    gradient = -flat_grad(_loss(model, batch, recipe, max_new_tokens).loss, params)
    scores = per_sample_scores(model, batch, reference, max_new_tokens)
    mask = torch.as_tensor(correct, device=scores.device)
    gap = scores[mask].mean(0) - scores[~mask].mean(0)
    pass_rate = float(correct.mean())
    group_size = len(correct)
    weight = float(update_weight(pass_rate, reference, group_size))
    predicted = weight * gap
    return {
        "group_std": float(np.sqrt(pass_rate * (1 - pass_rate))),
        "weight": weight,
        "rel_error": float((gradient - predicted).norm() / predicted.norm()),
        "norm_ratio": float(gradient.norm() / predicted.norm()),
    }


def group_gradient_norms(model, groups: list[GroupBatch], recipe: Recipe, max_new_tokens: int,
                         old_logprobs: list[torch.Tensor] | None = None) -> tuple[np.ndarray, float]:
    """‖∇ loss‖ of each group's own loss, and the fraction of clipped tokens over all groups.

    With ``old_logprobs`` (the sampling policy's log-probs) the ratio differs from 1 once the
    model has been updated, so the clip can bind; without, every ratio is 1.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    norms, clipped, tokens = [], 0.0, 0
    for i, group in enumerate(groups):
        out = _loss(model, group, recipe, max_new_tokens, None if old_logprobs is None else old_logprobs[i])
        norms.append(float(flat_grad(out.loss, params).norm()))
        count = int(group.mask.sum())
        clipped += out.metrics["clip_ratio/region_mean"] * count
        tokens += count
    return np.array(norms), clipped / max(tokens, 1)


def identity_drift(model, group: GroupBatch, recipe: Recipe, max_new_tokens: int,
                   old_logprobs: torch.Tensor) -> dict[str, float]:
    """How far one group's actual update strays from the identity once the policy has moved.

    The update is −∇ of the recipe's clipped loss with ratios against ``old_logprobs`` (the
    policy that sampled the group); the reference is the identity's exact on-policy form at the
    *current* weights, w (ḡ₊ − ḡ₋) with the current scores. Before any step they coincide to
    rounding (ratio 1); after minibatch steps the ratio and the clip make them differ, and this
    measures by how much, per group, instead of correlating norms. Returns the relative error,
    the fraction of the group's tokens clipped, and the group's σ (chapter 4).
    """
    correct = group.rewards == 1
    if correct.all() or not correct.any():
        raise ValueError("the identity concerns mixed groups: need 0 < k < G correct samples.")
    params = [p for p in model.parameters() if p.requires_grad]
    out = _loss(model, group, recipe, max_new_tokens, old_logprobs)
    gradient = -flat_grad(out.loss, params)
    scores = per_sample_scores(model, group, recipe, max_new_tokens)
    mask = torch.as_tensor(correct, device=scores.device)
    predicted = float(update_weight(float(correct.mean()), recipe, len(correct))) * (
        scores[mask].mean(0) - scores[~mask].mean(0))
    return {"rel_error": float((gradient - predicted).norm() / predicted.norm()),
            "clipped": float(out.metrics["clip_ratio/region_mean"]),
            "group_std": float(np.sqrt(correct.mean() * (1 - correct.mean())))}


def move_policy(model, groups: list[GroupBatch], recipe: Recipe, max_new_tokens: int, steps: int,
                lr: float) -> list[torch.Tensor]:
    """Take ``steps`` Adam steps on the mean of the groups' losses, ratios against the start.

    Returns the sampling policy's log-probs of every group (taken before the first step), so
    that :func:`group_gradient_norms` can measure the clipped update afterwards. This is what
    several minibatch steps per rollout batch do in training: the ratio leaves 1 and the clip
    starts to bind.
    """
    with torch.no_grad():
        old = [completion_logprobs(model, g.prompt_ids, g.prompt_mask, g.completion_ids, g.mask)
               for g in groups]
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = sum(_loss(model, g, recipe, max_new_tokens, o).loss for g, o in zip(groups, old))
        (loss / len(groups)).backward()
        optimizer.step()
    return old


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation coefficient of two equally long samples."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) != len(y) or len(x) < 3:
        raise ValueError("pearson needs two samples of the same length, at least 3 each.")
    return float(np.corrcoef(x, y)[0, 1])
