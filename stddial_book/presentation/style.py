"""The book's figure style: recipe colours, type sizes, legibility (shared by every figure module)."""

from __future__ import annotations

import functools

import matplotlib.pyplot as plt

__all__ = ["RECIPE_COLORS", "legible"]


#: One colour per preset, used by every figure of the book.
RECIPE_COLORS = {"GRPO": "#1f77b4", "Dr. GRPO": "#d62728", "DAPO": "#2ca02c"}


#: Type sizes chosen for the book's text column (about 690 px at a 1280 px window, measured on the
#: built site): a 9.5-inch figure at 100 dpi is shown at about 0.72 of its size, so 13-point
#: tick labels come out at about a 13 px font size, digits about 9 px high (body text is 16 px;
#: at 10 points digits were 7 px high, too small to read at a glance); no figure is wider than
#: 9.5 inches.
TYPE_SIZES = {"title": 12, "label": 12, "ticks": 13, "legend": 11}


def _book_type_sizes(fig: plt.Figure) -> plt.Figure:
    """``fig`` with the book's type sizes (:data:`TYPE_SIZES`), set on the finished figure. (Not
    with ``plt.rc_context``: restoring the rcParams on exit can reset the notebook's inline
    backend, and later figures then vanish.)"""
    for ax in fig.axes:
        ax.title.set_fontsize(TYPE_SIZES["title"])
        ax.xaxis.label.set_fontsize(TYPE_SIZES["label"])
        ax.yaxis.label.set_fontsize(TYPE_SIZES["label"])
        ax.tick_params(labelsize=TYPE_SIZES["ticks"])
        legend = ax.get_legend()
        if legend is not None:
            for text in legend.get_texts():
                text.set_fontsize(TYPE_SIZES["legend"])
    return fig


def legible(fig: plt.Figure) -> plt.Figure:
    """``fig`` with the book's type sizes (:data:`TYPE_SIZES`): for a figure a chapter draws
    itself (chapter 14's TRL run), so that it reads like the package's figures."""
    return _book_type_sizes(fig)


def _legible(figure_function):
    """Decorator: the figure ``figure_function`` returns, with the book's type sizes."""

    @functools.wraps(figure_function)
    def wrapper(*args, **kwargs):
        return _book_type_sizes(figure_function(*args, **kwargs))

    return wrapper


_KEY_NAMES = {"grpo": "GRPO", "dr_grpo": "Dr. GRPO", "dapo": "DAPO"}


_BAND_COLORS = ("#3b0f70", "#8c2981", "#de4968", "#fe9f6d", "#fcfdbf")
