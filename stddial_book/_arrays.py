"""Input handling shared by the numeric modules: numpy or torch in, the same kind out.

Every public function of :mod:`stddial_book.identity` and :mod:`stddial_book.recipes`
accepts plain Python numbers, sequences, numpy arrays or torch tensors. This module turns
the input into an array of one backend, validates it at the public boundary, and turns the
result back into what the caller passed. Errors are ``ValueError`` with the fix in the message.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
        arr = x.detach().to("cpu", dtype=torch.float64).numpy()
    else:
        try:
            arr = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"{name} must be numeric (numbers, a list, a numpy array or a torch tensor); "
                f"got {type(x).__name__}: {err}"
            ) from None
    if arr.size == 0 and not allow_empty:
        raise ValueError(f"{name} is empty; pass at least one value.")
    if not np.all(np.isfinite(arr)):
        bad = int(np.count_nonzero(~np.isfinite(arr)))
        raise ValueError(
            f"{name} contains {bad} NaN or infinite value(s); drop or fill them before calling "
            "(a NaN reward usually means a verifier failed)."
        )
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
            raise ValueError(f"{name} must be a single integer, not an array; got {group_size!r}.")
        if isinstance(group_size, float) and group_size.is_integer():
            group_size = int(group_size)
        else:
            raise ValueError(f"{name} must be an integer >= 2; got {group_size!r}.")
    if group_size < 2:
        raise ValueError(
            f"{name} must be at least 2 (a group of one sample always has zero spread, so "
            f"every recipe gives it zero advantage); got {group_size}."
        )
    return int(group_size)


def check_group_size_array(group_size: ArrayLike, name: str = "group_size") -> np.ndarray:
    """Vectorised form of :func:`check_group_size` for closed forms that broadcast over G."""
    arr = to_numpy(group_size, name)
    if np.any(arr != np.round(arr)) or np.any(arr < 1):
        raise ValueError(f"{name} must hold positive integers; got {np.unique(arr)[:5].tolist()}.")
    return arr


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
