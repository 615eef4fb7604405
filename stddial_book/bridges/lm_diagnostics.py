"""The dial's diagnostics of one generation batch of a TRL run (chapter 15); the callback that computes them
on every step of any ``GRPOTrainer`` is :class:`~stddial_book.bridges.dial_diagnostics.DialDiagnostics`.

On each generation batch of TRL's ``GRPOTrainer`` (groups of G completions, contiguous), from which
completions passed the verifier and the advantages TRL computed:

* the silent fraction: groups whose G completions all passed or all failed (σ = 0, no update);
* the distribution of σ = sqrt(k(G − k))/G over groups, as counts of k = 0..G passes;
* the gradient mass by pass-rate band: each group enters the update with Σᵢ |Aᵢ| (twice its weight w
  in (1/G) Σᵢ Aᵢ gᵢ = w (ḡ₊ − ḡ₋)), summed over the groups whose pass rate falls in each band;
* the identity on the sampled batch: TRL's advantages against the book's
  (:func:`~stddial_book.theory.recipes.group_advantages` of the TRL-equivalent recipe), and each group's
  mean |A| against 2w of its pass rate (:func:`~stddial_book.theory.identity.update_weight`): σ for GRPO
  and DAPO up to Bessel's factor and TRL's 1e-4, σ² for Dr. GRPO. The closed form needs the reward TRL
  normalises to be the verifier's two values; with a format weight or DAPO's length penalty it is not,
  and the record says so. The gradient side (ḡ₊ − ḡ₋) is not measured here: it would take two extra
  backward passes per group on the language model; chapter 4 checks it on real gradients.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stddial_book.bridges.trl_differences import trl_equivalent_recipe
from stddial_book.theory.identity import update_weight
from stddial_book.theory.recipes import Recipe, as_recipe, group_advantages

__all__ = ["PASS_RATE_BANDS", "band_counts", "batch_diagnostics"]

#: Edges of the pass-rate bands of the gradient mass: [0, 1/4], (1/4, 1/2], (1/2, 3/4], (3/4, 1]. Silent groups
#: (p̂ = 0 or 1) fall in the edge bands; they carry no mass under the verifier's reward alone, but a shaped
#: reward (DAPO's length penalty) can spread their rewards and give them some.
PASS_RATE_BANDS = (0.0, 0.25, 0.5, 0.75, 1.0)


def _band_of(rates: np.ndarray) -> np.ndarray:
    """The index of each pass rate's band in :data:`PASS_RATE_BANDS`."""
    edges = PASS_RATE_BANDS
    return np.clip(np.searchsorted(edges, rates, side="left") - 1, 0, len(edges) - 2)


def band_counts(group_size: int) -> list[tuple[int, int]]:
    """For each band of :data:`PASS_RATE_BANDS`, the lowest and highest count k of ``group_size`` right that
    falls in it ((-1, -1) for a band no count reaches): what a band of the gradient mass is made of."""
    if not (isinstance(group_size, int) and group_size >= 1):
        raise ValueError(f"group_size must be a whole number >= 1 (got {group_size!r}).")
    k = np.arange(group_size + 1)
    band = _band_of(k / group_size)
    return [(int(k[band == b].min()), int(k[band == b].max())) if (band == b).any() else (-1, -1)
            for b in range(len(PASS_RATE_BANDS) - 1)]  # fmt: skip


def _band_masses(rates: np.ndarray, mass: np.ndarray) -> list[float]:
    """Each band's share of the batch's gradient mass (zeros when the batch carries none)."""
    edges = PASS_RATE_BANDS
    band = _band_of(rates)
    sums = np.array([mass[band == b].sum() for b in range(len(edges) - 1)])
    total = sums.sum()
    return (sums / total if total > 0 else sums).tolist()


def _identity_gap(
    rates: np.ndarray, mean_abs: np.ndarray, two_valued: bool, recipe: Recipe, group_size: int
) -> tuple[float | None, str]:
    """The largest |mean |A| − 2w(p̂)| over groups, or None with why not."""
    if not two_valued:
        return None, (
            "the reward TRL normalises is shaped (format weight or length penalty), not the verifier's two "
            "values, so the closed form 2w(p̂) does not apply"
        )
    expected = 2.0 * np.asarray(update_weight(rates, recipe, group_size=group_size))
    return float(np.max(np.abs(mean_abs - expected))), "mean |A| per group against 2w(p̂)"


def _booleans(passed: Any) -> np.ndarray:
    """``passed`` as a boolean array: booleans, or numbers that are all 0 or 1; anything else (``"no"``,
    which ``bool`` reads as True, or 0.5) is a ``TypeError`` naming the value."""
    if isinstance(passed, (str, bytes)):
        raise TypeError(f"passed must be a list of booleans, one per completion; got a string {passed!r:.40}.")
    values = np.asarray(passed)
    if values.dtype == bool:
        return values
    if values.dtype.kind in "iuf" and np.all((values == 0) | (values == 1)):
        return values.astype(bool)
    bad = next((v for v in values.ravel().tolist() if not (isinstance(v, (bool, int, float)) and v in (0, 1))), None)
    raise TypeError(
        f"passed must hold booleans (or 0 and 1), one per completion; found {type(bad).__name__} {bad!r:.40}."
    )


def batch_diagnostics(
    passed: Sequence[bool], rewards: Sequence[float], advantages: Sequence[float], group_size: int, recipe: Any
) -> dict[str, Any]:
    """The dial's diagnostics of one generation batch (see the module's docstring).

    ``passed`` holds, per completion, whether the verifier accepted it (booleans, or 0 and 1; groups of
    ``group_size``, G, contiguous); ``rewards`` the reward TRL normalised (the weighted sum of its reward
    functions) and ``advantages`` TRL's advantage, both per completion. ``recipe`` is the book recipe the
    run sets TRL to (a name or a ``Recipe``; its reward values define "two-valued").
    """
    recipe = as_recipe(recipe)
    passed = _booleans(passed)
    rewards = np.asarray(rewards, dtype=float)
    adv = np.asarray(advantages, dtype=float)
    if not (passed.shape == rewards.shape == adv.shape) or passed.size % group_size:
        raise ValueError(
            f"passed, rewards and advantages need one entry per completion, in whole groups of {group_size}; "
            f"got {passed.size}, {rewards.size}, {adv.size}."
        )
    k = passed.reshape(-1, group_size).sum(axis=1)
    rates = k / group_size
    sigma = np.sqrt(k * (group_size - k)) / group_size
    mass = np.abs(adv).reshape(-1, group_size).sum(axis=1)
    trl_recipe = trl_equivalent_recipe(recipe)
    book = np.asarray(group_advantages(rewards, group_size, trl_recipe))
    two_valued = bool(np.all(rewards == np.where(passed, recipe.reward_correct, recipe.reward_wrong)))
    gap, identity_note = _identity_gap(rates, mass / group_size, two_valued, trl_recipe, group_size)
    return {
        "groups": int(k.size),
        "pass_rate": float(passed.mean()),
        "silent_fraction": float(np.mean((k == 0) | (k == group_size))),
        "k_counts": np.bincount(k, minlength=group_size + 1).tolist(),
        "sigma_mean": float(sigma.mean()),
        "mass_by_band": _band_masses(rates, mass),
        "mass_in_silent": float(mass[(k == 0) | (k == group_size)].sum()),
        "advantage_gap": float(np.max(np.abs(adv - book))),
        "identity_gap": gap,
        "identity_note": identity_note,
    }
