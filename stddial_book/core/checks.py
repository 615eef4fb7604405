"""Input handling shared by the numeric modules: numpy or torch in, the same kind out.

Every public function of :mod:`stddial_book.theory.identity` and :mod:`stddial_book.theory.recipes`
accepts plain Python numbers, sequences, numpy arrays or torch tensors. This module turns
the input into an array of one backend, validates it at the public boundary, and turns the
result back into what the caller passed. Errors are ``ValueError`` with the fix in the message.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` on one line, cut to ``limit`` characters: what an error message quotes of a
    bad argument (an array's repr spans several lines)."""
    return " ".join(repr(value).split())[:limit]


#: The largest seed a run accepts: the trainer derives evaluation seeds as about 10**6 times the
#: seed plus the step, and torch's generators take at most 2**64 - 1, so seeds stay below 2**40.
MAX_SEED = 2**40 - 1

try:  # torch is a runtime dependency, but the closed forms must not need it to import
    import torch
except ImportError:  # pragma: no cover - exercised only without torch
    torch = None  # type: ignore[assignment]

ArrayLike = Any  # numbers, sequences, numpy arrays or torch tensors


def is_torch(x: Any) -> bool:
    """True when ``x`` is a torch tensor."""
    return torch is not None and isinstance(x, torch.Tensor)


def to_numpy(x: ArrayLike, name: str, *, allow_empty: bool = False) -> np.ndarray:
    """``x`` as a float64 numpy array, refusing NaN, infinities and (by default) empty input."""
    if is_torch(x):
        if x.is_complex():
            raise ValueError(f"{name} must be real numbers; got a complex tensor.")
        arr = x.detach().to("cpu", dtype=torch.float64).numpy()
    else:
        try:
            if x is None or isinstance(x, (str, bytes)):  # None would become NaN, "8" would parse
                raise TypeError(f"{type(x).__name__} is not a number")
            raw = np.asarray(x)
            if raw.dtype.kind in "USVc":  # text, raw bytes, records, complex: refuse, do not parse
                raise TypeError(f"its values are {raw.dtype} (text or complex), not real numbers")
            arr = raw.astype(np.float64, copy=False)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"{name} must be numeric (numbers, a list, a numpy array or a torch tensor); "
                f"got {type(x).__name__}: {err}"
            ) from None
    if arr.size == 0 and not allow_empty:
        raise ValueError(f"{name} is empty; pass at least one value.")
    if not np.all(np.isfinite(arr)):
        bad = int(np.count_nonzero(~np.isfinite(arr)))
        hint = " (a NaN reward usually means a verifier failed)" if "reward" in name else ""
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s); drop or fill them before calling{hint}.")
    return arr


def like(result: np.ndarray, template: ArrayLike) -> ArrayLike:
    """Return ``result`` as the kind of object ``template`` was.

    A torch template gives a tensor on the template's device (float64 unless the template is a
    floating tensor of another precision); a scalar template gives a Python float; otherwise a
    numpy array.
    """
    if is_torch(template):
        dtype = template.dtype if template.is_floating_point() else torch.float64
        return torch.as_tensor(result, dtype=dtype, device=template.device)
    if np.ndim(result) == 0 and np.ndim(template) == 0:
        return float(result)
    return result


def check_unit_interval(arr: np.ndarray, name: str) -> None:
    """Refuse values outside [0, 1] (probabilities and pass rates)."""
    if np.any((arr < 0.0) | (arr > 1.0)):
        raise ValueError(
            f"{name} must lie in [0, 1] (it is a probability); got values from {arr.min():g} "
            f"to {arr.max():g}. If you have counts k out of n, pass k / n."
        )


def check_binary(arr: np.ndarray, name: str) -> None:
    """Refuse rewards that are not exactly 0 or 1."""
    if not np.all((arr == 0.0) | (arr == 1.0)):
        values = np.unique(arr[(arr != 0.0) & (arr != 1.0)])[:5]
        raise ValueError(
            f"{name} must be binary (0 = wrong, 1 = correct); found other values such as "
            f"{values.tolist()}. Map a verifier's output to 0/1 first, or, for shaped rewards, "
            "use the functions that accept real rewards (group_std, group_advantages)."
        )


