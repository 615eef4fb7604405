"""The identity on a pretrained language model's own gradients (chapter 4): one group of SmolLM2's real
completions, as :mod:`stddial_book.rl.gradcheck` takes it.

:func:`lm_group` samples completions of one question from a Hugging Face causal LM (its chat template, pure
temperature sampling), verifies each as the training reward does, and returns a
:class:`~stddial_book.rl.gradcheck.GroupBatch` of G of them that holds both outcomes (the identity is about
groups that are not silent: it keeps drawing until it has k right and G − k wrong ones, the first that
came). :func:`gradient_params` picks the parameters the check differentiates (the last decoder layers: all
134.5 million would need G gradient vectors of that size).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from stddial_book.rl.gradcheck import GroupBatch, group_of

__all__ = ["lm_group", "gradient_params"]


def gradient_params(model: Any, last_layers: int = 1) -> list[torch.Tensor]:
    """Freeze every parameter of ``model`` but those of its last ``last_layers`` decoder layers; return those.

    ``model`` is a Hugging Face decoder (its layers at ``model.model.layers``, as Llama's and Qwen2's);
    ``last_layers`` defaults to 1."""
    for p in model.parameters():
        p.requires_grad_(False)
    layers = model.model.layers[-last_layers:]
    params = [p for layer in layers for p in layer.parameters()]
    for p in params:
        p.requires_grad_(True)
    return params


def _draw(
    model: Any, tokenizer: Any, prompt: torch.Tensor, gold: str, group_size: int, verifier: str,
    max_new_tokens: int, seed: int, rounds: int, num_correct: int,
) -> tuple[list[list[int]], list[list[int]]]:  # fmt: skip
    """Right and wrong completions (token ids, EOS kept), drawn in rounds of ``group_size`` until there are
    ``num_correct`` right and ``group_size - num_correct`` wrong ones; a ValueError after ``rounds``."""
    from stddial_book.bridges.lm_rewards import is_correct

    device, eos = prompt.device, tokenizer.eos_token_id
    right: list[list[int]] = []
    wrong: list[list[int]] = []
    generator_seed = torch.initial_seed()
    torch.manual_seed(seed)
    try:
        for _ in range(rounds):
            with torch.no_grad():
                out = model.generate(
                    prompt.repeat(group_size, 1),
                    attention_mask=torch.ones(group_size, prompt.shape[1], dtype=torch.long, device=device),
                    do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                    max_new_tokens=max_new_tokens, pad_token_id=eos,
                )  # fmt: skip
            for row in out[:, prompt.shape[1] :].tolist():
                ids = row[: row.index(eos) + 1] if eos in row else row
                text = tokenizer.decode(ids, skip_special_tokens=True)
                (right if is_correct(text, gold, verifier) else wrong).append(ids)
            if len(right) >= num_correct and len(wrong) >= group_size - num_correct:
                return right, wrong
    finally:
        torch.manual_seed(generator_seed)
    raise ValueError(
        f"{rounds} rounds gave {len(right)} right and {len(wrong)} wrong completions; choose a question the "
        "model sometimes solves, or a smaller num_correct."
    )


def lm_group(
    model: Any,
    tokenizer: Any,
    question: str,
    gold: str,
    group_size: int,
    num_correct: int,
    *,
    system_prompt: str | None,
    max_new_tokens: int = 24,
    verifier: str = "last-number",
    seed: int = 0,
    rounds: int = 20,
) -> GroupBatch:
    """``group_size`` sampled completions of ``question``, ``num_correct`` of them verified right (the first
    right and the first wrong ones drawn, in rounds of ``group_size`` samples, at most ``rounds``).

    ``model`` and ``tokenizer`` are a Hugging Face causal LM and its tokenizer (with a chat template);
    ``gold`` is the question's gold answer and ``verifier`` the check that compares it with each completion
    (``"last-number"``, the default, or ``"math-verify"``). ``system_prompt`` is the system message before
    the question (``None`` or empty: none). Each completion is sampled at temperature 1 with nothing
    truncated, up to ``max_new_tokens`` tokens (default 24). ``seed`` seeds torch's global generator for
    the draws (it is reseeded with its previous initial seed afterwards). A ``ValueError`` when ``rounds``
    rounds do not give enough right and wrong completions.
    """
    from stddial_book.bridges.lm_measure import chat_prompts

    if not 0 < num_correct < group_size:
        raise ValueError(f"num_correct must lie strictly between 0 and group_size = {group_size}; got {num_correct}.")
    device = next(model.parameters()).device
    text = chat_prompts(tokenizer, [question], system_prompt)[0]
    prompt = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"].to(device)
    right, wrong = _draw(
        model, tokenizer, prompt, gold, group_size, verifier, max_new_tokens, seed, rounds, num_correct
    )
    rows = right[:num_correct] + wrong[: group_size - num_correct]
    rewards = np.array([1] * num_correct + [0] * (group_size - num_correct))
    return group_of(prompt, rows, tokenizer.eos_token_id, rewards)
