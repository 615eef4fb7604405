"""The identity on real autograd gradients of the testbed model (chapter 4).

For one group of G completions of a prompt, :func:`per_sample_scores` computes each sample's
score gᵢ (the gradient of its summed token log-probs, normalised as the recipe's aggregation
says), :func:`score_contrast` the difference of their class means ḡ₊ − ḡ₋ in one backward pass, and :func:`identity_check` compares the gradient of the recipe's actual loss, from
:func:`stddial_book.rl.losses.policy_loss` at ratio 1, with the identity's prediction
w (ḡ₊ − ḡ₋), w = σ for GRPO and σ² for Dr. GRPO.

:func:`identity_drift` and :func:`drift_study` measure, per group, how far the update strays
from the identity once minibatch steps have moved the policy, and how much of that the ratio
ρ ≠ 1 causes and how much the clip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from stddial_book.core.checks import check_binary, check_int, check_number, check_tensor, to_numpy
from stddial_book.rl.losses import policy_loss
from stddial_book.rl.rollout import completion_logprobs
from stddial_book.theory.identity import update_weight
from stddial_book.theory.recipes import Recipe, as_recipe, group_advantages

__all__ = [
    "GroupBatch",
    "build_group",
    "group_of",
    "move_policy",
    "flat_grad",
    "per_sample_scores",
    "score_contrast",
    "identity_check",
    "identity_drift",
    "unclipped",
    "drift_study",
    "drift_summary",
]


@dataclass
class GroupBatch:
    """G completions of one prompt (or several groups stacked), as the loss consumes them.

    One row per sample: ``prompt_ids`` and ``prompt_mask`` (rows, P) are the prompt's token ids and
    its mask (false on left padding), ``completion_ids`` (rows, T) the completions, right-padded,
    with ``mask`` (rows, T) true on their tokens (EOS included), and ``rewards`` one 0/1 correctness
    per row.
    """

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor
    mask: torch.Tensor
    rewards: np.ndarray  # 0/1 correctness, one per row

    def __post_init__(self) -> None:
        for name in ("prompt_ids", "prompt_mask", "completion_ids", "mask"):
            check_tensor(getattr(self, name), name, ndim=2)
        rewards = to_numpy(self.rewards, "rewards")
        check_binary(rewards, "rewards")
        rows = {
            self.prompt_ids.shape[0],
            self.prompt_mask.shape[0],
            self.completion_ids.shape[0],
            self.mask.shape[0],
            rewards.shape[0] if rewards.ndim == 1 else -1,
        }
        if len(rows) != 1:
            raise ValueError(
                "a GroupBatch needs one row per sample in every tensor and one 0/1 reward per row; got "
                f"prompt_ids {tuple(self.prompt_ids.shape)}, completion_ids "
                f"{tuple(self.completion_ids.shape)}, rewards {rewards.shape}."
            )
        self.rewards = np.asarray(self.rewards)

    def rows(self, index) -> GroupBatch:
        return GroupBatch(
            self.prompt_ids[index],
            self.prompt_mask[index],
            self.completion_ids[index],
            self.mask[index],
            self.rewards[np.asarray(index)],
        )


def _check_build_args(problem, group_size, num_correct, max_new_tokens) -> tuple[int, int, int]:
    """Validate :func:`build_group`'s arguments: 0 ≤ k ≤ G, and a cap L_max that leaves room for
    the answer and EOS when k > 0. Returns G, k and L_max as checked whole numbers (chapter 4)."""
    from stddial_book.rl.tasks import Problem

    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a Problem (from tasks.make_problem); got {type(problem).__name__}.")
    group_size = check_int(group_size, "group_size", minimum=1)
    num_correct = check_int(num_correct, "num_correct", minimum=0)
    if num_correct > group_size:
        raise ValueError(f"num_correct must lie in [0, group_size = {group_size}]; got {num_correct}.")
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1)
    if num_correct and len(problem.answer) + 1 > max_new_tokens:
        raise ValueError(
            f"the answer {problem.answer!r} and EOS take {len(problem.answer) + 1} tokens, more than "
            f"max_new_tokens={max_new_tokens}: no sample under that cap is correct. Raise max_new_tokens."
        )
    return group_size, num_correct, max_new_tokens


def build_group(
    model, problem, group_size: int, num_correct: int, max_new_tokens: int, generator: torch.Generator, codec=None
) -> GroupBatch:
    """A group of ``group_size`` completions of ``problem`` with exactly ``num_correct`` correct.

    The correct rows are the exact answer followed by EOS; the others are sampled from ``model``
    at temperature 1 and kept only when the verifier marks them wrong. Rewards come from the
    verifier, so the group is one the model could have produced with some probability. Raises
    ``ValueError`` if 100 rounds of ``group_size`` samples hold too few wrong completions (a model
    that nearly always answers right). ``max_new_tokens`` caps the sampled completions, in tokens
    (it must leave room for the answer and EOS when ``num_correct`` > 0); ``generator`` is the
    ``torch.Generator`` they draw from; ``codec`` is the tokenizer (default: a fresh
    :class:`~stddial_book.rl.model.CharCodec`).
    """
    from stddial_book.rl.model import CharCodec
    from stddial_book.rl.rollout import sample
    from stddial_book.rl.tasks import reward

    group_size, num_correct, max_new_tokens = _check_build_args(problem, group_size, num_correct, max_new_tokens)
    codec = codec or CharCodec()
    device = next(model.parameters()).device  # every tensor follows the model (CPU or GPU)
    prompt = torch.tensor([codec.encode(problem.prompt)], device=device)
    rows: list[list[int]] = [codec.encode(problem.answer + "<eos>")] * num_correct
    for _ in range(100):
        if len(rows) == group_size:
            break
        out = sample(
            model, prompt.repeat(group_size, 1), max_new_tokens, codec.eos_id, codec.pad_id, generator=generator
        )
        for ids, m in zip(out.completion_ids, out.mask):
            kept = ids[m].tolist()
            if reward(codec.decode(kept), problem) == 0.0 and len(rows) < group_size:
                rows.append(kept)
    if len(rows) < group_size:
        raise ValueError(
            f"the model gave only {len(rows) - num_correct} wrong completions of {problem.prompt} in 100 "
            f"rounds of {group_size} samples; ask for more correct ones (num_correct) or use a less "
            "trained model."
        )
    rewards = np.array([reward(codec.decode(r), problem) for r in rows])
    assert int(rewards.sum()) == num_correct
    return group_of(prompt, rows, codec.pad_id, rewards)


def group_of(prompt: torch.Tensor, rows: list[list[int]], pad_id: int, rewards) -> GroupBatch:
    """A :class:`GroupBatch` of one prompt (shape (1, P)) and its completions ``rows`` (token ids, each its own
    length), right-padded with ``pad_id`` and masked, with their 0/1 ``rewards``. ``prompt`` holds the
    prompt's token ids, without padding (its mask is all true)."""
    device, size = prompt.device, len(rows)
    width = max(len(r) for r in rows)
    completion = torch.full((size, width), pad_id, device=device)
    mask = torch.zeros(size, width, dtype=torch.bool, device=device)
    for i, r in enumerate(rows):
        completion[i, : len(r)] = torch.tensor(r, device=device)
        mask[i, : len(r)] = True
    ones = torch.ones(size, prompt.shape[1], dtype=torch.bool, device=device)
    return GroupBatch(prompt.repeat(size, 1), ones, completion, mask, np.asarray(rewards))


