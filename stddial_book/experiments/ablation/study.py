"""Chapter 13 as an experiment on the dial: the dial-only ablation on the LM testbed.

Chapter 13 compares GRPO, Dr. GRPO and DAPO as published, and they differ in more than the dial
(KL, loss aggregation, clip range, rewards). Here the arms are one recipe with the normaliser
toggled and nothing else:

* ``divide``: the base recipe, which divides the centred 0/1 rewards by σ; a group's step is
  σ (ḡ₊ − ḡ₋) (chapter 3's identity);
* ``no_divide``: the same with ``scale_std=False`` (Dr. GRPO's dial setting); its step is σ² (ḡ₊ − ḡ₋);
* ``filter``: ``divide`` plus DAPO's dynamic sampling (silent groups dropped and refilled), the
  dial's third operation as an arm of its own.

The base recipe is GRPO's aggregation (per-sequence token mean), its clip range (0.2 / 0.2), no KL
(β = 0), 0/1 rewards and the population std: with one sequence one vote, a group's weight in the
step is exactly σ or σ² with no length factor coupling one group to another (DAPO's token mean
would weigh a group by its share of the step's tokens), and the ``divide`` arm is the recorded GRPO
run minus its KL term only. Every arm shares it, so the arms differ in the normaliser alone.

The factors cross G ∈ {8, 32} at equal samples per step (32 × 8 = 8 × 32 = 256), AdamW or plain SGD,
and the gradient-norm clip at 1.0 on or off: eight cells, three arms each, :data:`DESIGN_SEEDS`
seeds each, every run :data:`RUN_SAMPLES` generated samples from the reference warm start. The
measures are the final pool accuracy of the hardest quartile (quartiles of the prompts' starting
difficulty, from the step-0 ``pool/k`` averaged over every run) and, as the transfer control,
the final sampled accuracy on the 256 held-out prompts no run ever trains on
(``eval/accuracy_sampled``). :func:`power_analysis` sizes the seeds from the recorded reference
runs; the step-size control gives every SGD arm of a cell the same step length
(:func:`matched_sgd_lrs`, from a short pilot), a fraction of AdamW's chosen on a small grid for
both dial arms together (:func:`choose_fractions`), while the AdamW arms share the profile's rate;
:mod:`stddial_book.experiments.ablation.record` records every run with provenance as ``record``
does, and :func:`ablation_study` reads them back with every comparison counted.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stddial_book.experiments.testbed.logs import logged_update_norm
from stddial_book.theory.recipes import Recipe

__all__ = [
    "BASE",
    "ARMS",
    "CONTRASTS",
    "MEASURES",
    "Cell",
    "CELLS",
    "RUN_SAMPLES",
    "STEP_SAMPLES",
    "DESIGN_SEEDS",
    "comparison_count",
    "ablation_config",
    "pilot_config",
    "pilot_changes",
    "pilot_cells",
    "matched_sgd_lrs",
    "tuning_runs",
    "choose_fractions",
    "tuning_changes",
    "pool_accuracy",
    "run_label",
    "hardest_quartile_of",
    "run_measures",
    "seed_sds",
    "seeds_needed",
    "detectable_effect",
    "power_analysis",
    "design_cost",
    "ablation_summary",
    "ablation_study",
    "cell_settings",
]

#: The one recipe every arm shares (see the module's docstring for why this aggregation).
BASE = Recipe(name="dial", loss_aggregation="seq-mean-token-mean", clip_low=0.2, clip_high=0.2, kl_coef=0.0)

#: The arms: the base recipe dividing by σ, not dividing, and dividing with DAPO's filter.
ARMS: dict[str, Recipe] = {
    "divide": BASE.replace(name="dial-divide"),
    "no_divide": BASE.replace(name="dial-no-divide", scale_std=False),
    "filter": BASE.replace(name="dial-filter", dynamic_sampling=True),
}

#: The planned contrasts, (arm, minus arm): the dial's division, and the filter on top of it.
CONTRASTS: tuple[tuple[str, str], ...] = (("divide", "no_divide"), ("filter", "divide"))

#: The measures every contrast is tested on: the hardest quartile (primary), held-out (transfer control).
MEASURES = ("hardest_quartile", "heldout")


@dataclass(frozen=True)
class Cell:
    """One cell of the factor grid: group size G, optimizer, gradient clip at 1.0 or none.

    ``group_size`` is G, the completions per prompt (8 or 32 in the design); ``optimizer`` is
    ``"adamw"`` or ``"sgd"``; ``clip`` is True for a gradient-norm clip at 1.0, False for none."""

    group_size: int
    optimizer: str
    clip: bool

    @property
    def key(self) -> str:
        return f"G{self.group_size}-{self.optimizer}-{'clip' if self.clip else 'noclip'}"


#: The eight cells: G ∈ {8, 32} × {AdamW, SGD} × {clip 1.0, no clip}.
CELLS: tuple[Cell, ...] = tuple(
    Cell(g, o, c) for g, o, c in itertools.product((8, 32), ("adamw", "sgd"), (True, False))
)

#: Samples per step (prompts × G) in every cell: 32 × 8 or 8 × 32.
STEP_SAMPLES = 256

#: Generated samples per run: half the reference runs' 65,536 (128 steps). The hardest quartile
#: climbs from 0.03 to about 0.16-0.19 by then in the recorded runs, and its seed-to-seed SD is
#: 0.014 there against 0.038 at 65,536: an MDE of 0.04 over 32 comparisons needs 7 seeds an arm
#: there against 31 (:func:`power_analysis`), about a ninth of the CPU time. The price: 0.04 is a
#: quarter of the quartile's gain by then, against an eighth of the gain at 65,536.
RUN_SAMPLES = 32768

#: Seeds per arm and cell. :func:`power_analysis` on the recorded reference runs at 32,768 samples
#: gives 7 for an MDE of 0.04 at 80% power over the 32 comparisons (pooled SD 0.014), 9 at the SD's
#: upper 80% bound (0.017). The design takes 12, which keep the MDE at 0.04 up to an SD of 0.022
#: (1.6 times the estimate), because that SD was measured with AdamW, the clip and G = 8 only and
#: the SGD, no-clip and G = 32 cells may spread more (the study reports each cell's realised MDE);
#: 12 seeds cost about 3.5 CPU-hours in all (:func:`design_cost` with the pilot's 45 s a run).
DESIGN_SEEDS = 12

#: The pilot: steps per run, and SGD's learning rate there (small: the weights barely move, so
#: ``update_norm / lr`` is SGD's step per unit rate at the warm start).
PILOT_STEPS = 8
PILOT_SGD_LR = 1e-3

#: The grid of SGD step lengths, as fractions of AdamW's ``divide`` step (:func:`choose_fractions`),
#: and the seed of its runs (each a quarter of a run's samples: :func:`tuning_changes`).
SGD_FRACTIONS = (1.0, 0.25, 0.0625, 0.015625)
TUNING_SEED = 1000


def comparison_count(cells: Sequence[Cell] = CELLS) -> int:
    """The planned comparisons: every contrast on every measure in every cell (8 × 2 × 2 = 32).
    ``cells`` are the design's cells counted (default: all eight, :data:`CELLS`)."""
    return len(cells) * len(CONTRASTS) * len(MEASURES)


