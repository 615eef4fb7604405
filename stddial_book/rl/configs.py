"""The settings of a testbed run: the task, the SFT warm start and the RL run, validated (chapters 9-12)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from stddial_book.core.checks import MAX_SEED, check_number
from stddial_book.rl.tasks import Problem
from stddial_book.theory.recipes import Recipe, get_recipe

__all__ = ["TaskConfig", "SFTConfig", "TrainConfig", "OPTIMIZERS"]

#: The most digits a task's numbers may have, and the most problems a pool may hold (built in memory).
MAX_DIGITS, MAX_PROBLEMS = 18, 10**7

#: The RL optimizers a :class:`TrainConfig` may name (built by :func:`stddial_book.rl.update.build_optimizer`).
OPTIMIZERS = ("adamw", "sgd")


@dataclass(frozen=True)
class TaskConfig:
    """The problem pool: D-digit additions for each D in ``digits`` (mixed in equal numbers).

    Difficulty buckets are ``D{digits}``, the digit count (see :func:`bucket_of`). ``num_train`` and
    ``num_heldout`` are the numbers of training and held-out problems in all, split as evenly as
    possible over the digit counts (the two sets never share a problem); ``seed`` fixes the problems
    and their order (:func:`~stddial_book.rl.batches.make_problems`).
    """

    digits: tuple[int, ...] = (2,)
    num_train: int = 4000
    num_heldout: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.digits, (str, bytes)) or not hasattr(self.digits, "__iter__"):
            raise TypeError(f"digits must be a sequence of digit counts, e.g. (2,) or (2, 3); got {self.digits!r}.")
        digits = tuple(self.digits)
        if not digits:
            raise ValueError("digits must name at least one digit count, e.g. (2,) or (2, 3).")
        if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1 for d in digits):
            raise ValueError(f"digits must be whole numbers >= 1, e.g. (2, 3); got {self.digits!r}.")
        if len(set(digits)) != len(digits):
            raise ValueError(f"digits names a digit count twice ({self.digits!r}); list each once, e.g. (2, 3).")
        object.__setattr__(self, "digits", tuple(int(d) for d in digits))
        _require_int(self, ("num_train", "num_heldout", "seed"))
        _require_seed(self)
        if max(self.digits) > MAX_DIGITS:
            raise ValueError(f"digits must be at most {MAX_DIGITS} (the book's tasks use 1 to 3); got {self.digits!r}.")
        for name in ("num_train", "num_heldout"):
            if getattr(self, name) < len(self.digits):
                raise ValueError(f"{name} must be at least one problem per digit count; got {getattr(self, name)}.")
        _require_positive(self, ("num_train", "num_heldout"), MAX_PROBLEMS)


@dataclass(frozen=True)
class SFTConfig:
    """The warm start: AdamW on answer-token cross-entropy until the held-out pass rate is reached.

    DESIGN §10: lr 1e-3 and batch 128 learn 2-digit addition on one CPU core; the pass rate
    jumps abruptly, so it is measured every ``eval_every`` steps on ``eval_prompts`` held-out
    prompts with ``eval_samples`` temperature-1 samples each, and SFT stops at
    ``target_pass_rate`` (or at ``max_steps``, reported as not reached). The estimate that
    stops SFT is biased upwards (it is the first of many noisy estimates to cross the target), so
    the pass rate reported is measured again afterwards with fresh samples: ``final_eval_samples``
    per held-out prompt, on every held-out prompt. ``lr`` is AdamW's learning rate (constant, no weight
    decay); ``batch_size`` the training problems per step (drawn at random without repeats, at most the
    whole pool); ``seed`` seeds those draws and the evaluations' sampling.
    """

    lr: float = 1e-3
    batch_size: int = 128
    target_pass_rate: float = 0.6
    eval_every: int = 25
    eval_prompts: int = 128
    eval_samples: int = 4
    max_steps: int = 3000
    seed: int = 0
    final_eval_samples: int = 16

    def __post_init__(self) -> None:
        _require_int(
            self,
            ("batch_size", "eval_every", "eval_prompts", "eval_samples", "max_steps", "seed", "final_eval_samples"),
        )
        _require_number(self, ("lr", "target_pass_rate"))
        _require_seed(self)
        if not 0.0 < self.target_pass_rate <= 1.0:
            raise ValueError(f"target_pass_rate must lie in (0, 1]; got {self.target_pass_rate}.")
        _require_positive(
            self, ("batch_size", "eval_every", "eval_prompts", "eval_samples", "max_steps", "final_eval_samples")
        )
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0; got {self.lr}.")


@dataclass(frozen=True)
class TrainConfig:
    """One RL run: the recipe, the batch geometry, the budget and the bookkeeping.

    The fields (their defaults are those of the signature):

    - ``recipe``: the dial's setting (a :class:`Recipe` or a preset name).
    - ``group_size``: G, samples per prompt (at least 2).
    - ``prompts_per_step``: groups in one rollout batch (the batch holds ``prompts_per_step · G``
      samples; with dynamic sampling, that many *non-silent* groups).
    - ``num_minibatches``: optimizer steps per rollout batch; must divide ``prompts_per_step``
      (minibatches hold whole groups).
    - ``micro_batch_size``: samples per forward/backward pass inside a minibatch (gradient
      accumulation, for memory); must divide the minibatch; ``None`` = the whole minibatch.
    - ``lr``: the optimizer's learning rate (constant, no weight decay).
    - ``max_grad_norm``: gradient-norm clip per optimizer step (TRL's default 1.0); 0 (or ``None``,
      stored as 0.0) clips nothing, as in TRL and ``transformers``. The gradient's norm is
      logged (``grad_norm``) either way.
    - ``optimizer``: ``"adamw"`` (AdamW, the default: β = (0.9, 0.999), ε = 1e-8, no weight decay)
      or ``"sgd"`` (plain SGD: θ ← θ − lr · g, no momentum, no weight decay), for the
      ablation that asks whether Adam's normalisation hides the dial's scale (chapter 13).
      Like the allocation fields, it appears in :meth:`to_dict` only when it is not the
      default, so an AdamW run's settings and cache key read as they did before.
    - ``max_new_tokens``: L_max, the generation cap (and Dr. GRPO's normaliser).
    - ``sample_budget``: stop once this many samples have been generated (discarded ones count).
    - ``max_rounds``: cap on DAPO's refill rounds per step (verl's ``max_num_gen_batches``).
    - ``eval_every``: evaluate on the held-out set every this many steps (and at the start and end);
      0 never evaluates (benchmarks).
    - ``eval_every_samples``: with evaluation on (``eval_every`` > 0), evaluate instead at the first
      step after each multiple of this many generated samples (and at the start and end), so that
      rules whose steps generate different numbers of samples (DAPO's refill, screening) are measured
      at the same sample counts; 0 (the default) keeps the step schedule. Like ``optimizer``, it
      appears in :meth:`to_dict` only when it is not the default.
    - ``eval_samples``: temperature-1 samples per held-out prompt for the sampled accuracy.
    - ``checkpoint_every``: write a checkpoint every this many steps (and at the end).
    - ``temperature``: sampling temperature of rollouts (1 = the policy itself).
    - ``seed``: seeds the prompt order, the sampler and the minibatch order.
    - ``pool_size``: train on the first ``pool_size`` training problems only (``None``: all of
      them). A small pool is visited many times, so each prompt's solve rate can be
      followed through the run (chapters 9-13): at the start and at every evaluation the
      whole pool is measured with ``pool_samples`` samples per prompt and logged as
      ``pool/k`` (correct counts, in pool order) and ``pool/n``.
    - ``pool_samples``: samples per pool prompt at each measurement.
    - ``identity_check_every``: every this many steps (and at the first), check the identity on
      real gradients inside the update: for up to ``identity_check_groups`` mixed groups of
      each minibatch, the group's own gradient at the weights that minibatch sees against
      w (ḡ₊ − ḡ₋) there (:func:`stddial_book.rl.gradcheck.identity_drift`). Exact to float
      rounding on the first minibatch, a measured drift on later ones; 0 turns it off. It
      reads the model and changes nothing, so a run is the same with or without it.
    - ``identity_check_groups``: groups checked per minibatch at a check step.
    - ``allocation``: the rule that decides each step's groups, a name of
      :data:`stddial_book.rl.allocation.RULES` (Part V). ``"uniform"`` is the loop of
      chapters 10-12 (``prompts_per_step`` groups of G, DAPO's dynamic sampling when the
      recipe has it); any other rule is asked for the step's groups from the run's pool
      history (:class:`~stddial_book.rl.pool_state.PoolState`), and the update runs on the
      groups it keeps, each at its own size. The rule replaces the recipe's dynamic sampling;
      the recipe's loss, clipping and length handling stay.
    - ``allocation_options``: the rule's settings (``RULES[allocation](**options)``), a dict of
      numbers (``solve_rates`` a list); ``"prior"`` (a pair) and ``"decay"`` set the pool
      history's Beta estimator instead. DAPO's and GRESO's ``group_size``,
      ``batch_prompts`` and ``max_rounds`` default to ``group_size``,
      ``prompts_per_step`` and ``max_rounds`` here.
    - ``allocation_budget``: samples a step may generate under a rule, screening and redraws
      included (``None``: ``prompts_per_step · group_size``, a uniform step's cost); the
      run still stops at ``sample_budget`` generated samples, so rules compare in samples.
    - ``allocation_candidates``: prompts of the pool offered to the rule each step, drawn at random
      (``None``: the whole pool).
    """

    recipe: Recipe | str = "grpo"
    group_size: int = 8
    prompts_per_step: int = 32
    num_minibatches: int = 2
    micro_batch_size: int | None = None
    lr: float = 1e-4
    max_grad_norm: float | None = 1.0
    max_new_tokens: int = 8
    sample_budget: int = 16384
    max_rounds: int = 8
    eval_every: int = 8
    eval_samples: int = 8
    checkpoint_every: int = 16
    eval_every_samples: int = 0
    temperature: float = 1.0
    seed: int = 0
    pool_size: int | None = None
    pool_samples: int = 32
    identity_check_every: int = 0
    identity_check_groups: int = 2
    allocation: str = "uniform"
    allocation_options: Any = ()
    allocation_budget: int | None = None
    allocation_candidates: int | None = None
    optimizer: str = "adamw"

    def __post_init__(self) -> None:
        self._check_types()
        self._check_geometry()
        self._check_bookkeeping()
        self._check_rates()
        self._check_allocation()

    def _check_allocation(self) -> None:
        """A known rule whose options build it, and a step budget that buys at least one group;
        the options are stored as sorted (name, value) pairs (lists as tuples), so the config
        stays hashable (Part V)."""
        from stddial_book.rl.allocation import RULES

        if not isinstance(self.allocation, str) or self.allocation not in RULES:
            raise ValueError(f"allocation must name a rule of {sorted(RULES)}; got {self.allocation!r}.")
        object.__setattr__(self, "allocation_options", _frozen_options(self.allocation_options))
        _require_int(self, ("allocation_budget", "allocation_candidates"), optional=True)
        if self.allocation == "uniform":
            if self.allocation_options or self.allocation_budget is not None or self.allocation_candidates is not None:
                raise ValueError(
                    "allocation 'uniform' runs prompts_per_step groups of group_size; allocation_options, "
                    "allocation_budget and allocation_candidates apply to the other rules only."
                )
            return
        if self.recipe.dynamic_sampling and self.allocation != "dapo":
            raise ValueError(
                f"recipe {self.recipe.name!r} refills silent groups (dynamic_sampling), and allocation "
                f"{self.allocation!r} decides the step's groups itself, so the refill would not happen: use "
                "allocation 'uniform' or 'dapo' (the refill as a rule), or the recipe with dynamic_sampling=False."
            )
        rule = self.allocation_rule()
        if self.allocation == "knapsack_oracle" and rule.solve_rates is None:
            raise ValueError(
                "allocation 'knapsack_oracle' needs allocation_options={'solve_rates': [...]}: one true "
                "pass rate per pool prompt (use 'knapsack' to plan from the run's estimates)."
            )
        if self.allocation_candidates is not None and self.allocation_candidates < 1:
            raise ValueError(f"allocation_candidates must be at least 1 or None; got {self.allocation_candidates}.")
        cheapest = _smallest_step(rule)
        if self.step_budget < cheapest:
            raise ValueError(
                f"allocation_budget ({self.step_budget}) buys no group of rule {self.allocation!r}, whose "
                f"smallest step costs {cheapest} samples; raise allocation_budget."
            )

    def allocation_rule(self):
        """The allocation rule this run asks for its groups (``None`` for ``"uniform"``, the plain loop)."""
        from stddial_book.rl.allocation import RULES

        if self.allocation == "uniform":
            return None
        options = {k: v for k, v in self.allocation_options if k not in ("prior", "decay")}
        if self.allocation in ("dapo", "greso"):
            defaults = {"group_size": self.group_size, "batch_prompts": self.prompts_per_step}
            options = {**defaults, "max_rounds": self.max_rounds, **options}
        try:
            return RULES[self.allocation](**options)
        except TypeError as err:
            raise ValueError(f"allocation_options do not fit rule {self.allocation!r} ({err}).") from None

    def pool_estimator(self) -> dict[str, Any]:
        """The pool history's estimator settings (:func:`~stddial_book.rl.pool_state.new_pool_state`)."""
        options = dict(self.allocation_options)
        return {"prior": tuple(options.get("prior", (1.0, 1.0))), "decay": options.get("decay", 1.0)}

    @property
    def step_budget(self) -> int:
        """Samples one step may generate under an allocation rule (screening and redraws included)."""
        return self.prompts_per_step * self.group_size if self.allocation_budget is None else self.allocation_budget

    def _check_types(self) -> None:
        """The recipe (a preset name becomes its :class:`Recipe`), whole-number fields and the seed
        (chapter 10)."""
        recipe = get_recipe(self.recipe) if isinstance(self.recipe, str) else self.recipe
        if not isinstance(recipe, Recipe):
            raise ValueError(f"recipe must be a Recipe or a preset name; got {type(self.recipe).__name__}.")
        object.__setattr__(self, "recipe", recipe)
        _require_int(
            self,
            (
                "group_size",
                "prompts_per_step",
                "num_minibatches",
                "max_new_tokens",
                "sample_budget",
                "max_rounds",
                "eval_every",
                "eval_samples",
                "checkpoint_every",
                "eval_every_samples",
                "seed",
                "pool_samples",
                "identity_check_every",
                "identity_check_groups",
            ),
        )
        _require_int(self, ("micro_batch_size", "pool_size"), optional=True)
        _require_seed(self)

    def _check_geometry(self) -> None:
        """The batch's shape and the run's counts: G ≥ 2, counts ≥ 1 (``eval_every`` ≥ 0),
        minibatches of whole groups, micro-batches that divide a minibatch, and a pool that can
        fill a step with distinct prompts (chapter 10)."""
        if self.group_size < 2:
            raise ValueError(
                f"group_size G must be at least 2 (a group of one has no spread to learn from); got {self.group_size}."
            )
        if self.eval_every < 0:
            raise ValueError(f"eval_every must be >= 0 (0: never evaluate); got {self.eval_every}.")
        if self.eval_every_samples < 0:
            raise ValueError(
                f"eval_every_samples must be >= 0 (0: evaluate every eval_every steps); got {self.eval_every_samples}."
            )
        _require_positive(
            self,
            (
                "prompts_per_step",
                "num_minibatches",
                "max_new_tokens",
                "sample_budget",
                "max_rounds",
                "eval_samples",
                "checkpoint_every",
            ),
        )
        if self.prompts_per_step % self.num_minibatches:
            raise ValueError(
                f"prompts_per_step ({self.prompts_per_step}) is not divisible by num_minibatches "
                f"({self.num_minibatches}); minibatches hold whole groups, so choose a divisor, "
                f"e.g. num_minibatches={_divisor_near(self.prompts_per_step, self.num_minibatches)}."
            )
        minibatch = self.minibatch_samples
        if self.micro_batch_size is not None and (self.micro_batch_size < 1 or minibatch % self.micro_batch_size):
            raise ValueError(
                f"micro_batch_size ({self.micro_batch_size}) must divide the minibatch of {minibatch} "
                "samples (prompts_per_step · G / num_minibatches); pick a divisor or None."
            )
        if self.pool_size is not None and self.pool_size < self.prompts_per_step:
            raise ValueError(
                f"pool_size ({self.pool_size}) must hold at least prompts_per_step ({self.prompts_per_step}) "
                "prompts, or a step could not draw distinct prompts; raise pool_size or lower prompts_per_step."
            )

    def _check_bookkeeping(self) -> None:
        """The measurements: at least 2 samples per pool prompt, and a valid identity-check schedule
        (chapters 9 and 10)."""
        if self.pool_samples < 2:
            raise ValueError(
                f"pool_samples must be at least 2 (a solve rate from one sample is 0 or 1); got {self.pool_samples}."
            )
        if self.identity_check_every < 0 or self.identity_check_groups < 1:
            raise ValueError(
                f"identity_check_every must be >= 0 (0: off) and identity_check_groups >= 1; got "
                f"{self.identity_check_every} and {self.identity_check_groups}."
            )

    def _check_rates(self) -> None:
        """lr and temperature finite and > 0, max_grad_norm finite and >= 0 (``None`` and 0: no
        clip, stored as 0.0), all stored as plain floats; a known optimizer; and a non-empty overlong
        band L_cache = round(fraction · L_max) when the recipe penalises length (chapter 12)."""
        if self.max_grad_norm is None:
            object.__setattr__(self, "max_grad_norm", 0.0)
        for name in ("lr", "max_grad_norm", "temperature"):
            value = check_number(getattr(self, name), name)  # TypeError for text, arrays; NaN refused
            if not (value >= 0 if name == "max_grad_norm" else value > 0):
                bound = ">= 0 (0: no clip)" if name == "max_grad_norm" else "> 0"
                raise ValueError(f"{name} must be a finite number {bound}; got {value!r}.")
            object.__setattr__(self, name, value)  # a numpy float is stored as a plain float (JSON, cache key)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {list(OPTIMIZERS)}; got {self.optimizer!r}.")
        if self.recipe.overlong_penalty and self.overlong_cache < 1:
            raise ValueError(
                f"the overlong penalty band L_cache = round({self.recipe.overlong_cache_fraction} · "
                f"{self.max_new_tokens}) is empty; raise max_new_tokens or overlong_cache_fraction."
            )

    @property
    def minibatch_samples(self) -> int:
        return self.prompts_per_step * self.group_size // self.num_minibatches

    @property
    def overlong_cache(self) -> int:
        """L_cache in tokens: the recipe's fraction of L_max, rounded (at least 0)."""
        return int(round(self.recipe.overlong_cache_fraction * self.max_new_tokens))

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain data. The allocation fields appear only for a rule other than
        ``"uniform"``, ``optimizer`` only when it is not ``"adamw"`` and ``eval_every_samples`` only when
        it is set: a uniform AdamW run's settings, fingerprint and cache key read as they did before these
        fields existed, so its checkpoints and cached runs stay valid."""
        out = dataclasses.asdict(self)
        if self.optimizer == "adamw":
            del out["optimizer"]
        if self.eval_every_samples == 0:
            del out["eval_every_samples"]
        out["recipe"] = dataclasses.asdict(self.recipe)
        if self.allocation == "uniform":
            for name in ("allocation", "allocation_options", "allocation_budget", "allocation_candidates"):
                del out[name]
        else:
            out["allocation_options"] = {k: list(v) if isinstance(v, tuple) else v for k, v in self.allocation_options}
        return out


def _frozen_options(options) -> tuple[tuple[str, Any], ...]:
    """Allocation options as sorted (name, value) pairs: names are text, values numbers or lists of
    numbers (stored as tuples)."""
    if isinstance(options, tuple) and all(isinstance(o, tuple) and len(o) == 2 for o in options):
        options = dict(options)
    if not isinstance(options, dict):
        raise TypeError(f"allocation_options must be a dict of the rule's settings; got {type(options).__name__}.")
    pairs = []
    for name, value in options.items():
        if not isinstance(name, str):
            raise TypeError(f"allocation_options names must be text; got {name!r}.")
        if isinstance(value, (list, tuple, np.ndarray)):
            value = tuple(check_number(v, f"allocation_options[{name!r}]") for v in np.asarray(value).tolist())
        elif value is not None and not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"allocation_options[{name!r}] must be a number or a list of numbers; got {value!r:.40}.")
        elif isinstance(value, (np.integer, np.floating)):
            value = value.item()
        pairs.append((name, value))
    return tuple(sorted(pairs))


def _smallest_step(rule) -> int:
    """The fewest samples a step of ``rule`` needs to draw one group."""
    for size in ("min_size", "screen_size", "group_size"):
        if hasattr(rule, size):
            return int(getattr(rule, size))
    # Reinforce-Ada starts budget // (round_size · max_rounds) prompts unless batch_prompts is set
    return rule.round_size * (rule.max_rounds if rule.batch_prompts is None else 1)


def require_problems(problems, name: str, allow_empty: bool = False) -> list[Problem]:
    """``problems`` as a list, after checking it holds :class:`~stddial_book.rl.tasks.Problem` objects."""
    if isinstance(problems, (str, bytes)) or not hasattr(problems, "__len__"):
        raise TypeError(
            f"{name} must be a list of Problem (from make_problems or tasks.make_split); got {type(problems).__name__}."
        )
    problems = list(problems)
    if not problems and not allow_empty:
        raise ValueError(f"{name} is empty; pass at least one Problem (TaskConfig.num_train / num_heldout > 0).")
    wrong = next((p for p in problems if not isinstance(p, Problem)), None)
    if wrong is not None:
        raise TypeError(
            f"{name} must hold Problem objects (from make_problems or tasks.make_split), not "
            f"{type(wrong).__name__} {wrong!r:.40}; build them with tasks.make_problem(a, b, digits)."
        )
    return problems


def require_model(model) -> torch.device:
    """The device of ``model``, after checking it is a torch module with parameters."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch module (e.g. model.tiny_model()); got {type(model).__name__}.")
    try:
        return next(model.parameters()).device
    except StopIteration:
        raise ValueError("model has no parameters; pass a language model such as model.tiny_model().") from None


def require_config(config, kind: type) -> None:
    if not isinstance(config, kind):
        raise TypeError(
            f"config must be a {kind.__name__} (e.g. {kind.__name__}(...) or "
            f"profiles.PROFILES['quick'].{'sft' if kind is SFTConfig else 'train'}_config(...)); "
            f"got {type(config).__name__}."
        )


def _require_int(config, names: Sequence[str], optional: bool = False) -> None:
    """Raise ``TypeError`` naming the first field of ``names`` that is not a whole number."""
    for name in names:
        value = getattr(config, name)
        if optional and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(
                f"{name} must be a whole number{' or None' if optional else ''}; "
                f"got {value!r} ({type(value).__name__})."
            )


def _require_seed(config) -> None:
    if not 0 <= config.seed <= MAX_SEED:
        raise ValueError(
            f"seed must be a whole number from 0 to {MAX_SEED} (2**40 - 1: the run derives "
            f"larger seeds from it that torch must accept); got {config.seed}."
        )


def _require_number(config, names: Sequence[str]) -> None:
    """Raise ``TypeError`` / ``ValueError`` naming the first field of ``names`` that is not a finite number."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must be a number; got {value!r} ({type(value).__name__}).")
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite; got {value!r}.")


#: The largest count (steps, samples, problems) a configuration accepts: more is a typo, not a run.
MAX_COUNT = 10**12


def _require_positive(config, names: Sequence[str], limit: int = MAX_COUNT) -> None:
    """Raise ``ValueError`` naming the first field of ``names`` that is below 1 or above ``limit``."""
    for name in names:
        value = getattr(config, name)
        if not 1 <= value <= limit:
            raise ValueError(f"{name} must be a whole number from 1 to {limit:,}; got {value}.")


def _divisor_near(n: int, k: int) -> int:
    return min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: (abs(d - k), d))
