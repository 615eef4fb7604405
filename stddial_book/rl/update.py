"""One RL update: the rollout's groups turned into minibatch passes of the policy loss, with the identity checked inside (chapter 10)."""

from __future__ import annotations

import math
import resource
import sys
from typing import Any

import numpy as np
import torch

from stddial_book.rl.batches import Batch, GroupLayout, group_sizes_of
from stddial_book.rl.checkpoints import TrainState
from stddial_book.rl.configs import TrainConfig
from stddial_book.rl.losses import policy_loss
from stddial_book.rl.rollout import shared_prompt_logprobs
from stddial_book.rl.sampling import nonsilent_groups
from stddial_book.theory.identity import group_std

__all__ = ["peak_memory_mb", "build_optimizer", "clip_gradient"]


def _trainable(model) -> list[torch.nn.Parameter]:
    """The parameters an update moves: all of the testbed's model, a LoRA policy's adapters only."""
    return [p for p in model.parameters() if p.requires_grad]


def build_optimizer(model, config: TrainConfig) -> torch.optim.Optimizer:
    """The optimizer ``config.optimizer`` names, at ``config.lr``, over the model's trainable parameters
    (all of the testbed's; a LoRA policy's adapters): AdamW without weight decay (the
    book's default, exactly what the trainer always built) or plain SGD, θ ← θ − lr · g (no
    momentum, no weight decay: its step is the gradient itself, so the dial's scale reaches the
    weights unnormalised). Plain SGD keeps no state, so a checkpoint's optimizer file holds only
    its settings and a resumed run continues exactly. ``model`` is the policy's torch module;
    ``config`` the run's :class:`~stddial_book.rl.configs.TrainConfig`."""
    from stddial_book.rl.sft import adamw_optimizer

    params = _trainable(model)
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=config.lr, momentum=0.0, weight_decay=0.0)
    return adamw_optimizer(params, config.lr)


def clip_gradient(model, max_grad_norm: float) -> float:
    """Clip the accumulated gradient to ``max_grad_norm`` in Euclidean norm and return its norm
    before clipping; with ``max_grad_norm`` 0 the gradient is left as it is (only its norm is taken).
    ``model`` is the torch module whose parameters' ``.grad`` hold the gradient (changed in place)."""
    if max_grad_norm > 0:
        return float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm))
    grads = [p.grad.detach() for p in model.parameters() if p.grad is not None]
    if not grads:
        return 0.0
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))


def _group_stats(batch: Batch, values: np.ndarray, layout: GroupLayout) -> dict[str, np.ndarray]:
    """Per group of ``batch``: σ of correctness, Bessel's std of the rewards, k correct, mean |value|
    (``values`` one per sample), and the group's prompt and bucket (its first row's)."""
    if not layout.ragged:
        G = layout.size
        return {
            "sigma": group_std(batch.correct.reshape(-1, G)),
            "reward_std": group_std(batch.rewards.reshape(-1, G), correction=1),
            "k": batch.correct.reshape(-1, G).sum(axis=1),
            "abs_mean": np.abs(values).reshape(-1, G).mean(axis=1),
            "prompt": batch.prompt_index.reshape(-1, G)[:, 0],
            "bucket": batch.buckets.reshape(-1, G)[:, 0],
        }
    first = layout.first_row(torch.arange(layout.num_groups(len(batch)), device="cpu")).numpy()
    return {
        "sigma": np.array([group_std(c) for c in layout.split(batch.correct)]),
        "reward_std": np.array([group_std(r, correction=1) for r in layout.split(batch.rewards)]),
        "k": np.array([c.sum() for c in layout.split(batch.correct)]),
        "abs_mean": np.array([np.abs(v).mean() for v in layout.split(values)]),
        "prompt": batch.prompt_index[first],
        "bucket": batch.buckets[first],
    }


