"""Notebook helpers for the chapters: glue a value into the prose, show a derivation step.

The book is built with myst-nb, whose ``glue`` puts a number computed in a cell into the text,
so no measured number is ever typed by hand. In Colab or plain Jupyter, myst-nb is usually not
installed; :func:`glue` then just displays the value, so the same notebook runs everywhere.
"""

from __future__ import annotations

from typing import Any

__all__ = ["glue", "show_claim", "show_equation"]


def glue(name: str, value: Any, display: bool = False) -> None:
    """Record ``value`` under ``name`` for ``{glue:text}`name:format``` in the chapter's prose.

    Falls back to printing ``name = value`` when myst-nb is not installed (Colab, Jupyter) and
    ``display`` is true. Returns nothing, so a cell that ends with a glue shows no stray value.
    """
    if getattr(value, "shape", None) == () and hasattr(value, "item"):
        value = value.item()  # numpy/torch scalars: format specs in the prose need a Python number
    try:
        from myst_nb import glue as _myst_glue
    except ImportError:
        if display:
            print(f"{name} = {value}")
        return
    _myst_glue(name, value, display=display)


def show_equation(latex: str) -> None:
    """Render LaTeX as display math in the notebook (MathJax in the book, Colab and Jupyter)."""
    from IPython.display import Math, display

    display(Math(latex))


def show_claim(claim: Any, check: bool = True) -> None:
    """Show a :class:`stddial_book.derivation.Claim` as an equation, after proving it holds.

    With ``check=True`` (the default) a claim SymPy cannot prove raises ``AssertionError``, so
    the chapter, and with it the book's build, fails.
    """
    if check and not claim.holds():
        raise AssertionError(f"{claim.label} does not hold: lhs - rhs = {claim.difference()}")
    from IPython.display import Markdown, display

    display(Markdown(f"*{claim.statement}* (proved by SymPy under {claim.assumptions}):"))
    show_equation(claim.latex_aligned())
