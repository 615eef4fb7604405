"""Allocation rules that decide every group size before drawing (Part V).

Each rule is a small frozen dataclass of settings with ``plan(state, budget, rng, candidates)``,
returning one group size per prompt of the pool (0 = skip, sum <= budget). GRESO also has an
``allocate``: its skip filter runs in front of DAPO's dynamic sampling, as in GRESO's trainer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stddial_book.core.checks import check_number, check_unit_interval, to_numpy
from stddial_book.rl.allocation_adaptive import DynamicSampling, check_sizes
from stddial_book.rl.allocation_base import Allocation, Draw
from stddial_book.rl.allocation_values import (
    DIAL_RECIPES,
    greedy_by_marginal_gain,
    greso_skip_probability,
    knapsack_value,
    signal_table,
    solve_knapsack,
)
from stddial_book.rl.pool_state import ALL_CORRECT, PoolState, posterior_mean, posterior_variance

__all__ = ["UniformGroups", "GresoSkip", "KnapsackAllocation", "DialAllocation", "KnapsackPaper", "knapsack_gain_table"]


def _fill_in_order(num_prompts: int, order: np.ndarray, group_size: int, budget: int, limit: int | None) -> np.ndarray:
    """Sizes giving ``group_size`` to the prompts of ``order`` in turn, at most ``limit`` of them,
    while the budget lasts."""
    count = budget // group_size if limit is None else min(limit, budget // group_size)
    sizes = np.zeros(num_prompts, dtype=np.int64)
    sizes[order[:count]] = group_size
    return sizes


def _rates(solve_rates, state: PoolState) -> np.ndarray:
    """The pass rates a rule plans with: the given (oracle) ones, or the shared estimator's means."""
    if solve_rates is None:
        return posterior_mean(state)
    p = to_numpy(solve_rates, "solve_rates")
    check_unit_interval(p, "solve_rates")
    if p.shape != (state.num_prompts,):
        raise ValueError(f"solve_rates must hold one pass rate per prompt ({state.num_prompts}); got shape {p.shape}.")
    return p


@dataclass(frozen=True)
class UniformGroups:
    """Plain GRPO batching: ``batch_prompts`` prompts drawn at random (default: as many as the budget
    pays for), ``group_size`` samples each."""

    group_size: int = 8
    batch_prompts: int | None = None

    def __post_init__(self) -> None:
        check_sizes(self, {"group_size": 2, "batch_prompts": -1})

    def plan(self, state: PoolState, budget: int, rng, candidates: np.ndarray) -> np.ndarray:
        order = rng.permutation(candidates)
        return _fill_in_order(state.num_prompts, order, self.group_size, budget, self.batch_prompts)


