"""Explorers for the notebooks: a live one (ipywidgets, needs a Python kernel: Colab or Jupyter) and
one that works on the static website too (:func:`silent_explorer_html`: the numbers are computed
here, in Python, for a grid of settings, and a few lines of inline JavaScript only draw them, with
nothing loaded from the network). Chapter 5."""

from __future__ import annotations

import numpy as np

from stddial_book.theory.recipes import RECIPES

__all__ = [
    "silent_explorer_figure",
    "silent_explorer",
    "silent_explorer_data",
    "silent_explorer_html",
    "explorer_note",
]

EXPLORER_GROUP_SIZES_DEFAULT = (2, 4, 8, 16, 32, 64)


def silent_explorer_figure(group_size: int = 8, solve_rate: float = 0.3, recipe_name: str = "grpo"):
    """One prompt with solve rate p, groups of G: the distribution of k and each outcome's weight.

    ``group_size`` is G (8 by default), ``solve_rate`` is p in [0, 1] (0.3 by default) and ``recipe_name``
    names a preset (``"grpo"`` by default, or ``"dr_grpo"``, ``"dapo"``).
    """
    import matplotlib.pyplot as plt
    from scipy.stats import binom

    from stddial_book.presentation.style import RECIPE_COLORS, STACKED_WIDTH
    from stddial_book.theory.identity import update_weight
    from stddial_book.theory.recipes import get_recipe
    from stddial_book.theory.silent import expected_update_weight, silent_probability

    recipe = get_recipe(recipe_name)
    k = np.arange(group_size + 1)
    pmf = binom.pmf(k, group_size, solve_rate)
    weights = update_weight(k / group_size, recipe, group_size)
    # stacked, the book's phone width: Colab on a phone keeps labels legible (chapter 5's explorer)
    fig, (left, right) = plt.subplots(2, 1, figsize=(STACKED_WIDTH, 5.6), constrained_layout=True)
    colors = ["0.6" if j in (0, group_size) else RECIPE_COLORS[recipe.name] for j in k]
    left.bar(k, pmf, color=colors)
    left.set(
        xlabel="correct samples k",
        ylabel="probability",
        title=f"P(silent) = {silent_probability(solve_rate, group_size):.3f} (grey bars)",
    )
    right.bar(k, weights, color=colors)
    right.set(
        xlabel="correct samples k",
        ylabel="update weight w",
        title=f"{recipe.name}: E[w] = {expected_update_weight(solve_rate, group_size, recipe):.3f}",
    )
    return fig


def silent_explorer():
    """Sliders for G and p and a recipe menu, redrawing :func:`silent_explorer_figure`."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    def draw(group_size: int, solve_rate: float, recipe_name: str) -> None:
        silent_explorer_figure(group_size, solve_rate, recipe_name)
        plt.show()
        note = explorer_note(recipe_name)
        if note:
            print(note)

    return widgets.interactive(
        draw,
        group_size=widgets.IntSlider(value=8, min=2, max=64, description="G"),
        solve_rate=widgets.FloatSlider(value=0.3, min=0.0, max=1.0, step=0.01, description="p"),
        recipe_name=widgets.Dropdown(options=list(RECIPES), value="grpo", description="recipe"),
    )


def _rewards(recipe) -> str:
    """A recipe's two reward values as the text names them: "0/1", "±1"."""
    right, wrong = recipe.reward_correct, recipe.reward_wrong
    if right == -wrong:
        return f"±{right:g}"
    return f"{wrong:g}/{right:g}".replace("-", "−")


def explorer_note(recipe_name: str, group_sizes=EXPLORER_GROUP_SIZES_DEFAULT) -> str:
    """What the explorer's two panels do not show about a recipe, in a sentence or two ("" for none).

    For a recipe that filters silent groups (DAPO's dynamic sampling) the panels hold its per-group
    weights, which are another preset's wherever they coincide (DAPO divides by σ like GRPO, and GRPO's
    advantages do not depend on the reward values): the note says so, and where the recipe differs.
    Whether the weights coincide is computed here, for every group size of the grid, not assumed.
    ``recipe_name`` names the preset; ``group_sizes`` are the grid's G, each at least 2.
    """
    from stddial_book.theory.identity import update_weight
    from stddial_book.theory.recipes import PRESETS, get_recipe

    recipe = get_recipe(recipe_name)
    if not recipe.dynamic_sampling:
        return ""
    same = [
        other.name
        for other in PRESETS.values()
        if other.name != recipe.name
        and all(
            np.allclose(update_weight(np.arange(G + 1) / G, recipe, G), update_weight(np.arange(G + 1) / G, other, G))
            for G in group_sizes
        )
    ]
    head = ""
    if same and recipe.scale_std:
        other = get_recipe(same[0])
        rewards = (
            f", which turns its {_rewards(recipe)} rewards into the same advantages as {other.name}'s "
            f"{_rewards(other)} rewards"
            if (recipe.reward_correct, recipe.reward_wrong) != (other.reward_correct, other.reward_wrong)
            else ""
        )
        head = (
            f"{recipe.name} divides by σ like {other.name}{rewards}: each outcome's weight and E[w] here "
            f"are {other.name}'s. "
        )
    aggregation = {
        "token-mean": "averages its loss over all the tokens of a step",
        "seq-mean-token-mean": "averages its loss over each sequence's tokens",
        "seq-mean-token-sum-norm": "divides each sequence's token sum by L_max",
    }[recipe.loss_aggregation]
    return (
        head + f"{recipe.name} differs where these panels do not look: it discards silent groups and refills "
        "the batch with mixed ones, which multiplies each kept group's share of the update by 1/(1 − f), "
        f"f the silent fraction of the whole pool, and it {aggregation}."
    )


