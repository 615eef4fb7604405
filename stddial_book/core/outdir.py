"""The write policy: where a command may write, and how it continues only its own run there.

No command deletes anything. Every command that writes (``sft``, ``train``, ``record``, the
table builders, the tools) goes through :func:`claim_dir`, which accepts

- a new directory, created now (parents included), or an existing empty one; either way the tool
  writes the marker :data:`MARKER` into it (kind, a new run id, the time, and the directory's
  identity: its device and inode numbers);
- a directory whose marker was made *in this very directory* (its device and inode are the ones
  the marker recorded) for the same ``kind``: the tool's own run, which it may continue.

Everything else is refused with one line that names the path and the fix, and nothing is changed:
a path no run should go to (``''``, ``.``, ``..``, the filesystem root, the home directory, the
current directory or one of its parents, a repository's root, the package), a symbolic link, a
file, a non-empty directory without a marker, a marker of another kind, a marker copied or moved
in from another directory (a copy has another inode; so has every clone of a repository holding
a committed marker), and a directory holding files a git repository tracks.

Inside its directory the tool writes only through :func:`replace_own` (a whole file, replaced by
an atomic rename), :func:`append_own` (a log, opened without following links) and
:func:`make_own_dir`; none of them ever follows a symbolic link planted inside the directory. The
manifest :data:`MANIFEST` (its run id the marker's) records the name, size and sha256 of every
file written so; :func:`require_owned` (a
resumed run) verifies them before anything is written, an appended log by its recorded prefix.
Where a run must start a file or folder afresh, :func:`set_aside` moves the old one into
``.stddial-set-aside/<time>/`` by a rename: nothing is deleted.

``~`` and environment variables are expanded as a shell would (``~/runs``, ``$SCRATCH/run``), so a
quoted ``'~'`` never creates a directory literally named ``~``.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from stddial_book.core.repository import tracked_files

__all__ = [
    "MARKER",
    "MANIFEST",
    "SET_ASIDE",
    "expand_path",
    "refusal",
    "checked_path",
    "require_owned",
    "check_claimable",
    "claim_dir",
    "owns",
    "read_marker",
    "marker_problem",
    "tracked_in",
    "set_aside",
    "remove_owned",
    "replace_own",
    "atomic_write",
    "append_own",
    "make_own_dir",
    "own_path",
    "record_files",
    "forget_files",
    "manifest_entries",
    "verify_manifest",
    "file_digest",
]

#: The file that makes a directory the tool's: written once, when the tool creates or claims it.
MARKER = ".stddial-run.json"
#: The names, sizes and sha256 of the files the tool wrote into its directory (replaced atomically).
MANIFEST = ".stddial-manifest.json"
#: Where :func:`set_aside` moves what a run starts afresh: renamed, never deleted.
SET_ASIDE = ".stddial-set-aside"
_RESERVED = (MARKER, MANIFEST, SET_ASIDE)

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
    if "\x00" in text:
        return "the output directory contains a NUL character; type the path again."
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


def _identity(directory: Path) -> dict[str, int]:
    """What ties a marker to the directory it was made in: the directory's device and inode numbers.
    A copy (``cp -r``, a backup restored, a clone of a repository) gets new ones; a rename within
    its filesystem keeps them."""
    status = os.stat(directory, follow_symlinks=False)
    return {"device": int(status.st_dev), "inode": int(status.st_ino)}


def read_marker(directory: str | os.PathLike) -> dict[str, Any] | None:
    """The marker in ``directory`` as written (wherever it was made), or ``None`` when it has none,
    it is unreadable or it is a link. Reading only: whether it counts is :func:`marker_problem`'s."""
    path = Path(directory) / MARKER
    if path.is_symlink() or not path.is_file():
        return None
    try:
        marker = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("tool") != "stddial_book" or "run_id" not in marker:
        return None
    return marker


