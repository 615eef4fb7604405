"""A release: the version in one place, the command line that reports it, the console command.

The version is ``pyproject.toml``'s; ``stddial_book.__version__``, the installed distribution and
``python -m stddial_book --version`` must all say the same.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
VERSION = PROJECT["version"]


def test_the_package_version_is_pyprojects() -> None:
    import stddial_book

    assert stddial_book.__version__ == VERSION, "stddial_book/__init__.py's __version__ differs from pyproject.toml's"
    assert metadata.version("stddial-book") == VERSION, (
        "the installed package is stale: reinstall it (pip install -e .)"
    )


def test_python_m_stddial_book_version_prints_the_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "stddial_book", "--version"], capture_output=True, text=True, timeout=120, check=False
    )
    assert (out.returncode, out.stdout.strip(), out.stderr) == (0, f"stddial-book {VERSION}", "")


def test_the_console_command_runs_the_command_line() -> None:
    """``stddial`` ([project.scripts]) is installed with the package and is ``python -m stddial_book``."""
    assert PROJECT["scripts"] == {"stddial": "stddial_book.cli:main"}
    script = Path(sysconfig.get_path("scripts")) / "stddial"
    assert script.is_file(), f"{script} is missing: reinstall the package (pip install -e .)"
    version = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=120, check=False)
    assert (version.returncode, version.stdout.strip()) == (0, f"stddial-book {VERSION}")
    bad = subprocess.run([str(script), "nosuch"], capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and len(bad.stderr.strip().splitlines()) == 1
