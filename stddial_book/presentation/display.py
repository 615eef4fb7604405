"""What a chapter's code cells hand to its prose and its readers: glued values (:func:`glue`,
:func:`glue_all`, :func:`glue_md`), a few phrasings that read as a person would write them
(:func:`code_list`, :func:`range_in_words`), the directions and comparisons a sentence states
checked on the numbers it rests on (:func:`prose_claim`), and SymPy's proofs shown as what they
prove (:func:`show_claim`)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "glue",
    "glue_all",
    "glue_md",
    "code_list",
    "words_list",
    "of_total",
    "range_in_words",
    "show_claim",
    "show_equation",
    "prose_claim",
    "BOOK_BUILD_ENV",
]


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
    if isinstance(value, str) and "`" in value:
        raise ValueError(
            f"{name}: a glued string is pasted as plain text, so its backticks would show on the page "
            f"({value[:60]!r}); glue Markdown with glue_md and paste it with {{glue:md}}."
        )
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

    ``values`` maps each name (a string) to its value; ``prefix`` is a string put before every name
    (none by default).

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


def glue_md(name: str, markdown: str) -> None:
    """Record ``markdown`` under ``name`` for ``{glue:md}`name``` in the chapter's prose, where it is
    rendered as Markdown (inline code, emphasis), not pasted as plain text as ``{glue:text}`` does.

    Outside the site build it is printed as ``name = markdown``, like :func:`glue`'s values.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"glue_md's name must be a non-empty string (the key the prose cites); got {name!r}.")
    if not isinstance(markdown, str):
        raise TypeError(f"glue_md pastes Markdown text; got {type(markdown).__name__} {markdown!r:.40}.")
    if os.environ.get(BOOK_BUILD_ENV) != "1":
        print(f"{name} = {markdown}")
    try:
        from IPython.display import Markdown
        from myst_nb import glue as _myst_glue
    except ImportError:
        return
    _myst_glue(name, Markdown(markdown), display=False)


def words_list(items: Sequence[str], last: str = "and") -> str:
    """``items`` as a person lists them: "a", "a and b", "a, b and c"; "" for none.

    ``items`` is a sequence of strings (not one bare string); ``last`` is the word before the last item
    (``"and"`` by default, ``"or"`` for a choice).
    """
    items = [str(item) for item in _names(items)]
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {last} {items[-1]}"


def code_list(names: Sequence[str], last: str = "and") -> str:
    """Names as inline code in a Markdown list: "`a`, `b` and `c`" (for :func:`glue_md`).

    ``names`` is a sequence of names (not one bare string); ``last`` is the word before the last one
    (``"and"`` by default).
    """
    return words_list([f"`{name}`" for name in _names(names)], last)


def _names(items: Sequence[str]) -> Sequence[str]:
    """``items``, refused when it is a bare string (whose letters would be listed) or no sequence."""
    if isinstance(items, str) or not isinstance(items, Sequence):
        raise TypeError(f"a list of names is needed; got {type(items).__name__} {items!r:.40}.")
    return items


def of_total(count: int, total: int, noun: str) -> str:
    """``count`` of ``total`` things as a person says it (``noun`` plural): "all 150 steps", "none
    of the 150 steps", "one of the 150 steps", "97 of the 150 steps"; never "150 of the 150"."""
    import numpy as np

    for name, value in (("count", count), ("total", total)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an int; got {value!r}.")
    count, total = int(count), int(total)
    if not 0 <= count <= total:
        raise ValueError(f"need 0 <= count <= total; got {count} of {total}.")
    if count == total and total > 1:
        return f"all {total} {noun}"
    if count == 0:
        return f"none of the {total} {noun}"
    return f"{'one' if count == 1 else count} of the {total} {noun}"


_NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}


