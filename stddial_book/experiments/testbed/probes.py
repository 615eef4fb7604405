"""Cheap measurements on the testbed model in place of new training runs (chapters 10 and 11).

A training run of the testbed takes minutes; the exercises of chapters 10 and 11 ask what a
change of recipe would do to one. Each function here answers such a question on one rollout
batch, with gradients and a few optimizer steps of the model, in about a second on one CPU core:

* :func:`rollout_groups` samples G completions of a few prompts and verifies them;
* :func:`kl_gradient_share` sets the gradient of GRPO's KL penalty beside that of its clipped
  surrogate (is the penalty doing anything?);
* :func:`token_weights` is what each completion token's log-probability is multiplied by in the
  loss gradient, for a hand-built batch (what a normaliser does to the scale);
* :func:`update_comparison` takes the same optimizer steps under two recipes and compares the
  updates (does a constant factor on the loss matter under Adam? under plain gradient descent?).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch

from stddial_book.core.checks import check_int, check_number
from stddial_book.rl.gradcheck import GroupBatch, flat_grad
from stddial_book.rl.losses import policy_loss
from stddial_book.rl.rollout import completion_logprobs
from stddial_book.theory.recipes import Recipe, as_recipe, group_advantages

__all__ = ["rollout_groups", "kl_gradient_share", "token_weights", "update_comparison"]


def rollout_groups(
    model, problems: Sequence, group_size: int, max_new_tokens: int, generator: torch.Generator
) -> GroupBatch:
    """G completions of each of ``problems`` sampled from ``model`` at temperature 1 and verified,
    stacked group after group (the layout :func:`~stddial_book.theory.recipes.group_advantages` reads).
    ``model`` is the testbed policy; ``problems`` a sequence of task problems; ``group_size`` is G (at least
    2); ``max_new_tokens`` the completion length cap in tokens; ``generator`` the torch.Generator the
    sampling draws from (fix its seed to repeat a batch)."""
    from stddial_book.rl.batches import decode_completions, encode_prompts
    from stddial_book.rl.model import CharCodec
    from stddial_book.rl.rollout import sample
    from stddial_book.rl.tasks import rewards as verify

    group_size = check_int(group_size, "group_size", minimum=2)
    codec = CharCodec()
    ids, mask = encode_prompts(list(problems), codec, next(model.parameters()).device)
    out = sample(
        model,
        ids,
        max_new_tokens,
        codec.eos_id,
        codec.pad_id,
        prompt_mask=mask,
        generator=generator,
        num_samples=group_size,
    )
    texts = decode_completions(codec, out.completion_ids)
    correct = verify(texts, [p for p in problems for _ in range(group_size)])
    return GroupBatch(out.prompt_ids, out.prompt_mask, out.completion_ids, out.mask, correct)


def _advantages(batch: GroupBatch, recipe: Recipe, group_size: int, like: torch.Tensor) -> torch.Tensor:
    shaped = np.where(batch.rewards == 1, recipe.reward_correct, recipe.reward_wrong)
    return torch.as_tensor(group_advantages(shaped, group_size, recipe), dtype=like.dtype, device=like.device)


def _loss(
    model, batch: GroupBatch, recipe: Recipe, group_size: int, max_new_tokens: int, old: torch.Tensor | None = None
) -> torch.Tensor:
    """The recipe's clipped surrogate (no KL term) on ``batch``; ratios against ``old``, or 1."""
    logp = completion_logprobs(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.mask)
    adv = _advantages(batch, recipe, group_size, logp)
    old = logp.detach() if old is None else old
    return policy_loss(logp, old, adv, batch.mask, recipe.replace(kl_coef=0.0), max_new_tokens=max_new_tokens).loss


def kl_gradient_share(
    model, ref_model, batch: GroupBatch, recipe: Recipe, group_size: int, max_new_tokens: int
) -> dict[str, float]:
    """The gradient of the KL penalty against that of the clipped surrogate, on one batch at
    ratio 1 (the first minibatch of a step), with the recipe's β and aggregation (chapter 10).

    Returns ``kl`` (the k3 estimate per token, the log's ``kl`` metric), ``surrogate_norm`` and
    ``kl_norm`` (norms of the two gradients), ``ratio`` (kl_norm / surrogate_norm) and
    ``cosine`` (between the two; negative where the penalty pulls against the surrogate).
    ``model`` is the policy the gradients are taken of and ``ref_model`` the KL's reference policy (no
    gradient); ``batch`` a :class:`~stddial_book.rl.gradcheck.GroupBatch` of groups of ``group_size`` samples stacked
    group after group (:func:`rollout_groups`); ``recipe`` a :class:`~stddial_book.theory.recipes.Recipe` or its name,
    with a KL term (``kl_coef`` > 0); ``max_new_tokens`` is L_max in tokens, the cap the loss's length
    normaliser may divide by.
    """
    recipe = as_recipe(recipe)
    if not recipe.kl_coef > 0:
        raise ValueError(f"recipe {recipe.name!r} has no KL term (kl_coef = 0); pass GRPO or set kl_coef.")
    params = [p for p in model.parameters() if p.requires_grad]
    surrogate = flat_grad(_loss(model, batch, recipe, group_size, max_new_tokens), params)
    logp = completion_logprobs(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.mask)
    with torch.no_grad():
        ref = completion_logprobs(ref_model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.mask)
    zero = torch.zeros(logp.shape[0], dtype=logp.dtype, device=logp.device)  # A = 0: the KL term alone
    out = policy_loss(logp, logp.detach(), zero, batch.mask, recipe, max_new_tokens=max_new_tokens, ref_logprobs=ref)
    penalty = flat_grad(out.loss, params)
    s_norm, k_norm = float(surrogate.norm()), float(penalty.norm())
    return {
        "kl": out.metrics["kl"],
        "surrogate_norm": s_norm,
        "kl_norm": k_norm,
        "ratio": k_norm / s_norm if s_norm > 0 else float("inf"),
        "cosine": float(surrogate @ penalty) / (s_norm * k_norm) if s_norm * k_norm > 0 else 0.0,
    }


