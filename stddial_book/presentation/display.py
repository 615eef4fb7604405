"""TODO"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["glue", "glue_all", "show_claim", "show_equation", "BOOK_BUILD_ENV"]


#: Set (to "1") by the book's Sphinx extension while Jupyter Book executes the chapters.
BOOK_BUILD_ENV = "STDDIAL_BOOK_BUILD"


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def glue(name: str, value: Any, display: bool = False) -> None:
    """Record ``value`` under ``name`` for ``{glue:text}`name:format``` in the chapter's prose.

    In the site build the value only goes into the text (or also into the page, with
    ``display``). Anywhere else (Colab, Jupyter, the tests) it is also printed as
    ``name = value``, so a reader of the notebook sees every number the book's text cites.
    Returns nothing, so a cell that ends with a glue shows no stray value.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"glue's name must be a non-empty string (the key the prose cites); got {name!r}.")
    if getattr(value, "shape", None) == () and hasattr(value, "item"):
        value = value.item()  # numpy/torch scalars: format specs in the prose need a Python number
    in_book = os.environ.get(BOOK_BUILD_ENV) == "1"
    if not in_book and not display:
        print(f"{name} = {_shown(value)}")
    try:
        from myst_nb import glue as _myst_glue
    except ImportError:
        if display:
            print(f"{name} = {_shown(value)}")
        return
    _myst_glue(name, value, display=display)


def glue_all(values: Mapping[str, Any], prefix: str = "") -> None:
    """:func:`glue` every entry of ``values`` under ``prefix + key``, in the mapping's order.

    One line in a chapter instead of one ``glue`` call per number: the analysis that produces the
    numbers lives in the package and returns them as a dict, the chapter glues them.
    """
    if not isinstance(values, Mapping):
        raise TypeError(f"glue_all needs a mapping of name -> value (e.g. a dict); got {type(values).__name__}.")
    if not isinstance(prefix, str):
        raise TypeError(f"glue_all's prefix must be a string; got {prefix!r}.")
    for key, value in values.items():
        if not isinstance(key, str) or not (prefix + key):
            raise TypeError(f"glue_all's keys must be strings (names the prose cites); got {key!r}.")
        glue(prefix + key, value)


def show_equation(latex: str) -> None:
    """Render LaTeX as display math in the notebook (MathJax in the book, Colab and Jupyter)."""
    from IPython.display import Math, display

    display(Math(latex))


def show_claim(claim: Any, check: bool = True) -> None:
    """Show a :class:`stddial_book.theory.derivation.Claim` as an equation, after proving it holds.

    With ``check=True`` (the default) a claim SymPy cannot prove raises ``AssertionError``, so
    the chapter, and with it the book's build, fails.
    """
    if check and not claim.holds():
        raise AssertionError(f"{claim.label} does not hold: lhs - rhs = {claim.difference()}")
    from IPython.display import Markdown, display

    display(Markdown(f"*{claim.statement}* (proved by SymPy under {claim.assumptions}):"))
    show_equation(claim.latex_aligned())
