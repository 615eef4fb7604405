"""Comparing recipes over seeds: summaries, Welch's test, screens, verdicts and the seeds a difference needs (chapter 13;
the studies share them). What chapter 13 reads from the testbed's runs to compare is
:mod:`stddial_book.experiments.testbed.comparison`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from stddial_book.core.checks import check_int, check_number, to_numpy, unit_scale

__all__ = [
    "seed_summary",
    "comparison_screen",
    "welch",
    "t_threshold",
    "welch_intervals",
    "bootstrap_difference",
    "hard_quartile_screen",
    "comparison_verdicts",
    "seed_projection",
]


def seed_summary(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error of the mean across seeds (0 error for a single seed).

    ``values`` is one number per seed (a non-empty 1-D sequence or array)."""
    if isinstance(values, (list, tuple)) and not values:
        raise ValueError("no values to summarise.")
    arr = to_numpy(values, "values", allow_empty=True)
    if arr.size == 0:
        raise ValueError("no values to summarise.")
    if arr.ndim > 1:
        raise ValueError(f"values must be one number per seed (1-D); got shape {arr.shape}.")
    unit, exponent, _ = unit_scale(arr.reshape(-1), axis=0)  # exact; no overflow in the squares
    sem = np.ldexp(unit.std(ddof=1), exponent[0]) / math.sqrt(arr.size) if arr.size > 1 else 0.0
    return float(np.ldexp(unit.mean(), exponent[0])), float(sem)


def _signed(value: float, digits: int = 3) -> str:
    """``value`` with its sign at ``digits`` decimals, and no sign where it rounds to zero
    (``-0.0002`` shows as ``0.000``, not ``-0.000``)."""
    text = f"{value:+.{digits}f}"
    return f"{0.0:.{digits}f}" if float(text) == 0 else text


def _how_many(count: int, total: int | None, noun: str, singular: str, plural: str) -> str:
    """How many of ``total`` things do something, as a person says it: "none of the 12 comparisons
    exceeds", "one of the 12 comparisons exceeds", "3 of the 12 comparisons exceed", "all 12
    comparisons exceed"; of a single one, "no comparison exceeds" or "the one comparison exceeds";
    without a ``total``, "none of the comparisons exceeds", .... ``noun`` is singular; the verb
    agrees."""
    if total == 1:
        return f"{'the one' if count else 'no'} {noun} {singular}"
    of = f"of the {total} {noun}s" if total is not None else f"of the {noun}s"
    if count == 0:
        return f"none {of} {singular}"
    if count == 1:
        return f"one {of} {singular}"
    if total is not None and count == total:
        return f"all {total} {noun}s {plural}"
    return f"{count} {of} {plural}"


def _screen_sentence(passed: list[str]) -> str:
    """:func:`comparison_screen`'s outcome in words, to follow "the threshold is z*": which
    comparisons exceed it and that the others are within the noise."""
    if not passed:
        return "None of them exceeds it: every difference is within the noise"
    which = "; ".join(passed)
    head = "One exceeds it" if len(passed) == 1 else f"{len(passed)} exceed it"
    return f"{head} ({which}); every other difference is within the noise"


