"""The Bernoulli-logit prompt: one parameter θ, success probability p = ς(θ) (chapters 6 and 8).

The source paper (Bay and Yearick, 2026) uses this smallest possible policy twice: to check the
large-group gradients by Monte Carlo (its Figure 5, right) and, with 6,000 such prompts, as its
controlled training run (§8). Its score is scalar, s = y − p for an answer y ∈ {0, 1}, so
ḡ₊ − ḡ₋ = 1 and the identity says one group's GRPO gradient is exactly σ̂ and Dr. GRPO's σ̂².
The functions here compute the gradient from the sampled answers and scores, the way a trainer
does, never from σ̂ directly, so comparing them with the closed forms is a real check. This
module holds the sampled gradient, its Monte-Carlo check and the controlled run itself;
:mod:`stddial_book.experiments.controlled.study` measures the runs and builds chapter 8's study on them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stddial_book.core.checks import (
    check_group_size,
    check_int,
    check_number,
    check_pool,
    check_unit_interval,
    to_numpy,
)
from stddial_book.rl.sampling import DynamicSampler
from stddial_book.theory.recipes import Recipe, as_recipe, group_advantages
from stddial_book.theory.silent import expected_update_weight

__all__ = [
    "sampled_gradients",
    "monte_carlo_gradient",
    "monte_carlo_z",
    "ControlledRun",
    "ControlledRunResult",
    "initial_solve_rates",
    "controlled_run",
    "expected_gain",
    "with_binary_rewards",
    "check_controlled_run",
    "check_controlled_result",
]


def expected_gain(solve_rate: np.ndarray, group_size: int, recipe: Recipe) -> np.ndarray:
    """The finite-G closed form of :func:`sampled_gradients`: the recipe's expected update weight
    at 0/1 rewards, E[σ̂] when it divides by the std and E[σ̂²] when it does not. ``solve_rate`` holds
    each prompt's p in [0, 1] (any shape; the result has the same); ``group_size`` is G, the samples
    per group; ``recipe`` the :class:`~stddial_book.theory.recipes.Recipe` (its rewards are set to 0/1)."""
    return np.asarray(expected_update_weight(solve_rate, group_size, with_binary_rewards(recipe)))


def with_binary_rewards(recipe: Recipe) -> Recipe:
    """The recipe with the 0/1 rewards of a Bernoulli-logit prompt: a copy of ``recipe`` (a
    :class:`~stddial_book.theory.recipes.Recipe`) with ``reward_wrong`` 0 and ``reward_correct`` 1."""
    return recipe.replace(reward_wrong=0.0, reward_correct=1.0)


def sampled_gradients(
    solve_rate: np.ndarray, group_size: int, recipe: Recipe | str, rng: np.random.Generator
) -> np.ndarray:
    """One sampled group per prompt: the per-prompt policy gradient (1/G) Σᵢ Aᵢ sᵢ in θ.

    ``solve_rate`` holds p for each prompt (shape (M,)); answers yᵢ ~ Bernoulli(p), rewards 0/1,
    advantages from :func:`stddial_book.theory.recipes.group_advantages` (silent groups give 0), scores
    sᵢ = yᵢ − p. Returns shape (M,). ``group_size`` is G, the answers per group; ``recipe`` a
    :class:`~stddial_book.theory.recipes.Recipe` or a preset's name (``"grpo"``); ``rng`` the numpy
    Generator that draws the answers.
    """
    size = check_group_size(group_size)
    recipe = as_recipe(recipe)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)); got {type(rng).__name__}.")
    p = to_numpy(solve_rate, "solve_rate", allow_empty=True)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"solve_rate must be a non-empty 1-D array of per-prompt p; got shape {p.shape}.")
    check_unit_interval(p, "solve_rate")
    answers = (rng.random((p.size, size)) < p[:, None]).astype(np.float64)
    advantages = group_advantages(answers.reshape(-1), size, with_binary_rewards(recipe))
    scores = answers - p[:, None]
    return (advantages.reshape(p.size, size) * scores).mean(axis=1)


def monte_carlo_gradient(
    solve_rate: np.ndarray, group_size: int, recipe: Recipe | str, num_groups: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error over ``num_groups`` sampled groups of the per-prompt gradient.

    Its expectation is E[σ̂] (GRPO, :func:`stddial_book.theory.silent.expected_group_std`) or
    E[σ̂²] = p(1 − p)(G − 1)/G (Dr. GRPO); for large G these approach √(p(1 − p)) and p(1 − p),
    the θ-gradients of 2·arcsin√p and of p. Chapter 6.

    ``solve_rate`` is p, a number or an array of them in [0, 1]; ``group_size`` is G; ``recipe`` a
    :class:`~stddial_book.theory.recipes.Recipe` or a preset's name; ``num_groups`` at least 2;
    ``seed`` seeds the generator (whole number ≥ 0, default 0). Both results have p's shape (at
    least 1-D).
    """
    num_groups = check_int(num_groups, "num_groups")
    if num_groups < 2:
        raise ValueError(f"num_groups must be at least 2 to estimate a standard error; got {num_groups}.")
    p = np.atleast_1d(to_numpy(solve_rate, "solve_rate", allow_empty=True))
    size = check_group_size(group_size)
    samples = num_groups * max(p.size, 1) * size
    if samples > MAX_MONTE_CARLO_SAMPLES:
        raise ValueError(
            f"num_groups={num_groups} groups of G = {size} for {p.size} solve rate(s) is {samples:.3g} "
            f"samples, above {MAX_MONTE_CARLO_SAMPLES:.0e} (hours of CPU); lower num_groups (2000 gives a standard "
            "error of about 1% of the gradient)."
        )
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    draws = np.stack([sampled_gradients(p, group_size, recipe, rng) for _ in range(num_groups)])
    return draws.mean(axis=0), draws.std(axis=0, ddof=1) / np.sqrt(num_groups)


