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


def test_persistent_pool_is_the_reference_pool_with_a_declared_block():
    """The persistent-silence profile (Part V): its pool's first 171 prompts are 4-digit sums (the
    same in every run), the rest the reference pool's first prompts; warm start and held-out set
    are the reference's."""
    from stddial_book.rl.profiles import PROFILES

    persistent, reference = PROFILES["persistent"], PROFILES["reference"]
    train, heldout = persistent.rl_problems()
    ref_train, ref_heldout = reference.rl_problems()
    size, pool = persistent.pool_block["size"], persistent.train["pool_size"]
    assert (size, pool) == (171, 256)
    assert all(p.digits == 4 for p in train[:size]) and len({(p.a, p.b) for p in train[:size]}) == size
    assert train[size:pool] == ref_train[: pool - size] and heldout == ref_heldout
    assert train[:size] == persistent.rl_problems()[0][:size]  # one block for every run
    assert (persistent.model, persistent.task, persistent.sft) == (reference.model, reference.task, reference.sft)
    with pytest.raises(ValueError, match="pool_block"):
        type(persistent)("x", "cpu", "", train=dict(pool_size=8), pool_block=dict(size=8, digits=4, seed=0))
    with pytest.raises(ValueError, match="pool_block"):
        type(persistent)("x", "cpu", "", train=dict(pool_size=8), pool_block=dict(size=2, digits=4))