def flat_grad(value: torch.Tensor, params: list[torch.Tensor], retain_graph: bool = False) -> torch.Tensor:
    """The gradient of a scalar with respect to ``params``, as one flat vector. ``retain_graph``
    keeps the forward pass's graph for another gradient of the same pass. ``value`` is the scalar
    (a one-element tensor that requires grad); a parameter it does not depend on gets zeros."""
    check_tensor(value, "value")
    if value.numel() != 1 or not value.requires_grad:
        raise ValueError(
            f"value must be a scalar that depends on the parameters (a loss with grad); got shape "
            f"{tuple(value.shape)}, requires_grad={value.requires_grad}."
        )
    params = list(params)
    if not params:
        raise ValueError("params is empty; pass the model's parameters, e.g. list(model.parameters()).")
    grads = torch.autograd.grad(value, params, retain_graph=retain_graph, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, params)])


def _score_norms(batch: GroupBatch, recipe: Recipe, max_new_tokens: int) -> torch.Tensor:
    """nᵢ per sample (float64): ℓᵢ, L_max or ℓ̄ as the recipe's aggregation says."""
    lengths = batch.mask.sum(dim=1).to(torch.float64)
    return {
        "seq-mean-token-mean": lengths,
        "seq-mean-token-sum-norm": torch.full_like(lengths, float(max_new_tokens)),
        "token-mean": torch.full_like(lengths, float(lengths.mean())),
    }[recipe.loss_aggregation]


