"""The book's figure style: recipe colours, type sizes, legibility (shared by every figure module)."""

from __future__ import annotations

import functools

import matplotlib.pyplot as plt

from stddial_book.theory.recipes import PRESETS, RECIPES

__all__ = [
    "RECIPE_COLORS",
    "RECIPE_NAMES",
    "BAND_COLORS",
    "TYPE_SIZES",
    "STACKED_WIDTH",
    "legible",
    "legible_figure",
    "stacked_figure",
]


#: One colour per preset, used by every figure of the book.
RECIPE_COLORS = {"GRPO": "#1f77b4", "Dr. GRPO": "#d62728", "DAPO": "#2ca02c"}


#: Type sizes chosen for the book's text column (about 690 px at a 1280 px window, measured on the
#: built site): a 9.5-inch figure at 100 dpi is shown at about 0.72 of its size, so 13-point
#: tick labels come out at about a 13 px font size, digits about 9 px high (body text is 16 px;
#: at 10 points digits were 7 px high, too small to read at a glance); no figure is wider than
#: 9.5 inches.
TYPE_SIZES = {"title": 12, "label": 12, "ticks": 13, "legend": 11}


def legible(fig: plt.Figure) -> plt.Figure:
    """``fig`` with the book's type sizes (:data:`TYPE_SIZES`), set on the finished figure: every
    figure of the package, and one a chapter draws itself (chapter 14's TRL run), so that it reads
    like the package's figures. (Not with ``plt.rc_context``: restoring the rcParams on exit can reset
    the notebook's inline backend, and later figures then vanish.)"""
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


#: Width of a stacked figure, inches. At 100 dpi it is shown whole in the desktop column (about
#: 690 px) and at about 0.6 of its size in a phone's (about 358 px at a 390 px screen), where the
#: book's 11- to 13-point type comes out at 9 to 11 px.
STACKED_WIDTH = 6.0


def _stacked(fig: plt.Figure, panel_height: float = 3.2) -> plt.Figure:
    """``fig``, whose panels sit side by side in one row, with the panels stacked in one column
    :data:`STACKED_WIDTH` inches wide, so that each keeps legible labels on a phone. Panels that
    shared the y axis show their own tick labels and take the first one's y label. A figure that is
    not one row of panels is returned unchanged."""
    axes = [ax for ax in fig.axes if ax.get_subplotspec() is not None]
    grids = {id(ax.get_subplotspec().get_gridspec()) for ax in axes}
    if len(axes) < 2 or len(grids) != 1 or axes[0].get_subplotspec().get_gridspec().get_geometry() != (1, len(axes)):
        return fig
    grid = fig.add_gridspec(len(axes), 1)
    ylabel = axes[0].get_ylabel()
    for i, ax in enumerate(axes):
        ax.set_subplotspec(grid[i, 0])
        ax.tick_params(labelleft=True)
        if not ax.get_ylabel() and ax.get_shared_y_axes().joined(ax, axes[0]):
            ax.set_ylabel(ylabel)
    fig.set_size_inches(STACKED_WIDTH, panel_height * len(axes) + 0.4)
    return fig


def stacked_figure(figure_function):
    """Decorator: the one-row figure ``figure_function`` returns, with its panels stacked
    (:func:`_stacked`)."""

    @functools.wraps(figure_function)
    def wrapper(*args, **kwargs):
        return _stacked(figure_function(*args, **kwargs))

    return wrapper


def legible_figure(figure_function):
    """Decorator: the figure ``figure_function`` returns, with the book's type sizes."""

    @functools.wraps(figure_function)
    def wrapper(*args, **kwargs):
        return legible(figure_function(*args, **kwargs))

    return wrapper


#: Each recipe's name in a figure (a legend, a colour of :data:`RECIPE_COLORS`), by its key in the
#: registry of recipes (:data:`stddial_book.theory.recipes.RECIPES`).
RECIPE_NAMES = {key: PRESETS[key].name for key in RECIPES}

#: The colours of the solve-rate bands, hardest first.
BAND_COLORS = ("#3b0f70", "#8c2981", "#de4968", "#fe9f6d", "#fcfdbf")