def monte_carlo_z(
    solve_rate: np.ndarray, group_size: int, recipe: Recipe | str, num_groups: int, seed: int = 0
) -> np.ndarray:
    """Per solve rate, how many standard errors the Monte-Carlo gradient (:func:`monte_carlo_gradient`)
    lies from its exact expectation, E[σ̂] for a recipe that divides by the std and E[σ̂²] for one
    that does not (chapter 6). A point whose sampled groups all gave the same gradient (p = 0 or 1)
    has no standard error: its z is 0 when the mean equals the expectation and ±inf otherwise.
    ``solve_rate``, ``group_size``, ``recipe``, ``num_groups`` and ``seed`` are as in
    :func:`monte_carlo_gradient`.
    """
    recipe = as_recipe(recipe)
    p = np.atleast_1d(to_numpy(solve_rate, "solve_rate", allow_empty=True))
    mean, se = monte_carlo_gradient(p, group_size, recipe, num_groups, seed=seed)
    gap = mean - expected_gain(p, check_group_size(group_size), recipe)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(se > 0, gap / np.where(se > 0, se, 1.0), np.where(gap == 0, 0.0, np.sign(gap) * np.inf))


# --- the source paper's controlled run (Bay and Yearick, 2026, §8) ----------------------------

#: The most Bernoulli samples one Monte-Carlo call draws, and the most prompt-steps a controlled run
#: holds in memory (each of its per-step arrays is that many float64s): beyond, a typo (10**30) would
#: run for hours or exhaust memory instead of failing at once.
MAX_MONTE_CARLO_SAMPLES = 10**9
MAX_PROMPT_STEPS = 2 * 10**7
#: The most redraws DAPO's same-prompt refill makes per group.
MAX_REDRAW_TRIES = 1000


