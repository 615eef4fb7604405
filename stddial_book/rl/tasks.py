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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from stddial_book.core.checks import check_int

__all__ = ["EOS", "Problem", "count_carries", "make_problem", "sample_problems", "make_split", "reward", "rewards"]

#: The end-of-sequence marker of completions, as text (the tokenizer maps it to one id).
EOS = "<eos>"


@dataclass(frozen=True)
class Problem:
    """One addition problem: operands, its difficulty, the prompt text and the answer text.

    ``a`` and ``b`` are the operands, whole numbers in [0, 10^D); ``digits`` is D, the digit count
    the prompt pads them to (1 to 9); ``carries`` is the number of carries the sum needs (checked
    against the operands; :func:`make_problem` counts it for you).
    """

    a: int
    b: int
    digits: int
    carries: int

    def __post_init__(self) -> None:
        _check_operands(self.a, self.b, self.digits)
        if isinstance(self.carries, bool) or self.carries != count_carries(self.a, self.b):
            raise ValueError(
                f"carries={self.carries!r} but {self.a} + {self.b} has {count_carries(self.a, self.b)}; "
                "build problems with make_problem(a, b, digits), which counts them."
            )

    @property
    def prompt(self) -> str:
        return f"{self.a:0{self.digits}d}+{self.b:0{self.digits}d}="

    @property
    def answer(self) -> str:
        """The sum's decimal digits reversed (no padding), without EOS."""
        return str(self.a + self.b)[::-1]