def marker_problem(directory: str | os.PathLike, kind: str | None = None) -> str | None:
    """Why the marker in ``directory`` does not make it the tool's ``kind`` run (a phrase), or ``None``
    when it does: made in this very directory (same device and inode), of that kind (any kind when
    ``kind`` is ``None``)."""
    directory = Path(directory)
    path = directory / MARKER
    if directory.is_symlink():
        return "is a symbolic link"
    if not path.is_symlink() and not path.exists():
        return f"has no {MARKER} (it was not written by stddial_book)"
    marker = read_marker(directory)
    if marker is None:
        return f"holds a {MARKER} that is a link, damaged or not the tool's"
    try:
        here = _identity(directory)
    except OSError:
        return "cannot be read"
    if marker.get("folder") != here:
        return f"holds a {MARKER} made in another directory (copied or moved in from elsewhere, or an older version's)"
    if kind is not None and marker.get("kind") != kind:
        return f"holds a {marker.get('kind')!r} run, not a {kind!r} one"
    return None


def owns(directory: str | os.PathLike, kind: str | None = None) -> bool:
    """Whether ``directory`` is the tool's (of ``kind``, if given): a marker made in it (:func:`marker_problem`)."""
    return Path(directory).is_dir() and marker_problem(directory, kind) is None


def tracked_in(directory: str | os.PathLike) -> tuple[Path, str] | None:
    """``(repository root, first tracked path)`` when ``directory`` is or holds a file a git
    repository tracks, else ``None`` (also when git is not installed: then nothing can be told)."""
    found = tracked_files(directory)
    return None if found is None else (found[0], found[1][0])


def checked_path(path: str | os.PathLike, flag: str | None = "--out") -> Path:
    """``path`` expanded (:func:`expand_path`), or the ``ValueError`` :func:`refusal` words (after
    ``flag``, the option that named it)."""
    reason = refusal(path)
    if reason is not None:
        raise ValueError(f"{flag}: {reason}" if flag else reason)
    return expand_path(path)


def _refuse_tracked(directory: Path, flag: str, what: str) -> None:
    found = tracked_in(directory)
    if found is not None:
        root, name = found
        raise ValueError(
            f"{flag} {directory} holds files the git repository at {root} tracks ({name}); nothing was "
            f"changed: {what} in a new directory outside the repository's tracked files, e.g. --out runs/my-run."
        )


def require_owned(path: str | os.PathLike, flag: str = "--out", kind: str | None = None) -> Path:
    """``path`` expanded, if it is the tool's own run (of ``kind``, if given: :func:`marker_problem`),
    outside any repository's tracked files, and every file its manifest lists is as the run wrote it
    (:func:`verify_manifest`); else a ``ValueError`` and nothing touched. What a resumed run needs.

    ``flag`` is the command-line option that named ``path`` (default ``--out``), quoted in the message.
    """
    directory = checked_path(path, flag)
    fix = "nothing was changed: start a new run in a new --out directory (without --resume)."
    if not directory.is_dir() or directory.is_symlink():
        raise ValueError(f"cannot resume: {flag} {directory} is not a run directory; {fix}")
    problem = marker_problem(directory, kind)
    if problem is not None:
        raise ValueError(f"cannot resume: {flag} {directory} {problem}; {fix}")
    _refuse_tracked(directory, flag, "start a new run")
    verify_manifest(directory)
    return directory


def check_claimable(path: str | os.PathLike, flag: str = "--out", kind: str | None = None) -> Path:
    """The expanded ``path`` if :func:`claim_dir` would accept it (for ``kind``; any of the tool's
    own kinds when ``None``); else the ``ValueError`` it would raise. Creates nothing: commands
    check every directory before any work starts. ``flag`` is the command-line option that named
    ``path`` (default ``--out``), quoted in the message."""
    directory = checked_path(path, flag)
    if directory.is_symlink():
        raise ValueError(
            f"{flag} {directory} is a symbolic link, and the tool never writes through one (a file or a link); "
            "nothing was changed: choose a new directory."
        )
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"{flag} {directory} is a file, not a directory (a file or a link); choose a new directory.")
    blocking = next((p for p in directory.parents if p.exists() or p.is_symlink()), None)
    if blocking is not None and not blocking.is_dir():
        raise ValueError(f"{flag} {directory} cannot be created: {blocking} is a file; choose another directory.")
    if not directory.is_dir():
        return directory
    _refuse_tracked(directory, flag, "write")
    has_marker = (directory / MARKER).exists() or (directory / MARKER).is_symlink()
    if has_marker:
        problem = marker_problem(directory, kind)
        if problem is not None:
            raise ValueError(
                f"{flag} {directory} {problem}, so it is not this command's run; nothing was changed: "
                "choose a new directory."
            )
    elif any(directory.iterdir()):
        raise ValueError(
            f"{flag} {directory} is not empty and was not written by stddial_book (it has no "
            f"{MARKER}); nothing was changed: choose a new or empty directory."
        )
    return directory