@dataclass(frozen=True)
class ControlledRun:
    """Settings of the controlled run: M Bernoulli-logit prompts trained by one recipe.

    The paper's run: M = 6,000 prompts, initial p drawn from the interior (0 < p < 1) of Big-Math's
    solve rates and clipped to [0.02, 0.98], G = 8, 150 steps of θ ← θ + lr·g with lr = 0.5;
    DAPO redraws a silent group of the same prompt, at most ``redraw_tries`` draws in all.

    ``num_prompts`` is M (at least 4: quartiles); ``group_size`` is G, the answers per group;
    ``steps`` the training steps (at least 1); ``lr`` the positive step size on θ; ``clip`` the pair
    (low, high), 0 < low < high < 1, that the initial solve rates are clipped to. The defaults are
    the paper's run.
    """

    num_prompts: int = 6000
    group_size: int = 8
    steps: int = 150
    lr: float = 0.5
    redraw_tries: int = 4
    clip: tuple[float, float] = (0.02, 0.98)

    def __post_init__(self) -> None:
        for name in ("num_prompts", "steps", "redraw_tries"):
            check_int(getattr(self, name), name)
        check_group_size(self.group_size)
        if self.num_prompts * (self.steps + 1) > MAX_PROMPT_STEPS:
            raise ValueError(
                f"num_prompts × (steps + 1) = {self.num_prompts * (self.steps + 1):.3g} is above "
                f"{MAX_PROMPT_STEPS:.0e}, more than the run's per-step arrays hold in memory; the paper's "
                "run is 6000 prompts × 150 steps."
            )
        if self.redraw_tries > MAX_REDRAW_TRIES or self.group_size > 4096:
            raise ValueError(
                f"redraw_tries={self.redraw_tries} and group_size={self.group_size} must stay at most "
                f"{MAX_REDRAW_TRIES} and 4096 (the paper redraws 4 times at G = 8)."
            )
        check_number(self.lr, "lr")
        if not isinstance(self.clip, (tuple, list)) or len(self.clip) != 2:
            raise TypeError(f"clip must be a pair (low, high) of solve rates; got {type(self.clip).__name__}.")
        for value in self.clip:
            check_number(value, "clip")
        if self.num_prompts < 4 or self.steps < 1 or self.redraw_tries < 1:
            raise ValueError("num_prompts must be at least 4 (quartiles), steps and redraw_tries at least 1.")
        if not self.lr > 0 or not np.isfinite(self.lr):
            raise ValueError(f"lr must be a positive finite number; got {self.lr!r}.")
        check_group_size(self.group_size)
        low, high = self.clip
        if not 0.0 < low < high < 1.0:
            raise ValueError(f"clip must satisfy 0 < low < high < 1; got {self.clip}.")


@dataclass
class ControlledRunResult:
    """Per-step records of :func:`controlled_run` (arrays have one row per step).

    ``initial_p`` holds the M prompts' starting solve rates, shape (M,); ``p`` the solve rates before
    each step and at the end, (steps + 1, M); ``silent_measured`` the share of first-drawn groups
    that were silent, per step, and ``silent_expected`` its expectation, the mean of pᴳ + (1 − p)ᴳ
    at the current p; ``gain`` the update each prompt received (its sampled gradient), (steps, M),
    and ``expected_gain`` the finite-G closed form at the current p, (steps, M); ``groups_drawn``
    the groups sampled per step, redraws included, and ``groups_kept`` those that gave a non-zero
    update."""

    initial_p: np.ndarray  # (M,)
    p: np.ndarray  # (steps + 1, M): the solve rates before each step, and at the end
    silent_measured: np.ndarray  # (steps,) fraction of first-drawn groups that were silent
    silent_expected: np.ndarray  # (steps,) mean of p^G + (1 − p)^G at the current p
    gain: np.ndarray  # (steps, M) the update each prompt received (its sampled gradient)
    expected_gain: np.ndarray  # (steps, M) the finite-G closed form at the current p
    groups_drawn: np.ndarray  # (steps,) groups sampled, redraws included
    groups_kept: np.ndarray  # (steps,) groups that produced a non-zero update


def initial_solve_rates(
    solve_rates: np.ndarray, counts: np.ndarray, config: ControlledRun, rng: np.random.Generator
) -> np.ndarray:
    """M initial solve rates drawn from a pool's interior (0 < p < 1) and clipped (paper §8).

    ``solve_rates`` (1-D, in [0, 1]) and ``counts`` (one non-negative count or weight per solve rate)
    describe the pool, drawn from in proportion to ``counts``; ``config`` is the
    :class:`ControlledRun` whose ``num_prompts`` sets M and whose ``clip`` bounds the draws; ``rng``
    the numpy Generator that draws them."""
    check_controlled_run(config)
    p, c = check_pool(solve_rates, counts)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)); got {type(rng).__name__}.")
    weights = np.where((p > 0) & (p < 1), c, 0.0)
    if weights.sum() <= 0:
        raise ValueError("the pool has no prompt with 0 < p < 1 to draw from.")
    drawn = rng.choice(p, size=config.num_prompts, p=weights / weights.sum())
    return np.clip(drawn, *config.clip)