def run_label(arm: str, cell: Cell, seed: int) -> str:
    """A recorded run's directory name, e.g. ``no_divide-G32-sgd-noclip-seed3``, from its ``arm`` (a key
    of :data:`ARMS`), its ``cell`` (a :class:`Cell`) and its ``seed`` (a whole number)."""
    return f"{arm}-{cell.key}-seed{seed}"


def _parse_label(name: str) -> tuple[str, str, int]:
    """(arm, cell key, seed) of a :func:`run_label`."""
    head, seed = name.rsplit("-seed", 1)
    arm, cell = head.split("-", 1)
    return arm, cell, int(seed)


def cell_settings(
    cell: Cell, lr: float | None = None, step_samples: int = STEP_SAMPLES, run_samples: int = RUN_SAMPLES, **changes
) -> dict[str, Any]:
    """The TrainConfig fields :func:`ablation_config` sets (besides the recipe and the seed); smaller
    ``step_samples`` and ``run_samples`` make the same design at a toy size (the tests).

    ``cell`` is the :class:`Cell` that sets G, the optimizer and the clip; ``lr`` the learning rate
    (default None: the profile's); ``step_samples`` the generated samples per step (prompts × G,
    default :data:`STEP_SAMPLES`) and ``run_samples`` per run (default :data:`RUN_SAMPLES`);
    ``changes`` are further TrainConfig fields, which override the ones set here."""
    settings = {
        "group_size": cell.group_size,
        "prompts_per_step": step_samples // cell.group_size,
        "num_minibatches": 2,
        "sample_budget": run_samples,
        "eval_every": run_samples // step_samples,
        "eval_samples": 32,
        "checkpoint_every": 16,
        "identity_check_every": 0,
        "optimizer": cell.optimizer,
        "max_grad_norm": 1.0 if cell.clip else 0.0,
    }
    return {**settings, **({} if lr is None else {"lr": lr}), **changes}


