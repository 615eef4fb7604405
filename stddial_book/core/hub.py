"""Whether the Hugging Face hub can be reached now: loaders of hub models and datasets ask first,
and fail at once with the reason instead of retrying a download for a minute (the book's build
machines are offline).
"""

from __future__ import annotations

import os
import socket

__all__ = ["hub_unavailable_reason"]


def hub_unavailable_reason(timeout_s: float = 3.0) -> str | None:
    """Why the Hugging Face hub cannot be used now, or ``None`` when it can.

    ``HF_HUB_OFFLINE`` set, or no TCP connection to huggingface.co within ``timeout_s`` seconds:
    callers fail at once with this reason instead of letting a download retry for a minute.
    """
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return "HF_HUB_OFFLINE is set"
    try:
        with socket.create_connection(("huggingface.co", 443), timeout=timeout_s):
            return None
    except OSError:
        return "huggingface.co cannot be reached"
