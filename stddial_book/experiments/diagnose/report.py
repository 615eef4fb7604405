"""A reader's prompt pool, diagnosed: how many groups fall silent at each G, what DAPO's refill costs, the group
size the law asks for, where the gradient mass sits, and what each allocation rule makes of a sample budget.

``diagnose(pool)`` returns one JSON-ready dict; :func:`diagnosis_text` prints it as a plain-text table;
``python -m stddial_book diagnose FILE`` does both for a file (:mod:`stddial_book.corpora.reader_pool` reads it).
Every number comes from the package's closed forms: :func:`stddial_book.corpora.histograms.silent_fraction`
(p = k/n, and G of the n stored samples drawn without replacement), :func:`~stddial_book.corpora.histograms.dapo_oversampling`,
:func:`~stddial_book.theory.group_size.group_size_law`, :func:`~stddial_book.corpora.histograms.decile_shares`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from typing import Any

import numpy as np

from stddial_book.core.checks import check_group_size, check_int, check_number, printable
from stddial_book.corpora.histograms import (
    KHistogram,
    dapo_oversampling,
    decile_of,
    decile_shares,
    gradient_budget,
    silent_fraction,
)
from stddial_book.corpora.reader_files import ReaderDataError
from stddial_book.corpora.reader_pool import ReaderPool, as_reader_pool, load_reader_pool
from stddial_book.experiments.diagnose.advice import recommendation, recommendation_lines
from stddial_book.theory.group_size import group_size_law, large_group_gradient
from stddial_book.theory.recipes import DR_GRPO, GRPO
from stddial_book.theory.silent import silent_probability

__all__ = [
    "DEFAULT_GROUP_SIZES",
    "DEFAULT_EPSILON",
    "DEFAULT_SAMPLES_PER_PROMPT",
    "PLAN_PROMPTS",
    "diagnose",
    "diagnose_source",
    "allocation_plans",
    "diagnosis_text",
    "DIAGNOSE_MAX_SAMPLES",
    "check_source",
    "load_pool",
]

DEFAULT_GROUP_SIZES = (2, 4, 8, 16, 32, 64)

#: The tolerance of the group-size law when none is stated: fidelity 1 − ε = 0.95.
DEFAULT_EPSILON = 0.05

#: Without a stated budget the plans share 8 samples per prompt (the book's usual G).
DEFAULT_SAMPLES_PER_PROMPT = 8

#: The most prompts an allocation plan is made for: a larger pool is planned on this many prompts drawn at
#: random, with the budget scaled to them (Knapsack RL's exact program costs prompts × budget memory and time).
PLAN_PROMPTS = 512

DECILE_LABELS = tuple(f"[{i / 10:.1f}, {(i + 1) / 10:.1f}{']' if i == 9 else ')'}" for i in range(10))


def diagnose(
    counts: Any,
    budget: int | None = None,
    group_sizes: Sequence[int] = DEFAULT_GROUP_SIZES,
    epsilon: float = DEFAULT_EPSILON,
    seed: int = 0,
) -> dict:
    """The diagnosis of a pool (a :class:`ReaderPool`, :class:`SolveCounts` or :class:`KHistogram`) as a JSON-ready dict.

    Keys: ``pool`` (size, n, solve-rate summary), ``limits`` (what the data cannot tell), ``silent_fraction`` and
    ``silent_fraction_subsampled`` (G as a string -> fraction; ``None`` where G exceeds the stored samples or n is
    unknown), ``dapo_draws_per_kept_group`` (1 / (1 − silent fraction), closed form; ``None`` where every group is
    silent), ``group_size_law`` (G* = 1/(8εp(1 − p)) at the median p and per decile of p, over the prompts with
    0 < p < 1), ``gradient_mass_by_decile`` (GRPO's and Dr. GRPO's large-group budget), ``allocation`` (each
    rule's plan for ``budget`` generated samples, default 8 per prompt, compared in generated samples; a pool of
    more than :data:`PLAN_PROMPTS` prompts is planned on that many drawn at random with ``seed``, the budget
    scaled to them), ``recommendation`` (:func:`stddial_book.experiments.diagnose.advice.recommendation`: what to
    prune, the G the law asks for, the silent fraction after pruning, how sure the pruning is) and ``warnings``
    (what the reader should check in the data, e.g. prompt ids that repeat in a per-prompt table).
    ``counts`` is the pool; ``group_sizes`` the G values tabulated (each at least 2; repeats dropped, sorted;
    default :data:`DEFAULT_GROUP_SIZES`); ``epsilon`` the group-size law's tolerance, strictly in (0, 1) (default
    :data:`DEFAULT_EPSILON`: fidelity 0.95); ``budget`` and ``seed`` (an int >= 0) as above.
    """
    pool = as_reader_pool(counts)
    sizes = sorted({check_group_size(g, "group_sizes") for g in _as_list(group_sizes)})
    eps = check_number(epsilon, "epsilon")
    if not 0.0 < eps < 1.0:
        raise ValueError(f"epsilon must lie strictly between 0 and 1 (fidelity 1 − ε); got {epsilon!r}. Try 0.05.")
    limits = list(pool.limits)
    closed, subsampled, draws = _silent_by_group_size(pool, sizes, limits)
    key = [str(g) for g in sizes]
    return {
        "pool": _pool_summary(pool),
        "limits": limits,
        "group_sizes": sizes,
        "silent_fraction": dict(zip(key, closed)),
        "silent_fraction_subsampled": dict(zip(key, subsampled)),
        "dapo_draws_per_kept_group": dict(zip(key, draws)),
        "group_size_law": _group_size_law(pool.solve_rates, eps, limits),
        "gradient_mass_by_decile": _gradient_mass(pool),
        "allocation": _allocation(pool.solve_rates, budget, seed),
        "recommendation": recommendation(pool, eps),
        "warnings": list(pool.warnings),
    }


def diagnose_source(
    source,
    correct: str = "correct",
    samples: str | int = "samples",
    pass_rate: str | None = None,
    config: str | None = None,
    *,
    rows: str = "auto",
    prompt: str | None = None,
    reward: str | None = None,
    **options,
) -> dict:
    """:func:`diagnose` of a file, folder or hub dataset, read by :func:`load_pool` (``source``, ``correct``,
    ``samples``, ``pass_rate``, ``config``, ``rows``, ``prompt``, ``reward``: see
    :func:`stddial_book.corpora.reader_pool.load_reader_pool`); ``options`` go to :func:`diagnose`."""
    pool = load_pool(source, correct, samples, pass_rate, config, rows=rows, prompt=prompt, reward=reward)
    return diagnose(pool, **options)


#: The most samples per prompt a table or ``--samples`` may state: more is a typo, not a measurement.
DIAGNOSE_MAX_SAMPLES = 10**12


def check_source(source: Any, samples: Any = "samples") -> None:
    """Refuse, before anything is read, a local source that is not a regular file (a FIFO named
    ``.csv`` would block the reader forever; a device, a socket) and a stated number of samples per
    prompt out of 1 to :data:`DIAGNOSE_MAX_SAMPLES`. ``source`` is what the reader will read (a path is
    checked if it exists; anything else passes); ``samples`` is the samples column's name or the number n
    (only a whole number is checked)."""
    if isinstance(source, (str, os.PathLike)) and not isinstance(os.fspath(source), bytes):
        path = os.path.expanduser(os.fspath(source))
        try:
            mode = os.stat(path).st_mode
        except (OSError, ValueError):
            mode = None  # missing (maybe a hub id): the reader says so
        if mode is not None and not stat.S_ISDIR(mode) and not stat.S_ISREG(mode):
            raise ReaderDataError(
                f"{printable(source)} is not a regular file (a pipe, device or socket) and was not read; "
                "pass a .csv, .parquet or .jsonl file (one row per prompt or per completion)."
            )
    text = str(samples).strip() if isinstance(samples, (str, int, np.integer)) and not isinstance(samples, bool) else ""
    if text.lstrip("+-").isdigit() and not 1 <= int(text) <= DIAGNOSE_MAX_SAMPLES:
        raise ReaderDataError(
            f"--samples {printable(text)[:40]}: n must be a whole number of samples per prompt from 1 to {DIAGNOSE_MAX_SAMPLES:,}."
        )


def load_pool(
    source: Any,
    correct: str = "correct",
    samples: str | int = "samples",
    pass_rate: str | None = None,
    config: str | None = None,
    *,
    rows: str = "auto",
    prompt: str | None = None,
    reward: str | None = None,
) -> ReaderPool:
    """:func:`stddial_book.corpora.reader_pool.load_reader_pool` (per-prompt tables, per-completion rows
    grouped per prompt, TRL's completion logs) after the checks it lacks: :func:`check_source` (a regular
    file, samples bounded), and at most :data:`DIAGNOSE_MAX_SAMPLES` samples per prompt. The arguments are
    :func:`~stddial_book.corpora.reader_pool.load_reader_pool`'s: ``source`` a .csv, .parquet or .jsonl file, a
    folder of .parquet files or a hub dataset id (``config``: its configuration); ``rows`` what one row is
    (``"prompts"``, ``"completions"`` or ``"auto"``); for per-prompt rows ``correct`` names the successes column
    and ``samples`` the samples column or one whole n for every prompt, or ``pass_rate`` names a column of p in
    [0, 1]; for per-completion rows ``reward`` names the 0/1 reward column; ``prompt`` names the column naming
    each prompt (default: the first known id column present)."""
    check_source(source, samples)
    pool = load_reader_pool(source, correct, samples, pass_rate, config, rows=rows, prompt=prompt, reward=reward)
    if pool.num_samples is not None and pool.num_samples.size and int(pool.num_samples.max()) > DIAGNOSE_MAX_SAMPLES:
        raise ReaderDataError(
            f"{printable(pool.name)}: a prompt states {int(pool.num_samples.max()):,} samples, more than "
            f"{DIAGNOSE_MAX_SAMPLES:,}; check the samples column."
        )
    return pool


def _as_list(group_sizes) -> list:
    if isinstance(group_sizes, (int, np.integer)) and not isinstance(group_sizes, bool):
        return [group_sizes]
    if not isinstance(group_sizes, (list, tuple, np.ndarray)) or len(group_sizes) == 0:
        raise ValueError(
            f"group_sizes must be a non-empty list of group sizes, e.g. (2, 4, 8); got {group_sizes!r:.40}."
        )
    return list(group_sizes)


def _pool_summary(pool: ReaderPool) -> dict:
    p = pool.solve_rates
    n = None
    if pool.num_samples is not None:
        low, high = int(pool.num_samples.min()), int(pool.num_samples.max())
        n = low if low == high else f"{low} to {high}"
    return {
        "name": pool.name,
        "input": pool.kind,
        "prompt_column": pool.id_column,
        "prompts": pool.num_prompts,
        "samples_per_prompt": n,
        "mean_p": float(p.mean()),
        "median_p": float(np.median(p)),
        "never_solved": float(np.mean(p == 0)),
        "always_solved": float(np.mean(p == 1)),
    }


def _silent_by_group_size(pool: ReaderPool, sizes: list[int], limits: list[str]):
    """The closed-form and subsampled silent fractions and DAPO's draws per kept group, one entry per G."""
    hists = pool.histograms() if pool.counts_known else {}
    if len(hists) == 1:
        (hist,) = hists.values()
        closed = silent_fraction(hist, sizes)
        draws = dapo_oversampling(hist, sizes)
    else:  # n varies (or is unknown): the same closed form, averaged prompt by prompt
        p = pool.solve_rates[:, None]
        closed = np.mean(silent_probability(p, np.asarray(sizes)[None, :]), axis=0)
        kept = 1.0 - closed
        draws = np.where(kept > 0, 1.0 / np.where(kept > 0, kept, 1.0), np.inf)
    subsampled: list[float | None] = [None] * len(sizes)
    if hists:
        smallest = min(hists)
        for i, g in enumerate(sizes):
            if g <= smallest:
                parts = [(h.num_prompts, silent_fraction(h, g, "hypergeometric")[0]) for h in hists.values()]
                subsampled[i] = (
                    float(parts[0][1]) if len(parts) == 1 else sum(w * v for w, v in parts) / pool.num_prompts
                )
        if sizes[-1] > smallest:
            limits.append(
                f"the subsampled silent fraction needs G <= n = {smallest} stored samples per prompt; it is left "
                f"out above G = {smallest}"
            )
    if any(not np.isfinite(d) for d in draws):
        limits.append("at some G every group is silent: DAPO's refill would never fill a batch (draws shown as none)")
    finite = [float(d) if np.isfinite(d) else None for d in draws]
    return [float(c) for c in closed], subsampled, finite


