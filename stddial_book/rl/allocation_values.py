"""What a prompt's samples are worth, and two ways to spend a budget on the worth (Part V).

Three worths, each a function of a pass rate p and a group size G:

* Knapsack RL's value (Li et al. 2025, arXiv 2509.25849, and their code liziniu/KnapsackRL,
  ``verl/trainer/ppo/exploration_utils.py``): the chance that a group of N is not silent times an
  information gain InfoGain(p) ≈ p(1 − p)², so value(N, p) = (1 − pᴺ − (1 − p)ᴺ) · p(1 − p)².
* The dial's signal (this book): the size of a prompt's update. GRPO divides by the group std, so a
  group's step is σ̂ and its expected signal is E[σ̂ | p, G]; Dr. GRPO does not divide, its step is
  σ̂² and its expected signal is E[σ̂² | p, G] = p(1 − p)(G − 1)/G.
* GRESO's skip probability (Zheng et al. 2025, arXiv 2506.02177, and Infini-AI-Lab/GRESO): a prompt
  silent at its last z visits in a row is skipped with probability 1 − max(p_eᶻ, floor).

Spending: :func:`solve_knapsack` finds the exact best sizes by dynamic programming over the budget;
:func:`greedy_by_marginal_gain` hands out samples one decision at a time to the largest gain per
sample, which is the best answer when each prompt's worth grows with G by shrinking steps.
"""

from __future__ import annotations

import heapq

import numpy as np

from stddial_book.core.checks import check_number, check_unit_interval, to_numpy
from stddial_book.theory.silent import expected_group_std, expected_group_variance

__all__ = [
    "knapsack_value",
    "dial_signal",
    "signal_table",
    "greso_skip_probability",
    "solve_knapsack",
    "greedy_by_marginal_gain",
]

#: The recipes the dial's rule knows: the one that divides by σ̂ and the one that does not.
DIAL_RECIPES = ("grpo", "dr_grpo")


def knapsack_value(solve_rate, group_size) -> np.ndarray:
    """Knapsack RL's value of N = ``group_size`` samples for a prompt of pass rate p = ``solve_rate``:
    (1 − pᴺ − (1 − p)ᴺ) · p(1 − p)² (0 for N = 0). Broadcasts."""
    p = to_numpy(solve_rate, "solve_rate")
    check_unit_interval(p, "solve_rate")
    n = to_numpy(group_size, "group_size")
    if np.any(n < 0) or np.any(n != np.round(n)):
        raise ValueError(f"group_size must hold whole numbers >= 0; got {np.unique(n)[:5].tolist()}.")
    return np.where(n > 0, 1.0 - p**n - (1.0 - p) ** n, 0.0) * p * (1.0 - p) ** 2


def dial_signal(solve_rate, group_size, recipe: str = "grpo") -> np.ndarray:
    """The expected update signal of a group of G at pass rate p: E[σ̂ | p, G] under ``"grpo"`` (the
    division by σ̂ leaves a step of size σ̂), E[σ̂² | p, G] = p(1 − p)(G − 1)/G under ``"dr_grpo"``.
    ``solve_rate`` is p in [0, 1] and ``group_size`` is G (they broadcast); ``recipe`` is the dial's
    setting, ``"grpo"`` (the default) or ``"dr_grpo"``."""
    if recipe not in DIAL_RECIPES:
        raise ValueError(f"recipe must be one of {DIAL_RECIPES} (the dial's two settings); got {recipe!r}.")
    worth = expected_group_std if recipe == "grpo" else expected_group_variance
    return np.asarray(worth(solve_rate, group_size), dtype=np.float64)


def signal_table(solve_rates: np.ndarray, max_size: int, worth: str) -> np.ndarray:
    """Row i, column G: prompt i's worth at group size G, for G = 0..``max_size`` (0 below G = 2).

    ``worth`` is ``"knapsack"`` or one of the dial's recipes (``"grpo"``, ``"dr_grpo"``).
    ``solve_rates`` holds one pass rate p in [0, 1] per prompt (row).
    """
    p = np.asarray(solve_rates, dtype=np.float64)
    table = np.zeros((p.size, max_size + 1))
    sizes = np.arange(2, max_size + 1)
    if p.size and max_size >= 2:
        grid_p, grid_g = np.meshgrid(p, sizes, indexing="ij")
        if worth == "knapsack":
            table[:, 2:] = knapsack_value(grid_p, grid_g)
        else:
            table[:, 2:] = dial_signal(grid_p, grid_g, worth)
    return table


