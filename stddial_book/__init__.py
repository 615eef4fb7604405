"""The Std Dial: GRPO, Dr. GRPO and DAPO as three settings of one dial.

The helper package of the book. Modules, one topic each:

* :mod:`stddial_book.identity`: closed forms (σ, update weights, silent probability, tries needed);
* :mod:`stddial_book.recipes`: :class:`Recipe`, the presets and :func:`group_advantages`;
* :mod:`stddial_book.derivation`: the SymPy derivation chapter 3 displays;
* :mod:`stddial_book.losses`: the clipped surrogate, the three loss aggregations, the k3 KL;
* :mod:`stddial_book.tasks`: the addition task with its difficulty dial and verifier;
* :mod:`stddial_book.model`: the character tokenizer and the tiny Llama-style model;
* :mod:`stddial_book.rollout`: KV-cache sampling and one-pass completion log-probs;
* :mod:`stddial_book.gradcheck`: the identity on real autograd gradients (chapter 4);
* :mod:`stddial_book.profiles`: the ``quick`` (CPU) and ``full`` (GPU) run profiles;
* :mod:`stddial_book.plots`, :mod:`stddial_book.display`: the book's figures and notebook helpers.
* :mod:`stddial_book.sampling`, :mod:`stddial_book.train`, :mod:`stddial_book.runs`,
  :mod:`stddial_book.analysis`, :mod:`stddial_book.experiments`: the RL loop, its logs and their analysis;
* :mod:`stddial_book.solve_rates`: per-prompt solve-count tables and the silent fraction of real data;
* :mod:`stddial_book.resources`: where the shipped data (``stddial_book.data``) lives, checkout or wheel;
* :mod:`stddial_book.trl_bridge`: the dial as TRL ``GRPOConfig`` settings, and what TRL cannot express;
* :mod:`stddial_book.widgets`: the explorers (live with a kernel, self-contained HTML on the site);
* :mod:`stddial_book.edition`: what a build of the book used (the appendix page "This edition").

Build tooling, not lessons: ``_colab`` (the Colab notebooks from the chapters). The site's Sphinx
extensions (``_ext/``) and the screenshot script (``tools/``) live outside the package.
"""

from .identity import (
    bessel_factor,
    expected_group_std,
    expected_group_variance,
    expected_update_weight,
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
    "bessel_factor", "expected_group_std", "expected_group_variance", "expected_update_weight", "group_std",
    "mean_abs_advantage", "pass_rate", "silent_probability", "std_from_pass_rate",
    "tries_needed", "update_weight", "__version__",
]