def ablation_config(profile, arm: str, cell: Cell, seed: int, lr: float | None = None, **changes):
    """The :class:`~stddial_book.rl.configs.TrainConfig` of one run: the arm's recipe, the cell's G
    (prompts per step = :data:`STEP_SAMPLES` / G), optimizer and clip, :data:`RUN_SAMPLES` samples,
    the pool and held-out set measured at the start and the end only (the pool with 32 samples a
    prompt, held-out with 32 a prompt), ``lr`` (default: the profile's, 1e-4 for AdamW).

    ``profile`` is the :class:`~stddial_book.rl.profiles.Profile` whose training settings the run
    starts from; ``arm`` a key of :data:`ARMS` (another raises ValueError); ``cell`` the run's
    :class:`Cell`; ``seed`` its seed; ``changes`` are passed to :func:`cell_settings` (a smaller
    ``step_samples`` or ``run_samples``, or TrainConfig fields that override)."""
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {list(ARMS)}; got {arm!r}.")
    return profile.train_config(ARMS[arm], seed, **cell_settings(cell, lr, **changes))


def pilot_config(profile, arm: str, cell: Cell, seed: int = 0):
    """A pilot run: :data:`PILOT_STEPS` steps, no evaluation; SGD at :data:`PILOT_SGD_LR`. ``profile``
    is the :class:`~stddial_book.rl.profiles.Profile` it starts from, ``arm`` a key of :data:`ARMS`,
    ``cell`` the :class:`Cell` and ``seed`` the run's seed (default 0, the pilot's)."""
    return profile.train_config(ARMS[arm], seed, **pilot_changes(cell))


def pilot_changes(cell: Cell, step_samples: int = STEP_SAMPLES, **changes) -> dict[str, Any]:
    """:func:`pilot_config`'s fields (``changes`` as in :func:`ablation_config`; a run size in them is
    the main runs', not the pilot's, and is ignored). ``cell`` is the pilot run's :class:`Cell`;
    ``step_samples`` the generated samples per step (default :data:`STEP_SAMPLES`), the run lasting
    :data:`PILOT_STEPS` such steps."""
    changes.pop("run_samples", None)
    lr = PILOT_SGD_LR if cell.optimizer == "sgd" else None
    budget = PILOT_STEPS * step_samples
    return cell_settings(cell, lr, step_samples, budget, **{**changes, "eval_every": 0, "checkpoint_every": 4})


def pilot_cells(cells: Sequence[Cell] = CELLS) -> list[tuple[str, Cell]]:
    """The pilot runs (arm, cell) that :func:`matched_sgd_lrs` needs for the SGD cells of ``cells``:
    every arm under SGD, and ``divide`` under AdamW at the same G and clip (the anchor)."""
    runs = []
    for cell in cells:
        if cell.optimizer == "sgd":
            anchor = Cell(cell.group_size, "adamw", cell.clip)
            runs += [("divide", anchor)] + [(arm, cell) for arm in ARMS]
    return list(dict.fromkeys(runs))


