"""Provenance names the book's own checkout only (issue 36): a reader's repository is never read.

Each case copies the package somewhere (a fake book checkout, or a virtual environment's site-packages
inside a reader's own repository with uncommitted files) and runs ``git_state`` there in a fresh process,
with a ``git`` on PATH that records every call before running the real one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import stddial_book

PACKAGE = Path(stddial_book.__file__).resolve().parent
GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None and not os.environ.get("CI_STRICT"), reason="needs git")

PROBE = """
import json
from stddial_book.rl.runlog import git_state, refuse_dirty
commit, dirty = git_state()
refuse_dirty(commit, dirty, allow_dirty=False)  # raises on a dirty checkout of the book
print(json.dumps([commit, dirty]))
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run([GIT, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _repository(path: Path, pyproject_name: str) -> Path:
    path.mkdir(parents=True)
    (path / "pyproject.toml").write_text(f'[project]\nname = "{pyproject_name}"\nversion = "9.9.9"\n')
    (path / "notes.txt").write_text("a tracked file\n")
    _git(path, "init", "-q")
    _git(path, "add", ".")
    _git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    return path


def _copy_package(target: Path) -> None:
    shutil.copytree(PACKAGE, target / "stddial_book", ignore=shutil.ignore_patterns("__pycache__", "data"))
    (target / "stddial_book" / "data").mkdir()  # where a wheel keeps the data files; none is read here


def _probe(tmp_path: Path, search_path: Path, cwd: Path) -> tuple[list, list[str]]:
    """git_state() of the package copy on ``search_path``, run from ``cwd``; and the git calls it made."""
    calls = tmp_path / "git-calls.txt"
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "git").write_text(f'#!/bin/sh\necho "$PWD: $*" >> "{calls}"\nexec "{GIT}" "$@"\n')
    (shim / "git").chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(search_path), "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.parametrize("reader_project", ["my-project", "stddial-book"])
def test_a_wheel_inside_a_readers_repository_reads_nothing_of_it(tmp_path: Path, reader_project: str) -> None:
    """The package installed into the reader's .venv, in their repository with uncommitted changes (even a
    clone of the book itself): no git call, the installed version and "no checkout", and no refusal."""
    reader = _repository(tmp_path / "reader", reader_project)
    (reader / "notes.txt").write_text("changed, not committed\n")
    site = reader / ".venv" / "lib" / "python3" / "site-packages"
    _copy_package(site)
    (commit, dirty), calls = _probe(tmp_path, site, cwd=reader)
    assert calls == []
    assert commit.startswith("stddial-book ") and commit.endswith(", no checkout") and dirty is None


def test_the_books_checkout_names_its_commit_and_whether_it_is_clean(tmp_path: Path) -> None:
    book = _repository(tmp_path / "book", "stddial-book")
    _copy_package(book)
    _git(book, "add", "stddial_book")
    _git(book, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "the package")
    head = subprocess.run([GIT, "rev-parse", "HEAD"], cwd=book, capture_output=True, text=True, check=True).stdout
    (commit, dirty), calls = _probe(tmp_path, book, cwd=tmp_path)  # from anywhere: the package's own checkout
    assert (commit, dirty) == (head.strip(), False) and calls
    (book / "notes.txt").write_text("changed, not committed\n")
    env = {**os.environ, "PYTHONPATH": str(book)}
    refused = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert refused.returncode == 1 and "uncommitted changes to tracked files" in refused.stderr
