"""Where the book's shipped data lives: :func:`data_path`, the same files in a checkout and a wheel.

The repository keeps its small derived tables and recorded run logs in the top-level ``data/``
folder (see ``data/__init__.py``). A wheel install carries that folder as the subpackage
``stddial_book.data``; a source checkout (editable install, or the repository root on
``sys.path``) reads the folder itself. Chapters and modules ask :func:`data_path` and never build
a path from ``__file__``, which breaks once the package sits in ``site-packages``.
"""

from __future__ import annotations

import csv
import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Sequence

__all__ = ["data_path", "sha256", "require_sha256", "write_table"]


def _data_root() -> Path:
    installed = resources.files(__package__).joinpath("data")
    if isinstance(installed, Path) and installed.is_dir():
        return installed  # a wheel install: site-packages/stddial_book/data
    checkout = Path(__file__).resolve().parents[1] / "data"
    if checkout.is_dir():
        return checkout  # a source checkout: the repository's data/
    raise RuntimeError("the book's data files were not found: neither stddial_book/data (a wheel install) nor "
                       f"{checkout} (a checkout) exists. Reinstall with `pip install stddial-book @ git+...` "
                       "or run from a full clone of the repository.")


def data_path(*parts: str) -> Path:
    """The path of a shipped data file or folder, e.g. ``data_path("solve_rates", "x.csv")``.

    The path need not exist; callers check and say what is missing.
    """
    return _data_root().joinpath(*parts)


def sha256(path: str | Path) -> str:
    """Hex sha256 of a file (the provenance of every derived table)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def require_sha256(path: str | Path, expected: str, what: str) -> None:
    """Refuse a source file whose sha256 is not the one its provenance names."""
    digest = sha256(path)
    if digest != expected:
        raise ValueError(f"{path} has sha256 {digest}, not {what} ({expected}); pass the file its SOURCE.md names.")


def write_table(directory: str | Path, name: str, header: Sequence[str], rows: Iterable[Sequence[Any]],
                provenance: dict[str, Any]) -> Path:
    """Write ``<name>.csv`` and ``<name>.provenance.json`` into ``directory``; returns the CSV's path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    table = directory / f"{name}.csv"
    with open(table, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(list(header))
        writer.writerows(rows)
    (directory / f"{name}.provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
    return table