def per_sample_scores(model, batch: GroupBatch, recipe: Recipe, max_new_tokens: int) -> torch.Tensor:
    """(G, num_params): gᵢ = ∇ Σₜ log π(oᵢₜ) / nᵢ with nᵢ = ℓᵢ, L_max or ℓ̄ per the aggregation.

    ``model`` is the causal LM whose trainable parameters the scores are taken over; ``batch`` the
    :class:`GroupBatch` of G samples; ``recipe`` (a :class:`~stddial_book.theory.recipes.Recipe` or a
    preset name) gives the aggregation; ``max_new_tokens`` is L_max, in tokens. One backward pass per
    sample.
    """
    recipe, max_new_tokens = _check_group_args(batch, recipe, max_new_tokens)
    params = [p for p in model.parameters() if p.requires_grad]
    norm = _score_norms(batch, recipe, max_new_tokens)
    scores = []
    for i in range(batch.completion_ids.shape[0]):
        row = batch.rows([i])
        logp = completion_logprobs(model, row.prompt_ids, row.prompt_mask, row.completion_ids, row.mask)
        scores.append(flat_grad(logp.sum() / norm[i], params))
    return torch.stack(scores)


def _logprobs(model, batch: GroupBatch) -> torch.Tensor:
    """Per-token log π of the batch's completions, one forward pass with its graph. The loss and
    the identity's prediction read the same pass (:func:`identity_check`): a second pass over the
    same inputs would give the same numbers bit for bit, at the cost of a forward pass."""
    return completion_logprobs(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.mask)


def recipe_loss(
    model, batch: GroupBatch, recipe: Recipe, max_new_tokens: int, old_logprobs: torch.Tensor | None = None
):
    return _loss_of(_logprobs(model, batch), batch, recipe, max_new_tokens, old_logprobs)


def _loss_of(
    logp: torch.Tensor, batch: GroupBatch, recipe: Recipe, max_new_tokens: int, old_logprobs: torch.Tensor | None = None
):
    """The recipe's loss (KL off) on log-probs ``logp`` of ``batch`` (:func:`_logprobs`)."""
    rewards = np.where(batch.rewards == 1, recipe.reward_correct, recipe.reward_wrong)
    adv = torch.as_tensor(group_advantages(rewards, len(rewards), recipe), dtype=logp.dtype, device=logp.device)
    old = logp.detach() if old_logprobs is None else old_logprobs
    return policy_loss(logp, old, adv, batch.mask, recipe.replace(kl_coef=0.0), max_new_tokens=max_new_tokens)


def identity_check(
    model, batch: GroupBatch, recipe: Recipe, max_new_tokens: int, reference: Recipe | None = None
) -> dict[str, float]:
    """Compare −∇(recipe's loss at ratio 1) with w (ḡ₊ − ḡ₋) on real
    gradients of one group.

    The prediction takes w and the meaning of gᵢ (its length normaliser)
    from ``reference`` (default: ``recipe`` itself). Passing a different
    reference shows what a mismatch costs: a std epsilon in ``recipe`` (the
    norms then differ by exactly 1 + ε/σ) or a loss normaliser other than
    the one the identity assumes. Returns the population σ of the group, w,
    the relative error ‖−∇L − w(ḡ₊ − ḡ₋)‖ / ‖w(ḡ₊ − ḡ₋)‖ and the ratio of
    the two norms. ``batch`` is a mixed :class:`GroupBatch`, its gradients
    taken at ``model``'s current weights; ``max_new_tokens`` is L_max in
    tokens.
    """
    recipe, max_new_tokens = _check_group_args(batch, recipe, max_new_tokens)
    reference = recipe if reference is None else as_recipe(reference)
    _mixed(batch)  # the identity concerns mixed groups
    params = [p for p in model.parameters() if p.requires_grad]
    logp = _logprobs(model, batch)  # one forward pass for the prediction and the loss
    predicted = _predicted_update(logp, model, batch, reference, max_new_tokens)
    gradient = -flat_grad(_loss_of(logp, batch, recipe, max_new_tokens).loss, params)
    pass_rate = float((batch.rewards == 1).mean())
    weight = float(update_weight(pass_rate, reference, len(batch.rewards)))
    return {
        "group_std": float(np.sqrt(pass_rate * (1 - pass_rate))),
        "weight": weight,
        "rel_error": float((gradient - predicted).norm() / predicted.norm()),
        "norm_ratio": float(gradient.norm() / predicted.norm()),
    }


