"""The numbers and tables chapters 2 to 4 show about the identity, computed from the package.

Chapter 2 tabulates the recipes' advantages (:func:`advantage_table`); chapter 3 checks the
identity on random score vectors (:func:`numeric_identity_errors`); chapter 4 summarises the
checks of :mod:`stddial_book.rl.gradcheck` on the testbed transformer's real gradients
(:func:`ratio_one_errors`, :func:`eps_shortfall_gap`, :func:`drift_numbers`) and answers its
exercises cheaply (:func:`clip_shares`, :func:`drift_after`). The identity is Bay and Yearick
(2026): for 0/1 rewards a group's update (1/G) Σᵢ Aᵢ gᵢ equals w (ḡ₊ − ḡ₋), w = σ for
GRPO and σ² for Dr. GRPO.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence

import numpy as np

from stddial_book.core.checks import check_int, check_number

__all__ = [
    "advantage_table",
    "numeric_identity_errors",
    "ratio_one_errors",
    "eps_shortfall_gap",
    "drift_numbers",
    "clip_shares",
    "drift_after",
]


def _signed(value: float) -> str:
    """A number with its sign and a true minus sign (``+2.646``, ``−0.378``); zero as ``0``."""
    return "0" if value == 0 else f"{value:+.3f}".replace("-", "−")


def advantage_table(advantages: Mapping[str, np.ndarray], num_correct: Sequence[int]):
    """Chapter 2: the advantages of a correct and of a wrong sample (A₊ / A₋), one row per group
    and one column per recipe, as a Markdown table (:func:`stddial_book.core.markdown.table`).

    ``advantages`` maps a recipe's name to its advantages, shape (groups, G), as
    :func:`stddial_book.theory.recipes.group_advantages` returns them reshaped; ``num_correct`` gives
    each group's k (its first k samples are the correct ones). A group with no correct sample has
    no A₊ and one with no wrong sample no A₋: the cell shows "—" there instead of a number. A
    group whose samples all agree (k = 0 or k = G) is marked silent.
    """
    from stddial_book.core.markdown import table

    if not isinstance(advantages, Mapping) or not advantages:
        raise TypeError("advantages must map each recipe's name to its (groups, G) advantages.")
    values = {name: np.asarray(rows, dtype=float) for name, rows in advantages.items()}
    counts = [check_int(k, "num_correct", minimum=0) for k in num_correct]
    sizes = {rows.shape[1] if rows.ndim == 2 else -1 for rows in values.values()}
    if any(rows.ndim != 2 or rows.shape[0] != len(counts) for rows in values.values()) or len(sizes) != 1:
        raise ValueError(
            f"every recipe's advantages must have shape ({len(counts)}, G), one row "
            f"per group and the same G; got {[r.shape for r in values.values()]}."
        )
    size = sizes.pop()
    if any(k > size for k in counts):
        raise ValueError(f"num_correct {counts} exceeds the group size {size}.")
    rows = []
    for index, k in enumerate(counts):
        cells = []
        for adv in values.values():
            right = _signed(adv[index, 0]) if k > 0 else "—"
            wrong = _signed(adv[index, -1]) if k < size else "—"
            cells.append(f"{right} / {wrong}" + (" (silent)" if k in (0, size) else ""))
        rows.append([f"{k} of {size}", *cells])
    return table(["correct samples", *(f"{name}: A₊ / A₋" for name in values)], rows)


def numeric_identity_errors(max_group_size: int = 64, dim: int = 5, seed: int = 0) -> dict[str, float]:
    """Chapter 3: the identity on numbers, for every G from 2 to
    ``max_group_size``, 0 < k < G.

    Each group gets random ``dim``-dimensional scores gᵢ; the advantages
    come from :func:`stddial_book.theory.recipes.group_advantages`, the training
    code's own. Returns the number of groups (``n_numeric_groups``) and the
    largest deviation of mean |A| from 2σ for GRPO (``err_mean_abs``), of
    (1/G) Σᵢ Aᵢ gᵢ from σ (ḡ₊ − ḡ₋) for GRPO (``err_grpo``)
    and from σ² (ḡ₊ − ḡ₋) for Dr. GRPO (``err_dr``). ``max_group_size`` is
    at least 2 (default 64), ``dim`` at least 1 (default 5); ``seed`` seeds
    the scores' generator (whole number ≥ 0, default 0).
    """
    from stddial_book.theory.identity import group_std
    from stddial_book.theory.recipes import DR_GRPO, GRPO, group_advantages

    max_group_size = check_int(max_group_size, "max_group_size", minimum=2)
    dim = check_int(dim, "dim", minimum=1)
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    mean_abs, grpo, dr_grpo, count = [], [], [], 0
    for size in range(2, max_group_size + 1):
        for k in range(1, size):
            rewards = (np.arange(size) < k).astype(float)
            # one "gradient" gᵢ per sample
            scores = rng.normal(size=(size, dim))
            sigma = float(group_std(rewards))
            # ḡ₊ − ḡ₋
            gap = scores[:k].mean(0) - scores[k:].mean(0)
            a_grpo = group_advantages(rewards, size, GRPO)
            a_dr = group_advantages(rewards, size, DR_GRPO)
            mean_abs.append(abs(np.abs(a_grpo).mean() - 2 * sigma))
            grpo.append(np.abs(a_grpo @ scores / size - sigma * gap).max())
            dr_grpo.append(np.abs(a_dr @ scores / size - sigma**2 * gap).max())
            count += 1
    return {
        "n_numeric_groups": count,
        "err_mean_abs": float(max(mean_abs)),
        "err_grpo": float(max(grpo)),
        "err_dr": float(max(dr_grpo)),
    }


def ratio_one_errors(model, groups, comparisons: Mapping[str, tuple], max_new_tokens: int) -> dict[str, list[float]]:
    """Chapter 4: for each comparison, the relative error of the identity on every group at ratio 1.

    ``comparisons`` maps a label to ``(recipe, reference)``: the gradient is that of ``recipe``'s
    loss, the prediction w (ḡ₊ − ḡ₋) takes w and the length normaliser of gᵢ from ``reference``
    (see :func:`stddial_book.rl.gradcheck.identity_check`). Returns label → one error per group.

    ``model`` is the testbed policy whose gradients are taken; ``groups`` the mixed groups
    (:class:`~stddial_book.rl.gradcheck.GroupBatch`, as :func:`~stddial_book.rl.gradcheck.build_group`
    makes them); ``max_new_tokens`` is L_max, the generation cap in tokens (the fixed length
    normaliser of Dr. GRPO's aggregation).
    """
    from stddial_book.rl.gradcheck import identity_check

    if not isinstance(comparisons, Mapping) or not comparisons:
        raise TypeError("comparisons must map a label to a (recipe, reference) pair.")
    errors = {}
    for label, (recipe, reference) in comparisons.items():
        errors[label] = [
            identity_check(model, group, recipe, max_new_tokens, reference=reference)["rel_error"] for group in groups
        ]
    return errors


def eps_shortfall_gap(model, groups, recipe, max_new_tokens: int, eps: float) -> float:
    """Chapter 4: how far a std epsilon's shortfall departs from ε/σ, the largest over ``groups``.

    With std + ε in the denominator the gradient is σ/(σ + ε) times the identity's w (ḡ₊ − ḡ₋)
    (chapter 3's claim), so ‖prediction‖ / ‖gradient‖ − 1 should be exactly ε/σ; this returns
    max over groups of |(‖prediction‖ / ‖gradient‖ − 1) − ε/σ| (rounding when the claim holds).

    ``model`` is the testbed policy; ``groups`` the mixed groups
    (:class:`~stddial_book.rl.gradcheck.GroupBatch`); ``recipe`` the
    :class:`~stddial_book.theory.recipes.Recipe` of the prediction, the gradient's being a copy with
    ``std_eps`` set to ``eps`` (> 0, in reward units); ``max_new_tokens`` is L_max, the generation
    cap in tokens.
    """
    from stddial_book.rl.gradcheck import identity_check

    eps = check_number(eps, "eps")
    if not eps > 0:
        raise ValueError(f"eps must be > 0; got {eps}.")
    gaps = []
    for group in groups:
        out = identity_check(model, group, recipe.replace(std_eps=eps), max_new_tokens, reference=recipe)
        gaps.append(abs((1 / out["norm_ratio"] - 1) - eps / out["group_std"]))
    return max(gaps)


def drift_numbers(summary: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Chapter 4: the numbers the text cites from :func:`stddial_book.rl.gradcheck.drift_summary`.

    Per step s: ``clipped_s`` (share of tokens clipped), ``groups_clipped_s`` (share of groups
    with a clipped token), ``dev_s`` and ``ratio_dev_s`` (median deviation from the identity,
    with the clip and with it switched off). At the first step where the clip binds:
    ``first_clip_step``, ``first_clip_share``, ``first_clip_groups``, ``first_clip_high`` (the
    part of the clipped tokens on the high side), ``dev_clipped_groups`` and
    ``dev_unclipped_groups`` (median deviation of the groups with and without a clipped token);
    NaN when the clip never binds. At the last step: ``clipped_last``, ``dev_last``,
    ``ratio_dev_last``.

    ``summary`` is the non-empty list of per-step rows that
    :func:`~stddial_book.rl.gradcheck.drift_summary` returns.
    """
    if isinstance(summary, Mapping) or not isinstance(summary, Sequence) or not summary:
        raise TypeError("summary must be the non-empty list drift_summary returns.")
    numbers: dict[str, float] = {}
    for row in summary:
        s = int(row["step"])
        numbers.update(
            {
                f"clipped_{s}": row["clipped"],
                f"groups_clipped_{s}": row["groups_clipped"],
                f"dev_{s}": row["rel_error_median"],
                f"ratio_dev_{s}": row["ratio_error_median"],
            }
        )
    first = next((row for row in summary if row["clipped"] > 0), None)
    nan = float("nan")
    numbers.update(
        {
            "first_clip_step": int(first["step"]) if first else nan,
            "first_clip_share": first["clipped"] if first else nan,
            "first_clip_groups": first["groups_clipped"] if first else nan,
            "first_clip_high": first["clipped_high"] / first["clipped"] if first else nan,
            "dev_clipped_groups": first["rel_error_median_clipped_groups"] if first else nan,
            "dev_unclipped_groups": first["rel_error_median_unclipped_groups"] if first else nan,
        }
    )
    last = summary[-1]
    numbers.update(
        {
            "clipped_last": last["clipped"],
            "dev_last": last["rel_error_median"],
            "ratio_dev_last": last["ratio_error_median"],
        }
    )
    return numbers


def _check_steps(steps: int, lr: float) -> tuple[int, float]:
    steps, lr = check_int(steps, "steps", minimum=1), check_number(lr, "lr")
    if not (lr > 0 and math.isfinite(lr)):
        raise ValueError(f"lr must be a positive number; got {lr}.")
    return steps, lr


def clip_shares(model, groups, recipe, max_new_tokens: int, steps: int, lr: float) -> list[dict[str, float]]:
    """Chapter 4: the share of tokens the clip removes, low and high side, before each Adam step.

    The same steps as :func:`stddial_book.rl.gradcheck.drift_study` (Adam on the mean of the groups'
    losses, ratios against the policy that sampled them, ``model`` left unchanged) but without the
    identity's per-sample scores, so it is cheap. Row s is measured after s steps: ``step``,
    ``low`` (tokens with A < 0 and ρ < 1 − ε_low), ``high`` (A > 0 and ρ > 1 + ε_high), both as
    shares of all the groups' tokens (drift_summary's ``clipped`` is low + high).

    ``groups`` is a non-empty list of :class:`~stddial_book.rl.gradcheck.GroupBatch`; ``recipe`` the
    :class:`~stddial_book.theory.recipes.Recipe` whose loss and clip range are used;
    ``max_new_tokens`` is L_max, the generation cap in tokens; ``steps`` the Adam steps (at least 1)
    and ``lr`` their positive learning rate.
    """
    import torch

    from stddial_book.rl.gradcheck import check_groups, policy_steps, recipe_loss

    steps, lr = _check_steps(steps, lr)
    check_groups(groups)
    model = copy.deepcopy(model)
    tokens = np.array([float(g.mask.sum()) for g in groups])
    rows = []
    for step, old in policy_steps(model, groups, recipe, max_new_tokens, steps, lr):
        with torch.no_grad():
            metrics = [recipe_loss(model, g, recipe, max_new_tokens, o).metrics for g, o in zip(groups, old)]
        shares = {
            side: float(np.dot([m[f"clip_ratio/{side}_mean"] for m in metrics], tokens) / tokens.sum())
            for side in ("low", "high")
        }
        rows.append({"step": step, **shares})
    return rows


def drift_after(
    model, groups, recipe, max_new_tokens: int, steps: int, lr: float, measured: Sequence[int] | None = None
) -> dict[str, np.ndarray]:
    """Chapter 4: :func:`stddial_book.rl.gradcheck.drift_study`'s rows for its last step only.

    Takes the same ``steps`` Adam steps on all ``groups`` (on a copy of ``model``), then measures
    only the groups whose indices are in ``measured`` (default: all) with
    :func:`stddial_book.rl.gradcheck.identity_drift`. Skipping the earlier steps' measurements, and
    measuring a subset, is what makes it cheap. Returns the same columns as ``drift_study``, so
    :func:`stddial_book.rl.gradcheck.drift_summary` reads it.

    ``recipe`` is the :class:`~stddial_book.theory.recipes.Recipe` whose loss is stepped and
    measured; ``max_new_tokens`` is L_max, the generation cap in tokens; ``steps`` is at least 1 and
    ``lr``, Adam's learning rate, positive.
    """
    from stddial_book.rl.gradcheck import check_groups, identity_drift, move_policy

    steps, lr = _check_steps(steps, lr)
    check_groups(groups)
    indices = list(range(len(groups))) if measured is None else [check_int(i, "measured", minimum=0) for i in measured]
    if not indices or max(indices) >= len(groups):
        raise ValueError(f"measured must hold indices of the {len(groups)} groups; got {indices}.")
    model = copy.deepcopy(model)
    old = move_policy(model, list(groups), recipe, max_new_tokens, steps, lr)
    rows = []
    for index in indices:
        group = groups[index]
        drift = identity_drift(model, group, recipe, max_new_tokens, old[index], split=True)
        rows.append({"step": steps, "group": index, "tokens": int(group.mask.sum()), **drift})
    return {key: np.array([row[key] for row in rows]) for key in rows[0]}
