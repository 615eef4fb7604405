"""The shipped data files are found through the package, in a checkout and in a wheel install."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from test_sources import repository_only

import stddial_book
from stddial_book.core.resources import data_path

REPO_DATA = Path(__file__).resolve().parents[1] / "data"


def test_every_data_file_of_the_repository_ships_with_the_package() -> None:
    """Each table, run log and vendored source under data/ is reachable as stddial_book.data, with
    the same bytes (tests/test_sources.py checks that no file under data/ escapes the globs)."""
    suffixes = {".csv", ".json", ".jsonl", ".md", ".pdf", ".safetensors"}
    # what pyproject.toml's exclude-package-data keeps in the repository, read from it (a copied list went
    # stale once: the persistent-silence runs were excluded there and not here)
    files = [p for p in REPO_DATA.rglob("*") if p.is_file() and p.suffix in suffixes and not repository_only(p)]
    assert files, "data/ holds no table"
    for path in files:
        shipped = data_path(*path.relative_to(REPO_DATA).parts)
        assert shipped.is_file(), (
            f"{path.relative_to(REPO_DATA)} is not in the installed package (pyproject package-data)"
        )
        assert shipped.read_bytes() == path.read_bytes()


def test_installed_package_is_the_one_under_test() -> None:
    """With STDDIAL_EXPECT_INSTALLED=1 (CI's lowest-versions job) the tests must import the wheel
    install, not the checkout, or the job would not test what a Colab reader gets."""
    if os.environ.get("STDDIAL_EXPECT_INSTALLED") != "1":
        assert data_path().is_dir()
        return
    package_dir = Path(stddial_book.__file__).resolve().parent
    assert "site-packages" in package_dir.parts, f"stddial_book imported from {package_dir}, not a wheel install"
    assert package_dir in data_path().resolve().parents
    assert str(REPO_DATA.parent) not in sys.path


def test_the_wheel_lists_every_subpackage() -> None:
    """setuptools ships only the packages pyproject.toml names: a layer missing there would be missing
    from a wheel install (Colab) while every test of the checkout passes."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    root = REPO_DATA.parent
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(root).parts) for p in (root / "stddial_book").rglob("__init__.py")} | {
        "stddial_book.data"
    }
    assert listed == found, f"pyproject.toml lists {sorted(listed - found)} too many, {sorted(found - listed)} missing"


def test_the_shipped_allocation_study_is_the_benchmarks() -> None:
    """Chapter 15 reads the allocation benchmark's results through data_path (so Colab has them):
    the shipped copy must be exactly what bench/bench_allocation.py last wrote to bench/results."""
    import gzip

    shipped = gzip.decompress(data_path("allocation", "allocation.json.gz").read_bytes())
    assert shipped == (REPO_DATA.parent / "bench" / "results" / "allocation.json").read_bytes()
