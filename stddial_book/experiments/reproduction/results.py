"""Every numbered result of the source paper beside the book's value (the appendix's reproduction page).

Each :class:`Row` holds the paper's value as printed, the book's value computed now from the
package (closed forms, the committed Big-Math and DAPO tables, Monte Carlo), the number of
decimals the paper prints, and whether the two agree. Nothing here is typed from the paper except
the ``paper`` column; the tests assert that every row agrees, except those marked
``expected_to_differ`` (the book's corrections, and one bootstrap end) with the reason in ``note``.

Agreement, and how a near miss is reported: :class:`~stddial_book.experiments.reproduction.row.Row`.

Bay and Yearick (2026), arXiv 2607.00152: §2 (RLOO, Table 1), §3 (identity, attenuation), §4
(group-size law and table), §5 (DAPO), §6 (difficulty weight), §7 (Big-Math tables), §8
(controlled run). Rows come in the paper's order; the book's corrections come last.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from stddial_book.core.checks import check_int
from stddial_book.experiments.reproduction.row import Row

__all__ = ["reproduction_rows", "controlled_run_rows", "rows_table", "identity_max_error", "rloo_max_error"]


def identity_max_error(max_group_size: int = 64, dims: int = 5, seed: int = 0, recipe: str = "grpo") -> float:
    """Largest relative gap between (1/G) Σ Aᵢ gᵢ and σ(ḡ₊ − ḡ₋) over every k of every G ≤ 64,
    with random score vectors and a random reward baseline (the identity holds for any). With
    ``recipe="dr_grpo"`` the advantages are Dr. GRPO's and the right side σ²(ḡ₊ − ḡ₋) (Table 1).

    ``max_group_size`` is the largest G checked (2 to 512, default 64); ``dims`` the length of each
    score vector gᵢ (1 to 1000, default 5); ``seed`` seeds the scores and baselines (whole number
    ≥ 0, default 0); ``recipe`` a preset's name (default ``"grpo"``), whose ``scale_std`` picks σ or
    σ²."""
    from stddial_book.theory.identity import std_from_pass_rate
    from stddial_book.theory.recipes import get_recipe, group_advantages

    chosen = get_recipe(recipe)
    power = 1 if chosen.scale_std else 2

    max_group_size = check_int(max_group_size, "max_group_size", minimum=2)
    dims = check_int(dims, "dims", minimum=1)
    if max_group_size > 512 or dims > 1000:
        raise ValueError(
            f"max_group_size={max_group_size} and dims={dims} must stay at most 512 and 1000 (every k of "
            "every G is checked: the work grows as G²); the paper's check is G ≤ 64."
        )
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    worst = 0.0
    for G in range(2, max_group_size + 1):
        for k in range(1, G):
            scores = rng.normal(size=(G, dims))
            rewards = np.r_[np.ones(k), np.zeros(G - k)] + rng.normal()  # any baseline shift
            sigma = float(std_from_pass_rate(k / G))
            advantages = group_advantages(rewards, G, chosen)  # the advantages the trainer uses
            lhs = (advantages[:, None] * scores).mean(axis=0)
            rhs = sigma**power * (scores[:k].mean(axis=0) - scores[k:].mean(axis=0))
            worst = max(worst, float(np.max(np.abs(lhs - rhs)) / np.max(np.abs(rhs))))
    return worst


def rloo_max_error(max_group_size: int = 64, seed: int = 0) -> float:
    """Largest |(Rᵢ − μ) − (G − 1)/G (Rᵢ − bᵢ)| over random real rewards, G ≤ 64 (Prop. 1).
    ``max_group_size`` is the largest G checked (2 to 10,000, default 64; eight groups at each G);
    ``seed`` seeds the rewards (whole number ≥ 0, default 0)."""
    from stddial_book.theory.identity import rloo_advantages

    max_group_size = check_int(max_group_size, "max_group_size", minimum=2)
    if max_group_size > 10_000:
        raise ValueError(f"max_group_size={max_group_size} must stay at most 10000 (the paper's check is G ≤ 64).")
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    worst = 0.0
    for G in range(2, max_group_size + 1):
        r = rng.normal(size=(8, G))
        gap = (r - r.mean(axis=1, keepdims=True)) - (G - 1) / G * rloo_advantages(r)
        worst = max(worst, float(np.max(np.abs(gap))))
    return worst


def _group_size_rows() -> list[Row]:
    from stddial_book.theory.group_size import group_size_law, minimal_group_size

    table = {
        0.5: [(7, 5), (11, 10), (51, 50)],
        0.3: [(9, 6), (14, 12), (61, 60)],
        0.1: [(22, 14), (36, 28), (144, 139)],
        0.05: [(42, 26), (69, 53), (273, 263)],
    }
    rows = []
    for p, cells in table.items():
        for eps, (exact, law) in zip((0.1, 0.05, 0.01), cells):
            label = f"p = {p:g}, fidelity {100 * (1 - eps):.0f}%"
            rows.append(Row("§4, group-size table", f"exact G, {label}", exact, minimal_group_size(eps, p), 0))
            real = float(group_size_law(eps, p))
            ceiling = math.ceil(real)
            note = (
                f"the ceiling, as the paper's diagnostic code rounds G*, gives {ceiling}"
                if ceiling != round(real)
                else ""
            )
            rows.append(Row("§4, group-size table", f"G* = 1/(8εp(1−p)), {label}", law, real, 0, note=note))
    return rows


def controlled_run_rows(study: dict[str, np.ndarray], pool=None, config=None) -> list[Row]:
    """The §8 rows from :func:`stddial_book.experiments.controlled.study.controlled_run_study`, in the
    paper's order, then the book's corrections. ``pool`` is the (solve_rates, counts) the study drew
    from (default: Big-Math), ``config`` its :class:`ControlledRun` (default: the paper's). ``study``
    is what ``controlled_run_study`` returns (at least 2 seeds).

    A random result's tolerance is the SD of one run at the paper's size (6,000 prompts): the SD
    over the study's seeds, or, for the first step's shares, the exact SD of one draw."""
    from stddial_book.experiments.controlled.bernoulli import ControlledRun
    from stddial_book.experiments.reproduction.checks import (
        controlled_share_rows,
        correction_rows,
        figure_b_row,
        ranking_rows,
    )

    _check_study(study)
    if pool is None:
        from stddial_book.corpora.bigmath_figure import load_big_math_histogram

        hist = load_big_math_histogram()
        pool = (hist.solve_rates, hist.counts)
    config = ControlledRun() if config is None else config
    n = len(study["matched_lr"])

    def row(quantity: str, paper: float, values: np.ndarray, decimals: int) -> Row:
        values = np.asarray(values, dtype=np.float64)
        spread = float(values.std(ddof=1))
        return Row(
            "§8, controlled run",
            f"{quantity} ({n} seeds)",
            paper,
            float(values.mean()),
            decimals,
            note="± is the SD over seeds, each a run of the paper's size",
            spread=spread,
        )

    return [
        row("silent fraction vs closed form, R² (GRPO)", 0.999, study["silent_r2/grpo"], 3),
        *controlled_share_rows(*pool, study, config),
        figure_b_row(*pool, study, config),
        row("hardest quartile's mean solve rate after 150 steps, GRPO", 0.99, study["quartile/grpo"][:, -1], 2),
        row("hardest quartile's mean solve rate after 150 steps, Dr. GRPO", 0.88, study["quartile/dr_grpo"][:, -1], 2),
        *ranking_rows(study),
        row("DAPO groups drawn per prompt and step", 3.5, study["dapo_oversampling"], 1),
        *correction_rows(*pool, study, config),
    ]


def _check_study(study: dict[str, np.ndarray]) -> None:
    needed = (
        "matched_lr",
        "silent_r2/grpo",
        "extreme_share/grpo",
        "extreme_share/dr_grpo",
        "decile_share/grpo",
        "decile_share_closed/dr_grpo",
        "quartile/grpo",
        "quartile/dr_grpo",
        "quartile/dr_grpo_matched",
        "quartile/dapo",
        "dapo_oversampling",
    )
    if not isinstance(study, dict) or any(key not in study for key in needed):
        raise ValueError(
            "study must be what stddial_book.experiments.controlled.study.controlled_run_study returns (it needs "
            f"{', '.join(needed)})."
        )
    if len(study["matched_lr"]) < 2:
        raise ValueError("the study needs at least 2 seeds for the spread over seeds.")


def reproduction_rows(dapo_bootstrap: int = 1000, controlled_run: list[Row] | None = None) -> list[Row]:
    """All rows, in the paper's order. ``controlled_run`` appends the §8 rows and the book's
    corrections (:func:`controlled_run_rows`, chapter 8; default None: none). ``dapo_bootstrap`` is
    the number of pairs-bootstrap resamples behind §5's bootstrap R² rows (default 1000)."""
    if controlled_run is not None and (
        not isinstance(controlled_run, (list, tuple)) or not all(isinstance(r, Row) for r in controlled_run)
    ):
        raise TypeError("controlled_run must be None or a list of Row (what controlled_run_rows returns).")
    from stddial_book.experiments.reproduction.checks import penalty_rows

    penalty = penalty_rows()
    rows = _exact_rows() + _fidelity_rows()
    rows += penalty[:3] + _group_size_rows() + _fidelity_rows_4() + penalty[3:]
    rows += _dapo_rows(dapo_bootstrap) + _weight_rows() + _big_math_rows()
    return rows + list(controlled_run or [])


def _exact_rows() -> list[Row]:
    """§2's RLOO proposition and Table 1's Dr. GRPO update σ²Δs, §3's identity: all exact, so the
    paper's value is 0."""
    exact = "exact: float64 rounding only"
    return [
        Row(
            "§2, RLOO proposition",
            "group-mean centring = (G−1)/G · RLOO: largest error, G ≤ 64",
            0.0,
            rloo_max_error(),
            10,
            note=exact,
        ),
        Row(
            "§2, Table 1",
            "Dr. GRPO's update (1/G)Σ(Rᵢ − μ)gᵢ = σ²(ḡ₊ − ḡ₋): largest relative error, all k, G ≤ 64",
            0.0,
            identity_max_error(recipe="dr_grpo"),
            10,
            note=exact,
        ),
        Row(
            "§3, the identity",
            "identity (1/G)ΣAᵢgᵢ = σ(ḡ₊ − ḡ₋): largest relative error, all k, G ≤ 64",
            0.0,
            identity_max_error(),
            10,
            note=exact + "; GRPO's row of Table 1",
        ),
    ]


def _fidelity_rows() -> list[Row]:
    """§3's attenuation corollary: the fidelity φ(G, p) = E[σ̂]/σ as the exact sum and its
    second-order form 1 − 1/(8Gp(1 − p)) at G = 8, p = 0.05."""
    from stddial_book.theory.group_size import attenuated_fidelity, gradient_fidelity

    return [
        Row("§3, attenuation corollary", "fidelity φ(8, 0.05), exact sum", 0.54, float(gradient_fidelity(0.05, 8)), 2),
        Row(
            "§3, attenuation corollary",
            "fidelity 1 − 1/(8Gp(1−p)) at G = 8, p = 0.05",
            0.67,
            float(attenuated_fidelity(0.05, 8)),
            2,
        ),
    ]


def _fidelity_rows_4() -> list[Row]:
    """§4's prose after its table: φ(8, ½) and the exact G for 95% fidelity at p = 0.05."""
    from stddial_book.theory.group_size import gradient_fidelity, minimal_group_size

    return [
        Row("§4", "fidelity φ(8, 0.5)", 0.93, float(gradient_fidelity(0.5, 8)), 2),
        Row("§4", "exact G for 95% fidelity at p = 0.05", 69, minimal_group_size(0.05, 0.05), 0),
    ]


def _weight_rows() -> list[Row]:
    """§6's difficulty weight w(p) = 1/√(p(1 − p))."""
    from stddial_book.theory.group_size import difficulty_weight

    return [
        Row("§6", "difficulty weight w(1/2)", 2.0, float(difficulty_weight(0.5)), 1),
        Row("§6", "difficulty weight w(0.05)", 4.6, float(difficulty_weight(0.05)), 1),
    ]


#: §7's quantities of :func:`stddial_book.corpora.bigmath_figure.check_against_paper` other than the
#: silent-group table: quantity -> (section, label, unit).
_BIG_MATH_NAMES = {
    "num_problems": ("§7", "Big-Math problems N", ""),
    "never_solved_pct": ("§7", "never solved (k = 0)", "%"),
    "always_solved_pct": ("§7", "always solved (k = 64)", "%"),
    "irreducible_silent_pct": ("§7", "silent at every G", "%"),
    "extreme_mass_dr_grpo_pct": ("§7, gradient-budget table", "Dr. GRPO budget on extreme prompts", "%"),
    "extreme_mass_grpo_pct": ("§7, gradient-budget table", "GRPO budget on extreme prompts", "%"),
    "medium_mass_dr_grpo_pct": ("§7, gradient-budget table", "Dr. GRPO budget on medium prompts", "%"),
    "medium_mass_grpo_pct": ("§7, gradient-budget table", "GRPO budget on medium prompts", "%"),
}


#: What every §7 row checks: the histogram was read from the paper's own figure.
DIGITISED = "counts digitised from the paper's own figure: a check of its arithmetic, not an independent measurement"


def _big_math_label(quantity: str) -> tuple[str, str, str]:
    """(section, label, unit) of one §7 quantity; a silent-group entry names its G and whether it
    is the closed form or the subsampled count."""
    if quantity in _BIG_MATH_NAMES:
        return _BIG_MATH_NAMES[quantity]
    size = quantity.split("_G")[1].split("_")[0]
    how = "closed form" if quantity.startswith("silent_bernoulli") else "subsampled"
    return "§7, silent-group table", f"silent at G = {size}, {how}", "%"


def _big_math_rows() -> list[Row]:
    """§7's Big-Math tables, from the committed histogram (:func:`check_against_paper`)."""
    from stddial_book.corpora.bigmath_figure import PUBLISHED, check_against_paper, load_big_math_histogram
    from stddial_book.experiments.reproduction.checks import big_math_claim_rows

    rows, book = [], {}
    for row in check_against_paper(load_big_math_histogram().counts):
        q = str(row["quantity"])
        book[q] = float(row["book"])
        section, label, unit = _big_math_label(q)
        rows.append(Row(section, label, float(row["paper"]), book[q], PUBLISHED[q][1], unit, note=DIGITISED))
    return rows + [replace(r, note="; ".join(filter(None, (r.note, DIGITISED)))) for r in big_math_claim_rows(book)]


def _dapo_rows(bootstrap: int) -> list[Row]:
    """§5: E[p³²] of Big-Math against DAPO's logged all-correct fraction (Fig. 3b), its R² and the
    pairs bootstrap's 10th and 90th percentiles over ``bootstrap`` resamples."""
    from stddial_book.corpora.bigmath_figure import load_big_math_histogram
    from stddial_book.corpora.dapo_fig3b import fit_consistency, load_dapo_fig3b

    hist = load_big_math_histogram()
    steps, logged = load_dapo_fig3b()
    fit = fit_consistency(hist.solve_rates, hist.counts, steps, logged, bootstrap=bootstrap)
    low, high = np.percentile(fit.bootstrap_r2, [10, 90])
    return [
        Row("§5", "DAPO Fig. 3b: R² of E[p³²], one free timescale", 0.92, fit.r2, 2),
        Row("§5", "DAPO Fig. 3b: R² of a generic two-parameter curve", 0.98, fit.generic_r2, 2),
        Row(
            "§5",
            "DAPO Fig. 3b: bootstrap R², lower end",
            0.91,
            float(low),
            2,
            note="pairs bootstrap over the 60 points, 10th percentile",
        ),
        Row(
            "§5",
            "DAPO Fig. 3b: bootstrap R², upper end",
            0.96,
            float(high),
            2,
            expected_to_differ=True,
            note="pairs bootstrap, 90th percentile; the paper does not say how its bootstrap was drawn",
        ),
    ]


def _shown(value: float, decimals: int, unit: str) -> str:
    if decimals >= 6:
        return f"{value:.1e}"
    if decimals == 0 and float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.{decimals}f}" + ("%" if unit == "%" else "")


