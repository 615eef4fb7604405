"""The numbers chapter 7 quotes about a prompt pool's solve counts, as dicts for ``glue_all``.

A pool is a :class:`stddial_book.corpora.histograms.KHistogram`: how many prompts had k = 0..n successes
out of n stored samples (Big-Math's k of 64, DeepScaleR's k of 128). The functions here only
combine :mod:`stddial_book.corpora.solve_tables`'s closed forms into the figures a page cites: the floor of
never- and always-solved prompts, the silent fraction at one group size, and each recipe's share
of the gradient budget in the source paper's bands (Bay and Yearick, 2026, §7).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from stddial_book.core.checks import check_group_size
from stddial_book.core.resources import data_path
from stddial_book.corpora.histograms import KHistogram, band_shares, gradient_budget, silent_fraction
from stddial_book.corpora.solve_tables import DEEPSCALER_TABLE, TABLES_FIX
from stddial_book.theory.recipes import DR_GRPO, GRPO

__all__ = ["pool_numbers", "budget_bands", "deepscaler_provenance"]


def _check_pool(hist: KHistogram) -> KHistogram:
    if not isinstance(hist, KHistogram):
        raise TypeError(f"hist must be a KHistogram (a k-of-n solve-count table); got {type(hist).__name__}.")
    if hist.num_prompts == 0:
        raise ValueError("the histogram holds no prompts.")
    return hist


def pool_numbers(hist: KHistogram, group_size: int = 8) -> dict[str, float]:
    """A pool at a glance (chapter 7): ``n`` prompts; the fractions ``never`` (k = 0) and
    ``always`` (k = n) solved and their sum ``irreducible`` (silent at every group size); the
    ``mean`` solve rate k/n; and the silent fraction at ``group_size``, as G fresh Bernoulli(k/n)
    draws (``silent_<G>``) and as G of the n stored samples drawn without replacement
    (``silent_<G>_sub``, the hypergeometric model; needs G ≤ n). ``hist`` is the pool's
    :class:`~stddial_book.corpora.histograms.KHistogram`, holding at least one prompt; ``group_size``
    is G (8 by default)."""
    hist = _check_pool(hist)
    G = check_group_size(group_size)
    if hist.num_rollouts < G:
        raise ValueError(
            f"group_size {G} exceeds the {hist.num_rollouts} stored samples per prompt, so it "
            "cannot be subsampled from them; use a group size up to num_rollouts."
        )
    counts = np.asarray(hist.counts, dtype=np.float64)
    n = counts.sum()
    return {
        "n": hist.num_prompts,
        "never": float(counts[0] / n),
        "always": float(counts[-1] / n),
        "irreducible": float((counts[0] + counts[-1]) / n),
        "mean": float(counts @ hist.solve_rates / n),
        f"silent_{G}": float(silent_fraction(hist, G)[0]),
        f"silent_{G}_sub": float(silent_fraction(hist, G, "hypergeometric")[0]),
    }


def budget_bands(hist: KHistogram, group_sizes: Sequence[int | None] = (None, 8)) -> dict[str, float]:
    """Each recipe's share of its gradient budget on the paper's extreme and medium prompts
    (:data:`stddial_book.corpora.histograms.PAPER_BANDS`), chapter 7.

    Keys ``ext_<r>`` and ``med_<r>`` for the large-group budget (``None`` in ``group_sizes``) and
    ``ext_<r>_<G>``, ``med_<r>_<G>`` at a group size G, with ``<r>`` ``grpo`` or ``dr``
    (Dr. GRPO). Dr. GRPO's shares are the same at every G (its expected weight p(1 − p)(G − 1)/G
    differs from the large-group one by a factor that cancels in a share). ``hist`` is the pool's
    :class:`~stddial_book.corpora.histograms.KHistogram`; ``group_sizes`` a non-empty list of G
    (the default: the large-group budget and G = 8).
    """
    hist = _check_pool(hist)
    if isinstance(group_sizes, (int, np.integer)) or group_sizes is None:
        raise TypeError(
            f"group_sizes must be a list of group sizes (None for the large-group budget); got {group_sizes!r}."
        )
    group_sizes = list(group_sizes) if isinstance(group_sizes, (list, tuple, np.ndarray)) else group_sizes
    if not isinstance(group_sizes, list) or not group_sizes:
        raise ValueError(
            "group_sizes must be a non-empty list of group sizes (None for the large-group budget), e.g. (None, 8)."
        )
    out: dict[str, float] = {}
    for G in group_sizes:
        suffix = "" if G is None else f"_{check_group_size(G)}"
        for short, recipe in (("dr", DR_GRPO), ("grpo", GRPO)):
            shares = band_shares(hist, gradient_budget(hist, recipe, G))
            out[f"ext_{short}{suffix}"] = shares["extreme"]
            out[f"med_{short}{suffix}"] = shares["medium"]
    return out


def deepscaler_provenance() -> dict:
    """Where the committed DeepScaleR tables come from (``source``: repository, commit, paper),
    their files' checksums, and how the union was formed (``union``: ``unique_problems``,
    ``texts_with_several_k``): the provenance file written with the tables (chapter 7)."""
    path = data_path("solve_rates", f"{DEEPSCALER_TABLE}.provenance.json")
    fix = TABLES_FIX
    try:
        provenance = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path} is missing; {fix}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not a readable JSON file ({err}); {fix}") from None
    if not isinstance(provenance, dict) or not {"source", "union"} <= set(provenance):
        raise ValueError(f"{path} lacks the 'source' and 'union' entries of the tables' provenance; {fix}")
    return provenance
