"""Sphinx extension: tell the chapters' kernels that they run inside the site build, and add
the book's stylesheet (``_ext/static/stddial.css``: tables in cell outputs fit the column), and
write the execution table's status in words, and point each page's Colab button at its published
notebook (``tools/colab_publish.py``: the page with the build's outputs and numbers, on the gh-pages
branch) instead of the notebook committed to main.

Jupyter Book starts each chapter's kernel from the Sphinx process, so a variable set here is
inherited by every kernel. :func:`stddial_book.presentation.display.glue` reads it: in the site build a glued
value goes into the prose only; anywhere else (Colab, Jupyter, the tests) it is also printed.

Enabled in ``_config.yml`` as a local extension (``sphinx.local_extensions``, folder ``_ext``); it
lives outside the package because readers never import it.
"""

from __future__ import annotations

import functools
import importlib.util
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


@functools.cache
def _launch_url():
    """tools/colab_publish.py's ``launch_url`` (build tooling, loaded from its file)."""
    path = Path(__file__).resolve().parents[1] / "tools" / "colab_publish.py"
    spec = importlib.util.spec_from_file_location("colab_publish", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.launch_url


def colab_to_published(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """sphinx-book-theme builds the Colab button from ``repository.url`` and ``repository.branch``: the
    notebook committed to main, which has no outputs. Point it at the notebook ``make book`` publishes
    with the site (gh-pages branch, ``_colab/<page>.ipynb``). Runs after the theme's own handler."""
    options = app.config.html_theme_options or {}
    colab = (options.get("launch_buttons") or {}).get("colab_url")
    if not colab:
        return
    for group in context.get("header_buttons") or []:
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            if button.get("text") == "Colab":
                button["url"] = _launch_url()(options["repository_url"], pagename, colab)


def setup(app: Sphinx) -> dict[str, Any]:
    os.environ[BOOK_BUILD_ENV] = "1"
    _status_in_words()
    app.connect("builder-inited", _add_stylesheet)
    app.connect("html-page-context", colab_to_published, priority=600)  # the theme adds the button at 501
    return {"version": "0.1.0", "parallel_read_safe": True, "parallel_write_safe": True}