def matched_sgd_lrs(pilot: dict[str, float], fractions: dict[str, float] | None = None) -> dict[str, float]:
    """SGD's learning rate per arm and cell: every arm's steps as long as ``fraction`` × AdamW's
    ``divide`` arm's.

    ``pilot`` maps :func:`run_label` names of pilot runs to their mean ``update_norm`` per step (the
    length of the step's whole parameter change); ``fractions`` maps an SGD cell key to its fraction
    (default 1; :func:`choose_fractions` picks them). Returns ``{arm-cell key: lr}`` for every SGD
    arm: ``lr = fraction · N(adamw, divide) / (N(sgd, arm) / PILOT_SGD_LR)`` at the same G and clip.

    Why matched norms and not a rate tuned per arm: the question is whether dividing by σ changes
    *which prompts* the step favours (σ against σ² per group), not a global step length that any
    rate absorbs. Plain SGD's step is lr · g (g clipped when the clip binds), linear in lr, so one
    short pilot per arm at a small rate measures its step per unit rate at the warm start, and the
    rates that give every arm the same step length follow exactly; unmatched, ``no_divide`` would
    step about half as far (the pilot: its gradient is 0.92 against divide's 1.9 at G = 8) and the
    contrast would measure step length. A best rate per arm would pick each arm's winner by the
    noisy measure the contrast then tests. The one length left free, the fraction of AdamW's, is
    chosen on a grid for both dial arms together (:func:`choose_fractions`): the pilot showed SGD at
    AdamW's full length wrecking the policy (held-out accuracy 0.32 → 0.19 in 128 steps). AdamW
    needs no match: its step m̂/(√v̂ + ε) does not change when the gradient is multiplied by a
    constant, so the arms share the profile's rate, and the study reports each arm's realised norm
    against ``divide``'s to show how far that held. The other normaliser is the clip: in the recorded
    reference runs it bound on every step of GRPO and DAPO (mean gradient norms 2.4 and 3.0 against
    1.0) and on none of Dr. GRPO's (0.5), hence the cells without it.
    """
    lrs = {}
    fractions = fractions or {}
    for group_size, clip in itertools.product(sorted({c.group_size for c in CELLS}), (True, False)):
        anchor_cell, sgd_cell = Cell(group_size, "adamw", clip), Cell(group_size, "sgd", clip)
        anchor = pilot.get(run_label("divide", anchor_cell, 0))
        for arm in ARMS:
            per_lr = pilot.get(run_label(arm, sgd_cell, 0))
            if anchor is None or per_lr is None:
                continue
            if not (anchor > 0 and per_lr > 0):
                raise ValueError(f"the pilot's update norms must be > 0; got {anchor} and {per_lr} for {arm}.")
            scale = fractions.get(sgd_cell.key, 1.0)
            lrs[f"{arm}-{sgd_cell.key}"] = float(scale * anchor / (per_lr / PILOT_SGD_LR))
    return lrs


