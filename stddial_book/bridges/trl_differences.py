"""What TRL's GRPOTrainer computes differently from a book recipe, and the recipe that computes what TRL does
(chapter 14)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from stddial_book.bridges.trl_keywords import DEFAULT_NUM_MINIBATCHES, check_bool
from stddial_book.core.checks import check_int
from stddial_book.theory.recipes import Recipe, as_recipe

__all__ = ["TRL_STD_EPS", "TRLGap", "trl_gaps", "trl_equivalent_recipe"]


#: What TRL adds to the group's std before dividing (hard-coded in ``GRPOTrainer``, not a setting).
TRL_STD_EPS = 1e-4


@dataclass(frozen=True)
class TRLGap:
    """One thing a recipe asks for that TRL computes differently (a row of chapter 14's table).

    ``knob`` is the :class:`~stddial_book.theory.recipes.Recipe` field (or ``minibatches``, the schedule, or
    ``sampler``, vLLM's); ``book`` says what the book's recipe does, ``trl`` what TRL does instead, and
    ``effect`` what follows for the update, in numbers where there is one (all four are sentences of text).
    """

    knob: str
    book: str
    trl: str
    effect: str


def _smallest_mixed_std(group_size: int, gap: float) -> float:
    """Bessel's std of a group of two reward values ``gap`` apart with one sample on one side: gap/√G."""
    return gap / math.sqrt(group_size)


def trl_gaps(
    recipe: Recipe | str,
    *,
    group_size: int = 8,
    num_minibatches: int = DEFAULT_NUM_MINIBATCHES,
    use_vllm: bool = False,
) -> list[TRLGap]:
    """What ``recipe`` asks for and TRL's ``GRPOTrainer`` computes differently, with what follows (chapter 14).

    Set by :func:`~stddial_book.bridges.trl_settings.trl_settings`, TRL matches the dial, the aggregation
    (Dr. GRPO's L_max normaliser is exactly TRL's ``dr_grpo``), the clip range, the k3 KL and the overlong
    filter. What remains:

    * ``dynamic_sampling`` (DAPO, Yu et al., 2025): TRL keeps silent groups with advantage 0 and logs
      their share as ``frac_reward_zero_std``; it has no drop-and-refill, and under the token-level loss
      the silent groups' tokens still count in the normaliser.
    * ``std_correction``: TRL divides by Bessel's sample std, the population std times sqrt(G/(G − 1)),
      so the advantage term (not the KL term) shrinks by sqrt((G − 1)/G) (0.9354 at G = 8; for 4 of 8
      correct, 0.5 against 0.535). With β = 0 that is one constant on the whole loss; with β > 0 it
      acts, under Adam, like β raised by sqrt(G/(G − 1)).
    * ``std_eps``: TRL adds a fixed :data:`TRL_STD_EPS` to the std.
    * ``overlong_filter`` (DAPO): the book's trainer leaves samples cut off at L_max out of the loss and
      out of their group's mean and std; TRL's ``mask_truncated_completions`` masks the loss only.
    * ``minibatches`` (with several optimizer steps per rollout): TRL shuffles the completions of the
      generation batch before cutting it, so a group can straddle steps, and its token-level loss
      divides each step by the batch's tokens over the number of steps, not by the step's own count.
    * ``sampler`` (only with ``use_vllm=True``): TRL then recomputes π_old with the training model and,
      by default (``vllm_importance_sampling_correction=True``, mode ``"sequence_mask"``), multiplies
      each completion's policy loss by its importance ratio π_train/π_vLLM, zeroing completions whose
      ratio leaves [``vllm_importance_sampling_clip_min``, ``_clip_max``] (default max 3); the book
      takes π_old from its sampler, the training model itself, and has no such correction.

    DAPO's reward shaping (±1 rewards, the soft overlong penalty) is not a gap: it goes into reward
    functions (:func:`~stddial_book.bridges.trl_rewards.reward_settings`). :func:`trl_equivalent_recipe`
    removes every gap but the schedule and the overlong filter's group statistics.

    ``recipe`` is a preset name or a ``Recipe``; ``group_size`` is G, TRL's ``num_generations`` (at least 2,
    default 8), which sets the numbers in the effects; ``num_minibatches`` the optimizer steps per generation
    batch (TrainConfig's default 2); ``use_vllm`` whether TRL samples with vLLM (``GRPOConfig``'s setting of
    that name, default False).
    """
    recipe = as_recipe(recipe)
    group_size = check_int(
        group_size, "group_size", minimum=2, hint="A group of one sample has no spread to learn from."
    )
    num_minibatches = check_int(num_minibatches, "num_minibatches", minimum=1)
    use_vllm = check_bool(use_vllm, "use_vllm")
    rows = (
        _dynamic_sampling_gap(recipe),
        _std_correction_gap(recipe, group_size),
        _std_eps_gap(recipe, group_size),
        _overlong_filter_gap(recipe, group_size),
        _minibatches_gap(recipe, num_minibatches),
        _sampler_gap(use_vllm),
    )
    return [gap for gap in rows if gap is not None]


def _dynamic_sampling_gap(recipe: Recipe) -> TRLGap | None:
    """DAPO's drop-and-refill of silent groups (σ = 0), which TRL does not have; None without it."""
    if not recipe.dynamic_sampling:
        return None
    return TRLGap(
        "dynamic_sampling",
        "drops groups whose samples all agree (σ = 0) and refills the batch with new prompts",
        "keeps them with advantage 0 and only logs their share as frac_reward_zero_std",
        "A batch whose silent fraction is f holds (1 − f) of the informative groups DAPO's would; under the "
        "token-level loss the silent groups' tokens also count in the normaliser, so every informative token "
        "weighs less, by the informative share of the tokens. Filtering needs a custom rollout_func or "
        "sampler; TRL has no refill.",
    )


def _std_correction_gap(recipe: Recipe, group_size: int) -> TRLGap | None:
    """The population std σ against TRL's Bessel std s = σ·sqrt(G/(G − 1)): the advantage term shrinks by
    sqrt((G − 1)/G), which with β > 0 acts like a KL coefficient β·sqrt(G/(G − 1)); None when they agree."""
    if not (recipe.scale_std and recipe.std_correction == 0):
        return None
    factor = math.sqrt((group_size - 1) / group_size)
    effect = (
        f"Every mixed group's advantage, and so the advantage term of the loss, is multiplied by "
        f"sqrt((G − 1)/G) = {factor:.4f} at G = {group_size}; the KL term is not. "
    )
    if recipe.kl_coef > 0:
        effect += (
            f"Against the advantage term the KL term then weighs as β/{factor:.4f} = "
            f"{recipe.kl_coef / factor:.4g} instead of β = {recipe.kl_coef:g}, and Adam's "
            "normalisation removes only the common scale: like a β raised by sqrt(G/(G − 1))."
        )
    else:
        effect += "With β = 0 that is one constant on the whole loss, which Adam's normalisation all but removes."
    return TRLGap(
        "std_correction",
        "divides by the population std σ (ddof 0), which makes the identity exact",
        "divides by Bessel's sample std s = σ·sqrt(G/(G − 1)) (ddof 1)",
        effect,
    )


def _std_eps_gap(recipe: Recipe, group_size: int) -> TRLGap | None:
    """The recipe's std epsilon against TRL's fixed :data:`TRL_STD_EPS`: a group's weight changes by
    |Δε|/(s_min + ε) at most, s_min = gap/√G for binary rewards; None when they agree."""
    if not (recipe.scale_std and recipe.std_eps != TRL_STD_EPS):
        return None
    spread = recipe.reward_correct - recipe.reward_wrong
    s_min = _smallest_mixed_std(group_size, spread)
    relative = abs(TRL_STD_EPS - recipe.std_eps) / (s_min + min(TRL_STD_EPS, recipe.std_eps))
    return TRLGap(
        "std_eps",
        f"adds {recipe.std_eps:g} to the std",
        f"adds {TRL_STD_EPS:g} (fixed in the trainer, not a GRPOConfig setting)",
        f"A group's weight becomes s/(s + {TRL_STD_EPS:g}) of the eps-free one; for binary rewards "
        f"{spread:g} apart the smallest mixed-group s is {s_min:.3f} at G = {group_size}, so the change is "
        f"at most {relative:.1e} relative. Rewards on a finer scale have a smaller s and a larger change"
        + (": the length penalty makes reward gaps as small as 1/L_cache." if recipe.overlong_penalty else "."),
    )


def _overlong_filter_gap(recipe: Recipe, group_size: int) -> TRLGap | None:
    """DAPO's overlong filter: TRL masks cut-off samples out of the loss but not out of their group's
    statistics; None without the filter."""
    if not recipe.overlong_filter:
        return None
    return TRLGap(
        "overlong_filter",
        "masks samples cut off at L_max out of the loss and out of their group's mean and std",
        "mask_truncated_completions masks them out of the loss only; their rewards still shape the group's "
        "mean and std",
        _overlong_statistics_effect(recipe, group_size),
    )


def _minibatches_gap(recipe: Recipe, num_minibatches: int) -> TRLGap | None:
    """Several optimizer steps per rollout: TRL shuffles completions across the steps, and its token-level
    loss divides by the batch's tokens over the steps; None with one step."""
    if num_minibatches <= 1:
        return None
    effect = (
        "The per-step loss matches the book's only in expectation over the shuffle; summed over the "
        "steps of a batch, the per-sequence (GRPO) and L_max (Dr. GRPO) losses still weigh every "
        "completion as the book does."
    )
    if recipe.loss_aggregation == "token-mean":
        effect = (
            "Each step's token-level loss is divided by the generation batch's tokens over the number of "
            "optimizer steps per batch instead of the step's own token count, so a step with more tokens "
            "than average weighs more; equal when all steps hold the same number of tokens. " + effect
        )
    return TRLGap(
        "minibatches",
        "splits a rollout batch into optimizer steps of whole groups",
        "shuffles the completions of the generation batch and splits them into steps_per_generation slices",
        effect,
    )


def _sampler_gap(use_vllm: bool) -> TRLGap | None:
    """vLLM's importance-sampling correction π_train/π_vLLM, which the book's loss does not have; None
    without vLLM."""
    if not use_vllm:
        return None
    return TRLGap(
        "sampler",
        "takes π_old from its sampler, which is the training model itself",
        "with use_vllm=True recomputes π_old with the training model and, by default "
        '(vllm_importance_sampling_correction=True, mode "sequence_mask"), multiplies each '
        "completion's policy loss by its ratio π_train/π_vLLM, zeroing completions whose ratio "
        "leaves [vllm_importance_sampling_clip_min, vllm_importance_sampling_clip_max] (max 3)",
        "An importance-sampling correction for the numerical mismatch between vLLM and the trainer, "
        "which the book's loss does not have; set vllm_importance_sampling_correction=False to leave it "
        "out, or use_vllm=False (the default) to sample with the training model.",
    )


def _overlong_statistics_effect(recipe: Recipe, group_size: int) -> str:
    """What TRL's group statistics over cut-off samples do, with a worked group when G allows one."""
    from stddial_book.theory.recipes import group_advantages

    low = (
        "the wrong answer's reward plus the full length penalty, the lowest there is"
        if recipe.overlong_penalty
        else "the wrong answer's reward"
    )
    text = (
        "In a group with cut-off samples TRL measures the kept samples against a baseline that includes the "
        f"cut-off ones' rewards ({low}), so the kept samples' advantages rise"
    )
    if not 4 <= group_size <= 4096:  # the worked group needs 4 samples; beyond 4096 it would only cost memory
        return text + "; with no sample cut off the two agree."
    cut = recipe.reward_wrong - (1.0 if recipe.overlong_penalty else 0.0)
    rewards = np.array([recipe.reward_correct, recipe.reward_wrong, recipe.reward_wrong] + [cut] * (group_size - 3))
    valid = np.arange(group_size) < 3
    same_std = trl_equivalent_recipe(recipe)  # the same std convention on both sides: only the filter differs
    theirs = float(group_advantages(rewards, group_size, same_std)[1])
    ours = float(group_advantages(rewards, group_size, same_std, valid=valid)[1])
    return (
        text + f": at G = {group_size}, with 1 right, 2 short wrong and {group_size - 3} cut-off samples, a short "
        f"wrong answer gets A = {theirs:+.3f} in TRL and {ours:+.3f} in the book's trainer (both with TRL's "
        "std). With no sample cut off the two agree; the one-batch check takes TRL's statistics."
    )


def trl_equivalent_recipe(recipe: Recipe | str) -> Recipe:
    """The book recipe that computes what TRL computes when set by
    :func:`trl_settings`.

    Bessel's std plus TRL's fixed 1e-4 where the recipe divides by the std,
    and no dynamic sampling (TRL keeps silent groups at advantage 0);
    everything else TRL expresses already. Chapter 14 checks that
    advantages, loss and gradient then agree with TRL's own code to float32
    rounding. One thing no recipe field expresses: under the overlong filter
    the book's trainer takes a group's mean and std over its samples that
    were not cut off, TRL over all of them (:func:`trl_gaps`); they agree on
    a batch without cut-off samples, and ``group_advantages`` without
    ``valid`` computes TRL's. ``recipe`` is a preset name or a ``Recipe``;
    the result is a copy named with " (TRL)" added.
    """
    recipe = as_recipe(recipe)
    changes: dict[str, Any] = {"dynamic_sampling": False}
    if recipe.scale_std:
        changes.update(std_correction=1, std_eps=TRL_STD_EPS)
    name = recipe.name if recipe.name.endswith("(TRL)") else f"{recipe.name} (TRL)"
    return recipe.replace(name=name, **changes)