def check_group_size(group_size: Any, name: str = "group_size") -> int:
    """A group size must be an integer G >= 2 (one sample has no spread to measure)."""
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)):
        if is_torch(group_size) or isinstance(group_size, np.ndarray):
            raise ValueError(f"{name} must be a single integer, not an array; got {shown(group_size)}.")
        if isinstance(group_size, float) and group_size.is_integer():
            group_size = int(group_size)
        else:
            raise ValueError(f"{name} must be an integer >= 2; got {shown(group_size)}.")
    if group_size < 2:
        raise ValueError(
            f"{name} must be at least 2 (a group of one sample always has zero spread, so "
            f"every recipe gives it zero advantage); got {group_size}."
        )
    return int(group_size)


def check_group_size_array(group_size: ArrayLike, name: str = "group_size") -> np.ndarray:
    """Vectorised form of :func:`check_group_size` for closed forms that broadcast over G."""
    if is_torch(group_size):
        booleans = group_size.dtype == torch.bool
    else:
        booleans = isinstance(group_size, (bool, np.bool_)) or getattr(group_size, "dtype", None) == np.bool_
    if booleans:
        raise ValueError(f"{name} must hold positive integers, not booleans; got {shown(group_size)}.")
    arr = to_numpy(group_size, name)
    if np.any(arr != np.round(arr)) or np.any(arr < 1):
        raise ValueError(f"{name} must hold positive integers; got {np.unique(arr)[:5].tolist()}.")
    return arr


