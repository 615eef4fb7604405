"""Bad input gets a clear error or the right answer, never a silently wrong result (issue J).

Each case was a silent failure before: a wrong number, NaN, or an exception a user could not act on.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from stddial_book import DAPO, GRPO, group_advantages
from stddial_book.rl.configs import TrainConfig
from stddial_book.rl.evaluate import evaluate, model_solve_counts
from stddial_book.rl.losses import policy_loss
from stddial_book.rl.model import CharCodec, tiny_model
from stddial_book.rl.sft import sft
from stddial_book.rl.trainer import train
from stddial_book.theory import group_size as size_law
from stddial_book.theory import silent
from stddial_book.theory.recipes import as_recipe
from stddial_book.theory.silent import silent_probability, tries_needed


def test_tries_needed_near_zero_solve_rate() -> None:
    # p = 1e-17: 1 − p rounds to 1, the answer is about ln(1/δ)/p, not 2
    g = tries_needed(1e-17, 0.1)
    assert g == pytest.approx(math.log(10) / 1e-17, rel=1e-6)
    for p in (0.3, 1e-3, 0.999):
        n = tries_needed(p, 0.05)
        assert silent_probability(p, n) <= 0.05 < silent_probability(p, n - 1)


def test_silent_tolerance_is_relative_to_the_rewards_scale() -> None:
    tiny = group_advantages(np.array([1e-7, 0.0, 0.0, 0.0]), 4, GRPO)
    assert np.allclose(tiny, group_advantages(np.array([1.0, 0.0, 0.0, 0.0]), 4, GRPO))  # scale invariance
    rounding = group_advantages(np.array([0.1 + 0.2, 0.3, 0.3, 0.3]), 4, GRPO)
    assert np.array_equal(rounding, np.zeros(4))  # float rounding is still silent


def test_recipe_fields_are_type_checked_and_names_accepted() -> None:
    with pytest.raises(TypeError, match="scale_std must be True or False"):
        GRPO.replace(scale_std="False")
    with pytest.raises(TypeError, match="clip_low must be a number"):
        GRPO.replace(clip_low="0.2")
    assert as_recipe("Dr. GRPO").name == "Dr. GRPO"
    assert np.array_equal(group_advantages([1, 0, 0, 0], 4, "grpo"), group_advantages([1, 0, 0, 0], 4, GRPO))
    with pytest.raises(TypeError, match="preset name"):
        as_recipe(3)


def _loss_inputs():
    lp = torch.zeros(2, 3)
    return lp, lp.clone(), torch.ones(2), torch.ones(2, 3, dtype=torch.bool)


@pytest.mark.parametrize("which", ["old", "adv", "ref"])
def test_policy_loss_refuses_nan(which: str) -> None:
    lp, old, adv, mask = _loss_inputs()
    ref = None
    if which == "old":
        old[0, 1] = float("nan")
    elif which == "adv":
        adv[1] = float("nan")
    else:
        ref = torch.full((2, 3), float("nan"))
    with pytest.raises(ValueError, match="NaN"):
        policy_loss(lp, old, adv, mask, GRPO.replace(kl_coef=0.0), ref_logprobs=ref)


def test_policy_loss_step_counts_cannot_be_below_the_batch() -> None:
    lp, old, adv, mask = _loss_inputs()
    with pytest.raises(ValueError, match="step_num_tokens=1"):
        policy_loss(lp, old, adv, mask, DAPO, step_num_tokens=1)
    with pytest.raises(ValueError, match="step_num_sequences=1"):
        policy_loss(lp, old, adv, mask, GRPO.replace(kl_coef=0.0), step_num_sequences=1)
    # a larger count (the whole step) is what micro-batching passes: allowed
    assert float(policy_loss(lp, old, adv, mask, DAPO, step_num_tokens=12).loss) == pytest.approx(-0.5)


def test_decode_refuses_garbage() -> None:
    codec = CharCodec()
    for bad in ([-1], [len(codec.vocab)], [1.5]):
        with pytest.raises(ValueError, match="not in the vocabulary"):
            codec.decode(bad)


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 0.0, -1.0])
def test_train_config_temperature_must_be_finite_positive(value: float) -> None:
    with pytest.raises(ValueError, match="temperature must be a finite number"):
        TrainConfig(temperature=value)


def test_empty_problem_sets_are_refused(tmp_path) -> None:
    from stddial_book.rl.tasks import sample_problems

    model = tiny_model(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
    problems = sample_problems(8, digits=2, seed=0)
    with pytest.raises(ValueError, match="no problems"):
        evaluate(model, [], 6)
    with pytest.raises(ValueError, match="no held-out problems"):
        sft(model, problems, [])
    with pytest.raises(ValueError, match="no held-out problems but eval_every"):
        train(
            model,
            problems,
            [],
            TrainConfig(prompts_per_step=2, group_size=2, sample_budget=4, eval_every=1),
            tmp_path / "run",
        )


# --- the second audit (every public name of the numeric, task, model and analysis modules) -----
# Each case below was a silent failure before: a wrong number, NaN, a hang, or an error that does
# not say which argument is wrong (AttributeError, IndexError, ZeroDivisionError, a numpy or torch
# internal message, "max() arg is an empty sequence").

from stddial_book.corpora import dapo_fig3b as dapo_curve
from stddial_book.corpora import histograms, solve_tables
from stddial_book.experiments import statistics
from stddial_book.experiments.controlled import study as bernoulli
from stddial_book.experiments.testbed import logs, predictions
from stddial_book.rl import (
    gradcheck,
    model,
    rollout,
    runlog,
    sampling,
    tasks,
)
from stddial_book.theory import derivation, identity
from stddial_book.theory.recipes import DR_GRPO, recipe_key

_HIST = histograms.KHistogram(4, np.array([1, 2, 3, 2, 1]))
_PROBLEM = tasks.make_problem(12, 34, 2)
_CODEC = CharCodec()


def _never_returns(*_args):
    raise AssertionError("draw was called")


_RAISES = [
    # identity: recipe names and wrong types
    (lambda: size_law.large_group_gradient(0.5, None), TypeError, "preset name"),
    (
        lambda: silent.refill_weight(0.5, 4, DAPO, pool_silent_fraction="0.1"),
        TypeError,
        "pool_silent_fraction must be a number",
    ),
    (
        lambda: silent.refill_weight(0.5, 4, DAPO, redraw_tries=float("inf")),
        ValueError,
        "redraw_tries must be a whole number",
    ),
    (lambda: silent.tries_needed(0.5, "0.1"), TypeError, "delta must be a number"),
    (lambda: size_law.minimal_group_size([0.1], 0.5), TypeError, "tolerance must be a number"),
    (lambda: size_law.minimal_group_size(0.1, 0.5, max_group_size="1000"), TypeError, "max_group_size"),
    (lambda: silent.hypergeometric_pmf([1.5], 8, 4), ValueError, "whole numbers"),
    (lambda: silent.hypergeometric_pmf([-0.5], 8, 4), ValueError, "whole numbers"),
    (lambda: silent.hypergeometric_pmf([2], 8.5, 4), ValueError, "num_samples must be a whole number"),
    (lambda: silent.hypergeometric_pmf([2], float("nan"), 4), ValueError, "num_samples must be a whole number"),
    (lambda: silent.hypergeometric_pmf([], 8, 4), ValueError, "num_correct is empty"),
    (lambda: silent.hypergeometric_pmf([0], 2**63, 1), ValueError, "loses precision"),  # OverflowError; garbage below
    (lambda: silent.expected_group_std(0.5, 10**12 + 1), ValueError, "the largest G the binomial sum takes"),
    (lambda: silent.silent_probability([0.5, 0.4], [2, 3, 4]), ValueError, "solve_rate .* do not broadcast"),
    (lambda: identity.pass_rate(None), ValueError, "rewards must be numeric"),  # None became NaN
    (lambda: silent.silent_probability(0.5, "8"), ValueError, "group_size must be numeric"),  # "8" was parsed
    (lambda: silent.silent_probability(0.5, True), ValueError, "not booleans"),
    (lambda: recipe_key(None), TypeError, "recipe name must be a string"),
    (lambda: group_advantages([1.7e308, -1.7e308, -1.7e308, -1.7e308], 4, DR_GRPO), ValueError, "overflow"),
    # sampling
    (lambda: sampling.overlong_penalty([1, 9], float("nan"), 2), ValueError, "max_new_tokens must be a whole number"),
    (lambda: sampling.overlong_penalty([1, 9], "10", 2), TypeError, "max_new_tokens must be a whole number"),
    (lambda: sampling.overlong_penalty([1.5], 10, 2), ValueError, "whole token counts"),
    (lambda: sampling.DynamicSampler(num_groups=1.5, group_size=2), ValueError, "num_groups must be a whole number"),
    (lambda: sampling.DynamicSampler(num_groups=2, group_size=2, max_rounds=float("inf")), ValueError, "max_rounds"),
    (lambda: sampling.DynamicSampler(2, 2).fill(lambda i, n: None), TypeError, "pair"),
    (
        lambda: sampling.DynamicSampler(2, 2).fill(lambda i, n: (np.arange(1), np.array([1.0, 0.0] * n))),
        ValueError,
        "rows",
    ),
    (
        lambda: sampling.DynamicSampler(2, 2).fill(lambda i, n: ([0, 1, 2, 3], np.array([1.0, 0.0] * n))),
        TypeError,
        "fancy indexing",
    ),
    (lambda: sampling.DynamicSampler(2, 2).fill(None), TypeError, "draw must be a function"),
    # tasks
    (lambda: tasks.count_carries(-1, 2), ValueError, "a must be >= 0"),  # looped forever
    (lambda: tasks.count_carries(1.5, 2), TypeError, "a must be a whole number"),
    (lambda: tasks.make_problem(1.5, 2, 1), TypeError, "operand a must be a whole number"),
    (lambda: tasks.Problem(12, 34, 2, 5), ValueError, "carries=5 but 12 \\+ 34 has 0"),
    (lambda: tasks.Problem(-1, 2, 1, 0), ValueError, "operands must lie"),
    (
        lambda: tasks.sample_problems(10**8, 4, carries=4),
        ValueError,
        "only 7486875 distinct problems",
    ),  # looped forever
    (lambda: tasks.sample_problems(7_486_876, 4, carries=4), ValueError, "only 7486875 distinct problems"),
    (lambda: tasks.sample_problems(1.5, 2), ValueError, "num must be a whole number"),
    (lambda: tasks.sample_problems(3, 2, carries=1.5), ValueError, "carries must be a whole number"),
    (lambda: tasks.sample_problems(3, 2, seed=-1), ValueError, "seed must be at least 0"),
    (lambda: tasks.sample_problems(3, 2, exclude=[1, 2]), TypeError, "exclude must hold Problem"),
    (lambda: tasks.reward(b"64<eos>", _PROBLEM), TypeError, "completion must be text"),  # was 0.0
    (lambda: tasks.reward("64<eos>", None), TypeError, "problem must be a Problem"),
    (lambda: tasks.rewards("64<eos>", [_PROBLEM] * 7), TypeError, "completions must be a list"),  # was seven zeros
    # solve_rates
    (lambda: histograms.SolveCounts("t", [float("nan")], 4), ValueError, "NaN"),  # was -9223372036854775808
    (lambda: histograms.SolveCounts("t", [1.5], 4), ValueError, "whole numbers"),  # was 1
    (lambda: histograms.SolveCounts("t", [1], float("nan")), ValueError, "num_rollouts must be a whole number"),
    (lambda: histograms.SolveCounts("t", [1], 4, None), TypeError, "labels must be a dict"),
    (lambda: histograms.KHistogram(2, np.array([1.5, 0.5, 1.0])), ValueError, "whole numbers"),
    (
        lambda: histograms.KHistogram(0, np.array([5])),
        ValueError,
        "num_rollouts must be at least 1",
    ),  # solve_rates were NaN
    (lambda: histograms.KHistogram("2", [1, 1, 1]), TypeError, "num_rollouts must be a whole number"),
    (lambda: histograms.SolveCounts("t", [1, 2, 3], 4).histogram(np.array([0, 0, 0])), ValueError, "boolean mask"),
    (lambda: histograms.SolveCounts("t", [1, 2, 3], 4).histogram(np.array([True])), ValueError, "boolean mask"),
    (lambda: histograms.silent_fraction(None, 4), TypeError, "hist must be a KHistogram"),
    (lambda: histograms.silent_fraction(_HIST, float("inf")), ValueError, "NaN or infinite"),
    (lambda: histograms.silent_fraction(_HIST, [], "hypergeometric"), ValueError, "group_sizes is empty"),
    (lambda: histograms.band_shares(_HIST, np.ones(3)), ValueError, "one entry per k"),
    (lambda: histograms.decile_shares(_HIST, np.full(5, np.nan)), ValueError, "NaN"),
    (lambda: histograms.decile_of([1.5, -0.5]), ValueError, r"\[0, 1\]"),  # were deciles 9 and 0
    (lambda: histograms.decile_of("abc"), ValueError, "must be numeric"),
    (lambda: solve_tables.union_of_deepscaler("deepscaler.parquet"), TypeError, "paths must be a list"),
    (lambda: model_solve_counts(None, [_PROBLEM], 2, 4, batch_prompts=0), ValueError, "batch_prompts"),
    # losses
    (
        lambda: policy_loss(
            np.zeros((2, 3)), torch.zeros(2, 3), torch.ones(2), torch.ones(2, 3, dtype=torch.bool), DAPO
        ),
        TypeError,
        "logprobs must be a torch tensor",
    ),
    (
        lambda: policy_loss(torch.zeros(2, 3), None, torch.ones(2), torch.ones(2, 3, dtype=torch.bool), DAPO),
        TypeError,
        "old_logprobs must be a torch tensor",
    ),
    (
        lambda: policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2), torch.full((2, 3), 0.5), DAPO),
        ValueError,
        "mask must hold booleans",
    ),
    (
        lambda: policy_loss(
            torch.zeros(2, 3),
            torch.zeros(2, 3),
            torch.ones(2, dtype=torch.bool),
            torch.ones(2, 3, dtype=torch.bool),
            DAPO,
        ),
        TypeError,
        "correctness flags",
    ),
    (
        lambda: policy_loss(
            torch.zeros(2, 3),
            torch.zeros(2, 3),
            torch.ones(2),
            torch.ones(2, 3, dtype=torch.bool),
            DAPO,
            truncated=torch.tensor([0.5, 0.0]),
        ),
        ValueError,
        "truncated must hold booleans",
    ),
    (
        lambda: policy_loss(
            torch.zeros(2, 3),
            torch.zeros(2, 3),
            torch.ones(2),
            torch.ones(2, 3, dtype=torch.bool),
            DR_GRPO,
            max_new_tokens=float("nan"),
        ),
        ValueError,
        "max_new_tokens must be a whole number",
    ),  # NaN loss
    (
        lambda: policy_loss(
            torch.zeros(2, 3),
            torch.zeros(2, 3),
            torch.ones(2),
            torch.ones(2, 3, dtype=torch.bool),
            DAPO,
            step_num_tokens=float("nan"),
        ),
        ValueError,
        "step_num_tokens must be a whole number",
    ),  # NaN loss
    (
        lambda: policy_loss(
            torch.zeros(2, 3),
            torch.zeros(2, 3),
            torch.ones(2),
            torch.ones(2, 3, dtype=torch.bool),
            DAPO,
            entropy=torch.full((2, 3), float("nan")),
        ),
        ValueError,
        "entropy contains NaN",
    ),
    (
        lambda: policy_loss(
            torch.zeros(2, 3),
            torch.zeros(2, 3),
            torch.ones(2),
            torch.ones(2, 3, dtype=torch.bool),
            DAPO,
            truncated=np.array([True, False]),
        ),
        TypeError,
        "truncated must be a torch tensor",
    ),
    (lambda: k3_kl_call(torch.zeros(2), torch.zeros(3)), ValueError, "ref_logprobs has shape"),
    (lambda: clip_metrics_call(torch.ones(2), torch.ones(3)), ValueError, "advantages must have the ratio's shape"),
    # model
    (lambda: _CODEC.encode(None), TypeError, "text must be a str"),
    (lambda: _CODEC.decode([float("nan")]), ValueError, "not in the vocabulary"),
    (lambda: _CODEC.decode(torch.tensor([[1, 2]])), ValueError, "1-D"),
    (lambda: _CODEC.decode(torch.tensor([True, False])), TypeError, "booleans"),
    (lambda: _CODEC.decode(None), TypeError, "ids must be a sequence"),
    (lambda: CharCodec(("a",)), ValueError, "vocab lacks"),  # was KeyError
    (lambda: model.make_tokenizer(()), ValueError, "vocab lacks"),  # was an empty tokenizer
    (lambda: tiny_model(hidden_size=0), ValueError, "hidden_size must be at least 1"),  # was ZeroDivisionError
    (lambda: tiny_model(num_heads=0), ValueError, "num_heads must be at least 1"),
    (lambda: tiny_model(vocab_size=0), ValueError, "vocab_size must be at least 2"),  # was IndexError
    (lambda: tiny_model(dtype="float64"), TypeError, "dtype must be None or a floating torch dtype"),
    (lambda: tiny_model(seed="a"), TypeError, "seed must be a whole number"),
    (lambda: model.model_for_profile("full"), TypeError, "profile must be"),
    (lambda: model.save(None, None, "unused"), TypeError, "model must be a transformers model"),
    # bernoulli
    (lambda: bernoulli.sampled_gradients([0.5, float("nan")], 4, GRPO, np.random.default_rng(0)), ValueError, "NaN"),
    (lambda: bernoulli.sampled_gradients([0.5], 4, GRPO, None), TypeError, "rng must be a numpy Generator"),
    (lambda: bernoulli.sampled_gradients([0.5], 4, None, np.random.default_rng(0)), TypeError, "preset name"),
    (lambda: bernoulli.monte_carlo_gradient(None, 4, GRPO, 10), ValueError, "must be numeric"),  # was NaN
    (lambda: bernoulli.monte_carlo_gradient([0.5], 4, GRPO, 2.5), ValueError, "num_groups must be a whole number"),
    (lambda: bernoulli.ControlledRun(steps=1.5), ValueError, "steps must be a whole number"),
    (lambda: bernoulli.ControlledRun(redraw_tries=float("inf")), ValueError, "redraw_tries must be a whole number"),
    (lambda: bernoulli.ControlledRun(clip=None), TypeError, "clip must be a pair"),
    (
        lambda: bernoulli.initial_solve_rates([0.5, 0.4], [5], bernoulli.ControlledRun(), np.random.default_rng(0)),
        ValueError,
        "one count per solve rate",
    ),  # counts broadcast silently
    (
        lambda: bernoulli.initial_solve_rates(
            [float("nan"), 0.4], [5, 5], bernoulli.ControlledRun(), np.random.default_rng(0)
        ),
        ValueError,
        "NaN",
    ),
    (
        lambda: bernoulli.controlled_run(
            [0.5] * 4, GRPO, bernoulli.ControlledRun(num_prompts=4, steps=1), lr=float("inf")
        ),
        ValueError,
        "lr must be a finite number",
    ),  # NaN solve rates
    (lambda: bernoulli.controlled_run([0.5] * 4, GRPO, None), TypeError, "config must be a ControlledRun"),
    (
        lambda: bernoulli.matched_lr([1.0] * 4, GRPO, DR_GRPO),
        ValueError,
        "no learning rate matches",
    ),  # ZeroDivisionError
    (lambda: bernoulli.quartile_gap({}, "grpo", "dapo"), ValueError, "study has no run"),
    (lambda: bernoulli.silent_r2(None), TypeError, "result must be what controlled_run returns"),
    (
        lambda: bernoulli.quartile_curve(
            bernoulli.controlled_run([0.3, 0.6], GRPO, bernoulli.ControlledRun(num_prompts=4, steps=1))
        ),
        ValueError,
        "hardest quartile is empty",
    ),  # was NaN
    # analysis
    (lambda: statistics.seed_summary(None), ValueError, "must be numeric"),  # was NaN
    (lambda: statistics.seed_summary([float("nan"), 1.0]), ValueError, "NaN"),
    (lambda: statistics.seed_summary([[1, 2], [3, 4]]), ValueError, "one number per seed"),
    (lambda: logs.extreme_mass_share([], 0), ValueError, "group_size must be at least 2"),  # "math domain error"
    (lambda: logs.final_eval(None), TypeError, "records must be the list"),
    (lambda: logs.final_eval([1]), TypeError, "one dict per logged step"),
    (lambda: predictions.initial_bands([{"step": 0, "pool/k": [1, 2, 3], "pool/n": 4}], 0), ValueError, "num_bands"),
    (
        lambda: predictions.band_trajectories([{"step": 0, "pool/k": [1, 2, 3], "pool/n": 4}], 10),
        ValueError,
        "exceeds the 3 pool prompts",
    ),  # NaN bands
    (lambda: predictions.band_trajectories([{"step": 0, "pool/k": [0, 0], "pool/n": 0}], 2), ValueError, "pool/n is 0"),
    (
        lambda: predictions.silent_check([{"step": 0, "pool/k": [1, 2, 3], "pool/n": 4}], 4),
        ValueError,
        "no training step",
    ),
    (lambda: predictions.silent_fit([]), ValueError, "non-empty list of silent_check"),
    (lambda: logs.identity_numbers({}), ValueError, "identity_during_training"),
    (lambda: predictions.hypergeometric_expectation([1, 2], 4, 2, [1.0, 2.0]), ValueError, "one value per j"),
    (lambda: predictions.hypergeometric_expectation([1, 2], 4, 2, [1.0, np.nan, 0.0]), ValueError, "NaN"),
    (
        lambda: statistics.comparison_screen({"m": {"a": [1, 2], "b": [2, 3]}}, level=0),
        ValueError,
        "level is a family-wise",
    ),
    (
        lambda: statistics.comparison_screen({"m": {"a": [1, 2], "b": [2, 3]}, "n": {"a": [1, 2]}}),
        ValueError,
        "same recipes",
    ),
    (lambda: predictions.prediction_numbers({}, "x"), ValueError, "no recipe 'x'"),
    (
        lambda: logs.gradient_scale([{"groups/weight": [0.5]}], [{"groups/weight": [0.5]}], 10),
        ValueError,
        "no completions/mean_length",
    ),  # NaN scale
    (
        lambda: logs.gradient_scale([{"groups/weight": [0.5]}], [{"groups/weight": [0.0]}], 10),
        ValueError,
        "all have weight 0",
    ),  # ZeroDivisionError
    (lambda: runlog.recorded_runs(None), TypeError, "profile must be a profile name"),
    # dapo_curve
    (lambda: dapo_curve.sharpened_moment([np.nan, 0.5], [1, 1], 1.0, 32), ValueError, "NaN"),  # NaN was read as p = 0
    (lambda: dapo_curve.sharpened_moment([1.5, 0.5], [1, 1], 1.0, 32), ValueError, r"\[0, 1\]"),
    (lambda: dapo_curve.sharpened_moment([0.5, 0.6], [1], 1.0, 32), ValueError, "one entry per solve rate"),
    (lambda: dapo_curve.sharpened_moment([0.5], [1], -1.0, 32), ValueError, "inverse_temperature"),
    (lambda: dapo_curve.sharpened_moment([0.5], [1], 1.0, "32"), TypeError, "power must be a number"),
    # derivation
    (lambda: derivation.aggregation_claims(()), ValueError, "non-empty tuple"),  # "max() arg is an empty sequence"
    (lambda: derivation.aggregation_claims((0,)), ValueError, "each length must be at least 1"),
    (lambda: derivation.aggregation_claims((10**4,)), ValueError, "too large"),  # hung in SymPy
    (lambda: derivation.aggregation_claims((64,) * 64), ValueError, "score symbols"),  # took 10 s, (256,) * 16 more
    (lambda: derivation.explicit_group_term_claim(10**6, 1), ValueError, "too large"),  # hung in SymPy
    (lambda: derivation.explicit_group_term_claim(2.5, 1), ValueError, "group_size must be a whole number"),
    (
        lambda: derivation.expected_variance_sum_claim(0),
        ValueError,
        "group_size must be at least 1",
    ),  # 0/0 in the claim
    (lambda: derivation.variant_advantages([]), ValueError, "unknown variant"),
    (lambda: derivation.reward_moments(correction=2), ValueError, "correction must be 0"),  # was Bessel's silently
    (lambda: derivation.advantages("no"), TypeError, "scale_std must be True or False"),
    (lambda: derivation.Claim("x", "y", None, None), TypeError, "lhs must be a SymPy expression"),
    (lambda: GRPO.replace(std_correction=0j), ValueError, "std_correction must be 0"),  # 0j == 0: a complex ddof
    (lambda: identity.group_std([1.0, 0.0], 0j), ValueError, "correction must be 0"),
]


def k3_kl_call(logprobs, ref):
    from stddial_book.rl.losses import k3_kl

    return k3_kl(logprobs, ref)


def clip_metrics_call(ratio, advantages):
    from stddial_book.rl.losses import clip_metrics

    return clip_metrics(ratio, advantages, torch.ones_like(ratio, dtype=torch.bool), 0.2, 0.2)


@pytest.mark.parametrize("call, error, message", _RAISES)
def test_bad_input_gets_a_clear_error(call, error, message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def test_recipe_names_are_accepted_where_a_recipe_is_expected() -> None:
    # these raised AttributeError ('str' object has no attribute 'reward_correct')
    assert identity.update_weight(0.5, "grpo") == identity.update_weight(0.5, GRPO)
    assert silent.expected_update_weight(0.3, 8, "dr_grpo") == silent.expected_update_weight(0.3, 8, DR_GRPO)
    assert size_law.large_group_gradient(0.3, "Dr. GRPO") == pytest.approx(0.21)
    np.testing.assert_array_equal(histograms.gradient_budget(_HIST, "grpo"), histograms.gradient_budget(_HIST, GRPO))
    assert gradcheck.unclipped("grpo").clip_high == 1e12


def test_closed_forms_at_their_edges() -> None:
    # δ = 5e-324: log(δ/2) was −inf and the answer inf; 2 · 0.5^1075 = 2^-1074 is the smallest float
    assert silent.tries_needed(0.5, 5e-324) == 1075
    # a billion redraws took a loop of a billion terms; the closed form is immediate
    s = float(silent.silent_probability(0.5, 4))
    base = float(silent.expected_update_weight(0.5, 4, DAPO))
    assert silent.refill_weight(0.5, 4, DAPO, redraw_tries=10**9) == pytest.approx(base / (1 - s), rel=1e-12)
    assert silent.refill_weight(0.5, 4, DAPO, redraw_tries=4) == pytest.approx(base * (1 - s**4) / (1 - s), rel=1e-12)
    # p = 1e-9 needs G ≈ 1e10: the scan to max_group_size took hours; now refused at once
    with pytest.raises(ValueError, match="no G ≤ 100000 reaches fidelity"):
        size_law.minimal_group_size(0.01, 1e-9)
    assert size_law.minimal_group_size(0.05, 0.05) == 69


def test_group_advantages_with_huge_or_tiny_rewards() -> None:
    # the variance overflowed (1e200² = inf, advantages 0) or underflowed (a mixed group looked silent)
    for scale in (1e200, 1e-200, 1e-300, 5e-324):
        np.testing.assert_array_equal(group_advantages([scale, 0.0, 0.0, scale], 2, GRPO), [1, -1, -1, 1])
    np.testing.assert_array_equal(group_advantages([1e308, -1e308], 2, GRPO), [1, -1])
    np.testing.assert_array_equal(group_advantages([1e308, -1e308], 2, DR_GRPO), [1e308, -1e308])


def test_task_sampling_and_carry_counts_are_exact_for_every_digit_count() -> None:
    hist = tasks._carry_histogram(4)
    assert hist.sum() == 10**8 and hist[4] == 7486875  # exact: the old bound for D > 3 was 10^8 for every carry count
    assert tasks._carry_histogram(9).sum() == 10**18
    problems = tasks.sample_problems(50, 5, carries=5, seed=0)
    assert len({(p.a, p.b) for p in problems}) == 50 and all(p.carries == 5 for p in problems)


def test_silent_r2_of_a_constant_series_is_nan_not_minus_inf() -> None:
    result = bernoulli.controlled_run(np.full(8, 0.5), GRPO, bernoulli.ControlledRun(num_prompts=8, steps=1))
    assert math.isnan(bernoulli.silent_r2(result))  # one step: R² undefined (it was −inf)
    with pytest.raises(ValueError, match="step must index one of the run's 1 steps"):
        bernoulli.extreme_share(result, 10)  # was IndexError
    with pytest.raises(ValueError, match="groups must be a finite number"):
        bernoulli.value_at_budget(result, bernoulli.quartile_curve(result), float("nan"))
    with pytest.raises(ValueError, match="groups is a number of groups drawn"):
        bernoulli.value_at_budget(result, bernoulli.quartile_curve(result), -5)  # was clamped to step 0


def test_welch_without_noise_or_difference_gives_t_zero() -> None:
    assert statistics.welch([1.0, 1.0], [1.0, 1.0])["t"] == 0.0  # was NaN (0 · inf)
    assert statistics.welch([1.0, 1.0], [1.0, 1.0])["p"] == 1.0
    assert statistics.welch([2.0, 2.0], [1.0, 1.0])["t"] == math.inf
    assert statistics.welch([2.0, 2.0], [1.0, 1.0])["p"] == 0.0
    with pytest.raises(ValueError, match="not testable with one seed"):  # one seed: its noise is unknown, not 0
        statistics.welch([2.0], [1.0])


def test_fit_consistency_refuses_bad_points() -> None:
    steps, logged = dapo_curve.load_dapo_fig3b()
    hist = histograms.KHistogram(4, np.array([10, 5, 5, 5, 10]))
    p, w = hist.solve_rates, hist.counts
    bad_p = p.copy()
    bad_p[1] = np.nan
    with pytest.raises(ValueError, match="NaN"):  # the fit ran with NaN read as p = 0
        dapo_curve.fit_consistency(bad_p, w, steps, logged, bootstrap=0)
    bad_steps = steps.copy()
    bad_steps[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):  # the fit returned NaN
        dapo_curve.fit_consistency(p, w, bad_steps, logged, bootstrap=0)
    with pytest.raises(ValueError, match="one logged fraction per step"):
        dapo_curve.fit_consistency(p, w, steps[:10], logged, bootstrap=0)
    with pytest.raises(ValueError, match="increasing"):
        dapo_curve.fit_consistency(p, w, steps[::-1], logged, bootstrap=0)
    with pytest.raises(ValueError, match="bootstrap must be at least 0"):
        dapo_curve.fit_consistency(p, w, steps, logged, bootstrap=-1)


@pytest.fixture(scope="module")
def small_lm():
    return tiny_model(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, seed=1).eval()


def _prompts(n: int = 2) -> torch.Tensor:
    return torch.tensor([_CODEC.encode("12+34=")] * n)


@pytest.mark.parametrize(
    "changes, error, message",
    [
        (
            {"prompt_ids": torch.tensor([[99, 2, 3]])},
            ValueError,
            "outside the model's vocabulary",
        ),  # IndexError in torch
        ({"prompt_ids": torch.tensor([[-1, 2, 3]])}, ValueError, "outside the model's vocabulary"),
        ({"prompt_ids": torch.zeros(2, 3)}, TypeError, "integer tensor of token ids"),
        ({"prompt_ids": [[2, 3]]}, TypeError, "prompt_ids must be a torch tensor"),
        ({"eos_id": 99}, ValueError, "eos_id=99 is not a token id"),  # every row ran to the cap
        ({"pad_id": 0.5}, ValueError, "pad_id must be a whole number"),
        ({"max_new_tokens": 2.5}, ValueError, "max_new_tokens must be a whole number"),
        ({"temperature": float("nan")}, ValueError, "temperature must be a finite number"),
        ({"num_samples": float("nan")}, ValueError, "num_samples must be a whole number"),  # ran as 1 sample
        ({"prompt_mask": torch.ones(2, 4, dtype=torch.bool)}, ValueError, "prompt_mask must have shape"),  # ignored
        ({"prompt_mask": torch.tensor([[True] * 5 + [False]] * 2)}, ValueError, "left padding"),
        ({"prompt_mask": torch.zeros(2, 6, dtype=torch.bool)}, ValueError, "left padding"),
        ({"greedy": "yes"}, TypeError, "greedy must be True or False"),
        ({"model": None}, TypeError, "model must be a causal LM"),
    ],
)
def test_sample_refuses_bad_input(small_lm, changes, error, message) -> None:
    args = dict(model=small_lm, prompt_ids=_prompts(), max_new_tokens=4, eos_id=_CODEC.eos_id, pad_id=_CODEC.pad_id)
    args.update(changes)
    with pytest.raises(error, match=message):
        rollout.sample(**args)


def test_completion_logprobs_refuses_bad_input(small_lm) -> None:
    out = rollout.sample(
        small_lm, _prompts(), 4, _CODEC.eos_id, _CODEC.pad_id, generator=torch.Generator().manual_seed(0)
    )
    args = (small_lm, out.prompt_ids, out.prompt_mask)
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        rollout.completion_logprobs(*args, torch.full_like(out.completion_ids, 99), out.mask)
    with pytest.raises(ValueError, match="1 rows but prompt_ids 2"):
        rollout.completion_logprobs(*args, out.completion_ids[:1], out.mask[:1])
    with pytest.raises(TypeError, match="completion_ids must be a torch tensor"):
        rollout.completion_logprobs(*args, None, out.mask)
    with pytest.raises(ValueError, match="both > 0"):
        rollout.completion_logprobs(
            small_lm, out.prompt_ids[:, :0], out.prompt_mask[:, :0], out.completion_ids, out.mask
        )


def test_gradcheck_refuses_bad_groups(small_lm, monkeypatch) -> None:
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="group_size must be at least 1"):  # "max() arg is an empty sequence"
        gradcheck.build_group(small_lm, _PROBLEM, 0, 0, 4, gen)
    with pytest.raises(ValueError, match="num_correct must lie in"):  # IndexError
        gradcheck.build_group(small_lm, _PROBLEM, 4, 5, 4, gen)
    with pytest.raises(ValueError, match="num_correct must be at least 0"):  # AssertionError
        gradcheck.build_group(small_lm, _PROBLEM, 4, -1, 4, gen)
    with pytest.raises(ValueError, match="more than max_new_tokens=1"):
        gradcheck.build_group(small_lm, _PROBLEM, 4, 1, 1, gen)
    with pytest.raises(TypeError, match="problem must be a Problem"):
        gradcheck.build_group(small_lm, "12+34=", 4, 1, 4, gen)
    group = gradcheck.build_group(small_lm, _PROBLEM, 4, 2, 4, gen)
    with pytest.raises(ValueError, match="must be binary"):  # was computed with 0.5 as wrong
        gradcheck.GroupBatch(
            group.prompt_ids, group.prompt_mask, group.completion_ids, group.mask, np.array([0.5, 1.0, 0.0, 0.0])
        )
    with pytest.raises(ValueError, match="one row per sample"):  # IndexError
        gradcheck.GroupBatch(
            group.prompt_ids, group.prompt_mask, group.completion_ids, group.mask, np.array([1.0, 0.0])
        )
    with pytest.raises(TypeError, match="must be a GroupBatch"):
        gradcheck.identity_check(small_lm, None, GRPO, 4)
    with pytest.raises(TypeError, match="old_logprobs must be a torch tensor"):  # ran on-policy silently
        gradcheck.identity_drift(small_lm, group, GRPO, 4, None)
    with pytest.raises(ValueError, match="non-empty list of GroupBatch"):  # ZeroDivisionError
        gradcheck.drift_study(small_lm, [], GRPO, 4, 1, 1e-3)
    with pytest.raises(ValueError, match="non-empty list of GroupBatch"):
        gradcheck.move_policy(small_lm, [], GRPO, 4, 1, 1e-3)
    with pytest.raises(ValueError, match="steps must be at least 0"):  # did nothing silently
        gradcheck.move_policy(small_lm, [group], GRPO, 4, -1, 1e-3)
    with pytest.raises(ValueError, match="what drift_study returns"):  # KeyError
        gradcheck.drift_summary({})
    with pytest.raises(ValueError, match="scalar that depends on the parameters"):
        gradcheck.flat_grad(torch.tensor(1.0), list(small_lm.parameters()))
    with pytest.raises(ValueError, match="params is empty"):
        gradcheck.flat_grad(sum(p.sum() for p in small_lm.parameters()), [])
    assert gradcheck.identity_check(small_lm, group, "grpo", 4)["rel_error"] < 1e-4  # a name works

    # a model that always answers right never yields the wrong rows: this looped forever
    def always_right(model, prompt_ids, max_new_tokens, eos_id, pad_id, **kwargs):
        ids = torch.tensor([_CODEC.encode(_PROBLEM.answer + "<eos>")] * prompt_ids.shape[0])
        ones = torch.ones_like(ids, dtype=torch.bool)
        return rollout.Rollout(
            prompt_ids,
            torch.ones_like(prompt_ids, dtype=torch.bool),
            ids,
            torch.zeros(ids.shape),
            ones,
            torch.zeros(ids.shape[0], dtype=torch.bool),
        )

    monkeypatch.setattr(rollout, "sample", always_right)
    with pytest.raises(ValueError, match="in 100 rounds"):
        gradcheck.build_group(small_lm, _PROBLEM, 4, 1, 4, gen)
