"""``core.hub.hub_unavailable_reason``: the hub found as ``huggingface_hub`` finds it (``HF_HUB_OFFLINE``,
``HF_ENDPOINT``, the ``*_PROXY`` variables), checked on loopback only: a closed port and a local HTTP server."""

from __future__ import annotations

import http.server
import socket
import sys
import threading
from types import SimpleNamespace

import pytest

from stddial_book.core import hub

_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture
def online(monkeypatch):
    """An environment with offline mode off (in it and, where it was imported already, in ``huggingface_hub``'s
    import-time reading of it: ``make test`` runs with ``HF_HUB_OFFLINE=1``) and no proxy. Nothing here imports
    ``huggingface_hub``: imported with HF_HUB_OFFLINE cleared, it would read the hub as online for the session."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    if "huggingface_hub.constants" in sys.modules:
        monkeypatch.setattr(sys.modules["huggingface_hub.constants"], "HF_HUB_OFFLINE", False)
    return monkeypatch


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on: bound by the OS, then released."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def server_url():
    """The address of an HTTP server on loopback, for the test's duration."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _no_network(*args, **kwargs):
    raise AssertionError(f"a network connection was attempted: {args}")


@pytest.mark.parametrize("name", ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"])
def test_offline_mode_answers_without_the_network(online, name) -> None:
    online.setenv(name, "1")
    online.setattr(socket, "create_connection", _no_network)
    assert hub.hub_unavailable_reason() == "HF_HUB_OFFLINE is set"


@pytest.mark.parametrize(
    "constants",
    [SimpleNamespace(is_offline_mode=lambda: True), SimpleNamespace(HF_HUB_OFFLINE=True)],
    ids=["is_offline_mode", "the constant (huggingface_hub < 1.0)"],
)
def test_offline_mode_read_by_huggingface_hub_at_import_counts(online, constants) -> None:
    """``huggingface_hub`` refuses every request when it was imported offline, whatever the environment says later."""
    online.setitem(sys.modules, "huggingface_hub.constants", constants)
    online.setattr(socket, "create_connection", _no_network)
    assert hub.hub_unavailable_reason() == "HF_HUB_OFFLINE is set"


def test_huggingface_hub_imported_online_is_asked(online, server_url) -> None:
    online.setitem(sys.modules, "huggingface_hub.constants", SimpleNamespace(is_offline_mode=lambda: False))
    online.setenv("HF_ENDPOINT", server_url)
    assert hub.hub_unavailable_reason() is None


def test_a_false_offline_value_is_online(online, server_url) -> None:
    online.setenv("HF_HUB_OFFLINE", "0")
    online.setenv("HF_ENDPOINT", server_url)
    assert hub.hub_unavailable_reason() is None


def test_an_endpoint_on_a_closed_port_is_named(online, closed_port) -> None:
    endpoint = f"http://127.0.0.1:{closed_port}"
    online.setenv("HF_ENDPOINT", endpoint + "/")
    reason = hub.hub_unavailable_reason(timeout_s=2.0)
    assert reason is not None and "\n" not in reason
    assert reason.startswith(f"{endpoint} cannot be reached"), reason


def test_a_local_server_as_endpoint_is_reachable(online, server_url) -> None:
    online.setenv("HF_ENDPOINT", server_url)
    assert hub.hub_unavailable_reason(timeout_s=2.0) is None


def test_an_endpoint_that_is_not_an_address_is_refused(online) -> None:
    online.setenv("HF_ENDPOINT", "huggingface.co")  # no scheme: no host to connect to
    online.setattr(socket, "create_connection", _no_network)
    reason = hub.hub_unavailable_reason()
    assert reason == "huggingface.co is not an http(s) address with a host"


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "https_proxy", "ALL_PROXY"])
def test_a_proxy_is_checked_instead_of_the_endpoint(online, server_url, variable) -> None:
    """The endpoint's host does not resolve (``.invalid``); the proxy, a local server, is what a download reaches."""
    online.setenv("HF_ENDPOINT", "https://hub.invalid")
    online.setenv(variable, server_url)
    assert hub.hub_unavailable_reason(timeout_s=2.0) is None


def test_an_unreachable_proxy_is_named_without_its_password(online, closed_port) -> None:
    online.setenv("HTTPS_PROXY", f"http://user:secret@127.0.0.1:{closed_port}")
    reason = hub.hub_unavailable_reason(timeout_s=2.0)
    assert reason is not None and "secret" not in reason
    assert reason.startswith(f"the proxy http://127.0.0.1:{closed_port} (for https://huggingface.co) cannot be reached")


def test_no_proxy_sends_the_endpoint_past_the_proxy(online, server_url, closed_port) -> None:
    online.setenv("HF_ENDPOINT", server_url)
    online.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed_port}")
    online.setenv("NO_PROXY", "127.0.0.1")
    assert hub.hub_unavailable_reason(timeout_s=2.0) is None
    online.delenv("NO_PROXY")
    assert "the proxy" in (hub.hub_unavailable_reason(timeout_s=2.0) or "")
