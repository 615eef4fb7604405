"""Where the book's shipped data lives: :func:`data_path`, the same files in a checkout and a wheel.

The repository keeps its small derived tables and recorded run logs in the top-level ``data/``
folder (see ``data/__init__.py``). A wheel install carries that folder as the subpackage
``stddial_book.data``; a source checkout (editable install, or the repository root on
``sys.path``) reads the folder itself. Chapters and modules ask :func:`data_path` and never build
a path from ``__file__``, which breaks once the package sits in ``site-packages``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["data_path"]


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