@dataclass(frozen=True)
class GresoSkip:
    """GRESO's pre-rollout skip (Zheng et al. 2025, arXiv 2506.02177; Infini-AI-Lab/GRESO,
    ``verl/trainer/ttis/presampling_selector.py``): a prompt silent at its last z visits in a row is
    skipped with probability 1 − max(p_eᶻ, ``floor``), p_e = ``p_easy`` if its last group was all
    correct, ``p_hard`` if all wrong (0.5 each to start in GRESO's scripts; GRESO then nudges them
    by 0.01 a step toward a target share of silent groups, which is left out here). The floor
    (0.01) keeps hard prompts from being starved. The streak here counts silent visits of either
    kind; GRESO counts each kind apart, which differs only for a prompt that flips from all wrong to
    all correct. ``plan`` gives the survivors ``group_size`` each; ``allocate`` runs DAPO's dynamic
    sampling over them, filling ``batch_prompts`` mixed groups (default: what the budget pays for) in
    at most ``max_rounds`` rounds."""

    group_size: int = 8
    p_easy: float = 0.5
    p_hard: float = 0.5
    floor: float = 0.01
    batch_prompts: int | None = None
    max_rounds: int = 8

    def __post_init__(self) -> None:
        check_sizes(self, {"group_size": 2, "batch_prompts": -1, "max_rounds": 1})
        for explore in (self.p_easy, self.p_hard):  # refuses a probability outside [0, 1] or a bad floor
            greso_skip_probability(0, explore, self.floor)

    def skip_probability(self, state: PoolState, candidates: np.ndarray) -> np.ndarray:
        """Each candidate's chance of being skipped, from its silent streak and last outcome."""
        streak = state.silent_streak[candidates]
        easy = state.last_outcome[candidates] == ALL_CORRECT
        return np.where(
            easy,
            greso_skip_probability(streak, self.p_easy, self.floor),
            greso_skip_probability(streak, self.p_hard, self.floor),
        )

    def survivors(self, state: PoolState, rng, candidates: np.ndarray) -> np.ndarray:
        """The candidates that pass the skip coin, in random order."""
        kept = candidates[rng.random(candidates.size) >= self.skip_probability(state, candidates)]
        return rng.permutation(kept)

    def plan(self, state: PoolState, budget: int, rng, candidates: np.ndarray) -> np.ndarray:
        order = self.survivors(state, rng, candidates)
        return _fill_in_order(state.num_prompts, order, self.group_size, budget, self.batch_prompts)

    def allocate(self, state: PoolState, budget: int, draw: Draw, rng, candidates: np.ndarray) -> Allocation:
        batch = budget // self.group_size if self.batch_prompts is None else self.batch_prompts
        if batch < 1:
            return Allocation()
        dapo = DynamicSampling(self.group_size, batch, self.max_rounds)
        return dapo.allocate(state, budget, draw, rng, self.survivors(state, rng, candidates))


@dataclass(frozen=True)
class KnapsackAllocation:
    """Knapsack RL (Li et al. 2025, arXiv 2509.25849; liziniu/KnapsackRL,
    ``verl/trainer/ppo/exploration_utils.py``): give prompt i Nᵢ ∈ {0} ∪ [``min_size``, ``max_size``]
    samples (2 and 128 here) maximising Σ (1 − pᵢᴺ − (1 − pᵢ)ᴺ) pᵢ(1 − pᵢ)² within the budget, solved
    exactly by dynamic programming. Oracle with ``solve_rates`` (true pass rates, one per prompt of
    the pool), otherwise estimated from the shared estimator's posterior means. Their trainer also
    gives every prompt at least ``min_size`` and sends a surplus to prompts never solved; here a
    prompt worth nothing (p = 0 or 1 under the oracle) gets nothing."""

    solve_rates: object = None
    min_size: int = 2
    max_size: int = 128

    def __post_init__(self) -> None:
        check_sizes(self, {"min_size": 2, "max_size": 2})
        if self.max_size < self.min_size:
            raise ValueError(f"max_size ({self.max_size}) must be at least min_size ({self.min_size}).")

    def plan(self, state: PoolState, budget: int, rng, candidates: np.ndarray) -> np.ndarray:
        p = _rates(self.solve_rates, state)[candidates]
        table = signal_table(p, self.max_size, "knapsack")
        sizes = np.zeros(state.num_prompts, dtype=np.int64)
        sizes[candidates] = solve_knapsack(table, budget, self.min_size)
        return sizes


