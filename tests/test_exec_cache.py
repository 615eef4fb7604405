"""The execution cache shared by make chapters and the build (tools/exec_cache.py): its key must be the
same in every process that computes it, and change with anything that can change an output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_tool

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("jupyter_cache", reason="the execution cache is build tooling (the book's environment)")


def load():
    return load_tool("exec_cache")


def test_the_key_is_the_same_from_any_working_directory() -> None:
    """Run from the checkout's root, Python also sees the editable install's egg-info: a second copy
    of the package's distribution once made the test run's key differ from the build's, so the build
    emptied the cache the tests had filled."""
    code = (
        "import importlib.util as u, sys; s = u.spec_from_file_location('e', sys.argv[1]); "
        "m = u.module_from_spec(s); s.loader.exec_module(m); print(m.fingerprint())"
    )
    keys = {
        subprocess.run(
            [sys.executable, "-c", code, str(ROOT / "tools" / "exec_cache.py")],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for cwd in (ROOT, ROOT / "tools", ROOT / "tests")
    }
    assert len(keys) == 1 and len(keys.pop()) == 64


def test_the_key_follows_the_package_and_its_data(tmp_path: Path) -> None:
    exec_cache = load()
    (tmp_path / "stddial_book").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "stddial_book" / "a.py").write_text("x = 1\n")
    (tmp_path / "data" / "t.csv").write_text("k,count\n")
    first = exec_cache.fingerprint(tmp_path)
    (tmp_path / "stddial_book" / "a.py").write_text("x = 2\n")
    second = exec_cache.fingerprint(tmp_path)
    (tmp_path / "data" / "t.csv").write_text("k,count\n0,1\n")
    third = exec_cache.fingerprint(tmp_path)
    assert len({first, second, third}) == 3
    (tmp_path / "stddial_book" / "__pycache__").mkdir()
    (tmp_path / "stddial_book" / "__pycache__" / "a.pyc").write_bytes(b"\0")
    assert exec_cache.fingerprint(tmp_path) == third  # compiled files are not the code


def test_a_stale_cache_is_emptied_and_a_foreign_folder_refused(tmp_path: Path) -> None:
    exec_cache = load()
    cache = exec_cache.prepare(tmp_path / "cache")
    (cache / "global.db").write_text("")
    (cache / exec_cache.STAMP).write_text("another key\n")
    exec_cache.prepare(cache)
    assert sorted(p.name for p in cache.iterdir()) == [exec_cache.STAMP]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit, match="not an execution cache"):
        exec_cache.prepare(foreign)
    assert (foreign / "notes.txt").read_text() == "mine"
