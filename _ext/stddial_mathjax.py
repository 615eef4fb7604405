"""Sphinx extension: serve MathJax 3 from the built site instead of a CDN.

The MathJax 3 distribution comes from the ``django-static-mathjax`` package,
which installs it as static files (``mathjax/static/mathjax/es5/``) into
site-packages. On ``builder-inited`` this extension finds those files, and on
``build-finished`` it copies the ``es5`` tree to ``<outdir>/_static/mathjax/``.
Pages then load ``_static/mathjax/tex-mml-chtml.js`` (set ``mathjax_path`` to
``mathjax/tex-mml-chtml.js``; this extension sets it when it is left at a
remote default), so math renders with no network at all.

Enabled in ``_config.yml`` as a local extension (it is build tooling, not part of the package)::

    sphinx:
      local_extensions:
        stddial_mathjax: _ext
      config:
        mathjax_path: mathjax/tex-mml-chtml.js
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError
from sphinx.util import logging

__all__ = ["find_mathjax_es5", "setup"]

LOCAL_MATHJAX_PATH = "mathjax/tex-mml-chtml.js"
_ENTRY_SCRIPT = "tex-mml-chtml.js"
_ENV_KEY = "_stddial_mathjax_es5"

logger = logging.getLogger(__name__)


def find_mathjax_es5() -> Path:
    """Return the ``es5`` folder of the installed MathJax 3 distribution.

    Raises ``ExtensionError`` with install instructions when the
    ``django-static-mathjax`` package is missing or incomplete.
    """
    spec = importlib.util.find_spec("mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise ExtensionError(
            "MathJax 3 is not installed: the book serves MathJax from its own "
            "_static folder and takes it from the 'django-static-mathjax' "
            "package. Run: pip install django-static-mathjax "
            "(or `pip install -r requirements.txt`)."
        )
    for location in spec.submodule_search_locations:
        es5 = Path(location) / "static" / "mathjax" / "es5"
        if (es5 / _ENTRY_SCRIPT).is_file():
            return es5
    raise ExtensionError(
        "A 'mathjax' package is importable but holds no "
        f"static/mathjax/es5/{_ENTRY_SCRIPT}; it is not the MathJax 3 "
        "distribution of django-static-mathjax. Run: "
        "pip install --force-reinstall django-static-mathjax"
    )


def _is_html_builder(app: Sphinx) -> bool:
    return getattr(app.builder, "format", None) == "html"


def _use_local_path(app: Sphinx, config: Config) -> None:
    """Point ``mathjax_path`` at the local copy if it was left remote."""
    path = str(getattr(config, "mathjax_path", "") or "")
    if not path or path.startswith(("http://", "https://", "//")):
        config.mathjax_path = LOCAL_MATHJAX_PATH


def _locate(app: Sphinx) -> None:
    if not _is_html_builder(app):
        return
    es5 = find_mathjax_es5()
    setattr(app, _ENV_KEY, es5)
    logger.info(f"[stddial mathjax] using MathJax 3 from {es5}")


def _copy(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or not _is_html_builder(app):
        return
    es5: Path | None = getattr(app, _ENV_KEY, None)
    if es5 is None:  # builder-inited did not run for an html builder
        es5 = find_mathjax_es5()
    dest = Path(app.outdir) / "_static" / "mathjax"
    shutil.copytree(es5, dest, dirs_exist_ok=True)
    logger.info(f"[stddial mathjax] copied MathJax 3 to {dest}")


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.mathjax")
    app.connect("config-inited", _use_local_path)
    app.connect("builder-inited", _locate)
    app.connect("build-finished", _copy)
    return {
        "version": "0.1.0",
        "parallel_read_safe": True,
        "parallel_write_safe": True,
    }