@dataclass(frozen=True)
class DialAllocation:
    """The book's rule: spend the budget where the dial says the update is.

    A group of G at pass rate p moves the policy by its step size: σ̂ under GRPO (the division by σ̂
    turns the σ̂² of the raw advantages into σ̂), σ̂² under Dr. GRPO. So the expected signal is
    s(p, G) = E[σ̂ | p, G] or p(1 − p)(G − 1)/G, and the rule maximises Σᵢ s(pᵢ, Gᵢ) with Σᵢ Gᵢ <= budget.
    It spends greedily on the largest gain per sample: opening a prompt costs ``min_size`` samples
    and gains s(p, 2); one more sample gains s(p, G + 1) − s(p, G). Under Dr. GRPO that gain is
    p(1 − p)/(G(G + 1)), falling fast, so the rule spreads samples over many mid-rate prompts. Under
    GRPO a hard prompt's E[σ̂] grows like p·sqrt(G − 1) while Gp is small (a lone success is a full
    step once divided), so the rule gives hard prompts larger groups than Dr. GRPO does. Both gains
    shrink with G, so the greedy order is the optimum for the planning rates.

    Exploration floor: with estimated rates, ⌊``explore_fraction`` · budget⌋ samples first go to
    prompts drawn at random with weight equal to their posterior variance (the most uncertain most
    often), ``min_size`` each; the greedy then goes on from there. No prompt has zero variance, so
    none is starved. With ``solve_rates`` (oracle) there is nothing to explore.

    ``recipe`` is ``"grpo"`` or ``"dr_grpo"``, the dial's setting whose signal is maximised;
    ``max_size`` is the largest group a prompt may get, in samples (at least ``min_size``).
    """

    recipe: str = "grpo"
    min_size: int = 2
    max_size: int = 128
    explore_fraction: float = 0.1
    solve_rates: object = None

    def __post_init__(self) -> None:
        check_sizes(self, {"min_size": 2, "max_size": 2})
        if self.recipe not in DIAL_RECIPES or self.max_size < self.min_size:
            raise ValueError(f"recipe must be one of {DIAL_RECIPES} and max_size >= min_size; got {self!r}.")
        share = check_number(self.explore_fraction, "explore_fraction")
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"explore_fraction must lie in [0, 1] (a share of the budget); got {share:g}.")

    def plan(self, state: PoolState, budget: int, rng, candidates: np.ndarray) -> np.ndarray:
        p = _rates(self.solve_rates, state)[candidates]
        table = signal_table(p, self.max_size, self.recipe)
        start = np.zeros(candidates.size, dtype=np.int64)
        if self.solve_rates is None and candidates.size:
            start = self._exploration(posterior_variance(state)[candidates], budget, rng)
        sizes = np.zeros(state.num_prompts, dtype=np.int64)
        sizes[candidates] = greedy_by_marginal_gain(table, budget, self.min_size, start)
        return sizes

    def _exploration(self, variance: np.ndarray, budget: int, rng) -> np.ndarray:
        """``min_size`` samples each for prompts drawn with weight = posterior variance."""
        count = min(int(self.explore_fraction * budget) // self.min_size, variance.size)
        start = np.zeros(variance.size, dtype=np.int64)
        if count > 0:
            chosen = rng.choice(variance.size, size=count, replace=False, p=variance / variance.sum())
            start[chosen] = self.min_size
        return start


@dataclass(frozen=True)
class KnapsackPaper:
    """Knapsack RL as its released trainer allocates (Li et al. 2025; liziniu/KnapsackRL,
    ``verl/trainer/ppo/exploration_utils.py``, ``sampling_budget_by_knapsack``, and its dataset's
    sample states; the rules carried over, not the code). Pass rates are plug-in: the share right
    among a prompt's latest 16 rewards (``WINDOW`` of :mod:`~stddial_book.rl.pool_state`; the last visit
    alone when it drew more), valid once the prompt has drawn ``min_history`` (8) samples. A
    candidate without a valid rate gets ``group_size``; one whose rate is 0 or 1 gets ``min_size``;
    a mixed one gets ``min_size`` plus the knapsack's extra samples (at most ``max_size`` in all),
    maximising Σ (1 − pᴺ − (1 − p)ᴺ) p(1 − p)². When the mixed prompts' estimated need,
    Σ ⌊min(``max_size``, ln(1 − ``alpha``) / ln max(p, 1 − p))⌋ samples, is below what is left, the
    surplus goes in equal shares to the candidates at rate 0 (to the other non-mixed ones when there
    are none); with no mixed candidate, what is left goes to those at rate 0, or, without any, every
    candidate gets an equal share of the budget. Budget the knapsack cannot place (beyond the mixed
    prompts' cap) is shared equally among them, as the paper's code does. With ``solve_rates`` (one
    per prompt of the pool: measured or true rates) those are used instead, all valid. If the fixed
    shares alone exceed the budget, the candidates whose share no longer fits (in order) get none
    (the paper's code assumes they fit)."""

    group_size: int = 8
    min_size: int = 2
    max_size: int = 128
    alpha: float = 0.9
    min_history: int = 8
    solve_rates: object = None

    def __post_init__(self) -> None:
        check_sizes(self, {"group_size": 2, "min_size": 2, "max_size": 2, "min_history": 0})
        if self.max_size < self.min_size:
            raise ValueError(f"max_size ({self.max_size}) must be at least min_size ({self.min_size}).")
        alpha = check_number(self.alpha, "alpha")
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie strictly between 0 and 1 (a confidence level); got {alpha:g}.")

    def rates(self, state: PoolState, candidates: np.ndarray) -> np.ndarray:
        """The candidates' plug-in pass rates, −1 where none is valid yet."""
        if self.solve_rates is not None:
            return _rates(self.solve_rates, state)[candidates].astype(np.float64)
        seen = state.window_samples[candidates]
        rate = np.divide(state.window_successes[candidates], seen, out=np.full(seen.shape, -1.0), where=seen > 0)
        rate[state.samples[candidates] < max(self.min_history, 1)] = -1.0
        rate[(rate >= 0) & (rate < 1e-12)] = 0.0
        rate[rate > 1 - 1e-12] = 1.0
        return rate

    def plan(self, state: PoolState, budget: int, rng, candidates: np.ndarray) -> np.ndarray:
        rate = self.rates(state, candidates)
        mixed = (rate > 0) & (rate < 1)
        fixed = np.where(rate < 0, self.group_size, self.min_size)
        sizes = np.zeros(state.num_prompts, dtype=np.int64)
        sizes[candidates] = np.where(np.cumsum(fixed) <= budget, fixed, 0)
        left = budget - int(sizes.sum())
        zero = candidates[rate == 0]
        if left <= 0:
            return sizes
        if not mixed.any():
            if zero.size:
                _share(sizes, zero, left)
            else:
                sizes[candidates] = 0
                _share(sizes, candidates, budget)
            return _no_lone_samples(sizes)
        p = rate[mixed]
        need = int(np.sum(np.floor(np.minimum(self.max_size, np.log(1 - self.alpha) / np.log(np.maximum(p, 1 - p))))))
        others = zero if zero.size else candidates[~mixed]
        if need < left and others.size:
            _share(sizes, others, left - need)
            left = need
        extra = solve_knapsack(knapsack_gain_table(p, self.min_size, self.max_size), left, min_size=1)
        sizes[candidates[mixed]] += extra
        _share(sizes, candidates[mixed], left - int(extra.sum()))
        return _no_lone_samples(sizes)


def knapsack_gain_table(solve_rates: np.ndarray, min_size: int, max_size: int) -> np.ndarray:
    """Row i, column k: Knapsack RL's gain of k extra samples over a prompt's first ``min_size``,
    value(min + k) − value(min), for k = 0..``max_size`` − ``min_size``. ``solve_rates`` holds one
    pass rate p in [0, 1] per row."""
    sizes = np.arange(min_size, max_size + 1)
    grid_p, grid_n = np.meshgrid(np.asarray(solve_rates, dtype=np.float64), sizes, indexing="ij")
    value = knapsack_value(grid_p, grid_n)
    return value - value[:, :1]


def _no_lone_samples(sizes: np.ndarray) -> np.ndarray:
    """A share too small for a group (one sample) is not drawn: a group of one cannot disagree."""
    sizes[sizes == 1] = 0
    return sizes


def _share(sizes: np.ndarray, prompts: np.ndarray, samples: int) -> None:
    """Add ``samples`` to ``prompts`` in equal shares, the first ones one more when it does not divide."""
    if samples <= 0 or prompts.size == 0:
        return
    each, rest = divmod(samples, prompts.size)
    sizes[prompts] += each
    sizes[prompts[:rest]] += 1
