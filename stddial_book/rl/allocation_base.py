"""The record every allocation rule returns, and the checks and drawing steps they share (Part V).

An :class:`Allocation` is one step's spending in one currency, generated samples: the groups that
reach the update (prompt, G, k) and where every other generated sample went (a silent group thrown
away, a surplus group or sample dropped). ``draw(prompt_ids, sizes) -> num_correct`` is the only
contact with the model: it samples ``sizes[j]`` completions of prompt ``prompt_ids[j]`` and returns
how many were correct.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from stddial_book.core.checks import check_int, shown
from stddial_book.rl.pool_state import PoolState

__all__ = ["Allocation", "Draw"]

#: ``draw(prompt_ids, sizes) -> num_correct``: rewards for one round of groups.
Draw = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _ints(values=()) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


@dataclass
class Allocation:
    """One step's groups and costs. ``prompts``, ``group_sizes``, ``num_correct``: the groups used for
    the update. ``drawn_*``: every draw made (screening and redraws included), one entry per prompt
    per round; ``rounds``: calls of ``draw``. ``generated`` = ``kept`` + ``discarded_silent`` +
    ``discarded_surplus`` samples.

    In detail: ``prompts`` holds the pool indices of the kept groups, ``group_sizes`` their sizes G
    and ``num_correct`` their k; ``drawn_prompts``, ``drawn_sizes`` and ``drawn_correct`` hold the
    prompt, the samples drawn and the correct ones of every draw; ``discarded_silent`` and
    ``discarded_surplus`` count the samples thrown away in silent and in surplus groups. All start
    empty (zero)."""

    prompts: np.ndarray = field(default_factory=_ints)
    group_sizes: np.ndarray = field(default_factory=_ints)
    num_correct: np.ndarray = field(default_factory=_ints)
    drawn_prompts: np.ndarray = field(default_factory=_ints)
    drawn_sizes: np.ndarray = field(default_factory=_ints)
    drawn_correct: np.ndarray = field(default_factory=_ints)
    discarded_silent: int = 0
    discarded_surplus: int = 0
    rounds: int = 0

    @property
    def generated(self) -> int:
        """Samples generated, every round and screening included."""
        return int(self.drawn_sizes.sum())

    @property
    def kept(self) -> int:
        """Samples in the groups that reach the update."""
        return int(self.group_sizes.sum())

    @property
    def signal_samples(self) -> int:
        """Kept samples in mixed groups (0 < k < G): the ones that move the policy."""
        mixed = (self.num_correct > 0) & (self.num_correct < self.group_sizes)
        return int(self.group_sizes[mixed].sum())

    def add_draw(self, ids: np.ndarray, sizes: np.ndarray, correct: np.ndarray) -> None:
        """Append one round's draws to the record."""
        self.drawn_prompts = np.concatenate([self.drawn_prompts, ids])
        self.drawn_sizes = np.concatenate([self.drawn_sizes, sizes])
        self.drawn_correct = np.concatenate([self.drawn_correct, correct])
        self.rounds += 1

    def keep(self, ids: np.ndarray, sizes: np.ndarray, correct: np.ndarray) -> None:
        """Append groups that reach the update."""
        self.prompts = np.concatenate([self.prompts, _ints(ids)])
        self.group_sizes = np.concatenate([self.group_sizes, _ints(sizes)])
        self.num_correct = np.concatenate([self.num_correct, _ints(correct)])

    def per_prompt_generated(self, num_prompts: int) -> np.ndarray:
        """Samples generated for each prompt of a pool of ``num_prompts``."""
        return np.bincount(self.drawn_prompts, weights=self.drawn_sizes, minlength=num_prompts).astype(np.int64)


def checked_budget(budget) -> int:
    """A budget of samples: a whole number >= 0."""
    return check_int(budget, "budget", minimum=0, hint="It counts generated samples for one step.")


def checked_candidates(state: PoolState, candidates) -> np.ndarray:
    """The prompts a rule may spend on this step: ``candidates`` (distinct pool indices), default all."""
    if not isinstance(state, PoolState):
        raise TypeError(f"state must be a PoolState (see new_pool_state); got {type(state).__name__}.")
    if candidates is None:
        return np.arange(state.num_prompts)
    arr = np.asarray(candidates)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise ValueError(f"candidates must be a 1-D array of prompt indices; got {shown(candidates)}.")
    if arr.size and (arr.min() < 0 or arr.max() >= state.num_prompts or len(np.unique(arr)) != arr.size):
        raise ValueError(f"candidates must be distinct indices in 0..{state.num_prompts - 1}; got {shown(arr)}.")
    return arr.astype(np.int64)


def checked_rng(rng) -> np.random.Generator:
    """``rng`` as a numpy Generator: a Generator, a seed, or None (a fixed seed, 0)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng(0)
    return np.random.default_rng(check_int(rng, "rng", minimum=0, hint="Pass a numpy Generator or a seed."))


def run_draw(draw: Draw, ids: np.ndarray, sizes: np.ndarray, record: Allocation) -> np.ndarray:
    """Call ``draw`` for one round, check its answer, log the round in ``record``; returns k per group."""
    if not callable(draw):
        raise TypeError(f"draw must be a function (prompt_ids, sizes) -> num_correct; got {type(draw).__name__}.")
    ids, sizes = _ints(ids), _ints(sizes)
    if ids.size == 0:
        return _ints()
    answer = np.asarray(draw(ids.copy(), sizes.copy()))
    if answer.shape != ids.shape or answer.dtype.kind not in "iuf" or np.any(answer != np.round(answer)):
        raise ValueError(f"draw must return one whole count per prompt (shape {ids.shape}); got {shown(answer)}.")
    correct = answer.astype(np.int64)
    if np.any(correct < 0) or np.any(correct > sizes):
        raise ValueError("draw returned a count of correct samples below 0 or above the group size.")
    record.add_draw(ids, sizes, correct)
    return correct


def one_round(sizes: np.ndarray, draw: Draw) -> Allocation:
    """A plan-ahead rule's step: draw every planned group once and send all of them to the update
    (a silent group stays in the batch with zero advantage, as in plain GRPO)."""
    record = Allocation()
    ids = np.flatnonzero(sizes)
    correct = run_draw(draw, ids, sizes[ids], record)
    record.keep(ids, sizes[ids], correct)
    return record
