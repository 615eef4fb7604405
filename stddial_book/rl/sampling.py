"""What reaches the update: the silent-group filter, DAPO's dynamic sampling, overlong handling.

* :func:`nonsilent_groups` marks groups whose samples do not all agree **on correctness**
  (not on a shaped reward: a length penalty can make a group of all-wrong samples look mixed).
* :class:`DynamicSampler` keeps drawing rollout rounds until the batch holds ``num_groups``
  non-silent groups, with a cap on rounds, and counts every sample generated, kept and
  discarded: DAPO's real cost (Yu et al., 2025, dynamic sampling). It is the refill's one
  implementation: the trainer's, the allocation rule "dapo"'s
  (:class:`~stddial_book.rl.allocation_adaptive.DynamicSampling`) and the controlled run's.
* :func:`overlong_penalty` is DAPO's soft length penalty: 0 up to L_max − L_cache, falling
  linearly to −1 across the cache band, −1 beyond (overlong filtering, which drops truncated
  samples from the loss, is the ``truncated`` mask of :func:`stddial_book.rl.losses.policy_loss`).
* :func:`rows_by_prompt` and :func:`kept_rows` turn the samples an allocation rule drew in one step
  (Part V) into groups: one per prompt, its draws merged, and the rows of the groups it keeps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from stddial_book.core.checks import check_binary, check_group_size, check_int, split_groups, to_numpy

__all__ = ["nonsilent_groups", "overlong_penalty", "SamplingCost", "DynamicSampler", "rows_by_prompt", "kept_rows"]


def nonsilent_groups(correct, group_size: int | Sequence[int]) -> np.ndarray:
    """Boolean per group: true when 0 < k < G, with k the number of correct samples.

    ``correct`` is the batch's flat 0/1 correctness, one flag per sample, each group's samples
    contiguous.

    ``group_size`` is one G for every group, or one size per group (ragged groups, contiguous,
    summing to the batch)."""
    if isinstance(group_size, (list, tuple, np.ndarray)):
        arr = to_numpy(correct, "correct")
        check_binary(arr, "correct")
        sizes = np.array([check_group_size(g, "each group size") for g in np.asarray(group_size).tolist()])
        if sizes.sum() != arr.size or arr.ndim != 1:
            raise ValueError(
                f"the group sizes sum to {int(sizes.sum())} but {arr.size} correctness flags were given; "
                "pass a flat batch and one size per group covering it."
            )
        k = np.add.reduceat(arr, np.concatenate([[0], np.cumsum(sizes)[:-1]]))
        return (k > 0) & (k < sizes)
    size = check_group_size(group_size)
    arr = to_numpy(correct, "correct")
    check_binary(arr, "correct")
    k = split_groups(arr, size, "correctness flags").sum(axis=1)
    return (k > 0) & (k < size)


def overlong_penalty(lengths, max_new_tokens: int, overlong_cache: int) -> np.ndarray:
    """DAPO's soft overlong penalty for completions of the given lengths (in tokens).

    0 for length ≤ L_max − L_cache; (L_max − L_cache − length) / L_cache inside the band;
    −1 for length ≥ L_max (a sample cut off at the cap).

    ``lengths`` are the completions' lengths in tokens (whole numbers ≥ 0, e.g. a
    :class:`~stddial_book.rl.rollout.Rollout`'s ``lengths``); ``max_new_tokens`` is L_max and
    ``overlong_cache`` L_cache, the band's width, in tokens (0 < L_cache ≤ L_max).
    """
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1)
    overlong_cache = check_int(overlong_cache, "overlong_cache")
    if overlong_cache <= 0 or overlong_cache > max_new_tokens:
        raise ValueError(
            f"overlong_cache (L_cache = {overlong_cache}) must lie in (0, max_new_tokens = {max_new_tokens}]; "
            "DAPO used L_cache = 4096 with L_max = 20480."
        )
    ell = to_numpy(lengths, "lengths")
    if np.any(ell < 0) or np.any(ell != np.round(ell)):
        raise ValueError("lengths must be non-negative whole token counts (Rollout.lengths).")
    start = max_new_tokens - overlong_cache
    return np.clip((start - ell) / overlong_cache, -1.0, 0.0)


@dataclass
class SamplingCost:
    """Groups and samples generated, kept and discarded by dynamic sampling, and the rounds it took.

    Discarded groups are of two kinds: *silent* ones (all samples agree: what the filter is for)
    and *surplus* mixed ones (drawn when the batch was already full). Rounds sized to the groups
    still missing never draw a surplus; the split makes that checkable.

    ``rounds`` counts the calls of ``draw``. ``groups_generated`` and ``samples_generated`` count
    everything drawn; ``groups_kept`` and ``samples_kept`` what reached the batch; ``groups_silent``
    and ``samples_silent`` the silent groups discarded; ``groups_surplus`` and ``samples_surplus``
    the surplus mixed groups discarded. ``hit_cap`` is true when the batch came back short (the round
    cap reached or no prompt left). All start at zero (false).
    """

    rounds: int = 0
    groups_generated: int = 0
    groups_kept: int = 0
    groups_silent: int = 0
    groups_surplus: int = 0
    samples_generated: int = 0
    samples_kept: int = 0
    hit_cap: bool = False
    samples_silent: int = 0
    samples_surplus: int = 0

    def __post_init__(self) -> None:
        for name in (
            "rounds",
            "groups_generated",
            "groups_kept",
            "groups_silent",
            "groups_surplus",
            "samples_generated",
            "samples_kept",
            "samples_silent",
            "samples_surplus",
        ):
            setattr(
                self,
                name,
                check_int(
                    getattr(self, name), f"SamplingCost.{name}", minimum=0, hint="It counts rounds, groups or samples."
                ),
            )
        if not isinstance(self.hit_cap, (bool, np.bool_)):
            raise TypeError(f"SamplingCost.hit_cap must be True or False; got {type(self.hit_cap).__name__}.")
        if self.groups_kept > self.groups_generated or self.samples_kept > self.samples_generated:
            raise ValueError(
                "SamplingCost cannot keep more than it generated: groups_kept <= groups_generated and "
                "samples_kept <= samples_generated."
            )

    @property
    def samples_discarded(self) -> int:
        return self.samples_generated - self.samples_kept

    @property
    def generated_per_kept(self) -> float:
        """Samples generated per sample kept; ``inf`` when nothing was kept (an infinite cost)."""
        return self.samples_generated / self.samples_kept if self.samples_kept else float("inf")


#: The most rounds :class:`DynamicSampler` may be allowed: each round calls ``draw`` once.
MAX_ROUNDS = 100_000


@dataclass
class DynamicSampler:
    """DAPO's dynamic sampling: draw rounds of groups until ``num_groups`` non-silent ones are kept.

    ``draw(round_index, num_groups)`` must return ``(batch, correct)`` for one round of
    ``num_groups`` groups: any per-sample batch object supporting ``batch[indices]`` (numpy fancy
    indexing) and a flat 0/1 array of correctness, groups contiguous. Each round asks for exactly
    the groups still missing, so with a silent fraction f the expected cost is 1/(1 − f) groups
    generated per group kept (chapter 7) and no mixed group is wasted. If ``draw`` returns more
    groups than asked, the surplus mixed ones are dropped and counted. If ``max_rounds`` pass
    first, or ``draw`` returns an empty round (no prompt left to draw), the batch is returned short
    and ``cost.hit_cap`` is set (verl's ``max_num_gen_batches``).

    ``group_size`` is G, the samples per group when ``draw`` gives no sizes; ``cost`` is the
    :class:`SamplingCost` of the last :meth:`fill` (empty until then; each fill replaces it).
    """

    num_groups: int
    group_size: int
    max_rounds: int = 8
    cost: SamplingCost = field(default_factory=SamplingCost)

    def __post_init__(self) -> None:
        check_group_size(self.group_size)
        check_int(self.num_groups, "num_groups")
        check_int(self.max_rounds, "max_rounds")
        if self.num_groups < 1:
            raise ValueError(f"num_groups must be at least 1; got {self.num_groups}.")
        if not 1 <= self.max_rounds <= MAX_ROUNDS:  # a draw that keeps returning silent groups would loop that often
            raise ValueError(
                f"max_rounds must be between 1 and {MAX_ROUNDS} (verl caps DAPO's refill at a few rounds); "
                f"got {self.max_rounds}."
            )

    def fill(self, draw: Callable[[int, int], tuple]) -> tuple[list[object], SamplingCost]:
        """Run rounds until full or capped; returns the kept per-round
        slices and the cost.

        ``draw`` may also return ``(batch, correct, sizes)``: one size per group of the round
        (ragged groups); the groups are then kept or dropped whole, whatever their sizes."""
        cost = SamplingCost()
        kept: list[object] = []
        if not callable(draw):
            raise TypeError(
                f"draw must be a function (round_index, num_groups) -> (batch, correct); got {type(draw).__name__}."
            )
        for round_index in range(int(self.max_rounds)):
            missing = int(self.num_groups) - cost.groups_kept
            batch, correct, sizes = self._checked_round(draw(round_index, missing))
            if correct.size == 0:
                # the source has no prompt left to draw this step
                break
            mixed = nonsilent_groups(correct, self.group_size if sizes is None else sizes)
            sizes = np.full(len(mixed), int(self.group_size)) if sizes is None else np.asarray(sizes)
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            cost.rounds += 1
            cost.groups_generated += len(mixed)
            cost.samples_generated += len(correct)
            cost.groups_silent += int((~mixed).sum())
            cost.samples_silent += int(sizes[~mixed].sum())
            mixed_index = np.flatnonzero(mixed)
            take = mixed_index[:missing]
            cost.groups_surplus += len(mixed_index) - len(take)
            cost.samples_surplus += int(sizes[mixed_index[missing:]].sum())
            if len(take):
                # the kept groups' rows, in order: 0, 1, ... along them, each group shifted to its start
                lengths = sizes[take]
                rows = np.arange(lengths.sum()) + np.repeat(starts[take] - (np.cumsum(lengths) - lengths), lengths)
                kept.append(_index(batch, rows))
                cost.groups_kept += len(take)
                cost.samples_kept += len(rows)
            if cost.groups_kept == self.num_groups:
                break
        cost.hit_cap = cost.groups_kept < self.num_groups
        self.cost = cost
        return kept, cost

    @staticmethod
    def _checked_round(drawn) -> tuple[object, np.ndarray, list[int] | None]:
        """One round's ``(batch, correct[, sizes])`` from ``draw``, checked: one flag per row."""
        if not isinstance(drawn, (tuple, list)) or len(drawn) not in (2, 3):
            raise TypeError(f"draw must return a pair (batch, correct); got {type(drawn).__name__} {drawn!r:.60}.")
        batch, correct = drawn[0], drawn[1]
        sizes = drawn[2] if len(drawn) == 3 else None
        if correct is None:
            raise TypeError("draw returned correct=None; return the 0/1 correctness of each sample.")
        correct = np.asarray(correct)
        if correct.size and hasattr(batch, "__len__") and len(batch) != correct.size:
            raise ValueError(
                f"draw returned a batch of {len(batch)} "
                f"rows with {correct.size} correctness "
                "flags; return one flag per sample (row) "
                "of the batch."
            )
        return batch, correct, None if sizes is None else [int(g) for g in sizes]


def _index(batch, rows: np.ndarray):
    """``batch[rows]``, or a ``TypeError`` that says what ``draw``'s batch must support."""
    try:
        return batch[rows]
    except (TypeError, IndexError) as err:
        raise TypeError(
            "draw's batch must support numpy fancy indexing "
            "(batch[indices]), as a numpy array or the "
            f"trainer's Batch does; got {type(batch).__name__} "
            f"({err})."
        ) from None


def rows_by_prompt(prompt_index) -> np.ndarray:
    """An order of a step's rows that makes each prompt's rows one contiguous run, prompts in the
    order they were first drawn, rows in the order drawn: a prompt drawn in several rounds (a
    screen, then its continuation) becomes one group, as the pool history records it.
    ``prompt_index`` holds each row's prompt (a pool index), in the order drawn."""
    prompt_index = np.asarray(prompt_index)
    _, first, where = np.unique(prompt_index, return_index=True, return_inverse=True)
    return np.argsort(first[where], kind="stable")


def kept_rows(prompt_index, correct, prompts, group_sizes, num_correct) -> np.ndarray:
    """The rows forming the groups an allocation rule keeps (``prompts[j]`` with ``group_sizes[j]``
    samples, ``num_correct[j]`` of them correct), each group contiguous, in the rule's order.

    A group as large as everything drawn for its prompt is all of it; a smaller one (Reinforce-Ada's
    balanced group) is the first ``num_correct`` correct and the first wrong samples drawn.
    ``prompt_index`` and ``correct`` hold each drawn row's prompt and 0/1 correctness; ``prompts``,
    ``group_sizes`` and ``num_correct`` are the kept groups' prompts, sizes G and k (as in an
    :class:`~stddial_book.rl.allocation_base.Allocation`)."""
    prompt_index, correct = np.asarray(prompt_index), np.asarray(correct)
    out = []
    for prompt, size, k in zip(
        np.asarray(prompts).tolist(), np.asarray(group_sizes).tolist(), np.asarray(num_correct).tolist()
    ):
        mine = np.flatnonzero(prompt_index == prompt)
        if len(mine) != size:
            right, wrong = mine[correct[mine] > 0][:k], mine[correct[mine] == 0][: size - k]
            mine = np.sort(np.concatenate([right, wrong]))
        if len(mine) != size or int(correct[mine].sum()) != k:
            raise ValueError(f"prompt {prompt}: the rule kept {size} samples, {k} correct, which were not drawn.")
        out.append(mine)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
