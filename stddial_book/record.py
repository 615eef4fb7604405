"""Recorded reference runs: one SFT warm start, then every recipe over several seeds (chapters 9-13).

``python -m stddial_book record --profile reference`` runs them one after another in a work
directory (default ``runs/record-<profile>``), resuming any run an interruption left behind, and
copies each finished run's ``metrics.jsonl`` and ``provenance.json`` (never its checkpoints) to
``data/runs/<profile>/<recipe>-seed<k>/``, plus the warm start's log to ``data/runs/<profile>/sft/``.
The provenance each run writes says where it ran (device, versions, commit, wall time); the book
plots these logs beside its live runs and says which is which.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Sequence

__all__ = ["record_runs", "RECORDED_FILES"]

#: What is copied from a finished run into data/runs: the log and its provenance, nothing heavy.
RECORDED_FILES = ("metrics.jsonl", "provenance.json")


def record_runs(profile, recipes: Sequence[str], seeds: Sequence[int], work: str | Path, out: str | Path,
                sft_seed: int = 0, progress: bool = False, command: str = "") -> list[Path]:
    """Run (or resume) every recipe × seed from one SFT model and copy the logs to ``out``."""
    from .experiments import remove_stale_run, sft_to_dir, train_to_dir
    from .recipes import recipe_key
    from .train import checkpoint_dir

    work, out = Path(work), Path(out)
    sft_dir = work / f"sft-seed{sft_seed}"
    if not (sft_dir / "model.safetensors").exists():
        sft_to_dir(profile, sft_seed, sft_dir, progress=progress, command=command)
    _copy(sft_dir, out / "sft", RECORDED_FILES + ("sft.json",))
    written = []
    for recipe in recipes:
        for seed in seeds:
            name = f"{recipe_key(recipe)}-seed{seed}"
            run = work / name
            if not (run / "done").exists():
                resume = checkpoint_dir(run) is not None
                if not resume:
                    remove_stale_run(run)
                train_to_dir(profile, recipe, seed, sft_dir, run, resume=resume, progress=progress,
                             command=command)
                (run / "done").write_text("finished\n")
            written.append(_copy(run, out / name, RECORDED_FILES))
    return written


def _copy(src: Path, dst: Path, names: Sequence[str]) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for name in names:
        if (src / name).exists():
            shutil.copyfile(src / name, dst / name)
    return dst