def tuning_changes(
    cell: Cell, lr: float, step_samples: int = STEP_SAMPLES, run_samples: int = RUN_SAMPLES, **changes
) -> dict[str, Any]:
    """A tuning run's fields: a quarter of a run's samples (8,192), the pool measured at its end
    (held-out, which the choice does not read, with 4 samples a prompt).

    ``cell`` is the SGD :class:`Cell` tuned and ``lr`` the rate tried; ``step_samples`` and
    ``run_samples`` are the main runs' samples per step and per run (defaults :data:`STEP_SAMPLES`
    and :data:`RUN_SAMPLES`; the tuning run takes a quarter of ``run_samples``, at least one step);
    ``changes`` are further TrainConfig fields, as in :func:`cell_settings`."""
    budget = max(run_samples // 4, step_samples)
    return cell_settings(cell, lr, step_samples, budget, **{"eval_samples": 4, **changes})


def pool_accuracy(records: list[dict[str, Any]]) -> float:
    """The whole pool's accuracy at a run's last measurement: the mean over prompts of k/n.
    ``records`` is the run's log, a list of record dicts (:func:`~stddial_book.rl.runlog.load_run`);
    a log without a pool measurement raises ValueError."""
    last = _pool_rows(records)[-1]
    return float(np.mean(last["pool/k"]) / last["pool/n"])


def tuning_runs(cells: Sequence[Cell] = CELLS) -> list[tuple[str, str, Cell, float]]:
    """The grid that sets SGD's step length: (label, arm, cell, fraction) for both dial arms of every
    SGD cell at every fraction of :data:`SGD_FRACTIONS`, seed :data:`TUNING_SEED` (outside the design).
    ``cells`` are the cells considered (default: all eight); those under AdamW get no tuning runs."""
    return [
        (f"tune{i}-{run_label(arm, cell, TUNING_SEED)}", arm, cell, fraction)
        for cell in cells
        if cell.optimizer == "sgd"
        for i, fraction in enumerate(SGD_FRACTIONS)
        for arm in ("divide", "no_divide")
    ]


def choose_fractions(accuracy: dict[str, float], cells: Sequence[Cell] = CELLS) -> dict[str, float]:
    """Per SGD cell, the fraction of :data:`SGD_FRACTIONS` whose tuning runs (``accuracy``: label of
    :func:`tuning_runs` → the run's final whole-pool accuracy) reach the highest mean over the two
    dial arms (the smaller fraction on a tie). The whole pool and a seed of its own: the selection
    reads neither the hardest quartile nor a seed the contrasts test, and favours neither arm.
    ``cells`` are the cells considered (default: all eight); the SGD ones get a fraction."""
    chosen = {}
    for cell in cells:
        if cell.optimizer == "sgd":
            runs = tuning_runs([cell])
            score = {f: float(np.mean([accuracy[lab] for lab, _a, _c, g in runs if g == f])) for f in SGD_FRACTIONS}
            chosen[cell.key] = max(SGD_FRACTIONS, key=lambda f: (score[f], -f))
    return chosen


# ----------------------------------------------------------------------------- measures


def _pool_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = [r for r in records if "pool/k" in r]
    if not rows:
        raise ValueError("a run log holds no pool measurement (pool/k); train with pool_size and eval_every.")
    return rows


def hardest_quartile_of(runs: Sequence[list[dict[str, Any]]]) -> np.ndarray:
    """The pool prompts of the hardest quarter (a boolean mask): the lowest mean step-0 k/n over
    ``runs`` (a partition common to every arm, measured before any training; ties by position)."""
    start = np.mean([np.asarray(_pool_rows(r)[0]["pool/k"], float) / _pool_rows(r)[0]["pool/n"] for r in runs], 0)
    order = np.argsort(start, kind="stable")
    mask = np.zeros(start.size, dtype=bool)
    mask[order[: start.size // 4]] = True
    return mask


def run_measures(records: list[dict[str, Any]], hardest: np.ndarray, samples: float | None = None) -> dict[str, float]:
    """One run's hardest-quartile pool accuracy and held-out sampled accuracy at ``samples``
    generated (linear between measurements; default: the last measurement), the pool accuracy of
    the other three quartiles there (``other_quartiles``: where a longer step would show as well as
    a reallocation to the hard prompts), its mean update norm, its optimizer steps (``updates``),
    its mean gradient norm before any clipping and the share of its steps where that norm exceeds
    1 (where a clip at 1.0 binds, or would). ``records`` is the run's log, a list of record dicts;
    ``hardest`` the boolean mask over the pool's prompts of the hardest quartile
    (:func:`hardest_quartile_of`)."""
    rows = _pool_rows(records)
    generated = np.array([float(r.get("samples/generated", 0)) for r in rows])
    quartile = np.array([np.mean(np.asarray(r["pool/k"], float)[hardest]) / r["pool/n"] for r in rows])
    others = np.array([np.mean(np.asarray(r["pool/k"], float)[~hardest]) / r["pool/n"] for r in rows])
    steps = [r["updates"] for r in records if "updates" in r]
    held = [r for r in records if "eval/accuracy_sampled" in r]
    held_x = np.array([float(r.get("samples/generated", 0)) for r in held])
    held_y = np.array([float(r["eval/accuracy_sampled"]) for r in held])
    at = generated[-1] if samples is None else float(samples)
    grads = np.array([float(r["grad_norm"]) for r in records if "grad_norm" in r])
    return {
        "hardest_quartile": float(np.interp(at, generated, quartile)),
        "heldout": float(np.interp(at, held_x, held_y)) if held else float("nan"),
        "other_quartiles": float(np.interp(at, generated, others)),
        "update_norm": logged_update_norm(records),
        "updates": float(steps[-1]) if steps else float("nan"),
        "grad_norm": float(grads.mean()) if grads.size else float("nan"),
        "grad_above_one": float(np.mean(grads > 1.0)) if grads.size else float("nan"),
    }


# ----------------------------------------------------------------------------- power


def _pooled(values: dict[str, np.ndarray]) -> tuple[float, int]:
    """The pooled SD of several groups (each about its own mean) and its degrees of freedom."""
    df = sum(len(v) - 1 for v in values.values() if len(v) > 1)
    if df == 0:
        return float("nan"), 0
    ss = sum(float(np.sum((v - v.mean()) ** 2)) for v in values.values() if len(v) > 1)
    return math.sqrt(ss / df), df


def seed_sds(runs: dict[str, list[list[dict[str, Any]]]], samples: float | None = None) -> dict[str, Any]:
    """Seed-to-seed spread of the two measures in recorded runs (``runs``: recipe → the records of its
    seeds, in seed order), at ``samples`` generated (default: each run's end).

    The hardest quartile is taken over every run's step-0 measurement (:func:`hardest_quartile_of`).
    Per measure: ``values`` and ``sd`` (ddof 1) per recipe, ``pooled_sd`` and ``df`` over recipes,
    ``paired_sd`` per pair of recipes (the SD of the seed-by-seed differences, seeds matched by
    position) and ``mean`` per recipe; ``start`` is the hardest quartile's mean at step 0."""
    everything = [r for seeds in runs.values() for r in seeds]
    hardest = hardest_quartile_of(everything)
    measured = {k: [run_measures(r, hardest, samples) for r in seeds] for k, seeds in runs.items()}
    start = float(np.mean([run_measures(r, hardest, 0.0)["hardest_quartile"] for r in everything]))
    out: dict[str, Any] = {"start": start, "samples": samples}
    for measure in MEASURES:
        values = {k: np.array([m[measure] for m in ms]) for k, ms in measured.items()}
        pooled, df = _pooled(values)
        paired = {}
        for a, b in itertools.combinations(sorted(values), 2):
            n = min(len(values[a]), len(values[b]))
            if n > 1:
                paired[f"{a}-{b}"] = float(np.std(values[a][:n] - values[b][:n], ddof=1))
        out[measure] = {
            "values": {k: v.tolist() for k, v in values.items()},
            "mean": {k: float(v.mean()) for k, v in values.items()},
            "sd": {k: float(v.std(ddof=1)) if len(v) > 1 else float("nan") for k, v in values.items()},
            "pooled_sd": pooled,
            "df": df,
            "paired_sd": paired,
        }
    return out


def _critical(comparisons: int, alpha: float, power: float, df: int) -> float:
    """t_{1 − α/(2m)} + t_{power} at ``df`` degrees of freedom (two-sided, Bonferroni over m)."""
    from scipy import stats

    return float(stats.t.ppf(1 - alpha / (2 * comparisons), df) + stats.t.ppf(power, df))


def detectable_effect(
    sd: float, seeds: int, comparisons: int, alpha: float = 0.05, power: float = 0.8, paired: bool = False
) -> float:
    """The minimum detectable effect of a two-arm contrast with ``seeds`` seeds an arm: the true
    difference a two-sided t-test at α/``comparisons`` finds with probability ``power``:
    (t_{1−α/2m, df} + t_{power, df}) · sd · √(2/n) (unpaired, df = 2n − 2), or · √(1/n) with ``sd``
    the SD of paired differences (df = n − 1). ``alpha`` is the family-wise error rate in (0, 1)
    (default 0.05); ``paired`` picks the paired form (default False: unpaired). Fewer than two seeds
    detect nothing (infinity)."""
    if seeds < 2:
        return float("inf")
    df = seeds - 1 if paired else 2 * seeds - 2
    return _critical(comparisons, alpha, power, df) * sd * math.sqrt((1 if paired else 2) / seeds)


def seeds_needed(
    sd: float, mde: float, comparisons: int, alpha: float = 0.05, power: float = 0.8, paired: bool = False
) -> int:
    """The fewest seeds per arm whose :func:`detectable_effect` is at most ``mde``, a difference in the
    measure's units (> 0). ``sd`` is the seed-to-seed SD (≥ 0; of the paired differences when
    ``paired``, default False); ``comparisons`` the number m of the Bonferroni family; ``alpha`` the
    family-wise error rate in (0, 1) (default 0.05); ``power`` the probability of detection in
    (0, 1) (default 0.8)."""
    if not (sd >= 0 and mde > 0):
        raise ValueError(f"sd must be >= 0 and mde > 0; got {sd} and {mde}.")
    for n in range(2, 100_000):
        if detectable_effect(sd, n, comparisons, alpha, power, paired) <= mde:
            return n
    raise ValueError(f"no number of seeds below 100,000 detects {mde} with SD {sd}.")


def power_analysis(
    runs: dict[str, list[list[dict[str, Any]]]],
    samples: float | None = RUN_SAMPLES,
    mde: float = 0.04,
    comparisons: int | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    confidence: float = 0.8,
) -> dict[str, Any]:
    """Seeds per arm for an MDE of ``mde`` at ``power``, two-sided, Bonferroni over ``comparisons``
    (default :func:`comparison_count`), from the seed-to-seed SDs of recorded runs (:func:`seed_sds`
    at ``samples``).

    Per measure: the pooled SD and its upper ``confidence`` bound (χ² with the pooled df: five seeds
    a recipe pin an SD down loosely), the seeds an unpaired contrast needs at each (``seeds``,
    ``seeds_upper``), the seeds a paired one needs at the largest paired SD (``seeds_paired``: the
    arms share their seeds, but if pairing does not shrink the differences it buys nothing), and the
    MDE :data:`DESIGN_SEEDS` seeds reach at the pooled SD and at its bound.

    ``runs`` maps a recipe to the log records of its seeds, in seed order; ``samples`` is in generated
    samples (default :data:`RUN_SAMPLES`; None: each run's end); ``mde`` is in accuracy (default
    0.04); ``alpha`` is the family-wise error rate (default 0.05), ``power`` and ``confidence`` are
    probabilities in (0, 1) (default 0.8 each)."""
    from scipy import stats

    m = comparison_count() if comparisons is None else int(comparisons)
    spread = seed_sds(runs, samples)
    out: dict[str, Any] = {"comparisons": m, "alpha_per_comparison": alpha / m, "mde": mde, "power": power}
    out.update({"samples": samples, "start": spread["start"]})
    for measure in MEASURES:
        entry = spread[measure]
        sd, df = entry["pooled_sd"], entry["df"]
        upper = sd * math.sqrt(df / stats.chi2.ppf(1 - confidence, df))
        paired = max(entry["paired_sd"].values(), default=float("nan"))
        out[measure] = {
            **entry,
            "pooled_sd_upper": upper,
            "seeds": seeds_needed(sd, mde, m, alpha, power),
            "seeds_upper": seeds_needed(upper, mde, m, alpha, power),
            "seeds_paired": seeds_needed(paired, mde, m, alpha, power, paired=True),
            "mde_at_design": detectable_effect(sd, DESIGN_SEEDS, m, alpha, power),
            "mde_at_design_upper": detectable_effect(upper, DESIGN_SEEDS, m, alpha, power),
        }
    return out


def design_cost(
    seconds_per_run: dict[int, float], seeds: int = DESIGN_SEEDS, cells: Sequence[Cell] = CELLS, cores: int = 2
) -> dict[str, float]:
    """CPU-minutes of the full design (every arm × cell × seed) from the seconds one run takes at each
    G (``seconds_per_run``, measured by the pilot), and the wall hours on ``cores`` processes.
    ``seeds`` is the seeds per arm and cell (default :data:`DESIGN_SEEDS`); ``cells`` the cells
    counted (default: all eight)."""
    runs = len(ARMS) * len(cells) * seeds
    seconds = sum(len(ARMS) * seeds * float(seconds_per_run[c.group_size]) for c in cells)
    return {"runs": runs, "cpu_minutes": seconds / 60, "wall_hours": seconds / 3600 / cores}


# ----------------------------------------------------------------------------- analysis


def _contrast(a: np.ndarray, b: np.ndarray, m: int, alpha: float, draws: int, seed: int) -> dict[str, Any]:
    """One planned comparison: the difference of means; Welch's test (``se``, ``t``, ``df``, the
    two-sided ``p``, as :func:`scipy.stats.ttest_ind` with ``equal_var=False`` gives them) and its
    Bonferroni adjustment (× m, at most 1); Student-t intervals with Welch's degrees of freedom at 95%
    (``ci95``) and at the family's 1 − α/m (``ci_family``), which decide (the family interval
    excludes 0 exactly when the adjusted p is below α); percentile bootstrap intervals at the same
    two levels (``boot95``, ``boot_family``: :func:`scipy.stats.bootstrap`, shown beside, deciding
    nothing: with 12 seeds its far tails are too narrow); and the MDE the realised pooled SD gives
    at the smaller arm's seeds."""
    from stddial_book.experiments.statistics import bootstrap_difference, welch, welch_intervals

    out: dict[str, Any] = {"difference": float(a.mean() - b.mean()), "seeds": [int(a.size), int(b.size)]}
    if min(a.size, b.size) < 2:
        none = {"ci95": None, "ci_family": None, "boot95": None, "boot_family": None}
        nan = float("nan")
        return {**out, **none, "se": nan, "t": nan, "df": nan, "p": nan, "p_bonferroni": nan, "mde": None}
    levels = (0.95, 1 - alpha / m)
    result = welch(a, b)
    out.update({key: float(result[key]) for key in ("se", "t", "df", "p")})
    out["ci95"], out["ci_family"] = welch_intervals(result, levels)
    out["boot95"], out["boot_family"] = bootstrap_difference(a, b, levels, draws, seed)
    sd, _ = _pooled({"a": a, "b": b})
    out.update(p_bonferroni=min(1.0, out["p"] * m), mde=detectable_effect(sd, min(a.size, b.size), m, alpha))
    return out


def ablation_summary(
    runs: dict[str, list[dict[str, Any]]], alpha: float = 0.05, draws: int = 10_000, seed: int = 0
) -> dict[str, Any]:
    """Every planned comparison of the recorded ablation (``runs``: :func:`run_label` → records).

    The hardest quartile is fixed once from every run's step-0 pool measurement. Returns ``cells``:
    per cell key, per contrast (``"divide-no_divide"``, ``"filter-divide"``), per measure, what
    :func:`_contrast` gives, plus ``norm_ratio`` per arm (its mean update norm over ``divide``'s);
    ``comparisons``, the count m of the comparisons made (a contrast whose arms both ran, on each
    measure), which every Bonferroni level uses; ``means`` per cell and arm; ``seeds`` per cell and
    arm; ``values`` per cell and arm, each measure of :func:`run_measures` seed by seed (in seed
    order); ``start``, the hardest quartile's mean before training, and ``hardest_prompts``, its size.

    ``alpha`` is the family-wise error rate in (0, 1) (default 0.05); ``draws`` the bootstrap's
    resamples per interval (default 10,000); ``seed`` the bootstrap's seed (the i-th comparison uses
    ``seed`` + i; default 0)."""
    parsed = {label: _parse_label(label) for label in runs}
    hardest = hardest_quartile_of(list(runs.values()))
    measured: dict[str, dict[str, list[dict[str, float]]]] = {}
    for label, (arm, cell, _seed) in sorted(parsed.items(), key=lambda kv: kv[1][2]):
        measured.setdefault(cell, {}).setdefault(arm, []).append(run_measures(runs[label], hardest))
    planned = [(c, a, b) for c in measured for a, b in CONTRASTS if a in measured[c] and b in measured[c]]
    m = len(planned) * len(MEASURES)
    cells: dict[str, Any] = {}
    for i, (cell, a, b) in enumerate(planned):
        arms = measured[cell]
        entry = cells.setdefault(cell, {})
        entry[f"{a}-{b}"] = {
            measure: _contrast(
                np.array([r[measure] for r in arms[a]]),
                np.array([r[measure] for r in arms[b]]),
                m,
                alpha,
                draws,
                seed + i,
            )
            for measure in MEASURES
        }
    for cell, arms in measured.items():
        if "divide" in arms:
            base = np.mean([r["update_norm"] for r in arms["divide"]])
            cells.setdefault(cell, {})["norm_ratio"] = {
                arm: float(np.mean([r["update_norm"] for r in rs]) / base) for arm, rs in arms.items()
            }
    means = {
        c: {arm: {k: float(np.mean([r[k] for r in rs])) for k in MEASURES} for arm, rs in arms.items()}
        for c, arms in measured.items()
    }
    seeds = {c: {arm: len(rs) for arm, rs in arms.items()} for c, arms in measured.items()}
    keys = (*MEASURES, "other_quartiles", "update_norm", "updates", "grad_norm", "grad_above_one")
    values = {
        c: {arm: {k: [r[k] for r in rs] for k in keys} for arm, rs in arms.items()} for c, arms in measured.items()
    }
    start = float(np.mean([run_measures(r, hardest, 0.0)["hardest_quartile"] for r in runs.values()]))
    return {
        "cells": cells,
        "comparisons": m,
        "alpha": alpha,
        "means": means,
        "seeds": seeds,
        "values": values,
        "start": start,
        "hardest_prompts": int(hardest.sum()),
    }


def ablation_study(directory: str | os.PathLike, **options) -> dict[str, Any]:
    """:func:`ablation_summary` of the runs recorded in ``directory`` (every ``<arm>-<cell>-seed<k>``
    holding a log and provenance, as a folder or stored in the study's tables), with the commits they
    ran from and the pilot's rates. ``directory`` is the recorded folder (its ``pilot.json``, if
    present, gives ``pilot``); ``options`` (``alpha``, ``draws``, ``seed``) go to
    :func:`ablation_summary`."""
    from stddial_book.rl.runlog import load_run, run_folders

    directory = Path(directory)
    runs, commits = {}, set()
    for path in run_folders(directory):
        if "-seed" in path.name and path.name.split("-", 1)[0] in ARMS:
            provenance, records = load_run(path)
            runs[path.name] = records
            commits.add(provenance.get("git_commit", ""))
    if not runs:
        raise ValueError(f"{directory} holds no recorded ablation run (<arm>-<cell>-seed<k>).")
    summary = ablation_summary(runs, **options)
    summary["commits"] = sorted(commits)
    pilot = directory / "pilot.json"
    summary["pilot"] = json.loads(pilot.read_text()) if pilot.is_file() else None
    return summary
