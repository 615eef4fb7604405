"""The testbed's reward as TRL reward functions, and a recipe's reward settings for them (chapter 14)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from stddial_book.bridges.trl_keywords import import_trl
from stddial_book.core.checks import check_int, check_reward_values
from stddial_book.theory.recipes import Recipe, as_recipe

__all__ = ["reward_settings", "trl_reward_funcs", "overlong_cache_tokens"]


def overlong_cache_tokens(recipe: Recipe, max_new_tokens: int) -> int:
    """DAPO's L_cache in tokens for ``max_new_tokens`` = L_max, rounded as the engine's
    ``TrainConfig.overlong_cache`` rounds it: ``recipe``'s ``overlong_cache_fraction`` of L_max, a
    ``Recipe`` (not a name)."""
    return int(round(recipe.overlong_cache_fraction * max_new_tokens))


def reward_settings(recipe: Recipe | str, *, max_new_tokens: int) -> dict[str, Any]:
    """The reward side of ``recipe`` for TRL's reward functions (chapter 14).

    Returns ``reward_correct`` and ``reward_wrong`` (what the verifier's 1 and 0 become; DAPO's paper used
    ±1) and ``soft_overlong_punishment``: ``None``, or the keyword arguments of
    ``trl.rewards.get_soft_overlong_punishment`` (``max_completion_len`` = L_max, ``soft_punish_cache`` =
    L_cache), whose penalty equals :func:`stddial_book.rl.sampling.overlong_penalty` for completions up to
    L_max (Yu et al., 2025, eq. 13). TRL sums the reward functions before taking advantages, as the
    book's trainer adds the penalty to the shaped reward. ``recipe`` is a preset name or a ``Recipe``;
    ``max_new_tokens`` is L_max, the generation cap (TRL's ``max_completion_length``).

    Raises:
        ValueError: the recipe has an overlong penalty whose band rounds to no token at this L_max.
    """
    recipe = as_recipe(recipe)
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1, hint="It is L_max, the generation cap.")
    overlong = None
    if recipe.overlong_penalty:
        cache = overlong_cache_tokens(recipe, max_new_tokens)
        if cache < 1:
            raise ValueError(
                f"the overlong penalty band L_cache = round({recipe.overlong_cache_fraction} · {max_new_tokens}) is "
                "empty; raise max_new_tokens or overlong_cache_fraction."
            )
        overlong = {"max_completion_len": max_new_tokens, "soft_punish_cache": cache}
    return {
        "reward_correct": float(recipe.reward_correct),
        "reward_wrong": float(recipe.reward_wrong),
        "soft_overlong_punishment": overlong,
    }


class _AdditionReward:
    """TRL reward function: the book's verifier on ``completion_ids`` (TRL's decoded text drops EOS).

    A completion is correct iff it is exactly the reversed sum followed by EOS; it then gets
    ``correct``, else ``wrong``. Reads the dataset's ``answer`` column, as TRL passes every column.
    """

    __name__ = "addition_reward"

    def __init__(self, correct: float, wrong: float) -> None:
        from stddial_book.rl.model import CharCodec

        self.correct, self.wrong = check_reward_values(correct, wrong)
        self.codec = CharCodec()

    def __call__(self, completion_ids: Sequence[Sequence[int]], answer: Sequence[str], **kwargs: Any) -> list[float]:
        from stddial_book.rl.tasks import EOS

        _check_reward_rows(completion_ids, answer, kwargs)
        wrong = next((a for a in answer if not isinstance(a, str)), None)
        if wrong is not None:
            raise TypeError(
                f"the dataset's answer column must hold strings (the reversed sum, as Problem.answer); "
                f"found {type(wrong).__name__} {wrong!r:.40}. Build the dataset from Problem.answer."
            )
        return [
            self.correct if self.codec.decode(ids) == ans + EOS else self.wrong
            for ids, ans in zip(completion_ids, answer)
        ]


#: Keyword arguments TRL passes to every reward function that are not one value per completion.
_NOT_PER_ROW = frozenset({"trainer_state", "log_extra", "log_metric"})


def _check_reward_rows(completion_ids: Any, answer: Any, kwargs: dict[str, Any]) -> None:
    """Refuse per-completion inputs of different lengths (``zip`` would silently drop the extra rows)."""
    for name, values in (("completion_ids", completion_ids), ("answer", answer)):
        if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
            raise TypeError(f"{name} must be a list with one entry per completion; got {type(values).__name__}.")
    rows = len(completion_ids)
    columns = {"answer": answer}
    columns.update(
        {
            name: value
            for name, value in kwargs.items()
            if name not in _NOT_PER_ROW and isinstance(value, (list, tuple, np.ndarray))
        }
    )
    for name, values in columns.items():
        if len(values) != rows:
            raise ValueError(
                f"the reward function got {rows} completions but {len(values)} values of {name!r}; TRL "
                f"passes one value of every dataset column per completion, so pass {name} with one "
                "entry per completion (each prompt's row repeated G times)."
            )


def trl_reward_funcs(recipe: Recipe | str, *, max_new_tokens: int) -> list[Callable[..., list[float]]]:
    """The reward functions to pass to ``GRPOTrainer`` for ``recipe`` (see :func:`reward_settings`).

    The verifier with the recipe's reward values, and for DAPO TRL's own soft overlong punishment.
    The dataset needs an ``answer`` column. Imports TRL only when the recipe has the length penalty.
    ``recipe`` is a preset name or a ``Recipe``; ``max_new_tokens`` is L_max (TRL's ``max_completion_length``),
    the length the overlong punishment is measured against.
    """
    settings = reward_settings(recipe, max_new_tokens=max_new_tokens)
    funcs: list[Callable[..., list[float]]] = [_AdditionReward(settings["reward_correct"], settings["reward_wrong"])]
    if settings["soft_overlong_punishment"] is not None:
        rewards = import_trl("the soft overlong punishment", "trl.rewards")
        funcs.append(rewards.get_soft_overlong_punishment(**settings["soft_overlong_punishment"]))
    return funcs
