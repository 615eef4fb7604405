"""What chapter 8 measures on the controlled run of Bernoulli-logit prompts (Bay and Yearick, 2026, §8).

The run itself, one parameter θ per prompt and p = ς(θ), is :func:`stddial_book.experiments.controlled.bernoulli.controlled_run`.
Here: the measurements of one run (the silent fraction's R² against p^G + (1 − p)^G, the update
mass on extreme prompts and per decile of the initial p, the hardest quartile's mean solve rate),
the matched learning rate and the run re-matched at every step, and the study over seeds with the
numbers and paired comparisons chapter 8 quotes. The run's names stay reachable from here too.
"""

from __future__ import annotations

import numpy as np

from stddial_book.core.checks import check_int, check_number, check_unit_interval, to_numpy
from stddial_book.corpora.histograms import PAPER_BANDS, decile_of
from stddial_book.experiments.controlled.bernoulli import (  # noqa: F401  (the run's names: kept as controlled.<name>)
    MAX_MONTE_CARLO_SAMPLES,
    MAX_PROMPT_STEPS,
    MAX_REDRAW_TRIES,
    ControlledRun,
    ControlledRunResult,
    check_controlled_result,
    check_controlled_run,
    controlled_run,
    expected_gain,
    initial_solve_rates,
    monte_carlo_gradient,
    monte_carlo_z,
    sampled_gradients,
)
from stddial_book.theory.recipes import Recipe, as_recipe

#: The most seeds a study runs.
MAX_SEEDS = 1000

__all__ = [
    "silent_r2",
    "extreme_share",
    "decile_share",
    "hardest_quartile",
    "quartile_curve",
    "matched_lr",
    "rematched_run",
    "value_at_budget",
    "controlled_run_study",
    "quartile_gap",
    "matched_gap",
    "controlled_run_numbers",
    "controlled_gap_numbers",
]


def silent_r2(result: ControlledRunResult) -> float:
    """R² of the measured silent fraction per step against mean(p^G + (1 − p)^G) at the current p.

    NaN when the measured fraction does not vary over the steps (one step, or none or every group
    silent at each): R² is then undefined. ``result`` is what :func:`controlled_run` returns.
    """
    check_controlled_result(result)
    measured, expected = result.silent_measured, result.silent_expected
    spread = np.sum((measured - measured.mean()) ** 2)
    if spread == 0:
        return float("nan")
    return float(1.0 - np.sum((measured - expected) ** 2) / spread)


def extreme_share(result: ControlledRunResult, step: int = 0) -> tuple[float, float]:
    """(measured, closed form) share of one step's update mass on extreme prompts, p < 0.1 or
    p > 0.9 at the start of the run (the source paper's band; chapter 8). ``result`` is what
    :func:`controlled_run` returns; ``step`` the step read, 0 to steps − 1 (default 0, the first)."""
    gain, expected = _step_mass(result, step)
    extreme = PAPER_BANDS["extreme"](result.initial_p)
    return float(gain[extreme].sum() / gain.sum()), float(expected[extreme].sum() / expected.sum())


