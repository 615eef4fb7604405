"""The Bernoulli-logit prompt: one parameter θ, success probability p = ς(θ) (chapters 6 and 8).

The source paper (Bay and Yearick, 2026) uses this smallest possible policy twice: to check the
large-group gradients by Monte Carlo (its Figure 5, right) and, with 6,000 such prompts, as its
controlled training run (§8). Its score is scalar, s = y − p for an answer y ∈ {0, 1}, so
ḡ₊ − ḡ₋ = 1 and the identity says one group's GRPO gradient is exactly σ̂ and Dr. GRPO's σ̂².
The functions here compute the gradient from the sampled answers and scores, the way a trainer
does, never from σ̂ directly, so comparing them with the closed forms is a real check.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stddial_book.core.checks import (
    check_group_size,
    check_int,
    check_number,
    check_pool,
    check_unit_interval,
    to_numpy,
)
from stddial_book.corpora.histograms import PAPER_BANDS, decile_of
from stddial_book.theory.recipes import Recipe, as_recipe, group_advantages
from stddial_book.theory.silent import expected_update_weight

__all__ = [
    "sampled_gradients",
    "monte_carlo_gradient",
    "monte_carlo_z",
    "ControlledRun",
    "ControlledRunResult",
    "initial_solve_rates",
    "controlled_run",
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


def _expected_gain(solve_rate: np.ndarray, group_size: int, recipe: Recipe) -> np.ndarray:
    """The finite-G closed form of :func:`sampled_gradients`: the recipe's expected update weight
    at 0/1 rewards, E[σ̂] when it divides by the std and E[σ̂²] when it does not."""
    return np.asarray(expected_update_weight(solve_rate, group_size, _binary(recipe)))


def _binary(recipe: Recipe) -> Recipe:
    """The recipe with the 0/1 rewards of a Bernoulli-logit prompt."""
    return recipe.replace(reward_wrong=0.0, reward_correct=1.0)


def sampled_gradients(
    solve_rate: np.ndarray, group_size: int, recipe: Recipe | str, rng: np.random.Generator
) -> np.ndarray:
    """One sampled group per prompt: the per-prompt policy gradient (1/G) Σᵢ Aᵢ sᵢ in θ.

    ``solve_rate`` holds p for each prompt (shape (M,)); answers yᵢ ~ Bernoulli(p), rewards 0/1,
    advantages from :func:`stddial_book.theory.recipes.group_advantages` (silent groups give 0), scores
    sᵢ = yᵢ − p. Returns shape (M,).
    """
    size = check_group_size(group_size)
    recipe = as_recipe(recipe)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)); got {type(rng).__name__}.")
    p = to_numpy(solve_rate, "solve_rate", allow_empty=True)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"solve_rate must be a non-empty 1-D array of per-prompt p; got shape {p.shape}.")
    check_unit_interval(p, "solve_rate")
    answers = (rng.random((p.size, size)) < p[:, None]).astype(np.float64)
    advantages = group_advantages(answers.reshape(-1), size, _binary(recipe))
    scores = answers - p[:, None]
    return (advantages.reshape(p.size, size) * scores).mean(axis=1)


def monte_carlo_gradient(
    solve_rate: np.ndarray, group_size: int, recipe: Recipe | str, num_groups: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error over ``num_groups`` sampled groups of the per-prompt gradient.

    Its expectation is E[σ̂] (GRPO, :func:`stddial_book.theory.silent.expected_group_std`) or
    E[σ̂²] = p(1 − p)(G − 1)/G (Dr. GRPO); for large G these approach √(p(1 − p)) and p(1 − p),
    the θ-gradients of 2·arcsin√p and of p. Chapter 6.
    """
    num_groups = check_int(num_groups, "num_groups")
    if num_groups < 2:
        raise ValueError(f"num_groups must be at least 2 to estimate a standard error; got {num_groups}.")
    p = np.atleast_1d(to_numpy(solve_rate, "solve_rate", allow_empty=True))
    size = check_group_size(group_size)
    samples = num_groups * max(p.size, 1) * size
    if samples > MAX_SAMPLES:
        raise ValueError(
            f"num_groups={num_groups} groups of G = {size} for {p.size} solve rate(s) is {samples:.3g} "
            f"samples, above {MAX_SAMPLES:.0e} (hours of CPU); lower num_groups (2000 gives a standard "
            "error of about 1% of the gradient)."
        )
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    draws = np.stack([sampled_gradients(p, group_size, recipe, rng) for _ in range(num_groups)])
    return draws.mean(axis=0), draws.std(axis=0, ddof=1) / np.sqrt(num_groups)


