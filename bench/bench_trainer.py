"""Benchmark: the book's GRPO trainer (``stddial_book.rl.trainer.train``) against TRL's ``GRPOTrainer``.

Both train a fresh copy of the same warm-started tiny model on the same task, with the same
batch geometry and the same objective, for the same number of rollout batches, and we count
generated samples per second of training.

* **Warm start** (once, not timed): ``stddial_book.rl.sft.sft`` on 2-digit addition
  (``TaskConfig(digits=(2,), num_train=4000, num_heldout=256)``, ``SFTConfig()`` defaults, target
  held-out pass rate 0.6), so completions have realistic lengths and groups are not all silent.
* **Geometry** (both sides): 32 prompts x G = 8 completions = 256 samples per rollout batch,
  ``max_new_tokens`` 8, pure temperature-1 sampling, two optimizer steps per rollout batch on
  disjoint halves of it (ours: ``num_minibatches=2``; TRL: ``generation_batch_size=256``,
  ``per_device_train_batch_size=128``, ``gradient_accumulation_steps=1``, ``num_iterations=1``).
* **Objective** (both sides): group advantages with Bessel's std + 1e-4, clipped surrogate
  (0.2/0.2), no KL (beta 0), per-sequence token mean then mean over sequences (TRL
  ``loss_type="grpo"``; ours ``GRPO.replace(kl_coef=0.0, std_correction=1, std_eps=1e-4)``),
  AdamW (the fused kernel on both sides) lr 1e-4 constant, no weight decay, grad-norm clip 1.0,
  fp32 on CPU. Reward 1 iff the completion is exactly the answer followed by EOS (TRL's reward reads ``completion_ids``, since
  its decoded text drops EOS).
* **Timing**: runs alternate (ours, TRL, ours, TRL, ...), each side seeded alike within a repeat.
  Ours: the wall time of the ``train()`` call (it includes its own setup: the run log, saving the
  initial weights, and the checkpoint it writes at the end of the run, reported separately).
  TRL: the wall time of ``trainer.train()`` (trainer construction excluded; what ``train()`` sets
  up inside, optimizer, dataloader, Accelerate, is included). One unmeasured 1-step run of each
  side warms up first-call costs.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_trainer.py [--steps 8] [--repeats 3]

Needs the extra pins in ``bench/requirements-trl.txt`` (see ``bench/README.md``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")

import argparse
import copy
import functools
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch

import stddial_book.rl.trainer as book_train
from stddial_book.rl import checkpoints
from stddial_book.rl.batches import make_problems
from stddial_book.rl.configs import SFTConfig, TaskConfig, TrainConfig
from stddial_book.rl.evaluate import evaluate
from stddial_book.rl.model import CharCodec, make_tokenizer, tiny_model
from stddial_book.rl.sft import sft
from stddial_book.rl.tasks import EOS
from stddial_book.theory.recipes import GRPO

GOAL = 2.0
#: The book's GRPO preset with TRL's numbers: Bessel std + 1e-4, beta 0.
RECIPE = GRPO.replace(name="GRPO (TRL's std)", kl_coef=0.0, std_correction=1, std_eps=1e-4)


# --------------------------------------------------------------------------- ours


def run_ours(
    model,
    problems: Sequence,
    heldout: Sequence,
    *,
    steps: int,
    prompts: int,
    group_size: int,
    num_minibatches: int,
    max_new_tokens: int,
    lr: float,
    seed: int,
) -> dict[str, Any]:
    """Train ``model`` in place with the book's ``train`` for ``steps`` rollout batches."""
    config = TrainConfig(
        recipe=RECIPE,
        group_size=group_size,
        prompts_per_step=prompts,
        num_minibatches=num_minibatches,
        lr=lr,
        max_grad_norm=1.0,
        max_new_tokens=max_new_tokens,
        sample_budget=steps * prompts * group_size,
        eval_every=0,
        checkpoint_every=10**9,
        temperature=1.0,
        seed=seed,
    )
    # train() writes a checkpoint at the end of the run (its last step counts as "done"); time it
    # by wrapping the function, without changing what it does, under the name the trainer calls it by
    # (it imports save_checkpoint by name, so wrapping checkpoints.save_checkpoint alone timed nothing).
    checkpoint = {"s": 0.0, "n": 0}
    original = book_train.save_checkpoint
    assert original is checkpoints.save_checkpoint

    def timed_checkpoint(*args, **kwargs):
        t = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            checkpoint["s"] += time.perf_counter() - t
            checkpoint["n"] += 1

    with tempfile.TemporaryDirectory(prefix="bench_ours_") as tmp:
        out = Path(tmp) / "run"
        book_train.save_checkpoint = timed_checkpoint
        try:
            t0 = time.perf_counter()
            result = book_train.train(model, problems, heldout, config, out)
            wall = time.perf_counter() - t0
        finally:
            book_train.save_checkpoint = original
        if checkpoint["n"] == 0:
            raise RuntimeError("bench_trainer: the end-of-run checkpoint was not timed (train() no longer calls it?)")
        records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    records = [r for r in records if r["step"] >= 1]
    gen = [r["time/generation_s"] for r in records]
    upd = [r["time/update_s"] for r in records]
    samples = sum(r["samples/step_generated"] for r in records)
    steps_s = sum(gen) + sum(upd)
    steady_s = sum(gen[1:]) + sum(upd[1:])
    steady_samples = sum(r["samples/step_generated"] for r in records[1:])
    return {
        "samples": samples,
        "wall_s": wall,
        "samples_per_s": samples / wall,
        "generation_s": sum(gen),  # sampling (KV cache, log π_old recorded) + verifying
        "old_logps_s": 0.0,  # no π_old pass: the sampler's log-probs are used
        "update_s": sum(upd),  # advantages, batch metrics, 2 x (fwd+bwd, clip, AdamW)
        "checkpoint_s": checkpoint["s"],  # the end-of-run checkpoint (model, optimizer, RNG)
        "checkpoints": checkpoint["n"],
        "other_s": wall - steps_s - checkpoint["s"],  # run log + git/env provenance, init save, jsonl writes
        "steps_only_samples_per_s": samples / steps_s,
        "steady_samples_per_s": steady_samples / steady_s if steady_s > 0 else float("nan"),
        "step_s": [g + u for g, u in zip(gen, upd)],
        "optimizer_steps": result.updates,
        "rollout_batches": result.steps,
        "reward_per_round": [r["reward"] for r in records],
        "mean_reward": float(np.mean([r["reward"] for r in records])),
        "mean_completion_length": float(np.mean([r["completions/mean_length"] for r in records])),
        "torch_threads": torch.get_num_threads(),
    }