def _plain(value: float, digits: int) -> str:
    """``value`` at ``digits`` decimals without trailing zeros: 2.0000 is "2", 0.2500 is "0.25"."""
    text = f"{value:.{digits}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def range_in_words(low: float, high: float, digits: int) -> str:
    """Where values from ``low`` to ``high`` lie, said as a person would, at ``digits`` decimals, to
    follow "is": "between 1.9986 and 2.0014", or, where the two ends agree at that precision, the
    one value without trailing zeros, "2 to four decimal places" ("2" when the ends are equal): never
    "between 2.0000 and 2.0000"."""
    if isinstance(digits, bool) or not isinstance(digits, int) or digits < 0:
        raise ValueError(f"digits must be an int >= 0; got {digits!r}.")
    low, high = float(low), float(high)
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ValueError(f"need finite low <= high; got {low!r} and {high!r}.")
    if _plain(low, digits) != _plain(high, digits):
        return f"between {low:.{digits}f} and {high:.{digits}f}"
    value = _plain((low + high) / 2, digits)
    if low == high:
        return value
    if digits == 0:
        return f"{value} when rounded to a whole number"
    places = _NUMBER_WORDS.get(digits, str(digits))
    return f"{value} to {places} decimal place{'' if digits == 1 else 's'}"


def prose_claim(holds: bool, says: str) -> None:
    """Hold a sentence of the prose to the numbers it rests on: a direction or a comparison
    (grows, flatter, most, faster) is computed in the cell that glues its numbers and passed here as
    ``holds``. When data and words part, raise ``AssertionError`` quoting the sentence's claim, so
    that the chapter, its test and the book's build fail instead of printing words the numbers no
    longer support. ``says`` quotes that claim, a non-empty string (such as "the silent fraction
    stays flat")."""
    if not isinstance(says, str) or not says.strip():
        raise ValueError("says must quote the claim the prose makes, e.g. 'the silent fraction stays flat'.")
    if not isinstance(holds, bool):
        try:
            holds = bool(holds.item() if hasattr(holds, "item") else holds)
        except (TypeError, ValueError) as err:
            raise TypeError(f"holds must be a truth value; got {type(holds).__name__}.") from err
    if not holds:
        raise AssertionError(
            f"the prose says {says!r}, and the numbers computed here no longer do: "
            "rewrite the sentence, or find what changed the numbers."
        )


def show_equation(latex: str) -> None:
    """Render ``latex``, a LaTeX string, as display math in the notebook (MathJax in the book, Colab and
    Jupyter)."""
    from IPython.display import Math, display

    display(Math(latex))


def show_claim(claim: Any, check: bool = True) -> None:
    """Show a :class:`stddial_book.theory.derivation.Claim` as what SymPy proved: its statement, the
    left side as built from the definitions (before any simplification) = the closed form, and
    that SymPy simplifies their difference to 0.

    ``claim`` is the :class:`~stddial_book.theory.claim.Claim` to show. With ``check=True`` (the default)
    a claim SymPy cannot prove raises ``AssertionError``, so the chapter, and with it the book's build,
    fails; with ``check`` false SymPy is not asked and the claim is marked "not checked here". A claim whose two sides print the same
    (such as "2 = 2", a left side SymPy evaluated while building it) raises ``ValueError``: it
    would show a reader nothing of what was proved.
    """
    import sympy as sp

    if sp.latex(claim.lhs) == sp.latex(claim.rhs_in_sigma()):
        raise ValueError(
            f"{claim.label}: both sides print as {sp.latex(claim.lhs)!r}, which shows nothing proved; "
            "build the left side unevaluated (sp.Derivative, sp.Subs, evaluate=False)."
        )
    if check and not claim.holds():
        raise AssertionError(f"{claim.label} does not hold: lhs - rhs = {claim.difference()}")
    from IPython.display import Markdown, display

    if not check:
        display(Markdown(f"*{claim.statement}*, for {claim.assumptions} (not checked here):"))
        show_equation(claim.latex_aligned())
        return
    display(
        Markdown(
            f"*{claim.statement}*, for {claim.assumptions}. Built from the definitions, the left side "
            "equals the closed form on the right:"
        )
    )
    show_equation(claim.latex_aligned())
    display(Markdown("SymPy simplifies the difference of the two sides to $0$: proved."))
