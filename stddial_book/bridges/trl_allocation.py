"""Part V's decision procedure applied with TRL's ``GRPOTrainer`` (chapter 16): prune the pool, choose G, set the
recipe, and optionally skip prompts seen silent.

The procedure: measure each prompt's solve rate with n samples of the starting model (the table
``python -m stddial_book diagnose`` reads); drop the prompts never or always solved in those n samples, which
are silent at every group size a run can afford; take ``num_generations`` from the group-size law
G* = 1/(8εp(1 − p)) at the median measured p of the prompts kept, rounded up; set the recipe's TRL settings
(:func:`~stddial_book.bridges.trl_settings.trl_settings`). Optionally add GRESO's skip (Zheng et al., 2025): a
prompt whose last visits were all silent is passed over with probability 1 − max(p_eᶻ, floor), the book's
:class:`~stddial_book.rl.allocation_rules.GresoSkip` read through a reward function that watches each group and a
sampler that replaces TRL's. Uniform groups are the default, as the chapter's evidence recommends.

What TRL cannot express of Part V (TRL 1.16.0): a group size per prompt (``num_generations`` is one number per
trainer, and the advantages are taken over ``rewards.view(-1, num_generations)``), so the dial's rule, Knapsack
RL, SPEED's screen-then-continue and Reinforce-Ada's rounds have no TRL form; DAPO's refill of a batch with new
prompts (huggingface/trl#3708, #3973); a skip shared by several processes (the history below lives in one).

As a script, on a JSON-lines file of GSM8K's schema (``question``, ``answer`` ending in ``#### N``) whose rows also
hold the measurement (``correct`` of ``samples``)::

    python -m stddial_book.bridges.trl_allocation pool.jsonl --plan-only
    python -m stddial_book.bridges.trl_allocation pool.jsonl --model Qwen/Qwen2.5-0.5B-Instruct --out runs/plan
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.data import Sampler

from stddial_book.bridges.trl_differences import trl_gaps
from stddial_book.bridges.trl_keywords import grpo_config_from, import_trl
from stddial_book.bridges.trl_settings import reward_settings, trl_settings
from stddial_book.core.checks import check_int, check_number
from stddial_book.rl.allocation_rules import GresoSkip
from stddial_book.rl.pool_state import PoolState, new_pool_state, record
from stddial_book.theory.group_size import group_size_law
from stddial_book.theory.recipes import RECIPES, as_recipe
from stddial_book.theory.silent import silent_probability

__all__ = [
    "AllocationPlan",
    "learnable_prompts",
    "round_group_size",
    "plan_allocation",
    "plan_text",
    "SilenceWatcher",
    "SkipSampler",
    "allocated_trainer",
    "train_with_plan",
    "POOL_FIELDS",
    "read_pool_file",
]


@dataclass(frozen=True)
class AllocationPlan:
    """The decision procedure's outcome for one pool and recipe (:func:`plan_allocation`).

    ``recipe`` is the recipe's name. ``solve_rates`` holds each prompt's measured p = k/n (all prompts, pruned
    or not), and ``keep`` is True for the prompts kept (0 < k < n). ``median_p`` is the median measured p of the
    prompts kept; ``g_star`` the group-size law's G* = 1/(8εp(1 − p)) at ``median_p``; ``num_generations`` G*
    rounded up (:func:`round_group_size`): TRL's one group size. ``silent_before`` and ``silent_after`` are the
    expected silent fraction at ``num_generations`` over the whole pool and over the prompts kept
    (p^G + (1 − p)^G with p = k/n). ``settings`` are the ``trl.GRPOConfig`` keywords (the recipe's dial,
    aggregation, clip, sampling, batch); ``gaps`` the knobs TRL computes differently from the recipe
    (:func:`~stddial_book.bridges.trl_differences.trl_gaps`).
    """

    recipe: str
    solve_rates: np.ndarray
    keep: np.ndarray
    median_p: float
    g_star: float
    num_generations: int
    silent_before: float
    silent_after: float
    settings: dict[str, Any]
    gaps: tuple[str, ...]

    @property
    def pruned_share(self) -> float:
        """The share of prompts dropped as never or always solved."""
        return float(1.0 - self.keep.mean())


def learnable_prompts(correct: Sequence[int], samples: Sequence[int] | int) -> np.ndarray:
    """True for each prompt solved sometimes but not always in its measurement: 0 < k < n.

    A prompt at k = 0 or k = n of n samples has an estimated p of 0 or 1, silent at every G; with n samples
    its true p is below about 3/n (or above 1 − 3/n) with 95% confidence, so a group of G ≪ n would
    almost always be silent too. ``correct`` is k per prompt (whole numbers); ``samples`` is n per prompt, or
    one n for all.
    """
    k = np.asarray(correct)
    n = np.broadcast_to(np.asarray(samples), k.shape) if np.ndim(samples) == 0 else np.asarray(samples)
    if k.ndim != 1 or n.shape != k.shape or k.size == 0:
        raise ValueError(
            f"correct and samples must be one entry per prompt (1-D, same length); got {k.shape}, {n.shape}."
        )
    if k.dtype.kind not in "iuf" or n.dtype.kind not in "iuf" or np.any(k != np.round(k)) or np.any(n != np.round(n)):
        raise ValueError("correct and samples must hold whole numbers (k correct of n samples per prompt).")
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise ValueError("each prompt needs samples >= 1 and 0 <= correct <= samples.")
    return (k > 0) & (k < n)


def round_group_size(g_star: float, multiple: int = 4, max_group_size: int = 64) -> int:
    """G* rounded up to a multiple of ``multiple`` (batches that tile the hardware well), at least 2 and at most
    ``max_group_size`` (the memory a generation batch of P·G completions may take). ``g_star`` is the
    group-size law's G*, a finite number > 0; the defaults are multiples of 4 up to 64."""
    g = check_number(g_star, "g_star")
    multiple = check_int(multiple, "multiple", minimum=1)
    cap = check_int(max_group_size, "max_group_size", minimum=2)
    if not (math.isfinite(g) and g > 0):
        raise ValueError(f"g_star must be a finite number > 0 (the group-size law's G*); got {g_star!r}.")
    return int(min(cap, max(2, multiple * math.ceil(g / multiple))))


