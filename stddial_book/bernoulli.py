"""The Bernoulli-logit prompt: one parameter θ, success probability p = ς(θ) (chapters 6 and 11).

The source paper (Bay and Yearick, 2026) uses this smallest possible policy twice: to check the
large-group gradients by Monte Carlo (its Figure 5, right) and, with 6,000 such prompts, as its
controlled training run (§8). Its score is scalar, s = y − p for an answer y ∈ {0, 1}, so
ḡ₊ − ḡ₋ = 1 and the identity says one group's GRPO gradient is exactly σ̂ and Dr. GRPO's σ̂².
The functions here compute the gradient from the sampled answers and scores, the way a trainer
does, never from σ̂ directly, so comparing them with the closed forms is a real check.
"""

from __future__ import annotations

import numpy as np

from ._arrays import check_group_size, check_unit_interval
from .recipes import Recipe, get_recipe, group_advantages

__all__ = ["sampled_gradients", "monte_carlo_gradient"]


def sampled_gradients(solve_rate: np.ndarray, group_size: int, recipe: Recipe | str,
                      rng: np.random.Generator) -> np.ndarray:
    """One sampled group per prompt: the per-prompt policy gradient (1/G) Σᵢ Aᵢ sᵢ in θ.

    ``solve_rate`` holds p for each prompt (shape (M,)); answers yᵢ ~ Bernoulli(p), rewards 0/1,
    advantages from :func:`stddial_book.recipes.group_advantages` (silent groups give 0), scores
    sᵢ = yᵢ − p. Returns shape (M,).
    """
    size = check_group_size(group_size)
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    p = np.asarray(solve_rate, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"solve_rate must be a non-empty 1-D array of per-prompt p; got shape {p.shape}.")
    check_unit_interval(p, "solve_rate")
    answers = (rng.random((p.size, size)) < p[:, None]).astype(np.float64)
    advantages = group_advantages(answers.reshape(-1), size, recipe.replace(reward_wrong=0.0, reward_correct=1.0))
    scores = answers - p[:, None]
    return (advantages.reshape(p.size, size) * scores).mean(axis=1)


def monte_carlo_gradient(solve_rate: np.ndarray, group_size: int, recipe: Recipe | str, num_groups: int,
                         seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error over ``num_groups`` sampled groups of the per-prompt gradient.

    Its expectation is E[σ̂] (GRPO, :func:`stddial_book.identity.expected_group_std`) or
    E[σ̂²] = p(1 − p)(G − 1)/G (Dr. GRPO); for large G these approach √(p(1 − p)) and p(1 − p),
    the θ-gradients of 2·arcsin√p and of p. Chapter 6.
    """
    if num_groups < 2:
        raise ValueError(f"num_groups must be at least 2 to estimate a standard error; got {num_groups}.")
    p = np.atleast_1d(np.asarray(solve_rate, dtype=np.float64))
    rng = np.random.default_rng(seed)
    draws = np.stack([sampled_gradients(p, group_size, recipe, rng) for _ in range(num_groups)])
    return draws.mean(axis=0), draws.std(axis=0, ddof=1) / np.sqrt(num_groups)