def claim_dir(path: str | os.PathLike, kind: str, *, flag: str = "--out") -> Path:
    """The directory ``path`` (expanded), made the tool's ``kind`` run, or a ``ValueError`` with
    nothing touched.

    A new directory is created (parents included) and marked; an empty existing directory is
    marked; the tool's own ``kind`` run (its marker made in it: :func:`marker_problem`) is returned
    as it is, for its command to continue. Anything else is refused (:func:`check_claimable`).
    ``flag`` is the option the message names.
    """
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"kind must be a non-empty run kind such as 'train'; got {kind!r}.")
    directory = check_claimable(path, flag, kind)
    if (directory / MARKER).exists():
        return directory
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(
            f"{flag} {directory} cannot be created ({err.strerror}); check the path and its permissions."
        ) from None
    run_id = uuid.uuid4().hex
    marker = {
        "tool": "stddial_book",
        "kind": kind,
        "run_id": run_id,
        "created": datetime.now(timezone.utc).isoformat(),
        "folder": _identity(directory),
    }
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(directory / MARKER, flags, 0o644)  # never overwrites a file of that name
    except FileExistsError:
        raise ValueError(
            f"{flag} {directory} was claimed by another process just now; choose a new directory."
        ) from None
    with os.fdopen(descriptor, "w") as handle:
        handle.write(json.dumps(marker, indent=2) + "\n")
    return directory  # the manifest is written with the first file recorded


# ---- inside the tool's directory: no link followed, every file recorded --------------------------------


def own_path(directory: str | os.PathLike, name: str) -> Path:
    """``directory / name`` for the tool to write, checked: ``name`` is a relative path below the
    ``directory`` (no ``..``, not the marker, manifest or set-aside folder), and neither the directory
    nor anything on the way to the entry is a symbolic link; else a ``ValueError``."""
    directory = Path(directory)
    parts = Path(name).parts if isinstance(name, str) else ()
    if not parts or Path(name).is_absolute() or any(p in ("", ".", "..") for p in parts) or parts[0] in _RESERVED:
        raise ValueError(f"a run's file must be a plain relative name other than {', '.join(_RESERVED)}; got {name!r}.")
    if directory.is_symlink():
        raise ValueError(
            f"{directory} is a symbolic link; nothing was written through it: choose a new --out directory."
        )
    current = directory
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise ValueError(
                f"{current} is a symbolic link, and the tool never writes through one; nothing was changed: "
                "choose a new --out directory."
            )
    return current


def make_own_dir(directory: str | os.PathLike, name: str) -> Path:
    """Create the folder ``directory / name`` (and the folders above it) without following a link.

    ``directory`` is the run's directory; ``name`` the folder's relative path inside it (checked by
    :func:`own_path`). Returns the folder's path.
    """
    target = own_path(directory, name)
    current = Path(directory)
    for part in Path(name).parts:
        current = current / part
        if current.exists() and not current.is_dir():
            raise ValueError(f"{current} is a file where the run needs a folder; choose a new --out directory.")
        if not current.exists():
            current.mkdir()
    return target


def file_digest(path: str | os.PathLike, size: int | None = None) -> dict[str, Any]:
    """``{"size", "sha256"}`` of the file at ``path``, or of its first ``size`` bytes (the whole file when
    ``None``, the default)."""
    digest, read = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        while size is None or read < size:
            chunk = handle.read(1 << 20 if size is None else min(1 << 20, size - read))
            if not chunk:
                break
            digest.update(chunk)
            read += len(chunk)
    return {"size": read, "sha256": digest.hexdigest()}