def _silent(p: np.ndarray, group_size: int) -> float:
    """The expected silent fraction at G over the prompts of solve rates ``p``."""
    return float(np.mean(silent_probability(p, group_size)))


def plan_allocation(
    correct: Sequence[int],
    samples: Sequence[int] | int,
    recipe: Any = "grpo",
    *,
    epsilon: float = 0.05,
    max_new_tokens: int = 256,
    prompts_per_step: int = 8,
    micro_batch_size: int | None = None,
    multiple: int = 4,
    max_group_size: int = 64,
) -> AllocationPlan:
    """Steps 2-4 of chapter 16's procedure on a measured pool: prune, G from the law, the recipe's TRL settings.

    ``correct``/``samples``: k of n per prompt from the starting model. ``recipe``: a preset name (default
    ``"grpo"``) or a ``Recipe``. ``epsilon``: the law's tolerance (fidelity 1 − ε). ``multiple`` and
    ``max_group_size`` round G* as :func:`round_group_size` does. ``max_new_tokens`` is L_max, TRL's
    ``max_completion_length`` (default 256). One optimizer step per generation batch of ``prompts_per_step``
    × G completions (``micro_batch_size`` per forward pass; None: trl_settings' default, at most 8 a device),
    so TRL's shuffle across minibatches plays no part.
    """
    recipe = as_recipe(recipe)
    keep = learnable_prompts(correct, samples)
    if not keep.any():
        raise ValueError("no prompt has 0 < correct < samples: every group would be silent at every G; measure again.")
    eps = check_number(epsilon, "epsilon")
    if not 0.0 < eps < 1.0:
        raise ValueError(f"epsilon must lie strictly between 0 and 1 (fidelity 1 − ε); got {epsilon!r}. Try 0.05.")
    p = np.asarray(correct, dtype=np.float64) / np.broadcast_to(np.asarray(samples, dtype=np.float64), keep.shape)
    median = float(np.median(p[keep]))
    g_star = float(group_size_law(eps, median))
    g = round_group_size(g_star, multiple, max_group_size)
    settings = trl_settings(
        recipe,
        group_size=g,
        max_new_tokens=max_new_tokens,
        prompts_per_step=prompts_per_step,
        num_minibatches=1,
        micro_batch_size=micro_batch_size,
    )
    gaps = tuple(gap.knob for gap in trl_gaps(recipe, group_size=g, num_minibatches=1))
    return AllocationPlan(recipe.name, p, keep, median, g_star, g, _silent(p, g), _silent(p[keep], g), settings, gaps)


