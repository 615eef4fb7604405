"""The git repository a path lies in: its root, the files it tracks and the commit checked out.

The package's one use of ``subprocess``: a recorded run names the commit it ran (chapters 9-16), and
the write policy (:mod:`stddial_book.core.outdir`) refuses to write where a repository tracks files.
Without git installed every answer is "cannot tell" (``None``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["run_git", "repository_root", "tracked_files"]


def run_git(args: list[str], cwd: str | os.PathLike, timeout: float = 20) -> subprocess.CompletedProcess | None:
    """``git <args>`` run in ``cwd`` (output captured as bytes), or ``None`` when git cannot be run.

    ``args`` is the list of arguments after ``git``; ``cwd`` is the folder it runs in; ``timeout`` is the
    limit in seconds (default 20), past which the answer is ``None``.
    """
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, timeout=timeout, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
        )
    except (OSError, subprocess.SubprocessError):
        return None


def repository_root(path: str | os.PathLike) -> Path | None:
    """The root of the git work tree holding ``path`` (or its nearest existing ancestor): the nearest
    folder holding ``.git``; ``None`` outside any repository."""
    path = Path(path)
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    for candidate in (existing, *existing.parents) if existing is not None else ():
        if (candidate / ".git").exists():
            return candidate
    return None


def tracked_files(path: str | os.PathLike, limit: int = 1) -> tuple[Path, list[str]] | None:
    """``(repository root, up to limit tracked paths)`` when ``path`` is, or holds, a file its
    repository tracks; ``None`` when it holds none, lies in no repository, or git cannot tell.

    ``path`` is a file or folder; ``limit`` is how many tracked paths (relative to the root) to return at
    most (default 1: enough to say that one exists).
    """
    resolved = Path(path).resolve()
    root = repository_root(resolved)
    if root is None:
        return None
    out = run_git(["ls-files", "-z", "--", os.path.relpath(resolved, root)], root)
    if out is None or out.returncode != 0:
        return None
    names = [n for n in out.stdout.decode(errors="replace").split("\x00") if n][:limit]
    return (root, names) if names else None