def greso_skip_probability(silent_streak, explore: float, floor: float = 0.01) -> np.ndarray:
    """GRESO's chance of skipping a prompt silent at its last z = ``silent_streak`` visits in a row:
    1 − max(p_eᶻ, ``floor``) with p_e = ``explore``; 0 for z = 0. The floor (0.01 in GRESO's code)
    keeps every prompt drawable, so one that became solvable is found again."""
    z = to_numpy(silent_streak, "silent_streak")
    if np.any(z < 0) or np.any(z != np.round(z)):
        raise ValueError(f"silent_streak must hold whole numbers >= 0; got {np.unique(z)[:5].tolist()}.")
    p_e = check_number(explore, "explore")
    fl = check_number(floor, "floor")
    if not 0.0 <= p_e <= 1.0 or not 0.0 < fl <= 1.0:
        raise ValueError(f"explore must lie in [0, 1] and floor in (0, 1]; got explore={p_e:g}, floor={fl:g}.")
    return 1.0 - np.maximum(p_e**z, fl)


def solve_knapsack(table: np.ndarray, budget: int, min_size: int = 2) -> np.ndarray:
    """The group sizes (0 or ``min_size``..max) that maximise Σᵢ table[i, Gᵢ] with Σᵢ Gᵢ ≤ ``budget``.

    ``table`` is a worth table such as :func:`signal_table` gives: one row per prompt, column G its
    worth at G samples (the last column is the largest size, max); ``budget`` counts samples.

    Exact dynamic programming: ``best[w]`` is the largest worth reachable with exactly w samples over
    the prompts seen so far, extended one prompt at a time by every size it may take. Ties go to the
    smaller size and the smaller total, so a prompt worth nothing is given nothing. Cost: prompts ×
    sizes vector operations of length ``budget`` + 1.
    """
    n, width = table.shape
    best = np.full(budget + 1, -np.inf)
    best[0] = 0.0
    choice = np.zeros((n, budget + 1), dtype=np.int64)
    for i in range(n):
        new, pick = best.copy(), np.zeros(budget + 1, dtype=np.int64)
        for size in range(min_size, min(width - 1, budget) + 1):
            candidate = np.full(budget + 1, -np.inf)
            candidate[size:] = best[:-size] + table[i, size]
            better = candidate > new + 1e-15
            new[better], pick[better] = candidate[better], size
        best, choice[i] = new, pick
    spent = int(np.argmax(best))  # the first maximum: the smallest total that reaches it
    sizes = np.zeros(n, dtype=np.int64)
    for i in range(n - 1, -1, -1):
        sizes[i] = choice[i, spent]
        spent -= sizes[i]
    return sizes


def greedy_by_marginal_gain(table: np.ndarray, budget: int, min_size: int = 2, start=None) -> np.ndarray:
    """Spend ``budget`` samples one decision at a time on the best gain per sample.

    A prompt at G = 0 may be opened with ``min_size`` samples (gain table[i, min_size], per sample
    that over ``min_size``); an open prompt may grow by one (gain table[i, G + 1] − table[i, G]).
    ``start`` (sizes already given, e.g. an exploration floor) is counted against the budget. Stops
    when no decision with a positive gain fits. Optimal when every row grows by shrinking steps.
    ``table`` is a worth table such as :func:`signal_table` gives (row i, column G: prompt i's worth
    at G samples, up to the last column).
    """
    sizes = np.zeros(table.shape[0], dtype=np.int64) if start is None else np.array(start, dtype=np.int64)
    left = budget - int(sizes.sum())
    max_size = table.shape[1] - 1
    heap: list[tuple[float, int]] = []
    for i, g in enumerate(sizes.tolist()):
        _push_next(heap, table, i, g, min_size, max_size)
    while heap and left > 0:
        neg_gain, i = heapq.heappop(heap)
        step = min_size if sizes[i] == 0 else 1
        if step > left or -neg_gain <= 0.0:
            continue
        sizes[i] += step
        left -= step
        _push_next(heap, table, i, int(sizes[i]), min_size, max_size)
    return sizes


def _push_next(heap: list, table: np.ndarray, i: int, g: int, min_size: int, max_size: int) -> None:
    """Queue prompt i's next decision (open it, or add one sample) by its gain per sample."""
    if g == 0 and min_size <= max_size:
        heapq.heappush(heap, (-table[i, min_size] / min_size, i))
    elif 0 < g < max_size:
        heapq.heappush(heap, (-(table[i, g + 1] - table[i, g]), i))
