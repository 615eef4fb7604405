"""Allocation rules (Part V): hand-computed cases per rule, the budget as a hard ceiling, the shared
estimator's memory, and bad input refused with a one-line message."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stddial_book.rl.allocation import RULES, allocate, bernoulli_draw, plan, plan_for_rates, record_allocation
from stddial_book.rl.allocation_adaptive import DynamicSampling, ReinforceAda, SpeedScreening
from stddial_book.rl.allocation_rules import DialAllocation, GresoSkip, KnapsackAllocation, UniformGroups
from stddial_book.rl.allocation_values import (
    dial_signal,
    greso_skip_probability,
    knapsack_value,
    signal_table,
    solve_knapsack,
)
from stddial_book.rl.pool_state import (
    ALL_CORRECT,
    ALL_WRONG,
    MIXED,
    NOT_SEEN,
    new_pool_state,
    posterior_mean,
    posterior_variance,
    record,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def scripted(*rounds):
    """A ``draw`` that answers its n-th call with ``rounds[n]`` (whatever the prompts), logging calls."""
    calls = []

    def draw(ids, sizes):
        calls.append((ids.tolist(), sizes.tolist()))
        answer = np.asarray(rounds[len(calls) - 1])
        assert answer.shape == ids.shape, (answer, ids)
        return answer

    draw.calls = calls
    return draw


# --- the shared history and estimator -------------------------------------------------------------


def test_record_counts_streaks_and_outcomes():
    state = new_pool_state(3)
    record(state, [0, 1], [0, 4], [4, 4])
    record(state, [0, 2], [0, 2], [4, 4])
    record(state, [0, 1], [1, 4], [4, 4])
    assert state.visits.tolist() == [3, 2, 1]
    assert state.samples.tolist() == [12, 8, 4] and state.successes.tolist() == [1, 8, 2]
    assert state.silent_streak.tolist() == [0, 2, 0]  # prompt 0: silent, silent, then mixed
    assert state.last_outcome.tolist() == [MIXED, ALL_CORRECT, MIXED]
    assert new_pool_state(2).last_outcome.tolist() == [NOT_SEEN] * 2 and ALL_WRONG == 0


def test_posterior_is_the_beta_of_prior_plus_counts():
    state = record(new_pool_state(1, prior=(2, 3)), [0], [3], [4])
    a, b = 2 + 3, 3 + 1
    assert posterior_mean(state)[0] == pytest.approx(a / (a + b))
    assert posterior_variance(state)[0] == pytest.approx(a * b / ((a + b) ** 2 * (a + b + 1)))


def test_decay_weighs_a_visit_t_visits_ago_by_decay_to_the_t():
    state = new_pool_state(1, decay=0.5)
    record(state, [0], [3], [4])
    record(state, [0], [1], [4])
    # successes 0.5·3 + 1 = 2.5, failures 0.5·1 + 3 = 3.5, prior (1, 1): mean 3.5 / 8
    assert posterior_mean(state)[0] == pytest.approx(3.5 / 8)


def test_forgetting_tracks_a_changed_pass_rate_faster():
    """A prompt solved 7 of 8 times for 20 visits, then 1 of 8 for 8 visits: with decay 0.7 the
    estimate has moved most of the way down (about 0.19); with decay 1 it is still above 0.6."""
    states = {decay: new_pool_state(1, decay=decay) for decay in (1.0, 0.7)}
    for state in states.values():
        for _ in range(20):
            record(state, [0], [7], [8])
        for _ in range(8):
            record(state, [0], [1], [8])
    remember, forget = (posterior_mean(states[d])[0] for d in (1.0, 0.7))
    assert forget < 0.25 and remember > 0.6
    assert posterior_variance(states[0.7])[0] > posterior_variance(states[1.0])[0]  # the price: a wider posterior


def test_record_allocation_merges_a_prompts_rounds_into_one_visit():
    state = new_pool_state(4)
    rule = SpeedScreening(screen_size=2, continue_size=3, round_prompts=2)
    result = allocate(rule, state, 7, scripted([1, 0], [2]), rng=0)
    record_allocation(state, result)
    assert state.visits.sum() == 2 and state.samples.sum() == result.generated == 7
    assert sorted(state.samples[state.samples > 0].tolist()) == [2, 5]


# --- values and solvers -----------------------------------------------------------------------------


def test_knapsack_value_by_hand():
    assert knapsack_value(0.5, 4) == pytest.approx((1 - 1 / 16 - 1 / 16) * 0.5 * 0.25)
    assert knapsack_value(0.25, 2) == pytest.approx(0.375 * 0.25 * 0.75**2)
    assert knapsack_value([0.0, 1.0], 8).tolist() == [0.0, 0.0] and knapsack_value(0.3, 0) == 0.0


def test_knapsack_three_prompts_budget_eight():
    """p = 0.5, 0.25, 1: by hand (4, 4) is worth 0.109375 + 0.0955810... = 0.20496, above (3, 5)
    0.20087, (5, 3) 0.19629, (2, 6) 0.17806, (6, 2) 0.17578 and (8, 0) 0.12451; p = 1 is worth nothing."""
    rule = KnapsackAllocation(solve_rates=[0.5, 0.25, 1.0])
    assert plan(rule, new_pool_state(3), 8).tolist() == [4, 4, 0]
    assert knapsack_value(0.5, 4) + knapsack_value(0.25, 4) == pytest.approx(0.2049560546875)


def test_knapsack_dp_matches_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(20):
        p, budget = rng.uniform(size=3), int(rng.integers(0, 13))
        table = signal_table(p, 6, "knapsack")
        options = [0, 2, 3, 4, 5, 6]
        best = max(
            sum(table[i, n] for i, n in enumerate(combo))
            for combo in itertools.product(options, repeat=3)
            if sum(combo) <= budget
        )
        sizes = solve_knapsack(table, budget, 2)
        assert sizes.sum() <= budget and set(sizes.tolist()) <= set(options)
        assert sum(table[i, n] for i, n in enumerate(sizes)) == pytest.approx(best)


def test_estimated_knapsack_reads_the_shared_estimator():
    state = new_pool_state(2)
    record(state, [0, 1], [4, 1], [8, 8])  # posterior means 5/10 and 2/10
    estimated = plan(KnapsackAllocation(), state, 8)
    oracle = plan(KnapsackAllocation(solve_rates=posterior_mean(state)), state, 8)
    assert estimated.tolist() == oracle.tolist() and estimated.sum() == 8


def test_dial_signal_is_the_two_closed_forms():
    assert dial_signal(0.5, 2, "grpo") == pytest.approx(0.25)  # E[σ̂ | p, 2] = p(1 − p)
    assert dial_signal(0.3, 3, "grpo") == pytest.approx(math.sqrt(2) * 0.21)  # k = 1, 2 both give sqrt(2)/3
    assert dial_signal(0.3, 5, "dr_grpo") == pytest.approx(0.21 * 4 / 5)


def test_dial_rule_by_hand_under_both_recipes():
    """p = 0.5, 0.1, budget 5. Dr. GRPO: open prompt 0 (0.25/2 per sample each for 2), grow it to 3
    (gain 0.25/6 = 0.0417 > opening prompt 1 at 0.09/4 = 0.0225), then open prompt 1 (0.0225 > the
    next gain 0.25/12): (3, 2). GRPO: the growth gains of prompt 0 are 0.1036, 0.0505, 0.0272 per
    sample against 0.045 for opening prompt 1 (which no longer fits after the second): (5, 0)."""
    rates = [0.5, 0.1]
    dr = plan(DialAllocation(recipe="dr_grpo", solve_rates=rates), new_pool_state(2), 5)
    grpo = plan(DialAllocation(recipe="grpo", solve_rates=rates), new_pool_state(2), 5)
    assert dr.tolist() == [3, 2] and grpo.tolist() == [5, 0]


def test_dial_rule_explores_uncertain_prompts():
    """A prompt seen 0 of 64 times has a confident, worthless estimate; a fresh one an uncertain one.
    With a floor of exploration the fresh prompt is opened even when the budget is tight."""
    state = new_pool_state(3)
    record(state, [0, 1], [32, 0], [64, 64])
    sizes = plan(DialAllocation(explore_fraction=0.5), state, 4, rng=1)
    assert sizes[2] >= 2 and sizes.sum() <= 4


# --- GRESO ----------------------------------------------------------------------------------------


def test_greso_skip_probability_after_zero_one_three_silent_visits():
    assert greso_skip_probability([0, 1, 3], 0.5).tolist() == [0.0, 0.5, 0.875]
    assert greso_skip_probability(7, 0.5) == pytest.approx(0.99)  # 0.5**7 < 0.01: the floor holds


def test_greso_reads_streak_and_last_outcome_from_the_state():
    state = new_pool_state(3)
    for _ in range(3):
        record(state, [0, 1], [4, 0], [4, 4])  # prompt 0 too easy, prompt 1 too hard, three times
    rule = GresoSkip(p_easy=0.5, p_hard=0.25)
    probs = rule.skip_probability(state, np.arange(3))
    assert probs.tolist() == pytest.approx([1 - 0.5**3, 1 - 0.25**3, 0.0])


def test_greso_never_starves_a_prompt():
    state = new_pool_state(1)
    for _ in range(50):
        record(state, [0], [0], [8])
    drawn = sum(plan(GresoSkip(), state, 8, rng=seed)[0] > 0 for seed in range(2000))
    assert 5 <= drawn <= 45  # about 1% of 2000


# --- uniform, DAPO, SPEED, Reinforce-Ada ----------------------------------------------------------


def test_uniform_gives_g_to_what_the_budget_pays_for():
    sizes = plan(UniformGroups(group_size=8), new_pool_state(10), 20, rng=0)
    assert sorted(sizes.tolist()) == [0] * 8 + [8, 8]
    assert plan(UniformGroups(group_size=4, batch_prompts=3), new_pool_state(10), 100).sum() == 12


def test_dapo_counts_on_a_fixed_draw_sequence():
    rule = DynamicSampling(group_size=4, batch_prompts=3, max_rounds=3)
    draw = scripted([0, 2, 4], [1, 0], [3])
    result = allocate(rule, new_pool_state(10), 100, draw, rng=0)
    assert [len(ids) for ids, _ in draw.calls] == [3, 2, 1]  # each round asks for what is missing
    assert (result.generated, result.kept, result.discarded_silent, result.discarded_surplus) == (24, 12, 12, 0)
    assert result.num_correct.tolist() == [2, 1, 3] and result.rounds == 3


def test_dapo_fixed_rounds_drop_surplus_and_stop_at_the_caps():
    fixed = DynamicSampling(group_size=4, batch_prompts=3, round_prompts=4)
    result = allocate(fixed, new_pool_state(10), 100, scripted([1, 2, 3, 1]), rng=0)
    assert (result.generated, result.kept, result.discarded_surplus) == (16, 12, 4)
    capped = DynamicSampling(group_size=4, batch_prompts=3, max_rounds=2)
    result = allocate(capped, new_pool_state(10), 100, scripted([0, 2, 4], [1, 0]), rng=0)
    assert (result.generated, len(result.prompts)) == (20, 2)
    broke = allocate(DynamicSampling(group_size=4, batch_prompts=3), new_pool_state(10), 10, scripted([1, 1]), rng=0)
    assert broke.generated == 8  # the budget pays for two groups of 4


def test_speed_counts_on_a_fixed_draw_sequence():
    rule = SpeedScreening(screen_size=2, continue_size=3, round_prompts=3, batch_prompts=2)
    draw = scripted([1, 0, 2], [2], [1, 1, 0], [0])
    result = allocate(rule, new_pool_state(10), 100, draw, rng=0)
    assert result.group_sizes.tolist() == [5, 5] and result.num_correct.tolist() == [3, 1]
    assert (result.generated, result.kept, result.discarded_silent, result.discarded_surplus) == (18, 10, 6, 2)


def test_reinforce_ada_counts_on_a_fixed_draw_sequence():
    """Round 1: A 2/2, B 0/2; round 2: A 1/2 (now 3 right, 1 wrong: done), B 0/2; round 3: B 0/2.
    A keeps one right and one wrong (2 surplus); B never saw a success: 6 samples silent."""
    rule = ReinforceAda(round_size=2, max_rounds=3, final_size=2, batch_prompts=2)
    draw = scripted([2, 0], [1, 0], [0])
    result = allocate(rule, new_pool_state(10), 100, draw, rng=0)
    assert result.group_sizes.tolist() == [2] and result.num_correct.tolist() == [1]
    assert (result.generated, result.kept, result.discarded_silent, result.discarded_surplus) == (10, 2, 6, 2)


def test_plan_ahead_rules_are_one_round_through_allocate():
    sizes = plan(UniformGroups(group_size=4), new_pool_state(6), 12, rng=5)
    result = allocate(UniformGroups(group_size=4), new_pool_state(6), 12, scripted([0, 2, 4]), rng=5)
    assert result.rounds == 1 and result.prompts.tolist() == np.flatnonzero(sizes).tolist()
    assert result.kept == 12 and result.signal_samples == 4  # silent groups stay in the batch, without signal


# --- the budget is a ceiling, for every rule ----------------------------------------------------------


def _rule(name, rates):
    return RULES[name](solve_rates=rates) if name == "knapsack_oracle" else RULES[name]()


def test_every_rule_stays_within_budget():
    accepted = []

    @SETTINGS
    @given(
        rates=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40),
        budget=st.integers(0, 400),
        seed=st.integers(0, 2**16),
        history=st.integers(0, 3),
    )
    def check(rates, budget, seed, history):
        p = np.array(rates)
        state, draw = new_pool_state(p.size, decay=0.8), bernoulli_draw(p, seed)
        for step in range(history):
            record_allocation(state, allocate(RULES["uniform"](group_size=4), state, 64, draw, rng=seed + step))
        for name in RULES:
            rule = _rule(name, p)
            if hasattr(rule, "plan"):
                sizes = plan(rule, state, budget, rng=seed)
                assert sizes.sum() <= budget and np.all((sizes == 0) | (sizes >= 2))
            result = allocate(rule, state, budget, draw, rng=seed)
            assert result.generated <= budget
            assert result.generated == result.kept + result.discarded_silent + result.discarded_surplus
        accepted.append(1)

    check()
    assert len(accepted) >= 50


def test_plan_for_rates_plans_and_averages():
    rates = [0.5, 0.25, 1.0]
    assert plan_for_rates("knapsack_oracle", rates, 8).tolist() == [4, 4, 0]
    assert plan_for_rates("knapsack", rates, 8).tolist() == [4, 4, 0]  # known rates act as an oracle
    expected = plan_for_rates("dapo", [0.0, 0.5, 1.0], 24, group_size=4, batch_prompts=1, repeats=32)
    assert expected.dtype == np.float64 and expected.sum() <= 24
    assert set(RULES) >= {"uniform", "dapo", "greso", "knapsack", "speed", "reinforce_ada", "dial_grpo"}


# --- bad input --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: new_pool_state(0), ValueError, "num_prompts"),
        (lambda: new_pool_state(2, decay=0.0), ValueError, "decay must lie in (0, 1]"),
        (lambda: new_pool_state(2, prior=(0, 1)), ValueError, "prior_a must be positive"),
        (lambda: record(new_pool_state(2), [0], [5], [4]), ValueError, "num_correct <= group_sizes"),
        (lambda: record(new_pool_state(2), [0, 0], [1, 1], [4, 4]), ValueError, "repeats a prompt"),
        (lambda: record(new_pool_state(2), [2], [1], [4]), ValueError, "prompt_ids must lie in 0..1"),
        (lambda: plan(DynamicSampling(), new_pool_state(2), 8), TypeError, "call allocate"),
        (lambda: plan(UniformGroups(), new_pool_state(2), -1), ValueError, "budget must be at least 0"),
        (lambda: plan(UniformGroups(), new_pool_state(2), 8, candidates=[1, 1]), ValueError, "distinct"),
        (lambda: plan("uniform", new_pool_state(2), 8), TypeError, "RULES[name]"),
        (lambda: allocate(UniformGroups(2), new_pool_state(2), 8, lambda i, s: [1]), ValueError, "one whole count"),
        (lambda: allocate(UniformGroups(2), new_pool_state(2), 8, "draw"), TypeError, "draw must be a function"),
        (lambda: KnapsackAllocation(min_size=8, max_size=4), ValueError, "max_size (4)"),
        (lambda: plan(KnapsackAllocation(solve_rates=[0.5]), new_pool_state(2), 8), ValueError, "one pass rate"),
        (lambda: DialAllocation(recipe="dapo"), ValueError, "recipe must be one of"),
        (lambda: GresoSkip(p_easy=1.5), ValueError, "explore must lie in [0, 1]"),
        (lambda: UniformGroups(group_size=1), ValueError, "group_size must be at least 2"),
        (lambda: plan_for_rates("nope", [0.5], 8), ValueError, "rule_name must be one of"),
        (lambda: plan_for_rates("uniform", [1.5], 8), ValueError, "solve_rates must lie in [0, 1]"),
    ],
)
def test_bad_input_is_refused_in_one_line(call, error, words):
    with pytest.raises(error) as caught:
        call()
    message = str(caught.value)
    assert words in message and "\n" not in message


def test_knapsack_rl_window_rate_by_hand() -> None:
    """Knapsack RL's plug-in rate: the latest 16 rewards, the last visit alone when it drew more, the
    oldest visit in the window in proportion."""
    from stddial_book.rl.pool_state import new_pool_state, record

    state = new_pool_state(1)
    expected = [(3, 8, 3 / 8), (8, 8, 11 / 16), (0, 8, 5.5 / 16), (10, 20, 10 / 20), (1, 4, (1 + 12 / 20 * 10) / 16)]
    for k, g, rate in expected:
        record(state, [0], [k], [g])
        assert state.window_successes[0] / state.window_samples[0] == pytest.approx(rate)
    assert state.window_samples[0] == 16


def test_knapsack_as_its_paper_allocates_by_hand() -> None:
    """Fixed shares (G for a prompt without a valid rate, 2 for the others), the surplus over the mixed
    prompts' estimated need to the prompts at rate 0, and the knapsack's split of the rest: checked
    against every split by brute force."""
    from stddial_book.rl.allocation import RULES, plan
    from stddial_book.rl.allocation_values import knapsack_value
    from stddial_book.rl.pool_state import new_pool_state, record

    state = new_pool_state(6)
    record(state, [1, 2, 3, 4, 5], [0, 8, 4, 2, 1], [8, 8, 8, 8, 4])  # rates 0, 1, 1/2, 1/4; prompt 5 too few
    rule = RULES["knapsack_paper"]()
    sizes = plan(rule, state, 48, np.random.default_rng(0), np.arange(6))
    # fixed: 8 (unseen) + 2 + 2 + 2 + 2 + 8 (4 samples < 8: no valid rate) = 24; need ⌊3.32⌋ + ⌊8.004⌋ = 11
    assert sizes[[0, 2, 5]].tolist() == [8, 2, 8]
    assert sizes[1] == 2 + (24 - 11)  # the surplus to the prompt at rate 0
    value = [knapsack_value(0.5, 2 + k) + knapsack_value(0.25, 2 + 11 - k) for k in range(12)]
    best = int(np.argmax(value))
    assert sizes[[3, 4]].tolist() == [2 + best, 2 + 11 - best] and sizes.sum() == 48
    # no mixed prompt: what is left goes to the prompts at rate 0
    only_silent = plan(rule, state, 30, None, np.array([0, 1, 2]))
    assert only_silent.tolist() == [8, 2 + 18, 2, 0, 0, 0]
    # neither mixed nor at rate 0: an equal share of the budget each
    assert plan(rule, state, 30, None, np.array([0, 2, 5])).tolist() == [10, 0, 10, 0, 0, 10]
    # with rates given (measured), every one is valid
    oracle = plan(RULES["knapsack_paper"](solve_rates=[0.5] * 6), new_pool_state(6), 24, None, np.arange(6))
    assert oracle.sum() == 24 and oracle.min() >= 2
