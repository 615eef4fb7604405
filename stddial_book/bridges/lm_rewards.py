"""Rewards of the language-model run (chapter 15), verified with ``math-verify``.

``correctness``: the completion's answer, extracted and compared with the gold number by Hugging Face's
``math-verify`` (``parse`` then ``verify``: a ``\\boxed{}`` answer first, else the last number); the recipe's
two reward values. ``format``: 1 when the completion puts exactly one answer in ``\\boxed{}``, whatever it
says, else 0. Both record their last batch, so the dial's diagnostics can read which completions passed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from stddial_book.core.checks import check_per_completion, check_reward_values

__all__ = ["completion_text", "is_correct", "has_format", "CorrectnessReward", "FormatReward", "Recorded"]

_BOXED = re.compile(r"\\boxed\{[^{}]*\}")


def _math_verify() -> Any:
    """The ``math_verify`` module, or an ImportError that says how to install it."""
    try:
        import math_verify
    except ImportError:
        raise ImportError(
            "the language-model run verifies answers with math-verify, which is not installed: "
            "pip install 'stddial-book[lm]' (or pip install math-verify peft)."
        ) from None
    return math_verify


def completion_text(completion: Any) -> str:
    """A TRL completion as text: a string, or the content of a conversational completion's messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, (list, tuple)):
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    raise TypeError(f"a completion is text or a list of chat messages; got {type(completion).__name__}.")


def is_correct(text: str, gold: str) -> bool:
    """Whether ``text``'s answer equals ``gold`` by ``math-verify`` (False when nothing can be extracted)."""
    mv = _math_verify()
    predicted = mv.parse(text)
    if not predicted:
        return False
    return bool(mv.verify(mv.parse(str(gold)), predicted))


def has_format(text: str) -> bool:
    """Whether ``text`` puts exactly one answer in ``\\boxed{}`` (the answer's value plays no part)."""
    return len(_BOXED.findall(text)) == 1


class CorrectnessReward:
    """TRL reward function: ``correct`` for a verified answer, else ``wrong`` (reads the ``answer`` column)."""

    __name__ = "correctness"

    def __init__(self, correct: float = 1.0, wrong: float = 0.0) -> None:
        self.correct, self.wrong = check_reward_values(correct, wrong)
        self.last: list[float] = []

    def __call__(self, completions: Sequence[Any], answer: Sequence[str], **kwargs: Any) -> list[float]:
        check_per_completion(completions, "completions", len(completions) if hasattr(completions, "__len__") else 0)
        check_per_completion(answer, "answer", len(completions))
        self.last = [
            self.correct if is_correct(completion_text(c), a) else self.wrong for c, a in zip(completions, answer)
        ]
        return list(self.last)


class FormatReward:
    """TRL reward function: 1 for one ``\\boxed{}`` answer, else 0."""

    __name__ = "format"

    def __init__(self) -> None:
        self.last: list[float] = []

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float]:
        self.last = [1.0 if has_format(completion_text(c)) else 0.0 for c in completions]
        return list(self.last)


class Recorded:
    """A reward function (such as TRL's soft overlong punishment) that keeps its last batch in ``last``."""

    def __init__(self, function: Any) -> None:
        self.function = function
        self.__name__ = getattr(function, "__name__", type(function).__name__)
        self.last: list[float] = []

    def __call__(self, *args: Any, **kwargs: Any) -> list[float]:
        self.last = [float(x) for x in self.function(*args, **kwargs)]
        return list(self.last)