def batch_metrics(
    generated: list[Batch], kept: Batch, advantages: np.ndarray, config: TrainConfig, layout: GroupLayout | None = None
) -> dict[str, Any]:
    """Metrics of the samples generated this step and of the batch that reached the update
    (``layout``: the kept batch's groups; default G = ``config.group_size`` each; with ragged
    groups, those generated are read from their prompts)."""
    allgen = Batch.cat(generated, 0) if len(generated) > 1 else generated[0]
    layout = layout or GroupLayout.of(config.group_size)
    all_layout = GroupLayout.of(group_sizes_of(allgen.prompt_index)) if layout.ragged else layout
    lengths = allgen.mask.sum(dim=1).cpu().numpy()
    stats = _group_stats(allgen, allgen.rewards, all_layout)
    silent = ~nonsilent_groups(allgen.correct, all_layout.group_size)  # unanimous in correctness: the dial's silent
    reward_std = stats["reward_std"]
    out: dict[str, Any] = {
        "reward": float(allgen.rewards.mean()),
        "reward_std": float(reward_std.mean()),
        # TRL's definition: the shaped rewards' std is zero (torch.isclose(std, 0)); it differs from
        # dial/silent_fraction when a length penalty spreads the rewards of a unanimous group
        "frac_reward_zero_std": float(np.isclose(reward_std, 0.0).mean()),
        "accuracy": float(allgen.correct.mean()),
        "completions/mean_length": float(lengths.mean()),
        "completions/min_length": float(lengths.min()),
        "completions/max_length": float(lengths.max()),
        "completions/clipped_ratio": float(allgen.truncated.float().mean()),
        "dial/sigma_mean": float(stats["sigma"].mean()),
        "dial/silent_fraction": float(silent.mean()),
        # every generated group: its prompt (index into the training problems) and k correct
        "groups_generated/prompt": stats["prompt"].tolist(),
        "groups_generated/k": [int(k) for k in stats["k"]],
    }
    if layout.ragged:
        out["groups_generated/size"] = all_layout.group_sizes(len(allgen)).tolist()
    if len(kept):
        out.update(_kept_metrics(kept, advantages, layout))
    return out


def _kept_metrics(kept: Batch, advantages: np.ndarray, layout: GroupLayout) -> dict[str, Any]:
    """Per kept group: σ, weight (mean|A| = 2w, chapter 3), bucket and prompt, and each bucket's
    share of the update mass."""
    stats = _group_stats(kept, advantages, layout)
    sigma, buckets = stats["sigma"], stats["bucket"]
    weight = stats["abs_mean"] / 2.0
    num_groups = len(sigma)
    out: dict[str, Any] = {
        "groups/sigma": [round(float(s), 6) for s in sigma],
        "groups/weight": [round(float(w), 6) for w in weight],
        "groups/bucket": buckets.tolist(),
        "groups/prompt": stats["prompt"].tolist(),
    }
    if layout.ragged:
        out["groups/size"] = layout.group_sizes(len(kept)).tolist()
    for b in sorted(set(buckets.tolist())):
        sel = buckets == b
        out[f"dial/update_mass/{b}"] = float(weight[sel].sum() / num_groups)
        out[f"dial/groups/{b}"] = int(sel.sum())
    return out


def _checkable_groups(batch: Batch, groups: np.ndarray, config: TrainConfig, layout: GroupLayout) -> list[int]:
    """Groups of a minibatch the identity covers: mixed, binary rewards, nothing truncated; none
    when sampling is tempered (the check's scores are those of the untempered policy)."""
    recipe = config.recipe
    chosen = []
    if config.temperature != 1.0:
        return chosen
    for g in groups:
        rows = layout.span(int(g))
        k = int(batch.correct[rows].sum())
        binary = np.isin(batch.rewards[rows], (recipe.reward_correct, recipe.reward_wrong)).all()
        if 0 < k < len(batch.correct[rows]) and binary and not bool(batch.truncated[rows].any()):
            chosen.append(int(g))
        if len(chosen) == config.identity_check_groups:
            break
    return chosen


def _identity_in_update(
    model, batch: Batch, groups: list[int], config: TrainConfig, layout: GroupLayout
) -> list[dict[str, float]]:
    """:func:`~stddial_book.rl.gradcheck.identity_drift` for ``groups`` at the current weights, π_old
    = the sampler's log-probs. Gradients go through ``autograd.grad``: nothing accumulates."""
    from stddial_book.rl.gradcheck import GroupBatch, identity_drift

    out = []
    for g in groups:
        r = layout.span(g)
        group = GroupBatch(
            batch.prompt_ids[r],
            batch.prompt_mask[r],
            batch.completion_ids[r],
            batch.mask[r],
            np.asarray(batch.correct[r], dtype=float),
        )
        out.append(identity_drift(model, group, config.recipe, config.max_new_tokens, batch.logprobs[r]))
    return out


# What one more pass costs on a CPU, in tokens of work: timed on the testbed model with
# one thread, a forward/backward call has a fixed cost of a few milliseconds, the work of
# about 50 tokens, and a pass makes two calls (the prompts, then the completions).
# _passes makes a cut only where it saves more work than this.
_PASS_COST_TOKENS = 100


