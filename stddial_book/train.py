"""The training loop: SFT warm start, then RL under any :class:`Recipe` (chapters 9-13).

One step of :func:`train` runs in one direction (DESIGN §4)::

    draw prompts → rollout (G samples each) → verifier → shaped reward → group_advantages
        → silent-group filter / DAPO refill → ``num_minibatches`` clipped-surrogate updates → log

* :func:`sft` is the warm start: teacher-forced cross-entropy on the answer tokens, stopped when
  a **measured** held-out pass rate reaches ``target_pass_rate`` (the jump in SFT accuracy comes
  at a step that varies from seed to seed, so a fixed step count would hand RL a model that is
  either still silent everywhere or already saturated).
* :func:`train` is the RL loop. The budget is a number of **generated samples**, so recipes that
  discard samples (DAPO's dynamic sampling) pay for them and make fewer updates. Each rollout
  batch is split into ``num_minibatches`` optimizer steps; with more than one, the policy moves
  between them and the clip can bind (with one, clip-higher does nothing: DESIGN §8).
* :func:`evaluate` measures held-out accuracy per difficulty bucket, greedy and sampled.

Every step appends a JSON record to ``metrics.jsonl`` (TRL's metric names where TRL has them:
``reward``, ``reward_std``, ``frac_reward_zero_std``, ``completions/mean_length``,
``completions/clipped_ratio``, ``kl``, ``entropy``, ``clip_ratio/*``; and the dial's own under
``dial/``, ``samples/`` and ``eval/``). Every ``checkpoint_every`` steps the model
(safetensors), the optimizer state and every random state are written; ``resume=True`` continues
from there exactly as the uninterrupted run would have (bit for bit on a CPU; a test checks).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ._arrays import MAX_SEED, check_number
from .identity import group_std
from .losses import policy_loss
from .model import CharCodec
from .outdir import checked_path, claim_dir, read_marker, remove_owned, require_owned
from .recipes import Recipe, get_recipe, group_advantages
from .rollout import _positions, sample, shared_prompt_logprobs
from .runs import RunLog, load_run, read_records
from .sampling import DynamicSampler, nonsilent_groups, overlong_penalty
from .tasks import Problem, make_split, rewards as verify

__all__ = [
    "TaskConfig", "SFTConfig", "TrainConfig", "Batch", "EvalResult", "SFTResult", "TrainResult",
    "bucket_of", "make_problems", "encode_prompts", "evaluate", "sft", "train", "peak_memory_mb", "checkpoint_dir",
]

CHECKPOINT = "checkpoint"
INIT = "init"


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class TaskConfig:
    """The problem pool: D-digit additions for each D in ``digits`` (mixed in equal numbers).

    Difficulty buckets are ``D{digits}``, the digit count (see :func:`bucket_of`).
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
        for name in ("num_train", "num_heldout"):
            if getattr(self, name) < len(self.digits):
                raise ValueError(f"{name} must be at least one problem per digit count; got {getattr(self, name)}.")


@dataclass(frozen=True)
class SFTConfig:
    """The warm start: AdamW on answer-token cross-entropy until the held-out pass rate is reached.

    DESIGN §10: lr 1e-3 and batch 128 learn 2-digit addition on one CPU core; the pass rate
    jumps abruptly, so it is measured every ``eval_every`` steps on ``eval_prompts`` held-out
    prompts with ``eval_samples`` temperature-1 samples each, and SFT stops at
    ``target_pass_rate`` (or at ``max_steps``, reported as not reached). The estimate that
    stops SFT is biased upwards (it is the first of many noisy estimates to cross the target), so
    the pass rate reported is measured again afterwards with fresh samples: ``final_eval_samples``
    per held-out prompt, on every held-out prompt.
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
        _require_int(self, ("batch_size", "eval_every", "eval_prompts", "eval_samples", "max_steps", "seed",
                            "final_eval_samples"))
        _require_number(self, ("lr", "target_pass_rate"))
        _require_seed(self)
        if not 0.0 < self.target_pass_rate <= 1.0:
            raise ValueError(f"target_pass_rate must lie in (0, 1]; got {self.target_pass_rate}.")
        _require_positive(self, ("batch_size", "eval_every", "eval_prompts", "eval_samples", "max_steps",
                                 "final_eval_samples"))
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0; got {self.lr}.")


@dataclass(frozen=True)
class TrainConfig:
    """One RL run: the recipe, the batch geometry, the budget and the bookkeeping.

    Attributes:
        recipe: the dial's setting (a :class:`Recipe` or a preset name).
        group_size: G, samples per prompt (at least 2).
        prompts_per_step: groups in one rollout batch (the batch holds ``prompts_per_step · G``
            samples; with dynamic sampling, that many *non-silent* groups).
        num_minibatches: optimizer steps per rollout batch; must divide ``prompts_per_step``
            (minibatches hold whole groups).
        micro_batch_size: samples per forward/backward pass inside a minibatch (gradient
            accumulation, for memory); must divide the minibatch; ``None`` = the whole minibatch.
        lr: AdamW learning rate (constant, no weight decay).
        max_grad_norm: gradient-norm clip per optimizer step (TRL's default 1.0).
        max_new_tokens: L_max, the generation cap (and Dr. GRPO's normaliser).
        sample_budget: stop once this many samples have been generated (discarded ones count).
        max_rounds: cap on DAPO's refill rounds per step (verl's ``max_num_gen_batches``).
        eval_every: evaluate on the held-out set every this many steps (and at the start and end);
            0 never evaluates (benchmarks).
        eval_samples: temperature-1 samples per held-out prompt for the sampled accuracy.
        checkpoint_every: write a checkpoint every this many steps (and at the end).
        temperature: sampling temperature of rollouts (1 = the policy itself).
        seed: seeds the prompt order, the sampler and the minibatch order.
        pool_size: train on the first ``pool_size`` training problems only (``None``: all of
            them). A small pool is visited many times, so each prompt's solve rate can be
            followed through the run (chapters 9-13): at the start and at every evaluation the
            whole pool is measured with ``pool_samples`` samples per prompt and logged as
            ``pool/k`` (correct counts, in pool order) and ``pool/n``.
        pool_samples: samples per pool prompt at each measurement.
        identity_check_every: every this many steps (and at the first), check the identity on
            real gradients inside the update: for up to ``identity_check_groups`` mixed groups of
            each minibatch, the group's own gradient at the weights that minibatch sees against
            w (ḡ₊ − ḡ₋) there (:func:`stddial_book.gradcheck.identity_drift`). Exact to float
            rounding on the first minibatch, a measured drift on later ones; 0 turns it off. It
            reads the model and changes nothing, so a run is the same with or without it.
        identity_check_groups: groups checked per minibatch at a check step.
    """

    recipe: Recipe | str = "grpo"
    group_size: int = 8
    prompts_per_step: int = 32
    num_minibatches: int = 2
    micro_batch_size: int | None = None
    lr: float = 1e-4
    max_grad_norm: float = 1.0
    max_new_tokens: int = 8
    sample_budget: int = 16384
    max_rounds: int = 8
    eval_every: int = 8
    eval_samples: int = 8
    checkpoint_every: int = 16
    temperature: float = 1.0
    seed: int = 0
    pool_size: int | None = None
    pool_samples: int = 32
    identity_check_every: int = 0
    identity_check_groups: int = 2

    def __post_init__(self) -> None:
        recipe = get_recipe(self.recipe) if isinstance(self.recipe, str) else self.recipe
        if not isinstance(recipe, Recipe):
            raise ValueError(f"recipe must be a Recipe or a preset name; got {type(self.recipe).__name__}.")
        object.__setattr__(self, "recipe", recipe)
        _require_int(self, ("group_size", "prompts_per_step", "num_minibatches", "max_new_tokens", "sample_budget",
                            "max_rounds", "eval_every", "eval_samples", "checkpoint_every", "seed", "pool_samples",
                            "identity_check_every", "identity_check_groups"))
        _require_int(self, ("micro_batch_size", "pool_size"), optional=True)
        _require_seed(self)
        if self.group_size < 2:
            raise ValueError(
                f"group_size G must be at least 2 (a group of one has no spread to learn from); got {self.group_size}."
            )
        if self.eval_every < 0:
            raise ValueError(f"eval_every must be >= 0 (0: never evaluate); got {self.eval_every}.")
        _require_positive(self, ("prompts_per_step", "num_minibatches", "max_new_tokens", "sample_budget",
                                 "max_rounds", "eval_samples", "checkpoint_every"))
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
        if self.pool_samples < 2:
            raise ValueError(f"pool_samples must be at least 2 (a solve rate from one sample is 0 or 1); "
                             f"got {self.pool_samples}.")
        if self.identity_check_every < 0 or self.identity_check_groups < 1:
            raise ValueError(f"identity_check_every must be >= 0 (0: off) and identity_check_groups >= 1; got "
                             f"{self.identity_check_every} and {self.identity_check_groups}.")
        for name in ("lr", "max_grad_norm", "temperature"):
            value = check_number(getattr(self, name), name)  # TypeError for text, None, arrays; NaN refused
            if not value > 0:
                raise ValueError(f"{name} must be a finite number > 0; got {value!r}.")
            object.__setattr__(self, name, value)  # a numpy float is stored as a plain float (JSON, cache key)
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
        out = dataclasses.asdict(self)
        out["recipe"] = dataclasses.asdict(self.recipe)
        return out


def _require_problems(problems, name: str, allow_empty: bool = False) -> list[Problem]:
    """``problems`` as a list, after checking it holds :class:`~stddial_book.tasks.Problem` objects."""
    if isinstance(problems, (str, bytes)) or not hasattr(problems, "__len__"):
        raise TypeError(f"{name} must be a list of Problem (from make_problems or tasks.make_split); "
                        f"got {type(problems).__name__}.")
    problems = list(problems)
    if not problems and not allow_empty:
        raise ValueError(f"{name} is empty; pass at least one Problem (TaskConfig.num_train / num_heldout > 0).")
    wrong = next((p for p in problems if not isinstance(p, Problem)), None)
    if wrong is not None:
        raise TypeError(f"{name} must hold Problem objects (from make_problems or tasks.make_split), not "
                        f"{type(wrong).__name__} {wrong!r:.40}; build them with tasks.make_problem(a, b, digits).")
    return problems


def _require_model(model) -> torch.device:
    """The device of ``model``, after checking it is a torch module with parameters."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch module (e.g. model.tiny_model()); got {type(model).__name__}.")
    try:
        return next(model.parameters()).device
    except StopIteration:
        raise ValueError("model has no parameters; pass a language model such as model.tiny_model().") from None