def rows_table(rows: list[Row]):
    """The rows as a Markdown table (:func:`stddial_book.core.markdown.table`): where, quantity, the
    paper's value, the book's (one more decimal, ± the SD of a random result), verdict, notes.
    ``rows`` is a non-empty list of :class:`Row` (what :func:`reproduction_rows` returns)."""
    from stddial_book.core.markdown import table

    if isinstance(rows, (str, bytes)) or not isinstance(rows, (list, tuple)) or not rows:
        raise ValueError("rows must be a non-empty list of Row (what reproduction_rows returns).")
    wrong = next((r for r in rows if not isinstance(r, Row)), None)
    if wrong is not None:
        raise TypeError(f"rows must hold Row objects (what reproduction_rows returns); found {type(wrong).__name__}.")
    body = []
    for r in rows:
        more = r.decimals if r.decimals >= 6 else r.decimals + 1
        book = _shown(r.book, more if not float(r.book).is_integer() or r.decimals else 0, r.unit)
        if r.spread > 0:
            book += f" ± {r.spread:.2g}" + ("%" if r.unit == "%" else "")
        paper = "0 (exact)" if r.decimals >= 6 else _shown(r.paper, r.decimals, r.unit)
        if r.bound:
            paper = "≤ " + paper
        verdict = {"no": "**no**"}.get(r.verdict, r.verdict)
        body.append([r.section, r.quantity, paper, book, verdict, r.notes])
    return table(["where", "quantity", "paper", "book", "agrees", "notes"], body)
