"""Profile selection and the model size each profile names."""

from __future__ import annotations

import pytest

from stddial_book.rl.model import model_for_profile
from stddial_book.rl.profiles import PROFILES, active_profile, cuda_available


def test_selection_by_argument_and_environment(monkeypatch) -> None:
    assert active_profile("quick").name == "quick"
    monkeypatch.setenv("STDDIAL_PROFILE", "QUICK")
    assert active_profile().name == "quick"
    monkeypatch.delenv("STDDIAL_PROFILE")
    assert active_profile().name == ("full" if cuda_available() else "quick")


def test_unknown_profile_and_full_without_gpu(monkeypatch) -> None:
    monkeypatch.setenv("STDDIAL_PROFILE", "huge")
    with pytest.raises(ValueError, match="choose one of"):
        active_profile()
    if not cuda_available():
        with pytest.raises(ValueError, match="needs a CUDA GPU"):
            active_profile("full")


def test_profile_model_sizes() -> None:
    quick = model_for_profile(PROFILES["quick"])
    n_quick = sum(p.numel() for p in quick.parameters())
    assert 1.0e6 < n_quick < 1.1e6
    full = model_for_profile(PROFILES["full"])
    assert sum(p.numel() for p in full.parameters()) > 4 * n_quick
