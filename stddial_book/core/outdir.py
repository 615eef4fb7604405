"""Output directories: where a command may write, and the only things it may ever delete.

Every command that writes (``sft``, ``train``, ``record``, the table builders) goes through
:func:`claim_dir`. A directory is the tool's only if it holds the marker file :data:`MARKER`,
which the tool writes when it creates the directory (with the run's id, its kind and the time).
Everything else belongs to the reader and is never deleted or overwritten:

- a path that names a place no run should go is refused before anything is written: ``''``,
  ``.``, ``..``, the filesystem root, the home directory, the current directory or one of its
  parents, a repository's root (a directory holding ``.git``) and the package's own directory;
- an existing directory without the marker is used only if it is empty;
- :func:`remove_owned` deletes named entries inside a marked directory, never the directory a
  reader typed, and nothing in a directory without the marker.

``~`` and environment variables are expanded as a shell would (``~/runs``, ``$SCRATCH/run``), so a
quoted ``'~'`` never creates a directory literally named ``~``.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = [
    "MARKER",
    "expand_path",
    "refusal",
    "checked_path",
    "require_owned",
    "check_claimable",
    "claim_dir",
    "owns",
    "read_marker",
    "remove_owned",
]

#: The file that makes a directory the tool's: written when the tool creates a run directory.
MARKER = ".stddial-run.json"

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # stddial_book/


def expand_path(path: str | os.PathLike) -> Path:
    """``path`` with ``~`` and ``$VARS`` expanded as a shell would; a ``TypeError`` for non-paths."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"an output directory must be a path (str or Path); got {type(path).__name__}.")
    text = os.fspath(path)
    if isinstance(text, bytes):
        raise TypeError("an output directory must be a text path, not bytes.")
    # absolute, so that a directory literally named "~" (from "./~") is never expanded a second time
    return Path(os.path.abspath(os.path.expandvars(os.path.expanduser(text))))


def _ancestors_or_self(path: Path) -> set[Path]:
    return {path, *path.parents}


def refusal(path: str | os.PathLike) -> str | None:
    """Why ``path`` can never be a run directory (one line naming it and the fix), or ``None``."""
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if text is None or isinstance(text, bytes):
        return f"the output directory must be a text path; got {type(path).__name__}."
    if text.strip() in ("", ".", ".."):
        return (
            f"the output directory {text!r} names the current directory or its parent; name a new "
            "directory for the run, e.g. --out runs/my-run."
        )
    expanded = expand_path(text)
    if "$" in str(expanded):
        return (
            f"the output directory {text!r} uses an environment variable that is not set; set it or write the path out."
        )
    resolved = expanded.resolve()
    fix = "name a new directory inside it for the run, e.g. --out runs/my-run."
    if resolved == Path(resolved.anchor):
        return f"the output directory {text!r} is the filesystem root; {fix}"
    home = Path.home().resolve()
    if resolved in _ancestors_or_self(home):
        return f"the output directory {text!r} is the home directory or one of its parents; {fix}"
    if resolved in _ancestors_or_self(Path.cwd().resolve()):
        return f"the output directory {text!r} is the current directory or one of its parents; {fix}"
    if resolved == _PACKAGE_DIR or _PACKAGE_DIR in resolved.parents:
        return (
            f"the output directory {text!r} is inside the stddial_book package itself; write runs "
            "somewhere else, e.g. --out runs/my-run."
        )
    if resolved in _ancestors_or_self(_PACKAGE_DIR.parent):
        return f"the output directory {text!r} holds the stddial_book package (a checkout or site-packages); {fix}"
    if (resolved / ".git").exists():
        return f"the output directory {text!r} is a repository's root; {fix}"
    return None


def read_marker(directory: str | os.PathLike) -> dict[str, Any] | None:
    """The marker of a directory the tool wrote, or ``None`` when it has none (or it is unreadable)."""
    path = Path(directory) / MARKER
    try:
        marker = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("tool") != "stddial_book" or "run_id" not in marker:
        return None
    return marker