def monte_carlo_z(
    solve_rate: np.ndarray, group_size: int, recipe: Recipe | str, num_groups: int, seed: int = 0
) -> np.ndarray:
    """Per solve rate, how many standard errors the Monte-Carlo gradient (:func:`monte_carlo_gradient`)
    lies from its exact expectation, E[σ̂] for a recipe that divides by the std and E[σ̂²] for one
    that does not (chapter 6). A point whose sampled groups all gave the same gradient (p = 0 or 1)
    has no standard error: its z is 0 when the mean equals the expectation and ±inf otherwise.
    """
    recipe = as_recipe(recipe)
    p = np.atleast_1d(to_numpy(solve_rate, "solve_rate", allow_empty=True))
    mean, se = monte_carlo_gradient(p, group_size, recipe, num_groups, seed=seed)
    gap = mean - _expected_gain(p, check_group_size(group_size), recipe)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(se > 0, gap / np.where(se > 0, se, 1.0), np.where(gap == 0, 0.0, np.sign(gap) * np.inf))


# --- the source paper's controlled run (Bay and Yearick, 2026, §8) ----------------------------

#: The most Bernoulli samples one Monte-Carlo call draws, and the most prompt-steps a controlled run
#: holds in memory (each of its per-step arrays is that many float64s): beyond, a typo (10**30) would
#: run for hours or exhaust memory instead of failing at once.
MAX_SAMPLES = 10**9
MAX_PROMPT_STEPS = 2 * 10**7
#: The most seeds a study runs and the most redraws DAPO's same-prompt refill makes per group.
MAX_SEEDS = 1000
MAX_REDRAW_TRIES = 1000


@dataclass(frozen=True)
class ControlledRun:
    """Settings of the controlled run: M Bernoulli-logit prompts trained by one recipe.

    The paper's run: M = 6,000 prompts, initial p drawn from the interior (0 < p < 1) of Big-Math's
    solve rates and clipped to [0.02, 0.98], G = 8, 150 steps of θ ← θ + lr·g with lr = 0.5;
    DAPO redraws a silent group of the same prompt, at most ``redraw_tries`` draws in all.
    """

    num_prompts: int = 6000
    group_size: int = 8
    steps: int = 150
    lr: float = 0.5
    redraw_tries: int = 4
    clip: tuple[float, float] = (0.02, 0.98)

    def __post_init__(self) -> None:
        for name in ("num_prompts", "steps", "redraw_tries"):
            check_int(getattr(self, name), name)
        check_group_size(self.group_size)
        if self.num_prompts * (self.steps + 1) > MAX_PROMPT_STEPS:
            raise ValueError(
                f"num_prompts × (steps + 1) = {self.num_prompts * (self.steps + 1):.3g} is above "
                f"{MAX_PROMPT_STEPS:.0e}, more than the run's per-step arrays hold in memory; the paper's "
                "run is 6000 prompts × 150 steps."
            )
        if self.redraw_tries > MAX_REDRAW_TRIES or self.group_size > 4096:
            raise ValueError(
                f"redraw_tries={self.redraw_tries} and group_size={self.group_size} must stay at most "
                f"{MAX_REDRAW_TRIES} and 4096 (the paper redraws 4 times at G = 8)."
            )
        check_number(self.lr, "lr")
        if not isinstance(self.clip, (tuple, list)) or len(self.clip) != 2:
            raise TypeError(f"clip must be a pair (low, high) of solve rates; got {type(self.clip).__name__}.")
        for value in self.clip:
            check_number(value, "clip")
        if self.num_prompts < 4 or self.steps < 1 or self.redraw_tries < 1:
            raise ValueError("num_prompts must be at least 4 (quartiles), steps and redraw_tries at least 1.")
        if not self.lr > 0 or not np.isfinite(self.lr):
            raise ValueError(f"lr must be a positive finite number; got {self.lr!r}.")
        check_group_size(self.group_size)
        low, high = self.clip
        if not 0.0 < low < high < 1.0:
            raise ValueError(f"clip must satisfy 0 < low < high < 1; got {self.clip}.")


@dataclass
class ControlledRunResult:
    """Per-step records of :func:`controlled_run` (arrays have one row per step)."""

    initial_p: np.ndarray  # (M,)
    p: np.ndarray  # (steps + 1, M): the solve rates before each step, and at the end
    silent_measured: np.ndarray  # (steps,) fraction of first-drawn groups that were silent
    silent_expected: np.ndarray  # (steps,) mean of p^G + (1 − p)^G at the current p
    gain: np.ndarray  # (steps, M) the update each prompt received (its sampled gradient)
    expected_gain: np.ndarray  # (steps, M) the finite-G closed form at the current p
    groups_drawn: np.ndarray  # (steps,) groups sampled, redraws included
    groups_kept: np.ndarray  # (steps,) groups that produced a non-zero update


