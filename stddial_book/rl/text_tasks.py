"""Text problems for a Hugging Face policy, and the last-number verifier (chapters 15 and 16).

A :class:`TextProblem` is one question in words with its gold answer, a number written as text,
and a ``tier`` (its difficulty bucket, as ``D{digits}`` is the testbed's). The SmolLM2 arithmetic
pool (``data/smollm2/pool_train.jsonl``, ``pool_heldout.jsonl``; GSM8K's schema, Cobbe et al., 2021:
``answer`` ends in ``#### N``) reads into a list of them with :func:`read_text_problems`.

:func:`verify_last_number` is the engine's verifier for them: a completion is correct when the last
number it writes has the gold number's value (thousands separators dropped). A reply that restates
the question (``23 + 45``) does not score, as it would under ``math-verify``; the TRL bridge's
``last-number`` reward (:mod:`stddial_book.bridges.lm_rewards`) uses the same :func:`last_number`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["TextProblem", "text_problems", "read_text_problems", "last_number", "verify_last_number"]

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class TextProblem:
    """One question in words, its gold answer (a number as text), its tier and its id.

    ``question`` is the text the model is asked (non-empty); ``answer`` the gold number as text (such
    as ``"68"``); ``tier`` the difficulty bucket the metrics are split by (default ``"all"``);
    ``prompt_id`` an identifier from the source file (default empty).
    """

    question: str
    answer: str
    tier: str = "all"
    prompt_id: str = ""

    def __post_init__(self) -> None:
        for name in ("question", "answer", "tier", "prompt_id"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"TextProblem.{name} must be text; got {getattr(self, name)!r:.40}.")
        if not self.question.strip():
            raise ValueError("TextProblem.question is empty; give the question the model answers.")
        if last_number(self.answer) is None:
            raise ValueError(
                f"TextProblem.answer must be a number written as text, e.g. '68'; got {self.answer!r:.40}."
            )


def last_number(text: str) -> float | None:
    """The value of the last number written in ``text`` (thousands separators dropped), or None."""
    found = _NUMBER.findall(text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def verify_last_number(completions: Sequence[str], problems: Sequence[TextProblem]) -> np.ndarray:
    """1.0 where a completion's last written number equals its problem's gold number, else 0.0 (float64).

    ``completions`` are the decoded texts and ``problems`` their :class:`TextProblem` objects, one per
    completion.
    """
    if isinstance(completions, str) or len(completions) != len(problems):
        raise ValueError(
            f"verify_last_number takes one completion per problem; got {len(completions)} completions for "
            f"{len(problems)} problems (repeat each problem once per sample)."
        )
    out = np.zeros(len(problems), dtype=np.float64)
    for i, (text, problem) in enumerate(zip(completions, problems)):
        value = last_number(text)
        out[i] = 1.0 if value is not None and value == last_number(problem.answer) else 0.0
    return out


def text_problems(rows: Sequence[dict[str, Any]]) -> list[TextProblem]:
    """Rows of GSM8K's schema (``question``; ``answer``, whose gold number follows ``####`` when it has
    one; optional ``tier`` and ``prompt_id``) as :class:`TextProblem` objects, in order. ``rows`` are
    dicts, such as the JSON objects of a pool file."""
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not {"question", "answer"} <= set(row):
            raise ValueError(f"row {i} needs a question and an answer (GSM8K's schema); got {row!r:.60}.")
        answer = str(row["answer"])
        gold = answer.rsplit("####", 1)[1].strip() if "####" in answer else answer.strip()
        out.append(
            TextProblem(
                str(row["question"]), gold.replace(",", ""), str(row.get("tier", "all")), str(row.get("prompt_id", ""))
            )
        )
    return out


def read_text_problems(path: str | os.PathLike) -> list[TextProblem]:
    """The problems of a ``.jsonl`` file of GSM8K's schema (one JSON object a line), such as SmolLM2's pool.
    ``path`` is that file (it must end in ``.jsonl``); see :func:`text_problems` for the rows."""
    path = Path(path)
    if path.suffix != ".jsonl" or not path.is_file():
        raise ValueError(f"{path} is not a .jsonl file; pass a file of GSM8K's schema (question, answer).")
    try:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except ValueError as err:
        raise ValueError(f"{path} is not JSON lines ({err}); one object a line (question, answer).") from None
    if not rows:
        raise ValueError(f"{path} holds no problems.")
    return text_problems(rows)
