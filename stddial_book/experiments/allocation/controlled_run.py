"""Chapter 8's controlled run with each step's group sizes chosen by an allocation rule (Part V).

One parameter θ per prompt, p = ς(θ), as in :mod:`stddial_book.experiments.controlled.bernoulli`. Each step
the rule (:func:`stddial_book.experiments.allocation.signal.build_rule`) spends its samples through
:func:`stddial_book.rl.allocation.allocate`, rewards drawn Bernoulli at each prompt's current p;
the groups it keeps form the step. The update is the recipe's loss gradient over those groups: the
advantages of :func:`stddial_book.theory.recipes.group_advantages` (ragged groups: each centred
and scaled on its own G samples) times the Bernoulli-logit score y − p, averaged over the step's
N kept samples (GRPO's sequence mean) and multiplied by B/G, with B the step size in samples
(:func:`build_rule`) and G = 8. A uniform step of B/G groups of G is then exactly chapter 8's
per-prompt update (1/G) Σ Aᵢ(yᵢ − p) (tests check it against
:func:`stddial_book.experiments.controlled.bernoulli.sampled_gradients`); a prompt given 2G samples weighs
twice, as in a trainer's ragged batch. The optimiser is plain SGD (θ ← θ + lr·g, chapter 8's) or
Adam over the whole θ vector (dense: a prompt not drawn this step has gradient 0 and still moves
by its momentum, as torch's Adam moves a parameter whose gradient is zero).

*Step-size control.* A rule can look better only because its updates are larger (Reinforce-Ada's
balanced groups of 4 all have σ̂ = ½, a silent-free batch has more non-zero rows). So each rule's
learning rate is matched to uniform GRPO's update norm: :func:`norm_matched_lr` runs ``pilot_seeds``
pilot runs at the base rate, measures the mean ‖Δθ‖₂ per step over the step budget, and scales
the rate by uniform GRPO's mean over the rule's. The study reports the realised norm ratio of
every run, so the control can be read off the output.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from stddial_book.core.checks import check_int, check_number, check_unit_interval, to_numpy
from stddial_book.experiments.allocation.signal import PLAN_AHEAD, build_rule, step_candidates
from stddial_book.experiments.controlled.bernoulli import with_binary_rewards
from stddial_book.rl.allocation import RULES, allocate, bernoulli_draw, record_allocation
from stddial_book.rl.allocation_base import Allocation
from stddial_book.rl.pool_state import new_pool_state
from stddial_book.theory.recipes import Recipe, as_recipe, group_advantages

__all__ = [
    "BASE_LEARNING_RATES",
    "AllocatedRun",
    "AllocatedRunResult",
    "allocation_gradient",
    "allocated_run",
    "mean_update_norm",
    "norm_matched_lr",
]

#: The optimisers and their base learning rates (SGD: chapter 8's 0.5).
BASE_LEARNING_RATES = {"sgd": 0.5, "adam": 0.05}
#: Adam's settings (torch's defaults).
ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8


@dataclass(frozen=True)
class AllocatedRun:
    """Settings of one allocated run. B = ``batch_prompts`` × ``group_size`` samples a step in the
    update; the step budget is ``steps``, the sample budget ``steps`` × B (what uniform G spends in
    ``steps`` steps). A run goes on until it has covered both budgets, then until ``stop_at`` pool
    accuracy or ``overrun`` × the sample budget, whichever comes first (``max_steps`` at most).
    ``optimizer`` is ``"sgd"`` (default) or ``"adam"`` (:data:`BASE_LEARNING_RATES`); ``max_size`` is the
    largest group (samples) the Knapsack and dial rules may give one prompt; ``decay`` in (0, 1] is the
    pool history's memory factor λ (:func:`stddial_book.rl.pool_state.new_pool_state`; 1 remembers every visit)."""

    batch_prompts: int = 16
    group_size: int = 8
    steps: int = 60
    optimizer: str = "sgd"
    overrun: float = 2.0
    stop_at: float = 1.0
    max_size: int = 32
    decay: float = 0.9
    max_steps: int = 2000

    def __post_init__(self) -> None:
        for name, low in (("batch_prompts", 1), ("group_size", 2), ("steps", 1), ("max_size", 2), ("max_steps", 1)):
            check_int(getattr(self, name), name, minimum=low)
        if self.optimizer not in BASE_LEARNING_RATES:
            raise ValueError(f"optimizer must be one of {sorted(BASE_LEARNING_RATES)}; got {self.optimizer!r}.")
        if not check_number(self.overrun, "overrun") >= 1.0:
            raise ValueError(f"overrun must be at least 1 (a multiple of the sample budget); got {self.overrun}.")
        if not 0.0 < check_number(self.decay, "decay") <= 1.0:
            raise ValueError(f"decay must lie in (0, 1]; got {self.decay}.")

    @property
    def step_samples(self) -> int:
        """B: the samples a step puts in the update."""
        return self.batch_prompts * self.group_size

    @property
    def sample_budget(self) -> int:
        return self.steps * self.step_samples