def comparison_screen(values: dict[str, dict[str, Sequence[float]]], level: float = 0.05) -> dict[str, Any]:
    """Every pair of recipes compared on every metric by Welch's test (Student t with Welch's
    degrees of freedom, :func:`welch`), each judged at the Bonferroni level ``level``/m for a
    two-sided family-wise ``level`` over the m comparisons made (chapter 13).

    ``values`` maps a metric label to {recipe name: one value per seed}. A comparison passes when its
    p is below ``p_star`` = ``level``/m, that is when |t| exceeds t* = t_{1 − level/(2m)} at its own
    Welch degrees of freedom (so the threshold in standard errors differs between comparisons).
    Returns ``header`` and ``rows`` for :func:`stddial_book.core.markdown.table` (cells "difference ±
    se", a * where it passes), ``passed`` (labels of the comparisons that pass), ``passed_details``
    (for each of them the metric, the recipes ``a`` and ``b`` and :func:`welch`'s result for a − b)
    and ``summary`` (``tests``, ``passed``, ``passed_names``, ``p_star``, ``t_star_low`` and
    ``t_star_high``, the smallest and largest threshold t* over the testable comparisons, ``level``,
    ``not_testable``: the comparisons with a single seed on either side, whose cells say "not testable
    with one seed" and which never pass; and for the prose, in words, ``passed_count``, "none of the
    12 comparisons exceeds", and ``passed_sentence``, which pass and that the rest are within the
    noise).
    """
    from itertools import combinations

    recipes, level = _screened_recipes(values, level)
    pairs = list(combinations(recipes, 2))
    tests = len(values) * len(pairs)
    if tests == 0:
        raise ValueError("need at least two recipes to compare.")
    p_star = level / tests
    rows, passed, details, untestable, thresholds = [], [], [], 0, []
    for label, per_recipe in values.items():
        row = [label]
        for a, b in pairs:
            result = _welch_or_untestable(per_recipe[a], per_recipe[b])
            beyond = bool(result["p"] < p_star)  # False for NaN: one seed decides nothing
            if math.isnan(result["t"]):
                untestable += 1
                row.append(f"{_signed(result['difference'])} ({NOT_TESTABLE})")
            else:
                thresholds.append(t_threshold(p_star, result["df"]))
                row.append(f"{_signed(result['difference'])} ± {result['se']:.3f}{' *' if beyond else ''}")
            if beyond:
                passed.append(f"{label}, {a} − {b}")
                details.append({"metric": label, "a": a, "b": b, **result})
        rows.append(row)
    finite = [t for t in thresholds if math.isfinite(t)] or [math.nan]
    return {
        "header": ["final value"] + [f"{a} − {b}" for a, b in pairs],
        "rows": rows,
        "passed": passed,
        "passed_details": details,
        "summary": {
            **_screen_summary(passed, tests),
            "p_star": p_star,
            "t_star_low": min(finite),
            "t_star_high": max(finite),
            "level": level,
            "not_testable": untestable,
        },
    }


def _screen_summary(passed: list[str], tests: int) -> dict[str, Any]:
    """:func:`comparison_screen`'s counts, and in words."""
    return {
        "tests": tests,
        "passed": len(passed),
        "passed_names": "; ".join(passed) or "none",
        "passed_count": _how_many(len(passed), tests, "comparison", "exceeds", "exceed"),
        "passed_sentence": _screen_sentence(passed),
    }


def t_threshold(p: float, df: float) -> float:
    """The two-sided threshold of Student's t at level ``p`` and ``df`` degrees of freedom,
    t_{1 − p/2, df} (:data:`scipy.stats.t`); NaN where ``df`` is undefined (no noise)."""
    from scipy import stats

    return float(stats.t.isf(p / 2, df)) if math.isfinite(df) and df > 0 else math.nan


def _screened_recipes(values: dict[str, dict[str, Sequence[float]]], level: float) -> tuple[list[str], float]:
    """The recipes every metric of ``values`` compares, and ``level`` checked: :func:`comparison_screen`'s
    input refused unless it is a non-empty dict metric -> {recipe: per-seed values} with the same
    recipes for every metric and a level strictly between 0 and 1."""
    if not isinstance(values, dict):
        raise TypeError(f"values must be a dict metric -> {{recipe: per-seed values}}; got {type(values).__name__}.")
    if not values:
        raise ValueError("values is empty; pass at least one metric.")
    level = check_number(level, "level")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level is a family-wise error rate and must lie strictly between 0 and 1; got {level}.")
    recipes = list(next(iter(values.values())))
    for label, per_recipe in values.items():
        if not isinstance(per_recipe, dict) or set(per_recipe) != set(recipes):
            raise ValueError(
                f"every metric must give values for the same recipes {recipes}; {label!r} gives "
                f"{sorted(per_recipe) if isinstance(per_recipe, dict) else type(per_recipe).__name__}."
            )
    return recipes, level


