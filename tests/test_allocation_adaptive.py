"""DAPO's refill, characterised: the outputs of its users on seeded scenarios, written down as
literals from the code before the refill loop was made one (``DynamicSampler.fill``), so that
``DynamicSampling.allocate`` (the allocation rule "dapo"), ``DynamicSampler.fill`` itself and the
controlled run's same-prompt redraw stay bit-for-bit what they were: the same prompts drawn in the
same rounds (the same ``rng`` consumption), the same groups kept, the same silent and surplus counts,
the same behaviour at the budget, the round cap and an empty round."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest

from stddial_book.experiments.controlled.bernoulli import ControlledRun, controlled_run
from stddial_book.rl.allocation import allocate
from stddial_book.rl.allocation_adaptive import DynamicSampling
from stddial_book.rl.allocation_rules import GresoSkip
from stddial_book.rl.pool_state import new_pool_state
from stddial_book.rl.sampling import DynamicSampler
from stddial_book.theory.recipes import DAPO, GRPO

# --- DynamicSampling.allocate (per group: draw returns each group's k) ----------------------------

MIXED_POOL = np.array([0.0, 1.0, 0.5, 0.2, 0.0, 0.9, 1.0, 0.05, 0.0, 0.6] * 4)  # 40 prompts, many silent


def bernoulli_draw(solve_rates: np.ndarray, seed: int):
    """``draw(ids, sizes)``: each group's k from fresh Bernoulli answers at the prompts' solve rates,
    one generator for the whole step (so the rounds' order matters)."""
    rng = np.random.default_rng(seed)

    def draw(ids, sizes):
        return np.array([int((rng.random(s) < solve_rates[i]).sum()) for i, s in zip(ids, sizes)])

    return draw


def fixed_draw(k: int):
    """``draw(ids, sizes)`` answering k correct in every group."""
    return lambda ids, sizes: np.full(ids.size, k)


def allocation_scenarios() -> dict[str, tuple]:
    """name -> (rule, pool size, budget, draw, seed of rng, candidates or None)."""
    pool = MIXED_POOL
    return {
        "fills_in_rounds": (DynamicSampling(4, 5, 8), 40, 1000, bernoulli_draw(pool, 1), 0, None),
        "budget_limited": (DynamicSampling(4, 8, 8), 40, 30, bernoulli_draw(pool, 2), 1, None),
        "budget_below_one_group": (DynamicSampling(4, 2, 8), 40, 3, bernoulli_draw(pool, 2), 1, None),
        "round_capped": (DynamicSampling(4, 6, 2), 40, 1000, bernoulli_draw(pool, 3), 2, None),
        "round_prompts": (DynamicSampling(4, 3, 8, round_prompts=5), 40, 1000, bernoulli_draw(pool, 4), 3, None),
        "round_prompts_budget": (DynamicSampling(4, 4, 8, round_prompts=6), 40, 44, bernoulli_draw(pool, 5), 4, None),
        "round_prompts_capped": (DynamicSampling(2, 9, 2, round_prompts=4), 40, 1000, bernoulli_draw(pool, 6), 5, None),
        "all_silent": (DynamicSampling(4, 3, 3), 40, 1000, fixed_draw(0), 6, None),
        "all_silent_solved": (DynamicSampling(4, 3, 50), 10, 1000, fixed_draw(4), 7, None),
        "all_silent_round_prompts": (DynamicSampling(4, 3, 4, round_prompts=2), 40, 1000, fixed_draw(4), 8, None),
        "all_mixed": (DynamicSampling(4, 6, 8), 40, 1000, fixed_draw(1), 9, None),
        "all_mixed_round_prompts": (DynamicSampling(4, 3, 8, round_prompts=7), 40, 1000, fixed_draw(2), 10, None),
        "candidates_run_out": (DynamicSampling(4, 5, 8), 8, 1000, bernoulli_draw(pool, 11), 11, None),
        "candidate_subset": (
            DynamicSampling(4, 4, 8),
            40,
            1000,
            bernoulli_draw(pool, 12),
            12,
            np.array([39, 3, 17, 2, 25, 30, 9, 12, 5, 33]),
        ),
        "no_candidates": (DynamicSampling(4, 4, 8), 40, 1000, fixed_draw(1), 13, np.zeros(0, dtype=np.int64)),
        "greso": (GresoSkip(group_size=4, batch_prompts=5, max_rounds=3), 40, 1000, bernoulli_draw(pool, 14), 14, None),
        "greso_budget": (GresoSkip(group_size=4, max_rounds=8), 40, 36, bernoulli_draw(pool, 15), 15, None),
    }


def random_allocation_cases(count: int = 24) -> list[tuple]:
    """Seeded random rules, budgets and pools: (rule, pool size, budget, draw, seed, candidates)."""
    rng = np.random.default_rng(2026)
    cases = []
    for case in range(count):
        G = int(rng.integers(2, 7))
        pool = rng.choice([0.0, 1.0, 0.1, 0.5, 0.5, 0.9], size=int(rng.integers(3, 30)))
        rule = DynamicSampling(
            G,
            int(rng.integers(1, 9)),
            int(rng.integers(1, 6)),
            None if rng.random() < 0.5 else int(rng.integers(1, 12)),
        )
        budget = int(rng.integers(0, 30 * G))
        cases.append((rule, pool.size, budget, bernoulli_draw(pool, 100 + case), 200 + case, None))
    return cases


def allocation_outcome(rule, pool_size: int, budget: int, draw, seed: int, candidates) -> dict:
    """Everything the rule's Allocation holds, and the generator's next number after it (its
    consumption)."""
    rng = np.random.default_rng(seed)
    out = allocate(rule, new_pool_state(pool_size), budget, draw, rng, candidates)
    return {
        "prompts": out.prompts.tolist(),
        "group_sizes": out.group_sizes.tolist(),
        "num_correct": out.num_correct.tolist(),
        "drawn_prompts": out.drawn_prompts.tolist(),
        "drawn_sizes": out.drawn_sizes.tolist(),
        "drawn_correct": out.drawn_correct.tolist(),
        "discarded_silent": out.discarded_silent,
        "discarded_surplus": out.discarded_surplus,
        "rounds": out.rounds,
        "rng_next": int(rng.integers(2**31)),
    }


# --- DynamicSampler.fill (per sample: draw returns flat 0/1, groups contiguous) ------------------


def scripted_rounds(rounds: list[list[int]], G: int, ragged: list[list[int]] | None = None):
    """``draw(round_index, missing)`` answering round r with groups whose k are ``rounds[r]`` (and
    sizes ``ragged[r]`` if given, else G); the samples are their running numbers; asked sizes logged."""
    state = {"next": 0, "asked": []}

    def draw(round_index: int, missing: int):
        state["asked"].append(missing)
        ks = rounds[round_index] if round_index < len(rounds) else []
        sizes = ragged[round_index] if ragged is not None and round_index < len(ragged) else [G] * len(ks)
        correct = np.array([f for k, s in zip(ks, sizes) for f in [1] * k + [0] * (s - k)], dtype=np.int64)
        samples = np.arange(state["next"], state["next"] + correct.size)
        state["next"] += correct.size
        return (samples, correct) if ragged is None else (samples, correct, sizes)

    draw.asked = state["asked"]
    return draw


def sampler_scenarios() -> dict[str, tuple]:
    """name -> (num_groups, G, max_rounds, rounds of k, ragged sizes or None)."""
    return {
        "asks_what_is_missing": (2, 4, 5, [[0, 2, 4], [1, 3]], None),
        "more_than_asked": (2, 4, 5, [[1, 0, 3, 2, 4, 2], [1]], None),
        "fewer_than_asked": (4, 3, 5, [[1], [0, 2], [1, 1, 3], [2, 2]], None),
        "empty_round": (3, 4, 5, [[0, 2], [], [1, 1]], None),
        "round_capped": (3, 2, 3, [[0, 2, 1], [2], [0, 0, 1], [1, 1]], None),
        "all_silent": (2, 4, 4, [[0, 4], [4, 0], [0, 0], [4, 4], [0, 0]], None),
        "all_mixed": (3, 4, 8, [[1, 2, 3, 1, 2]], None),
        "ragged": (3, 4, 6, [[0, 2, 3, 5], [1, 0], [2, 2]], [[3, 4, 3, 6], [2, 2], [5, 4]]),
        "ragged_surplus": (2, 4, 6, [[1, 1, 1], [1]], [[2, 3, 4], [2]]),
    }


def random_sampler_cases(count: int = 24) -> list[tuple]:
    """Seeded random rounds (silent, mixed, surplus and empty ones, ragged or not)."""
    rng = np.random.default_rng(2027)
    cases = []
    for _ in range(count):
        G, num_groups, max_rounds = int(rng.integers(2, 7)), int(rng.integers(1, 6)), int(rng.integers(1, 6))
        ragged = rng.random() < 0.3
        rounds, sizes = [], []
        for _ in range(max_rounds + 1):
            n = 0 if rng.random() < 0.1 else int(rng.integers(1, num_groups + 3))
            sz = [int(rng.integers(2, 7)) if ragged else G for _ in range(n)]
            silent = rng.random(n) < 0.5
            rounds.append([int(rng.choice([0, s])) if q else int(rng.integers(1, s)) for q, s in zip(silent, sz)])
            sizes.append(sz)
        cases.append((num_groups, G, max_rounds, rounds, sizes if ragged else None))
    return cases


def sampler_outcome(num_groups: int, G: int, max_rounds: int, rounds, ragged) -> dict:
    """The kept samples per part, the cost, and the sizes ``draw`` was asked for."""
    draw = scripted_rounds(rounds, G, ragged)
    sampler = DynamicSampler(num_groups, G, max_rounds)
    parts, cost = sampler.fill(draw)
    assert sampler.cost is cost
    return {"parts": [p.tolist() for p in parts], "cost": asdict(cost), "asked": list(draw.asked)}


# --- the controlled run's same-prompt redraw ------------------------------------------------------

CONTROLLED_P0 = np.array([0.0, 0.03, 0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 0.95, 0.97, 1.0, 0.6])


def controlled_scenarios() -> dict[str, tuple]:
    """name -> (recipe, ControlledRun, seed)."""
    return {
        "dapo_4_tries": (DAPO, ControlledRun(num_prompts=14, group_size=4, steps=6, redraw_tries=4), 0),
        "dapo_1_try": (DAPO, ControlledRun(num_prompts=14, group_size=4, steps=4, redraw_tries=1), 1),
        "dapo_2_tries": (DAPO, ControlledRun(num_prompts=14, group_size=3, steps=5, redraw_tries=2), 2),
        "dapo_many_tries": (DAPO, ControlledRun(num_prompts=14, group_size=2, steps=5, redraw_tries=30), 3),
        "grpo": (GRPO, ControlledRun(num_prompts=14, group_size=4, steps=4, redraw_tries=4), 4),
    }


def controlled_outcome(recipe, config: ControlledRun, seed: int) -> dict:
    run = controlled_run(CONTROLLED_P0, recipe, config, seed=seed)
    return {
        "groups_drawn": run.groups_drawn.tolist(),
        "groups_kept": run.groups_kept.tolist(),
        "silent_measured": run.silent_measured.tolist(),
        "p_final": run.p[-1].tolist(),
        "gain_nonzero": (run.gain != 0).astype(int).tolist(),
    }


# --- expected values: the outputs of the code before the refill was made one ----------------------
# (one scenario a line, left as printed)

# fmt: off
EXPECTED_ALLOCATIONS: dict = {
    'all_mixed': {'prompts': [22, 34, 21, 2, 31, 18], 'group_sizes': [4, 4, 4, 4, 4, 4], 'num_correct': [1, 1, 1, 1, 1, 1], 'drawn_prompts': [22, 34, 21, 2, 31, 18], 'drawn_sizes': [4, 4, 4, 4, 4, 4], 'drawn_correct': [1, 1, 1, 1, 1, 1], 'discarded_silent': 0, 'discarded_surplus': 0, 'rounds': 1, 'rng_next': 1960244659},
    'all_mixed_round_prompts': {'prompts': [18, 39, 27], 'group_sizes': [4, 4, 4], 'num_correct': [2, 2, 2], 'drawn_prompts': [18, 39, 27, 9, 23, 28, 36], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [2, 2, 2, 2, 2, 2, 2], 'discarded_silent': 0, 'discarded_surplus': 16, 'rounds': 1, 'rng_next': 692508841},
    'all_silent': {'prompts': [], 'group_sizes': [], 'num_correct': [], 'drawn_prompts': [23, 33, 26, 2, 16, 35, 27, 18, 34], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [0, 0, 0, 0, 0, 0, 0, 0, 0], 'discarded_silent': 36, 'discarded_surplus': 0, 'rounds': 3, 'rng_next': 1904741740},
    'all_silent_round_prompts': {'prompts': [], 'group_sizes': [], 'num_correct': [], 'drawn_prompts': [25, 15, 27, 10, 13, 39, 24, 31], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [4, 4, 4, 4, 4, 4, 4, 4], 'discarded_silent': 32, 'discarded_surplus': 0, 'rounds': 4, 'rng_next': 611218164},
    'all_silent_solved': {'prompts': [], 'group_sizes': [], 'num_correct': [], 'drawn_prompts': [8, 0, 7, 1, 3, 6, 2, 4, 5, 9], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [4, 4, 4, 4, 4, 4, 4, 4, 4, 4], 'discarded_silent': 40, 'discarded_surplus': 0, 'rounds': 4, 'rng_next': 1875941739},
    'budget_below_one_group': {'prompts': [], 'group_sizes': [], 'num_correct': [], 'drawn_prompts': [], 'drawn_sizes': [], 'drawn_correct': [], 'discarded_silent': 0, 'discarded_surplus': 0, 'rounds': 0, 'rng_next': 629526661},
    'budget_limited': {'prompts': [9, 23], 'group_sizes': [4, 4], 'num_correct': [3, 2], 'drawn_prompts': [9, 23, 17, 28, 0, 7, 6], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [3, 2, 0, 0, 0, 0, 4], 'discarded_silent': 20, 'discarded_surplus': 0, 'rounds': 1, 'rng_next': 629526661},
    'candidate_subset': {'prompts': [12, 3, 2, 25], 'group_sizes': [4, 4, 4, 4], 'num_correct': [3, 1, 3, 2], 'drawn_prompts': [12, 3, 30, 39, 2, 25], 'drawn_sizes': [4, 4, 4, 4, 4, 4], 'drawn_correct': [3, 1, 0, 4, 3, 2], 'discarded_silent': 8, 'discarded_surplus': 0, 'rounds': 2, 'rng_next': 1036628920},
    'candidates_run_out': {'prompts': [3, 2], 'group_sizes': [4, 4], 'num_correct': [2, 2], 'drawn_prompts': [3, 1, 7, 5, 4, 2, 0, 6], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [2, 4, 0, 4, 0, 2, 0, 4], 'discarded_silent': 24, 'discarded_surplus': 0, 'rounds': 2, 'rng_next': 317668847},
    'fills_in_rounds': {'prompts': [23, 2, 17, 9], 'group_sizes': [4, 4, 4, 4], 'num_correct': [1, 2, 1, 3], 'drawn_prompts': [11, 27, 4, 24, 23, 2, 3, 34, 18, 1, 10, 22, 20, 26, 28, 30, 37, 38, 17, 0, 21, 35, 9, 6], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [4, 0, 0, 0, 1, 2, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 0, 1, 0, 4, 4, 3, 4], 'discarded_silent': 80, 'discarded_surplus': 0, 'rounds': 8, 'rng_next': 1478428096},
    'greso': {'prompts': [3, 13, 25, 2, 22], 'group_sizes': [4, 4, 4, 4, 4], 'num_correct': [1, 2, 3, 1, 3], 'drawn_prompts': [33, 15, 3, 23, 31, 0, 13, 25, 28, 2, 22], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [0, 4, 1, 0, 4, 0, 2, 3, 0, 1, 3], 'discarded_silent': 24, 'discarded_surplus': 0, 'rounds': 3, 'rng_next': 475521761},
    'greso_budget': {'prompts': [23, 9, 19], 'group_sizes': [4, 4, 4], 'num_correct': [1, 2, 2], 'drawn_prompts': [23, 38, 21, 9, 34, 18, 8, 19, 10], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [1, 0, 4, 2, 0, 0, 0, 2, 0], 'discarded_silent': 24, 'discarded_surplus': 0, 'rounds': 1, 'rng_next': 1071808375},
    'no_candidates': {'prompts': [], 'group_sizes': [], 'num_correct': [], 'drawn_prompts': [], 'drawn_sizes': [], 'drawn_correct': [], 'discarded_silent': 0, 'discarded_surplus': 0, 'rounds': 0, 'rng_next': 1924045406},
    'round_capped': {'prompts': [22, 23, 12], 'group_sizes': [4, 4, 4], 'num_correct': [2, 1, 3], 'drawn_prompts': [22, 32, 23, 7, 34, 12, 33, 6, 3], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [2, 4, 1, 0, 0, 3, 0, 4, 0], 'discarded_silent': 24, 'discarded_surplus': 0, 'rounds': 2, 'rng_next': 1011271278},
    'round_prompts': {'prompts': [23, 32, 2], 'group_sizes': [4, 4, 4], 'num_correct': [1, 2, 2], 'drawn_prompts': [23, 32, 30, 17, 20, 11, 33, 2, 12, 3], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [1, 2, 0, 0, 0, 4, 0, 2, 1, 0], 'discarded_silent': 24, 'discarded_surplus': 4, 'rounds': 2, 'rng_next': 1660599733},
    'round_prompts_budget': {'prompts': [23, 39, 13, 19], 'group_sizes': [4, 4, 4, 4], 'num_correct': [1, 1, 1, 1], 'drawn_prompts': [31, 16, 23, 39, 35, 13, 19, 1, 34, 11, 8], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [4, 4, 1, 1, 4, 1, 1, 4, 0, 4, 0], 'discarded_silent': 28, 'discarded_surplus': 0, 'rounds': 2, 'rng_next': 2016717040},
    'round_prompts_capped': {'prompts': [9], 'group_sizes': [2], 'num_correct': [1], 'drawn_prompts': [30, 18, 6, 24, 25, 38, 9, 23], 'drawn_sizes': [2, 2, 2, 2, 2, 2, 2, 2], 'drawn_correct': [0, 0, 2, 0, 2, 0, 1, 0], 'discarded_silent': 14, 'discarded_surplus': 0, 'rounds': 2, 'rng_next': 1080965885},
}
EXPECTED_RANDOM_ALLOCATIONS: list = [
    {'prompts': [3, 6, 5], 'group_sizes': [6, 6, 6], 'num_correct': [1, 3, 1], 'drawn_prompts': [3, 2, 1, 4, 0, 6, 5], 'drawn_sizes': [6, 6, 6, 6, 6, 6, 6], 'drawn_correct': [1, 0, 0, 0, 0, 3, 1], 'discarded_silent': 24, 'discarded_surplus': 0, 'rounds': 1, 'rng_next': 1167512073},
    {'prompts': [], 'group_sizes': [], 'num_correct': [], 'drawn_prompts': [16, 23, 25, 22, 17, 8, 7, 0], 'drawn_sizes': [2, 2, 2, 2, 2, 2, 2, 2], 'drawn_correct': [0, 2, 0, 2, 0, 0, 2, 0], 'discarded_silent': 16, 'discarded_surplus': 0, 'rounds': 2, 'rng_next': 504590458},
    {'prompts': [8, 0, 10, 14, 5, 12], 'group_sizes': [4, 4, 4, 4, 4, 4], 'num_correct': [1, 3, 3, 3, 3, 3], 'drawn_prompts': [3, 8, 0, 7, 10, 9, 2, 11, 14, 6, 5, 12, 4], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [4, 1, 3, 0, 3, 4, 0, 4, 3, 4, 3, 3, 0], 'discarded_silent': 28, 'discarded_surplus': 0, 'rounds': 3, 'rng_next': 677325905},
    {'prompts': [18, 20, 9, 27], 'group_sizes': [4, 4, 4, 4], 'num_correct': [3, 2, 3, 2], 'drawn_prompts': [8, 24, 12, 3, 23, 18, 0, 20, 9, 27], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [0, 0, 0, 0, 4, 3, 4, 2, 3, 2], 'discarded_silent': 24, 'discarded_surplus': 0, 'rounds': 3, 'rng_next': 2061248994},
    {'prompts': [4, 12, 6], 'group_sizes': [4, 4, 4], 'num_correct': [2, 1, 2], 'drawn_prompts': [4, 21, 12, 0, 16, 6, 2], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [2, 4, 1, 0, 4, 2, 0], 'discarded_silent': 16, 'discarded_surplus': 0, 'rounds': 3, 'rng_next': 1554888830},
    {'prompts': [6], 'group_sizes': [3], 'num_correct': [1], 'drawn_prompts': [6], 'drawn_sizes': [3], 'drawn_correct': [1], 'discarded_silent': 0, 'discarded_surplus': 0, 'rounds': 1, 'rng_next': 158228052},
    {'prompts': [0], 'group_sizes': [5], 'num_correct': [1], 'drawn_prompts': [2, 1, 0], 'drawn_sizes': [5, 5, 5], 'drawn_correct': [0, 0, 1], 'discarded_silent': 10, 'discarded_surplus': 0, 'rounds': 3, 'rng_next': 834162376},
    {'prompts': [13, 5, 1, 12, 2, 17, 11], 'group_sizes': [4, 4, 4, 4, 4, 4, 4], 'num_correct': [1, 3, 1, 3, 3, 2, 1], 'drawn_prompts': [13, 5, 3, 10, 0, 16, 1, 9, 14, 12, 2, 7, 6, 17, 11], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [1, 3, 4, 4, 0, 0, 1, 4, 0, 3, 3, 4, 4, 2, 1], 'discarded_silent': 32, 'discarded_surplus': 0, 'rounds': 5, 'rng_next': 1292662479},
    {'prompts': [11, 1, 2, 14, 13, 10], 'group_sizes': [6, 6, 6, 6, 6, 6], 'num_correct': [4, 2, 2, 2, 1, 4], 'drawn_prompts': [11, 1, 0, 2, 14, 8, 4, 3, 13, 10], 'drawn_sizes': [6, 6, 6, 6, 6, 6, 6, 6, 6, 6], 'drawn_correct': [4, 2, 0, 2, 2, 0, 0, 0, 1, 4], 'discarded_silent': 24, 'discarded_surplus': 0, 'rounds': 2, 'rng_next': 1969095986},
    {'prompts': [0, 8, 9], 'group_sizes': [4, 4, 4], 'num_correct': [2, 3, 2], 'drawn_prompts': [12, 0, 19, 17, 8, 16, 9], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [4, 2, 0, 4, 3, 4, 2], 'discarded_silent': 16, 'discarded_surplus': 0, 'rounds': 4, 'rng_next': 1988940360},
    {'prompts': [7, 3, 19, 17, 5, 9, 1, 11], 'group_sizes': [4, 4, 4, 4, 4, 4, 4, 4], 'num_correct': [3, 1, 2, 3, 1, 2, 2, 1], 'drawn_prompts': [7, 13, 3, 6, 12, 2, 4, 19, 17, 14, 5, 9, 10, 18, 1, 11], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [3, 4, 1, 4, 0, 4, 0, 2, 3, 0, 1, 2, 0, 0, 2, 1], 'discarded_silent': 32, 'discarded_surplus': 0, 'rounds': 4, 'rng_next': 1515343805},
    {'prompts': [], 'group_sizes': [], 'num_correct': [], 'drawn_prompts': [3], 'drawn_sizes': [5], 'drawn_correct': [0], 'discarded_silent': 5, 'discarded_surplus': 0, 'rounds': 1, 'rng_next': 1930662421},
    {'prompts': [1, 8], 'group_sizes': [4, 4], 'num_correct': [3, 1], 'drawn_prompts': [3, 1, 7, 6, 9, 5, 8, 0], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [0, 3, 4, 0, 0, 4, 1, 4], 'discarded_silent': 24, 'discarded_surplus': 0, 'rounds': 1, 'rng_next': 300405154},
    {'prompts': [2], 'group_sizes': [4], 'num_correct': [3], 'drawn_prompts': [6, 2, 3, 4, 5, 1, 0], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [0, 3, 4, 0, 0, 0, 4], 'discarded_silent': 24, 'discarded_surplus': 0, 'rounds': 2, 'rng_next': 231713914},
    {'prompts': [11, 7], 'group_sizes': [2, 2], 'num_correct': [1, 1], 'drawn_prompts': [15, 20, 6, 16, 2, 18, 4, 11, 3, 1, 7, 14], 'drawn_sizes': [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2], 'drawn_correct': [2, 2, 0, 2, 2, 2, 0, 1, 2, 0, 1, 2], 'discarded_silent': 20, 'discarded_surplus': 0, 'rounds': 4, 'rng_next': 1197867966},
    {'prompts': [23, 18, 5], 'group_sizes': [2, 2, 2], 'num_correct': [1, 1, 1], 'drawn_prompts': [24, 6, 23, 7, 25, 20, 17, 18, 16, 1, 27, 13, 5, 11, 22, 28], 'drawn_sizes': [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2], 'drawn_correct': [0, 0, 1, 0, 2, 2, 0, 1, 0, 2, 2, 0, 1, 2, 0, 2], 'discarded_silent': 26, 'discarded_surplus': 0, 'rounds': 4, 'rng_next': 1238832914},
    {'prompts': [2], 'group_sizes': [5], 'num_correct': [2], 'drawn_prompts': [0, 2], 'drawn_sizes': [5, 5], 'drawn_correct': [5, 2], 'discarded_silent': 5, 'discarded_surplus': 0, 'rounds': 1, 'rng_next': 478558577},
    {'prompts': [], 'group_sizes': [], 'num_correct': [], 'drawn_prompts': [2, 5, 3, 6], 'drawn_sizes': [4, 4, 4, 4], 'drawn_correct': [4, 4, 4, 4], 'discarded_silent': 16, 'discarded_surplus': 0, 'rounds': 2, 'rng_next': 870203717},
    {'prompts': [3], 'group_sizes': [2], 'num_correct': [1], 'drawn_prompts': [4, 1, 3, 2], 'drawn_sizes': [2, 2, 2, 2], 'drawn_correct': [0, 0, 1, 2], 'discarded_silent': 6, 'discarded_surplus': 0, 'rounds': 1, 'rng_next': 1715766437},
    {'prompts': [0], 'group_sizes': [4], 'num_correct': [2], 'drawn_prompts': [18, 0, 13, 4, 15, 14, 10], 'drawn_sizes': [4, 4, 4, 4, 4, 4, 4], 'drawn_correct': [0, 2, 0, 2, 4, 2, 1], 'discarded_silent': 12, 'discarded_surplus': 12, 'rounds': 1, 'rng_next': 386682048},
    {'prompts': [8, 9], 'group_sizes': [5, 5], 'num_correct': [1, 1], 'drawn_prompts': [8, 2, 9, 15, 1], 'drawn_sizes': [5, 5, 5, 5, 5], 'drawn_correct': [1, 0, 1, 5, 0], 'discarded_silent': 15, 'discarded_surplus': 0, 'rounds': 3, 'rng_next': 1824691732},
    {'prompts': [], 'group_sizes': [], 'num_correct': [], 'drawn_prompts': [0, 2, 4, 5, 3, 1], 'drawn_sizes': [2, 2, 2, 2, 2, 2], 'drawn_correct': [0, 0, 0, 2, 2, 2], 'discarded_silent': 12, 'discarded_surplus': 0, 'rounds': 3, 'rng_next': 683571781},
    {'prompts': [3, 1, 4], 'group_sizes': [3, 3, 3], 'num_correct': [1, 2, 2], 'drawn_prompts': [0, 3, 1, 4], 'drawn_sizes': [3, 3, 3, 3], 'drawn_correct': [0, 1, 2, 2], 'discarded_silent': 3, 'discarded_surplus': 0, 'rounds': 1, 'rng_next': 1550909696},
    {'prompts': [0, 11, 3, 4, 2, 10], 'group_sizes': [6, 6, 6, 6, 6, 6], 'num_correct': [4, 2, 5, 3, 5, 2], 'drawn_prompts': [0, 11, 3, 4, 9, 2, 10, 12, 8], 'drawn_sizes': [6, 6, 6, 6, 6, 6, 6, 6, 6], 'drawn_correct': [4, 2, 5, 3, 6, 5, 2, 6, 6], 'discarded_silent': 18, 'discarded_surplus': 0, 'rounds': 3, 'rng_next': 1066322253},
]
EXPECTED_SAMPLER: dict = {
    'all_mixed': {'parts': [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]], 'cost': {'rounds': 1, 'groups_generated': 5, 'groups_kept': 3, 'groups_silent': 0, 'groups_surplus': 2, 'samples_generated': 20, 'samples_kept': 12, 'hit_cap': False, 'samples_silent': 0, 'samples_surplus': 8}, 'asked': [3]},
    'all_silent': {'parts': [], 'cost': {'rounds': 4, 'groups_generated': 8, 'groups_kept': 0, 'groups_silent': 8, 'groups_surplus': 0, 'samples_generated': 32, 'samples_kept': 0, 'hit_cap': True, 'samples_silent': 32, 'samples_surplus': 0}, 'asked': [2, 2, 2, 2]},
    'asks_what_is_missing': {'parts': [[4, 5, 6, 7], [12, 13, 14, 15]], 'cost': {'rounds': 2, 'groups_generated': 5, 'groups_kept': 2, 'groups_silent': 2, 'groups_surplus': 1, 'samples_generated': 20, 'samples_kept': 8, 'hit_cap': False, 'samples_silent': 8, 'samples_surplus': 4}, 'asked': [2, 1]},
    'empty_round': {'parts': [[4, 5, 6, 7]], 'cost': {'rounds': 1, 'groups_generated': 2, 'groups_kept': 1, 'groups_silent': 1, 'groups_surplus': 0, 'samples_generated': 8, 'samples_kept': 4, 'hit_cap': True, 'samples_silent': 4, 'samples_surplus': 0}, 'asked': [3, 2]},
    'fewer_than_asked': {'parts': [[0, 1, 2], [6, 7, 8], [9, 10, 11, 12, 13, 14]], 'cost': {'rounds': 3, 'groups_generated': 6, 'groups_kept': 4, 'groups_silent': 2, 'groups_surplus': 0, 'samples_generated': 18, 'samples_kept': 12, 'hit_cap': False, 'samples_silent': 6, 'samples_surplus': 0}, 'asked': [4, 3, 2]},
    'more_than_asked': {'parts': [[0, 1, 2, 3, 8, 9, 10, 11]], 'cost': {'rounds': 1, 'groups_generated': 6, 'groups_kept': 2, 'groups_silent': 2, 'groups_surplus': 2, 'samples_generated': 24, 'samples_kept': 8, 'hit_cap': False, 'samples_silent': 8, 'samples_surplus': 8}, 'asked': [2]},
    'ragged': {'parts': [[3, 4, 5, 6, 10, 11, 12, 13, 14, 15], [16, 17]], 'cost': {'rounds': 2, 'groups_generated': 6, 'groups_kept': 3, 'groups_silent': 3, 'groups_surplus': 0, 'samples_generated': 20, 'samples_kept': 12, 'hit_cap': False, 'samples_silent': 8, 'samples_surplus': 0}, 'asked': [3, 1]},
    'ragged_surplus': {'parts': [[0, 1, 2, 3, 4]], 'cost': {'rounds': 1, 'groups_generated': 3, 'groups_kept': 2, 'groups_silent': 0, 'groups_surplus': 1, 'samples_generated': 9, 'samples_kept': 5, 'hit_cap': False, 'samples_silent': 0, 'samples_surplus': 4}, 'asked': [2]},
    'round_capped': {'parts': [[4, 5], [12, 13]], 'cost': {'rounds': 3, 'groups_generated': 7, 'groups_kept': 2, 'groups_silent': 5, 'groups_surplus': 0, 'samples_generated': 14, 'samples_kept': 4, 'hit_cap': True, 'samples_silent': 10, 'samples_surplus': 0}, 'asked': [3, 2, 2]},
}
EXPECTED_RANDOM_SAMPLER: list = [
    {'parts': [[0, 1, 2, 3, 4, 5]], 'cost': {'rounds': 1, 'groups_generated': 2, 'groups_kept': 1, 'groups_silent': 1, 'groups_surplus': 0, 'samples_generated': 10, 'samples_kept': 6, 'hit_cap': False, 'samples_silent': 4, 'samples_surplus': 0}, 'asked': [1]},
    {'parts': [[0, 1, 2, 3, 4, 5, 6, 7, 17, 18, 19, 20, 21]], 'cost': {'rounds': 1, 'groups_generated': 6, 'groups_kept': 4, 'groups_silent': 2, 'groups_surplus': 0, 'samples_generated': 22, 'samples_kept': 13, 'hit_cap': False, 'samples_silent': 9, 'samples_surplus': 0}, 'asked': [4]},
    {'parts': [[3, 4, 5, 6, 7, 8]], 'cost': {'rounds': 1, 'groups_generated': 2, 'groups_kept': 1, 'groups_silent': 1, 'groups_surplus': 0, 'samples_generated': 9, 'samples_kept': 6, 'hit_cap': False, 'samples_silent': 3, 'samples_surplus': 0}, 'asked': [1]},
    {'parts': [[0, 1, 2]], 'cost': {'rounds': 1, 'groups_generated': 2, 'groups_kept': 1, 'groups_silent': 0, 'groups_surplus': 1, 'samples_generated': 5, 'samples_kept': 3, 'hit_cap': False, 'samples_silent': 0, 'samples_surplus': 2}, 'asked': [1]},
    {'parts': [], 'cost': {'rounds': 1, 'groups_generated': 1, 'groups_kept': 0, 'groups_silent': 1, 'groups_surplus': 0, 'samples_generated': 5, 'samples_kept': 0, 'hit_cap': True, 'samples_silent': 5, 'samples_surplus': 0}, 'asked': [3]},
    {'parts': [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]], 'cost': {'rounds': 1, 'groups_generated': 4, 'groups_kept': 3, 'groups_silent': 1, 'groups_surplus': 0, 'samples_generated': 20, 'samples_kept': 15, 'hit_cap': False, 'samples_silent': 5, 'samples_surplus': 0}, 'asked': [3]},
    {'parts': [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], [36, 37, 38, 39, 40, 41, 60, 61, 62, 63, 64, 65]], 'cost': {'rounds': 2, 'groups_generated': 11, 'groups_kept': 4, 'groups_silent': 7, 'groups_surplus': 0, 'samples_generated': 66, 'samples_kept': 24, 'hit_cap': False, 'samples_silent': 42, 'samples_surplus': 0}, 'asked': [4, 2]},
    {'parts': [[0, 1, 2, 3], [4, 5, 8, 9, 10], [11, 12, 13, 20, 21, 22, 23, 24, 25]], 'cost': {'rounds': 3, 'groups_generated': 10, 'groups_kept': 5, 'groups_silent': 5, 'groups_surplus': 0, 'samples_generated': 39, 'samples_kept': 18, 'hit_cap': False, 'samples_silent': 21, 'samples_surplus': 0}, 'asked': [5, 4, 2]},
    {'parts': [[0, 1, 2, 3, 7, 8, 9, 10, 11]], 'cost': {'rounds': 1, 'groups_generated': 4, 'groups_kept': 3, 'groups_silent': 1, 'groups_surplus': 0, 'samples_generated': 12, 'samples_kept': 9, 'hit_cap': False, 'samples_silent': 3, 'samples_surplus': 0}, 'asked': [3]},
    {'parts': [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], [30, 31, 32, 33, 34, 35]], 'cost': {'rounds': 2, 'groups_generated': 9, 'groups_kept': 3, 'groups_silent': 4, 'groups_surplus': 2, 'samples_generated': 54, 'samples_kept': 18, 'hit_cap': False, 'samples_silent': 24, 'samples_surplus': 12}, 'asked': [3, 1]},
    {'parts': [[15, 16, 17, 18, 19], [20, 21, 22, 23, 24, 30, 31, 32, 33, 34, 40, 41, 42, 43, 44]], 'cost': {'rounds': 2, 'groups_generated': 10, 'groups_kept': 4, 'groups_silent': 6, 'groups_surplus': 0, 'samples_generated': 50, 'samples_kept': 20, 'hit_cap': False, 'samples_silent': 30, 'samples_surplus': 0}, 'asked': [4, 3]},
    {'parts': [], 'cost': {'rounds': 0, 'groups_generated': 0, 'groups_kept': 0, 'groups_silent': 0, 'groups_surplus': 0, 'samples_generated': 0, 'samples_kept': 0, 'hit_cap': True, 'samples_silent': 0, 'samples_surplus': 0}, 'asked': [4]},
    {'parts': [], 'cost': {'rounds': 2, 'groups_generated': 3, 'groups_kept': 0, 'groups_silent': 3, 'groups_surplus': 0, 'samples_generated': 13, 'samples_kept': 0, 'hit_cap': True, 'samples_silent': 13, 'samples_surplus': 0}, 'asked': [4, 4, 4]},
    {'parts': [], 'cost': {'rounds': 0, 'groups_generated': 0, 'groups_kept': 0, 'groups_silent': 0, 'groups_surplus': 0, 'samples_generated': 0, 'samples_kept': 0, 'hit_cap': True, 'samples_silent': 0, 'samples_surplus': 0}, 'asked': [5]},
    {'parts': [[0, 1, 2, 3], [12, 13, 14, 15, 20, 21, 22, 23]], 'cost': {'rounds': 4, 'groups_generated': 9, 'groups_kept': 3, 'groups_silent': 6, 'groups_surplus': 0, 'samples_generated': 36, 'samples_kept': 12, 'hit_cap': True, 'samples_silent': 24, 'samples_surplus': 0}, 'asked': [4, 3, 1, 1]},
    {'parts': [[0, 1], [10, 11], [12, 13]], 'cost': {'rounds': 3, 'groups_generated': 7, 'groups_kept': 3, 'groups_silent': 4, 'groups_surplus': 0, 'samples_generated': 14, 'samples_kept': 6, 'hit_cap': False, 'samples_silent': 8, 'samples_surplus': 0}, 'asked': [3, 2, 1]},
    {'parts': [[0, 1, 2, 3, 4], [9, 10, 11, 12], [21, 22, 23, 24, 25, 26, 27]], 'cost': {'rounds': 3, 'groups_generated': 9, 'groups_kept': 4, 'groups_silent': 5, 'groups_surplus': 0, 'samples_generated': 37, 'samples_kept': 16, 'hit_cap': False, 'samples_silent': 21, 'samples_surplus': 0}, 'asked': [4, 3, 2]},
    {'parts': [[0, 1]], 'cost': {'rounds': 2, 'groups_generated': 2, 'groups_kept': 1, 'groups_silent': 1, 'groups_surplus': 0, 'samples_generated': 4, 'samples_kept': 2, 'hit_cap': True, 'samples_silent': 2, 'samples_surplus': 0}, 'asked': [5, 4]},
    {'parts': [[3, 4, 5]], 'cost': {'rounds': 1, 'groups_generated': 2, 'groups_kept': 1, 'groups_silent': 1, 'groups_surplus': 0, 'samples_generated': 6, 'samples_kept': 3, 'hit_cap': True, 'samples_silent': 3, 'samples_surplus': 0}, 'asked': [5, 4]},
    {'parts': [], 'cost': {'rounds': 1, 'groups_generated': 1, 'groups_kept': 0, 'groups_silent': 1, 'groups_surplus': 0, 'samples_generated': 2, 'samples_kept': 0, 'hit_cap': True, 'samples_silent': 2, 'samples_surplus': 0}, 'asked': [2]},
    {'parts': [[0, 1, 2, 3, 4]], 'cost': {'rounds': 1, 'groups_generated': 2, 'groups_kept': 1, 'groups_silent': 0, 'groups_surplus': 1, 'samples_generated': 10, 'samples_kept': 5, 'hit_cap': False, 'samples_silent': 0, 'samples_surplus': 5}, 'asked': [1]},
    {'parts': [[12, 13, 14, 15, 16, 17], [21, 22, 23, 24, 25, 26, 33, 34, 35]], 'cost': {'rounds': 2, 'groups_generated': 12, 'groups_kept': 5, 'groups_silent': 7, 'groups_surplus': 0, 'samples_generated': 36, 'samples_kept': 15, 'hit_cap': False, 'samples_silent': 21, 'samples_surplus': 0}, 'asked': [5, 3]},
    {'parts': [], 'cost': {'rounds': 0, 'groups_generated': 0, 'groups_kept': 0, 'groups_silent': 0, 'groups_surplus': 0, 'samples_generated': 0, 'samples_kept': 0, 'hit_cap': True, 'samples_silent': 0, 'samples_surplus': 0}, 'asked': [2]},
    {'parts': [[0, 1, 2, 3, 4, 5]], 'cost': {'rounds': 1, 'groups_generated': 5, 'groups_kept': 3, 'groups_silent': 2, 'groups_surplus': 0, 'samples_generated': 10, 'samples_kept': 6, 'hit_cap': True, 'samples_silent': 4, 'samples_surplus': 0}, 'asked': [4]},
]
EXPECTED_CONTROLLED: dict = {
    'dapo_1_try': {'groups_drawn': [14, 14, 14, 14], 'groups_kept': [7, 5, 3, 5], 'silent_measured': [0.5, 0.6428571428571429, 0.7857142857142857, 0.6428571428571429], 'p_final': [0.0, 0.03698372578594555, 0.0750610274808449, 0.10000000000000002, 0.33108504374621767, 0.4007039460657801, 0.7176860974700958, 0.7475419937006631, 0.8324094593615584, 0.9178683805451671, 0.9593378385913824, 0.9699999999999999, 1.0, 0.7809977921982454], 'gain_nonzero': [[0, 0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1], [0, 1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1], [0, 0, 1, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 1]]},
    'dapo_2_tries': {'groups_drawn': [25, 23, 23, 25, 25], 'groups_kept': [6, 9, 7, 7, 4], 'silent_measured': [0.7857142857142857, 0.6428571428571429, 0.6428571428571429, 0.7857142857142857, 0.7857142857142857], 'p_final': [0.0, 0.03, 0.062459786435131885, 0.2219367244350188, 0.3364426504507703, 0.6363303841237472, 0.7196667213480911, 0.8266184048702203, 0.8902601484060271, 0.9480601365665698, 0.960080079591657, 0.9699999999999999, 1.0, 0.829766937634148], 'gain_nonzero': [[0, 0, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1], [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1], [0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1], [0, 0, 0, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 1], [0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]]},
    'dapo_4_tries': {'groups_drawn': [27, 31, 30, 38, 36, 36], 'groups_kept': [11, 11, 12, 8, 8, 9], 'silent_measured': [0.5, 0.5, 0.5, 0.6428571428571429, 0.5714285714285714, 0.6428571428571429], 'p_final': [0.0, 0.055904648387309575, 0.13842736996749125, 0.30339157095468244, 0.4865625848921233, 0.6857835221841415, 0.7912591083434362, 0.8827318479486128, 0.9243042841971483, 0.9468608036724396, 0.978341575835899, 0.984103275156879, 1.0, 0.8504324510522078], 'gain_nonzero': [[0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1], [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1], [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1], [0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 1], [0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1], [0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 1]]},
    'dapo_many_tries': {'groups_drawn': [142, 140, 129, 119, 149], 'groups_kept': [11, 12, 11, 11, 11], 'silent_measured': [0.7142857142857143, 0.8571428571428571, 0.7857142857142857, 0.6428571428571429, 0.7857142857142857], 'p_final': [0.0, 0.09743117733449032, 0.15519296277800051, 0.27944332428251545, 0.46597905827326364, 0.6527072868392185, 0.7772998611746911, 0.8663470667275142, 0.9331612093213913, 0.9691482637302833, 0.9757416977817458, 0.9856010829099389, 1.0, 0.8396283080998569], 'gain_nonzero': [[0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1], [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1], [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1], [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1], [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1]]},
    'grpo': {'groups_drawn': [14, 14, 14, 14], 'groups_kept': [5, 3, 7, 8], 'silent_measured': [0.6428571428571429, 0.7857142857142857, 0.5, 0.42857142857142855], 'p_final': [0.0, 0.03698372578594555, 0.06134509806715124, 0.14626361652671735, 0.32370969714263986, 0.5696638602666579, 0.7176860974700958, 0.7411687275716302, 0.864455603439168, 0.9178683805451671, 0.9593378385913824, 0.9699999999999999, 1.0, 0.7120712879653152], 'gain_nonzero': [[0, 0, 0, 0, 1, 1, 1, 0, 1, 0, 0, 0, 0, 1], [0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0], [0, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 1]]},
}
# fmt: on