def _group_size_law(p: np.ndarray, eps: float, limits: list[str]) -> dict:
    """G* = 1/(8εp(1 − p)) at the median p of the learnable prompts (0 < p < 1) and at each decile's median p."""
    learnable = (p > 0) & (p < 1)
    out: dict[str, Any] = {"epsilon": eps, "learnable_prompts": int(learnable.sum()), "median_p": None, "G_star": None}
    if not learnable.any():
        limits.append(
            "no prompt has 0 < p < 1: every group is silent at every G, and the group-size law does not apply"
        )
    else:
        median = float(np.median(p[learnable]))
        out.update(median_p=median, G_star=float(group_size_law(eps, median)))
    deciles = decile_of(p)
    rows = []
    for d, label in enumerate(DECILE_LABELS):
        inside = p[learnable & (deciles == d)]
        mid = float(np.median(inside)) if inside.size else None
        rows.append(
            {
                "decile": label,
                "prompts": int(np.sum(deciles == d)),
                "median_p": mid,
                "G_star": None if mid is None else float(group_size_law(eps, mid)),
            }
        )
    out["by_decile"] = rows
    return out


def _gradient_mass(pool: ReaderPool) -> dict:
    """Each recipe's share of its large-group gradient budget in each tenth of p (sums to 1; GRPO's shares are DAPO's)."""
    hists = pool.histograms() if pool.counts_known else {}
    shares = {}
    for recipe in (GRPO, DR_GRPO):
        if len(hists) == 1:
            (hist,) = hists.values()
            values = decile_shares(hist, gradient_budget(hist, recipe)) if _has_mass(hist) else np.zeros(10)
        else:  # n varies or is unknown: the same shares, prompt by prompt
            mass = np.asarray(large_group_gradient(pool.solve_rates, recipe))
            total = mass.sum()
            values = np.bincount(decile_of(pool.solve_rates), weights=mass, minlength=10) / (total if total else 1.0)
        shares[recipe.name] = [float(v) for v in values]
    prompts = np.bincount(decile_of(pool.solve_rates), minlength=10) / pool.num_prompts
    return {"deciles": list(DECILE_LABELS), "prompts": [float(v) for v in prompts], **shares}


