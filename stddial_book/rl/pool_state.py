"""Per-prompt history and the one pass-rate estimator every allocation rule reads (Part V).

A :class:`PoolState` holds, for each prompt of a pool, how often it was visited, how many samples
were drawn for it and how many were correct, how many of its latest visits in a row were silent
(all G samples agreed) and what the last visit looked like. :func:`record` adds one step's groups.

The estimator is a Beta posterior over each prompt's pass rate p: prior Beta(a, b), then the
successes and failures seen, each weighed by how long ago it was seen. With the memory factor
``decay`` = λ in (0, 1], every new visit to a prompt first multiplies that prompt's past counts by
λ, so a group seen t visits ago weighs λᵗ. λ = 1 remembers everything (the exact posterior of a
fixed p); λ < 1 forgets, which is right when p drifts as the policy learns: at a steady G samples
per visit the posterior holds about G/(1 − λ) samples' worth of evidence, so it follows a change of
p within a few 1/(1 − λ) visits instead of being anchored by the whole past. The price is a wider
posterior (variance that does not shrink to zero). Prompts that are not visited keep their counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stddial_book.core.checks import check_int, check_number, shown

__all__ = [
    "ALL_WRONG",
    "MIXED",
    "ALL_CORRECT",
    "NOT_SEEN",
    "PoolState",
    "new_pool_state",
    "record",
    "posterior_mean",
    "posterior_variance",
]

#: Values of :attr:`PoolState.last_outcome`: never visited, the last group all wrong, mixed, all correct.
NOT_SEEN, ALL_WRONG, MIXED, ALL_CORRECT = -1, 0, 1, 2
#: Knapsack RL's reward buffer (its scripts' ``REWARD_BUFFER_LENGTH``): the plug-in rate's latest rewards.
WINDOW = 16


@dataclass
class PoolState:
    """What the allocation rules know about each of ``num_prompts`` prompts (arrays indexed by prompt).

    ``visits``, ``samples`` and ``successes`` count everything ever recorded; ``silent_streak`` is the
    number of the latest visits in a row that were silent; ``last_outcome`` is one of
    :data:`NOT_SEEN`, :data:`ALL_WRONG`, :data:`MIXED`, :data:`ALL_CORRECT`. ``window_successes`` over
    ``window_samples`` is Knapsack RL's plug-in pass rate: the latest :data:`WINDOW` rewards (the last
    visit alone when it drew that many; the oldest visit in the window counted in proportion). ``weighted_successes``
    and ``weighted_failures`` are the estimator's counts after forgetting (see the module text);
    ``prior_a``, ``prior_b`` and ``decay`` are its settings. Build one with :func:`new_pool_state`.
    """

    num_prompts: int
    prior_a: float = 1.0
    prior_b: float = 1.0
    decay: float = 1.0
    visits: np.ndarray = field(init=False)
    samples: np.ndarray = field(init=False)
    successes: np.ndarray = field(init=False)
    silent_streak: np.ndarray = field(init=False)
    last_outcome: np.ndarray = field(init=False)
    window_successes: np.ndarray = field(init=False)
    window_samples: np.ndarray = field(init=False)
    weighted_successes: np.ndarray = field(init=False)
    weighted_failures: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.num_prompts = check_int(self.num_prompts, "num_prompts", minimum=1)
        for name in ("prior_a", "prior_b"):
            value = check_number(getattr(self, name), name)
            if value <= 0:
                raise ValueError(f"{name} must be positive (a Beta prior's pseudo-count); got {value:g}.")
            setattr(self, name, value)
        self.decay = check_number(self.decay, "decay")
        if not 0.0 < self.decay <= 1.0:
            raise ValueError(f"decay must lie in (0, 1] (1 = remember every visit); got {self.decay:g}.")
        n = self.num_prompts
        self.visits, self.samples, self.successes, self.silent_streak = (np.zeros(n, dtype=np.int64) for _ in range(4))
        self.last_outcome = np.full(n, NOT_SEEN, dtype=np.int64)
        self.window_successes = np.zeros(n)
        self.window_samples = np.zeros(n)
        self.weighted_successes = np.zeros(n)
        self.weighted_failures = np.zeros(n)


def new_pool_state(num_prompts: int, prior: tuple[float, float] = (1.0, 1.0), decay: float = 1.0) -> PoolState:
    """An empty history for ``num_prompts`` prompts with a Beta(``prior``) estimator and memory ``decay``."""
    if not isinstance(prior, (tuple, list)) or len(prior) != 2:
        raise ValueError(f"prior must be a pair (a, b) of Beta pseudo-counts, e.g. (1, 1); got {shown(prior)}.")
    return PoolState(num_prompts, prior_a=prior[0], prior_b=prior[1], decay=decay)


def _as_counts(values, name: str, length: int | None = None) -> np.ndarray:
    """``values`` as a 1-D int64 array of whole numbers (refusing fractions, NaN, booleans, text)."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "iuf" or arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of whole numbers; got {shown(values)}.")
    if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must hold whole numbers; got {shown(values)}.")
    if length is not None and arr.shape != (length,):
        raise ValueError(f"{name} must have one entry per prompt id ({length}); got shape {arr.shape}.")
    return arr.astype(np.int64)