def initial_solve_rates(
    solve_rates: np.ndarray, counts: np.ndarray, config: ControlledRun, rng: np.random.Generator
) -> np.ndarray:
    """M initial solve rates drawn from a pool's interior (0 < p < 1) and clipped (paper §8)."""
    _check_config(config)
    p, c = check_pool(solve_rates, counts)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)); got {type(rng).__name__}.")
    weights = np.where((p > 0) & (p < 1), c, 0.0)
    if weights.sum() <= 0:
        raise ValueError("the pool has no prompt with 0 < p < 1 to draw from.")
    drawn = rng.choice(p, size=config.num_prompts, p=weights / weights.sum())
    return np.clip(drawn, *config.clip)


def controlled_run(
    initial_p: np.ndarray,
    recipe: Recipe | str,
    config: ControlledRun = ControlledRun(),
    seed: int = 0,
    lr: float | None = None,
) -> ControlledRunResult:
    """Train ``len(initial_p)`` Bernoulli-logit prompts with one recipe,
    every prompt every step.

    Each step every prompt draws a group of G; its update is the sampled
    gradient (1/G) Σ Aᵢ (yᵢ − p) (:func:`sampled_gradients`), 0 for a
    silent group. With ``recipe.dynamic_sampling`` (DAPO) a silent group is
    redrawn from the same prompt up to ``config.redraw_tries`` draws in all.
    ``lr`` overrides ``config.lr`` (the matched-step runs). The expected
    gain is E[σ̂] for a recipe that divides by the std and E[σ̂²]
    otherwise.
    """
    recipe = as_recipe(recipe)
    _check_config(config)
    rate = config.lr if lr is None else check_number(lr, "lr")
    if not rate > 0:
        raise ValueError(f"lr must be positive; got {lr!r}.")
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    p0 = to_numpy(initial_p, "initial_p")
    check_unit_interval(p0, "initial_p")
    # p = 0 or 1: θ = ∓inf, a prompt that never moves (always silent)
    with np.errstate(divide="ignore"):
        theta = np.log(p0) - np.log1p(-p0)
    G = config.group_size
    history = np.empty((config.steps + 1, p0.size))
    silent_measured = np.empty(config.steps)
    silent_expected = np.empty(config.steps)
    gains = np.empty((config.steps, p0.size))
    expected = np.empty((config.steps, p0.size))
    drawn = np.zeros(config.steps, dtype=np.int64)
    kept = np.zeros(config.steps, dtype=np.int64)
    for step in range(config.steps):
        p = 1.0 / (1.0 + np.exp(-theta))
        history[step] = p
        silent_expected[step] = float(np.mean(p**G + (1.0 - p) ** G))
        expected[step] = _expected_gain(p, G, recipe)
        gain = sampled_gradients(p, G, recipe, rng)
        silent = gain == 0.0
        silent_measured[step] = float(silent.mean())
        drawn[step] = p.size
        if recipe.dynamic_sampling:
            for _ in range(config.redraw_tries - 1):
                if not silent.any():
                    break
                retry = np.nonzero(silent)[0]
                drawn[step] += retry.size
                gain[retry] = sampled_gradients(p[retry], G, recipe, rng)
                silent = gain == 0.0
        kept[step] = int((~silent).sum())
        gains[step] = gain
        theta = theta + rate * gain
    history[-1] = 1.0 / (1.0 + np.exp(-theta))
    return ControlledRunResult(p0, history, silent_measured, silent_expected, gains, expected, drawn, kept)


def silent_r2(result: ControlledRunResult) -> float:
    """R² of the measured silent fraction per step against mean(p^G + (1 − p)^G) at the current p.

    NaN when the measured fraction does not vary over the steps (one step, or none or every group
    silent at each): R² is then undefined.
    """
    _check_result(result)
    measured, expected = result.silent_measured, result.silent_expected
    spread = np.sum((measured - measured.mean()) ** 2)
    if spread == 0:
        return float("nan")
    return float(1.0 - np.sum((measured - expected) ** 2) / spread)


def extreme_share(result: ControlledRunResult, step: int = 0) -> tuple[float, float]:
    """(measured, closed form) share of one step's update mass on extreme prompts, p < 0.1 or
    p > 0.9 at the start of the run (the source paper's band; chapter 8)."""
    gain, expected = _step_mass(result, step)
    extreme = PAPER_BANDS["extreme"](result.initial_p)
    return float(gain[extreme].sum() / gain.sum()), float(expected[extreme].sum() / expected.sum())


