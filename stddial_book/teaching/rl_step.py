"""One RL step, written plainly: sample, verify, advantages, clipped loss,
backward, optimizer step (chapter 10).

The engine splits the same step between ``_rollout_round`` (a KV-cache
sampler that shares each prompt's cache among its G samples),
``group_advantages``, ``DynamicSampler`` and ``update_policy`` (minibatches, passes
cut to their own padding, the KL term against a reference policy, overlong
filtering, identity checks inside the update, metrics). tests/test_teaching.py
checks that :func:`rl_step` and :func:`policy_update` move the weights as the
engine's advantages and ``update_policy`` do on the same batch.

A batch here is a dict of tensors, one row a sample, the G samples of a group
contiguous: ``prompt_ids`` (B, P), ``completion_ids`` (B, T), ``mask`` (B, T)
true on completion tokens (EOS included), ``logprobs`` (B, T) log π_old of
each sampled token, and ``truncated`` (B,). Prompts share one length (no
left padding), as the testbed's prompts of one digit count do. ``config`` is
anything with ``recipe``, ``group_size``, ``max_new_tokens`` and
``max_grad_norm`` (the engine's ``TrainConfig``), ``codec`` anything with
``eos_id`` and ``pad_id`` (the engine's ``CharCodec``).
"""

from __future__ import annotations

import torch

from stddial_book.teaching.advantages import dapo_advantages, dr_grpo_advantages, grpo_advantages
from stddial_book.teaching.aggregation import aggregate_loss
from stddial_book.teaching.surrogate import clipped_surrogate

__all__ = ["sample_groups", "token_logprobs", "policy_update", "rl_step"]


@torch.no_grad()
def sample_groups(
    model,
    prompt_ids: torch.Tensor,
    group_size: int,
    max_new_tokens: int,
    codec,
    generator: torch.Generator | None = None,
) -> dict[str, torch.Tensor]:
    """G completions of each prompt at temperature 1, recording log π_old.
    No KV cache: each new token re-reads the whole sequence.

    ``model`` maps ``input_ids`` to ``.logits``; ``prompt_ids`` (num_prompts,
    P); ``group_size`` is G; ``max_new_tokens`` caps each completion's
    length; ``codec`` gives ``eos_id`` and ``pad_id``; ``generator`` is the
    torch generator to sample from (None: the global one)."""
    ids = prompt_ids.repeat_interleave(group_size, dim=0)  # groups contiguous
    done = torch.zeros(len(ids), dtype=torch.bool, device=ids.device)
    tokens, logprobs, mask = [], [], []
    for _ in range(max_new_tokens):
        logits = model(input_ids=ids).logits[:, -1]
        log_probs = torch.log_softmax(logits, dim=-1)
        probs = log_probs.exp()
        token = torch.multinomial(probs, 1, generator=generator)[:, 0]
        token = torch.where(done, codec.pad_id, token)  # pad finished rows
        mask.append(~done)
        tokens.append(token)
        chosen = log_probs.gather(1, token[:, None])[:, 0]
        logprobs.append(torch.where(done, 0.0, chosen))
        ids = torch.cat([ids, token[:, None]], dim=1)
        done = done | (token == codec.eos_id)
        if done.all():
            break
    return {
        "prompt_ids": ids[:, : prompt_ids.shape[1]],
        "completion_ids": torch.stack(tokens, dim=1),
        "mask": torch.stack(mask, dim=1),
        "logprobs": torch.stack(logprobs, dim=1),
        "truncated": ~done,  # no EOS within max_new_tokens
    }


def token_logprobs(model, prompt_ids, completion_ids, mask) -> torch.Tensor:
    """log π_θ of each completion token from one forward pass over prompt
    and completion (with grad); 0 on padding. ``model``, ``prompt_ids``
    (B, P), ``completion_ids`` and ``mask`` (B, T) are as in a batch."""
    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    # the logits at position t predict the token at t + 1
    logits = model(input_ids=ids).logits[:, prompt_ids.shape[1] - 1 : -1]
    log_probs = torch.log_softmax(logits, dim=-1)
    chosen = log_probs.gather(2, completion_ids[:, :, None])[:, :, 0]
    return torch.where(mask, chosen, torch.zeros_like(chosen))


def policy_update(model, optimizer, batch, advantages, config) -> float:
    """One optimizer step on the clipped surrogate of a sampled ``batch``,
    with ``advantages`` one per sample (B,). Returns the loss. ``model`` is
    the policy, ``optimizer`` steps its weights, and ``config`` gives the
    recipe's clip range and aggregation, ``max_new_tokens`` and
    ``max_grad_norm`` (0: no clip)."""
    recipe, mask = config.recipe, batch["mask"]
    ids = batch["completion_ids"]
    logprobs = token_logprobs(model, batch["prompt_ids"], ids, mask)
    per_token = clipped_surrogate(
        logprobs,
        batch["logprobs"],  # log π_old, recorded by the sampler
        advantages,
        recipe.clip_low,
        recipe.clip_high,
    )
    aggregation = recipe.loss_aggregation
    loss = aggregate_loss(per_token, mask, aggregation, config.max_new_tokens)
    optimizer.zero_grad()
    loss.backward()
    if config.max_grad_norm:  # 0: no clip
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
    optimizer.step()
    return loss.item()


def rl_step(
    model,
    optimizer,
    prompt_ids: torch.Tensor,
    reward_fn,
    config,
    codec,
) -> float | None:
    """One step of GRPO, Dr. GRPO or DAPO (its filter; the refill is
    ``dynamic_sampling``'s), without the KL term or DAPO's overlong
    handling. ``reward_fn``, called as ``reward_fn(completion_ids, mask)``,
    gives one 0/1 correctness flag a sample. ``model`` is the policy and
    ``optimizer`` steps its weights; ``config`` gives the recipe, G,
    ``max_new_tokens`` and ``max_grad_norm``, ``codec`` the EOS and padding
    ids; ``prompt_ids`` (num_prompts, P). Samples from torch's global
    generator (``torch.manual_seed``). Returns the loss (None: every group
    silent)."""
    recipe, G = config.recipe, config.group_size
    max_new_tokens = config.max_new_tokens
    # 1. sample G completions of each prompt: this policy is π_old
    batch = sample_groups(model, prompt_ids, G, max_new_tokens, codec)
    # 2. verify, and score with the recipe's reward values (DAPO's are ±1)
    correct = reward_fn(batch["completion_ids"], batch["mask"]).bool()
    rewards = torch.where(correct, recipe.reward_correct, recipe.reward_wrong)
    rewards = rewards.to(batch["logprobs"].dtype).reshape(-1, G)
    # 3. advantages: GRPO divides by σ, Dr. GRPO does not, DAPO filters
    if recipe.dynamic_sampling:
        advantages, keep = dapo_advantages(rewards)
        rows = keep.repeat_interleave(G)
        batch = {name: value[rows] for name, value in batch.items()}
    elif recipe.scale_std:
        advantages = grpo_advantages(rewards)
    else:
        advantages = dr_grpo_advantages(rewards)
    if len(advantages) == 0:  # every group silent: nothing to learn from
        return None
    # 4. the clipped loss, backward, optimizer step
    advantages = advantages.reshape(-1)  # one A_i a sample
    return policy_update(model, optimizer, batch, advantages, config)