def _read_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest of the tool's directory (``None`` where the directory is not the tool's)."""
    if not owns(directory):
        return None
    path = directory / MANIFEST
    fix = "nothing was changed: start a new run in a new --out directory."
    if path.is_symlink():
        raise ValueError(f"{path} is a symbolic link, not the run's manifest; {fix}")
    run_id = read_marker(directory)["run_id"]
    if not path.exists():
        return {"tool": "stddial_book", "run_id": run_id, "files": {}}
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        raise ValueError(f"{path} is damaged; {fix}") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("run_id") != run_id
        or not isinstance(manifest.get("files"), dict)
    ):
        raise ValueError(f"{path} belongs to another run than {directory / MARKER}; {fix}")
    return manifest


def _write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    atomic_write(directory / MANIFEST, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())


def atomic_write(target: Path, data: bytes | Callable[[Path], None]) -> None:
    """Write a fresh temporary file beside ``target`` (``data``: bytes, or a function writing a given
    path) and rename it over ``target`` (a link at ``target`` is replaced as an entry, never followed).
    Low level: a run's files go through :func:`replace_own`, which checks the path and records the file."""
    tmp = target.parent / f".{target.name}.{uuid.uuid4().hex[:12]}.tmp"
    if callable(data):
        data(tmp)
    else:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with os.fdopen(os.open(tmp, flags, 0o644), "wb") as handle:
            handle.write(data)
    os.replace(tmp, target)


