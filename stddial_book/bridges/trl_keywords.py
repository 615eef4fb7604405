"""GRPOConfig keywords: the checks of their types and ranges, and a ``trl.GRPOConfig`` built from them (chapter 14).

The lowest module of the TRL bridge: the TRL version the mapping was checked against, the import of
TRL with an install hint, and the defaults of the book's batch schedule.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import numpy as np

__all__ = [
    "TRL_CHECKED_VERSION",
    "DEFAULT_PROMPTS_PER_STEP",
    "DEFAULT_NUM_MINIBATCHES",
    "check_bool",
    "check_grpo_settings",
    "check_temperature",
    "import_trl",
    "grpo_config_from",
]


#: The TRL release whose source this mapping was checked against.
TRL_CHECKED_VERSION = "1.16.0"


#: The batch schedule's default prompts per optimizer step, TrainConfig's (tests check they agree).
DEFAULT_PROMPTS_PER_STEP = 32

#: The batch schedule's default minibatches per step, TrainConfig's (tests check they agree).
DEFAULT_NUM_MINIBATCHES = 2


def check_bool(value: Any, name: str) -> bool:
    """``value`` as a bool, or a TypeError naming ``name``: only True or False (numpy's too), not 1 or "yes"."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(
            f"{name} must be True or False; got {type(value).__name__} {' '.join(repr(value).split())[:40]}."
        )
    return bool(value)


#: Every numeric ``GRPOConfig`` setting the bridge writes or a caller commonly overrides: (kind, low,
#: low inclusive, high, high inclusive, None allowed). ``kind`` "int" needs a whole number, "float" any
#: finite number; ``low``/``high`` None means unbounded. Special values TRL gives a meaning are allowed
#: (``max_steps=-1``: train by epochs; ``max_grad_norm=0``: no clipping).
_NUMERIC_SETTINGS: dict[str, tuple[str, float | None, bool, float | None, bool, bool]] = {
    "learning_rate": ("float", 0.0, False, None, False, False),
    "max_grad_norm": ("float", 0.0, True, None, False, True),
    "weight_decay": ("float", 0.0, True, None, False, False),
    "warmup_steps": ("int", 0, True, None, False, False),
    "warmup_ratio": ("float", 0.0, True, 1.0, True, False),
    "max_steps": ("int", -1, True, None, False, False),
    "seed": ("int", 0, True, None, False, False),
    "data_seed": ("int", 0, True, None, False, True),
    "temperature": ("float", 0.0, False, None, False, False),
    "top_k": ("int", 0, True, None, False, True),
    "top_p": ("float", 0.0, False, 1.0, True, False),
    "min_p": ("float", 0.0, True, 1.0, True, True),
    "repetition_penalty": ("float", 0.0, False, None, False, False),
    "epsilon": ("float", 0.0, True, 1.0, False, False),
    "epsilon_high": ("float", 0.0, True, None, False, True),
    "beta": ("float", 0.0, True, None, False, False),
    "top_entropy_quantile": ("float", 0.0, True, 1.0, True, False),
    "num_generations": ("int", 2, True, None, False, False),
    "max_completion_length": ("int", 1, True, None, False, False),
    "generation_batch_size": ("int", 1, True, None, False, True),
    "per_device_train_batch_size": ("int", 1, True, None, False, False),
    "gradient_accumulation_steps": ("int", 1, True, None, False, False),
    "num_iterations": ("int", 1, True, None, False, False),
    "logging_steps": ("float", 0.0, False, None, False, False),
    "dataloader_num_workers": ("int", 0, True, None, False, False),
}


#: ``GRPOConfig`` settings the bridge writes that must be True or False.
_BOOL_SETTINGS = (
    "bf16",
    "fp16",
    "use_bias_correction_kl",
    "mask_truncated_completions",
    "activation_checkpointing",
    "gradient_checkpointing",
    "use_cpu",
    "use_vllm",
    "log_completions",
    "disable_tqdm",
)