def _require_config(config, kind: type) -> None:
    if not isinstance(config, kind):
        raise TypeError(f"config must be a {kind.__name__} (e.g. {kind.__name__}(...) or "
                        f"profiles.PROFILES['quick'].{'sft' if kind is SFTConfig else 'train'}_config(...)); "
                        f"got {type(config).__name__}.")


def _require_int(config, names: Sequence[str], optional: bool = False) -> None:
    """Raise ``TypeError`` naming the first field of ``names`` that is not a whole number."""
    for name in names:
        value = getattr(config, name)
        if optional and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be a whole number{' or None' if optional else ''}; "
                            f"got {value!r} ({type(value).__name__}).")


def _require_seed(config) -> None:
    if not 0 <= config.seed <= MAX_SEED:
        raise ValueError(f"seed must be a whole number from 0 to {MAX_SEED} (2**40 - 1: the run derives "
                         f"larger seeds from it that torch must accept); got {config.seed}.")


def _require_number(config, names: Sequence[str]) -> None:
    """Raise ``TypeError`` / ``ValueError`` naming the first field of ``names`` that is not a finite number."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must be a number; got {value!r} ({type(value).__name__}).")
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite; got {value!r}.")


def _require_positive(config, names: Sequence[str]) -> None:
    """Raise ``ValueError`` naming the first field of ``names`` that is below 1."""
    for name in names:
        if getattr(config, name) < 1:
            raise ValueError(f"{name} must be at least 1; got {getattr(config, name)}.")


def _divisor_near(n: int, k: int) -> int:
    return min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: (abs(d - k), d))


# --------------------------------------------------------------------------- task and batches


def bucket_of(problem: Problem) -> str:
    """The difficulty bucket of a problem: ``D{digits}``, its digit count.

    Chapter 9 measures accuracy by carries too; with the answer's digits
    reversed, carries barely change how hard a problem is for the model,
    while each extra digit does.
    """
    if not isinstance(problem, Problem):
        name = type(problem).__name__
        raise TypeError(f"bucket_of takes a Problem; got {name}.")
    return f"D{problem.digits}"


def make_problems(task: TaskConfig) -> tuple[list[Problem], list[Problem]]:
    """Train and held-out problems for every digit count of ``task``, disjoint, deterministic."""
    if not isinstance(task, TaskConfig):
        raise TypeError(f"make_problems takes a TaskConfig (e.g. TaskConfig(digits=(2, 3))); got {type(task).__name__}.")
    train_set: list[Problem] = []
    heldout: list[Problem] = []
    n = len(task.digits)
    for i, digits in enumerate(task.digits):
        tr, he = make_split(digits, task.num_train // n + (i < task.num_train % n),
                            task.num_heldout // n + (i < task.num_heldout % n), seed=task.seed + 7919 * i)
        train_set += tr
        heldout += he
    if n > 1:  # interleave the digit counts, so any prefix (SFT's probe set) mixes them too
        rng = np.random.default_rng(task.seed)
        train_set = [train_set[i] for i in rng.permutation(len(train_set))]
        heldout = [heldout[i] for i in rng.permutation(len(heldout))]
    return train_set, heldout


def encode_prompts(problems: Sequence[Problem], codec: CharCodec, device: torch.device | str = "cpu"):
    """Left-padded prompt ids and mask for a list of problems (one length per D needs no padding)."""
    problems = _require_problems(problems, "problems")
    if not isinstance(codec, CharCodec):
        raise TypeError(f"codec must be a CharCodec (model.CharCodec()); got {type(codec).__name__}.")
    encoded = [codec.encode(p.prompt) for p in problems]
    width = max(len(e) for e in encoded)
    ids = torch.full((len(encoded), width), codec.pad_id, dtype=torch.long)  # cpu-then-move
    mask = torch.zeros((len(encoded), width), dtype=torch.bool)  # cpu-then-move
    for row, e in enumerate(encoded):
        ids[row, width - len(e):] = torch.tensor(e)  # cpu-then-move
        mask[row, width - len(e):] = True
    return ids.to(device), mask.to(device)


@dataclass
class Batch:
    """A rollout batch, one row per sample, groups of G contiguous; indexable by row arrays."""

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor
    mask: torch.Tensor
    truncated: torch.Tensor
    logprobs: torch.Tensor    # log π_old of each sampled token, recorded by the sampler
    correct: np.ndarray       # verifier: 1 exact answer + EOS, else 0
    rewards: np.ndarray       # the recipe's reward values, plus the overlong penalty if on
    buckets: np.ndarray       # difficulty bucket per row
    prompt_index: np.ndarray  # index of each row's prompt in the training problems

    def __len__(self) -> int:
        return len(self.correct)

    def __getitem__(self, rows) -> "Batch":
        rows = np.asarray(rows)
        t = torch.as_tensor(rows, dtype=torch.long, device=self.prompt_ids.device)
        return Batch(self.prompt_ids[t], self.prompt_mask[t], self.completion_ids[t], self.mask[t],
                     self.truncated[t], self.logprobs[t], self.correct[rows], self.rewards[rows], self.buckets[rows],
                     self.prompt_index[rows])

    @staticmethod
    def cat(parts: Sequence["Batch"], pad_id: int) -> "Batch":
        """Concatenate batches, left-padding prompts and right-padding completions to one width."""
        if len(parts) == 0:
            raise ValueError("Batch.cat needs at least one batch to concatenate; got none.")
        if len(parts) == 1:
            return parts[0]
        pw = max(p.prompt_ids.shape[1] for p in parts)
        cw = max(p.completion_ids.shape[1] for p in parts)

        def left(x, width, value):
            return torch.nn.functional.pad(x, (width - x.shape[1], 0), value=value)

        def right(x, width, value):
            return torch.nn.functional.pad(x, (0, width - x.shape[1]), value=value)

        return Batch(
            torch.cat([left(p.prompt_ids, pw, pad_id) for p in parts]),
            torch.cat([left(p.prompt_mask, pw, False) for p in parts]),
            torch.cat([right(p.completion_ids, cw, pad_id) for p in parts]),
            torch.cat([right(p.mask, cw, False) for p in parts]),
            torch.cat([p.truncated for p in parts]),
            torch.cat([right(p.logprobs, cw, 0.0) for p in parts]),
            np.concatenate([p.correct for p in parts]),
            np.concatenate([p.rewards for p in parts]),
            np.concatenate([p.buckets for p in parts]),
            np.concatenate([p.prompt_index for p in parts]),
        )


def _decode(codec: CharCodec, ids: torch.Tensor) -> list[str]:
    return [codec.decode(row) for row in ids.tolist()]


# --------------------------------------------------------------------------- evaluation


@dataclass
class EvalResult:
    """Held-out accuracy, overall and per bucket, greedy and sampled; per-prompt success counts."""

    greedy: float
    sampled: float
    greedy_by_bucket: dict[str, float]
    sampled_by_bucket: dict[str, float]
    successes: np.ndarray      # per prompt, correct samples out of ``num_samples``
    num_samples: int
    buckets: np.ndarray

    @property
    def silent_fraction(self) -> float:
        """Share of held-out prompts whose ``num_samples`` samples all agree (0 or all correct)."""
        return float(np.mean((self.successes == 0) | (self.successes == self.num_samples)))

    def metrics(self, prefix: str = "eval/") -> dict[str, float]:
        out = {f"{prefix}accuracy_greedy": self.greedy, f"{prefix}accuracy_sampled": self.sampled,
               f"{prefix}silent_fraction": self.silent_fraction}
        for b, v in self.greedy_by_bucket.items():
            out[f"{prefix}accuracy_greedy/{b}"] = v
        for b, v in self.sampled_by_bucket.items():
            out[f"{prefix}accuracy_sampled/{b}"] = v
        return out


#: The most sequences :func:`evaluate` samples in one pass (memory stays bounded for any num_samples).
EVAL_ROWS = 16384


@torch.no_grad()
def evaluate(model, problems: Sequence[Problem], max_new_tokens: int, num_samples: int = 8,
             generator: torch.Generator | None = None, codec: CharCodec | None = None,
             chunk: int = 256, greedy: bool = True) -> EvalResult:
    """Greedy and temperature-1 sampled accuracy on ``problems``, overall and per bucket."""
    if hasattr(problems, "__len__") and len(problems) == 0:
        raise ValueError("evaluate got no problems: an accuracy over zero prompts is undefined; "
                         "pass a non-empty held-out set (TaskConfig.num_heldout > 0).")
    problems = _require_problems(problems, "problems")
    _require_model(model)
    for name, value in (("num_samples", num_samples), ("chunk", chunk), ("max_new_tokens", max_new_tokens)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1; got {value!r}.")
    codec = codec or CharCodec()
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    successes = np.zeros(len(problems), dtype=np.int64)
    greedy_ok = np.zeros(len(problems))
    # at most EVAL_ROWS sequences in one sampling pass, however many samples are asked for
    per_pass = min(num_samples, EVAL_ROWS)
    step = max(1, min(chunk, EVAL_ROWS // num_samples))
    for start in range(0, len(problems), step):
        part = list(problems[start:start + step])
        ids, mask = encode_prompts(part, codec, device)
        for drawn in range(0, num_samples, per_pass):
            n = min(per_pass, num_samples - drawn)
            out = sample(model, ids, max_new_tokens, codec.eos_id, codec.pad_id, prompt_mask=mask,
                         generator=generator, num_samples=n)
            ok = verify(_decode(codec, out.completion_ids), [p for p in part for _ in range(n)])
            successes[start:start + len(part)] += ok.reshape(len(part), n).sum(axis=1).astype(np.int64)
        if greedy:
            out = sample(model, ids, max_new_tokens, codec.eos_id, codec.pad_id, prompt_mask=mask, greedy=True)
            greedy_ok[start:start + len(part)] = verify(_decode(codec, out.completion_ids), part)
    model.train(was_training)
    buckets = np.array([bucket_of(p) for p in problems])
    rate = successes / num_samples
    names = sorted(set(buckets.tolist()))
    return EvalResult(
        greedy=float(greedy_ok.mean()) if greedy else float("nan"), sampled=float(rate.mean()),
        greedy_by_bucket={b: float(greedy_ok[buckets == b].mean()) for b in names} if greedy else {},
        sampled_by_bucket={b: float(rate[buckets == b].mean()) for b in names},
        successes=successes, num_samples=num_samples, buckets=buckets)


# --------------------------------------------------------------------------- SFT warm start


@dataclass
class SFTResult:
    """How the warm start ended.

    ``reached`` says whether the stopping rule fired (``stop_estimate``, the probe's estimate at
    that step, crossed the target) before ``max_steps``; ``pass_rate`` is the held-out pass rate
    measured afterwards with fresh samples, an unbiased estimate of where RL starts.
    """

    steps: int
    pass_rate: float
    reached: bool
    wall_time_s: float
    history: list[dict[str, float]] = field(default_factory=list)
    stop_estimate: float = float("nan")


def _adamw(model, lr: float) -> torch.optim.AdamW:
    """AdamW at ``lr``, no weight decay, for the trainers here; its fused kernel (one pass over
    all parameters instead of a dozen per tensor) where this torch has one for the model's
    device (CPU since torch 2.4). The update is the same to float rounding."""
    try:
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)


def _sft_batch(problems: Sequence[Problem], codec: CharCodec, device) -> tuple[torch.Tensor, ...]:
    """Left-padded prompt + answer + EOS ids, attention mask and the answer-token loss mask."""
    rows = [(codec.encode(p.prompt), codec.encode(p.answer) + [codec.eos_id]) for p in problems]
    width = max(len(a) + len(b) for a, b in rows)
    ids = torch.full((len(rows), width), codec.pad_id, dtype=torch.long)  # cpu-then-move
    attn = torch.zeros((len(rows), width), dtype=torch.bool)  # cpu-then-move
    target = torch.zeros((len(rows), width), dtype=torch.bool)  # cpu-then-move
    for r, (a, b) in enumerate(rows):
        seq = a + b
        ids[r, width - len(seq):] = torch.tensor(seq)  # cpu-then-move
        attn[r, width - len(seq):] = True
        target[r, width - len(b):] = True
    return ids.to(device), attn.to(device), target.to(device)


def sft(model, train_problems: Sequence[Problem], heldout: Sequence[Problem], config: SFTConfig = SFTConfig(),
        *, max_new_tokens: int = 8, log: RunLog | None = None, progress: bool = False,
        codec: CharCodec | None = None) -> SFTResult:
    """Supervised warm start until the held-out sampled pass rate reaches the target (chapter 9).

    The loss is the mean cross-entropy of the answer tokens (the reversed digits and EOS) given
    the prompt. Every ``eval_every`` steps the pass rate is measured on the first
    ``eval_prompts`` held-out problems with ``eval_samples`` samples each; training stops as
    soon as it reaches ``config.target_pass_rate``.
    """
    train_problems = _require_problems(train_problems, "train_problems", allow_empty=True)
    heldout = _require_problems(heldout, "heldout", allow_empty=True)
    if len(train_problems) == 0:
        raise ValueError("sft got no training problems; pass a non-empty list (TaskConfig.num_train > 0).")
    if len(heldout) == 0:
        raise ValueError("sft got no held-out problems, so its stopping rule (the held-out pass rate) "
                         "cannot be measured; pass a non-empty held-out set.")
    _require_config(config, SFTConfig)
    codec = codec or CharCodec()
    device = _require_model(model)
    rng = np.random.default_rng(config.seed)
    gen = torch.Generator(device=device).manual_seed(config.seed)
    optimizer = _adamw(model, config.lr)
    probe = list(heldout[: config.eval_prompts])
    start = time.perf_counter()
    history: list[dict[str, float]] = []
    bar = _progress(config.max_steps, "SFT", progress)
    pass_rate, step = 0.0, 0
    model.train()
    for step in range(1, config.max_steps + 1):
        rows = rng.choice(len(train_problems), size=min(config.batch_size, len(train_problems)), replace=False)
        ids, attn, target = _sft_batch([train_problems[i] for i in rows], codec, device)
        # the last column (EOS) is only a target, so it is not fed in
        inputs, seen = ids[:, :-1], attn[:, :-1]
        logits = model(input_ids=inputs, attention_mask=seen.long(), position_ids=_positions(seen)).logits
        logp = torch.log_softmax(logits.float(), dim=-1)
        nll = -logp.gather(2, ids[:, 1:, None]).squeeze(2)
        loss = (nll * target[:, 1:]).sum() / target[:, 1:].sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        bar.update(1)
        if step % config.eval_every == 0 or step == config.max_steps:
            result = evaluate(model, probe, max_new_tokens, config.eval_samples, gen, codec, greedy=False)
            pass_rate = result.sampled
            record = {"sft/loss": float(loss.detach()), "sft/pass_rate": pass_rate,
                      "sft/silent_fraction": result.silent_fraction,
                      "time/elapsed_s": time.perf_counter() - start}
            history.append({"step": step, **record})
            if log is not None:
                log.log(step, record)
            bar.set_postfix(loss=f"{float(loss.detach()):.3f}", pass_rate=f"{pass_rate:.2f}")
            if pass_rate >= config.target_pass_rate:
                break
    bar.close()
    # the crossing estimate is the maximum of many noisy ones: measure again, independently
    check = torch.Generator(device=device).manual_seed(config.seed + 104_729)
    final = evaluate(model, heldout, max_new_tokens, config.final_eval_samples, check, codec, greedy=False)
    model.eval()
    return SFTResult(steps=step, pass_rate=final.sampled, reached=pass_rate >= config.target_pass_rate,
                     wall_time_s=time.perf_counter() - start, history=history, stop_estimate=pass_rate)


# --------------------------------------------------------------------------- RL


@dataclass
class TrainResult:
    """Where a run ended: steps, samples generated and kept, the final evaluation."""

    steps: int
    samples_generated: int
    samples_kept: int
    updates: int
    final_eval: EvalResult | None
    directory: Path
    stopped_early: bool = False


class _State:
    """The counters and random states a checkpoint must carry for an exact resume."""

    def __init__(self, seed: int, device) -> None:
        self.step = 0
        self.samples_generated = 0
        self.samples_kept = 0
        self.updates = 0
        self.rng = np.random.default_rng(seed)
        self.gen = torch.Generator(device=device).manual_seed(seed)

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "samples_generated": self.samples_generated,
                "samples_kept": self.samples_kept, "updates": self.updates,
                "numpy_rng": self.rng.bit_generator.state}

    def load(self, saved: dict[str, Any], gen_state: torch.Tensor) -> None:
        """Restore from a checkpoint's ``state.json``; a ``ValueError`` when it is not one (edited,
        truncated or from another program): counters must be whole numbers >= 0 with
        ``samples_kept <= samples_generated``."""
        if not isinstance(saved, dict):
            raise ValueError("state.json is not a JSON object")
        counters = {}
        for name in ("step", "samples_generated", "samples_kept", "updates"):
            value = saved.get(name)
            if type(value) is not int or value < 0:
                raise ValueError(f"{name} is {value!r}, not a whole number >= 0")
            counters[name] = value
        if counters["samples_kept"] > counters["samples_generated"]:
            raise ValueError("samples_kept exceeds samples_generated")
        rng = saved.get("numpy_rng")
        if not isinstance(rng, dict) or rng.get("bit_generator") != type(self.rng.bit_generator).__name__:
            raise ValueError("numpy_rng is not the state of the run's random generator")
        self.rng.bit_generator.state = rng
        self.gen.set_state(gen_state)
        for name, value in counters.items():
            setattr(self, name, value)


def _rollout_round(model, problems: Sequence[Problem], config: TrainConfig,
                   state: _State, codec: CharCodec,
                   num_prompts: int | None = None,
                   exclude: np.ndarray | None = None) -> Batch:
    """One round: draw ``num_prompts`` prompts (default
    ``prompts_per_step``), none of them in ``exclude`` (the prompts a DAPO
    step already drew), sample G completions each, verify, shape rewards."""
    recipe = config.recipe
    device = next(model.parameters()).device
    # train() checked the pool holds it
    wanted = (config.prompts_per_step if num_prompts is None
              else num_prompts)
    if exclude is None or len(exclude) == 0:
        rows = state.rng.choice(len(problems), size=wanted, replace=False)
    else:
        # a refill round: distinct prompts within the step, as verl's DAPO
        # batch holds
        available = np.setdiff1d(np.arange(len(problems)), exclude)
        rows = available[state.rng.choice(len(available), size=wanted,
                                          replace=False)]
    chosen = [problems[i] for i in rows]
    ids, pmask = encode_prompts(chosen, codec, device)
    out = sample(model, ids, config.max_new_tokens, codec.eos_id,
                 codec.pad_id, prompt_mask=pmask,
                 temperature=config.temperature, generator=state.gen,
                 num_samples=config.group_size)
    repeated = [p for p in chosen for _ in range(config.group_size)]
    correct = verify(_decode(codec, out.completion_ids), repeated)
    shaped = np.where(correct > 0, recipe.reward_correct,
                      recipe.reward_wrong)
    if recipe.overlong_penalty:
        shaped = shaped + overlong_penalty(out.lengths.cpu().numpy(),
                                           config.max_new_tokens,
                                           config.overlong_cache)
    return Batch(out.prompt_ids, out.prompt_mask, out.completion_ids,
                 out.mask, out.truncated, out.logprobs, correct, shaped,
                 np.array([bucket_of(p) for p in repeated]),
                 np.repeat(np.asarray(rows, dtype=np.int64),
                           config.group_size))


def _batch_metrics(generated: list[Batch], kept: Batch, advantages: np.ndarray, config: TrainConfig) -> dict[str, Any]:
    """Metrics of the samples generated this step and of the batch that reached the update."""
    G = config.group_size
    allgen = Batch.cat(generated, 0) if len(generated) > 1 else generated[0]
    lengths = allgen.mask.sum(dim=1).cpu().numpy()
    sigma_all = group_std(allgen.correct.reshape(-1, G))
    silent = ~nonsilent_groups(allgen.correct, G)  # unanimous in correctness: the dial's silent groups
    reward_std = group_std(allgen.rewards.reshape(-1, G), correction=1)
    out: dict[str, Any] = {
        "reward": float(allgen.rewards.mean()),
        "reward_std": float(reward_std.mean()),
        # TRL's definition: the shaped rewards' std is zero (torch.isclose(std, 0)); it differs from
        # dial/silent_fraction when a length penalty spreads the rewards of a unanimous group
        "frac_reward_zero_std": float(np.isclose(reward_std, 0.0).mean()),
        "accuracy": float(allgen.correct.mean()),
        "completions/mean_length": float(lengths.mean()),
        "completions/min_length": float(lengths.min()),
        "completions/max_length": float(lengths.max()),
        "completions/clipped_ratio": float(allgen.truncated.float().mean()),
        "dial/sigma_mean": float(sigma_all.mean()),
        "dial/silent_fraction": float(silent.mean()),
        # every generated group: its prompt (index into the training problems) and k correct
        "groups_generated/prompt": allgen.prompt_index.reshape(-1, G)[:, 0].tolist(),
        "groups_generated/k": [int(k) for k in allgen.correct.reshape(-1, G).sum(axis=1)],
    }
    if len(kept):
        sigma = group_std(kept.correct.reshape(-1, G))
        weight = np.abs(advantages).reshape(-1, G).mean(axis=1) / 2.0  # mean|A| = 2w (chapter 3)
        buckets = kept.buckets.reshape(-1, G)[:, 0]
        num_groups = len(sigma)
        out["groups/sigma"] = [round(float(s), 6) for s in sigma]
        out["groups/weight"] = [round(float(w), 6) for w in weight]
        out["groups/bucket"] = buckets.tolist()
        out["groups/prompt"] = kept.prompt_index.reshape(-1, G)[:, 0].tolist()
        for b in sorted(set(buckets.tolist())):
            sel = buckets == b
            out[f"dial/update_mass/{b}"] = float(weight[sel].sum() / num_groups)
            out[f"dial/groups/{b}"] = int(sel.sum())
    return out


def _checkable_groups(batch: Batch, groups: np.ndarray, config: TrainConfig) -> list[int]:
    """Groups of a minibatch the identity covers: mixed, binary rewards, nothing truncated; none
    when sampling is tempered (the check's scores are those of the untempered policy)."""
    G, recipe = config.group_size, config.recipe
    chosen = []
    if config.temperature != 1.0:
        return chosen
    for g in groups:
        rows = slice(int(g) * G, (int(g) + 1) * G)
        k = int(batch.correct[rows].sum())
        binary = np.isin(batch.rewards[rows], (recipe.reward_correct, recipe.reward_wrong)).all()
        if 0 < k < G and binary and not bool(batch.truncated[rows].any()):
            chosen.append(int(g))
        if len(chosen) == config.identity_check_groups:
            break
    return chosen


def _identity_in_update(model, batch: Batch, groups: list[int], config: TrainConfig) -> list[dict[str, float]]:
    """:func:`~stddial_book.gradcheck.identity_drift` for ``groups`` at the current weights, π_old
    = the sampler's log-probs. Gradients go through ``autograd.grad``: nothing accumulates."""
    from .gradcheck import GroupBatch, identity_drift

    G = config.group_size
    out = []
    for g in groups:
        r = slice(g * G, (g + 1) * G)
        group = GroupBatch(batch.prompt_ids[r], batch.prompt_mask[r], batch.completion_ids[r], batch.mask[r],
                           np.asarray(batch.correct[r], dtype=float))
        out.append(identity_drift(model, group, config.recipe, config.max_new_tokens, batch.logprobs[r]))
    return out


# What one more pass costs on a CPU, in tokens of work: timed on the testbed model with
# one thread, a forward/backward call has a fixed cost of a few milliseconds, the work of
# about 50 tokens, and a pass makes two calls (the prompts, then the completions).
# _passes makes a cut only where it saves more work than this.
_PASS_COST_TOKENS = 100


def _passes(batch: Batch, rows: torch.Tensor, group_size: int,
            micro: int | None) -> list[tuple[torch.Tensor, int, int]]:
    """The forward/backward passes of one minibatch, as (rows, first prompt
    column, completion width).

    A pass encodes each of its groups' prompts once and runs its completions
    on the shared cache (:func:`~stddial_book.rollout.shared_prompt_logprobs`).
    The rows are ordered by completion length and each pass is cut to its own
    longest prompt and completion: the padding that only the longest samples
    of the minibatch need is not computed for the others. The loss is
    normalised over the whole optimizer step, so how the rows are split
    changes the update only by float rounding. With ``micro`` each pass holds
    that many samples (gradient accumulation, for memory). Without it the
    split follows the lengths on a CPU, cutting where the work saved outweighs
    the cost of one more pass; on an accelerator, where a pass of a model this
    small costs about the same whatever its size, the minibatch stays one pass.
    """
    prompt_len = batch.prompt_mask[rows].sum(dim=1)  # left padding
    columns = torch.arange(1, batch.mask.shape[1] + 1, device=rows.device)
    completion_len = (batch.mask[rows] * columns).amax(dim=1).clamp(min=1)
    order = torch.argsort(completion_len, stable=True)
    rows = rows[order]
    prompt_len = prompt_len[order].tolist()
    completion_len = completion_len[order].tolist()
    if micro is not None:
        cuts = list(range(0, len(rows), micro)) + [len(rows)]
    elif rows.device.type == "cpu":
        groups = (rows // group_size).tolist()
        cuts = _length_cuts(prompt_len, completion_len, groups)
    else:
        cuts = [0, len(rows)]
    width = batch.prompt_mask.shape[1]
    return [(rows[a:b], width - max(prompt_len[a:b]), max(completion_len[a:b]))
            for a, b in zip(cuts[:-1], cuts[1:])]


def _pass_tokens(prompt_len: list[int], completion_len: list[int],
                 groups: list[int]) -> int:
    """Tokens one pass computes: each distinct prompt once at the longest
    prompt's width, each completion at the longest completion's width less
    the last column, which is not fed in."""
    return (len(set(groups)) * max(prompt_len)
            + len(completion_len) * (max(completion_len) - 1))


def _length_cuts(prompt_len: list[int], completion_len: list[int],
                 groups: list[int]) -> list[int]:
    """Where to cut rows sorted by completion length so that the tokens
    computed (:func:`_pass_tokens`), plus :data:`_PASS_COST_TOKENS` per pass,
    are fewest: a dynamic programme over the runs of equal length."""
    n = len(completion_len)
    bounds = [i for i in range(n) if i == 0 or completion_len[i] != completion_len[i - 1]]
    bounds.append(n)
    best = [0.0] + [math.inf] * (len(bounds) - 1)
    back = [0] * len(bounds)
    for j in range(1, len(bounds)):
        for i in range(j):
            a, b = bounds[i], bounds[j]
            cost = (best[i] + _PASS_COST_TOKENS + _pass_tokens(
                prompt_len[a:b], completion_len[a:b], groups[a:b]))
            if cost < best[j]:
                best[j], back[j] = cost, i
    cuts, j = [n], len(bounds) - 1
    while j > 0:
        j = back[j]
        cuts.append(bounds[j])
    return cuts[::-1]


def _update(model, optimizer, batch: Batch, advantages: np.ndarray,
            config: TrainConfig, state: _State, ref_model,
            check_identity: bool = False) -> dict[str, Any]:
    """``num_minibatches`` optimizer steps on one rollout batch; returns
    averaged loss metrics.

    With ``check_identity``, each minibatch's first groups are checked
    against the identity at the weights that minibatch sees, before its
    gradient is taken (``identity/*`` lists)."""
    recipe = config.recipe
    G = config.group_size
    device = next(model.parameters()).device
    adv = torch.as_tensor(advantages, dtype=next(model.parameters()).dtype,
                          device=device)
    # π_old is the policy that sampled the batch: the sampler recorded its
    # log-probs, so no extra forward pass is needed (a full pass agrees to
    # float rounding; test_rollout checks it).
    old = batch.logprobs
    num_groups = len(batch) // G
    order = state.rng.permutation(num_groups)
    loss_mask = (batch.mask & ~batch.truncated[:, None]
                 if recipe.overlong_filter else batch.mask)
    sums: dict[str, float] = {}
    counted = 0
    before = [p.detach().clone() for p in model.parameters()]
    checks: dict[str, list] = {"identity/minibatch": [],
                               "identity/rel_error": [],
                               "identity/clipped": [],
                               "identity/sigma": []}
    # whole groups per minibatch; a short (capped) DAPO batch gives smaller
    # minibatches
    for index, groups in enumerate(
            np.array_split(order, min(config.num_minibatches, num_groups))):
        rows = torch.as_tensor((groups[:, None] * G
                                + np.arange(G)).reshape(-1), device=device)
        step_tokens = int(loss_mask[rows].sum())
        if step_tokens == 0:
            # every sample of this minibatch was filtered out (truncated)
            continue
        if check_identity:
            for result in _identity_in_update(
                    model, batch, _checkable_groups(batch, groups, config),
                    config):
                checks["identity/minibatch"].append(index)
                checks["identity/rel_error"].append(result["rel_error"])
                checks["identity/clipped"].append(result["clipped"])
                checks["identity/sigma"].append(result["group_std"])
        optimizer.zero_grad(set_to_none=True)
        for r, start, width in _passes(batch, rows, G,
                                       config.micro_batch_size):
            if not bool(loss_mask[r].any()):
                continue
            # each pass is cut to its own rows' padding, and encodes each of
            # its groups' prompts once (see _passes)
            groups, prompt_rows = torch.unique(r // G, return_inverse=True)
            inputs = (batch.prompt_ids[groups * G][:, start:],
                      batch.prompt_mask[groups * G][:, start:], prompt_rows,
                      batch.completion_ids[r][:, :width],
                      batch.mask[r][:, :width])
            ref = None
            if ref_model is not None:
                with torch.no_grad():
                    ref = shared_prompt_logprobs(
                        ref_model, *inputs, temperature=config.temperature)
            # at the sampling temperature: π_old (the sampler's log-probs) is
            # the tempered policy
            logp, ent = shared_prompt_logprobs(
                model, *inputs, with_entropy=True,
                temperature=config.temperature)
            out = policy_loss(logp, old[r][:, :width], adv[r], inputs[4],
                              recipe, max_new_tokens=config.max_new_tokens,
                              ref_logprobs=ref, truncated=batch.truncated[r],
                              entropy=ent, step_num_tokens=step_tokens,
                              step_num_sequences=len(rows))
            out.loss.backward()
            share = float(loss_mask[r].sum()) / step_tokens
            for k, v in out.metrics.items():
                sums[k] = sums.get(k, 0.0) + v * share
            sums["loss"] = sums.get("loss", 0.0) + float(out.loss.detach())
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(),
                                                   config.max_grad_norm)
        sums["grad_norm"] = sums.get("grad_norm", 0.0) + float(grad_norm)
        optimizer.step()
        state.updates += 1
        counted += 1
    metrics = {k: v / max(counted, 1) for k, v in sums.items()}
    with torch.no_grad():
        metrics["update_norm"] = float(torch.sqrt(sum(
            ((p - q) ** 2).sum()
            for p, q in zip(model.parameters(), before))))
    metrics["optimizer_steps"] = counted
    if check_identity:
        metrics.update(checks)
    return metrics


def peak_memory_mb(device) -> dict[str, float]:
    """Peak resident memory of this process (MB) and, on CUDA, peak GPU memory allocated (MB)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = {"peak_rss_mb": rss / 1024 if sys.platform != "darwin" else rss / 2**20}
    if torch.device(device).type == "cuda":
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return out


def checkpoint_dir(directory: str | os.PathLike) -> Path | None:
    """The last complete checkpoint of a run directory, or ``None`` when it has none.

    :func:`train` writes a checkpoint into ``checkpoint.tmp``, moves the previous one to
    ``checkpoint.old`` and renames the new one to ``checkpoint``; a crash between the two renames
    leaves only ``checkpoint.old``, which is then the last complete checkpoint (its ``state.json``,
    written last, marks it complete).
    """
    if not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"directory must be a run directory path (str or Path); got {type(directory).__name__}.")
    directory = Path(directory)
    for name in (CHECKPOINT, CHECKPOINT + ".old"):
        if (directory / name / "state.json").is_file():
            return directory / name
    return None


def _config_fingerprint(config_dict: dict[str, Any], run_id: str) -> str:
    """What a checkpoint must belong to: this run directory (its marker's id) and this configuration."""
    text = json.dumps({"run_id": run_id, "train": config_dict}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _save_checkpoint(directory: Path, model, optimizer, state: _State, fingerprint: str = "") -> None:
    """Write model, optimizer and random states to ``directory/checkpoint`` (see :func:`checkpoint_dir`).

    ``directory`` is a run directory the tool marked (:mod:`stddial_book.outdir`): only its own
    ``checkpoint.tmp`` and ``checkpoint.old`` are ever replaced."""
    from safetensors.torch import save_model

    tmp_name, old_name = CHECKPOINT + ".tmp", CHECKPOINT + ".old"
    remove_owned(directory, [tmp_name])
    tmp = directory / tmp_name
    tmp.mkdir(parents=True)
    save_model(model, str(tmp / "model.safetensors"))
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save({"generator": state.gen.get_state(), "torch": torch.get_rng_state()}, tmp / "rng.pt")
    saved = {**state.to_json(), "fingerprint": fingerprint}
    (tmp / "state.json").write_text(json.dumps(saved) + "\n")  # last: marks the checkpoint complete
    final = directory / CHECKPOINT
    if final.exists():
        remove_owned(directory, [old_name])
        final.rename(directory / old_name)
    tmp.rename(final)
    remove_owned(directory, [old_name])


def _damaged(path: Path, err: Exception) -> ValueError:
    """A ``ValueError`` naming a checkpoint file that cannot be read, and what to do about it."""
    reason = (str(err).strip().splitlines() or [""])[0][:160]
    return ValueError(f"{path} cannot be read ({type(err).__name__}: {reason}); the checkpoint is damaged: "
                      f"delete {path.parent} to resume from the one before, if any, or start the run afresh.")


def _mismatch(path: Path) -> ValueError:
    """A ``ValueError`` for a readable checkpoint that belongs to another model or run: not damaged."""
    return ValueError(f"{path} does not fit this run (another model size, profile or configuration wrote "
                      "it); nothing was deleted: resume with the profile and settings the run was started "
                      "with, or start a new run in a new --out directory.")


def _load_checkpoint(path: Path, model, optimizer, state: _State, fingerprint: str | None = None) -> None:
    """Restore model, optimizer, counters and random states from the checkpoint directory ``path``.

    With ``fingerprint`` (see :func:`_config_fingerprint`), a checkpoint written for another run
    directory or configuration is refused before anything is restored."""
    from safetensors.torch import load_model

    device = next(model.parameters()).device
    parts: dict[str, Any] = {}
    try:
        saved = json.loads((path / "state.json").read_text())
    except Exception as err:
        raise _damaged(path / "state.json", err) from None
    if fingerprint is not None and isinstance(saved, dict) and saved.get("fingerprint") != fingerprint:
        raise _mismatch(path)
    for name in ("model.safetensors", "optimizer.pt", "rng.pt"):
        try:
            if name == "model.safetensors":
                load_model(model, str(path / name), device=str(device))
            else:  # random states are CPU tensors whatever the device; the optimizer's follow the model
                parts[name] = torch.load(path / name, weights_only=True,
                                         map_location=device if name == "optimizer.pt" else "cpu")
        except torch.cuda.OutOfMemoryError:
            raise
        except RuntimeError as err:
            if "loading state_dict" in str(err) or "size mismatch" in str(err):  # shapes of another model
                raise _mismatch(path) from None
            raise _damaged(path / name, err) from None
        except Exception as err:  # safetensors, pickle, zip and OS errors alike
            raise _damaged(path / name, err) from None
    try:
        optimizer.load_state_dict(parts["optimizer.pt"])
    except (ValueError, KeyError, TypeError) as err:
        raise _mismatch(path) if "size" in str(err) or "group" in str(err) else _damaged(path / "optimizer.pt", err) \
            from None
    try:
        state.load(saved, parts["rng.pt"]["generator"])
        torch.set_rng_state(parts["rng.pt"]["torch"])
    except (ValueError, KeyError, TypeError, RuntimeError) as err:
        raise _damaged(path / "state.json", err) from None


def _check_log_matches(directory: Path, checkpoint: Path, state: _State) -> None:
    """A checkpoint is written right after its step is logged: its counters must be that record's."""
    if state.step == 0:
        return
    record = next((r for r in read_records(directory / "metrics.jsonl") if r["step"] == state.step), None)
    if record is None or record.get("samples/generated") != state.samples_generated \
            or record.get("updates") != state.updates:
        raise ValueError(f"{checkpoint / 'state.json'} does not match {directory / 'metrics.jsonl'} at step "
                         f"{state.step} (an edited or foreign file); nothing was changed: restore the run's own "
                         "files or start a new run in a new --out directory.")


def _truncate_metrics(directory: Path, last_step: int) -> None:
    """Drop records logged after the checkpoint (they will be logged again, identically) and a
    partial last line a crash may have left."""
    path = directory / "metrics.jsonl"
    if not path.exists():
        return
    lines = [json.dumps(r, allow_nan=False) for r in read_records(path) if r["step"] <= last_step]
    path.write_text("".join(ln + "\n" for ln in lines))


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, dynamic_ncols=True)


def train(model, train_problems: Sequence[Problem], heldout: Sequence[Problem], config: TrainConfig,
          out: str | os.PathLike, *, resume: bool = False, stop_after: int | None = None,
          progress: bool = False, command: str = "", profile: str = "custom",
          codec: CharCodec | None = None, extra_provenance: dict[str, Any] | None = None) -> TrainResult:
    """Run RL from ``model`` under ``config.recipe`` and write the run log to ``out``.

    The starting weights are saved in ``out/init`` (the reference policy of the KL term, and what
    a resumed run rebuilds it from). ``resume=True`` continues from ``out/checkpoint`` after
    checking that the configuration is the same; ``stop_after`` ends the run early after that
    many steps (to test interruption). Returns a :class:`TrainResult`.
    """
    from safetensors.torch import load_model, save_model

    _require_config(config, TrainConfig)
    _require_model(model)
    train_problems = _require_problems(train_problems, "train_problems", allow_empty=True)
    heldout = _require_problems(heldout, "heldout", allow_empty=True)
    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"out must be a directory path (str or Path); got {type(out).__name__}.")
    codec = codec or CharCodec()
    recipe: Recipe = config.recipe
    directory = checked_path(out)
    if config.eval_every and len(heldout) == 0:
        raise ValueError("train got no held-out problems but eval_every > 0; pass a held-out set or set "
                         "eval_every=0 (no evaluation).")
    if config.pool_size is not None and len(train_problems) < config.pool_size:
        raise ValueError(f"pool_size is {config.pool_size} but only {len(train_problems)} training problems "
                         "were given; pass more problems or a smaller pool_size.")
    if len(train_problems) < config.prompts_per_step:
        raise ValueError(f"{len(train_problems)} training problems cannot fill a step of prompts_per_step = "
                         f"{config.prompts_per_step} distinct prompts; pass more problems or lower prompts_per_step.")
    pool = list(train_problems) if config.pool_size is None else list(train_problems[:config.pool_size])
    device = next(model.parameters()).device
    config_dict = config.to_dict()
    if resume:
        directory = require_owned(directory)
    else:
        directory = claim_dir(directory, "train")  # a new, empty or marked directory; anything else refused
    saved_checkpoint = checkpoint_dir(directory)
    if resume and saved_checkpoint is None:
        raise ValueError(f"cannot resume: {directory / CHECKPOINT} holds no checkpoint; run without --resume first.")
    if resume:
        saved = load_run(directory)[0].get("config", {}).get("train")
        if saved is not None and json.loads(json.dumps(saved)) != json.loads(json.dumps(config_dict)):
            raise ValueError(
                f"the run in {directory} was started with a different configuration; resume it with "
                "the same recipe, profile and seed, or write to a new --out directory."
            )
    elif (directory / "metrics.jsonl").exists():
        raise ValueError(f"{directory} already holds a run; pass resume=True (--resume) or choose another --out.")
    run_id = read_marker(directory)["run_id"]
    log = RunLog(directory, command=command, seed=config.seed, profile=profile,
                 config={"train": config_dict, **(extra_provenance or {})}, resume=resume, device=str(device),
                 run_id=run_id)
    fingerprint = _config_fingerprint(config_dict, run_id)
    init = directory / INIT / "model.safetensors"
    if not resume:
        init.parent.mkdir(parents=True, exist_ok=True)
        save_model(model, str(init))
    ref_model = None
    if recipe.kl_coef > 0:
        import copy

        ref_model = copy.deepcopy(model)
        load_model(ref_model, str(init))
        ref_model.eval().requires_grad_(False)

    optimizer = _adamw(model, config.lr)
    state = _State(config.seed, device)
    torch.manual_seed(config.seed)
    if resume:
        _load_checkpoint(saved_checkpoint, model, optimizer, state, fingerprint)
        _check_log_matches(directory, saved_checkpoint, state)
        _truncate_metrics(directory, state.step)
    model.train()
    eval_gen_seed = 1_000_003 * (config.seed + 1)

    def run_eval(step: int) -> EvalResult:
        gen = torch.Generator(device=device).manual_seed(eval_gen_seed + step)
        return evaluate(model, heldout, config.max_new_tokens, config.eval_samples, gen, codec)

    def measure_pool(step: int) -> dict[str, Any]:
        if config.pool_size is None:
            return {}
        from .solve_rates import model_solve_counts

        counts = model_solve_counts(model, pool, config.pool_samples, config.max_new_tokens,
                                    seed=eval_gen_seed + 500_009 + step)
        model.train()
        return {"pool/k": counts.num_correct.tolist(), "pool/n": config.pool_samples}

    if state.step == 0 and config.eval_every:
        first = run_eval(0)
        log.log(0, {**first.metrics(), **measure_pool(0), "samples/generated": 0, "samples/kept": 0,
                    "updates": 0})
    last_eval: EvalResult | None = None
    bar = _progress(config.sample_budget, f"RL {recipe.name}", progress)
    bar.update(state.samples_generated)
    stopped_early = False
    while state.samples_generated < config.sample_budget:
        if stop_after is not None and state.step >= stop_after:
            stopped_early = True
            break
        t0 = time.perf_counter()
        generated: list[Batch] = []

        def draw(_round: int, num_groups: int | None = None) -> tuple[Batch, np.ndarray]:
            drawn = (np.unique(np.concatenate([b.prompt_index for b in generated]))
                     if generated else np.zeros(0, dtype=np.int64))
            wanted = config.prompts_per_step if num_groups is None else num_groups
            wanted = min(wanted, len(pool) - len(drawn))
            if wanted == 0:  # every pool prompt was drawn this step: the round is empty
                return generated[-1][np.zeros(0, dtype=np.int64)], np.zeros(0)
            batch = _rollout_round(model, pool, config, state, codec, wanted, drawn)
            generated.append(batch)
            return batch, batch.correct

        discarded = {"silent": 0, "surplus": 0}
        if recipe.dynamic_sampling:
            # refill rounds ask for the groups still missing, from new prompts (verl's DAPO)
            sampler = DynamicSampler(config.prompts_per_step, config.group_size, config.max_rounds)
            parts, cost = sampler.fill(draw)
            kept = Batch.cat(parts, codec.pad_id) if parts else None
            rounds, hit_cap = cost.rounds, cost.hit_cap
            discarded = {"silent": cost.groups_silent * config.group_size,
                         "surplus": cost.groups_surplus * config.group_size}
        else:
            batch, _ = draw(0)
            kept, rounds, hit_cap = batch, 1, False
        num_generated = sum(len(b) for b in generated)
        t1 = time.perf_counter()
        state.step += 1
        state.samples_generated += num_generated
        if kept is not None and len(kept):
            # the overlong filter masks truncated samples out of the loss: out of the group's statistics too
            valid = ~kept.truncated.cpu().numpy() if recipe.overlong_filter else None
            advantages = group_advantages(kept.rewards, config.group_size, recipe, valid=valid)
            metrics = _batch_metrics(generated, kept, advantages, config)
            check = bool(config.identity_check_every) and (state.step - 1) % config.identity_check_every == 0
            metrics.update(_update(model, optimizer, kept, advantages, config, state, ref_model, check))
            state.samples_kept += len(kept)
        else:
            metrics = _batch_metrics(generated, generated[0][np.array([], dtype=int)], np.zeros(0), config)
            metrics["optimizer_steps"] = 0
        t2 = time.perf_counter()
        metrics.update({
            "samples/generated": state.samples_generated, "samples/kept": state.samples_kept,
            "samples/discarded": state.samples_generated - state.samples_kept,
            "samples/step_discarded_silent": discarded["silent"],
            "samples/step_discarded_surplus": discarded["surplus"],
            "samples/step_generated": num_generated, "updates": state.updates,
            "dynamic_sampling/rounds": rounds, "dynamic_sampling/hit_cap": bool(hit_cap),
            "time/generation_s": t1 - t0, "time/update_s": t2 - t1,
        })
        done = state.samples_generated >= config.sample_budget
        if config.eval_every and (state.step % config.eval_every == 0 or done):
            last_eval = run_eval(state.step)
            metrics.update(last_eval.metrics())
            metrics.update(measure_pool(state.step))
        log.log(state.step, metrics)
        bar.update(num_generated)
        bar.set_postfix(acc=f"{metrics['accuracy']:.2f}", silent=f"{metrics['frac_reward_zero_std']:.2f}")
        if state.step % config.checkpoint_every == 0 or done:
            _save_checkpoint(directory, model, optimizer, state, fingerprint)
            log.finish()  # the wall time so far, so that a resumed run's total counts this segment
    bar.close()
    if last_eval is None and config.eval_every and state.step > 0 and not stopped_early:
        # a resumed run that had already finished: the final evaluation, as logged (its samples are
        # seeded by the step, so this is the same measurement)
        last_eval = run_eval(state.step)
    log.provenance.update(peak_memory_mb(device))
    log.finish()
    return TrainResult(steps=state.step, samples_generated=state.samples_generated,
                       samples_kept=state.samples_kept, updates=state.updates, final_eval=last_eval,
                       directory=directory, stopped_early=stopped_early)