@dataclass
class AllocatedRunResult:
    """Per step boundary: ``generated`` (cumulative samples), ``accuracy`` (mean p over the pool);
    per step: ``kept``, ``discarded_silent``, ``discarded_surplus`` (samples), ``mixed_groups``,
    ``update_norm`` (‖Δθ‖₂). ``lr``: the learning rate used; ``final_p``: p after the last step."""

    lr: float
    generated: np.ndarray
    accuracy: np.ndarray
    kept: np.ndarray
    discarded_silent: np.ndarray
    discarded_surplus: np.ndarray
    mixed_groups: np.ndarray
    update_norm: np.ndarray
    final_p: np.ndarray


def allocation_gradient(p: np.ndarray, allocation: Allocation, recipe: Recipe | str, step_samples: int, G: int = 8):
    """The step's gradient in θ (one entry per prompt of the pool) from the groups ``allocation`` kept.

    Prompt x gets (B/G)(1/N) Σ_{i in x's group} Aᵢ(yᵢ − p_x), N the kept samples, B = ``step_samples``;
    the advantages are the recipe's (:func:`group_advantages`, ragged groups), the answers of a group
    with k correct of G are k ones and G − k zeros (the gradient does not depend on their order).
    ``p`` is the pool's current pass rates (1-D, one per prompt), ``recipe`` a
    :class:`~stddial_book.theory.recipes.Recipe` or its name, and ``G`` the nominal group size of the B/G
    factor (default 8).
    """
    grad = np.zeros(p.size)
    sizes, correct, prompts = allocation.group_sizes, allocation.num_correct, allocation.prompts
    if sizes.size == 0:
        return grad
    owner = np.repeat(prompts, sizes)
    rank = np.arange(owner.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    answers = (rank < np.repeat(correct, sizes)).astype(np.float64)
    advantages = group_advantages(answers, sizes.tolist(), with_binary_rewards(as_recipe(recipe)))
    weighted = advantages * (answers - p[owner])
    grad += np.bincount(owner, weights=weighted, minlength=p.size)
    return grad * (step_samples / G) / owner.size


class _Optimiser:
    """θ ← θ + Δθ with Δθ from plain SGD (lr·g) or Adam (lr·m̂/(√v̂ + ε)), ascending the objective."""

    def __init__(self, kind: str, lr: float, size: int) -> None:
        self.kind, self.lr, self.t = kind, lr, 0
        self.m, self.v = np.zeros(size), np.zeros(size)

    def step(self, grad: np.ndarray) -> np.ndarray:
        if self.kind == "sgd":
            return self.lr * grad
        b1, b2 = ADAM_BETAS
        self.t += 1
        self.m = b1 * self.m + (1.0 - b1) * grad
        self.v = b2 * self.v + (1.0 - b2) * grad**2
        m_hat, v_hat = self.m / (1.0 - b1**self.t), self.v / (1.0 - b2**self.t)
        return self.lr * m_hat / (np.sqrt(v_hat) + ADAM_EPS)


def _logits(p0: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):  # p = 0 or 1: θ = ∓inf, a prompt that never moves
        return np.log(p0) - np.log1p(-p0)


def _checked(initial_p, rule: str, config: AllocatedRun) -> np.ndarray:
    if rule not in RULES:
        raise ValueError(f"rule must be one of {sorted(RULES)}; got {rule!r}.")
    if not isinstance(config, AllocatedRun):
        raise TypeError(f"config must be an AllocatedRun; got {type(config).__name__}.")
    p0 = to_numpy(initial_p, "initial_p")
    check_unit_interval(p0, "initial_p")
    if p0.ndim != 1 or p0.size < 2:
        raise ValueError(f"initial_p must be a 1-D pool of at least 2 prompts; got shape {p0.shape}.")
    return p0


def _finished(config: AllocatedRun, steps: int, generated: float, accuracy: float) -> bool:
    budget = config.sample_budget
    if steps < config.steps or generated < budget:
        return False
    return accuracy >= config.stop_at or generated >= config.overrun * budget or steps >= config.max_steps


def allocated_run(
    initial_p, rule: str, recipe: Recipe | str, config: AllocatedRun = AllocatedRun(), seed: int = 0, lr=None
) -> AllocatedRunResult:
    """Train the Bernoulli-logit pool ``initial_p`` with rule ``rule`` choosing each step's groups and
    ``recipe``'s update (module text); ``lr`` defaults to the optimiser's base rate (:data:`BASE_LEARNING_RATES`).
    ``config`` (an :class:`AllocatedRun`) holds the step size, budgets and optimiser; ``seed`` (an int >= 0)
    seeds the reward draws, together with the rule's index, so rules on one seed see different draws."""
    p0 = _checked(initial_p, rule, config)
    rate = BASE_LEARNING_RATES[config.optimizer] if lr is None else check_number(lr, "lr")
    rng = np.random.default_rng([check_int(seed, "seed", minimum=0), 1 + list(RULES).index(rule)])
    the_rule, budget = build_rule(rule, config.batch_prompts, config.group_size, config.max_size)
    state, theta = new_pool_state(p0.size, decay=config.decay), _logits(p0)
    optimiser = _Optimiser(config.optimizer, rate, p0.size)
    rows: dict[str, list] = {"generated": [0.0], "accuracy": [float(p0.mean())]}
    while not _finished(config, len(rows["generated"]) - 1, rows["generated"][-1], rows["accuracy"][-1]):
        p = 1.0 / (1.0 + np.exp(-theta))
        if rule == "knapsack_oracle":
            the_rule = dataclasses.replace(the_rule, solve_rates=p)
        cand = step_candidates(rule, p.size, config.batch_prompts, rng)
        allocation = allocate(the_rule, state, budget, bernoulli_draw(p, rng), rng, candidates=cand)
        record_allocation(state, allocation)
        delta = optimiser.step(allocation_gradient(p, allocation, recipe, config.step_samples, config.group_size))
        theta = theta + delta
        g, k = allocation.group_sizes, allocation.num_correct
        for key, value in (
            ("generated", rows["generated"][-1] + allocation.generated),
            ("accuracy", float(np.mean(1.0 / (1.0 + np.exp(-theta))))),
            ("kept", allocation.kept),
            ("discarded_silent", allocation.discarded_silent),
            ("discarded_surplus", allocation.discarded_surplus),
            ("mixed_groups", int(((k > 0) & (k < g)).sum())),
            ("update_norm", float(np.linalg.norm(delta))),
        ):
            rows.setdefault(key, []).append(value)
    arrays = {key: np.asarray(values) for key, values in rows.items()}
    return AllocatedRunResult(lr=rate, final_p=1.0 / (1.0 + np.exp(-theta)), **arrays)


def mean_update_norm(result: AllocatedRunResult, steps: int) -> float:
    """The mean ‖Δθ‖₂ per step of run ``result`` over its first ``steps`` steps (the step budget)."""
    return float(np.mean(result.update_norm[:steps]))


def norm_matched_lr(
    initial_p, rule: str, recipe: Recipe | str, config: AllocatedRun, reference_norm: float, pilot_seeds=(10_001,)
) -> float:
    """The learning rate at which ``rule`` under ``recipe`` takes uniform GRPO's mean step.

    Pilot runs at the optimiser's base rate (seeds ``pilot_seeds``, apart from a study's seeds)
    give the rule's mean ‖Δθ‖₂ per step over the step budget; the base rate is scaled by
    ``reference_norm`` (uniform GRPO's mean, measured the same way) over it. The norm is linear in
    the rate along a fixed trajectory (exactly for SGD; for Adam, once its ε is negligible); the
    trajectory itself changes with the rate, which is why the study reports the realised ratio.
    ``initial_p`` is the pilot pool's pass rates, ``config`` the :class:`AllocatedRun` settings (the pilots
    ignore its ``stop_at``). A rule that never moves the pool keeps the base rate.
    """
    base = BASE_LEARNING_RATES[config.optimizer]
    pilot = dataclasses.replace(config, stop_at=0.0)
    norms = [mean_update_norm(allocated_run(initial_p, rule, recipe, pilot, s), config.steps) for s in pilot_seeds]
    own = float(np.mean(norms))
    if own <= 0.0:
        return base  # the rule never moved the pool (every group silent): no rate would change that
    return base * float(reference_norm) / own


def plan_ahead(rule: str) -> bool:
    """True for a rule that reallocates one batch's samples (:data:`PLAN_AHEAD`)."""
    return rule in PLAN_AHEAD


# --- the study: every rule × recipe × optimiser over seeds, on three pools --------------------

#: The pools: chapter 8's (Big-Math's interior, clipped to [0.02, 0.98]), Big-Math whole (p = k/64,
#: k = 0 and 64 included: those prompts never move), and a bimodal one (half Beta(1, 15), half
#: Beta(15, 1), clipped to [0.01, 0.99]).
POOLS = ("book", "bigmath", "bimodal")
#: The targets, as fractions of uniform GRPO's sample budget.
TARGET_FRACTIONS = (1 / 15, 1 / 5, 1.0)


def study_pool(name: str, num_prompts: int, rng: np.random.Generator) -> np.ndarray:
    """``num_prompts`` initial pass rates of pool ``name`` (:data:`POOLS`)."""
    from stddial_book.corpora.bigmath_figure import load_big_math_histogram
    from stddial_book.experiments.allocation.signal import histogram_pool
    from stddial_book.experiments.controlled.bernoulli import ControlledRun, initial_solve_rates

    count = check_int(num_prompts, "num_prompts", minimum=4)
    if name == "book":
        big = load_big_math_histogram()
        return initial_solve_rates(big.solve_rates, big.counts, ControlledRun(num_prompts=count), rng)
    if name == "bigmath":
        return histogram_pool(load_big_math_histogram(), count, rng)
    if name == "bimodal":
        hard = rng.random(count) < 0.5
        return np.clip(np.where(hard, rng.beta(1.0, 15.0, count), rng.beta(15.0, 1.0, count)), 0.01, 0.99)
    raise ValueError(f"name must be one of {POOLS}; got {name!r}.")


def samples_to_target(result: AllocatedRunResult, target: float) -> float:
    """Generated samples at which the pool accuracy first reaches ``target`` (linear between step
    boundaries); NaN if the run never reached it."""
    above = np.flatnonzero(result.accuracy >= target)
    if above.size == 0:
        return float("nan")
    i = int(above[0])
    if i == 0:
        return 0.0
    a0, a1 = result.accuracy[i - 1], result.accuracy[i]
    g0, g1 = result.generated[i - 1], result.generated[i]
    return float(g0 + (g1 - g0) * (target - a0) / (a1 - a0))


def accuracy_at(result: AllocatedRunResult, samples: float) -> float:
    """Pool accuracy after ``samples`` generated samples (linear between step boundaries)."""
    return float(np.interp(samples, result.generated, result.accuracy))


def _measure(result: AllocatedRunResult, targets, config: AllocatedRun, reference_norm: float) -> dict:
    """One run's numbers for the study."""
    budget, steps = config.sample_budget, config.steps
    grid = np.linspace(0.0, budget, 16)
    generated = result.generated[-1]
    return {
        "samples_to_target": [samples_to_target(result, t) for t in targets],
        "accuracy_at_sample_budget": accuracy_at(result, budget),
        "accuracy_at_step_budget": float(result.accuracy[steps]),
        "generated_at_step_budget": float(result.generated[steps]),
        "curve": [accuracy_at(result, g) for g in grid],
        "norm_ratio": mean_update_norm(result, steps) / reference_norm,
        "lr": result.lr,
        "steps_run": int(result.update_norm.size),
        "kept_share": float(result.kept.sum() / generated) if generated else 0.0,
        "silent_share": float(result.discarded_silent.sum() / generated) if generated else 0.0,
        "surplus_share": float(result.discarded_surplus.sum() / generated) if generated else 0.0,
    }


def _matched_rates(p_pilot, rules, recipes, config: AllocatedRun) -> tuple[float, dict]:
    """Uniform GRPO's mean pilot norm and each (recipe, rule)'s matched learning rate."""
    pilot = dataclasses.replace(config, stop_at=0.0)
    reference = mean_update_norm(allocated_run(p_pilot, "uniform", "grpo", pilot, 10_001), config.steps)
    rates = {
        (recipe, rule): norm_matched_lr(p_pilot, rule, recipe, config, reference)
        for recipe in recipes
        for rule in rules
    }
    return reference, rates


def _targets(p0s, config: AllocatedRun) -> tuple[list[float], list[AllocatedRunResult]]:
    """Uniform GRPO's runs at the base rate and the targets: its mean pool accuracy after
    :data:`TARGET_FRACTIONS` of its sample budget."""
    exact = dataclasses.replace(config, stop_at=0.0)
    runs = [allocated_run(p0, "uniform", "grpo", exact, seed) for seed, p0 in enumerate(p0s)]
    budget = config.sample_budget
    return [float(np.mean([accuracy_at(r, f * budget) for r in runs])) for f in TARGET_FRACTIONS], runs


def allocation_run_study(
    pools=POOLS,
    rules=None,
    recipes=("grpo", "dr_grpo"),
    optimizers=("sgd", "adam"),
    seeds: int = 20,
    num_prompts: int = 64,
    config: AllocatedRun = AllocatedRun(),
) -> dict:
    """Every rule × recipe × optimiser on every pool over ``seeds`` seeds, step size matched.

    Per pool and seed one draw of ``num_prompts`` initial rates, shared by every run (paired). Per
    pool and optimiser: the learning rates matched to uniform GRPO's update norm
    (:func:`norm_matched_lr`, one pilot draw of the pool), and the targets (:func:`_targets`). Returns
    ``{"targets": {pool/optimizer: [...]}, "runs": {pool/optimizer/recipe/rule: [per-seed dict]}}``.
    """
    from stddial_book.experiments.allocation.signal import STUDY_RULES

    rules = STUDY_RULES if rules is None else tuple(rules)
    seeds = check_int(seeds, "seeds", minimum=2)
    out: dict = {"targets": {}, "runs": {}, "reference_norm": {}}
    for pool in pools:
        p0s = [
            study_pool(pool, num_prompts, np.random.default_rng([seed, 7, POOLS.index(pool)])) for seed in range(seeds)
        ]
        p_pilot = study_pool(pool, num_prompts, np.random.default_rng([10_001, 7, POOLS.index(pool)]))
        for opt in optimizers:
            cfg = dataclasses.replace(config, optimizer=opt)
            reference, rates = _matched_rates(p_pilot, rules, recipes, cfg)
            targets, _ = _targets(p0s, cfg)
            run_cfg = dataclasses.replace(cfg, stop_at=targets[-1])
            out["targets"][f"{pool}/{opt}"] = targets
            out["reference_norm"][f"{pool}/{opt}"] = reference
            for recipe in recipes:
                for rule in rules:
                    lr = rates[(recipe, rule)]
                    out["runs"][f"{pool}/{opt}/{recipe}/{rule}"] = [
                        _measure(allocated_run(p0, rule, recipe, run_cfg, seed, lr), targets, cfg, reference)
                        for seed, p0 in enumerate(p0s)
                    ]
    return out
