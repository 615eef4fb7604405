"""Rewards of the language-model run (chapter 15), verified with ``math-verify`` or by the last number.

``correctness``: the completion's answer compared with the gold number, by one of two verifiers
(:data:`VERIFIERS`). ``math-verify`` is Hugging Face's (``parse`` then ``verify``: a ``\\boxed{}`` answer
first, else the last expression, compared as mathematics): it accepts ``23 + 45`` as the answer 68, so on
arithmetic questions a reply that restates the question scores. ``last-number`` takes the last number
written in the reply, digits and all, and compares its value with the gold number: a restated sum does
not score (:func:`~stddial_book.rl.text_tasks.last_number`, the engine's verifier's too). The recipe's two reward values either way. ``format``: 1 when the completion puts exactly one answer in ``\\boxed{}``, whatever it
says, else 0. Both record their last batch, so the dial's diagnostics can read which completions passed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from stddial_book.core.checks import check_per_completion, check_reward_values
from stddial_book.rl.text_tasks import last_number

__all__ = [
    "VERIFIERS",
    "completion_text",
    "is_correct",
    "has_format",
    "CorrectnessReward",
    "FormatReward",
    "Recorded",
]

#: The answer checks a run can use (``LMRunConfig.verifier``, ``measure --verifier``).
VERIFIERS = ("math-verify", "last-number")
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
    """A TRL completion as text: a string, or the content of a conversational completion's messages.

    ``completion`` is one entry of the ``completions`` TRL passes a reward function: a string, or a list of
    chat messages (dicts) whose ``content`` fields are joined."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, (list, tuple)):
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    raise TypeError(f"a completion is text or a list of chat messages; got {type(completion).__name__}.")


def is_correct(text: str, gold: str, verifier: str = "math-verify") -> bool:
    """Whether ``text``'s answer equals ``gold``: by ``math-verify`` (False when nothing can be extracted), or
    by the value of its last written number (``verifier="last-number"``). ``verifier`` is one of
    :data:`VERIFIERS` (default ``"math-verify"``); ``gold`` is the gold answer as text."""
    if verifier == "last-number":
        value, target = last_number(text), last_number(str(gold))
        return value is not None and target is not None and value == target
    if verifier != "math-verify":
        raise ValueError(f"verifier must be one of {VERIFIERS}; got {verifier!r}.")
    mv = _math_verify()
    predicted = mv.parse(text)
    if not predicted:
        return False
    return bool(mv.verify(mv.parse(str(gold)), predicted))


def has_format(text: str) -> bool:
    """Whether ``text`` puts exactly one answer in ``\\boxed{}`` (the answer's value plays no part)."""
    return len(_BOXED.findall(text)) == 1


class CorrectnessReward:
    """TRL reward function: ``correct`` for a verified answer, else ``wrong`` (reads the ``answer`` column).

    ``correct`` and ``wrong`` are the recipe's two reward values (default 1 and 0; ``correct`` must exceed
    ``wrong``); ``verifier`` is the answer check, one of :data:`VERIFIERS` (default ``"math-verify"``).
    The last batch's rewards are kept in ``last``.
    """

    __name__ = "correctness"

    def __init__(self, correct: float = 1.0, wrong: float = 0.0, verifier: str = "math-verify") -> None:
        self.correct, self.wrong = check_reward_values(correct, wrong)
        if verifier not in VERIFIERS:
            raise ValueError(f"verifier must be one of {VERIFIERS}; got {verifier!r}.")
        self.verifier = verifier
        self.last: list[float] = []

    def __call__(self, completions: Sequence[Any], answer: Sequence[str], **kwargs: Any) -> list[float]:
        check_per_completion(completions, "completions", len(completions) if hasattr(completions, "__len__") else 0)
        check_per_completion(answer, "answer", len(completions))
        self.last = [
            self.correct if is_correct(completion_text(c), a, self.verifier) else self.wrong
            for c, a in zip(completions, answer)
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
    """A reward function (such as TRL's soft overlong punishment) that keeps its last batch in ``last``.

    ``function`` is the TRL reward function wrapped: called with the same arguments, its rewards returned as
    floats; the wrapper takes its ``__name__`` (or its class's name), the name TRL logs it under.
    """

    def __init__(self, function: Any) -> None:
        self.function = function
        self.__name__ = getattr(function, "__name__", type(function).__name__)
        self.last: list[float] = []

    def __call__(self, *args: Any, **kwargs: Any) -> list[float]:
        self.last = [float(x) for x in self.function(*args, **kwargs)]
        return list(self.last)