@pytest.mark.parametrize("name", sorted(allocation_scenarios()))
def test_dapo_allocation_is_unchanged(name: str) -> None:
    assert allocation_outcome(*allocation_scenarios()[name]) == EXPECTED_ALLOCATIONS[name]


def test_dapo_allocation_is_unchanged_on_random_cases() -> None:
    assert [allocation_outcome(*case) for case in random_allocation_cases()] == EXPECTED_RANDOM_ALLOCATIONS


@pytest.mark.parametrize("name", sorted(sampler_scenarios()))
def test_dynamic_sampler_is_unchanged(name: str) -> None:
    assert sampler_outcome(*sampler_scenarios()[name]) == EXPECTED_SAMPLER[name]


def test_dynamic_sampler_is_unchanged_on_random_cases() -> None:
    assert [sampler_outcome(*case) for case in random_sampler_cases()] == EXPECTED_RANDOM_SAMPLER


@pytest.mark.parametrize("name", sorted(controlled_scenarios()))
def test_controlled_redraw_is_unchanged(name: str) -> None:
    got, expected = controlled_outcome(*controlled_scenarios()[name]), EXPECTED_CONTROLLED[name]
    for key in ("groups_drawn", "groups_kept", "silent_measured", "gain_nonzero"):
        assert got[key] == expected[key], key
    np.testing.assert_allclose(got["p_final"], expected["p_final"], rtol=1e-12, atol=0)


def test_the_rule_and_the_controlled_run_refill_through_the_sampler(monkeypatch) -> None:
    """The refill loop exists once: the rule "dapo" (and GRESO through it) and the controlled run's
    redraw run their rounds through ``DynamicSampler.fill``, as the trainer's uniform path does."""
    calls = []
    fill = DynamicSampler.fill

    def counted(self, draw):
        calls.append(self.num_groups)
        return fill(self, draw)

    monkeypatch.setattr(DynamicSampler, "fill", counted)
    allocation_outcome(*allocation_scenarios()["round_prompts"])
    allocation_outcome(*allocation_scenarios()["greso"])
    assert calls == [3, 5]
    controlled_outcome(*controlled_scenarios()["dapo_4_tries"])
    assert len(calls) == 2 + 6  # one refill a step, each for the step's silent groups
    controlled_outcome(*controlled_scenarios()["grpo"])
    assert len(calls) == 8  # GRPO keeps its silent groups: no refill
