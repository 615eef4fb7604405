"""Spend samples where the gradient is: one interface over every allocation rule (Part V).

* ``plan(rule, state, budget, rng)`` -> one group size per prompt of the pool (0 = skip), sum <=
  budget, for the rules that decide ahead (uniform G, GRESO's skip, Knapsack RL, the dial's rule).
* ``allocate(rule, state, budget, draw, rng)`` -> :class:`~stddial_book.rl.allocation_base.Allocation`
  for every rule: a plan-ahead rule is one round; DAPO, SPEED and Reinforce-Ada sample in rounds.
  So all rules compare in one currency, generated samples.
* ``record_allocation(state, allocation)`` adds what a step drew to the shared history and estimator.
* ``RULES`` names the rules; ``plan_for_rates(name, solve_rates, budget)`` plans from known pass rates.

A rule is a settings object (``RULES[name](**settings)``); ``candidates`` restricts a step to some
prompts of the pool (a sampled batch), default all of them.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import numpy as np

from stddial_book.core.checks import check_int, check_unit_interval, to_numpy
from stddial_book.rl.allocation_adaptive import DynamicSampling, ReinforceAda, SpeedScreening
from stddial_book.rl.allocation_base import (
    Allocation,
    Draw,
    checked_budget,
    checked_candidates,
    checked_rng,
    one_round,
)
from stddial_book.rl.allocation_rules import DialAllocation, GresoSkip, KnapsackAllocation, KnapsackPaper, UniformGroups
from stddial_book.rl.pool_state import PoolState, new_pool_state, record

__all__ = ["RULES", "plan", "allocate", "record_allocation", "bernoulli_draw", "plan_for_rates"]

#: The rules by name; each value builds the rule from its settings (``RULES["dapo"](batch_prompts=32)``).
RULES = {
    "uniform": UniformGroups,
    "dapo": DynamicSampling,
    "greso": GresoSkip,
    "knapsack": KnapsackAllocation,
    "knapsack_oracle": KnapsackAllocation,  # pass solve_rates=...: the true pass rates
    "speed": SpeedScreening,
    "reinforce_ada": ReinforceAda,
    "dial_grpo": partial(DialAllocation, recipe="grpo"),
    "dial_dr_grpo": partial(DialAllocation, recipe="dr_grpo"),
    "knapsack_paper": KnapsackPaper,  # Knapsack RL as its released trainer allocates (plug-in rates)
}

_RULE_TYPES = (
    UniformGroups,
    DynamicSampling,
    GresoSkip,
    KnapsackAllocation,
    SpeedScreening,
    ReinforceAda,
    DialAllocation,
    KnapsackPaper,
)


def _check_rule(rule) -> None:
    if not isinstance(rule, _RULE_TYPES):
        raise TypeError(f"rule must be one of the allocation rules (build one with RULES[name]()); got {rule!r}.")


def plan(rule, state: PoolState, budget: int, rng=None, candidates=None) -> np.ndarray:
    """Group sizes per prompt of the pool (int64, 0 = skip, sum <= ``budget``) from a plan-ahead rule.

    ``rule`` is a rule with a ``plan`` (uniform groups, GRESO's skip, Knapsack RL, the dial's rule; see
    :data:`RULES`); ``state`` is the pool's :class:`~stddial_book.rl.pool_state.PoolState`; ``budget``
    counts samples; ``rng`` is a numpy Generator or a seed (``None``: seed 0); ``candidates`` are the
    distinct pool indices the step may spend on (``None``: the whole pool).
    """
    _check_rule(rule)
    if not hasattr(rule, "plan"):
        raise TypeError(
            f"{type(rule).__name__} samples in rounds and decides from what it sees; "
            "call allocate(rule, state, budget, draw, rng) instead of plan."
        )
    budget, cand, rng = checked_budget(budget), checked_candidates(state, candidates), checked_rng(rng)
    sizes = rule.plan(state, budget, rng, cand)
    assert sizes.sum() <= budget and sizes.shape == (state.num_prompts,)
    return sizes


def allocate(rule, state: PoolState, budget: int, draw: Draw, rng=None, candidates=None) -> Allocation:
    """One step of ``rule`` with ``draw(prompt_ids, sizes) -> num_correct``: the groups for the update
    and the samples generated (never more than ``budget``), kept and discarded.

    ``rule`` is any rule of :data:`RULES`; ``state`` is the pool's
    :class:`~stddial_book.rl.pool_state.PoolState`, which it reads and does not change (see
    :func:`record_allocation`); ``draw`` samples the groups (a
    :data:`~stddial_book.rl.allocation_base.Draw`); ``rng``, ``candidates`` as for :func:`plan`.
    """
    _check_rule(rule)
    budget, cand, rng = checked_budget(budget), checked_candidates(state, candidates), checked_rng(rng)
    if hasattr(rule, "allocate"):
        result = rule.allocate(state, budget, draw, rng, cand)
    else:
        result = one_round(rule.plan(state, budget, rng, cand), draw)
    assert result.generated <= budget
    assert result.generated == result.kept + result.discarded_silent + result.discarded_surplus
    return result


def record_allocation(state: PoolState, allocation: Allocation) -> PoolState:
    """Record every sample ``allocation`` drew (discarded ones too: they still measure the pass rate),
    one visit per prompt: a prompt's rounds within the step are merged into one group. ``state`` is
    the pool's :class:`~stddial_book.rl.pool_state.PoolState`, updated in place and returned."""
    if not isinstance(allocation, Allocation):
        raise TypeError(f"allocation must be an Allocation (what allocate returns); got {type(allocation).__name__}.")
    ids, where = np.unique(allocation.drawn_prompts, return_inverse=True)
    sizes = np.bincount(where, weights=allocation.drawn_sizes, minlength=ids.size).astype(np.int64)
    correct = np.bincount(where, weights=allocation.drawn_correct, minlength=ids.size).astype(np.int64)
    return record(state, ids, correct, sizes)