def manifest_entries(directory: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """The files the manifest of the tool's ``directory`` lists (name to size and sha256); empty elsewhere."""
    manifest = _read_manifest(Path(directory))
    return dict(manifest["files"]) if manifest else {}


def _matches(path: Path, entry: dict[str, Any]) -> bool:
    """Whether ``path`` is a plain file holding what ``entry`` recorded (an appended log: its prefix)."""
    if path.is_symlink() or not path.is_file():
        return False
    recorded = [entry, *([entry["previous"]] if isinstance(entry.get("previous"), dict) else [])]
    size = path.stat().st_size
    for one in recorded:
        if entry.get("append") and size >= one["size"]:
            if file_digest(path, one["size"]) == {"size": one["size"], "sha256": one["sha256"]}:
                return True
        elif size == one["size"] and file_digest(path)["sha256"] == one["sha256"]:
            return True
    return False


def record_files(directory: str | os.PathLike, names: Iterable[str], *, append: Iterable[str] = ()) -> None:
    """Record the size and sha256 of the files ``names`` in the manifest (those in ``append`` as logs
    that may grow: a resume checks their recorded prefix). Nothing happens outside the tool's directory.

    ``directory`` is the run's directory; ``names`` and ``append`` are relative paths inside it; a name
    that is not a file there is skipped.
    """
    directory = Path(directory)
    manifest = _read_manifest(directory)
    if manifest is None:
        return
    append = set(append)
    for name in [*names, *append]:
        path = own_path(directory, name)
        if path.is_file():
            manifest["files"][name] = {**file_digest(path), **({"append": True} if name in append else {})}
    _write_manifest(directory, manifest)


def forget_files(directory: str | os.PathLike, prefix: str) -> None:
    """Drop from the manifest of the tool's ``directory`` every entry named ``prefix`` or under the
    folder ``prefix/`` (their files are about to be rewritten: until recorded again they are not the
    run's). Nothing happens outside the tool's directory."""
    directory = Path(directory)
    manifest = _read_manifest(directory)
    if manifest is None:
        return
    kept = {k: v for k, v in manifest["files"].items() if k != prefix and not k.startswith(prefix.rstrip("/") + "/")}
    if len(kept) < len(manifest["files"]):
        manifest["files"] = kept
        _write_manifest(directory, manifest)


def verify_manifest(directory: str | os.PathLike, names: Iterable[str] | None = None) -> None:
    """Every file the manifest of ``directory`` lists (or those of ``names`` it lists; all when
    ``None``, the default) is as the run wrote it: same size and sha256 (an appended log: the recorded
    prefix); else a ``ValueError`` naming the file."""
    directory = Path(directory)
    entries = manifest_entries(directory)
    wanted = entries if names is None else {n: entries[n] for n in names if n in entries}
    for name, entry in sorted(wanted.items()):
        path = own_path(directory, name)
        if not _matches(path, entry):
            state = "is missing" if not (path.exists() or path.is_symlink()) else "is not the file this run wrote"
            raise ValueError(
                f"cannot continue the run in {directory}: {name} {state} (its size or sha256 differs from the "
                "run's manifest: edited, replaced or damaged); nothing was changed: restore the file, or start a "
                "new run in a new --out directory."
            )


def replace_own(directory: str | os.PathLike, name: str, data: bytes | str | Callable[[Path], None]) -> Path:
    """Write the file ``directory / name`` whole, by an atomic rename of a fresh temporary file;
    ``directory`` is the run's directory, ``name`` the file's relative path inside it (folders on the
    way are created), and ``data`` is the bytes (or text, encoded as UTF-8) or a function that writes a
    given path (``save_model``). Returns the file's path.

    Never through a link (:func:`own_path`). In the tool's directory the file is recorded in the
    manifest, and a file found there that the manifest does not list as the run's is set aside
    (:func:`set_aside`) rather than replaced: nothing is lost."""
    directory = Path(directory)
    target = own_path(directory, name)
    if target.is_dir():
        raise ValueError(f"{target} is a folder where the run writes a file; choose a new --out directory.")
    if len(Path(name).parts) > 1:
        make_own_dir(directory, str(Path(name).parent))
    manifest = _read_manifest(directory)
    payload = data.encode() if isinstance(data, str) else data
    tmp_holder: dict[str, Any] = {}

    def write(tmp: Path) -> None:
        if callable(payload):
            payload(tmp)
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            with os.fdopen(os.open(tmp, flags, 0o644), "wb") as handle:
                handle.write(payload)
        tmp_holder["digest"] = file_digest(tmp)
        if manifest is None:
            return
        old = manifest["files"].get(name)
        if target.exists() and not (old is not None and _matches(target, old)):
            set_aside(directory, [name])
            old = None
        entry = dict(tmp_holder["digest"])
        if old is not None:  # until the rename is done, a resume accepts the old file too
            entry["previous"] = {"size": old["size"], "sha256": old["sha256"]}
        manifest["files"][name] = entry
        _write_manifest(directory, manifest)

    atomic_write(target, write)
    if manifest is not None:
        manifest["files"][name] = dict(tmp_holder["digest"])
        _write_manifest(directory, manifest)
    return target


def append_own(directory: str | os.PathLike, name: str, text: str) -> None:
    """Append ``text`` to the log ``directory / name``, opened without following a link (created when
    missing); ``directory`` is the run's directory and ``name`` the log's relative path inside it."""
    target = own_path(directory, name)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(target, flags, 0o644)
    except OSError as err:
        raise ValueError(f"{target} cannot be appended to ({err.strerror}); choose a new --out directory.") from None
    with os.fdopen(descriptor, "a") as handle:
        handle.write(text)


def set_aside(directory: str | os.PathLike, names: Iterable[str]) -> list[str]:
    """Move the entries ``names`` of the tool's own ``directory`` into
    ``.stddial-set-aside/<time>/`` by a rename (a link moves as a link, never followed): what a run
    starts afresh is kept, never deleted. Only plain names; a directory that is not the tool's gets
    a ``ValueError`` and nothing moves. Returns the names moved."""
    directory = Path(directory)
    problem = marker_problem(directory) if directory.is_dir() else "is not a directory"
    if problem is not None:
        raise ValueError(
            f"{directory} {problem}, so it was not written by stddial_book; nothing was moved or "
            "deleted: choose a new or empty output directory."
        )
    names = list(names)
    for name in names:
        if not isinstance(name, str) or not name or name in (".", "..", *_RESERVED) or "/" in name or os.sep in name:
            raise ValueError(f"set_aside takes plain entry names other than {', '.join(_RESERVED)}; got {name!r}.")
    present = [n for n in names if (directory / n).exists() or (directory / n).is_symlink()]
    if not present:
        return []
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    shelf = directory / SET_ASIDE / stamp
    if (directory / SET_ASIDE).is_symlink():
        raise ValueError(
            f"{directory / SET_ASIDE} is a symbolic link; nothing was moved: choose a new --out directory."
        )
    shelf.mkdir(parents=True)
    for name in present:
        os.rename(directory / name, shelf / name)
        forget_files(directory, name)
    return present


def remove_owned(directory: str | os.PathLike, names: Iterable[str]) -> list[str]:
    """What earlier versions deleted, now set aside (:func:`set_aside`): nothing is deleted.

    ``directory`` is the tool's own run directory; ``names`` the plain entry names in it to move. Returns
    the names moved.
    """
    return set_aside(directory, names)
