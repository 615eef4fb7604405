"""The Std Dial: GRPO, Dr. GRPO and DAPO as three settings of one dial.

The helper package of the book. Modules, one topic each:

* :mod:`stddial_book.identity`: closed forms (σ, update weights, silent probability, tries needed);
* :mod:`stddial_book.recipes`: :class:`Recipe`, the presets and :func:`group_advantages`;
* :mod:`stddial_book.derivation`: the SymPy derivation chapter 3 displays;
* :mod:`stddial_book.profiles`: the ``quick`` (CPU) and ``full`` (GPU) run profiles;
* :mod:`stddial_book.plots`: the book's figures.
"""

from .identity import (
    bessel_factor,
    expected_group_std,
    expected_group_variance,
    group_std,
    mean_abs_advantage,
    pass_rate,
    silent_probability,
    std_from_pass_rate,
    tries_needed,
    update_weight,
)
from .recipes import DAPO, DR_GRPO, GRPO, PRESETS, Recipe, get_recipe, group_advantages

__version__ = "0.1.0"

__all__ = [
    "DAPO", "DR_GRPO", "GRPO", "PRESETS", "Recipe", "get_recipe", "group_advantages",
    "bessel_factor", "expected_group_std", "expected_group_variance", "group_std",
    "mean_abs_advantage", "pass_rate", "silent_probability", "std_from_pass_rate",
    "tries_needed", "update_weight", "__version__",
]