def welch(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Welch's test of mean(a) − mean(b), the formula chapter 13 teaches (tested against
    :func:`scipy.stats.ttest_ind` with ``equal_var=False``).

    se = sqrt(s_a²/n_a + s_b²/n_b) (sample variances, ddof 1), t = difference / se, Welch's
    degrees of freedom ν = se⁴ / ((s_a²/n_a)²/(n_a − 1) + (s_b²/n_b)²/(n_b − 1)), and the two-sided
    p = 2 · P(T_ν > |t|) from :data:`scipy.stats.t`. Returns ``difference``, ``se``, ``t``, ``df``
    and ``p``.

    With no noise (se = 0) t is ±inf for a difference (p = 0) and 0 for none (p = 1), and df is
    NaN. With fewer than two values on either side the noise cannot be measured (a single seed's
    standard error is unknown, not 0): ``ValueError``, not testable with one seed. ``a`` and ``b`` are
    the two sides' values, one number per seed (1-D; the sides may hold different numbers of seeds).
    """
    from scipy import stats

    ma, sa = seed_summary(a)
    mb, sb = seed_summary(b)
    na, nb = _count(a), _count(b)
    if min(na, nb) < 2:
        raise ValueError(
            f"a difference is {NOT_TESTABLE}: welch needs at least two values (seeds) on each side to "
            f"measure their noise; got {na} and {nb}. Run more seeds."
        )
    se = math.sqrt(sa**2 + sb**2) if max(sa, sb) < 1e150 else math.hypot(sa, sb)  # no overflow in the squares
    diff = ma - mb
    if not (math.isfinite(diff) and math.isfinite(se)):
        raise ValueError(f"the difference of means {ma:g} − {mb:g} overflows float64; rescale the values.")
    if se == 0:
        t = float("inf") * np.sign(diff) if diff != 0 else 0.0
        return {"difference": diff, "se": se, "t": float(t), "df": math.nan, "p": 0.0 if diff != 0 else 1.0}
    share_a, share_b = (sa / se) ** 2, (sb / se) ** 2  # each side's part of se², scale-free
    df = 1.0 / (share_a**2 / (na - 1) + share_b**2 / (nb - 1))
    t = diff / se
    return {"difference": diff, "se": se, "t": t, "df": df, "p": float(2 * stats.t.sf(abs(t), df))}


def welch_intervals(result: dict[str, float], levels: Sequence[float]) -> list[list[float]]:
    """Student-t intervals of a :func:`welch` difference, one per confidence level q in ``levels``:
    difference ± t_{(1 + q)/2, ν} · se with Welch's degrees of freedom ν (:data:`scipy.stats.t`);
    the difference itself where there is no noise. ``result`` is the dict :func:`welch` returned;
    each q lies in (0, 1); each interval is ``[low, high]``."""
    from scipy import stats

    diff, se, df = result["difference"], result["se"], result["df"]
    if se == 0:
        return [[diff, diff] for _ in levels]
    half = [float(stats.t.isf((1 - q) / 2, df)) * se for q in levels]
    return [[diff - h, diff + h] for h in half]


def bootstrap_difference(
    a: Sequence[float], b: Sequence[float], levels: Sequence[float], draws: int, seed: int
) -> list[list[float]]:
    """Percentile bootstrap intervals of mean(a) − mean(b), each side's seeds resampled on their own
    (:func:`scipy.stats.bootstrap`, unpaired, ``draws`` resamples from ``seed``), one per confidence
    level in ``levels`` (the same resamples for each). ``a`` and ``b`` are the two sides' values, one
    number per seed; each interval is ``[low, high]``, a single point when neither side varies."""
    from scipy import stats

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if np.ptp(x) == 0 and np.ptp(y) == 0:  # no spread: every resample gives the same difference
        return [[float(x.mean() - y.mean())] * 2 for _ in levels]

    def difference(u: np.ndarray, v: np.ndarray, axis: int = -1) -> np.ndarray:
        return u.mean(axis=axis) - v.mean(axis=axis)

    out = []
    for q in levels:
        res = stats.bootstrap(
            (x, y),
            difference,
            vectorized=True,
            paired=False,
            n_resamples=draws,
            confidence_level=q,
            method="percentile",
            random_state=np.random.default_rng(seed),
        )
        out.append([float(res.confidence_interval.low), float(res.confidence_interval.high)])
    return out


def _welch_or_untestable(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """:func:`welch`, or the difference of the means with the rest NaN where a side has one seed."""
    if min(_count(a), _count(b)) < 2:
        nan = float("nan")
        return {"difference": seed_summary(a)[0] - seed_summary(b)[0], "se": nan, "t": nan, "df": nan, "p": nan}
    return welch(a, b)


def _count(values: Sequence[float]) -> int:
    """How many values (seeds) ``values`` holds; it has passed :func:`seed_summary`'s checks."""
    return int(to_numpy(values, "values").size)