def token_weights(
    lengths: Sequence[int], advantages: Sequence[float], recipe: Recipe, max_new_tokens: int
) -> np.ndarray:
    """−∂loss/∂log π(token) for every token of a hand-built batch at ratio 1: the factor by which
    each token's log-probability enters the update (chapter 11).

    ``lengths`` gives each completion's token count; the batch is padded to the longest.
    ``max_new_tokens`` is the normaliser ``seq-mean-token-sum-norm`` divides by (Dr. GRPO's
    L_max; pass the padded width to get the variant that divides by it). Returns an array of
    shape (completions, padded width), zero on padding. ``advantages`` holds one advantage per
    completion, in the order of ``lengths``; ``recipe`` is a :class:`~stddial_book.theory.recipes.Recipe` or its name
    with no KL term (``kl_coef`` = 0, e.g. ``recipe.replace(kl_coef=0.0)``: there is no reference policy
    here).
    """
    lengths = [check_int(n, "lengths", minimum=1) for n in lengths]
    cpu = torch.device("cpu")  # a hand-built batch: no model, so no device to follow
    adv = torch.as_tensor(np.asarray(advantages, dtype=np.float64), device=cpu)
    if adv.shape != (len(lengths),):
        raise ValueError(
            f"advantages must hold one number per completion ({len(lengths)}); got shape {tuple(adv.shape)}."
        )
    width = max(lengths)
    mask = torch.arange(width, device=cpu)[None, :] < torch.as_tensor(lengths, device=cpu)[:, None]
    logp = torch.zeros(len(lengths), width, dtype=torch.float64, requires_grad=True, device=cpu)
    loss = policy_loss(logp, logp.detach(), adv, mask, recipe, max_new_tokens=max_new_tokens).loss
    (grad,) = torch.autograd.grad(loss, logp)
    return (-grad).numpy()


def update_comparison(
    model,
    batch: GroupBatch,
    recipe_a: Recipe,
    recipe_b: Recipe,
    group_size: int,
    max_new_tokens: int,
    steps: int = 3,
    lr: float = 1e-4,
    max_grad_norm: float | None = 1.0,
) -> dict[str, float]:
    """The same optimizer steps on ``batch`` under two recipes, from the same weights (chapter 11).

    ``gradient_norm`` is ‖∇L_a‖ at the start (against ``max_grad_norm``: whether the clip binds)
    and ``gradient_ratio`` ‖∇L_b‖ / ‖∇L_a‖, the factor by which a plain gradient step at one
    learning rate differs (dividing the learning rate by it undoes the change).
    Then ``steps`` steps of the trainer's optimizer (AdamW without weight decay, gradients
    clipped to ``max_grad_norm``) on a copy of the model per recipe, π_old fixed at the start as
    in a rollout batch; ``adam_rel_diff`` is ‖Δθ_b − Δθ_a‖ / ‖Δθ_a‖ and ``adam_norm_ratio``
    ‖Δθ_b‖ / ‖Δθ_a‖. Adam is blind to a constant factor on every gradient (up to its ε); the
    clip is not, where it binds on one side only. ``model`` is left unchanged. The KL term is
    left out. ``recipe_a`` and ``recipe_b`` are :class:`~stddial_book.theory.recipes.Recipe` objects or names,
    ``batch`` a :class:`~stddial_book.rl.gradcheck.GroupBatch` of groups of ``group_size`` samples
    (:func:`rollout_groups`), ``max_new_tokens`` the L_max in tokens the loss's length normaliser may
    divide by, ``lr`` AdamW's learning rate (> 0, default 1e-4); ``max_grad_norm`` None turns the clip off.
    """
    recipe_a, recipe_b = as_recipe(recipe_a), as_recipe(recipe_b)
    steps = check_int(steps, "steps", minimum=1)
    lr = check_number(lr, "lr")
    if not lr > 0:
        raise ValueError(f"lr must be > 0; got {lr}.")
    with torch.no_grad():
        old = completion_logprobs(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.mask)
    start = [p.detach().clone() for p in model.parameters()]
    moves, grads = [], []
    for recipe in (recipe_a, recipe_b):
        copy_ = copy.deepcopy(model)
        params = [p for p in copy_.parameters() if p.requires_grad]
        grads.append(flat_grad(_loss(copy_, batch, recipe, group_size, max_new_tokens, old), params))
        optimizer = torch.optim.AdamW(copy_.parameters(), lr=lr, weight_decay=0.0)
        for _ in range(steps):
            optimizer.zero_grad(set_to_none=True)
            _loss(copy_, batch, recipe, group_size, max_new_tokens, old).backward()
            if max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(copy_.parameters(), max_grad_norm)
            optimizer.step()
        moves.append(torch.cat([(p.detach() - q).reshape(-1) for p, q in zip(copy_.parameters(), start)]))
    base = float(moves[0].norm())
    return {
        "gradient_norm": float(grads[0].norm()),
        "gradient_ratio": float(grads[1].norm() / grads[0].norm()),
        "adam_rel_diff": float((moves[1] - moves[0]).norm()) / base,
        "adam_norm_ratio": float(moves[1].norm()) / base,
    }