def unclipped(recipe: Recipe) -> Recipe:
    """``recipe`` with a clip range no ratio reaches: the importance-weighted loss, nothing clipped.

    Comparing a group's gradient under ``recipe`` with its gradient under ``unclipped(recipe)``
    separates what the clip does from what the ratio ρ ≠ 1 alone does (chapter 4).
    """
    return as_recipe(recipe).replace(clip_low=1.0 - 1e-12, clip_high=1e12)


def _mixed(group: GroupBatch) -> np.ndarray:
    """The group's correct samples (a boolean per sample); a ValueError for a silent group."""
    correct = np.asarray(group.rewards) == 1
    if correct.all() or not correct.any():
        raise ValueError("the identity concerns mixed groups: need 0 < k < G correct samples.")
    return correct


def _predicted_update(
    logp: torch.Tensor, model, group: GroupBatch, recipe: Recipe, max_new_tokens: int
) -> torch.Tensor:
    """w (ḡ₊ − ḡ₋) with the scores at the model's current weights, from the forward pass ``logp``
    of ``group`` (:func:`_logprobs`), whose graph stays for the caller's next gradient."""
    correct = _mixed(group)
    weight = float(update_weight(float(correct.mean()), recipe, len(correct)))
    return weight * _contrast_of(logp, model, group, recipe, max_new_tokens, retain_graph=True)


def score_contrast(model, group: GroupBatch, recipe: Recipe, max_new_tokens: int) -> torch.Tensor:
    """ḡ₊ − ḡ₋ of a mixed group in one backward pass.

    A gradient is linear, so the mean of the correct samples' scores minus the mean of the wrong
    ones' is the gradient of Σᵢ cᵢ sᵢ with sᵢ = Σₜ log π(oᵢₜ) / nᵢ and cᵢ = 1/k for a correct sample,
    −1/(G − k) for a wrong one: one forward of the whole group and one backward, where
    :func:`per_sample_scores` takes G of each (``tests/test_gradcheck.py`` ties the two).
    ``model``, ``recipe`` and ``max_new_tokens`` are as for :func:`per_sample_scores`; ``group`` is a
    mixed :class:`GroupBatch` (0 < k < G)."""
    recipe, max_new_tokens = _check_group_args(group, recipe, max_new_tokens)
    _mixed(group)
    return _contrast_of(_logprobs(model, group), model, group, recipe, max_new_tokens)


def _contrast_of(
    logp: torch.Tensor, model, group: GroupBatch, recipe: Recipe, max_new_tokens: int, retain_graph: bool = False
) -> torch.Tensor:
    """:func:`score_contrast` from the forward pass ``logp`` of ``group`` (:func:`_logprobs`),
    keeping its graph for another gradient with ``retain_graph``."""
    correct = _mixed(group)
    k = int(correct.sum())
    params = [p for p in model.parameters() if p.requires_grad]
    norm = _score_norms(group, recipe, max_new_tokens).to(device=logp.device, dtype=logp.dtype)
    weights = torch.as_tensor(np.where(correct, 1.0 / k, -1.0 / (len(correct) - k)), device=logp.device)
    return flat_grad((logp.sum(dim=1) / norm * weights.to(logp.dtype)).sum(), params, retain_graph=retain_graph)


