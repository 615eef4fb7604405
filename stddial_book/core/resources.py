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
import os
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from stddial_book.core.outdir import claim_dir

__all__ = ["data_path", "sha256", "require_sha256", "write_table"]


def _data_root() -> Path:
    installed = resources.files("stddial_book").joinpath("data")
    if isinstance(installed, Path) and installed.is_dir():
        return installed  # a wheel install: site-packages/stddial_book/data
    checkout = Path(__file__).resolve().parents[2] / "data"
    if checkout.is_dir():
        return checkout  # a source checkout: the repository's data/
    raise RuntimeError(
        "the book's data files were not found: neither stddial_book/data (a wheel install) nor "
        f"{checkout} (a checkout) exists. Reinstall with `pip install stddial-book @ git+...` "
        "or run from a full clone of the repository."
    )


def data_path(*parts: str) -> Path:
    """The path of a shipped data file or folder, e.g. ``data_path("solve_rates", "x.csv")``.

    ``parts`` are the folder and file names inside the book's data folder, as strings (no empty name,
    ``..`` or absolute path). The path need not exist; callers check and say what is missing.
    """
    wrong = next((part for part in parts if not isinstance(part, str)), None)
    if wrong is not None:
        raise TypeError(
            f"data_path takes folder and file names as strings, e.g. data_path('solve_rates', 'x.csv'); "
            f"got {type(wrong).__name__}."
        )
    if any(part in ("", "..") or Path(part).is_absolute() for part in parts):
        raise ValueError(
            f"data_path takes names inside the book's data folder, not {parts!r}; pass e.g. "
            "data_path('solve_rates', 'x.csv')."
        )
    return _data_root().joinpath(*parts)


def _as_path(path: object, name: str) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a file path (str or Path); got {type(path).__name__}.")
    return Path(path)


def sha256(path: str | Path) -> str:
    """Hex sha256 of a file (the provenance of every derived table); ``path`` is the file (str or Path)."""
    path = _as_path(path, "path")
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist; pass the path of an existing file.") from None
    except OSError as err:
        raise ValueError(
            f"{path} cannot be read ({err.strerror or err}); pass a readable file, not a folder."
        ) from None
    return digest.hexdigest()


def require_sha256(path: str | Path, expected: str, what: str) -> None:
    """Refuse a source file whose sha256 is not the one its provenance names.

    ``path`` is the file; ``expected`` its hex sha256 as the provenance names it; ``what`` a short
    description of the file, used in the ``ValueError`` raised on a mismatch.
    """
    if not isinstance(expected, str) or not isinstance(what, str):
        raise TypeError("expected (a hex sha256) and what (a description of the file) must be strings.")
    digest = sha256(path)
    if digest != expected:
        raise ValueError(f"{path} has sha256 {digest}, not {what} ({expected}); pass the file its SOURCE.md names.")


def write_table(
    directory: str | Path, name: str, header: Sequence[str], rows: Iterable[Sequence[Any]], provenance: dict[str, Any]
) -> Path:
    """Write ``<name>.csv`` and ``<name>.provenance.json`` into ``directory``; returns the CSV's path.

    ``directory`` is the output folder, claimed as the tool's own (new, empty or already marked);
    ``name`` a plain file name without a folder or extension; ``header`` the non-empty list of column
    names; ``rows`` the rows, each a list or tuple with one value per column; ``provenance`` a dict
    (the sources and their sha256, the script) written as indented JSON beside the table.
    """
    directory = _as_path(directory, "directory")
    if not isinstance(name, str) or not name or Path(name).name != name:
        raise ValueError(
            f"name must be a plain file name without a folder, e.g. 'big_math_k_histogram'; got "
            f"{' '.join(repr(name).split())[:40]}."
        )
    if not isinstance(provenance, dict):
        raise TypeError(
            f"provenance must be a dict (written as JSON beside the table); got {type(provenance).__name__}."
        )
    if (
        isinstance(header, (str, bytes))
        or not isinstance(header, (list, tuple))
        or not header
        or not all(isinstance(h, str) for h in header)
    ):
        raise TypeError("header must be a non-empty list of column names (strings), e.g. ['k', 'count'].")
    rows = [list(row) if isinstance(row, (list, tuple)) else row for row in rows]
    bad = next((i for i, row in enumerate(rows) if not isinstance(row, list) or len(row) != len(header)), None)
    if bad is not None:
        raise ValueError(f"row {bad} of the table is not a list of {len(header)} values (one per column of {header}).")
    text = json.dumps(provenance, indent=2) + "\n"  # fails (TypeError) before any file is written
    # the tables' folder is the tool's (stddial_book.core.outdir): new, empty or marked; never a reader's
    directory = claim_dir(directory, "tables")
    table = directory / f"{name}.csv"
    try:
        with open(table, "w", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(list(header))
            writer.writerows(rows)
        (directory / f"{name}.provenance.json").write_text(text)
    except (FileExistsError, NotADirectoryError):
        raise ValueError(
            f"cannot write the table into {directory}: it (or a folder above it) is a file; pass a "
            "folder as the output directory."
        ) from None
    except OSError as err:
        raise ValueError(
            f"cannot write the table into {directory} ({err.strerror or err}); pass a folder you can write to."
        ) from None
    return table