#: What a comparison shows when a recipe has a single seed: its noise cannot be measured.
NOT_TESTABLE = "not testable with one seed"


def hard_quartile_screen(study: dict[str, Any], reference: str = "grpo", level: float = 0.05) -> dict[str, Any]:
    """``reference`` against every other recipe of a :func:`pool_study` on the hardest quartile's
    final mean solve rate, by Welch's test (:func:`welch`: Student t with Welch's degrees of
    freedom), each judged at the Bonferroni level ``level``/m over the m comparisons (chapter 13).
    Returns ``summary`` (for ``glue_all``: ``diff_<key>``, ``se_<key>``, ``t_<key>``, ``df_<key>``
    and ``p_<key>`` of reference − key, the number of ``tests``, the family-wise ``level``,
    ``p_star`` = level/m, and ``not_testable``, the comparisons with a single seed on either side,
    whose t and p are NaN and which never pass) and ``passed``, the labels of the comparisons whose p
    is below ``p_star``. ``study`` is :func:`~stddial_book.experiments.testbed.predictions.pool_study`'s
    dict (recipe key -> its entry), whose ``final`` holds per seed the last measurement's mean solve rate
    per band, band 0 the hardest quartile; it must hold ``reference`` and at least one other recipe."""
    from stddial_book.theory.recipes import get_recipe

    level = check_number(level, "level")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level is a family-wise error rate and must lie strictly between 0 and 1; got {level}.")
    if not isinstance(study, dict) or not isinstance(reference, str) or reference not in study or len(study) < 2:
        raise ValueError(f"study must hold {' '.join(repr(reference).split())[:40]} and at least one other recipe.")
    final = {key: [float(f[0]) for f in study[key]["final"]] for key in study}
    others = [key for key in study if key != reference]
    summary: dict[str, float] = {"tests": len(others), "level": level, "p_star": level / len(others)}
    passed = []
    summary["not_testable"] = 0
    for key in others:
        res = _welch_or_untestable(final[reference], final[key])
        summary.update({f"{name}_{key}": res[name] for name in ("se", "t", "df", "p")})
        summary[f"diff_{key}"] = res["difference"]
        summary["not_testable"] += math.isnan(res["t"])  # a single seed: no noise to compare with
        if res["p"] < summary["p_star"]:
            passed.append(f"{get_recipe(reference).name} − {get_recipe(key).name}")
    return {"summary": summary, "passed": passed}


def comparison_verdicts(live: dict[str, Any], recorded: dict[str, Any]) -> dict[str, Any]:
    """Chapter 13's verdicts over its two families of comparisons: ``live`` is what
    :func:`comparison_screen` returns for the live runs, ``recorded`` what
    :func:`hard_quartile_screen` returns for the recorded ones. Returns ``verdict`` and
    ``verdict_summary`` (the recorded screen, in words), ``bottom_line`` (both), and the
    accounting over both families: ``total_tests`` and ``total_level``, the sum of the two
    family-wise levels, which bounds the chance that any comparison of the chapter passes by
    luck (Bonferroni: the chance of a union is at most the sum of the chances)."""
    for name, screen in (("live", live), ("recorded", recorded)):
        if not isinstance(screen, dict) or "passed" not in screen or "summary" not in screen:
            raise ValueError(f"{name} must be what comparison_screen / hard_quartile_screen returns.")
    live_passed, recorded_passed = list(live["passed"]), list(recorded["passed"])
    beyond = "; ".join(recorded_passed)
    return {
        "verdict": (
            "Neither difference exceeds that screen." if not recorded_passed else f"Beyond the screen: {beyond}."
        ),
        "verdict_summary": (
            "No difference between the recipes in the hardest quartile exceeds the seed noise there."
            if not recorded_passed
            else f"In the hardest quartile, {beyond} exceeds the seed noise."
        ),
        "bottom_line": (
            "The std dial decides where the update goes as its closed forms say, live and in the "
            "recorded runs; "
            + (
                "at these budgets no recipe learns measurably more than another, overall or on the hardest prompts."
                if not live_passed and not recorded_passed
                else "beyond the seed noise: " + "; ".join(recorded_passed + live_passed) + "."
            )
        ),
        "total_tests": int(live["summary"]["tests"] + recorded["summary"]["tests"]),
        "total_level": float(live["summary"]["level"] + recorded["summary"]["level"]),
    }