def _passes(
    batch: Batch, rows: torch.Tensor, group_size: int | GroupLayout, micro: int | None
) -> list[tuple[torch.Tensor, int, int]]:
    """The forward/backward passes of one minibatch, as (rows, first prompt
    column, completion width).

    A pass encodes each of its groups' prompts once and runs its completions
    on the shared cache (:func:`~stddial_book.rl.rollout.shared_prompt_logprobs`).
    The rows are ordered by completion length and each pass is cut to its own
    longest prompt and completion: the padding that only the longest samples
    of the minibatch need is not computed for the others. The loss is
    normalised over the whole optimizer step, so how the rows are split
    changes the update only by float rounding. With ``micro`` each pass holds
    that many samples (gradient accumulation, for memory). Without it the
    split follows the lengths on a CPU, cutting where the work saved outweighs
    the cost of one more pass; on an accelerator, where a pass of a model this
    small costs about the same whatever its size, the minibatch stays one pass.
    ``group_size`` is G, or the batch's :class:`GroupLayout` for ragged groups.
    """
    prompt_len = batch.prompt_mask[rows].sum(dim=1)  # left padding
    columns = torch.arange(1, batch.mask.shape[1] + 1, device=rows.device)
    completion_len = (batch.mask[rows] * columns).amax(dim=1).clamp(min=1)
    order = torch.argsort(completion_len, stable=True)
    rows = rows[order]
    prompt_len = prompt_len[order].tolist()
    completion_len = completion_len[order].tolist()
    if micro is not None:
        cuts = list(range(0, len(rows), micro)) + [len(rows)]
    elif rows.device.type == "cpu":
        groups = GroupLayout.of(group_size).group_of(rows).tolist()
        cuts = _length_cuts(prompt_len, completion_len, groups)
    else:
        cuts = [0, len(rows)]
    width = batch.prompt_mask.shape[1]
    return [(rows[a:b], width - max(prompt_len[a:b]), max(completion_len[a:b])) for a, b in zip(cuts[:-1], cuts[1:])]


def _pass_tokens(prompt_len: list[int], completion_len: list[int], groups: list[int]) -> int:
    """Tokens one pass computes: each distinct prompt once at the longest
    prompt's width, each completion at the longest completion's width less
    the last column, which is not fed in."""
    return len(set(groups)) * max(prompt_len) + len(completion_len) * (max(completion_len) - 1)


def _length_cuts(prompt_len: list[int], completion_len: list[int], groups: list[int]) -> list[int]:
    """Where to cut rows sorted by completion length so that the tokens
    computed (:func:`_pass_tokens`), plus :data:`_PASS_COST_TOKENS` per pass,
    are fewest: a dynamic programme over the runs of equal length."""
    n = len(completion_len)
    bounds = [i for i in range(n) if i == 0 or completion_len[i] != completion_len[i - 1]]
    bounds.append(n)
    best = [0.0] + [math.inf] * (len(bounds) - 1)
    back = [0] * len(bounds)
    for j in range(1, len(bounds)):
        for i in range(j):
            a, b = bounds[i], bounds[j]
            cost = best[i] + _PASS_COST_TOKENS + _pass_tokens(prompt_len[a:b], completion_len[a:b], groups[a:b])
            if cost < best[j]:
                best[j], back[j] = cost, i
    cuts, j = [n], len(bounds) - 1
    while j > 0:
        j = back[j]
        cuts.append(bounds[j])
    return cuts[::-1]


def _record_identity(
    model, batch: Batch, groups: np.ndarray, config: TrainConfig, index: int, checks: dict, layout: GroupLayout
) -> None:
    """Check the identity −∇L = w (ḡ₊ − ḡ₋) on minibatch ``index``'s first checkable groups at
    the weights it sees, appending each group's result to the lists of ``checks`` (the update's
    ``identity/*`` metrics; chapter 10)."""
    chosen = _checkable_groups(batch, groups, config, layout)
    for result in _identity_in_update(model, batch, chosen, config, layout):
        checks["minibatch"].append(index)
        checks["rel_error"].append(result["rel_error"])
        checks["clipped"].append(result["clipped"])
        checks["sigma"].append(result["group_std"])


def _backward_pass(
    model,
    ref_model,
    batch: Batch,
    adv: torch.Tensor,
    pass_rows: tuple[torch.Tensor, int, int],
    config: TrainConfig,
    loss_mask: torch.Tensor,
    step_counts: tuple[int, int],
    sums: dict[str, float],
    layout: GroupLayout,
) -> None:
    """One forward/backward pass of :func:`policy_loss` over ``pass_rows`` (rows, first prompt
    column, completion width, from :func:`_passes`); the gradient accumulates in the model and
    the metrics in ``sums``, each weighted by the pass's share of the step's loss tokens.

    ``step_counts`` are the loss tokens and sequences of the whole optimizer step, so the passes'
    losses add up to the minibatch's (chapter 2)."""
    r, start, width = pass_rows
    step_tokens, step_sequences = step_counts
    # each pass is cut to its own rows' padding, and encodes each of
    # its groups' prompts once (see _passes)
    groups, prompt_rows = torch.unique(layout.group_of(r), return_inverse=True)
    first = layout.first_row(groups)
    inputs = (
        batch.prompt_ids[first][:, start:],
        batch.prompt_mask[first][:, start:],
        prompt_rows,
        batch.completion_ids[r][:, :width],
        batch.mask[r][:, :width],
    )
    ref = None
    if ref_model is not None:
        with torch.no_grad():
            ref = shared_prompt_logprobs(ref_model, *inputs, temperature=config.temperature)
    # at the sampling temperature: π_old (the sampler's log-probs) is
    # the tempered policy
    logp, ent = shared_prompt_logprobs(model, *inputs, with_entropy=True, temperature=config.temperature)
    out = policy_loss(
        logp,
        batch.logprobs[r][:, :width],
        adv[r],
        inputs[4],
        config.recipe,
        max_new_tokens=config.max_new_tokens,
        ref_logprobs=ref,
        truncated=batch.truncated[r],
        entropy=ent,
        step_num_tokens=step_tokens,
        step_num_sequences=step_sequences,
    )
    out.loss.backward()
    share = float(loss_mask[r].sum()) / step_tokens
    for k, v in out.metrics.items():
        sums[k] = sums.get(k, 0.0) + v * share
    sums["loss"] = sums.get("loss", 0.0) + float(out.loss.detach())