def _has_mass(hist: KHistogram) -> bool:
    return bool(np.sum(hist.counts[1:-1]) > 0)


#: Simulated steps averaged for a rule that samples in rounds (as ``plan_for_rates`` does).
ROUND_REPEATS = 64


def rule_settings(rule: str, budget: int) -> dict[str, Any]:
    """The settings each rule is planned with, so that every rule may spend the same budget: DAPO's
    refill keeps up to ``budget // 8`` groups of 8 (its default batch of 16 groups would stop after a
    few percent of a large budget); every other rule takes its defaults."""
    return {"batch_prompts": max(1, budget // DEFAULT_SAMPLES_PER_PROMPT)} if rule == "dapo" else {}


def allocation_plans(solve_rates: np.ndarray, budget: int, seed: int = 0) -> tuple[dict[str, Any], str]:
    """Each allocation rule's plan for ``budget`` generated samples, and where the rules came from.

    Every rule of ``stddial_book.rl.allocation.RULES``, with :func:`rule_settings`. A rule that plans
    ahead gives one group size per prompt (``plan_for_rates``); a rule that samples in rounds (DAPO,
    SPEED, Reinforce-Ada) gives a dict of what :data:`ROUND_REPEATS` simulated steps with Bernoulli
    rewards drew and kept, on average (``allocate``). A rule that refuses the pool is reported by its
    message instead of a plan. ``solve_rates`` is a 1-D array of the prompts' pass rates in [0, 1];
    ``seed`` seeds the random choices (every rule starts from the same seed).
    """
    import stddial_book.rl.allocation as allocation

    plans: dict[str, Any] = {}
    for rule in allocation.RULES:
        settings = rule_settings(rule, budget)
        try:
            plans[rule] = _round_rule(allocation, rule, settings, solve_rates, budget, seed)
            if plans[rule] is None:
                rng = np.random.default_rng(seed)
                plans[rule] = allocation.plan_for_rates(rule, solve_rates, budget, rng=rng, **settings)
        except (ValueError, TypeError) as err:
            plans[rule] = " ".join(str(err).split())
        except MemoryError:
            plans[rule] = f"not enough memory to plan {len(solve_rates)} prompts with {budget} samples"
    return plans, "stddial_book.rl.allocation: plan_for_rates (plans ahead), allocate (rules in rounds)"


def _round_rule(allocation, rule: str, settings: dict, p: np.ndarray, budget: int, seed: int) -> dict | None:
    """What a rule that samples in rounds generates and keeps per step, averaged over :data:`ROUND_REPEATS`
    simulated steps (``None`` for a rule that plans ahead)."""
    if not hasattr(allocation, "allocate"):
        return None
    made = allocation.RULES[rule](**settings)
    if hasattr(made, "plan"):
        return None
    from stddial_book.rl.pool_state import new_pool_state

    rng = np.random.default_rng(seed)
    draw = allocation.bernoulli_draw(p, rng)
    steps = [allocation.allocate(made, new_pool_state(p.size), budget, draw, rng) for _ in range(ROUND_REPEATS)]
    sizes = np.concatenate([step.group_sizes for step in steps])
    return {
        "generated": float(np.mean([step.generated for step in steps])),
        "groups": float(np.mean([step.group_sizes.size for step in steps])),
        "live_samples": float(np.mean([step.signal_samples for step in steps])),
        "group_sizes": sizes,
        "prompts_sampled": float(np.mean([np.unique(step.drawn_prompts).size for step in steps])),
    }


def _allocation(p: np.ndarray, budget: int | None, seed: int) -> dict:
    stated = budget is not None
    if budget is None:
        budget = DEFAULT_SAMPLES_PER_PROMPT * p.size
    budget = check_int(budget, "budget", minimum=1, hint="It is the total number of samples the plans share.")
    seed = check_int(seed, "seed", minimum=0)
    planned, plan_budget = p, budget
    if p.size > PLAN_PROMPTS:
        planned = p[np.sort(np.random.default_rng(seed).choice(p.size, PLAN_PROMPTS, replace=False))]
        plan_budget = max(1, round(budget * PLAN_PROMPTS / p.size))
    plans, origin = allocation_plans(planned, plan_budget, seed)
    note = "as stated" if stated else f"no budget stated: {DEFAULT_SAMPLES_PER_PROMPT} per prompt"
    return {
        "budget": budget,
        "unit": "generated samples (completions), screening and discarded groups included",
        "budget_note": note,
        "plan_prompts": int(planned.size),
        "plan_budget": plan_budget,
        "rules_from": origin,
        "settings": {rule: rule_settings(rule, plan_budget) for rule in plans},
        "plans": {rule: _plan_summary(planned, plan, plan_budget) for rule, plan in plans.items()},
    }


def _plan_summary(p: np.ndarray, plan: Any, budget: int) -> dict:
    """What a plan generates and how much of it lands in live groups (0 < k < G) that reach the update, both
    in generated samples: a plan ahead in expectation with p fixed, a rule in rounds averaged over its steps."""
    if isinstance(plan, str):
        return {"error": plan}
    if isinstance(plan, dict):
        sizes = plan["group_sizes"]
        return {
            "kind": f"samples in rounds (mean of {ROUND_REPEATS} simulated steps)",
            "samples": plan["generated"],
            "generated_share": plan["generated"] / budget,
            "over_budget": bool(plan["generated"] > budget),
            "prompts_sampled": plan["prompts_sampled"],
            "prompts_with_a_group": plan["groups"],
            "G_min": float(sizes.min()) if sizes.size else None,
            "G_median": float(np.median(sizes)) if sizes.size else None,
            "G_max": float(sizes.max()) if sizes.size else None,
            "silent_groups": 0.0 if sizes.size else None,  # silent groups are discarded, never updated on
            "live_samples": plan["live_samples"],
            "live_share": plan["live_samples"] / budget,
        }
    sizes = np.asarray(plan)
    if sizes.shape != p.shape or sizes.dtype.kind not in "iuf" or not np.all(np.isfinite(sizes)) or np.any(sizes < 0):
        return {"error": f"the plan is not one group size per prompt (shape {sizes.shape}, dtype {sizes.dtype})"}
    sizes = np.rint(sizes).astype(np.int64)
    grouped = sizes >= 2  # a group of one has no spread: always silent
    silent = np.ones(p.shape)
    if grouped.any():  # a plan ahead: each prompt's group is silent with probability p^G + (1 - p)^G
        silent[grouped] = silent_probability(p[grouped], sizes[grouped])
    live = float(np.sum(sizes * (1.0 - silent)))
    return {
        "kind": "group sizes planned ahead",
        "samples": float(sizes.sum()),
        "generated_share": float(sizes.sum()) / budget,
        "over_budget": bool(sizes.sum() > budget),
        "prompts_sampled": int(np.sum(sizes > 0)),
        "prompts_with_a_group": int(grouped.sum()),
        "G_min": float(sizes[grouped].min()) if grouped.any() else None,
        "G_median": float(np.median(sizes[grouped])) if grouped.any() else None,
        "G_max": float(sizes[grouped].max()) if grouped.any() else None,
        "silent_groups": float(silent[grouped].mean()) if grouped.any() else None,
        "live_samples": live,
        "live_share": live / budget,
    }


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def diagnosis_text(report: dict) -> str:
    """:func:`diagnose`'s dict ``report`` as a plain-text report (about 80 columns)."""
    pool, law = report["pool"], report["group_size_law"]
    n = pool["samples_per_prompt"]
    lines = [
        f"{pool['name']}: {pool['prompts']:,} prompts",
        f"{pool['input']}; " + (f"n = {n} samples per prompt" if n is not None else "n unknown"),
        *[f"warning: {text}" for text in report.get("warnings", [])],
        f"solve rate p{' = k/n' if n is not None else ''}: mean {pool['mean_p']:.3f}, median {pool['median_p']:.3f}; never solved "
        f"{_pct(pool['never_solved'])}, always solved {_pct(pool['always_solved'])}",
        "",
        "silent groups by G (all G rewards agree, so every advantage is zero)",
        f"{'G':>5}  {'closed form':>11}  {'subsampled':>10}  {'DAPO draws per kept group':>25}",
    ]
    for g in report["group_sizes"]:
        key = str(g)
        lines.append(
            f"{g:>5}  {_pct(report['silent_fraction'][key]):>11}  {_pct(report['silent_fraction_subsampled'][key]):>10}"
            f"  {_num(report['dapo_draws_per_kept_group'][key], 2):>25}"
        )
    lines += [
        f"  closed form: p^G + (1 - p)^G{' with p = k/n' if n is not None else ''}; subsampled: G of the n stored "
        "samples, without replacement",
        "",
        f"group-size law G* = 1/(8 eps p(1 - p)), eps = {law['epsilon']:g}, over the {law['learnable_prompts']:,} "
        "prompts with 0 < p < 1",
        f"  at their median p = {_num(law['median_p'])}: G* = {_num(law['G_star'], 1)}",
        "",
        "by tenth of p: prompts, G* at the tenth's median p, share of the gradient budget (G -> infinity)",
        f"{'p':>10}  {'prompts':>8}  {'median p':>8}  {'G*':>8}  {'GRPO/DAPO':>9}  {'Dr. GRPO':>8}",
    ]
    mass = report["gradient_mass_by_decile"]
    for i, row in enumerate(law["by_decile"]):
        lines.append(
            f"{row['decile']:>10}  {_pct(mass['prompts'][i]):>8}  {_num(row['median_p']):>8}  "
            f"{_num(row['G_star'], 1):>8}  {_pct(mass['GRPO'][i]):>9}  {_pct(mass['Dr. GRPO'][i]):>8}"
        )
    lines += _allocation_lines(report["allocation"])
    if "recommendation" in report:
        lines += recommendation_lines(report["recommendation"], pool["prompts"])
    if report["limits"]:
        lines += ["", "limits:"] + [f"  - {text}" for text in report["limits"]]
    # the first line names the reader's file, whose path is not broken
    return printable("\n".join(lines[:1] + _wrapped(lines[1:])) + "\n")  # no escape code from a header or name


def _wrapped(lines: list[str], width: int = 78) -> list[str]:
    """Lines longer than ``width`` broken at spaces, continued one step further in (a terminal or a
    phone shows the report without scrolling sideways); the table rows are shorter and stay as they are."""
    import textwrap

    out = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()))
        out += textwrap.wrap(line.strip(), width, initial_indent=indent, subsequent_indent=indent + "  ")
    return out