def seed_projection(values: dict[str, dict[str, Sequence[float]]], seeds: int, level: float = 0.05) -> dict[str, Any]:
    """What :func:`comparison_screen` could see with ``seeds`` seeds per recipe, if every recipe's
    mean and seed-to-seed SD stayed as measured (chapter 13's exercise).

    The standard error of a difference, sqrt(s_a² / n + s_b² / n), shrinks as 1/sqrt(n), so t grows
    as sqrt(n); the screen's threshold t* (Bonferroni level p* = ``level``/m, Student t) falls as
    Welch's degrees of freedom, (s_a² + s_b²)² (n − 1) / (s_a⁴ + s_b⁴) at n seeds each, grow. Per
    comparison: ``t`` now, ``t_new`` and the threshold ``t_star`` with ``seeds`` seeds, ``needed``,
    the fewest seeds per recipe for |t| to exceed t*, and ``chance``, the probability of passing with
    ``seeds`` seeds if the measured difference were the true one (the noncentral t,
    :data:`scipy.stats.nct`, with noncentrality t_new). Returns ``header`` and ``rows`` for
    :func:`stddial_book.core.markdown.table` and ``summary`` (``p_star``, ``t_star_now_low`` /
    ``t_star_now_high`` and ``t_star_low`` / ``t_star_high``, the thresholds' range over the
    comparisons now and with ``seeds`` seeds, ``seeds_now``, ``seeds``, ``se_factor`` =
    sqrt(seeds_now / seeds), ``passed_now``, ``projected``, the comparisons whose ``t_new`` passes,
    ``projected_names``, ``likely``, those with ``chance`` > 1/2, and ``fewest_needed``, over the
    comparisons not passed now; for the prose, in words, ``projected_sentence``, "none of the
    comparisons would pass with 6 seeds", and ``likely_count``).
    ``values`` is :func:`comparison_screen`'s input (metric label -> {recipe: one value per seed}, at least
    two seeds per recipe); ``seeds`` is an int >= 2; ``level`` the family-wise error rate in (0, 1)
    (default 0.05).
    """
    from itertools import combinations

    seeds = check_int(seeds, "seeds", minimum=2)
    p_star = comparison_screen(values, level)["summary"]["p_star"]
    found = [
        _projection_row(label, a, b, per_recipe, seeds, p_star)
        for label, per_recipe in values.items()
        for a, b in combinations(per_recipe, 2)
    ]
    projected = [f["name"] for f in found if f["projected"]]
    likely = sum(f["chance"] > 0.5 for f in found)
    needed_not_passed = [f["needed"] for f in found if not f["now"]]
    now_finite = [f["t_star_now"] for f in found if math.isfinite(f["t_star_now"])] or [math.nan]
    new_finite = [f["t_star"] for f in found if math.isfinite(f["t_star"])] or [math.nan]
    seeds_now = min(f["seeds_now"] for f in found)
    return {
        "header": _projection_header(seeds),
        "rows": [f["row"] for f in found],
        "summary": {
            "p_star": p_star,
            "t_star_now_low": min(now_finite),
            "t_star_now_high": max(now_finite),
            "t_star_low": min(new_finite),
            "t_star_high": max(new_finite),
            "seeds_now": seeds_now,
            "seeds": seeds,
            "se_factor": math.sqrt(seeds_now / seeds),
            "passed_now": sum(f["now"] for f in found),
            "projected": len(projected),
            "projected_names": "; ".join(projected) or "none",
            "projected_sentence": _how_many(len(projected), None, "comparison", "would", "would")
            + f" pass with {seeds} seeds"
            + (f" ({'; '.join(projected)})" if projected else ""),
            "likely": likely,
            "likely_count": "none" if likely == 0 else "one" if likely == 1 else f"{likely}",
            "fewest_needed": min(needed_not_passed) if needed_not_passed else math.inf,
        },
    }


