"""Problems and batches: the task's prompts encoded for the model, and the difficulty bucket of a prompt (chapter 9)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from stddial_book.rl.configs import TaskConfig, require_problems
from stddial_book.rl.model import CharCodec
from stddial_book.rl.tasks import Problem, make_split

__all__ = ["Batch", "GroupLayout", "group_sizes_of", "bucket_of", "make_problems", "encode_prompts"]


def bucket_of(problem: Problem) -> str:
    """The difficulty bucket of a problem: ``D{digits}``, its digit count.

    Chapter 9 measures accuracy by carries too; with the answer's digits
    reversed, carries barely change how hard a problem is for the model,
    while each extra digit does. ``problem`` is a
    :class:`~stddial_book.rl.tasks.Problem`.
    """
    if not isinstance(problem, Problem):
        name = type(problem).__name__
        raise TypeError(f"bucket_of takes a Problem; got {name}.")
    return f"D{problem.digits}"


def make_problems(task: TaskConfig) -> tuple[list[Problem], list[Problem]]:
    """Train and held-out problems for every digit count of ``task``, disjoint, deterministic."""
    if not isinstance(task, TaskConfig):
        raise TypeError(
            f"make_problems takes a TaskConfig (e.g. TaskConfig(digits=(2, 3))); got {type(task).__name__}."
        )
    train_set: list[Problem] = []
    heldout: list[Problem] = []
    n = len(task.digits)
    for i, digits in enumerate(task.digits):
        tr, he = make_split(
            digits,
            task.num_train // n + (i < task.num_train % n),
            task.num_heldout // n + (i < task.num_heldout % n),
            seed=task.seed + 7919 * i,
        )
        train_set += tr
        heldout += he
    if n > 1:  # interleave the digit counts, so any prefix (SFT's probe set) mixes them too
        rng = np.random.default_rng(task.seed)
        train_set = [train_set[i] for i in rng.permutation(len(train_set))]
        heldout = [heldout[i] for i in rng.permutation(len(heldout))]
    return train_set, heldout


def encode_prompts(problems: Sequence[Problem], codec: CharCodec, device: torch.device | str = "cpu"):
    """Left-padded prompt ids and mask for a list of problems (one length per D needs no padding).

    ``problems`` are the :class:`~stddial_book.rl.tasks.Problem` objects, one row each; ``codec`` is
    the :class:`~stddial_book.rl.model.CharCodec` that encodes their prompts; ``device`` is where the two
    tensors, ids (rows, width) and mask (rows, width, bool, false on padding), are put (default CPU).
    """
    problems = require_problems(problems, "problems")
    if not isinstance(codec, CharCodec):
        raise TypeError(f"codec must be a CharCodec (model.CharCodec()); got {type(codec).__name__}.")
    encoded = [codec.encode(p.prompt) for p in problems]
    width = max(len(e) for e in encoded)
    ids = torch.full((len(encoded), width), codec.pad_id, dtype=torch.long)  # cpu-then-move
    mask = torch.zeros((len(encoded), width), dtype=torch.bool)  # cpu-then-move
    for row, e in enumerate(encoded):
        ids[row, width - len(e) :] = torch.tensor(e)  # cpu-then-move
        mask[row, width - len(e) :] = True
    return ids.to(device), mask.to(device)


@dataclass
class Batch:
    """A rollout batch, one row per sample, each group (G rows, or its own size) contiguous;
    indexable by row arrays.

    The tensors are those of a :class:`~stddial_book.rl.rollout.Rollout`: ``prompt_ids`` and
    ``prompt_mask`` (rows, P; the mask false on left padding), ``completion_ids`` and ``mask`` (rows,
    T; the mask true on completion tokens, EOS included), ``truncated`` (one bool per row: no EOS
    within the cap) and ``logprobs`` (rows, T), log π_old of each sampled token as the sampler
    recorded it. The arrays
    have one entry per row: ``correct``, the verifier's 1 (exact answer + EOS) or 0; ``rewards``, the
    recipe's reward values plus the overlong penalty if it is on; ``buckets``, the difficulty bucket
    (:func:`bucket_of`); ``prompt_index``, the index of the row's prompt in the training problems.
    """

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor
    mask: torch.Tensor
    truncated: torch.Tensor
    logprobs: torch.Tensor  # log π_old of each sampled token, recorded by the sampler
    correct: np.ndarray  # verifier: 1 exact answer + EOS, else 0
    rewards: np.ndarray  # the recipe's reward values, plus the overlong penalty if on
    buckets: np.ndarray  # difficulty bucket per row
    prompt_index: np.ndarray  # index of each row's prompt in the training problems

    def __len__(self) -> int:
        return len(self.correct)

    def __getitem__(self, rows) -> Batch:
        rows = np.asarray(rows)
        t = torch.as_tensor(rows, dtype=torch.long, device=self.prompt_ids.device)
        return Batch(
            self.prompt_ids[t],
            self.prompt_mask[t],
            self.completion_ids[t],
            self.mask[t],
            self.truncated[t],
            self.logprobs[t],
            self.correct[rows],
            self.rewards[rows],
            self.buckets[rows],
            self.prompt_index[rows],
        )

    @staticmethod
    def cat(parts: Sequence[Batch], pad_id: int) -> Batch:
        """Concatenate batches, left-padding prompts and right-padding completions to one width."""
        if len(parts) == 0:
            raise ValueError("Batch.cat needs at least one batch to concatenate; got none.")
        if len(parts) == 1:
            return parts[0]
        pw = max(p.prompt_ids.shape[1] for p in parts)
        cw = max(p.completion_ids.shape[1] for p in parts)

        def left(x, width, value):
            return torch.nn.functional.pad(x, (width - x.shape[1], 0), value=value)

        def right(x, width, value):
            return torch.nn.functional.pad(x, (0, width - x.shape[1]), value=value)

        return Batch(
            torch.cat([left(p.prompt_ids, pw, pad_id) for p in parts]),
            torch.cat([left(p.prompt_mask, pw, False) for p in parts]),
            torch.cat([right(p.completion_ids, cw, pad_id) for p in parts]),
            torch.cat([right(p.mask, cw, False) for p in parts]),
            torch.cat([p.truncated for p in parts]),
            torch.cat([right(p.logprobs, cw, 0.0) for p in parts]),
            np.concatenate([p.correct for p in parts]),
            np.concatenate([p.rewards for p in parts]),
            np.concatenate([p.buckets for p in parts]),
            np.concatenate([p.prompt_index for p in parts]),
        )


@dataclass(frozen=True)
class GroupLayout:
    """Where a batch's groups lie: ``size`` samples each (G), or one size per group (``sizes``,
    ragged groups). Groups are contiguous, in order, and cover the batch."""

    size: int | None = None
    sizes: tuple[int, ...] | None = None

    @staticmethod
    def of(group_size) -> GroupLayout:
        """The layout of one G for every group (an int) or of one size per group (a sequence)."""
        if isinstance(group_size, GroupLayout):
            return group_size
        if isinstance(group_size, (int, np.integer)):
            return GroupLayout(size=int(group_size))
        return GroupLayout(sizes=tuple(int(g) for g in group_size))

    @property
    def ragged(self) -> bool:
        return self.sizes is not None

    @property
    def group_size(self):
        """What :func:`~stddial_book.theory.recipes.group_advantages` takes: G or the sizes."""
        return list(self.sizes) if self.ragged else self.size

    def _starts(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)

    def num_groups(self, num_rows: int) -> int:
        return len(self.sizes) if self.ragged else num_rows // self.size

    def group_sizes(self, num_rows: int) -> np.ndarray:
        """The size of every group of a batch of ``num_rows`` samples."""
        return np.asarray(self.sizes) if self.ragged else np.full(num_rows // self.size, self.size)

    def rows(self, groups: np.ndarray) -> np.ndarray:
        """The sample rows of ``groups`` (group indices), group after group."""
        groups = np.asarray(groups, dtype=np.int64)
        if not self.ragged:
            return (groups[:, None] * self.size + np.arange(self.size)).reshape(-1)
        starts, sizes = self._starts(), np.asarray(self.sizes)
        if len(groups) == 0:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([np.arange(starts[g], starts[g] + sizes[g]) for g in groups])

    def span(self, group: int) -> slice:
        """The rows of one group, as a slice (groups are contiguous)."""
        if not self.ragged:
            return slice(group * self.size, (group + 1) * self.size)
        start = int(self._starts()[group])
        return slice(start, start + self.sizes[group])

    def group_of(self, rows: torch.Tensor) -> torch.Tensor:
        """The group index of each sample row (a tensor of rows)."""
        if not self.ragged:
            return rows // self.size
        owner = np.repeat(np.arange(len(self.sizes)), self.sizes)
        return torch.as_tensor(owner, device=rows.device)[rows]

    def first_row(self, groups: torch.Tensor) -> torch.Tensor:
        """The first sample row of each group (a tensor of group indices): where its prompt is."""
        if not self.ragged:
            return groups * self.size
        return torch.as_tensor(self._starts(), device=groups.device)[groups]

    def split(self, values: np.ndarray) -> list[np.ndarray]:
        """``values`` (one per sample) cut into its groups."""
        if not self.ragged:
            return list(np.asarray(values).reshape(-1, self.size))
        return np.split(np.asarray(values), np.cumsum(self.sizes)[:-1])


def group_sizes_of(prompt_index: np.ndarray) -> list[int]:
    """The sizes of a step's groups, read from the prompt of each row: a group is a run of rows of
    one prompt (a step draws distinct prompts, so two groups never share one). ``prompt_index``
    holds one prompt index per row, in batch order."""
    prompt_index = np.asarray(prompt_index)
    if len(prompt_index) == 0:
        return []
    cuts = np.flatnonzero(prompt_index[1:] != prompt_index[:-1]) + 1
    return np.diff(np.concatenate([[0], cuts, [len(prompt_index)]])).tolist()


def decode_completions(codec: CharCodec, ids: torch.Tensor) -> list[str]:
    return [codec.decode(row) for row in ids.tolist()]
