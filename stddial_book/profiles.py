"""Run profiles: ``quick`` (CPU, minutes; the site build and CI) and ``full`` (GPU).

The profile is chosen by the environment variable ``STDDIAL_PROFILE`` (``quick`` or ``full``);
when it is unset, ``full`` is used if CUDA is available and ``quick`` otherwise. Chapters call
:func:`active_profile` once and print which profile they run, so a reader always knows whether
a number came from the small CPU run or the GPU run. Chapter 1 explains the choice.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ["Profile", "PROFILES", "ENV_VAR", "active_profile", "cuda_available"]

ENV_VAR = "STDDIAL_PROFILE"


@dataclass(frozen=True)
class Profile:
    """A named run size: where it runs and the testbed model it trains.

    ``model`` holds the keyword arguments of :func:`stddial_book.model.tiny_model`; the quick
    model is the one measured to learn 2-digit addition on one CPU core (about 1.05M
    parameters), the full one is four times wider in its feed-forward and twice as deep.
    """

    name: str
    device: str
    description: str
    model: dict = field(default_factory=dict)


PROFILES: dict[str, Profile] = {
    "quick": Profile("quick", "cpu", "small runs that finish in minutes on 2 CPU cores; "
                     "what the online book executes at build time",
                     model=dict(hidden_size=128, num_layers=4, num_heads=4, intermediate_size=512)),
    "full": Profile("full", "cuda", "GPU-scale runs; their logs are committed with provenance "
                    "and plotted beside the quick runs",
                    model=dict(hidden_size=256, num_layers=8, num_heads=8, intermediate_size=1024)),
}


def cuda_available() -> bool:
    """True when torch is importable and sees a CUDA device."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return False
    return bool(torch.cuda.is_available())


def active_profile(name: str | None = None) -> Profile:
    """The profile named by ``name``, else by ``$STDDIAL_PROFILE``, else full on CUDA, else quick."""
    chosen = name if name is not None else os.environ.get(ENV_VAR, "").strip()
    if not chosen:
        chosen = "full" if cuda_available() else "quick"
    key = chosen.lower()
    if key not in PROFILES:
        raise ValueError(
            f"unknown profile {chosen!r} (from {'the argument' if name is not None else '$' + ENV_VAR}); "
            f"choose one of {sorted(PROFILES)}, e.g. {ENV_VAR}=quick."
        )
    profile = PROFILES[key]
    if profile.device == "cuda" and not cuda_available():
        raise ValueError(
            f"profile 'full' needs a CUDA GPU and none is visible; use {ENV_VAR}=quick on a CPU "
            "(in Colab: Runtime → Change runtime type → GPU)."
        )
    return profile
