"""One batch as the book's trainer holds it, for the comparison with TRL's GRPOTrainer (chapter 14): the
checked inputs, the shaped rewards, the padded tokens, the reference log-probs and the gradients compared."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from stddial_book.bridges.trl_rewards import overlong_cache_tokens
from stddial_book.theory.recipes import Recipe

#: The one-batch check's helpers (the check itself is :func:`stddial_book.bridges.trl_check.one_batch_check`).
__all__ = [
    "check_batch",
    "book_rewards",
    "BookTokens",
    "book_tokens",
    "truncated",
    "reference_logprobs",
    "gradient_difference",
]


def check_batch(
    problems: Any, completions: Any, old_logprobs: Any, group_size: int, max_new_tokens: int, vocab_size: int
) -> tuple[list[Any], list[list[int]]]:
    """Problems (G in a row per prompt) and completions (token-id lists, EOS only last) for one_batch_check,
    with their log π_old if given (checked by ``_check_old_logprobs``).

    ``problems`` holds one :class:`~stddial_book.rl.tasks.Problem` per sample, each prompt ``group_size`` (G)
    times in a row; ``completions`` each sample's token ids, unpadded, 1 to ``max_new_tokens`` (L_max) of them,
    ending at the first EOS or cut off at exactly L_max, every id below ``vocab_size`` (the policy's vocabulary).
    ``old_logprobs`` is ``None`` or a float tensor (batch, ≥ the longest completion). Returns both as lists.
    """
    from stddial_book.rl.model import CharCodec
    from stddial_book.rl.tasks import Problem

    for name, value in (("problems", problems), ("completions", completions)):
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise TypeError(f"{name} must be a list, one entry per sample; got {type(value).__name__}.")
    problems, completions = list(problems), list(completions)
    if not all(isinstance(p, Problem) for p in problems):
        raise TypeError("problems must hold stddial_book.rl.tasks.Problem objects, each repeated G times in a row.")
    if len(problems) != len(completions):
        raise ValueError(
            f"got {len(completions)} completions for {len(problems)} problems; pass one problem per "
            "sample (each prompt G times in a row)."
        )
    if not problems or len(problems) % group_size:
        raise ValueError(f"the batch of {len(problems)} samples does not divide into groups of G = {group_size}.")
    for start in range(0, len(problems), group_size):
        if len(set(problems[start : start + group_size])) != 1:
            raise ValueError(
                f"samples {start} to {start + group_size - 1} are not one prompt's group; TRL groups "
                "samples by position, so repeat each problem G times in a row."
            )
    codec = CharCodec()
    out = []
    for i, ids in enumerate(completions):
        if isinstance(ids, (str, bytes)) or not (isinstance(ids, Sequence) or hasattr(ids, "tolist")):
            raise TypeError(f"completion {i} must be a list of token ids; got {type(ids).__name__}.")
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        if not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in ids):
            raise TypeError(f"completion {i} must hold integer token ids; got {ids!r:.60}.")
        ids = [int(t) for t in ids]
        if not 1 <= len(ids) <= max_new_tokens:
            raise ValueError(
                f"completion {i} has {len(ids)} tokens; completions hold 1 to max_new_tokens={max_new_tokens}."
            )
        if any(not 0 <= t < vocab_size for t in ids) or codec.pad_id in ids:
            raise ValueError(
                f"completion {i} holds padding or ids outside the vocabulary: {ids}; pass each "
                "completion's own tokens, unpadded."
            )
        if codec.eos_id in ids[:-1] or (len(ids) < max_new_tokens and ids[-1] != codec.eos_id):
            raise ValueError(
                f"completion {i} ({ids}) must end at its first EOS or be cut off at exactly "
                f"max_new_tokens={max_new_tokens}; it does neither."
            )
        out.append(ids)
    _check_old_logprobs(old_logprobs, len(out), max(len(ids) for ids in out))
    return problems, out


def _check_old_logprobs(old_logprobs: Any, rows: int, width: int) -> None:
    """Refuse log π_old that is not a float tensor of shape (batch, ≥ the longest completion); None passes."""
    import torch

    if old_logprobs is None:
        return
    if not isinstance(old_logprobs, torch.Tensor) or not old_logprobs.is_floating_point():
        raise TypeError("old_logprobs must be a float tensor of shape (batch, tokens), e.g. Rollout.logprobs.")
    if old_logprobs.dim() != 2 or old_logprobs.shape[0] != rows or old_logprobs.shape[1] < width:
        raise ValueError(f"old_logprobs must have shape ({rows}, ≥ {width}); got {tuple(old_logprobs.shape)}.")


def book_rewards(
    recipe: Recipe, problems: list[Any], completions: list[list[int]], max_new_tokens: int
) -> tuple[np.ndarray, np.ndarray]:
    """The verifier's correctness and the recipe's shaped reward per sample: ``reward_correct`` or
    ``reward_wrong``, plus DAPO's overlong penalty where the recipe has it (chapter 14).

    ``recipe`` is a :class:`~stddial_book.theory.recipes.Recipe`; ``problems`` one problem per sample and
    ``completions`` its token ids (decoded with the book's character codec); ``max_new_tokens`` is L_max, the
    length the overlong penalty is measured against."""
    from stddial_book.rl.model import CharCodec
    from stddial_book.rl.sampling import overlong_penalty
    from stddial_book.rl.tasks import rewards as verify

    codec = CharCodec()
    correct = verify([codec.decode(ids) for ids in completions], problems)
    rewards = np.where(correct > 0, recipe.reward_correct, recipe.reward_wrong)
    lengths = np.array([len(ids) for ids in completions])
    if recipe.overlong_penalty:
        cache = overlong_cache_tokens(recipe, max_new_tokens)
        rewards = rewards + overlong_penalty(lengths, max_new_tokens, cache)
    return correct, rewards


class BookTokens(NamedTuple):
    """The batch's tensors in the order :func:`~stddial_book.rl.rollout.completion_logprobs` takes them.

    ``prompt_ids`` and ``prompt_mask`` are the left-padded prompts and their mask, ``completion_ids`` the
    right-padded completions and ``mask`` True on their real tokens; each has one row per sample.
    """

    prompt_ids: Any
    prompt_mask: Any
    completion_ids: Any
    mask: Any


def book_tokens(problems: list[Any], completions: list[list[int]], device: Any) -> BookTokens:
    """The batch as the book's trainer holds it: left-padded prompt ids and mask, right-padded completion ids
    and mask (padding is the codec's pad id). ``problems`` has one problem per sample, ``completions`` each
    sample's token ids; ``device`` is the torch device the tensors are made on."""
    import torch

    from stddial_book.rl.batches import encode_prompts
    from stddial_book.rl.model import CharCodec

    codec = CharCodec()
    prompt_ids, prompt_mask = encode_prompts(problems, codec, device)
    width = max(len(ids) for ids in completions)
    completion_ids = torch.full((len(completions), width), codec.pad_id, dtype=torch.long, device=device)
    for row, ids in enumerate(completions):
        completion_ids[row, : len(ids)] = torch.tensor(ids, device=device)
    return BookTokens(prompt_ids, prompt_mask, completion_ids, completion_ids != codec.pad_id)


def truncated(completions: list[list[int]], max_new_tokens: int, device: Any) -> Any:
    """Per sample, whether it was cut off: L_max tokens without a final EOS. ``completions`` are the samples'
    token ids, ``max_new_tokens`` is L_max; a boolean tensor on ``device``."""
    import torch

    from stddial_book.rl.model import CharCodec

    eos = CharCodec().eos_id
    return torch.tensor([len(ids) == max_new_tokens and ids[-1] != eos for ids in completions], device=device)


def reference_logprobs(reference: Any, tokens: BookTokens) -> Any:
    """log π_ref of the completions' tokens, from a copy of ``reference`` on the batch's device, without
    gradient. ``tokens`` is the batch as :func:`book_tokens` makes it (its device is that of its prompt ids)."""
    import torch

    from stddial_book.rl.rollout import completion_logprobs

    with torch.no_grad():
        model = copy.deepcopy(reference).to(tokens.prompt_ids.device)
        return completion_logprobs(model, *tokens)


def gradient_difference(trl_model: Any, book_model: Any) -> tuple[float, float]:
    """The largest absolute difference g_TRL − g_book over all weights, and the largest absolute g_book (a
    weight without gradient counts as 0). ``trl_model`` and ``book_model`` are the two copies of the policy,
    after each side's backward pass; parameters are matched by name."""
    import torch

    trl_grads = dict(trl_model.named_parameters())
    difference, scale = 0.0, 0.0
    for name, param in book_model.named_parameters():
        theirs = trl_grads[name].grad
        ours = param.grad if param.grad is not None else torch.zeros_like(param)
        theirs = torch.zeros_like(ours) if theirs is None else theirs.to(ours.device)
        difference = max(difference, float((theirs - ours).abs().max()))
        scale = max(scale, float(ours.abs().max()))
    return difference, scale
