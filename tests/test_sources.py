"""The vendored sources under data/sources/, and how much data the wheel carries.

``data/sources/<name>/`` holds a small published file that a test re-derives a committed table
from (the Big-Math figure, DAPO's digitised Figure 3b), next to a ``SOURCE.md`` that says where it
comes from and lists each file in a table row ``| `file` | bytes | `sha256` |``. These files ship
with the package like the rest of ``data/``, so the checks read them through ``data_path``: in a
wheel install (``.ci/lowest``) they check the installed copies.
"""

from __future__ import annotations

import re
import shutil
import sys
import zlib
from pathlib import Path

import pytest

from stddial_book.core.resources import data_path, sha256
from stddial_book.corpora import bigmath_figure
from stddial_book.corpora import dapo_fig3b as dapo_curve

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pytest itself depends on tomli before Python 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
REPO_DATA = ROOT / "data"
WHEEL_DATA_LIMIT = 4_000_000  # bytes: data/ may take at most 4 MB of the wheel

ROW = re.compile(
    r"^\|\s*`(?P<name>[^`/]+)`\s*\|\s*(?P<size>[0-9][0-9,]*)\s*\|\s*`(?P<sha256>[0-9a-f]{64})`\s*\|\s*$", re.MULTILINE
)


def listed_files(source_md: Path) -> dict[str, tuple[int, str]]:
    """``{file name: (bytes, sha256)}`` from the table rows of a SOURCE.md."""
    return {
        m["name"]: (int(m["size"].replace(",", "")), m["sha256"])
        for m in ROW.finditer(source_md.read_text(encoding="utf-8"))
    }


def source_problems(folder: Path) -> list[str]:
    """Everything wrong with one vendored folder: empty when its files are those SOURCE.md lists,
    with the sizes and sha256 it gives."""
    source_md = folder / "SOURCE.md"
    if not source_md.is_file():
        return [f"{folder.name}: no SOURCE.md"]
    listed = listed_files(source_md)
    if not listed:
        return [f"{folder.name}/SOURCE.md lists no file (rows | `name` | bytes | `sha256` |)"]
    present = {p.name for p in folder.iterdir() if p.is_file() and p.name != "SOURCE.md"}
    problems = [f"{folder.name}/{name}: not listed in SOURCE.md" for name in sorted(present - set(listed))]
    problems += [f"{folder.name}/{name}: listed in SOURCE.md but missing" for name in sorted(set(listed) - present)]
    for name in sorted(set(listed) & present):
        size, digest = listed[name]
        path = folder / name
        if path.stat().st_size != size:
            problems.append(f"{folder.name}/{name}: {path.stat().st_size} bytes, SOURCE.md says {size}")
        if sha256(path) != digest:
            problems.append(f"{folder.name}/{name}: sha256 {sha256(path)}, SOURCE.md says {digest}")
    return problems


def source_folders() -> list[Path]:
    root = data_path("sources")
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name != "__pycache__") if root.is_dir() else []


def test_the_sources_the_tests_rederive_from_are_vendored() -> None:
    assert {p.name for p in source_folders()} >= {"bigmath", "dapo-fig3b"}
    for parts in (bigmath_figure.FIGURE_FILE, dapo_curve.SOURCE_FILE):
        assert data_path(*parts).is_file(), f"{'/'.join(parts)} does not ship with the package"


@pytest.mark.parametrize("folder", source_folders(), ids=lambda p: p.name)
def test_each_vendored_file_has_the_sha256_its_source_md_gives(folder: Path) -> None:
    assert source_problems(folder) == []


def test_source_md_and_the_modules_name_the_same_file() -> None:
    """The sha256 in SOURCE.md is the one the extraction code refuses any other file by."""
    for parts, expected in (
        (bigmath_figure.FIGURE_FILE, bigmath_figure.FIGURE_SOURCE["sha256"]),
        (dapo_curve.SOURCE_FILE, dapo_curve.DAPO_SOURCE["sha256"]),
    ):
        listed = listed_files(data_path(*parts[:-1], "SOURCE.md"))
        assert listed[parts[-1]][1] == expected


