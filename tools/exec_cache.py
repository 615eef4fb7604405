"""The book's execution cache, shared by ``make chapters`` and the build of ``make book``.

``make chapters`` executes every chapter (``tests/test_chapters.py``) and, when ``STDDIAL_BOOK_CACHE``
names a folder, stores each executed notebook there with jupyter-cache, the cache myst-nb reads
in ``execute_notebooks: cache`` mode; ``make book`` then renders those outputs instead of
executing every chapter a second time.

jupyter-cache matches a notebook by its code cells only, so a change to the package would let a
stale output through. This module keys the whole cache on everything else that can change what a
cell prints: the package's source, its data, the pinned requirements, every installed
distribution's version, the Python version and the profile settings. When that fingerprint
changes the cache is emptied (it is the build's own folder, marked by the fingerprint file this
module writes) before anything reads or writes it.

    python tools/exec_cache.py prepare [CACHE]   # empty a stale cache; what `make book` runs first
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import re
import shutil
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CACHE = ROOT / "_build" / ".jupyter_cache"
STAMP = "stddial-fingerprint.txt"
ENV_CACHE = "STDDIAL_BOOK_CACHE"

#: What, besides the code cells, decides a chapter's outputs.
_SOURCES = ("stddial_book", "data")
_FILES = ("requirements.txt", "pyproject.toml", "bench/requirements-trl.txt")
_ENV = ("STDDIAL_PROFILE", "HF_HUB_OFFLINE", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")


def fingerprint(root: Path = ROOT) -> str:
    """A hash of the package source, its data, the requirements, the installed versions and the
    environment settings the chapters read."""
    digest = hashlib.sha256()
    for folder in _SOURCES:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    for name in _FILES:
        if (root / name).is_file():
            digest.update(name.encode() + b"\0" + (root / name).read_bytes())
    # one entry per distribution: run from the checkout's root, Python also finds the editable
    # install's stddial_book.egg-info there, a second copy of the same name and version
    versions = sorted(
        {f"{re.sub(r'[-_.]+', '-', d.metadata['Name']).lower()}=={d.version}" for d in metadata.distributions()}
    )
    digest.update("\n".join(versions).encode())
    digest.update(f"{sys.version}|{platform.machine()}".encode())
    for name in _ENV:
        digest.update(f"{name}={os.environ.get(name, '')}".encode())
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(cache: Path):
    """One process at a time prepares or writes the cache (parallel test workers)."""
    import fcntl

    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache.parent / (cache.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _prepare_unlocked(cache: Path) -> Path:
    current = fingerprint()
    stamp = cache / STAMP
    if stamp.is_file() and stamp.read_text().strip() == current:
        return cache
    if cache.exists():
        if not (stamp.is_file() or (cache / "global.db").is_file()):
            raise SystemExit(
                f"{cache} exists but is not an execution cache (no {STAMP}, no global.db); "
                "move it away or point STDDIAL_BOOK_CACHE elsewhere."
            )
        shutil.rmtree(cache)
    cache.mkdir(parents=True)
    stamp.write_text(current + "\n")
    return cache


def prepare(cache: Path = DEFAULT_CACHE) -> Path:
    """The cache folder, emptied first if it was filled under another fingerprint."""
    with _locked(cache):
        return _prepare_unlocked(cache)


def read_page(path: Path):
    """A MyST notebook page parsed the way myst-nb parses it for the build (same cells, same
    metadata), so that the cache matches it."""
    from myst_nb.core.read import read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    return read_myst_markdown_notebook(
        Path(path).read_text(encoding="utf-8"), MdParserConfig(), add_source_map=True, path=path
    )


def store(notebook, path: Path, seconds: float, cache: Path = DEFAULT_CACHE) -> None:
    """Store an executed notebook of page ``path`` for the build (``execution_seconds`` as measured)."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    with _locked(cache):
        _prepare_unlocked(cache)
        get_cache(str(cache)).cache_notebook_bundle(
            CacheBundleIn(notebook, str(Path(path).resolve()), data={"execution_seconds": seconds}),
            check_validity=False,
            overwrite=True,
        )


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "prepare":
        raise SystemExit(__doc__.strip().splitlines()[-1].strip())
    print(f"execution cache: {prepare(Path(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_CACHE)}")