# --------------------------------------------------------------------------- TRL


def make_reward_func(tokenizer, record: list[float]):
    """TRL reward function: 1.0 iff the completion is exactly ``answer + <eos>``.

    TRL decodes completions with ``skip_special_tokens=True``, which drops ``<eos>``, so the text
    alone cannot tell "521<eos>" from a truncated "521". This decodes the ``completion_ids`` TRL
    passes to reward functions with the book's CharCodec (drops <pad>, stops after the first EOS),
    as the book's trainer does. Every reward is appended to ``record`` (the per-round mean reward).
    """
    codec = CharCodec()
    if tokenizer.eos_token_id != codec.eos_id or tokenizer.pad_token_id != codec.pad_id:
        raise ValueError("tokenizer and CharCodec disagree on the special ids")

    def addition_reward(prompts, completions, completion_ids, answer, **kwargs):
        out = [1.0 if codec.decode(ids) == ans + EOS else 0.0 for ids, ans in zip(completion_ids, answer)]
        record.append(float(np.mean(out)))
        return out

    return addition_reward


def run_trl(
    model,
    tokenizer,
    problems: Sequence,
    *,
    steps: int,
    prompts: int,
    group_size: int,
    num_minibatches: int,
    max_new_tokens: int,
    lr: float,
    seed: int,
) -> dict[str, Any]:
    """Train ``model`` in place with ``trl.GRPOTrainer`` for ``steps`` rollout batches.

    Timers (instance-attribute wrappers around GRPOTrainer methods; nothing in TRL is changed):
    ``_generate_and_score_completions`` (tokenise prompts, ``model.generate``, decode, reward,
    advantages, and in this geometry the no-grad π_old pass), ``_generate`` (tokenise +
    generate + decode) and ``_get_per_token_logps_and_entropies`` under no_grad (the π_old pass).
    """
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    N = prompts * group_size
    dataset = Dataset.from_dict({"prompt": [p.prompt for p in problems], "answer": [p.answer for p in problems]})
    rewards: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench_trl_") as tmp:
        config = GRPOConfig(
            output_dir=tmp,
            # geometry: one generation batch of N per rollout, split into num_minibatches optimizer
            # steps (steps_per_generation = num_minibatches), each rollout used once
            num_generations=group_size,
            generation_batch_size=N,
            per_device_train_batch_size=N // num_minibatches,
            gradient_accumulation_steps=1,
            num_iterations=1,
            max_steps=steps * num_minibatches,
            # sampling: pure temperature 1 (top_k=0: a None top_k is filled with 50 by transformers)
            max_completion_length=max_new_tokens,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            min_p=None,
            repetition_penalty=1.0,
            use_vllm=False,
            # objective
            beta=0.0,
            epsilon=0.2,
            loss_type="grpo",
            scale_rewards="group",
            mask_truncated_completions=False,
            # optimizer
            learning_rate=lr,
            lr_scheduler_type="constant",
            warmup_steps=0,
            weight_decay=0.0,
            # the fused AdamW kernel on both sides (ours uses it; it is TrainingArguments' default
            # with torch >= 2.8)
            max_grad_norm=1.0,
            optim="adamw_torch_fused",
            # CPU fp32, no activation checkpointing (GRPOConfig defaults to bf16 and checkpointing)
            use_cpu=True,
            bf16=False,
            fp16=False,
            activation_checkpointing=False,
            dataloader_num_workers=0,
            dataloader_pin_memory=False,
            # bookkeeping: log every step (as ours does), never save, report nowhere
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            log_completions=False,
            disable_tqdm=True,
            seed=seed,
            data_seed=seed,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=make_reward_func(tokenizer, rewards),
            args=config,
            train_dataset=dataset,
            processing_class=tokenizer,
        )
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        trainer.remove_callback(PrinterCallback)
        trainer.remove_callback(ProgressCallback)

        timers = {"gen_s": 0.0, "sample_s": 0.0, "old_logps_s": 0.0, "old_logps_calls": 0}
        round_starts: list[float] = []
        round_samples: list[int] = []
        lengths: list[float] = []
        orig_gas, orig_generate = trainer._generate_and_score_completions, trainer._generate
        orig_logps = trainer._get_per_token_logps_and_entropies

        @functools.wraps(orig_gas)
        def timed_gas(inputs):
            t = time.perf_counter()
            out = orig_gas(inputs)
            timers["gen_s"] += time.perf_counter() - t
            round_starts.append(t)
            round_samples.append(int(out["completion_ids"].shape[0]))
            lengths.append(float(out["completion_mask"].sum(dim=1).float().mean()))
            return out

        @functools.wraps(orig_generate)
        def timed_generate(prompts_):
            t = time.perf_counter()
            out = orig_generate(prompts_)
            timers["sample_s"] += time.perf_counter() - t
            return out

        @functools.wraps(orig_logps)
        def timed_logps(*args, **kwargs):
            if torch.is_grad_enabled():  # the loss pass
                return orig_logps(*args, **kwargs)
            t = time.perf_counter()
            out = orig_logps(*args, **kwargs)
            timers["old_logps_s"] += time.perf_counter() - t
            timers["old_logps_calls"] += 1
            return out

        trainer._generate_and_score_completions = timed_gas
        trainer._generate = timed_generate
        trainer._get_per_token_logps_and_entropies = timed_logps

        t0 = time.perf_counter()
        trainer.train()
        t_end = time.perf_counter()
    wall = t_end - t0
    samples = sum(round_samples)
    bounds = round_starts + [t_end]
    round_s = [b - a for a, b in zip(bounds[:-1], bounds[1:])]
    gen_s = timers["gen_s"]
    return {
        "samples": samples,
        "wall_s": wall,
        "samples_per_s": samples / wall,
        "generation_s": gen_s - timers["old_logps_s"],  # tokenise + generate + decode + reward + advantages
        "sample_s": timers["sample_s"],  # tokenise + model.generate + decode only
        "old_logps_s": timers["old_logps_s"],  # the no-grad π_old forward pass over N
        "old_logps_calls": timers["old_logps_calls"],
        "update_s": wall - gen_s,  # loss passes, optimizer, Trainer/Accelerate bookkeeping
        "before_first_round_s": round_starts[0] - t0 if round_starts else float("nan"),
        "steps_only_samples_per_s": samples / sum(round_s),
        "steady_samples_per_s": sum(round_samples[1:]) / sum(round_s[1:]) if len(round_s) > 1 else float("nan"),
        "step_s": round_s,
        "optimizer_steps": trainer.state.global_step,
        "rollout_batches": len(round_starts),
        "reward_per_round": rewards,
        "mean_reward": float(np.mean(rewards)),
        "mean_completion_length": float(np.mean(lengths)),
        "steps_per_generation": config.steps_per_generation,
        "torch_threads": torch.get_num_threads(),
    }