def plan_text(plan: AllocationPlan) -> str:
    """The plan in a few lines of plain text (what the script prints before it trains); ``plan`` is an
    :class:`AllocationPlan`."""
    s = plan.settings
    return "\n".join(
        [
            f"pool: {plan.keep.size:,} prompts; kept {int(plan.keep.sum()):,} (0 < k < n), pruned {plan.pruned_share:.1%}",
            f"median p of the kept prompts {plan.median_p:.3f}: G* = {plan.g_star:.1f}, "
            f"num_generations = {plan.num_generations}",
            f"silent at G = {plan.num_generations}: {plan.silent_before:.1%} of the pool, {plan.silent_after:.1%} "
            "after pruning",
            f"{plan.recipe}: scale_rewards={s['scale_rewards']!r}, loss_type={s['loss_type']!r}, "
            f"generation_batch_size={s['generation_batch_size']}",
            "TRL differs from the recipe in: " + (", ".join(plan.gaps) if plan.gaps else "nothing"),
        ]
    )


class SilenceWatcher:
    """A TRL reward function that returns what ``reward_func`` returns and records each group in ``state``.

    TRL passes every dataset column to reward functions; the pruned dataset's ``prompt_id`` names each
    completion's prompt, and TRL's sampler (or :class:`SkipSampler`) puts a prompt's ``group_size`` completions
    next to each other. A completion passed when its reward is ``correct`` (raw correctness, not a shaped reward).
    """

    def __init__(
        self, reward_func: Callable[..., list[float]], state: PoolState, group_size: int, correct: float = 1.0
    ):
        self.reward_func, self.state, self.correct = reward_func, state, float(correct)
        self.group_size = check_int(group_size, "group_size", minimum=2)
        self.__name__ = getattr(reward_func, "__name__", type(reward_func).__name__)

    def __call__(self, *, completions: Sequence[Any], prompt_id: Sequence[int], **kwargs: Any) -> list[float]:
        rewards = self.reward_func(completions=completions, prompt_id=prompt_id, **kwargs)
        ids = np.asarray(prompt_id).reshape(-1, self.group_size)
        if np.any(ids != ids[:, :1]):
            raise ValueError(
                "a group mixes prompts: SilenceWatcher needs each prompt's completions next to each other."
            )
        passed = np.isclose(np.asarray(rewards, dtype=np.float64), self.correct).reshape(ids.shape)
        record(self.state, ids[:, 0], passed.sum(axis=1), np.full(len(ids), self.group_size))
        return rewards