def owns(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` holds the marker the tool writes into the directories it creates."""
    return Path(directory).is_dir() and read_marker(directory) is not None


def checked_path(path: str | os.PathLike, flag: str | None = "--out") -> Path:
    """``path`` expanded (:func:`expand_path`), or the ``ValueError`` :func:`refusal` words (after
    ``flag``, the option that named it)."""
    reason = refusal(path)
    if reason is not None:
        raise ValueError(f"{flag}: {reason}" if flag else reason)
    return expand_path(path)


def require_owned(path: str | os.PathLike, flag: str = "--out") -> Path:
    """``path`` expanded, if it is a directory the tool wrote (what a resumed run needs); else a
    ``ValueError`` and nothing touched."""
    directory = checked_path(path, flag)
    if not owns(directory):
        raise ValueError(
            f"cannot resume: {directory} was not written by stddial_book (no {MARKER}); start a new "
            "run without --resume in a new --out directory."
        )
    return directory


def check_claimable(path: str | os.PathLike, flag: str = "--out") -> Path:
    """The expanded ``path`` if :func:`claim_dir` would accept it; else the ``ValueError`` it would
    raise. Creates nothing: commands check every directory before any work starts."""
    directory = checked_path(path, flag)
    if directory.is_symlink() or (directory.exists() and not directory.is_dir()):
        raise ValueError(f"{flag} {directory} is a file or a link; choose a new directory.")
    blocking = next((p for p in directory.parents if p.exists() or p.is_symlink()), None)
    if blocking is not None and not blocking.is_dir():
        raise ValueError(f"{flag} {directory} cannot be created: {blocking} is a file; choose another directory.")
    if directory.is_dir() and not owns(directory) and any(directory.iterdir()):
        raise ValueError(
            f"{flag} {directory} is not empty and was not written by stddial_book (it has no "
            f"{MARKER}); nothing was changed: choose a new or empty directory."
        )
    return directory


def claim_dir(path: str | os.PathLike, kind: str, *, flag: str = "--out") -> Path:
    """The directory ``path`` (expanded), made the tool's, or a ``ValueError`` with nothing touched.

    A new directory is created (parents included) and marked; an empty existing directory is
    marked; a directory the tool marked earlier is returned as it is. Anything else (a file, a
    non-empty directory without the marker, a path :func:`refusal` names) is refused with one
    line naming the directory and the fix. ``kind`` (``"sft"``, ``"train"``, ...) goes into the
    marker with a new run id; ``flag`` is the option the message names.
    """
    directory = check_claimable(path, flag)
    if owns(directory):
        return directory
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(
            f"{flag} {directory} cannot be created ({err.strerror}); check the path and its permissions."
        ) from None
    marker = {
        "tool": "stddial_book",
        "kind": str(kind),
        "run_id": uuid.uuid4().hex,
        "created": datetime.now(timezone.utc).isoformat(),
    }
    with open(directory / MARKER, "x") as handle:  # "x": never overwrite a file of that name
        handle.write(json.dumps(marker, indent=2) + "\n")
    return directory


def remove_owned(directory: str | os.PathLike, names: Iterable[str]) -> list[str]:
    """Delete the entries ``names`` (files or folders the tool writes) inside a marked directory.

    Only plain names are accepted (no ``/``, ``..`` or the marker itself), only inside a
    directory holding the marker, and a symbolic link is removed as a link, never followed.
    Returns the names removed. A directory without the marker gets a ``ValueError`` and nothing
    is deleted.
    """
    directory = Path(directory)
    if not owns(directory):
        raise ValueError(
            f"{directory} was not written by stddial_book (it has no {MARKER}); nothing was "
            "deleted: choose a new or empty output directory."
        )
    removed = []
    for name in names:
        if not name or name in (".", "..", MARKER) or "/" in name or os.sep in name:
            raise ValueError(f"remove_owned takes plain entry names other than {MARKER}; got {name!r}.")
        target = directory / name
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        else:
            continue
        removed.append(name)
    return removed