def _projection_row(
    label: str, a: str, b: str, per_recipe: dict[str, Sequence[float]], seeds: int, p_star: float
) -> dict[str, Any]:
    """One comparison of :func:`seed_projection`: its table row and what the summary counts."""
    va, vb = (to_numpy(per_recipe[x], x) for x in (a, b))
    if va.size < 2 or vb.size < 2:
        raise ValueError("each recipe needs at least two seeds to measure its spread.")
    result = welch(va, vb)
    t_new, t_star, needed, chance = _projected(va, vb, seeds, p_star)
    shown_needed = "never" if not math.isfinite(needed) else f"{needed}"
    row = [label, f"{a} − {b}", f"{result['t']:+.1f}", f"{t_new:+.1f}", f"{t_star:.1f}", shown_needed, f"{chance:.0%}"]
    return {
        "name": f"{label}, {a} − {b}",
        "row": row,
        "now": bool(result["p"] < p_star),
        "projected": bool(abs(t_new) > t_star or (math.isinf(t_new) and t_new != 0)),
        "needed": needed,
        "chance": chance,
        "t_star_now": t_threshold(p_star, result["df"]),
        "t_star": t_star,
        "seeds_now": min(va.size, vb.size),
    }


def _at_seeds(diff: float, var_a: float, var_b: float, n: int, p_star: float) -> tuple[float, float, float]:
    """(t, Welch's degrees of freedom, the threshold t*) of a difference ``diff`` with seed variances
    ``var_a`` and ``var_b`` measured on ``n`` seeds each."""
    spread = var_a + var_b
    if spread == 0:
        return (math.inf * np.sign(diff) if diff != 0 else 0.0), math.nan, math.nan
    df = spread**2 * (n - 1) / (var_a**2 + var_b**2)
    return diff / math.sqrt(spread / n), df, t_threshold(p_star, df)


def _projected(va: np.ndarray, vb: np.ndarray, seeds: int, p_star: float) -> tuple[float, float, float, float]:
    """One comparison of :func:`seed_projection`: (t with ``seeds`` seeds, its threshold t*, the seeds
    per recipe |t| needs to exceed t* (inf for no difference), the chance of passing with ``seeds``
    seeds, P(|T| > t*) for T noncentral t with Welch's degrees of freedom and noncentrality t)."""
    from scipy import stats

    var_a, var_b = float(va.var(ddof=1)), float(vb.var(ddof=1))
    diff = float(va.mean() - vb.mean())
    t_new, df, t_star = _at_seeds(diff, var_a, var_b, seeds, p_star)
    if not math.isfinite(t_new):
        return t_new, t_star, 2, 1.0
    if diff == 0:
        return t_new, t_star, math.inf, float(2 * stats.t.sf(t_star, df))

    def passes(n: int) -> bool:  # |t| grows and t* falls with n: the first n that passes is found by bisection
        t, _, threshold = _at_seeds(diff, var_a, var_b, n, p_star)
        return abs(t) > threshold

    if passes(2):
        needed: float = 2
    else:
        low, high = 2, 4
        while not passes(high) and high < 2**40:
            low, high = high, 2 * high
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (low, mid) if passes(mid) else (mid, high)
        needed = high if passes(high) else math.inf
    shift = abs(t_new)
    chance = float(stats.nct.sf(t_star, df, shift) + stats.nct.cdf(-t_star, df, shift))
    return t_new, t_star, needed, chance


def _projection_header(seeds: int) -> list[str]:
    """The columns of :func:`seed_projection`'s table."""
    return [
        "final value",
        "comparison",
        "t now",
        f"t, {seeds} seeds",
        f"threshold t*, {seeds} seeds",
        "seeds to pass",
        f"chance to pass, {seeds} seeds",
    ]