class SkipSampler(Sampler):
    """TRL's ``RepeatSampler`` layout with GRESO's skip in front: batches of ``batch_size`` distinct prompts, each
    repeated ``mini_repeat_count`` (= G) times, each batch repeated ``repeat_count`` times (TRL reuses one generation
    batch over its steps), as many batches an epoch as TRL's sampler gives.

    Prompts come in a shuffled order, reshuffled when it runs out; each is passed over with ``rule``'s skip
    probability from ``state`` at the moment its batch is drawn. The data loader asks for the next batch before
    the current one is scored, so a skip reads the history up to the batch before. ``skipped`` counts the prompts
    passed over (each would have cost G samples).

    ``num_prompts`` is the dataset's number of rows (prompts are their indices); ``seed`` seeds the sampler's
    own generator, for the order and the skip draws (default 0)."""

    def __init__(
        self,
        num_prompts: int,
        state: PoolState,
        rule: GresoSkip,
        *,
        mini_repeat_count: int,
        batch_size: int,
        repeat_count: int = 1,
        seed: int = 0,
    ):
        self.num_prompts = check_int(num_prompts, "num_prompts", minimum=1)
        self.state, self.rule = state, rule
        self.mini_repeat_count = check_int(mini_repeat_count, "mini_repeat_count", minimum=1)
        self.batch_size = check_int(batch_size, "batch_size", minimum=1)
        self.repeat_count = check_int(repeat_count, "repeat_count", minimum=1)
        self.rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
        self.order: list[int] = []
        self.skipped = 0

    def __len__(self) -> int:
        return (self.num_prompts // self.batch_size) * self.batch_size * self.mini_repeat_count * self.repeat_count

    def _next_batch(self) -> list[int]:
        batch: list[int] = []
        while len(batch) < self.batch_size:
            if not self.order:
                self.order = self.rng.permutation(self.num_prompts).tolist()
            i = self.order.pop()
            if i in batch:
                continue
            if self.rng.random() < self.rule.skip_probability(self.state, np.array([i]))[0]:
                self.skipped += 1
                continue
            batch.append(i)
        return batch

    def __iter__(self):
        for _ in range(self.num_prompts // self.batch_size):
            batch = self._next_batch()
            for _ in range(self.repeat_count):
                for i in batch:
                    yield from [i] * self.mini_repeat_count


def _skip_sampler(trainer: Any, state: PoolState, rule: GresoSkip, dataset: Any = None) -> SkipSampler:
    """What the trainer's ``_get_train_sampler`` returns instead of TRL's ``RepeatSampler`` (kept as
    ``trainer.skip_sampler``, whose ``skipped`` counts the prompts passed over)."""
    g = trainer.num_generations
    trainer.skip_sampler = SkipSampler(
        len(trainer.train_dataset if dataset is None else dataset),
        state,
        rule,
        mini_repeat_count=g,
        batch_size=trainer.args.generation_batch_size // g,
        repeat_count=trainer.num_iterations * trainer.args.steps_per_generation,
        seed=trainer.args.seed,
    )
    return trainer.skip_sampler


def allocated_trainer(
    plan: AllocationPlan,
    model: Any,
    processing_class: Any,
    prompts: Any,
    reward_funcs: Sequence[Callable[..., list[float]]],
    output_dir: str | os.PathLike,
    *,
    skip: GresoSkip | None = None,
    correct: float = 1.0,
    peft_config: Any = None,
    **overrides: Any,
) -> tuple[Any, PoolState | None]:
    """A ``trl.GRPOTrainer`` that applies ``plan``: the kept prompts only, ``num_generations`` and the recipe's
    settings (``overrides`` are further ``GRPOConfig`` settings and win); with ``skip``, GRESO's skip as well.

    ``model`` and ``processing_class`` (the tokenizer) go to ``GRPOTrainer`` as they are, as does
    ``peft_config`` (e.g. a ``peft.LoraConfig``; None trains every weight). ``output_dir`` is
    ``GRPOConfig``'s. ``prompts``: a ``datasets.Dataset`` in TRL's format, one row per prompt of the measured
    pool, in its order. ``reward_funcs`` are TRL reward functions; ``reward_funcs[0]`` must be the correctness
    reward (its value ``correct`` for a right answer): with ``skip`` it is watched. Returns the trainer and the
    history the skip reads (None without ``skip``). The skip replaces the trainer's private
    ``_get_train_sampler`` (TRL 1.16.0) and keeps its history in this process only.
    """
    trl = import_trl("allocated_trainer")
    if len(prompts) != plan.keep.size:
        raise ValueError(f"prompts has {len(prompts)} rows but the plan measured {plan.keep.size}; pass the same pool.")
    kept = prompts.select(np.flatnonzero(plan.keep).tolist())
    kept = kept.add_column("prompt_id", list(range(len(kept))))
    funcs, state = list(reward_funcs), None
    if skip is not None:
        state = new_pool_state(len(kept))
        funcs[0] = SilenceWatcher(funcs[0], state, plan.num_generations, correct)
    args = grpo_config_from(plan.settings, output_dir, overrides)
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=kept,
        processing_class=processing_class,
        peft_config=peft_config,
    )
    if skip is not None:
        if trainer.accelerator.num_processes > 1:
            raise NotImplementedError("the skip's history lives in one process; run it on one, or skip=None.")
        trainer._get_train_sampler = functools.partial(_skip_sampler, trainer, state, skip)
    return trainer, state


def _reward_funcs(recipe: str, max_new_tokens: int) -> tuple[list[Any], float]:
    """The recipe's rewards as TRL reward functions (the verifier first; DAPO adds its soft length penalty) and
    the verifier's value for a right answer."""
    from stddial_book.bridges.lm_rewards import CorrectnessReward

    values = reward_settings(recipe, max_new_tokens=max_new_tokens)
    funcs: list[Any] = [CorrectnessReward(values["reward_correct"], values["reward_wrong"])]
    if values["soft_overlong_punishment"] is not None:
        rewards = import_trl("the soft overlong punishment", "trl.rewards")
        funcs.append(rewards.get_soft_overlong_punishment(**values["soft_overlong_punishment"]))
    return funcs, values["reward_correct"]


def train_with_plan(
    pool_file: str | os.PathLike,
    model_id: str,
    out: str | os.PathLike,
    *,
    recipe: str = "grpo",
    skip: bool = False,
    lora_r: int = 16,
    planning: dict[str, Any] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """The whole procedure on a JSON-lines pool file (GSM8K's schema plus ``correct`` and ``samples``): plan
    (``planning``: options of :func:`plan_allocation`), print the plan, train with TRL (LoRA of rank ``lora_r``
    on every linear layer; 0: every weight), write ``plan.json`` to ``out``. ``overrides``: ``GRPOConfig``
    settings such as ``max_steps`` and ``learning_rate``. Returns what it wrote.

    ``pool_file`` is the pool (:func:`read_pool_file`); ``model_id`` a causal LM's local folder or hub id,
    loaded in the machine's dtype; ``recipe`` a preset name (default ``"grpo"``); ``skip`` adds GRESO's skip
    at the plan's G (default False: uniform groups)."""
    from stddial_book.bridges.lm_data import load_model_and_tokenizer, load_prompts
    from stddial_book.bridges.lm_setup import detect_precision
    from stddial_book.core.outdir import check_claimable, claim_dir

    rows = read_pool_file(pool_file)
    plan = plan_allocation([r["correct"] for r in rows], [r["samples"] for r in rows], recipe, **(planning or {}))
    check_claimable(out, "--out", "trl-allocation")  # before the model loads: nothing is written on a bad --out
    print(plan_text(plan), flush=True)
    precision = detect_precision()
    model, tokenizer = _load_model(model_id, precision["dtype"], load_model_and_tokenizer)
    out = claim_dir(out, "trl-allocation", flag="--out")
    funcs, correct = _reward_funcs(recipe, plan.settings["max_completion_length"])
    lora = None
    if check_int(lora_r, "lora_r", minimum=0) > 0:
        import peft

        lora = peft.LoraConfig(r=lora_r, lora_alpha=2 * lora_r, target_modules="all-linear", task_type="CAUSAL_LM")
    options = {"bf16": precision["bf16"], "fp16": precision["fp16"], "use_cpu": precision["device"] == "cpu"}
    options.update(report_to="none", save_strategy="no", logging_steps=1, **overrides)
    rule = GresoSkip(group_size=plan.num_generations) if skip else None
    trainer, state = allocated_trainer(
        plan,
        model,
        tokenizer,
        load_prompts(str(pool_file)),
        funcs,
        out / "trl",
        skip=rule,
        correct=correct,
        peft_config=lora,
        **options,
    )
    trainer.train()
    result = {
        "plan": plan_text(plan).splitlines(),
        "settings": plan.settings,
        "gaps": list(plan.gaps),
        "skipped_prompts": None if state is None else trainer.skip_sampler.skipped,
        "groups_seen": None if state is None else int(state.visits.sum()),
        "log": trainer.state.log_history,
    }
    (out / "plan.json").write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    return result


#: Pool rows' fields: GSM8K's schema plus the measurement (``correct`` of ``samples``).
POOL_FIELDS = ("question", "answer", "correct", "samples")


def read_pool_file(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a JSON-lines pool file (:data:`POOL_FIELDS` in each), or a one-line ``ValueError`` naming
    the file, the line and the fix. ``path`` is the file (``~`` expanded); blank lines are skipped."""
    name = os.fspath(path)
    target = Path(os.path.expanduser(name))
    if not target.is_file():
        what = "does not exist" if not target.exists() else "is not a regular file"
        raise ValueError(f"{name} {what}; pass a JSON-lines file with {', '.join(POOL_FIELDS)} on each line.")
    rows = []
    with open(target, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                raise ValueError(f"{name}: line {number} is not JSON; write one JSON object per line.") from None
            missing = [key for key in POOL_FIELDS if not isinstance(row, dict) or key not in row]
            if missing:
                raise ValueError(
                    f"{name}: line {number} lacks {', '.join(missing)}; each line needs {', '.join(POOL_FIELDS)} "
                    "(python -m stddial_book measure writes correct and samples)."
                )
            rows.append(row)
    if not rows:
        raise ValueError(f"{name} holds no rows; pass a JSON-lines file with one measured question per line.")
    return rows


def _load_model(model_id: str, dtype: Any, loader: Callable) -> tuple[Any, Any]:
    """``loader(model_id, dtype)``, with a model that cannot be loaded (missing folder, the hub offline, a bad
    id) reported on one line before anything is written."""
    local = Path(os.path.expanduser(model_id))
    if not local.exists():
        from stddial_book.core.hub import hub_unavailable_reason

        reason = hub_unavailable_reason()
        if reason is not None:
            raise ValueError(
                f"--model {model_id}: no such local folder, and the hub cannot be reached ({reason}); "
                "download the model elsewhere and pass its folder."
            )
    try:
        return loader(model_id, dtype)
    except (OSError, RuntimeError, ValueError) as err:
        reason = " ".join(str(err).split())[:160] or type(err).__name__
        raise ValueError(
            f"--model {model_id} cannot be loaded ({reason}); pass a causal LM's folder or hub id."
        ) from None


class _OneLineParser(argparse.ArgumentParser):
    """argparse, with a bad argument reported on one line (``error: ...``, exit status 2), as the main CLI."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; give a positive number such as 1e-5.") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} is not a positive finite number; give one such as 1e-5.")
    return value


def _tolerance(text: str) -> float:
    value = _positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"{text} is not below 1; the law's tolerance lies in (0, 1), e.g. 0.05.")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m stddial_book.bridges.trl_allocation``: every option with its help and default."""
    from stddial_book.bridges.lm_cli import count_type

    parser = _OneLineParser(
        prog="python -m stddial_book.bridges.trl_allocation",
        description="Prune a measured pool, choose G by the group-size law, and train with TRL's GRPOTrainer "
        "(chapter 16). --plan-only prints the plan and writes nothing.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("pool", help="JSON lines: question, answer (#### N), correct, samples")
    parser.add_argument("--plan-only", action="store_true", help="print the plan (pruning, G, TRL settings) and stop")
    parser.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct", help="a causal LM: a local folder or hub id")
    parser.add_argument("--out", default=None, help="a new or empty directory (required unless --plan-only)")
    parser.add_argument("--recipe", default="grpo", choices=RECIPES, help="the recipe")
    parser.add_argument("--skip", action="store_true", help="GRESO's skip of prompts seen silent")
    parser.add_argument("--lora-r", type=count_type(0, 4096), default=16, help="LoRA rank (0: train every weight)")
    parser.add_argument("--max-steps", type=count_type(1, 10**9), default=100, help="optimizer steps")
    parser.add_argument("--learning-rate", type=_positive_float, default=1e-5, help="the optimizer's learning rate")
    parser.add_argument("--epsilon", type=_tolerance, default=0.05, help="the group-size law's tolerance (0 to 1)")
    parser.add_argument("--prompts-per-step", type=count_type(1, 10**6), default=8, help="prompts per optimizer step")
    parser.add_argument(
        "--micro-batch-size",
        type=count_type(1, 10**6),
        default=None,
        help="completions per forward pass (default: at most 8 a device, the rest accumulated)",
    )
    parser.add_argument("--max-new-tokens", type=count_type(1, 10**6), default=256, help="the completion length cap")
    parser.add_argument("--max-group-size", type=count_type(2, 10**6), default=64, help="the largest G the plan takes")
    return parser


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The command for parsed ``args``: the plan (``--plan-only``), or the plan and the training run."""
    planning = {
        "epsilon": args.epsilon,
        "prompts_per_step": args.prompts_per_step,
        "micro_batch_size": args.micro_batch_size,
        "max_new_tokens": args.max_new_tokens,
        "max_group_size": args.max_group_size,
    }
    if args.plan_only:
        rows = read_pool_file(args.pool)
        plan = plan_allocation([r["correct"] for r in rows], [r["samples"] for r in rows], args.recipe, **planning)
        print(plan_text(plan))
        print(json.dumps({"settings": plan.settings}, indent=1, default=str))
        return {"plan": plan_text(plan).splitlines(), "settings": plan.settings, "gaps": list(plan.gaps)}
    if args.out is None:
        raise ValueError("--out is required to train: name a new directory, or pass --plan-only to print the plan.")
    return train_with_plan(
        args.pool,
        args.model,
        args.out,
        recipe=args.recipe,
        skip=args.skip,
        lora_r=args.lora_r,
        planning=planning,
        max_steps=args.max_steps,
        learning_rate=args.learning_rate,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``python -m stddial_book.bridges.trl_allocation POOL.jsonl [--plan-only] --model ID --out
    DIR``; a bad input is reported on one line (``error: ...``) with exit status 2, before anything is written."""
    args = build_parser().parse_args(argv)
    try:
        run(args)
    except (ValueError, TypeError, OSError) as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    except ImportError as err:
        print(f"error: {err.name or err} is not installed; pip install 'trl>=1.16,<2' peft", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