#: The settings :func:`silent_explorer_html` precomputes: group sizes, and solve rates in steps of 0.025.
EXPLORER_GROUP_SIZES = EXPLORER_GROUP_SIZES_DEFAULT
EXPLORER_SOLVE_RATES = tuple(round(0.025 * i, 3) for i in range(41))


def silent_explorer_data(group_sizes=EXPLORER_GROUP_SIZES, solve_rates=EXPLORER_SOLVE_RATES) -> dict:
    """The explorer's numbers for every (recipe, G, p) of a grid, from the package's closed forms.

    For each setting: the binomial distribution of k, each outcome's update weight w(k/G) (0 when
    silent), P(silent) and E[w]; per recipe its :func:`explorer_note`. Returned as plain lists,
    ready for JSON. ``group_sizes`` are the grid's G (each at least 2) and ``solve_rates`` its p (each
    in [0, 1]); by default G = 2, 4, 8, 16, 32 and 64 and p from 0 to 1 in steps of 0.025.
    """
    from scipy.stats import binom

    from stddial_book.theory.identity import update_weight
    from stddial_book.theory.recipes import PRESETS
    from stddial_book.theory.silent import expected_update_weight, silent_probability

    group_sizes = [int(g) for g in group_sizes]
    solve_rates = [float(p) for p in solve_rates]
    if not group_sizes or min(group_sizes) < 2:
        raise ValueError(f"group_sizes must hold group sizes >= 2; got {group_sizes}.")
    if not solve_rates or not all(0.0 <= p <= 1.0 for p in solve_rates):
        raise ValueError(f"solve_rates must lie in [0, 1]; got {solve_rates}.")
    data: dict = {"group_sizes": group_sizes, "solve_rates": solve_rates, "recipes": {}}
    for key, recipe in PRESETS.items():
        per_g = []
        for G in group_sizes:
            k = np.arange(G + 1)
            weights = [round(float(w), 5) for w in update_weight(k / G, recipe, G)]
            rows = []
            for p in solve_rates:
                pmf = binom.pmf(k, G, p).tolist()
                rows.append(
                    {
                        "pmf": [round(x, 5) for x in pmf],
                        "silent": round(float(silent_probability(p, G)), 4),
                        "expected_w": round(float(expected_update_weight(p, G, recipe)), 4),
                    }
                )
            per_g.append({"weights": weights, "by_p": rows})
        data["recipes"][key] = {"name": recipe.name, "note": explorer_note(key, group_sizes), "by_g": per_g}
    return data


_EXPLORER_SCRIPT = """
(function () {
  var root = document.getElementById("%(id)s");
  var data = JSON.parse(root.querySelector("script[type='application/json']").textContent);
  var colors = %(colors)s;
  var gIn = root.querySelector(".g"), pIn = root.querySelector(".p"), rIn = root.querySelector(".r");
  function bars(svg, values, ymax, silentIdx, color, label) {
    var W = 330, H = 170, L = 48, B = 28, n = values.length, bw = (W - L - 6) / n;
    var out = '<text x="' + (L + (W - L) / 2) + '" y="' + (H - 2) + '" font-size="13" text-anchor="middle">correct samples k</text>';
    out += '<text x="10" y="' + ((H - B) / 2) + '" font-size="13" text-anchor="middle" transform="rotate(-90 10 ' + ((H - B) / 2) + ')">' + label + '</text>';
    out += '<line x1="' + L + '" y1="' + (H - B) + '" x2="' + W + '" y2="' + (H - B) + '" stroke="#444"/>';
    out += '<text x="' + (L - 4) + '" y="12" font-size="12" text-anchor="end">' + ymax.toFixed(2) + '</text>';
    out += '<text x="' + (L - 4) + '" y="' + (H - B) + '" font-size="12" text-anchor="end">0</text>';
    for (var j = 0; j < n; j++) {
      var h = ymax > 0 ? (H - B - 8) * values[j] / ymax : 0;
      var c = silentIdx.indexOf(j) >= 0 ? "#999" : color;
      out += '<rect x="' + (L + j * bw + 0.5) + '" y="' + (H - B - h) + '" width="' + Math.max(bw - 1, 0.5) + '" height="' + h + '" fill="' + c + '"><title>k = ' + j + ': ' + values[j] + '</title></rect>';
    }
    out += '<text x="' + L + '" y="' + (H - B + 12) + '" font-size="12">0</text>';
    out += '<text x="' + (W - 6) + '" y="' + (H - B + 12) + '" font-size="12" text-anchor="end">' + (n - 1) + '</text>';
    svg.innerHTML = out;
  }
  function draw() {
    var gi = +gIn.value, pi = +pIn.value, key = rIn.value;
    var G = data.group_sizes[gi], p = data.solve_rates[pi], rec = data.recipes[key];
    var cell = rec.by_g[gi], row = cell.by_p[pi];
    root.querySelector(".gv").textContent = G;
    root.querySelector(".pv").textContent = p.toFixed(3);
    root.querySelector(".out").textContent = "P(silent) = " + row.silent.toFixed(3) + " (grey bars);  " +
      rec.name + ": E[w] = " + row.expected_w.toFixed(3);
    root.querySelector(".note").textContent = rec.note;
    root.querySelector(".note").style.display = rec.note ? "" : "none";
    var silent = [0, G];
    bars(root.querySelector(".left"), row.pmf, Math.max.apply(null, row.pmf), silent, colors[rec.name], "probability");
    bars(root.querySelector(".right"), cell.weights, Math.max.apply(null, cell.weights.concat([1e-9])), silent,
         colors[rec.name], "update weight w");
  }
  [gIn, pIn, rIn].forEach(function (el) { el.addEventListener("input", draw); });
  draw();
})();
"""