def bernoulli_draw(solve_rates, rng=None) -> Draw:
    """A ``draw`` for simulations: prompt i's samples are correct with probability ``solve_rates[i]``.

    ``solve_rates`` holds one pass rate p in [0, 1] per prompt of the pool; ``rng`` is the numpy
    Generator or seed the draws use (``None``: seed 0).
    """
    p = to_numpy(solve_rates, "solve_rates")
    check_unit_interval(p, "solve_rates")
    gen = checked_rng(rng)

    def draw(prompt_ids: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        return gen.binomial(sizes, p[prompt_ids])

    return draw


def plan_for_rates(rule_name: str, solve_rates, budget: int, rng=None, **options) -> np.ndarray:
    """Group sizes for a pool whose pass rates are known (``solve_rates``, one per prompt).

    Plan-ahead rules plan with a fresh history; the ones that read pass rates (Knapsack RL, the
    dial's rule) are given ``solve_rates`` as an oracle, so they plan without exploring. GRESO,
    with no history, skips nothing. For the rules that sample in rounds it is the expected samples
    generated per prompt (floats), averaged over ``repeats`` (an option, default 64) simulated steps
    with Bernoulli rewards. ``options`` are the rule's settings. ``rule_name`` is a name of
    :data:`RULES`; ``budget`` counts samples for the step; ``rng`` is a numpy Generator or a seed
    (``None``: seed 0).
    """
    if rule_name not in RULES:
        raise ValueError(f"rule_name must be one of {sorted(RULES)}; got {rule_name!r}.")
    p = to_numpy(solve_rates, "solve_rates")
    check_unit_interval(p, "solve_rates")
    if p.ndim != 1:
        raise ValueError(f"solve_rates must be 1-D, one pass rate per prompt; got shape {p.shape}.")
    repeats = check_int(options.pop("repeats", 64), "repeats", minimum=1)
    rule = RULES[rule_name](**options)
    if any(f.name == "solve_rates" for f in dataclasses.fields(rule)):
        rule = dataclasses.replace(rule, solve_rates=p)
    state, gen = new_pool_state(p.size), checked_rng(rng)
    if hasattr(rule, "plan"):
        return plan(rule, state, budget, gen)
    draw = bernoulli_draw(p, gen)
    total = sum(allocate(rule, state, budget, draw, gen).per_prompt_generated(p.size) for _ in range(repeats))
    return total / repeats
