"""Chapter 2's worked example: one GRPO, Dr. GRPO and DAPO step on one group, computed by hand.

The policy writes tokens from a three-letter vocabulary {a, b, c} with logits (θ₁, θ₂, 0), the
same at every position, so log π(v) = logit(v) − log(e^θ₁ + e^θ₂ + 1) and its gradient with
respect to θ = (θ₁, θ₂) is onehot(v) − π restricted to the two parameters: at θ = 0 every token
has probability 1/3 and the scores are thirds. A completion's log-probability is the sum over its
tokens. Four completions of different lengths answer one prompt; the first is correct.

Every function here is plain numpy (the policy's log-probs also as a torch tensor, for autograd);
tests/test_worked_step.py checks each number against the package's ``group_advantages`` and
``policy_loss``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch

__all__ = [
    "WORKED_VOCABULARY",
    "WORKED_COMPLETIONS",
    "WORKED_CORRECT",
    "WORKED_MAX_NEW_TOKENS",
    "worked_token_probs",
    "worked_token_scores",
    "worked_summed_scores",
    "worked_advantages",
    "worked_token_weights",
    "worked_loss",
    "worked_update",
    "worked_identity",
    "worked_logprobs",
    "worked_fraction",
]

#: The tokens the policy can write; the first two have the logits θ₁ and θ₂, the third 0.
WORKED_VOCABULARY = ("a", "b", "c")
#: The group: four completions of one prompt, of lengths 2, 1, 3 and 4.
WORKED_COMPLETIONS = ("aa", "b", "cbc", "bbcb")
#: Which completions the verifier accepts: only the first.
WORKED_CORRECT = (True, False, False, False)
#: The generation cap L_max: far above every completion, so no sample is cut off or penalised.
WORKED_MAX_NEW_TOKENS = 8


def worked_token_probs(theta: np.ndarray) -> np.ndarray:
    """π(a), π(b), π(c): the softmax of the logits (θ₁, θ₂, 0), ``theta`` = (θ₁, θ₂)."""
    logits = np.array([theta[0], theta[1], 0.0], dtype=float)
    weights = np.exp(logits - logits.max())
    return weights / weights.sum()


def worked_token_scores(theta: np.ndarray) -> dict[str, np.ndarray]:
    """∇_θ log π(v) for each token v: onehot(v) − π, first two coordinates (the parameters).

    ``theta`` = (θ₁, θ₂), the two logits.
    """
    probs = worked_token_probs(theta)
    return {v: np.eye(3)[i][:2] - probs[:2] for i, v in enumerate(WORKED_VOCABULARY)}


def worked_summed_scores(completions: tuple[str, ...], theta: np.ndarray) -> np.ndarray:
    """g̃ᵢ = ∇_θ log π(oᵢ), the summed score: the sum of the token scores of completion i; shape (G, 2).

    ``completions`` are strings over the vocabulary; ``theta`` = (θ₁, θ₂).
    """
    scores = worked_token_scores(theta)
    return np.array([sum(scores[token] for token in completion) for completion in completions])


def worked_advantages(rewards: np.ndarray, scale_std: bool) -> np.ndarray:
    """Aᵢ = (rᵢ − mean)/σ (GRPO, DAPO) or rᵢ − mean (Dr. GRPO); 0 for a silent group.

    ``rewards`` (G,) are one group's; ``scale_std`` is True to divide by σ.
    """
    rewards = np.asarray(rewards, dtype=float)
    centred = rewards - rewards.mean()
    sigma = rewards.std()  # the population std, as the book's presets use
    if sigma == 0.0:
        return np.zeros_like(rewards)
    return centred / sigma if scale_std else centred


def worked_token_weights(lengths: np.ndarray, aggregation: str, max_new_tokens: int) -> np.ndarray:
    """The weight the aggregated loss gives each token of sample i, one number per sample.

    ``seq-mean-token-mean`` (GRPO): 1/(G ℓᵢ); ``seq-mean-token-sum-norm`` (Dr. GRPO): 1/(G L_max);
    ``token-mean`` (DAPO): 1/Σⱼ ℓⱼ. ``lengths`` (G,) are the ℓᵢ in tokens, ``aggregation`` is one
    of those three names and ``max_new_tokens`` is L_max.
    """
    lengths = np.asarray(lengths, dtype=float)
    size = lengths.size
    if aggregation == "seq-mean-token-mean":
        return 1.0 / (size * lengths)
    if aggregation == "seq-mean-token-sum-norm":
        return np.full(size, 1.0 / (size * max_new_tokens))
    if aggregation == "token-mean":
        return np.full(size, 1.0 / lengths.sum())
    raise ValueError(f"unknown aggregation {aggregation!r}")


def worked_loss(advantages: np.ndarray, lengths: np.ndarray, aggregation: str, max_new_tokens: int) -> float:
    """The loss at the first step: every token's clipped-surrogate loss is −Aᵢ (the ratio is 1),
    so the loss is Σᵢ ℓᵢ · weightᵢ · (−Aᵢ). ``advantages`` (G,) are the Aᵢ; ``lengths``,
    ``aggregation`` and ``max_new_tokens`` are those of :func:`worked_token_weights`."""
    weights = worked_token_weights(lengths, aggregation, max_new_tokens)
    return float(np.sum(np.asarray(lengths) * weights * -np.asarray(advantages)))


def worked_update(
    advantages: np.ndarray, scores: np.ndarray, lengths: np.ndarray, aggregation: str, max_new_tokens: int
) -> np.ndarray:
    """The step direction −∇_θ loss = Σᵢ weightᵢ Aᵢ g̃ᵢ (token t of sample i contributes
    weightᵢ · Aᵢ · ∇ log π(o_{i,t}), and those add up to g̃ᵢ over the sample). ``advantages`` (G,)
    are the Aᵢ, ``scores`` (G, 2) the g̃ᵢ; ``lengths``, ``aggregation`` and ``max_new_tokens`` are
    those of :func:`worked_token_weights`."""
    weights = worked_token_weights(lengths, aggregation, max_new_tokens)
    return ((weights * np.asarray(advantages))[:, None] * scores).sum(axis=0)


def worked_identity(
    correct: np.ndarray, scores: np.ndarray, lengths: np.ndarray, aggregation: str, max_new_tokens: int, weight: float
) -> dict[str, np.ndarray]:
    """The identity's right-hand side, w · (ḡ₊ − ḡ₋), with gᵢ = g̃ᵢ normalised as the
    aggregation does (g̃ᵢ/ℓᵢ, g̃ᵢ/L_max, g̃ᵢ/ℓ̄ with ℓ̄ the group's mean length): then
    −∇ loss = (1/G) Σᵢ Aᵢ gᵢ. Returns g, ḡ₊, ḡ₋ and the step. ``correct`` (G,) flags the
    right samples, ``scores`` (G, 2) are the g̃ᵢ, ``weight`` is w; ``lengths``, ``aggregation``
    and ``max_new_tokens`` are those of :func:`worked_token_weights`."""
    correct = np.asarray(correct, dtype=bool)
    size = correct.size  # G: the step is (1/G) Σᵢ Aᵢ gᵢ with gᵢ = G · weightᵢ · g̃ᵢ
    g = size * worked_token_weights(lengths, aggregation, max_new_tokens)[:, None] * scores
    g_plus, g_minus = g[correct].mean(axis=0), g[~correct].mean(axis=0)
    return {"g": g, "g_plus": g_plus, "g_minus": g_minus, "step": weight * (g_plus - g_minus)}


def worked_logprobs(completions: tuple[str, ...], theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """log π(o_{i,t}) as a (G, T) tensor differentiable in ``theta``, padded with zeros, and the
    (G, T) mask of real tokens: the inputs the package's ``policy_loss`` takes. ``completions``
    are strings over the vocabulary; ``theta`` = (θ₁, θ₂), a tensor of shape (2,)."""
    device = theta.device
    logits = torch.cat([theta, torch.zeros(1, dtype=theta.dtype, device=device)])
    logp = torch.log_softmax(logits, dim=0)
    width = max(len(c) for c in completions)
    tokens = [[WORKED_VOCABULARY.index(t) for t in c] + [0] * (width - len(c)) for c in completions]
    index = torch.tensor(tokens, device=device)
    mask = torch.tensor([[t < len(c) for t in range(width)] for c in completions], device=device)
    return torch.where(mask, logp[index], torch.zeros((), dtype=theta.dtype, device=device)), mask


def worked_fraction(values: float | np.ndarray, max_denominator: int = 1000) -> str:
    """A number, or a vector as ``(x, y)``, written as the fraction a hand computation gives
    (``4/3``, ``-1/3``; a rounding error such as 1e-16 reads 0). ``values`` is the number or
    vector; ``max_denominator`` is the largest denominator allowed (1000 by default)."""
    text = ", ".join(str(Fraction(float(v)).limit_denominator(max_denominator)) for v in np.ravel(values))
    return text if np.ndim(values) == 0 else f"({text})"
