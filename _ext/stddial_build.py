"""Sphinx extension: tell the chapters' kernels that they run inside the site build, and add
the book's stylesheet (``_ext/static/stddial.css``: tables in cell outputs fit the column), and
write the execution table's status in words.

Jupyter Book starts each chapter's kernel from the Sphinx process, so a variable set here is
inherited by every kernel. :func:`stddial_book.presentation.display.glue` reads it: in the site build a glued
value goes into the prose only; anywhere else (Colab, Jupyter, the tests) it is also printed.

Enabled in ``_config.yml`` as a local extension (``sphinx.local_extensions``, folder ``_ext``); it
lives outside the package because readers never import it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx

from stddial_book.presentation.display import BOOK_BUILD_ENV


def _add_stylesheet(app: Sphinx) -> None:
    app.config.html_static_path.append(str(Path(__file__).parent / "static"))
    app.add_css_file("stddial.css")


def _status_in_words() -> None:
    """myst-nb's execution table (the "this edition" page) marks each page's status with emoji that
    common fonts (DejaVu Sans) lack; say it in words. It is a private table of myst-nb's: if a
    release renames it, the emoji stay and nothing else changes."""
    try:
        from myst_nb.ext import execution_tables
    except ImportError:
        return
    transforms = getattr(execution_tables, "_key2transform", None)
    if isinstance(transforms, dict) and "succeeded" in transforms:
        transforms["succeeded"] = lambda ok: "ran" if ok is True else "failed"


def setup(app: Sphinx) -> dict[str, Any]:
    os.environ[BOOK_BUILD_ENV] = "1"
    _status_in_words()
    app.connect("builder-inited", _add_stylesheet)
    return {"version": "0.1.0", "parallel_read_safe": True, "parallel_write_safe": True}