# --------------------------------------------------------------------------- driver


def heldout_accuracy(model, heldout, max_new_tokens: int, seed: int = 12345) -> dict[str, float]:
    """Held-out accuracy (sampled, 8 samples a prompt, and greedy); not timed."""
    res = evaluate(model, heldout, max_new_tokens, 8, torch.Generator().manual_seed(seed), CharCodec())
    return {"sampled": res.sampled, "greedy": res.greedy}


def cpu_info() -> dict[str, Any]:
    name = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "model": name,
        "machine": platform.machine(),
        "logical_cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def git_commit(directory: Path | None = None) -> str:
    """The git commit of the checkout holding ``directory`` (default: this script's); '' if none."""
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=directory or Path(__file__).parent,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="rollout batches per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--num-minibatches", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--sft-target", type=float, default=0.6)
    parser.add_argument("--warmup-steps", type=int, default=1, help="unmeasured run of each side first (0: none)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "trainer.json"))
    args = parser.parse_args()

    import accelerate
    import datasets
    import tokenizers
    import transformers
    import trl
    from transformers.utils import logging as hf_logging

    warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    torch.set_num_threads(1)

    task = TaskConfig(digits=(2,), num_train=4000, num_heldout=256)
    problems, heldout = make_problems(task)
    tokenizer = make_tokenizer()

    print(f"warm start: SFT to held-out pass rate {args.sft_target} ...", flush=True)
    base = tiny_model(seed=0)
    sft_cfg = SFTConfig(target_pass_rate=args.sft_target)
    sft_res = sft(base, problems, heldout, sft_cfg, max_new_tokens=args.max_new_tokens)
    print(f"  {sft_res.steps} steps, pass rate {sft_res.pass_rate:.3f}, {sft_res.wall_time_s:.1f} s", flush=True)
    base.eval()
    base_acc = heldout_accuracy(base, heldout, args.max_new_tokens)

    common = dict(
        steps=args.steps,
        prompts=args.prompts,
        group_size=args.group_size,
        num_minibatches=args.num_minibatches,
        max_new_tokens=args.max_new_tokens,
        lr=args.lr,
    )

    def ours(seed: int, steps: int | None = None) -> tuple[dict[str, Any], Any]:
        model = copy.deepcopy(base)
        kw = {**common, "steps": steps or args.steps}
        return run_ours(model, problems, heldout, seed=seed, **kw), model

    def theirs(seed: int, steps: int | None = None) -> tuple[dict[str, Any], Any]:
        model = copy.deepcopy(base)
        kw = {**common, "steps": steps or args.steps}
        return run_trl(model, tokenizer, problems, seed=seed, **kw), model

    if args.warmup_steps:
        print(f"warm-up: {args.warmup_steps} step(s) each, not counted", flush=True)
        ours(10_000, args.warmup_steps)
        theirs(10_000, args.warmup_steps)

    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "trl": []}
    for r in range(args.repeats):
        seed = r + 1
        for name, fn in (("ours", ours), ("trl", theirs)):
            res, model = fn(seed)
            res["seed"] = seed
            res["heldout_after"] = heldout_accuracy(model, heldout, args.max_new_tokens)
            runs[name].append(res)
            print(
                f"  repeat {r + 1}/{args.repeats} {name:4s}: {res['samples']} samples in {res['wall_s']:.2f} s "
                f"= {res['samples_per_s']:.1f} samples/s (generation {res['generation_s']:.2f} s, "
                f"pi_old {res['old_logps_s']:.2f} s, update {res['update_s']:.2f} s); "
                f"mean reward {res['mean_reward']:.3f}, held-out sampled acc "
                f"{base_acc['sampled']:.3f} -> {res['heldout_after']['sampled']:.3f}",
                flush=True,
            )

    def med(name: str, key: str) -> float:
        return statistics.median(x[key] for x in runs[name])

    ratios = [o["samples_per_s"] / t["samples_per_s"] for o, t in zip(runs["ours"], runs["trl"])]
    steps_only_ratios = [
        o["steps_only_samples_per_s"] / t["steps_only_samples_per_s"] for o, t in zip(runs["ours"], runs["trl"])
    ]
    steady_ratios = [o["steady_samples_per_s"] / t["steady_samples_per_s"] for o, t in zip(runs["ours"], runs["trl"])]
    ratio = statistics.median(ratios)
    summary = {
        name: {
            "samples_per_s_median": med(name, "samples_per_s"),
            "samples_per_s_all": [x["samples_per_s"] for x in runs[name]],
            "wall_s_median": med(name, "wall_s"),
            "generation_s_median": med(name, "generation_s"),
            "old_logps_s_median": med(name, "old_logps_s"),
            "update_s_median": med(name, "update_s"),
            **(
                {"checkpoint_s_median": med(name, "checkpoint_s"), "other_s_median": med(name, "other_s")}
                if name == "ours"
                else {
                    "sample_s_median": med(name, "sample_s"),
                    "before_first_round_s_median": med(name, "before_first_round_s"),
                }
            ),
            "steps_only_samples_per_s_median": med(name, "steps_only_samples_per_s"),
            "steady_samples_per_s_median": med(name, "steady_samples_per_s"),
            "mean_reward_median": med(name, "mean_reward"),
            "mean_reward_all": [x["mean_reward"] for x in runs[name]],
            "mean_completion_length_median": med(name, "mean_completion_length"),
            "heldout_sampled_after_all": [x["heldout_after"]["sampled"] for x in runs[name]],
        }
        for name in runs
    }
    result = {
        "benchmark": "GRPO trainer samples/s: stddial_book.rl.trainer.train vs trl.GRPOTrainer",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "trl": trl.__version__,
            "accelerate": accelerate.__version__,
            "datasets": datasets.__version__,
            "numpy": np.__version__,
        },
        "cpu": cpu_info(),
        "threads": {"torch": torch.get_num_threads(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")},
        "settings": {
            **{k: v for k, v in vars(args).items() if k != "out"},
            "task": {"digits": list(task.digits), "num_train": task.num_train, "num_heldout": task.num_heldout},
            "samples_per_rollout_batch": args.prompts * args.group_size,
            "optimizer_steps_per_rollout_batch": args.num_minibatches,
            "recipe": {
                "std_correction": RECIPE.std_correction,
                "std_eps": RECIPE.std_eps,
                "kl_coef": RECIPE.kl_coef,
                "clip": [RECIPE.clip_low, RECIPE.clip_high],
                "loss_aggregation": RECIPE.loss_aggregation,
            },
            "trl": {
                "loss_type": "grpo",
                "beta": 0.0,
                "num_iterations": 1,
                "generation_batch_size": args.prompts * args.group_size,
                "per_device_train_batch_size": args.prompts * args.group_size // args.num_minibatches,
                "gradient_accumulation_steps": 1,
                "top_k": 0,
                "scale_rewards": "group",
                "optim": "adamw_torch_fused",
            },
            "seeds": [r + 1 for r in range(args.repeats)],
        },
        "warm_start": {
            "sft_steps": sft_res.steps,
            "sft_pass_rate": sft_res.pass_rate,
            "sft_reached": sft_res.reached,
            "sft_wall_s": sft_res.wall_time_s,
            "heldout_before": base_acc,
        },
        "timed": {
            "ours": "wall time of the train() call: run-log setup and provenance, saving the initial "
            "weights, every step (sampling + verifying; advantages, metrics and the two "
            "optimizer steps), metrics.jsonl writes, and the end-of-run checkpoint "
            "(checkpoint_s). No pi_old pass: the sampler's recorded log-probs are pi_old.",
            "trl": "wall time of trainer.train() (GRPOTrainer construction excluded): optimizer, "
            "dataloader and Accelerate setup, generation (tokenise, model.generate, decode), "
            "reward, advantages, a no-grad pi_old forward pass over each rollout batch "
            "(old_logps_s; this geometry has gradient_accumulation_steps % "
            "(steps_per_generation * num_iterations) != 0), the loss passes and optimizer "
            "steps, and Trainer logging.",
        },
        "summary": summary,
        "ratio_ours_over_trl": ratio,
        "ratios_per_repeat": ratios,
        "steps_only_ratio_median": statistics.median(steps_only_ratios),
        "steady_ratio_median": statistics.median(steady_ratios),
        "secondary_ratios_note": "steps_only: samples over the time of the rollout batches alone (ours: "
        "sum of time/generation_s + time/update_s; TRL: first generation start to "
        "the end of train()); steady: the same without the first rollout batch. "
        "The goal applies to ratio_ours_over_trl (whole train() calls).",
        "goal": GOAL,
        "pass": ratio >= GOAL,
        "runs": runs,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")

    print()
    for name in ("ours", "trl"):
        s = summary[name]
        print(
            f"{name:4s}: {s['samples_per_s_median']:7.1f} samples/s (median of "
            f"{', '.join(f'{v:.1f}' for v in s['samples_per_s_all'])}); per run: generation "
            f"{s['generation_s_median']:.2f} s, pi_old {s['old_logps_s_median']:.2f} s, update "
            f"{s['update_s_median']:.2f} s, wall {s['wall_s_median']:.2f} s; mean reward "
            f"{s['mean_reward_median']:.3f}"
        )
    print(
        f"steady state (rollout batches 2..): ours {summary['ours']['steady_samples_per_s_median']:.1f}, "
        f"TRL {summary['trl']['steady_samples_per_s_median']:.1f} samples/s, ratio "
        f"{result['steady_ratio_median']:.2f}x"
    )
    print(
        f"ratio ours/TRL: {ratio:.2f}x (per repeat {', '.join(f'{x:.2f}' for x in ratios)}); "
        f"goal {GOAL}x: {'PASS' if result['pass'] else 'FAIL'}  -> {args.out}"
    )


if __name__ == "__main__":
    sys.exit(main())