def identity_drift(
    model, group: GroupBatch, recipe: Recipe, max_new_tokens: int, old_logprobs: torch.Tensor, split: bool = False
) -> dict[str, float]:
    """How far one group's actual update strays from the identity once the
    policy has moved.

    The update is −∇ of the recipe's clipped loss with ratios against
    ``old_logprobs`` (the policy that sampled the group); the reference is
    the identity's exact on-policy form at the *current* weights,
    w (ḡ₊ − ḡ₋) with the current scores. Before any step they coincide to
    rounding (ratio 1); after minibatch steps the ratio and the clip make
    them differ, and this measures by how much, per group. Returns the
    relative error ‖−∇L − w(ḡ₊ − ḡ₋)‖ / ‖w(ḡ₊ − ḡ₋)‖, the fraction of the
    group's tokens whose clipped term is active, and the group's σ.

    With ``split=True`` it also takes the gradient of :func:`unclipped`
    ``(recipe)`` and returns ``clipped_high`` (the tokens clipped on the high
    side, ρ > 1 + ε with A > 0), ``ratio_error`` (that gradient against the
    identity: the ratio's share), ``clip_error`` (the clipped gradient
    against the unclipped one: the clip's share, both relative to
    ‖w(ḡ₊ − ḡ₋)‖) and ``norm_ratio`` (‖−∇L‖ / ‖w(ḡ₊ − ḡ₋)‖). Chapter 4.

    ``model`` holds the current weights; ``group`` is a mixed
    :class:`GroupBatch`; ``recipe`` a
    :class:`~stddial_book.theory.recipes.Recipe` or a preset name;
    ``max_new_tokens`` is L_max in tokens; ``split`` defaults to false.
    """
    recipe, max_new_tokens = _check_group_args(group, recipe, max_new_tokens)
    check_tensor(old_logprobs, "old_logprobs", kind="float")
    _mixed(group)  # the identity concerns mixed groups
    params = [p for p in model.parameters() if p.requires_grad]
    logp = _logprobs(model, group)  # one forward pass for the prediction and both losses
    predicted = _predicted_update(logp, model, group, recipe, max_new_tokens)
    out = _loss_of(logp, group, recipe, max_new_tokens, old_logprobs)
    gradient = -flat_grad(out.loss, params, retain_graph=split)
    pass_rate = float((group.rewards == 1).mean())
    scale = predicted.norm()
    result = {
        "rel_error": float((gradient - predicted).norm() / scale),
        "clipped": float(out.metrics["clip_ratio/region_mean"]),
        "group_std": float(np.sqrt(pass_rate * (1 - pass_rate))),
    }
    if split:
        free = -flat_grad(_loss_of(logp, group, unclipped(recipe), max_new_tokens, old_logprobs).loss, params)
        result.update(
            clipped_high=float(out.metrics["clip_ratio/high_mean"]),
            ratio_error=float((free - predicted).norm() / scale),
            clip_error=float((gradient - free).norm() / scale),
            norm_ratio=float(gradient.norm() / scale),
        )
    return result


def drift_study(
    model, groups: list[GroupBatch], recipe: Recipe, max_new_tokens: int, steps: int, lr: float
) -> dict[str, np.ndarray]:
    """Take ``steps`` Adam steps on the groups' mean loss and measure every group after each.

    This is what the minibatches of one rollout batch do in training: minibatch m sees weights
    that m − 1 steps have moved, with ratios against the policy that sampled the batch, so the
    clip can bind. After each step (and before the first) every group's update is compared with
    the identity by :func:`identity_drift` with ``split=True``. ``model`` is left unchanged (the
    steps are taken on a copy). Returns one row per (step, group), as columns: ``step``,
    ``group``, ``group_std``, ``tokens``, ``clipped``, ``clipped_high``, ``rel_error``, ``ratio_error``,
    ``clip_error``, ``norm_ratio`` (chapter 4). ``groups`` is a non-empty list of mixed
    :class:`GroupBatch`; ``recipe`` a :class:`~stddial_book.theory.recipes.Recipe`; ``max_new_tokens``
    is L_max in tokens; ``lr`` is Adam's learning rate (> 0).
    """
    import copy

    steps, lr = check_int(steps, "steps"), check_number(lr, "lr")
    if steps < 1 or not lr > 0:
        raise ValueError(f"drift_study needs steps >= 1 and lr > 0; got steps={steps}, lr={lr}.")
    check_groups(groups)
    model = copy.deepcopy(model)
    rows: list[dict[str, float]] = []
    for step, old in policy_steps(model, groups, recipe, max_new_tokens, steps, lr):
        for index, (group, logp) in enumerate(zip(groups, old)):
            drift = identity_drift(model, group, recipe, max_new_tokens, logp, split=True)
            rows.append({"step": step, "group": index, "tokens": int(group.mask.sum()), **drift})
    return {key: np.array([row[key] for row in rows]) for key in rows[0]}


