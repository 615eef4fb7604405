"""The testbed's task: D-digit addition with a difficulty dial, and its verifier (chapter 9).

A prompt is two zero-padded D-digit operands, ``57+68=``; the answer is the sum's digits
reversed (least significant first, the order a carry propagates), then the end-of-sequence
marker: ``521`` + EOS. Difficulty has two knobs: the digit count D and the number of carries
the sum needs. The verifier gives reward 1 only for the exact answer followed by EOS, 0 for
anything else (a wrong digit, a missing EOS, trailing text).

Problem sets are deterministic given a seed, and :func:`make_split` returns train and held-out
sets that never share a problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

__all__ = ["EOS", "Problem", "count_carries", "make_problem", "sample_problems", "make_split",
           "reward", "rewards"]

#: The end-of-sequence marker of completions, as text (the tokenizer maps it to one id).
EOS = "<eos>"


@dataclass(frozen=True)
class Problem:
    """One addition problem: operands, its difficulty, the prompt text and the answer text."""

    a: int
    b: int
    digits: int
    carries: int

    @property
    def prompt(self) -> str:
        return f"{self.a:0{self.digits}d}+{self.b:0{self.digits}d}="

    @property
    def answer(self) -> str:
        """The sum's decimal digits reversed (no padding), without EOS."""
        return str(self.a + self.b)[::-1]


def count_carries(a: int, b: int) -> int:
    """The number of digit positions that produce a carry when adding ``a`` and ``b``."""
    carries = carry = 0
    while a or b:
        carry = 1 if a % 10 + b % 10 + carry >= 10 else 0
        carries += carry
        a, b = a // 10, b // 10
    return carries


def make_problem(a: int, b: int, digits: int) -> Problem:
    """The problem ``a + b`` with D = ``digits``; refuses operands that do not fit in D digits."""
    _check_digits(digits)
    if not (0 <= a < 10**digits and 0 <= b < 10**digits):
        raise ValueError(f"operands must lie in [0, 10^{digits}); got a={a}, b={b}.")
    return Problem(a, b, digits, count_carries(a, b))


def sample_problems(num: int, digits: int, carries: int | None = None, seed: int = 0,
                    exclude: Iterable[Problem] = ()) -> list[Problem]:
    """``num`` distinct problems with D = ``digits`` (and exactly ``carries`` carries, if given).

    Deterministic for a given seed. Problems in ``exclude`` are never returned. Raises
    ``ValueError`` when fewer than ``num`` such problems exist.
    """
    _check_digits(digits)
    if carries is not None and not 0 <= carries <= digits:
        raise ValueError(f"carries must lie between 0 and digits={digits}; got {carries}.")
    if num < 0:
        raise ValueError(f"num must be >= 0; got {num}.")
    taken = {(p.a, p.b) for p in exclude if p.digits == digits}
    rng = np.random.default_rng(seed)
    space = 10**digits
    available = _count_available(digits, carries, taken)
    if num > available:
        raise ValueError(
            f"only {available} distinct problems with digits={digits}, carries={carries} remain "
            f"(after exclusions); ask for at most that many or use more digits."
        )
    out: list[Problem] = []
    seen = set(taken)
    while len(out) < num:
        batch = rng.integers(0, space, size=(4 * (num - len(out)) + 16, 2))
        for a, b in batch.tolist():
            if (a, b) in seen:
                continue
            problem = make_problem(a, b, digits)
            if carries is not None and problem.carries != carries:
                continue
            seen.add((a, b))
            out.append(problem)
            if len(out) == num:
                break
    return out


def make_split(digits: int, num_train: int, num_heldout: int, carries: int | None = None,
               seed: int = 0) -> tuple[list[Problem], list[Problem]]:
    """Disjoint train and held-out problem sets, deterministic for a given seed."""
    heldout = sample_problems(num_heldout, digits, carries, seed=seed + 1_000_003)
    train = sample_problems(num_train, digits, carries, seed=seed, exclude=heldout)
    return train, heldout


def reward(completion: str, problem: Problem, eos: str = EOS) -> float:
    """1.0 when ``completion`` is exactly the reversed sum followed by ``eos``, else 0.0."""
    return 1.0 if completion == problem.answer + eos else 0.0


def rewards(completions: Sequence[str], problems: Sequence[Problem], eos: str = EOS) -> np.ndarray:
    """:func:`reward` for a batch, as a float64 array (problems aligned with completions)."""
    if len(completions) != len(problems):
        raise ValueError(
            f"got {len(completions)} completions for {len(problems)} problems; repeat each problem "
            "once per sample (G times for a group) so they align."
        )
    return np.array([reward(c, p, eos) for c, p in zip(completions, problems)], dtype=np.float64)


def _check_digits(digits: int) -> None:
    if isinstance(digits, bool) or not isinstance(digits, (int, np.integer)) or not 1 <= digits <= 9:
        raise ValueError(f"digits must be an integer from 1 to 9; got {digits!r}.")


def _carry_histogram(digits: int) -> np.ndarray:
    """Number of (a, b) pairs with D = ``digits`` per carry count 0..D (vectorised, D <= 3)."""
    a, b = np.meshgrid(np.arange(10**digits), np.arange(10**digits), indexing="ij")
    a, b = a.reshape(-1), b.reshape(-1)
    carry = np.zeros_like(a)
    total = np.zeros_like(a)
    for _ in range(digits):
        carry = ((a % 10 + b % 10 + carry) >= 10).astype(a.dtype)
        total += carry
        a, b = a // 10, b // 10
    return np.bincount(total, minlength=digits + 1)


def _count_available(digits: int, carries: int | None, taken: set[tuple[int, int]]) -> int:
    """How many problems of this kind exist outside ``taken`` (exact for D <= 3, else a bound)."""
    if digits > 3 or carries is None:
        return 10 ** (2 * digits) - len(taken)
    total = int(_carry_histogram(digits)[carries])
    return total - sum(1 for a, b in taken if count_carries(a, b) == carries)
