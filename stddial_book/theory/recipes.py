"""The dial's settings as data: :class:`Recipe`, the presets, and group-relative advantages.

A recipe is a frozen dataclass: GRPO, Dr. GRPO and DAPO differ only in the values of its fields
(chapter 2). :func:`group_advantages` turns a flat batch of rewards, whose groups are contiguous,
into per-sample advantages under any recipe (chapter 3 checks it against the closed forms of
:mod:`stddial_book.theory.identity`); the groups may have one size each.

Ragged groups
-------------

A per-prompt allocation of samples gives each prompt j its own group size G_j. Each group is
centred, scaled and tested for silence on its own G_j samples, exactly as it would be alone.
The loss aggregations of :mod:`stddial_book.rl.losses` work per sequence and per token, never
per group, so they keep their meaning for a step of N = Σⱼ G_j sequences holding T tokens:

* ``seq-mean-token-mean`` (GRPO): each sequence's token mean, then the mean over the N sequences;
* ``seq-mean-token-sum-norm`` (Dr. GRPO): each sequence's token sum / L_max, then the mean over N;
* ``token-mean`` (DAPO): the sum over all T tokens of the step, divided by T.

A group then weighs by its share of the step. With binary rewards, at ratio 1, group j holding
k_j correct of G_j (σ_j = √(k_j(G_j − k_j))/G_j; ḡ₊ⱼ, ḡ₋ⱼ its mean scores, normalised as the
aggregation says) and Δ = reward_correct − reward_wrong, the step −∇L is the sum over groups of

* GRPO: (G_j/N) · σ_j (ḡ₊ⱼ − ḡ₋ⱼ), each score gᵢ divided by its own length ℓᵢ;
* Dr. GRPO: (G_j/N) · Δ σ_j² (ḡ₊ⱼ − ḡ₋ⱼ), each gᵢ divided by L_max;
* DAPO: (G_j ℓ̄_j/T) · σ_j (ḡ₊ⱼ − ḡ₋ⱼ), each gᵢ divided by its group's mean length ℓ̄_j, so
  that G_j ℓ̄_j/T is the group's share of the step's tokens.

With equal G every share G_j/N is 1/M for M groups: the mean over groups of the single-group
identity. With ragged G a group of 16 samples pulls twice as hard as a group of 8 with the same
σ: more samples buy a prompt both a better estimate and a larger say in the step. Bessel's
correction and ``std_eps`` scale each group's weight as they do for a single group
(``tests/test_ragged.py`` checks the sum on real gradients for every recipe).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from stddial_book.core.checks import ArrayLike, check_group_size, like, shown, split_groups, to_numpy, unit_scale

__all__ = [
    "Recipe",
    "LossAggregation",
    "LOSS_AGGREGATIONS",
    "GRPO",
    "DR_GRPO",
    "DAPO",
    "PRESETS",
    "RECIPES",
    "get_recipe",
    "as_recipe",
    "recipe_key",
    "group_advantages",
]

LossAggregation = Literal["seq-mean-token-mean", "seq-mean-token-sum-norm", "token-mean"]
#: The three ways to turn per-token losses into one number (verl's names):
#: per-sequence token mean then mean over sequences (GRPO), sum over tokens divided by the fixed
#: generation cap L_max then mean over sequences (Dr. GRPO), and sum over all tokens of the
#: optimizer step divided by their count (DAPO, token level).
LOSS_AGGREGATIONS: tuple[str, ...] = ("seq-mean-token-mean", "seq-mean-token-sum-norm", "token-mean")


@dataclass(frozen=True)
class Recipe:
    """One setting of the dial: everything that distinguishes GRPO, Dr. GRPO and DAPO.

    Its fields, each a keyword of the constructor (the defaults in brackets):

    * ``name``: a short label used in plots and logs (required, non-empty).
    * ``scale_std``: divide the centred rewards by the group's std (GRPO, DAPO) or not (Dr. GRPO)
      [True].
    * ``std_correction``: 0 for the population std σ (the identity's), 1 for Bessel's sample std
      (what TRL, verl and oat compute; it multiplies GRPO's weights by sqrt((G − 1)/G)) [0].
    * ``std_eps``: added to the std before dividing (TRL 1e-4, verl 1e-6); each group's weight
      then falls short of σ by exactly the factor 1/(1 + eps/σ) [0].
    * ``silent_tol``: a group whose reward std is at or below this times its largest |reward| is
      silent; it gets exactly zero advantage (never NaN). Relative, so that GRPO stays
      invariant to the scale of the rewards; a tolerance, not ``== 0``, because shaped
      rewards carry float rounding (0.1 + 0.2 against 0.3) [1e-9].
    * ``loss_aggregation``: one of :data:`LOSS_AGGREGATIONS` [``"seq-mean-token-mean"``, GRPO's].
    * ``clip_low``, ``clip_high``: the PPO clip range on the ratio, [1 − clip_low, 1 + clip_high]
      [0.2 each; ``clip_low`` below 1].
    * ``kl_coef``: β, the coefficient of the k3 KL estimator against the reference policy [0, no KL].
    * ``dynamic_sampling``: discard silent groups and refill the batch (DAPO) [False].
    * ``overlong_filter``: mask samples cut off at the length cap out of the loss (DAPO) [False].
    * ``overlong_penalty``: DAPO's soft length penalty inside the last ``overlong_cache_fraction``
      of the length cap [False].
    * ``overlong_cache_fraction``: L_cache / L_max (DAPO used 4096 / 20480 = 0.2), in [0, 1) [0].
    * ``reward_correct``, ``reward_wrong``: the verifier's two reward values (0/1 by default; DAPO's
      paper used ±1). GRPO is invariant to this choice, Dr. GRPO's update scales with the gap.
    """

    name: str
    scale_std: bool = True
    std_correction: int = 0
    std_eps: float = 0.0
    silent_tol: float = 1e-9
    loss_aggregation: LossAggregation = "seq-mean-token-mean"
    clip_low: float = 0.2
    clip_high: float = 0.2
    kl_coef: float = 0.0
    dynamic_sampling: bool = False
    overlong_filter: bool = False
    overlong_penalty: bool = False
    overlong_cache_fraction: float = 0.0
    reward_correct: float = 1.0
    reward_wrong: float = 0.0

    def __post_init__(self) -> None:
        if (
            isinstance(self.std_correction, bool)
            or self.std_correction not in (0, 1)
            or not isinstance(self.std_correction, (int, float, np.integer, np.floating))
        ):  # 0j == 0
            raise ValueError(f"std_correction must be 0 (population std) or 1 (Bessel); got {self.std_correction!r}.")
        if self.loss_aggregation not in LOSS_AGGREGATIONS:
            raise ValueError(f"loss_aggregation must be one of {LOSS_AGGREGATIONS}; got {self.loss_aggregation!r}.")
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name must be a non-empty string; got {self.name!r}.")
        for field in ("scale_std", "dynamic_sampling", "overlong_filter", "overlong_penalty"):
            if not isinstance(getattr(self, field), (bool, np.bool_)):
                raise TypeError(
                    f"{field} must be True or False; got {getattr(self, field)!r} "
                    f"({type(getattr(self, field)).__name__})."
                )
        for field in (
            "std_eps",
            "silent_tol",
            "clip_low",
            "clip_high",
            "kl_coef",
            "overlong_cache_fraction",
            "reward_correct",
            "reward_wrong",
        ):
            value = getattr(self, field)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise TypeError(f"{field} must be a number; got {value!r} ({type(value).__name__}).")
        if not np.isfinite(self.reward_correct) or not np.isfinite(self.reward_wrong):
            raise ValueError("reward_correct and reward_wrong must be finite numbers.")
        for field in ("std_eps", "silent_tol", "clip_low", "clip_high", "kl_coef"):
            value = getattr(self, field)
            if not np.isfinite(value) or value < 0:
                raise ValueError(f"{field} must be a finite number >= 0; got {value!r}.")
        if self.clip_low >= 1.0:
            raise ValueError(
                f"clip_low must be below 1 (the ratio's lower bound is 1 − clip_low > 0); got {self.clip_low}."
            )
        if not 0.0 <= self.overlong_cache_fraction < 1.0:
            raise ValueError(
                "overlong_cache_fraction is L_cache / L_max and must lie in [0, 1); "
                f"got {self.overlong_cache_fraction}."
            )
        if self.overlong_penalty and self.overlong_cache_fraction == 0.0:
            raise ValueError(
                "overlong_penalty needs a penalty band: set overlong_cache_fraction > 0 "
                "(DAPO used 0.2, i.e. L_cache = 4096 of L_max = 20480)."
            )
        if not self.reward_correct > self.reward_wrong:
            raise ValueError(f"reward_correct ({self.reward_correct}) must exceed reward_wrong ({self.reward_wrong}).")

    def replace(self, **changes: object) -> Recipe:
        """A copy with some settings changed, e.g. ``GRPO.replace(std_correction=1)``."""
        return dataclasses.replace(self, **changes)


#: GRPO (Shao et al., 2024): divide by the group std, per-sequence token
#: mean, symmetric clip, k3 KL with β = 0.04. The paper does not state the
#: std's estimator; the book uses the population std so the identity is
#: exact (``replace(std_correction=1)`` for TRL/verl/oat's).
GRPO = Recipe(name="GRPO", kl_coef=0.04)

#: Dr. GRPO (Liu et al., 2025): no std division, sum over tokens divided by
#: the constant L_max, no KL.
DR_GRPO = Recipe(name="Dr. GRPO", scale_std=False, loss_aggregation="seq-mean-token-sum-norm")

#: DAPO (Yu et al., 2025): GRPO's advantage on non-silent groups only
#: (dynamic sampling), token-level loss, clip-higher (0.2 / 0.28), no KL,
#: overlong filtering and soft penalty, ±1 rewards.
DAPO = Recipe(
    name="DAPO",
    loss_aggregation="token-mean",
    clip_high=0.28,
    dynamic_sampling=True,
    overlong_filter=True,
    overlong_penalty=True,
    overlong_cache_fraction=0.2,
    reward_wrong=-1.0,
)

PRESETS: dict[str, Recipe] = {"grpo": GRPO, "dr_grpo": DR_GRPO, "dapo": DAPO}

#: The registry of recipe names: each preset's key, in the book's order. Every other list of the
#: recipes (the command line's choices and defaults, the figures' names, the recorded studies, the
#: tools) refers to this one; ``tests/test_architecture.py`` finds any that spells them out again.
RECIPES: tuple[str, ...] = tuple(PRESETS)


def recipe_key(name: str) -> str:
    """The preset key a recipe name stands for: ``"Dr. GRPO"`` and ``"dr-grpo"`` give ``dr_grpo``.

    ``name`` is a string; the key is it lower-cased, without dots, with dashes and spaces as underscores
    (whether a preset has that key is not checked here).
    """
    if not isinstance(name, str):
        raise TypeError(
            f"a recipe name must be a string such as {sorted(PRESETS)}; got {type(name).__name__} "
            f"{name!r}. Pass a Recipe object where a recipe is expected."
        )
    return name.strip().lower().replace("-", "_").replace(".", "").replace(" ", "_")


def get_recipe(name: str) -> Recipe:
    """The preset called ``name`` (``grpo``, ``dr_grpo`` or ``dapo``; case and dashes ignored)."""
    key = recipe_key(name)
    if key not in PRESETS:
        raise ValueError(f"unknown recipe {name!r}; choose one of {sorted(PRESETS)}.")
    return PRESETS[key]


def as_recipe(recipe: Recipe | str) -> Recipe:
    """A :class:`Recipe` as given, or the preset a name stands for (``"grpo"``, ``"Dr. GRPO"``).

    ``recipe`` is a :class:`Recipe` or a preset name; anything else raises ``TypeError``.
    """
    if isinstance(recipe, Recipe):
        return recipe
    if isinstance(recipe, str):
        return get_recipe(recipe)
    raise TypeError(
        f"recipe must be a Recipe or a preset name ({sorted(PRESETS)}); got {type(recipe).__name__} {shown(recipe)}."
    )


def group_advantages(
    rewards: ArrayLike, group_size: int | Sequence[int], recipe: Recipe | str, valid: ArrayLike | None = None
) -> ArrayLike:
    """Per-sample advantages Aᵢ for a flat batch whose groups are contiguous.

    Aᵢ = (rᵢ − mean) / (std + eps) when ``recipe.scale_std`` (GRPO, DAPO),
    else rᵢ − mean (Dr. GRPO); std is the population std or Bessel's per
    ``recipe.std_correction``. Groups whose std is at or below
    ``recipe.silent_tol`` times their largest |reward| are silent and get
    exactly 0 (never NaN). Rewards may be real-valued (shaped rewards such as
    DAPO's length penalty); they are used as given, so map a verifier's 0/1
    to the recipe's ``reward_correct``/``reward_wrong`` before calling.
    Returns the type passed in (numpy float64 or a torch tensor). Chapter 3;
    Shao et al. (2024), Liu et al. (2025), Yu et al. (2025). ``rewards`` is
    the flat batch, shape (N,), each group's samples contiguous; ``recipe``
    is a :class:`Recipe` or a preset name.

    ``group_size`` is one G for every group, or one G per group (a sequence
    of sizes, each at least 2, summing to the batch): ragged groups, as a
    per-prompt allocation of samples makes them. Every group is then centred,
    scaled and tested for silence on its own G_j samples, exactly as it would
    be alone (see *Ragged groups* below for what the loss makes of them).

    ``valid`` (a boolean mask, one entry per sample) restricts a group's
    statistics to its valid samples; the others get A = 0. DAPO's overlong
    filter masks truncated samples out of the loss, so their rewards must not
    shape the mean and std the kept samples are measured against either (a
    group left with fewer than two valid samples, or valid samples that
    agree, is silent).

    With ragged groups each group weighs in the step by its share of the
    step's sequences (GRPO, Dr. GRPO) or tokens (DAPO): the module's
    *Ragged groups* note writes out each recipe's per-group weight.
    """
    recipe = as_recipe(recipe)
    if _is_size_sequence(group_size):
        arr = to_numpy(rewards, "rewards")
        sizes = _check_group_sizes(group_size, arr)
        mask = None if valid is None else _valid_mask(valid, arr.shape[0], 1).reshape(-1)
        return like(_ragged_advantages(arr, sizes, recipe, mask), rewards)
    size = check_group_size(group_size)
    arr = to_numpy(rewards, "rewards")
    groups = split_groups(arr, size)
    if valid is not None:
        return like(
            _masked_group_advantages(groups, _valid_mask(valid, arr.shape[0], size), recipe).reshape(-1), rewards
        )
    return like(_equal_group_advantages(groups, recipe, arr).reshape(-1), rewards)


def _equal_group_advantages(groups: np.ndarray, recipe: Recipe, arr: np.ndarray) -> np.ndarray:
    """:func:`group_advantages` of groups stacked as rows, shape (num_groups, G), no mask."""
    # Each group scaled by a power of two (exact: every moment, the silent
    # test and GRPO's ratio come out bit for bit as unscaled), so the
    # variance of rewards near 1e200 cannot overflow, nor that of rewards
    # near 1e-200 underflow and turn a mixed group silent.
    unit, exponent, peak = unit_scale(groups, axis=1)
    centred = unit - unit.mean(axis=1, keepdims=True)
    std = unit.std(axis=1, ddof=recipe.std_correction, keepdims=True)
    silent = std <= recipe.silent_tol * peak
    if recipe.scale_std:
        denominator = np.where(silent, 1.0, std + np.ldexp(recipe.std_eps, -exponent))
        advantages = centred / denominator
    else:
        with np.errstate(over="ignore"):
            advantages = np.ldexp(centred, exponent)
        if not np.all(np.isfinite(advantages)):
            raise ValueError(
                f"rewards up to {np.abs(arr).max():g} in magnitude overflow "
                "float64 in Dr. GRPO's centred rewards (which keep the "
                "rewards' scale); rescale them."
            )
    return np.where(silent, 0.0, advantages)


def _is_size_sequence(group_size: object) -> bool:
    """Whether ``group_size`` is one size per group (a list, tuple or 1-D array) rather than one G."""
    if isinstance(group_size, (list, tuple)):
        return True
    return getattr(group_size, "ndim", 0) == 1 and hasattr(group_size, "__len__")


def _check_group_sizes(group_size: Sequence[int], arr: np.ndarray) -> np.ndarray:
    """Per-group sizes as an int array: each a whole number >= 2, summing to the batch."""
    if arr.ndim != 1:
        split_groups(arr, 1)  # refuses anything but a flat batch, with its message
    values = group_size.tolist() if hasattr(group_size, "tolist") else list(group_size)
    if len(values) == 0:
        raise ValueError("group_size is an empty sequence; pass one size per group (or a single G).")
    sizes = np.array([check_group_size(v, "each group size") for v in values], dtype=np.int64)
    if int(sizes.sum()) != arr.shape[0]:
        raise ValueError(
            f"the group sizes sum to {int(sizes.sum())} but the batch holds {arr.shape[0]} rewards; "
            "pass one size per group, in the batch's order, covering every sample."
        )
    return sizes


def _ragged_advantages(arr: np.ndarray, sizes: np.ndarray, recipe: Recipe, valid: np.ndarray | None) -> np.ndarray:
    """:func:`group_advantages` for groups of sizes ``sizes``: the groups of each size class are
    stacked and go through the equal-size computation together, so every group gets exactly the
    advantages it would get on its own."""
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    out = np.zeros_like(arr)
    for size in np.unique(sizes):
        rows = (starts[sizes == size][:, None] + np.arange(size)).reshape(-1)
        groups = arr[rows].reshape(-1, size)
        if valid is None:
            out[rows] = _equal_group_advantages(groups, recipe, arr).reshape(-1)
        else:
            out[rows] = _masked_group_advantages(groups, valid[rows].reshape(-1, size), recipe).reshape(-1)
    return out


def _valid_mask(valid: ArrayLike, num_samples: int, group_size: int) -> np.ndarray:
    mask = np.asarray(valid.detach().cpu().numpy() if hasattr(valid, "detach") else valid)
    if mask.shape != (num_samples,) or not (mask.dtype == bool or np.isin(mask, (0, 1)).all()):
        raise ValueError(
            f"valid must be a boolean mask with one entry per sample ({num_samples}); got shape "
            f"{mask.shape} and dtype {mask.dtype}."
        )
    return mask.astype(bool).reshape(-1, group_size)


def _masked_group_advantages(groups: np.ndarray, valid: np.ndarray, recipe: Recipe) -> np.ndarray:
    """:func:`group_advantages` with each group's mean and std taken over its valid samples only."""
    unit, exponent, _ = unit_scale(np.where(valid, groups, 0.0), axis=1)
    count = valid.sum(axis=1, keepdims=True)
    mean = unit.sum(axis=1, keepdims=True) / np.maximum(count, 1)
    centred = np.where(valid, unit - mean, 0.0)
    dof = count - recipe.std_correction
    std = np.sqrt((centred**2).sum(axis=1, keepdims=True) / np.maximum(dof, 1))
    peak = np.abs(unit).max(axis=1, keepdims=True)
    silent = (dof < 1) | (count < 2) | (std <= recipe.silent_tol * peak)
    if recipe.scale_std:
        advantages = centred / np.where(silent, 1.0, std + np.ldexp(recipe.std_eps, -exponent))
    else:
        advantages = np.ldexp(centred, exponent)
    return np.where(silent | ~valid, 0.0, advantages)