def check_pool(solve_rates: ArrayLike, counts: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """A pool of prompts as (p, c): 1-D solve rates in [0, 1] and, one per solve rate, the
    non-negative number (or weight) of prompts that have it."""
    p = to_numpy(solve_rates, "solve_rates")
    check_unit_interval(p, "solve_rates")
    c = to_numpy(counts, "counts")
    if p.ndim != 1 or c.shape != p.shape:
        raise ValueError(
            f"solve_rates and counts must be 1-D with one count per solve rate (one entry per solve "
            f"rate in each, same length); got shapes {p.shape} and {c.shape}."
        )
    if np.any(c < 0):
        raise ValueError("counts must be non-negative: how many prompts have each solve rate.")
    return p, c


def unit_scale(arr: np.ndarray, axis: int = -1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``arr`` divided, along ``axis``, by the power of two that brings each slice's largest |value|
    into [0.5, 1); returns (scaled, exponent, scaled peak), shapes kept for broadcasting.

    Scaling by a power of two is exact, so means, standard deviations and their ratios come out
    bit for bit as unscaled (multiply back with ``np.ldexp(x, exponent)``), but squares can no
    longer overflow (values near 1e200) or underflow (near 1e-200). A zero slice stays as it is.
    """
    peak = np.abs(arr).max(axis=axis, keepdims=True)
    exponent = np.frexp(peak)[1]
    return np.ldexp(arr, -exponent), exponent, np.ldexp(peak, -exponent)


def split_groups(rewards: np.ndarray, group_size: int, name: str = "rewards") -> np.ndarray:
    """Reshape a flat batch whose groups are contiguous into shape (num_groups, group_size)."""
    if rewards.ndim != 1:
        raise ValueError(
            f"{name} must be a flat 1-D batch (groups contiguous, G samples of prompt 0 first); "
            f"got shape {tuple(rewards.shape)}. Flatten it with .reshape(-1)."
        )
    if rewards.shape[0] % group_size != 0:
        raise ValueError(
            f"the batch of {rewards.shape[0]} {name} does not divide into groups of "
            f"group_size={group_size}; pass a batch of num_prompts * group_size samples."
        )
    return rewards.reshape(-1, group_size)


def check_int(value: Any, name: str, minimum: int | None = None, hint: str = "") -> int:
    """``value`` as an int: a whole number (int, numpy integer or an integral float), not a bool.

    ``TypeError`` for another type (a string, None, an array), ``ValueError`` for a fraction, NaN,
    infinity or a value below ``minimum``; ``hint`` (a sentence) is appended to the message.
    """
    hint = f" {hint}" if hint else ""
    value = _scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer, float, np.floating)):
        raise TypeError(f"{name} must be a whole number; got {type(value).__name__} {shown(value)}.{hint}")
    if isinstance(value, (float, np.floating)) and not (math.isfinite(value) and float(value).is_integer()):
        raise ValueError(f"{name} must be a whole number; got {shown(value)}.{hint}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}; got {value}.{hint}")
    return value


def check_number(value: Any, name: str, hint: str = "") -> float:
    """``value`` as a finite float: ``TypeError`` for a non-number (a string, None, a bool, an
    array), ``ValueError`` for NaN or infinity."""
    hint = f" {hint}" if hint else ""
    value = _scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number; got {type(value).__name__} {shown(value)}.{hint}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number; got {shown(value)}.{hint}")
    return float(value)


def check_tensor(x: Any, name: str, ndim: int | None = None, kind: str | None = None) -> None:
    """Refuse what is not a torch tensor (``TypeError``), one of the wrong rank (``ValueError``)
    or, with ``kind`` "float", "int" or "real" (not bool or complex), of the wrong dtype (``TypeError``)."""
    if not is_torch(x):
        raise TypeError(f"{name} must be a torch tensor; got {type(x).__name__}. Convert it with torch.as_tensor.")
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s); got shape {tuple(x.shape)}.")
    if kind == "float" and not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor (log-probabilities); got {x.dtype}.")
    if kind == "int" and (x.is_floating_point() or x.is_complex() or x.dtype == torch.bool):
        raise TypeError(f"{name} must be an integer tensor of token ids (torch.long); got {x.dtype}.")
    if kind == "real" and (x.is_complex() or x.dtype == torch.bool):
        raise TypeError(
            f"{name} must hold real numbers (a float tensor); got {x.dtype}. Booleans here usually "
            "mean correctness flags were passed where advantages belong (see group_advantages)."
        )


def as_mask(x: Any, name: str, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    """A boolean torch mask: bool, or numbers that are all 0 or 1 (``ValueError`` for others)."""
    check_tensor(x, name)
    if shape is not None and tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}; got {tuple(x.shape)}.")
    if x.dtype != torch.bool:
        if not bool(((x == 0) | (x == 1)).all()):
            raise ValueError(
                f"{name} must hold booleans (or 0/1); found other values. Build it with a "
                "comparison, e.g. ids != pad_id."
            )
        x = x.to(torch.bool)
    return x


def check_token_ids(ids: Any, name: str, vocab_size: int) -> None:
    """Refuse token ids that are not integers in [0, vocab_size) (the embedding's rows)."""
    check_tensor(ids, name, kind="int")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(
            f"{name} holds ids from {int(ids.min())} to {int(ids.max())}, outside the model's "
            f"vocabulary 0..{vocab_size - 1}; encode text with the tokenizer the model was built for."
        )


def _scalar(value: Any) -> Any:
    """A 0-d numpy array or torch tensor as its Python number; anything else unchanged."""
    if (isinstance(value, np.ndarray) or is_torch(value)) and value.ndim == 0:
        return value.item()
    return value


def check_broadcast(**arrays: Any) -> None:
    """Refuse arrays whose shapes do not broadcast together, naming them (not numpy's message)."""
    shapes = {name: np.shape(value) for name, value in arrays.items()}
    try:
        np.broadcast_shapes(*shapes.values())
    except ValueError:
        listed = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ValueError(
            f"the shapes {listed} do not broadcast together; pass arrays of one shape, or a "
            "scalar for all but one of them."
        ) from None


#: Control characters (C0 but tab and newline, DEL, C1): terminal escape codes among them.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: Any) -> str:
    """``text`` with control characters removed (tab and newline kept), so that a file name or a
    column header read from a reader's data cannot send escape codes to the terminal it is printed on."""
    return _CONTROL.sub("", str(text))


def check_reward_values(correct: Any, wrong: Any) -> tuple[float, float]:
    """``(correct, wrong)`` as floats: the rewards of a verified and of a failed answer, finite
    numbers with ``correct > wrong`` (0/1 by default; DAPO's paper used ±1), else a ``ValueError``
    (a ``TypeError`` for what is not a number). Reversed or equal values would train away from correct
    answers or teach nothing."""
    values = []
    for name, value in (("correct", correct), ("wrong", wrong)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"the reward {name} must be a number; got {type(value).__name__} {value!r:.40}.")
        if not math.isfinite(float(value)):
            raise ValueError(f"the reward {name} must be a finite number; got {value!r}. Use 1 and 0 (or 1 and -1).")
        values.append(float(value))
    if not values[0] > values[1]:
        raise ValueError(
            f"the reward of a correct answer ({values[0]:g}) must exceed that of a wrong one ({values[1]:g}); "
            "use correct=1, wrong=0 (or 1 and -1)."
        )
    return values[0], values[1]


def check_per_completion(values: Any, name: str, rows: int) -> None:
    """Refuse ``values`` unless it is a list (tuple, array) of one entry per completion: a string would
    pair completions with its characters, and a shorter list would drop completions in ``zip``."""
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__"):
        raise TypeError(
            f"{name} must be a list with one entry per completion; got {type(values).__name__} {values!r:.40}."
        )
    if len(values) != rows:
        raise ValueError(f"{rows} completions but {len(values)} values of {name}; pass one {name} per completion.")