def controlled_run(
    initial_p: np.ndarray,
    recipe: Recipe | str,
    config: ControlledRun = ControlledRun(),
    seed: int = 0,
    lr: float | None = None,
) -> ControlledRunResult:
    """Train ``len(initial_p)`` Bernoulli-logit prompts with one recipe,
    every prompt every step.

    Each step every prompt draws a group of G; its update is the sampled
    gradient (1/G) Σ Aᵢ (yᵢ − p) (:func:`sampled_gradients`), 0 for a
    silent group. With ``recipe.dynamic_sampling`` (DAPO) a silent group is
    redrawn from the same prompt up to ``config.redraw_tries`` draws in all.
    ``lr`` overrides ``config.lr`` (the matched-step runs). The expected
    gain is E[σ̂] for a recipe that divides by the std and E[σ̂²]
    otherwise.

    ``initial_p`` holds the prompts' starting solve rates in [0, 1]
    (p = 0 or 1 never moves); ``recipe`` is a
    :class:`~stddial_book.theory.recipes.Recipe` or a preset's name;
    ``config`` the :class:`ControlledRun` (default: the paper's run);
    ``seed`` seeds the answers' generator (whole number ≥ 0, default 0).
    """
    recipe = as_recipe(recipe)
    check_controlled_run(config)
    rate = config.lr if lr is None else check_number(lr, "lr")
    if not rate > 0:
        raise ValueError(f"lr must be positive; got {lr!r}.")
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    p0 = to_numpy(initial_p, "initial_p")
    check_unit_interval(p0, "initial_p")
    # p = 0 or 1: θ = ∓inf, a prompt that never moves (always silent)
    with np.errstate(divide="ignore"):
        theta = np.log(p0) - np.log1p(-p0)
    G = config.group_size
    history = np.empty((config.steps + 1, p0.size))
    silent_measured = np.empty(config.steps)
    silent_expected = np.empty(config.steps)
    gains = np.empty((config.steps, p0.size))
    expected = np.empty((config.steps, p0.size))
    drawn = np.zeros(config.steps, dtype=np.int64)
    kept = np.zeros(config.steps, dtype=np.int64)
    for step in range(config.steps):
        p = 1.0 / (1.0 + np.exp(-theta))
        history[step] = p
        silent_expected[step] = float(np.mean(p**G + (1.0 - p) ** G))
        expected[step] = expected_gain(p, G, recipe)
        gain = sampled_gradients(p, G, recipe, rng)
        silent = gain == 0.0
        silent_measured[step] = float(silent.mean())
        drawn[step] = p.size
        if recipe.dynamic_sampling and silent.any() and config.redraw_tries > 1:  # DAPO: redraw silent groups
            drawn[step] += _redraw_silent(gain, p, G, recipe, rng, config.redraw_tries - 1)
            silent = gain == 0.0
        kept[step] = int((~silent).sum())
        gains[step] = gain
        theta = theta + rate * gain
    history[-1] = 1.0 / (1.0 + np.exp(-theta))
    return ControlledRunResult(p0, history, silent_measured, silent_expected, gains, expected, drawn, kept)


def _redraw_silent(
    gain: np.ndarray, solve_rate: np.ndarray, group_size: int, recipe: Recipe, rng: np.random.Generator, rounds: int
) -> int:
    """DAPO's refill for :func:`controlled_run`, run by the engine's
    :class:`~stddial_book.rl.sampling.DynamicSampler`: each round redraws, from the same prompts,
    every group whose ``gain`` is still 0, writing the new gains into ``gain``; at most ``rounds``
    rounds. Returns the groups redrawn. ``solve_rate`` holds each prompt's p, ``group_size`` is G,
    ``recipe`` and ``rng`` are as in :func:`sampled_gradients`. The sampler sees a group as mixed
    when its gain is not 0 (one flag of G set), as the run counts silent groups."""

    def redraw(round_index: int, missing: int) -> tuple[np.ndarray, np.ndarray]:
        retry = np.flatnonzero(gain == 0.0)  # as many as missing: every silent group, none surplus
        gain[retry] = sampled_gradients(solve_rate[retry], group_size, recipe, rng)
        flags = np.zeros((retry.size, group_size), dtype=np.int64)
        flags[:, 0] = gain[retry] != 0.0
        return np.repeat(retry, group_size), flags.reshape(-1)

    silent = int((gain == 0.0).sum())
    return DynamicSampler(silent, group_size, rounds).fill(redraw)[1].groups_generated


def check_controlled_run(config: ControlledRun) -> None:
    """Refuses (``TypeError``) a ``config`` that is not a :class:`ControlledRun`."""
    if not isinstance(config, ControlledRun):
        raise TypeError(f"config must be a ControlledRun; got {type(config).__name__}.")


def check_controlled_result(result: ControlledRunResult) -> None:
    """Refuses (``TypeError``) a ``result`` that is not what :func:`controlled_run` returns."""
    if not isinstance(result, ControlledRunResult):
        raise TypeError(
            f"result must be what controlled_run returns (a ControlledRunResult); got {type(result).__name__}."
        )