def _checked_groups(state: PoolState, prompt_ids, num_correct, group_sizes) -> tuple[np.ndarray, ...]:
    """The three arrays of :func:`record`, checked against each other and the pool."""
    ids = _as_counts(prompt_ids, "prompt_ids")
    k = _as_counts(num_correct, "num_correct", len(ids))
    g = _as_counts(group_sizes, "group_sizes", len(ids))
    if ids.size and (ids.min() < 0 or ids.max() >= state.num_prompts):
        raise ValueError(f"prompt_ids must lie in 0..{state.num_prompts - 1} (the pool's prompts); got {shown(ids)}.")
    if len(np.unique(ids)) != len(ids):
        raise ValueError("prompt_ids repeats a prompt; record one group per prompt per call (merge a prompt's draws).")
    if np.any(g < 1) or np.any(k < 0) or np.any(k > g):
        raise ValueError("each group needs group_sizes >= 1 and 0 <= num_correct <= group_sizes; got counts outside.")
    return ids, k, g


def record(state: PoolState, prompt_ids, num_correct, group_sizes) -> PoolState:
    """Add one step's groups to ``state`` (in place, and returned): prompt ``prompt_ids[j]`` drew
    ``group_sizes[j]`` samples of which ``num_correct[j]`` were correct. One group per prompt per call.

    A group of one sample (G = 1) counts toward the estimator but is neither silent nor mixed for the
    streak: a single sample cannot disagree with itself, so it says nothing about silence.

    ``prompt_ids`` are distinct pool indices; ``num_correct`` (k) and ``group_sizes`` (G, at least 1)
    are whole numbers, one per prompt, with 0 <= k <= G.
    """
    ids, k, g = _checked_groups(state, prompt_ids, num_correct, group_sizes)
    state.visits[ids] += 1
    state.samples[ids] += g
    state.successes[ids] += k
    lam = state.decay
    state.weighted_successes[ids] = lam * state.weighted_successes[ids] + k
    state.weighted_failures[ids] = lam * state.weighted_failures[ids] + (g - k)
    informative = g >= 2
    silent = informative & ((k == 0) | (k == g))
    outcome = np.where(k == 0, ALL_WRONG, np.where(k == g, ALL_CORRECT, MIXED))
    ids_inf = ids[informative]
    state.last_outcome[ids_inf] = outcome[informative]
    keep = np.minimum(state.window_samples[ids], np.maximum(WINDOW - g, 0))
    share = np.divide(keep, state.window_samples[ids], out=np.zeros(len(ids)), where=state.window_samples[ids] > 0)
    state.window_successes[ids] = k + share * state.window_successes[ids]
    state.window_samples[ids] = g + keep
    state.silent_streak[ids_inf] = np.where(silent[informative], state.silent_streak[ids_inf] + 1, 0)
    return state


def posterior_mean(state: PoolState) -> np.ndarray:
    """Each prompt's posterior mean pass rate (a + s) / (a + b + s + f), s and f after forgetting.
    ``state`` is the pool's :class:`PoolState`; one value per prompt."""
    a = state.prior_a + state.weighted_successes
    b = state.prior_b + state.weighted_failures
    return a / (a + b)


def posterior_variance(state: PoolState) -> np.ndarray:
    """Each prompt's posterior variance of the pass rate, ab / ((a + b)²(a + b + 1)) of its Beta.
    ``state`` is the pool's :class:`PoolState`; one value per prompt."""
    a = state.prior_a + state.weighted_successes
    b = state.prior_b + state.weighted_failures
    return a * b / ((a + b) ** 2 * (a + b + 1.0))