def check_grpo_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Refuse a ``GRPOConfig`` keyword of the wrong type or outside its range, naming it (TRL itself would
    take the string "1e-5" or NaN as a learning rate and fail, or train wrongly, much later).

    ``settings`` maps ``GRPOConfig`` keyword names to values; names the bridge has no rule for pass unchecked.
    Returns ``settings`` itself."""
    for name, value in settings.items():
        if name in _BOOL_SETTINGS and not isinstance(value, (bool, np.bool_)):
            raise TypeError(
                f"GRPOConfig setting {name} must be True or False; got {type(value).__name__} "
                f"{' '.join(repr(value).split())[:40]}."
            )
        rule = _NUMERIC_SETTINGS.get(name)
        if rule is None:
            continue
        kind, low, low_in, high, high_in, optional = rule
        if value is None and optional:
            continue
        what = "a whole number" if kind == "int" else "a number"
        if (
            isinstance(value, (bool, np.bool_))
            or not isinstance(value, (int, float, np.integer, np.floating))
            or (kind == "int" and isinstance(value, (float, np.floating)) and not float(value).is_integer())
        ):
            raise TypeError(
                f"GRPOConfig setting {name} must be {what}{' or None' if optional else ''}; got "
                f"{type(value).__name__} {' '.join(repr(value).split())[:40]}. Pass e.g. {name}={_example(name)} "
                "(a number, not text)."
            )
        bounds = []
        if low is not None:
            bounds.append(f"{'>=' if low_in else '>'} {low:g}")
        if high is not None:
            bounds.append(f"{'<=' if high_in else '<'} {high:g}")
        inside = (
            math.isfinite(value)
            and (low is None or (value >= low if low_in else value > low))
            and (high is None or (value <= high if high_in else value < high))
        )
        if name == "max_steps" and value in (0,):
            inside = False
        if not inside:
            extra = " (or -1: train by epochs)" if name == "max_steps" else ""
            raise ValueError(
                f"GRPOConfig setting {name} must be a finite number {' and '.join(bounds)}{extra}; got "
                f"{value!r}. Pass e.g. {name}={_example(name)}."
            )
    return settings


def _example(name: str) -> str:
    """A valid value of a numeric GRPOConfig setting, for error messages."""
    return {
        "learning_rate": "1e-5",
        "max_grad_norm": "1.0",
        "temperature": "1.0",
        "top_p": "1.0",
        "beta": "0.04",
        "epsilon": "0.2",
        "epsilon_high": "0.28",
        "num_generations": "8",
        "max_steps": "100",
        "seed": "0",
    }.get(name, "1")


def check_temperature(value: Any) -> float:
    """The sampling temperature as a float: a finite number > 0 (1 samples the policy itself; chapter 14).
    ``value`` is the temperature given; a ``TypeError`` for what is not a number, a ``ValueError`` otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(
            f"temperature must be a number; got {type(value).__name__} {' '.join(repr(value).split())[:40]}."
        )
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"temperature must be a finite number > 0; got {value!r}.")
    return float(value)


def import_trl(what: str, module: str = "trl") -> Any:
    """Import ``module`` of TRL, or an ImportError that says how to install it.

    ``what`` names what needs TRL, at the head of the message (e.g. ``"run_lm"``); ``module`` is the module
    imported (default ``"trl"``; e.g. ``"trl.rewards"``)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(
            f"{what} needs TRL, which is not installed: pip install trl (the book checked TRL "
            f"{TRL_CHECKED_VERSION}; in this repository: pip install -r bench/requirements-trl.txt)."
        ) from None


def grpo_config_from(settings: dict[str, Any], output_dir: str | os.PathLike, overrides: dict[str, Any]) -> Any:
    """A ``GRPOConfig`` from settings, with ``overrides`` on top; refuses names this TRL does not have.

    ``settings`` and ``overrides`` map ``GRPOConfig`` keyword names to values (checked by
    :func:`check_grpo_settings`); ``output_dir`` is ``GRPOConfig``'s ``output_dir``, where TRL writes.
    ``activation_checkpointing`` becomes ``gradient_checkpointing`` where this TRL's config lacks it."""
    kwargs = check_grpo_settings({**settings, **overrides})  # before TRL is imported: the error needs no TRL
    trl = import_trl("grpo_config")
    fields = {f.name for f in dataclasses.fields(trl.GRPOConfig)}
    if "activation_checkpointing" in kwargs and "activation_checkpointing" not in fields:
        kwargs["gradient_checkpointing"] = kwargs.pop("activation_checkpointing")  # older transformers' name
    unknown = sorted(set(kwargs) - fields)
    if unknown:
        raise ValueError(
            f"TRL {trl.__version__} has no GRPOConfig setting {', '.join(unknown)}; the bridge was "
            f"checked against TRL {TRL_CHECKED_VERSION}."
        )
    return trl.GRPOConfig(output_dir=str(output_dir), **kwargs)
