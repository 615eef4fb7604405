"""What this edition of the book was built with, and where its recorded results come from.

The appendix page "This edition" executes :func:`build_facts` and :func:`recorded_rows` when the
site is built, so the versions, the commit, the date and the device it names are those of the
build itself, and the recorded runs are described by their own provenance files.
"""

from __future__ import annotations

import re
import statistics
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["BUILD_PACKAGES", "build_facts", "recorded_rows"]

#: The packages whose versions the page lists (those the results or the site depend on).
BUILD_PACKAGES = (
    "stddial-book",
    "torch",
    "numpy",
    "transformers",
    "tokenizers",
    "sympy",
    "matplotlib",
    "jupyter-book",
    "myst-nb",
    "sphinx",
)


def build_facts(root: str | Path | None = None) -> dict[str, Any]:
    """Date (UTC), git commit, Python, package versions, the device and the profile of this build.

    ``root`` is the checkout the book is built from (default: the current directory); outside a
    git checkout (an installed wheel) the commit is ``"unknown"``.
    """
    from stddial_book.rl.profiles import active_profile
    from stddial_book.rl.runlog import environment, git_state

    versions = {}
    for name in BUILD_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    profile = active_profile()
    env = environment(profile.device)
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "commit": _commit_text(*git_state(Path(root) if root is not None else Path.cwd())),
        "python": env["python"],
        "packages": versions,
        "device": env["device"],
        "profile": profile.name,
    }


def _commit_text(commit: str, dirty: bool | None) -> str:
    return commit + ("+dirty" if dirty else "")


#: A CPU as the provenance names it since runs record their core count: ``cpu (x86_64, 2 cores)``.
_CPU = re.compile(r"cpu \((?P<processor>.+?)(?:, (?P<cores>\d+) cores)?\)")


def _devices(provenance: list[dict[str, Any]]) -> str:
    """The distinct devices of one recipe's runs, each CPU written ``cpu (<processor>, <cores>)``.

    Runs recorded before the provenance named the core count give only the processor (``x86_64``,
    which their ``platform`` string also contains); they count as that CPU with cores not recorded.
    """
    cpus: dict[str, list[str | None]] = {}
    others = set()
    for p in provenance:
        device = str(p.get("device") or "unknown")
        match = _CPU.fullmatch(device)
        if match:
            cpus.setdefault(match["processor"], []).append(match["cores"])
        elif "(" not in device and device in str(p.get("platform", "")):
            cpus.setdefault(device, []).append(None)
        else:
            others.add(device)
    names = []
    for processor, cores in sorted(cpus.items()):
        known = sorted({c for c in cores if c is not None}, key=int)
        detail = " or ".join(known) + " cores" if known else "cores not recorded"
        if known and None in cores:
            detail += f"; not recorded for {cores.count(None)} of {len(cores)} runs"
        names.append(f"cpu ({processor}, {detail})")
    return ", ".join(names + sorted(others))


def recorded_rows(profile: str = "reference", root: str | Path | None = None) -> list[list[str]]:
    """One row per recorded recipe: seeds, devices, commits, recording dates, median wall minutes per run.

    Read from each committed run's ``provenance.json`` (:func:`stddial_book.rl.runlog.recorded_runs`;
    ``root`` as there). The wall time is the median over seeds, as in
    :func:`stddial_book.rl.costs.check_on_cpu`: a run resumed after an interruption may log only its
    last part. ``profile`` names the recorded runs' profile (their folder under the recorded runs;
    default ``"reference"``).
    """
    from stddial_book.rl.runlog import recorded_runs, run_json

    rows = []
    for _key, paths in recorded_runs(profile, root).items():
        provenance = [run_json(p, "provenance.json") for p in paths]
        commits = sorted({str(p.get("git_commit", "unknown"))[:7] for p in provenance})
        dates = sorted(p["started_at"][:10] for p in provenance)
        wall = [p["wall_time_s"] for p in provenance if p.get("wall_time_s")]
        rows.append(
            [
                provenance[0]["config"]["train"]["recipe"]["name"],
                str(len(paths)),
                _devices(provenance),
                ", ".join(commits),
                dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}",
                f"{statistics.median(wall) / 60:.1f}" if wall else "unknown",
            ]
        )
    return rows