def decile_share(result: ControlledRunResult, step: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(measured, closed form) share of one step's update mass per tenth of the initial p, each of shape
    (10,). ``result`` is what :func:`controlled_run` returns; ``step`` the step read, 0 to steps − 1
    (default 0, the first)."""
    gain, expected = _step_mass(result, step)
    decile = decile_of(result.initial_p)
    measured = np.bincount(decile, weights=gain, minlength=10)
    closed = np.bincount(decile, weights=expected, minlength=10)
    return measured / measured.sum(), closed / closed.sum()


def hardest_quartile(initial_p: np.ndarray) -> np.ndarray:
    """A mask of the M/4 prompts with the lowest initial solve rate (ties broken by position).
    ``initial_p`` holds the M prompts' initial solve rates in [0, 1], shape (M,)."""
    p = to_numpy(initial_p, "initial_p", allow_empty=True)
    if p.ndim != 1:
        raise ValueError(f"initial_p must be 1-D, one solve rate per prompt; got shape {p.shape}.")
    check_unit_interval(p, "initial_p")
    order = np.argsort(p, kind="stable")
    mask = np.zeros(len(order), dtype=bool)
    mask[order[: len(order) // 4]] = True
    return mask


def quartile_curve(result: ControlledRunResult) -> np.ndarray:
    """Mean solve rate of the initially hardest quartile before each step and at the end, shape
    (steps + 1,). ``result`` is what :func:`controlled_run` returns (at least 4 prompts)."""
    check_controlled_result(result)
    if result.initial_p.size < 4:
        raise ValueError(
            f"the run has {result.initial_p.size} prompts, so its hardest quartile is empty; train at least 4 prompts."
        )
    return result.p[:, hardest_quartile(result.initial_p)].mean(axis=1)


def matched_lr(
    initial_p: np.ndarray, reference: Recipe | str, other: Recipe | str, config: ControlledRun = ControlledRun()
) -> float:
    """The learning rate at which ``other``'s mean expected first step equals ``reference``'s.

    Dr. GRPO's gain σ̂² is below GRPO's σ̂ at every p, so at one learning rate it moves every
    prompt less; scaling its rate by mean E[σ̂] / mean E[σ̂²] over the initial pool makes the two
    take the same average first step, and what remains is *where* each puts it (chapter 8).

    ``initial_p`` holds the pool's solve rates in [0, 1] (not all 0 or 1); ``reference`` and
    ``other`` are :class:`~stddial_book.theory.recipes.Recipe` objects or presets' names; ``config``
    is the :class:`ControlledRun` whose ``group_size`` sets G and whose ``lr`` is ``reference``'s rate
    (default: the paper's run).
    """

    def mean_gain(recipe: Recipe | str) -> float:
        return float(np.mean(expected_gain(np.asarray(initial_p), config.group_size, as_recipe(recipe))))

    check_controlled_run(config)
    base = mean_gain(other)
    if base <= 0:
        raise ValueError(
            "every prompt of initial_p is silent at p = 0 or 1 (no expected gain), so no learning rate "
            "matches; pass solve rates strictly between 0 and 1."
        )
    return config.lr * mean_gain(reference) / base


def rematched_run(
    initial_p: np.ndarray,
    recipe: Recipe | str,
    reference: Recipe | str,
    config: ControlledRun = ControlledRun(),
    seed: int = 0,
) -> ControlledRunResult:
    """:func:`controlled_run` with the step matched at *every* step, not only the first: before each
    step the learning rate is :func:`matched_lr` at the current solve rates, so ``recipe``'s mean
    expected step over the pool equals ``reference``'s at ``config.lr`` throughout (chapter 8,
    exercise 2). Each step is one step of :func:`controlled_run`, seeded from (``seed``, step).

    ``initial_p`` holds the prompts' starting solve rates in [0, 1]; ``recipe`` and ``reference``
    are :class:`~stddial_book.theory.recipes.Recipe` objects or presets' names; ``config`` is the
    :class:`ControlledRun` (default: the paper's run); ``seed`` a whole number ≥ 0 (default 0).
    """
    from dataclasses import replace

    check_controlled_run(config)
    seed = check_int(seed, "seed", minimum=0)
    one_step = replace(config, steps=1)
    p = to_numpy(initial_p, "initial_p")
    steps = []
    for step in range(config.steps):
        lr = matched_lr(p, reference, recipe, config)
        step_seed = int(np.random.SeedSequence([seed, step]).generate_state(1)[0])
        steps.append(controlled_run(p, recipe, one_step, seed=step_seed, lr=lr))
        p = steps[-1].p[-1]

    def joined(name: str) -> np.ndarray:
        return np.concatenate([getattr(s, name) for s in steps])

    history = np.vstack([s.p[0] for s in steps] + [p])
    return ControlledRunResult(
        steps[0].initial_p,
        history,
        joined("silent_measured"),
        joined("silent_expected"),
        joined("gain"),
        joined("expected_gain"),
        joined("groups_drawn"),
        joined("groups_kept"),
    )


def value_at_budget(result: ControlledRunResult, curve: np.ndarray, groups: float) -> float:
    """``curve`` (one value per step boundary) read at a cumulative number of groups drawn, by
    linear interpolation: DAPO compared with the others per generated sample. ``result`` is the
    run (:func:`controlled_run`) whose ``groups_drawn`` set the axis; ``curve`` has steps + 1 values
    (as :func:`quartile_curve` gives); ``groups`` is the cumulative count of groups drawn, 0 to the
    run's total."""
    check_controlled_result(result)
    drawn = np.concatenate([[0.0], np.cumsum(result.groups_drawn, dtype=np.float64)])
    curve = to_numpy(curve, "curve")
    if curve.shape != drawn.shape:
        raise ValueError(
            f"curve must have one value per step boundary ({drawn.size}, as quartile_curve gives); "
            f"got shape {curve.shape}."
        )
    groups = check_number(groups, "groups")
    if groups < 0:
        raise ValueError(f"groups is a number of groups drawn and must be >= 0; got {groups}.")
    if groups > drawn[-1]:
        raise ValueError(f"the run drew {drawn[-1]:.0f} groups in all; cannot read it at {groups:.0f}.")
    return float(np.interp(groups, drawn, curve))


def controlled_run_study(
    solve_rates: np.ndarray, counts: np.ndarray, seeds: int = 5, config: ControlledRun = ControlledRun()
) -> dict[str, np.ndarray]:
    """The paper's three predictions, and the matched-step comparison, over ``seeds`` seeds.

    Per seed: one draw of initial solve rates, shared by GRPO, Dr. GRPO at the paper's rate,
    Dr. GRPO at the matched rate (:func:`matched_lr`) and DAPO. Returns arrays with one row per
    seed: ``silent_r2/<recipe>``, ``extreme_share/<recipe>`` and ``extreme_share_closed/<recipe>``
    (step 0), ``quartile/<run>`` (the hardest quartile's mean solve rate at every step boundary),
    ``dapo_oversampling`` (groups drawn per prompt and step), ``dapo_quartile_at_grpo_budget``,
    ``silent_measured/grpo`` and ``silent_expected/grpo`` (per step), ``matched_lr``.

    ``solve_rates`` (1-D, in [0, 1]) and ``counts`` (one count per solve rate) are the pool the
    initial solve rates are drawn from (:func:`initial_solve_rates`); ``seeds`` is 2 to
    :data:`MAX_SEEDS` (default 5); ``config`` the :class:`ControlledRun` (default: the paper's run).
    The result is kept in the run cache: the same arguments and code are computed once.
    """
    from stddial_book.experiments.testbed.runs import cached_arrays

    if check_int(seeds, "seeds") < 2 or seeds > MAX_SEEDS:
        raise ValueError(f"seeds must be at least 2 (to show a spread) and at most {MAX_SEEDS}; got {seeds}.")
    if not isinstance(config, ControlledRun):
        raise TypeError(f"config must be a ControlledRun; got {type(config).__name__}.")
    rates, weights = to_numpy(solve_rates, "solve_rates"), to_numpy(counts, "counts")
    payload = {"solve_rates": rates, "counts": weights, "seeds": int(seeds), "config": config}
    # chapters 8 and 13 and the reproduction page ask for the same study: computed once, then read
    return cached_arrays(
        "controlled", payload, lambda: _study(rates, weights, int(seeds), config), ("experiments.controlled.study",)
    )


def _study(solve_rates: np.ndarray, counts: np.ndarray, seeds: int, config: ControlledRun) -> dict[str, np.ndarray]:
    """:func:`controlled_run_study`, computed."""
    from stddial_book.theory.recipes import DAPO, DR_GRPO, GRPO

    rows: dict[str, list] = {}

    def add(name: str, value) -> None:
        rows.setdefault(name, []).append(value)

    for seed in range(seeds):
        p0 = initial_solve_rates(solve_rates, counts, config, np.random.default_rng([seed, 0]))
        lr = matched_lr(p0, GRPO, DR_GRPO, config)
        runs = {
            "grpo": controlled_run(p0, GRPO, config, seed=seed),
            "dr_grpo": controlled_run(p0, DR_GRPO, config, seed=seed),
            "dr_grpo_matched": controlled_run(p0, DR_GRPO, config, seed=seed, lr=lr),
            "dapo": controlled_run(p0, DAPO, config, seed=seed),
        }
        add("matched_lr", lr)
        for name, result in runs.items():
            add(f"quartile/{name}", quartile_curve(result))
            add(f"silent_r2/{name}", silent_r2(result))
            measured, closed = extreme_share(result)
            add(f"extreme_share/{name}", measured)
            add(f"extreme_share_closed/{name}", closed)
            measured, closed = decile_share(result)
            add(f"decile_share/{name}", measured)
            add(f"decile_share_closed/{name}", closed)
        add("silent_measured/grpo", runs["grpo"].silent_measured)
        add("silent_expected/grpo", runs["grpo"].silent_expected)
        dapo = runs["dapo"]
        add("dapo_oversampling", dapo.groups_drawn.sum() / (config.num_prompts * config.steps))
        add(
            "dapo_quartile_at_grpo_budget",
            value_at_budget(dapo, quartile_curve(dapo), float(runs["grpo"].groups_drawn.sum())),
        )
        add("dapo_groups_drawn", np.concatenate([[0], np.cumsum(dapo.groups_drawn)]))
        add("num_prompts", config.num_prompts)
    return {name: np.array(values) for name, values in rows.items()}


def quartile_gap(study: dict[str, np.ndarray], first: str, second: str) -> np.ndarray:
    """Per seed: the hardest quartile's mean solve rate under run ``first`` minus under ``second``,
    averaged over the run, with both read per generated group (groups drawn per prompt, 0 to the
    run's step count). For the runs without redraws a step is one group per prompt; DAPO's curve is
    interpolated at the same numbers of groups. One number per seed and pair: the chapter's
    comparisons are made on it (chapter 8). ``study`` is what :func:`controlled_run_study` returns;
    ``first`` and ``second`` name two of its runs: ``"grpo"``, ``"dr_grpo"``, ``"dr_grpo_matched"``
    or ``"dapo"``."""
    for name in (first, second):
        if not isinstance(study, dict) or f"quartile/{name}" not in study:
            raise ValueError(
                f"study has no run {' '.join(repr(name).split())[:60]}; pass what controlled_run_study returns and one of "
                "'grpo', 'dr_grpo', 'dr_grpo_matched', 'dapo'."
            )
    steps = study["quartile/grpo"].shape[1]
    grid = np.arange(steps, dtype=np.float64)

    def per_group(name: str, seed: int) -> np.ndarray:
        curve = study[f"quartile/{name}"][seed]
        if name != "dapo":
            return curve
        drawn = study["dapo_groups_drawn"][seed] / study["num_prompts"][seed]
        return np.interp(grid, drawn, curve)

    return np.array([np.mean(per_group(first, s) - per_group(second, s)) for s in range(len(study["matched_lr"]))])


def matched_gap(
    solve_rates: np.ndarray,
    counts: np.ndarray,
    seeds: int = 5,
    config: ControlledRun = ControlledRun(),
    rematch: bool = False,
) -> np.ndarray:
    """Per seed, GRPO's lead over Dr. GRPO with a matched step on the initially hardest quartile,
    averaged over the run (the hardest quartile's mean solve rate, GRPO minus Dr. GRPO, at every
    step boundary): chapter 8's matched-step comparison, without the other runs of
    :func:`controlled_run_study`. With ``rematch=False`` Dr. GRPO's learning rate is matched once,
    at the initial pool (:func:`matched_lr`; the study's ``dr_grpo_matched`` run, same seeds, so the
    result equals ``quartile_gap(study, "grpo", "dr_grpo_matched")``); with ``rematch=True`` it is
    matched at every step (:func:`rematched_run`).

    ``solve_rates`` and ``counts`` are the pool the initial solve rates are drawn from, as in
    :func:`controlled_run_study`; ``seeds`` is 1 to :data:`MAX_SEEDS` (default 5); ``config`` the
    :class:`ControlledRun` (default: the paper's run); ``rematch`` is True or False (default False).
    """
    from stddial_book.theory.recipes import DR_GRPO, GRPO

    if check_int(seeds, "seeds") < 1 or seeds > MAX_SEEDS:
        raise ValueError(f"seeds must be at least 1 and at most {MAX_SEEDS}; got {seeds}.")
    if not isinstance(rematch, bool):
        raise TypeError(f"rematch must be True or False; got {type(rematch).__name__}.")
    gaps = []
    for seed in range(seeds):
        p0 = initial_solve_rates(solve_rates, counts, config, np.random.default_rng([seed, 0]))
        grpo = controlled_run(p0, GRPO, config, seed=seed)
        if rematch:
            dr = rematched_run(p0, DR_GRPO, GRPO, config, seed=seed)
        else:
            dr = controlled_run(p0, DR_GRPO, config, seed=seed, lr=matched_lr(p0, GRPO, DR_GRPO, config))
        gaps.append(float(np.mean(quartile_curve(grpo) - quartile_curve(dr))))
    return np.array(gaps)


def _seed_sd(values: np.ndarray) -> float:
    """Standard deviation over seeds (ddof 1); NaN, undefined, for a single seed."""
    values = np.asarray(values, dtype=np.float64)
    return float(values.std(ddof=1)) if values.size > 1 else float("nan")


def controlled_run_numbers(study: dict[str, np.ndarray], mid: int = 40) -> dict[str, float]:
    """The numbers chapter 8 quotes about the paper's three predictions, from
    :func:`controlled_run_study` (means over seeds unless said):

    ``n_seeds``; ``silent_r2_min`` and ``silent_r2_dr_min``, the lowest R² over seeds of the silent
    fraction against its closed form (GRPO, Dr. GRPO); ``silent_end``, GRPO's silent fraction at the
    last step; ``ext_grpo``, ``ext_dr`` and their SDs over seeds ``ext_grpo_sd``, ``ext_dr_sd``, the
    first step's update share on extreme prompts; ``q_<run>_end``, the hardest quartile's mean solve
    rate at the end (``grpo``, ``dr``, ``dapo``); ``q_<run>_mid`` at step ``mid`` (``grpo``,
    ``dr_grpo``, ``dr_grpo_matched``); ``oversampling``, DAPO's groups per prompt and step;
    ``matched_lr``; ``steps_ahead`` of ``n_steps``, the steps after the first at which GRPO's mean
    hardest-quartile curve is at or above Dr. GRPO's with the matched step.

    ``study`` is what :func:`controlled_run_study` returns; ``mid`` a step boundary of the run,
    0 to steps (default 40).
    """
    if not isinstance(study, dict) or "quartile/grpo" not in study:
        raise ValueError("study must be what controlled_run_study returns.")
    last = study["quartile/grpo"].shape[1] - 1
    mid = check_int(mid, "mid", minimum=0)
    if mid > last:
        raise ValueError(f"mid must be a step of the run, 0..{last}; got {mid}.")

    def quartile(run: str, step: int) -> float:
        return float(study[f"quartile/{run}"][:, step].mean())

    ahead = study["quartile/grpo"].mean(axis=0) >= study["quartile/dr_grpo_matched"].mean(axis=0)
    return {
        "n_seeds": len(study["matched_lr"]),
        "silent_r2_min": float(study["silent_r2/grpo"].min()),
        "silent_r2_dr_min": float(study["silent_r2/dr_grpo"].min()),
        "silent_end": float(study["silent_measured/grpo"][:, -1].mean()),
        "ext_grpo": float(study["extreme_share/grpo"].mean()),
        "ext_grpo_sd": _seed_sd(study["extreme_share/grpo"]),
        "ext_dr": float(study["extreme_share/dr_grpo"].mean()),
        "ext_dr_sd": _seed_sd(study["extreme_share/dr_grpo"]),
        "q_grpo_end": quartile("grpo", last),
        "q_dr_end": quartile("dr_grpo", last),
        "q_dapo_end": quartile("dapo", last),
        "mid": mid,
        "q_grpo_mid": quartile("grpo", mid),
        "q_dr_grpo_mid": quartile("dr_grpo", mid),
        "q_dr_grpo_matched_mid": quartile("dr_grpo_matched", mid),
        "oversampling": float(study["dapo_oversampling"].mean()),
        "matched_lr": float(study["matched_lr"].mean()),
        "steps_ahead": int(ahead[1:].sum()),
        "n_steps": int(ahead[1:].size),
    }


def controlled_gap_numbers(study: dict[str, np.ndarray], alpha: float = 0.05) -> dict[str, float | str]:
    """Chapter 8's paired comparisons of the hardest quartile, one number per seed and pair (one
    initial draw serves every run of a seed), each judged by a paired Student t test on the seeds
    (:func:`scipy.stats.ttest_1samp`, n − 1 degrees of freedom) at the Bonferroni level
    ``alpha`` / 4 for the family of four:

    * ``raw``: GRPO against Dr. GRPO at the paper's rate, per generated group (:func:`quartile_gap`);
    * ``matched``: GRPO against Dr. GRPO with the matched step, per generated group;
    * ``dapo``: GRPO against DAPO per generated group (DAPO's redraws paid for);
    * ``dapo_step``: GRPO against DAPO per step (the paper's reading), the curves' difference
      averaged over the run.

    For each, ``gap_<name>`` (mean over seeds, GRPO − the other), its standard error
    ``gap_<name>_se``, ``gap_<name>_t`` = gap / s.e. and the two-sided ``gap_<name>_p``;
    ``comparisons``, ``level`` (each comparison's level) and ``t_crit``, the |t| a gap must exceed
    (the same test: p < level). ``matched_verdict``, ``dapo_verdict`` and ``dapo_step_verdict`` say
    so in words, and ``matched_share`` is the matched gap as a fraction of the raw one. Zero spread
    over seeds leaves t and p NaN and the gap within noise. Needs at least 2 seeds.

    ``study`` is what :func:`controlled_run_study` returns; ``alpha`` is the family-wise error rate
    in (0, 1) (default 0.05).
    """
    from scipy import stats

    alpha = check_number(alpha, "alpha")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), e.g. 0.05; got {alpha}.")
    if not isinstance(study, dict) or "quartile/dapo" not in study:
        raise ValueError("study must be what controlled_run_study returns.")
    gaps = {name: quartile_gap(study, "grpo", other) for name, other in _GAP_RUNS.items()}
    gaps["dapo_step"] = np.mean(study["quartile/grpo"] - study["quartile/dapo"], axis=1)
    n = gaps["raw"].size
    if n < 2:
        raise ValueError("the comparisons need at least 2 seeds for a standard error.")
    level = alpha / len(gaps)
    out: dict[str, float | str] = {
        "comparisons": len(gaps),
        "level": level,
        "t_crit": float(stats.t.isf(level / 2, n - 1)),
    }
    beyond = {}
    for name, gap in gaps.items():
        se = float(gap.std(ddof=1) / np.sqrt(n))
        out[f"gap_{name}"] = float(gap.mean())
        out[f"gap_{name}_se"] = se
        if se > 0:
            test = stats.ttest_1samp(gap, 0.0)
            out[f"gap_{name}_t"], out[f"gap_{name}_p"] = float(test.statistic), float(test.pvalue)
        else:
            out[f"gap_{name}_t"] = out[f"gap_{name}_p"] = float("nan")
        beyond[name] = bool(out[f"gap_{name}_p"] < level)  # NaN compares False: no spread, no verdict
    out["matched_verdict"] = "beyond seed noise" if beyond["matched"] else "within seed noise"
    out["matched_share"] = out["gap_matched"] / out["gap_raw"]
    for name in ("dapo", "dapo_step"):
        if not beyond[name]:
            out[f"{name}_verdict"] = "indistinguishable from GRPO"
        else:
            out[f"{name}_verdict"] = "slower than GRPO" if out[f"gap_{name}"] > 0 else "faster than GRPO"
    return out


#: The runs chapter 8 compares GRPO with per generated group (:func:`controlled_gap_numbers`).
_GAP_RUNS = {"raw": "dr_grpo", "matched": "dr_grpo_matched", "dapo": "dapo"}


def _step_mass(result: ControlledRunResult, step: int) -> tuple[np.ndarray, np.ndarray]:
    """(measured, closed-form) update per prompt at ``step``, refusing a step without update mass."""
    check_controlled_result(result)
    steps = result.gain.shape[0]
    step = check_int(step, "step")
    if not 0 <= step < steps:  # a negative step would silently count from the end
        raise ValueError(f"step must index one of the run's {steps} steps (0..{steps - 1}); got {step}.")
    gain, expected = result.gain[step], result.expected_gain[step]
    if gain.sum() == 0 or expected.sum() == 0:
        raise ValueError(f"step {step} moved no prompt (every group silent): its update mass has no shares.")
    return gain, expected