def _update_norm(model, before: list[torch.Tensor]) -> float:
    """‖θ_after − θ_before‖, the Euclidean length of the whole update over the trainable parameters
    (all of the testbed's model; frozen weights do not move; chapter 10)."""
    with torch.no_grad():
        return float(torch.sqrt(sum(((p - q) ** 2).sum() for p, q in zip(_trainable(model), before))))


def update_policy(
    model,
    optimizer,
    batch: Batch,
    advantages: np.ndarray,
    config: TrainConfig,
    state: TrainState,
    ref_model,
    check_identity: bool = False,
    group_sizes: list[int] | None = None,
) -> dict[str, Any]:
    """``num_minibatches`` optimizer steps on one rollout batch; returns
    averaged loss metrics.

    With ``check_identity``, each minibatch's first groups are checked
    against the identity at the weights that minibatch sees, before its
    gradient is taken (``identity/*`` lists). ``group_sizes`` gives each
    group its own size (ragged groups; default G = ``config.group_size``
    each); minibatches are then still cut between whole groups."""
    layout = GroupLayout.of(config.group_size if group_sizes is None else group_sizes)
    device = next(model.parameters()).device
    adv = torch.as_tensor(advantages, dtype=next(model.parameters()).dtype, device=device)
    # π_old is the policy that sampled the batch: the sampler recorded its
    # log-probs (batch.logprobs), so no extra forward pass is needed (a full
    # pass agrees to float rounding; test_rollout checks it).
    num_groups = layout.num_groups(len(batch))
    order = state.rng.permutation(num_groups)
    loss_mask = batch.mask & ~batch.truncated[:, None] if config.recipe.overlong_filter else batch.mask
    sums: dict[str, float] = {}
    counted = 0
    before = [p.detach().clone() for p in _trainable(model)]
    checks: dict[str, list] = {key: [] for key in ("minibatch", "rel_error", "clipped", "sigma")}
    # whole groups per minibatch; a short (capped) DAPO batch gives smaller
    # minibatches
    for index, groups in enumerate(np.array_split(order, min(config.num_minibatches, num_groups))):
        rows = torch.as_tensor(layout.rows(groups), device=device)
        step_tokens = int(loss_mask[rows].sum())
        if step_tokens == 0:
            # every sample of this minibatch was filtered out (truncated)
            continue
        if check_identity:
            _record_identity(model, batch, groups, config, index, checks, layout)
        optimizer.zero_grad(set_to_none=True)
        for pass_rows in _passes(batch, rows, layout, config.micro_batch_size):
            if bool(loss_mask[pass_rows[0]].any()):
                counts = (step_tokens, len(rows))
                _backward_pass(model, ref_model, batch, adv, pass_rows, config, loss_mask, counts, sums, layout)
        grad_norm = clip_gradient(model, config.max_grad_norm)
        sums["grad_norm"] = sums.get("grad_norm", 0.0) + grad_norm
        optimizer.step()
        state.updates += 1
        counted += 1
    metrics = {k: v / max(counted, 1) for k, v in sums.items()}
    metrics["update_norm"] = _update_norm(model, before)
    metrics["optimizer_steps"] = counted
    if check_identity:
        metrics.update({f"identity/{key}": value for key, value in checks.items()})
    return metrics


def peak_memory_mb(device) -> dict[str, float]:
    """Peak resident memory of this process (MB) and, on CUDA, peak GPU memory allocated (MB).
    ``device`` is the torch device the run computed on (such as ``"cpu"`` or ``"cuda:0"``)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = {"peak_rss_mb": rss / 1024 if sys.platform != "darwin" else rss / 2**20}
    if torch.device(device).type == "cuda":
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return out
