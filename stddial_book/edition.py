"""What this edition of the book was built with, and where its recorded results come from.

The appendix page "This edition" executes :func:`build_facts` and :func:`recorded_rows` when the
site is built, so the versions, the commit, the date and the device it names are those of the
build itself, and the recorded runs are described by their own provenance files.
"""

from __future__ import annotations

from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["BUILD_PACKAGES", "build_facts", "recorded_rows"]

#: The packages whose versions the page lists (those the results or the site depend on).
BUILD_PACKAGES = ("stddial-book", "torch", "numpy", "transformers", "tokenizers", "sympy", "matplotlib",
                  "jupyter-book", "myst-nb", "sphinx")


def build_facts(root: str | Path | None = None) -> dict[str, Any]:
    """Date (UTC), git commit, Python, package versions, the device and the profile of this build.

    ``root`` is the checkout the book is built from (default: the current directory); outside a
    git checkout (an installed wheel) the commit is ``"unknown"``.
    """
    from .profiles import active_profile
    from .runs import _git_commit, environment

    versions = {}
    for name in BUILD_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    profile = active_profile()
    env = environment(profile.device)
    return {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "commit": _git_commit(Path(root) if root is not None else Path.cwd()),
            "python": env["python"], "packages": versions, "device": env["device"], "profile": profile.name}


def recorded_rows(profile: str = "reference") -> list[list[str]]:
    """One row per recorded recipe: seeds, device, commits, recording dates, wall time per run.

    Read from each committed run's ``provenance.json`` (:func:`stddial_book.runs.recorded_runs`).
    """
    from .runs import recorded_runs
    from .runs import read_json

    rows = []
    for key, paths in recorded_runs(profile).items():
        provenance = [read_json(p / "provenance.json") for p in paths]
        devices = sorted({p["device"] for p in provenance})
        commits = sorted({str(p.get("git_commit", "unknown"))[:7] for p in provenance})
        dates = sorted(p["started_at"][:10] for p in provenance)
        wall = [p["wall_time_s"] for p in provenance if p.get("wall_time_s")]
        rows.append([provenance[0]["config"]["train"]["recipe"]["name"], str(len(paths)), ", ".join(devices),
                     ", ".join(commits), dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}",
                     f"{sum(wall) / len(wall) / 60:.1f}" if wall else "unknown"])
    return rows
