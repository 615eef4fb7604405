"""What the dial looks like on one generation batch of a real run (chapter 15).

:func:`batch_dial` is the core of what the book's TRL callback (``DialDiagnostics``) logs at every
step: from which completions passed and the advantages TRL gave them, the silent groups (all wrong,
all right), each group's σ and the update mass ``Σᵢ |Aᵢ|`` it carried. The engine's
``bridges.lm_diagnostics.batch_diagnostics`` also checks its inputs, bins the mass by pass rate and
checks TRL's advantages against the book's; tests/test_teaching.py ties the two together.
"""

from __future__ import annotations

import numpy as np

__all__ = ["batch_dial"]


def batch_dial(passed, advantages, group_size: int) -> dict[str, float]:
    """Silent groups, mean σ and update mass of one batch of groups of ``group_size`` completions.

    ``passed`` holds one 0/1 (or bool) flag a completion and ``advantages`` one Aᵢ a completion,
    in the same order, each group's G completions contiguous.
    """
    k = np.asarray(passed, dtype=int).reshape(-1, group_size).sum(axis=1)  # correct per group
    sigma = np.sqrt(k * (group_size - k)) / group_size  # σ = sqrt(p̂(1 - p̂)), zero when silent
    mass = np.abs(np.asarray(advantages, dtype=float)).reshape(-1, group_size).sum(axis=1)  # Σᵢ |Aᵢ|
    return {
        "silent_wrong": float(np.mean(k == 0)),  # every completion failed
        "silent_right": float(np.mean(k == group_size)),  # every completion passed
        "sigma_mean": float(sigma.mean()),
        "mass_in_silent": float(mass[(k == 0) | (k == group_size)].sum()),  # zero: A = 0 in a silent group
        "mass": float(mass.sum()),
    }