def decile_share(result: ControlledRunResult, step: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(measured, closed form) share of one step's update mass per tenth of the initial p."""
    gain, expected = _step_mass(result, step)
    decile = decile_of(result.initial_p)
    measured = np.bincount(decile, weights=gain, minlength=10)
    closed = np.bincount(decile, weights=expected, minlength=10)
    return measured / measured.sum(), closed / closed.sum()


def hardest_quartile(initial_p: np.ndarray) -> np.ndarray:
    """A mask of the M/4 prompts with the lowest initial solve rate (ties broken by position)."""
    p = to_numpy(initial_p, "initial_p", allow_empty=True)
    if p.ndim != 1:
        raise ValueError(f"initial_p must be 1-D, one solve rate per prompt; got shape {p.shape}.")
    check_unit_interval(p, "initial_p")
    order = np.argsort(p, kind="stable")
    mask = np.zeros(len(order), dtype=bool)
    mask[order[: len(order) // 4]] = True
    return mask


def quartile_curve(result: ControlledRunResult) -> np.ndarray:
    """Mean solve rate of the initially hardest quartile before each step and at the end."""
    _check_result(result)
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
    """

    def mean_gain(recipe: Recipe | str) -> float:
        return float(np.mean(_expected_gain(np.asarray(initial_p), config.group_size, as_recipe(recipe))))

    _check_config(config)
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
    """
    from dataclasses import replace

    _check_config(config)
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
    linear interpolation: DAPO compared with the others per generated sample."""
    _check_result(result)
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
    """
    from stddial_book.theory.recipes import DAPO, DR_GRPO, GRPO

    if check_int(seeds, "seeds") < 2 or seeds > MAX_SEEDS:
        raise ValueError(f"seeds must be at least 2 (to show a spread) and at most {MAX_SEEDS}; got {seeds}.")
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
    comparisons are made on it (chapter 8)."""
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


def controlled_gap_numbers(study: dict[str, np.ndarray], z_crit: float = 3.0) -> dict[str, float | str]:
    """Chapter 8's comparisons of the hardest quartile per generated group (:func:`quartile_gap`,
    paired by seed): GRPO against Dr. GRPO with the matched step (``matched``), against DAPO
    (``dapo``) and against Dr. GRPO at the paper's rate (``raw``). For each, ``gap_<name>`` (mean
    over seeds), its standard error ``gap_<name>_se`` and ``gap_<name>_z`` = gap / s.e. A gap counts
    when |z| > ``z_crit``; ``matched_verdict`` and ``dapo_verdict`` say so in words, and
    ``matched_share`` is the matched gap as a fraction of the raw one. Needs at least 2 seeds.
    """
    z_crit = check_number(z_crit, "z_crit")
    if not z_crit > 0:
        raise ValueError(f"z_crit must be positive; got {z_crit}.")
    out: dict[str, float | str] = {"z_crit": z_crit}
    for name, other in (("matched", "dr_grpo_matched"), ("dapo", "dapo"), ("raw", "dr_grpo")):
        gap = quartile_gap(study, "grpo", other)
        if gap.size < 2:
            raise ValueError("the comparisons need at least 2 seeds for a standard error.")
        se = float(gap.std(ddof=1) / np.sqrt(gap.size))
        out[f"gap_{name}"] = float(gap.mean())
        out[f"gap_{name}_se"] = se
        out[f"gap_{name}_z"] = float(gap.mean() / se) if se > 0 else float("nan")
    beyond = {name: abs(out[f"gap_{name}_z"]) > z_crit for name in ("matched", "dapo")}
    out["matched_verdict"] = "beyond seed noise" if beyond["matched"] else "within seed noise"
    out["matched_share"] = out["gap_matched"] / out["gap_raw"]
    if not beyond["dapo"]:
        out["dapo_verdict"] = "indistinguishable from GRPO"
    else:
        out["dapo_verdict"] = "slower than GRPO" if out["gap_dapo"] > 0 else "faster than GRPO"
    return out


def _check_config(config: ControlledRun) -> None:
    if not isinstance(config, ControlledRun):
        raise TypeError(f"config must be a ControlledRun; got {type(config).__name__}.")


def _check_result(result: ControlledRunResult) -> None:
    if not isinstance(result, ControlledRunResult):
        raise TypeError(
            f"result must be what controlled_run returns (a ControlledRunResult); got {type(result).__name__}."
        )


def _step_mass(result: ControlledRunResult, step: int) -> tuple[np.ndarray, np.ndarray]:
    """(measured, closed-form) update per prompt at ``step``, refusing a step without update mass."""
    _check_result(result)
    steps = result.gain.shape[0]
    step = check_int(step, "step")
    if not 0 <= step < steps:  # a negative step would silently count from the end
        raise ValueError(f"step must index one of the run's {steps} steps (0..{steps - 1}); got {step}.")
    gain, expected = result.gain[step], result.expected_gain[step]
    if gain.sum() == 0 or expected.sum() == 0:
        raise ValueError(f"step {step} moved no prompt (every group silent): its update mass has no shares.")
    return gain, expected
