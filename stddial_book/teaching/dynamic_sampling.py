"""DAPO's dynamic sampling: keep the groups that are not silent, redraw until
the batch is full (chapter 12).

The engine's :class:`stddial_book.rl.sampling.DynamicSampler` runs the same
loop, checks what ``draw`` returns and counts silent and surplus groups
separately (:class:`~stddial_book.rl.sampling.SamplingCost`);
tests/test_teaching.py ties the two together. It is the engine's only refill:
the trainer, the allocation rule "dapo" and the controlled run all call it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["dynamic_sampling"]


def dynamic_sampling(
    draw: Callable[[int, int], tuple[np.ndarray, np.ndarray]],
    num_groups: int,
    group_size: int,
    max_rounds: int = 8,
) -> tuple[list[np.ndarray], int]:
    """Fill a batch with ``num_groups`` groups that are not silent.

    ``draw``, called as ``draw(round_index, missing)``, samples ``missing``
    new groups and returns ``(samples, correct)``: the samples (anything
    indexable by rows, groups of G contiguous) and one 0/1 flag a sample;
    no flags at all means nothing is left to draw. ``group_size`` is G;
    ``max_rounds`` caps the rounds of drawing (8 by default). Returns the
    kept groups and the number of samples generated, discarded ones
    included (DAPO's cost).
    """
    G, kept, generated = group_size, [], 0
    for round_index in range(max_rounds):  # verl caps the refill rounds
        missing = num_groups - len(kept)
        samples, correct = draw(round_index, missing)
        if len(correct) == 0:  # nothing left to draw
            break
        generated += len(correct)
        k = np.asarray(correct).reshape(-1, G).sum(axis=1)
        for group in np.flatnonzero((k > 0) & (k < G)):  # 0 < k < G
            if len(kept) < num_groups:  # a surplus group is dropped
                kept.append(samples[group * G : (group + 1) * G])
        if len(kept) == num_groups:
            break
    return kept, generated