def count_carries(a: int, b: int) -> int:
    """The number of digit positions that produce a carry when adding ``a`` and ``b``."""
    for name, value in (("a", a), ("b", b)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be a whole number (an int); got {type(value).__name__} {value!r}.")
        if value < 0:
            raise ValueError(f"{name} must be >= 0 (carries are counted for non-negative operands); got {value}.")
    carries = carry = 0
    while a or b:
        carry = 1 if a % 10 + b % 10 + carry >= 10 else 0
        carries += carry
        a, b = a // 10, b // 10
    return carries


def make_problem(a: int, b: int, digits: int) -> Problem:
    """The problem ``a + b`` with D = ``digits``; refuses operands that do not fit in D digits.

    ``a`` and ``b`` are whole numbers in [0, 10^D); ``digits`` is D, from 1 to 9.
    """
    _check_operands(a, b, digits)
    return Problem(a, b, digits, count_carries(a, b))


def sample_problems(
    num: int, digits: int, carries: int | None = None, seed: int = 0, exclude: Iterable[Problem] = ()
) -> list[Problem]:
    """``num`` distinct problems with D = ``digits`` (and exactly ``carries`` carries, if given).

    Deterministic for a given ``seed`` (a non-negative integer). Problems in ``exclude`` are never returned. Raises
    ``ValueError`` when fewer than ``num`` such problems exist. Problems are drawn by rejection,
    so asking for nearly every problem of a large space (D >= 4) is slow.
    """
    _check_digits(digits)
    if carries is not None:
        carries = check_int(carries, "carries")
        if not 0 <= carries <= digits:
            raise ValueError(f"carries must lie between 0 and digits={digits}; got {carries}.")
    num = check_int(num, "num")
    if num < 0:
        raise ValueError(f"num must be >= 0; got {num}.")
    seed = check_int(seed, "seed", minimum=0, hint="Seeds are non-negative integers.")
    if isinstance(exclude, (str, bytes, Problem)) or not isinstance(exclude, Iterable):
        raise TypeError(f"exclude must be a collection of Problem objects; got {type(exclude).__name__}.")
    exclude = list(exclude)
    wrong = next((p for p in exclude if not isinstance(p, Problem)), None)
    if wrong is not None:
        raise TypeError(
            f"exclude must hold Problem objects (from make_problem or make_split); found "
            f"{type(wrong).__name__} {wrong!r:.40}."
        )
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
            if (a, b) in seen or (carries is not None and count_carries(a, b) != carries):
                continue
            seen.add((a, b))
            out.append(make_problem(a, b, digits))
            if len(out) == num:
                break
    return out


def make_split(
    digits: int, num_train: int, num_heldout: int, carries: int | None = None, seed: int = 0
) -> tuple[list[Problem], list[Problem]]:
    """Disjoint train and held-out problem sets, deterministic for a given seed.

    ``num_train`` and ``num_heldout`` problems with D = ``digits`` (and exactly ``carries`` carries
    each, if not ``None``), distinct within and across the two sets; ``seed`` (a non-negative
    integer) fixes them.
    """
    heldout = sample_problems(num_heldout, digits, carries, seed=seed + 1_000_003)
    train = sample_problems(num_train, digits, carries, seed=seed, exclude=heldout)
    return train, heldout


def reward(completion: str, problem: Problem, eos: str = EOS) -> float:
    """1.0 when ``completion`` is exactly the reversed sum followed by
    ``eos``, else 0.0. ``completion`` is text, ``problem`` the
    :class:`Problem` it answers, ``eos`` the end marker (default
    :data:`EOS`)."""
    if not isinstance(completion, str) or not isinstance(eos, str):
        wrong, value = ("completion", completion) if not isinstance(completion, str) else ("eos", eos)
        raise TypeError(
            f"{wrong} must be text (a str); got "
            f"{type(value).__name__} {value!r:.40}. Decode "
            "token ids first (model.CharCodec.decode)."
        )
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a Problem (from make_problem); got {type(problem).__name__} {problem!r:.40}.")
    return 1.0 if completion == problem.answer + eos else 0.0


def rewards(completions: Sequence[str], problems: Sequence[Problem], eos: str = EOS) -> np.ndarray:
    """:func:`reward` for a batch, as a float64 array (problems aligned with completions).

    ``completions`` are texts and ``problems`` their :class:`Problem` objects, one per sample;
    ``eos`` is the end marker each correct completion must end with (default :data:`EOS`).
    """
    for name, value in (("completions", completions), ("problems", problems)):
        if isinstance(value, (str, bytes, Problem)) or not isinstance(value, (Sequence, np.ndarray)):
            raise TypeError(f"{name} must be a list (one entry per sample); got {type(value).__name__} {value!r:.40}.")
    if len(completions) != len(problems):
        raise ValueError(
            f"got {len(completions)} completions for {len(problems)} problems; repeat each problem "
            "once per sample (G times for a group) so they align."
        )
    return np.array([reward(c, p, eos) for c, p in zip(completions, problems)], dtype=np.float64)


def _check_digits(digits: int) -> None:
    if isinstance(digits, bool) or not isinstance(digits, (int, np.integer)) or not 1 <= digits <= 9:
        raise ValueError(f"digits must be an integer from 1 to 9; got {digits!r}.")


def _check_operands(a: int, b: int, digits: int) -> None:
    _check_digits(digits)
    for name, value in (("a", a), ("b", b)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"operand {name} must be a whole number (an int); got {type(value).__name__} {value!r}.")
    if not (0 <= a < 10**digits and 0 <= b < 10**digits):
        raise ValueError(f"operands must lie in [0, 10^{digits}); got a={a}, b={b}.")


def _carry_histogram(digits: int) -> np.ndarray:
    """Number of (a, b) pairs with D = ``digits`` per carry count 0..D, exact for every D.

    Digit position by position: with no incoming carry 45 of the 100 digit pairs carry
    (x + y >= 10), with one 55 do (x + y >= 9).
    """
    ways = {0: [1] + [0] * digits, 1: [0] * (digits + 1)}  # incoming carry -> count per carries so far
    for _ in range(digits):
        nxt = {0: [0] * (digits + 1), 1: [0] * (digits + 1)}
        for k in range(digits):
            nxt[0][k] += 55 * ways[0][k] + 45 * ways[1][k]
            nxt[1][k + 1] += 45 * ways[0][k] + 55 * ways[1][k]
        ways = nxt
    return np.array([ways[0][k] + ways[1][k] for k in range(digits + 1)], dtype=np.int64)


def _count_available(digits: int, carries: int | None, taken: set[tuple[int, int]]) -> int:
    """How many problems of this kind exist outside ``taken`` (exact)."""
    if carries is None:
        return 10 ** (2 * digits) - len(taken)
    total = int(_carry_histogram(digits)[carries])
    return total - sum(1 for a, b in taken if count_carries(a, b) == carries)
