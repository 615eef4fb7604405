"""Whether the Hugging Face hub can be reached now: loaders of hub models and datasets ask first,
and fail at once with the reason instead of retrying a download for a minute (the book's build
machines are offline).

The hub is found as ``huggingface_hub`` finds it: ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``)
turns it off, ``HF_ENDPOINT`` names it (a mirror or a local server; https://huggingface.co by
default), and an ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY`` setting (``NO_PROXY`` honoured) is
the host a download connects to instead of the endpoint.
"""

from __future__ import annotations

import os
import socket
import sys
import urllib.request
from urllib.parse import urlsplit

__all__ = ["hub_unavailable_reason"]

DEFAULT_ENDPOINT = "https://huggingface.co"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _is_true(value: str | None) -> bool:
    """``huggingface_hub``'s reading of a boolean environment variable."""
    return value is not None and value.upper() in {"1", "ON", "YES", "TRUE"}


def _offline() -> bool:
    """Offline as the environment says now, or as ``huggingface_hub`` read it at its import (it
    refuses every request then, whatever the environment says later). Not imported yet, it will
    read the environment just checked: it is not imported here (that would fix its reading)."""
    if _is_true(os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")):
        return True
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is None:
        return False
    is_offline = getattr(constants, "is_offline_mode", None)  # huggingface_hub >= 1.0
    return bool(is_offline() if callable(is_offline) else getattr(constants, "HF_HUB_OFFLINE", False))


def _endpoint() -> str:
    """The hub's address: ``HF_ENDPOINT`` read now, as ``huggingface_hub.constants.ENDPOINT`` reads it."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _proxy_for(url: str) -> str | None:
    """The proxy a request to ``url`` goes through (the ``*_PROXY`` variables, upper or lower case,
    that ``requests`` and ``httpx`` read), or ``None`` when there is none or ``NO_PROXY`` exempts it."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _shown(url: str) -> str:
    """``url`` without the user name and password a proxy address may carry."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def _address(url: str) -> tuple[str, int] | None:
    """The (host, port) of an http(s) URL, or ``None`` when it names none."""
    parts = urlsplit(url)
    try:
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:  # a port that is not a number
        return None
    return (parts.hostname, port) if parts.hostname and port else None


def hub_unavailable_reason(timeout_s: float = 3.0) -> str | None:
    """Why the Hugging Face hub cannot be used now, or ``None`` when it can.

    Offline mode (``HF_HUB_OFFLINE``) answers without touching the network. Otherwise the host a
    download would connect to, the proxy when one is set or else the ``HF_ENDPOINT`` host, must
    accept a TCP connection within ``timeout_s`` seconds: callers fail at once with this one-line
    reason instead of letting a download retry for a minute.
    """
    if _offline():
        return "HF_HUB_OFFLINE is set"
    endpoint = _endpoint()
    proxy = _proxy_for(endpoint)
    target = f"the proxy {_shown(proxy)} (for {_shown(endpoint)})" if proxy else _shown(endpoint)
    address = _address(proxy or endpoint)
    if address is None:
        return f"{target} is not an http(s) address with a host"
    try:
        with socket.create_connection(address, timeout=timeout_s):
            return None
    except OSError as err:
        why = err.strerror or str(err) or type(err).__name__
        return f"{target} cannot be reached ({why})"