def drift_summary(study: dict[str, np.ndarray]) -> list[dict[str, float]]:
    """Per step of :func:`drift_study`: share of tokens clipped (over all groups), the part of them
    clipped on the high side, share of groups with any token clipped, and the median and range
    over groups of each error and of the norm ratio; the median deviation is also given separately
    for the groups with and without a clipped token (NaN where there are none). ``study`` is the
    dict of columns :func:`drift_study` returns."""
    needed = ("step", "tokens", "clipped", "clipped_high", "rel_error", "ratio_error", "clip_error", "norm_ratio")
    if not isinstance(study, dict) or any(key not in study for key in needed):
        raise ValueError(
            f"study must be what drift_study returns (a dict with columns {list(needed)}); got "
            f"{type(study).__name__} {sorted(study) if isinstance(study, dict) else ''}."
        )
    summary = []
    hit = study["clipped"] > 0
    for step in np.unique(study["step"]):
        at = study["step"] == step
        tokens = study["tokens"][at]
        summary.append(
            {
                "step": int(step),
                "clipped": float((study["clipped"][at] * tokens).sum() / tokens.sum()),
                "clipped_high": float((study["clipped_high"][at] * tokens).sum() / tokens.sum()),
                "groups_clipped": float((study["clipped"][at] > 0).mean()),
                **{
                    f"{key}_median": float(np.median(study[key][at]))
                    for key in ("rel_error", "ratio_error", "clip_error", "norm_ratio")
                },
                "rel_error_median_clipped_groups": (
                    float(np.median(study["rel_error"][at & hit])) if (at & hit).any() else float("nan")
                ),
                "rel_error_median_unclipped_groups": (
                    float(np.median(study["rel_error"][at & ~hit])) if (at & ~hit).any() else float("nan")
                ),
                "norm_ratio_min": float(study["norm_ratio"][at].min()),
                "norm_ratio_max": float(study["norm_ratio"][at].max()),
            }
        )
    return summary


def _adam_step(
    model, optimizer, groups: list[GroupBatch], old: list[torch.Tensor], recipe: Recipe, max_new_tokens: int
) -> None:
    optimizer.zero_grad()
    loss = sum(recipe_loss(model, g, recipe, max_new_tokens, o).loss for g, o in zip(groups, old))
    (loss / len(groups)).backward()
    optimizer.step()


def move_policy(
    model, groups: list[GroupBatch], recipe: Recipe, max_new_tokens: int, steps: int, lr: float
) -> list[torch.Tensor]:
    """Take ``steps`` Adam steps on the mean of the groups' losses, ratios against the start.

    Returns the sampling policy's log-probs of every group (taken before the first step), so
    that :func:`identity_drift` can measure the clipped update afterwards. This is what
    several minibatch steps per rollout batch do in training: the ratio leaves 1 and the clip
    starts to bind. ``model`` is moved in place; ``groups`` is a non-empty list of
    :class:`GroupBatch`; ``recipe`` a :class:`~stddial_book.theory.recipes.Recipe`; ``max_new_tokens``
    is L_max in tokens; ``lr`` is Adam's learning rate (> 0); ``steps`` may be 0 (nothing moves).
    """
    steps, lr = check_int(steps, "steps", minimum=0), check_number(lr, "lr")
    if not lr > 0:
        raise ValueError(f"lr must be > 0; got {lr}.")
    check_groups(groups)
    *_, (_, old) = policy_steps(model, groups, recipe, max_new_tokens, steps, lr)
    return old


def policy_steps(model, groups: list[GroupBatch], recipe: Recipe, max_new_tokens: int, steps: int, lr: float):
    """Yield ``(step, old)`` before the first Adam step and after each of ``steps`` steps on the
    mean of the groups' losses, moving ``model`` in place; ``old`` is the sampling policy's
    log-probs of every group, taken before the first step (the ratios' denominator). Shared by
    :func:`move_policy`, :func:`drift_study` and ``identity_report.clip_shares``."""
    with torch.no_grad():
        old = [completion_logprobs(model, g.prompt_ids, g.prompt_mask, g.completion_ids, g.mask) for g in groups]
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for step in range(steps + 1):
        if step:
            _adam_step(model, optimizer, groups, old, recipe, max_new_tokens)
        yield step, old


def _check_group_args(batch: GroupBatch, recipe: Recipe, max_new_tokens: int) -> tuple[Recipe, int]:
    if not isinstance(batch, GroupBatch):
        raise TypeError(f"the group must be a GroupBatch (build_group makes one); got {type(batch).__name__}.")
    return as_recipe(recipe), check_int(max_new_tokens, "max_new_tokens", minimum=1)


def check_groups(groups: list[GroupBatch]) -> None:
    if not isinstance(groups, (list, tuple)) or not groups:
        raise ValueError(f"groups must be a non-empty list of GroupBatch; got {groups!r:.60}.")
    wrong = next((g for g in groups if not isinstance(g, GroupBatch)), None)
    if wrong is not None:
        raise TypeError(f"groups must hold GroupBatch objects (build_group makes them); found {type(wrong).__name__}.")
