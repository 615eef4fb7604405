"""Live explorers for the notebooks (ipywidgets). Each one has a static figure beside it in the
chapter, because widgets are inert on the static website."""

from __future__ import annotations

import numpy as np

__all__ = ["silent_explorer_figure", "silent_explorer"]


def silent_explorer_figure(group_size: int = 8, solve_rate: float = 0.3, recipe_name: str = "grpo"):
    """One prompt with solve rate p, groups of G: the distribution of k and each outcome's weight."""
    import math

    import matplotlib.pyplot as plt

    from .identity import expected_update_weight, silent_probability, update_weight
    from .plots import RECIPE_COLORS
    from .recipes import get_recipe

    recipe = get_recipe(recipe_name)
    k = np.arange(group_size + 1)
    pmf = np.array([math.comb(group_size, int(j)) * solve_rate**j * (1 - solve_rate) ** (group_size - j) for j in k])
    weights = update_weight(k / group_size, recipe, group_size)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), constrained_layout=True)
    colors = ["0.6" if j in (0, group_size) else RECIPE_COLORS[recipe.name] for j in k]
    left.bar(k, pmf, color=colors)
    left.set(xlabel="correct samples k", ylabel="probability",
             title=f"P(silent) = {silent_probability(solve_rate, group_size):.3f} (grey bars)")
    right.bar(k, weights, color=colors)
    right.set(xlabel="correct samples k", ylabel="update weight w",
              title=f"{recipe.name}: E[w] = {expected_update_weight(solve_rate, group_size, recipe):.3f}")
    return fig


def silent_explorer():
    """Sliders for G and p and a recipe menu, redrawing :func:`silent_explorer_figure`."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    def draw(group_size: int, solve_rate: float, recipe_name: str) -> None:
        silent_explorer_figure(group_size, solve_rate, recipe_name)
        plt.show()

    return widgets.interactive(
        draw,
        group_size=widgets.IntSlider(value=8, min=2, max=64, description="G"),
        solve_rate=widgets.FloatSlider(value=0.3, min=0.0, max=1.0, step=0.01, description="p"),
        recipe_name=widgets.Dropdown(options=["grpo", "dr_grpo", "dapo"], value="grpo", description="recipe"),
    )
