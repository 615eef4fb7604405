"""What differs between the ``transformers`` releases the package supports (``>=4.46``): one keyword today.

``from_pretrained`` and ``from_config`` take the weights' dtype as ``dtype`` from 4.56 on, where ``torch_dtype`` is
deprecated; before 4.56 only ``torch_dtype`` is known, and ``dtype`` is passed on to the model's constructor, which
refuses it. The package's loaders pass :func:`dtype_argument`'s keyword, so one call works on both sides.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

__all__ = ["DTYPE_KEYWORD_SINCE", "dtype_argument"]

#: The first ``transformers`` release whose loaders take ``dtype``.
DTYPE_KEYWORD_SINCE = (4, 56)


def _release(version: str) -> tuple[int, int]:
    """(major, minor) of a version string such as ``4.56.2`` or ``5.0.0rc1``."""
    parts = version.split(".")
    digits = ["".join(c for c in part if c.isdigit()) or "0" for part in parts[:2]]
    return int(digits[0]), int(digits[1]) if len(digits) > 1 else 0


def dtype_argument(dtype: Any, version: str | None = None) -> dict[str, Any]:
    """The keyword argument that gives a ``transformers`` loader the dtype ``dtype`` (a ``torch.dtype``):
    ``{"dtype": dtype}`` on ``transformers`` 4.56 and later, ``{"torch_dtype": dtype}`` before. ``version`` is the
    ``transformers`` version to answer for (``None``, the default: the installed one)."""
    installed = metadata.version("transformers") if version is None else version
    return {"dtype" if _release(installed) >= DTYPE_KEYWORD_SINCE else "torch_dtype": dtype}