def silent_explorer_html(
    group_sizes=EXPLORER_GROUP_SIZES,
    solve_rates=EXPLORER_SOLVE_RATES,
    group_size: int = 8,
    solve_rate: float = 0.3,
    recipe_name: str = "grpo",
):
    """The explorer as self-contained HTML (an IPython ``HTML`` object) that works without a kernel.

    The same two panels as :func:`silent_explorer_figure`, for every setting of the grid
    (:func:`silent_explorer_data`), drawn as SVG by inline JavaScript when a slider moves; nothing
    is fetched from the network, so it works on the static website and offline. The two panels
    wrap onto two lines in a narrow column and scale down with it (never wider than the column), so
    their 12- to 13-px labels stay readable on a phone. ``group_sizes`` and ``solve_rates`` are the grid,
    as for :func:`silent_explorer_data`; ``group_size``, ``solve_rate`` and ``recipe_name`` are the
    setting shown first (the grid's nearest G and p; G = 8, p = 0.3 and GRPO by default).
    """
    import html
    import json
    import uuid

    from IPython.display import HTML

    from stddial_book.presentation.style import RECIPE_COLORS
    from stddial_book.theory.recipes import recipe_key

    data = silent_explorer_data(group_sizes, solve_rates)
    key = recipe_key(recipe_name)
    if key not in data["recipes"]:
        raise ValueError(f"unknown recipe {recipe_name!r}; choose one of {sorted(data['recipes'])}.")
    gi = min(range(len(data["group_sizes"])), key=lambda i: abs(data["group_sizes"][i] - group_size))
    pi = min(range(len(data["solve_rates"])), key=lambda i: abs(data["solve_rates"][i] - solve_rate))
    uid = "stddial-explorer-" + uuid.uuid4().hex[:8]
    options = "".join(
        f'<option value="{k}"{" selected" if k == key else ""}>{html.escape(r["name"])}</option>'
        for k, r in data["recipes"].items()
    )
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    markup = f"""
<div id="{uid}" class="stddial-explorer" style="font-family: sans-serif; font-size: 14px; max-width: 700px;">
  <div style="display: flex; flex-wrap: wrap; gap: 1em; align-items: center;">
    <label>G = <b class="gv"></b> <input class="g" type="range" min="0" max="{len(data["group_sizes"]) - 1}"
      step="1" value="{gi}" aria-label="group size G"></label>
    <label>p = <b class="pv"></b> <input class="p" type="range" min="0" max="{len(data["solve_rates"]) - 1}"
      step="1" value="{pi}" aria-label="solve rate p"></label>
    <label>recipe <select class="r" aria-label="recipe">{options}</select></label>
  </div>
  <div class="out" style="margin: 0.4em 0;"></div>
  <p class="note" style="margin: 0.4em 0; font-size: 13px;"></p>
  <div style="display: flex; flex-wrap: wrap; gap: 8px;">
    <svg class="left" viewBox="0 0 340 175" width="340" height="175" style="width: 100%; max-width: 340px; height: auto;"
      role="img"
      aria-label="distribution of the number of correct samples"></svg>
    <svg class="right" viewBox="0 0 340 175" width="340" height="175" style="width: 100%; max-width: 340px; height: auto;"
      role="img"
      aria-label="update weight of each outcome"></svg>
  </div>
  <script type="application/json">{payload}</script>
  <script>{_EXPLORER_SCRIPT % {"id": uid, "colors": json.dumps(RECIPE_COLORS)}}</script>
</div>"""
    return HTML(markup)
