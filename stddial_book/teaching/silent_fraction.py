"""The fraction of a prompt pool's groups that are silent (chapters 5 and 7).

The engine's :func:`stddial_book.corpora.histograms.silent_fraction` works on
a histogram of k of n over a whole corpus and checks its input;
tests/test_teaching.py ties this version to it.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["pool_silent_fraction"]


def pool_silent_fraction(
    num_correct: np.ndarray,
    num_rollouts: int,
    group_size: int,
    subsample: bool = False,
) -> float:
    """Expected fraction of silent groups of G when each prompt of a pool,
    solved k times of n stored samples, draws one group.

    A group is silent when its G samples are all right or all wrong.
    ``num_correct`` holds k for each prompt, ``num_rollouts`` is n and
    ``group_size`` is G. With ``subsample`` true each group is G of the
    n stored samples; by default, G fresh draws at p = k/n.
    """
    k, n, G = np.asarray(num_correct), num_rollouts, group_size
    if subsample:  # G of the n stored samples, without replacement
        draws = math.comb(n, G)
        all_right = np.array([math.comb(int(j), G) / draws for j in k])
        all_wrong = np.array([math.comb(n - int(j), G) / draws for j in k])
    else:  # G fresh Bernoulli draws at the solve rate p = k/n
        p = k / n
        all_right, all_wrong = p**G, (1 - p) ** G  # P(silent) = p^G + (1−p)^G
    return float(np.mean(all_right + all_wrong))
