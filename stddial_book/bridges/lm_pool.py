"""A graded pool of arithmetic prompts for a small instruct model (chapters 7, 15 and 16).

Seven tiers, from one-digit sums to three-digit sums, plus one-step word problems, each a row of GSM8K's
schema (``question``; ``answer`` ending in ``#### N``, Cobbe et al., 2021) with a ``prompt_id`` and its
``tier``. The model is asked to answer with just the number (:data:`ANSWER_PROMPT`, the system prompt), and
the reward verifies the last number of the reply: a strict ``#### N`` output format gave SmolLM2-135M-Instruct
reward 0 on every completion, no signal at all, so the format the reward demands is kept as loose as the
task allows.

:func:`arithmetic_pool` draws the training pool and a held-out set of problems that never occur in it, from
one seed; :func:`write_pool` writes them as ``.jsonl`` files that ``measure``, ``record-lm`` and the loaders
read.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["ANSWER_PROMPT", "TIERS", "arithmetic_pool", "write_pool"]

#: The system prompt of the arithmetic pool: the reply's last number is its answer.
ANSWER_PROMPT = "Answer with just the number."

_NAMES = ("Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana")
_ITEMS = ("apple", "book", "coin", "shell", "stamp", "marble")


def _sum(digits_a: int, digits_b: int) -> Callable[[random.Random], tuple[tuple, str, int]]:
    def draw(rng: random.Random) -> tuple[tuple, str, int]:
        a = rng.randint(10 ** (digits_a - 1) if digits_a > 1 else 1, 10**digits_a - 1)
        b = rng.randint(10 ** (digits_b - 1) if digits_b > 1 else 1, 10**digits_b - 1)
        return ("+", a, b), f"What is {a} + {b}?", a + b

    return draw


def _product(digits_a: int, digits_b: int) -> Callable[[random.Random], tuple[tuple, str, int]]:
    def draw(rng: random.Random) -> tuple[tuple, str, int]:
        a = rng.randint(10 ** (digits_a - 1) if digits_a > 1 else 2, 10**digits_a - 1)
        b = rng.randint(2, 10**digits_b - 1)
        return ("*", a, b), f"What is {a} * {b}?", a * b

    return draw


def _word(rng: random.Random) -> tuple[tuple, str, int]:
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b = rng.randint(2, 30), rng.randint(2, 30)
    question = f"{name} has {a} {item}s and finds {b} more. How many {item}s does {name} have now?"
    return ("w", name, item, a, b), question, a + b


#: The tiers, easiest first by intent (the measured pass rates say how hard each is for a model).
TIERS: dict[str, Callable[[random.Random], tuple[tuple, str, int]]] = {
    "1d+1d": _sum(1, 1),
    "1d*1d": _product(1, 1),
    "word": _word,
    "2d+1d": _sum(2, 1),
    "2d+2d": _sum(2, 2),
    "2d*1d": _product(2, 1),
    "3d+3d": _sum(3, 3),
}


def arithmetic_pool(
    per_tier: int = 32, held_out_per_tier: int = 16, seed: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(training rows, held-out rows): ``per_tier`` and ``held_out_per_tier`` distinct problems of every tier,
    no problem in both. Each row: ``prompt_id`` (``tier-index``, ``h`` before the index when held out),
    ``tier``, ``question`` and ``answer`` (``"a + b = c\\n#### c"``, GSM8K's schema). ``per_tier`` (at least
    1, default 32) and ``held_out_per_tier`` (at least 0, default 16) are counts per tier of :data:`TIERS`;
    ``seed`` (default 0) seeds the one random generator both sets are drawn from."""
    for name, value in (("per_tier", per_tier), ("held_out_per_tier", held_out_per_tier), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name != "per_tier" else 1):
            raise ValueError(f"{name} must be a whole number >= {0 if name != 'per_tier' else 1}; got {value!r}.")
    rng = random.Random(seed)
    train: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    for tier, draw in TIERS.items():
        seen: set[tuple] = set()
        rows: list[dict[str, Any]] = []
        tries = 0
        while len(rows) < per_tier + held_out_per_tier:
            tries += 1
            if tries > 100 * (per_tier + held_out_per_tier):
                raise ValueError(f"tier {tier} has too few distinct problems for {per_tier + held_out_per_tier}.")
            key, question, value = draw(rng)
            if key in seen:
                continue
            seen.add(key)
            rows.append({"tier": tier, "question": question, "answer": f"{value}\n#### {value}"})
        for i, row in enumerate(rows[:per_tier]):
            train.append({"prompt_id": f"{tier}-{i:03d}", **row})
        for i, row in enumerate(rows[per_tier:]):
            held.append({"prompt_id": f"{tier}-h{i:03d}", **row})
    return train, held


def write_pool(path: str | os.PathLike, rows: list[dict[str, Any]]) -> Path:
    """Write ``rows`` as JSON lines to the new file ``path`` (refused when it exists)."""
    path = Path(path)
    with open(path, "x", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    return path