def test_a_changed_or_unlisted_file_is_caught(tmp_path: Path) -> None:
    folder = tmp_path / "dapo-fig3b"
    shutil.copytree(data_path(*dapo_curve.SOURCE_FILE[:-1]), folder)
    assert source_problems(folder) == []
    csv = folder / dapo_curve.SOURCE_FILE[-1]
    csv.write_bytes(csv.read_bytes().replace(b"\r\n", b"\n"))  # what an end-of-line conversion does
    (folder / "extra.csv").write_text("step\n")
    problems = source_problems(folder)
    assert any("extra.csv: not listed" in p for p in problems)
    assert any("bytes, SOURCE.md says 1195" in p for p in problems)
    assert any("sha256" in p for p in problems)


def package_data_globs() -> list[str]:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"]["stddial_book.data"] == "data"
    assert setuptools["include-package-data"] is False  # so the globs alone decide what ships
    return setuptools["package-data"]["stddial_book.data"]


def repository_only_globs() -> list[str]:
    """What pyproject.toml keeps out of the wheel (setuptools matches these with fnmatch, where * also
    crosses a /): the recorded allocation and ablation runs, whose summaries ship instead."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return setuptools.get("exclude-package-data", {}).get("stddial_book.data", [])


def repository_only(path: Path) -> bool:
    import fnmatch

    relative = path.relative_to(REPO_DATA).as_posix()
    return any(fnmatch.fnmatch(relative, pattern) for pattern in repository_only_globs())


def shipped_data_files() -> list[Path]:
    return sorted(
        {
            p
            for pattern in package_data_globs()
            for p in REPO_DATA.glob(pattern)
            if p.is_file() and not repository_only(p)
        }
    )


def test_no_file_under_data_is_left_out_of_the_wheel() -> None:
    shipped = set(shipped_data_files())
    assert REPO_DATA / "sources" / "bigmath" / "fig_realdata.pdf" in shipped
    everything = {
        p
        for p in REPO_DATA.rglob("*")
        if p.is_file()
        and "__pycache__" not in p.parts
        and not p.name.startswith(".")
        and p.suffix not in {".py", ".pyc"}
    }
    left_out = {p for p in everything - shipped if not repository_only(p)}
    assert sorted(str(p.relative_to(REPO_DATA)) for p in left_out) == []
    # nothing else is kept out, on purpose
    assert repository_only_globs() == [
        "runs/allocation/*",
        "runs/persistent/*",
        "runs/smollm2_allocation/*",
        "runs/ablation/*",
        "runs/smollm2/*",
    ]


def _deflated_size(data: bytes) -> int:
    packer = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)  # a zip member's raw deflate
    return len(packer.compress(data) + packer.flush())


def test_data_in_the_wheel_stays_under_4_mb() -> None:
    """data/ takes at most 4 MB of the built wheel.

    Rather than building a wheel (which needs setuptools and wheel in the test environment, or the
    network for an isolated build, and writes build/ into the checkout), this sums what the wheel
    would hold: pyproject.toml has include-package-data = false, so the package-data globs alone
    select the files under data/ that ship, and a wheel stores each one deflated at zlib's default
    level, plus its two zip headers and a RECORD line. Checked against a real
    ``pip wheel --no-deps .``: the estimate was within 0.1% of the wheel's data/ members. It runs in
    a fraction of a second on any checkout. Installed (unzipped), data/ is several times larger,
    mostly the reference run logs (data/runs/), which compress well.
    """
    files = shipped_data_files()
    raw = sum(p.stat().st_size for p in files)
    in_wheel = 0
    for path in files:
        name = len(f"stddial_book/data/{path.relative_to(REPO_DATA).as_posix()}".encode())
        in_wheel += _deflated_size(path.read_bytes()) + (30 + name) + (46 + name) + (name + 80)
    assert in_wheel <= WHEEL_DATA_LIMIT, (
        f"data/ would take {in_wheel / 1e6:.2f} MB of the wheel ({raw / 1e6:.2f} MB unpacked, {len(files)} files); "
        f"the limit is {WHEEL_DATA_LIMIT / 1e6:.0f} MB"
    )