def _allocation_lines(alloc: dict) -> list[str]:
    lines = [
        "",
        f"allocation of {alloc['budget']:,} generated samples ({alloc['budget_note']}); every column below is in "
        "generated samples, screening and discarded groups included",
    ]
    if alloc["plan_budget"] != alloc["budget"]:
        lines.append(
            f"  planned on {alloc['plan_prompts']} prompts drawn at random, with the budget scaled to "
            f"{alloc['plan_budget']:,} samples"
        )
    lines.append(f"{'rule':>15}  {'spent':>6}  {'live':>6}  {'groups':>6}  {'G min/median/max':>16}  {'silent':>6}")
    for rule, plan in alloc["plans"].items():
        if "error" in plan:
            lines.append(f"{rule:>15}  refused: {plan['error']}")
            continue
        spread = "-" if plan["G_min"] is None else f"{plan['G_min']:.3g}/{plan['G_median']:.3g}/{plan['G_max']:.3g}"
        lines.append(
            f"{rule:>15}  {_pct(plan['generated_share']):>6}  {_pct(plan['live_share']):>6}  "
            f"{_pct(plan['prompts_with_a_group'] / alloc['plan_prompts']):>6}  {spread:>16}  "
            f"{_pct(plan['silent_groups']):>6}"
        )
    lines.append(
        "  spent: samples generated / budget; live: samples in groups with 0 < k < G that reach the update / "
        "budget, the one currency the rules compare in; groups: groups in the update per prompt; G: their sizes; "
        "silent: expected share of them with every reward equal. dapo, speed and reinforce_ada sample in rounds "
        "and discard silent groups (the mean of simulated steps)."
    )
    changed = {rule: settings for rule, settings in alloc.get("settings", {}).items() if settings}
    for rule, settings in changed.items():
        shown = ", ".join(f"{key} = {value:,}" for key, value in settings.items())
        lines.append(f"  {rule}: {shown}, so that it can spend the budget")
    plans = alloc["plans"]
    if "knapsack" in plans and plans.get("knapsack") == plans.get("knapsack_oracle"):
        lines.append("  knapsack and knapsack_oracle coincide here: both plan from the pass rates as known")
    return lines
