"""Benchmark: the book's engine against TRL's GRPOTrainer on SmolLM2-135M-Instruct with LoRA (issue 37, item 1).

Both sides train SmolLM2-135M-Instruct (Q4_1, dequantized, float32; ``stddial_book.bridges.smollm2``) with
fresh LoRA adapters (r 16, alpha 32, every linear layer, no dropout) on the arithmetic pool
(``data/smollm2/pool_train.jsonl``), under GRPO as chapter 15 sets it: 8 questions x G = 8 completions a
step, at most 24 new tokens, pure temperature-1 sampling, the system prompt "Answer with just the number."
through the chat template, the last-number verifier, GRPO's objective (the engine: the book's preset,
population std; TRL: Bessel std + 1e-4; the cost is the same), beta 0.04 with the base model (adapters off)
as the reference on both sides, one optimizer step per rollout batch on the whole batch (the engine: one pass,
cut by completion length; TRL: chapter 15's 16 completions a pass, 4 accumulated: 64 a pass took more than
the machine's 23 GB with the rest of the benchmark),
AdamW (fused) at lr 3e-4 constant, no weight decay, grad clip 1.0, one thread.

* the engine: ``stddial_book.rl.trainer.train`` with an ``rl.hf_policy.hf_policy`` (``eval_every=0``); timed:
  the whole ``train()`` call (run-log setup, saving the starting adapters, every step, the end checkpoint);
  the split per step from its metrics (``time/generation_s``: prompts, sampling, verifying;
  ``time/update_s``: advantages, the reference pass, the loss pass and the optimizer step).
* TRL: ``GRPOTrainer`` with ``peft_config`` (TRL wraps the model itself, as chapter 15's run does) and the
  book's ``CorrectnessReward(verifier="last-number")``; timed: ``trainer.train()`` (construction excluded);
  generation per step from a timer around ``_generate_and_score_completions``.

Order: one unmeasured step of each (warm-up), then ``--repeats`` rounds of ``--steps`` measured steps of each
side, the engine first in even rounds and TRL first in odd ones (so that a machine whose load drifts affects
both alike), each run from a fresh copy of the model. The ratio is the median over rounds of the engine's
samples/s over TRL's; completion tokens/s beside it, since the two sides draw different prompts and their
replies differ in length.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_engine_smollm2.py [--steps 1] [--repeats 2]

Writes ``bench/results/engine_smollm2.json`` (refused if it exists unless ``--replace``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import functools
import gc
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "bench" / "results" / "engine_smollm2.json"
POOL = ROOT / "data" / "smollm2" / "pool_train.jsonl"
SETTINGS = {
    "prompts": 8, "group_size": 8, "max_new_tokens": 24, "lr": 3e-4, "lora_r": 16, "lora_alpha": 32,
    "recipe": "grpo", "beta": 0.04, "temperature": 1.0,
}  # fmt: skip
#: TRL's completions a forward/backward pass (chapter 15's SmolLM2 runs: smollm2_config's micro_batch_size).
TRL_MICRO_BATCH = 16


def run_engine(folder: Path, steps: int, seed: int, out: Path) -> dict[str, Any]:
    """``steps`` steps of the engine's trainer from fresh adapters; wall time of ``train()`` and per-step split."""
    from stddial_book.bridges.lm_pool import ANSWER_PROMPT
    from stddial_book.rl.configs import TrainConfig
    from stddial_book.rl.hf_policy import hf_policy
    from stddial_book.rl.runlog import load_run
    from stddial_book.rl.text_tasks import read_text_problems
    from stddial_book.rl.trainer import train

    s = SETTINGS
    policy = hf_policy(folder, lora_r=s["lora_r"], lora_alpha=s["lora_alpha"], system_prompt=ANSWER_PROMPT, seed=seed)
    config = TrainConfig(
        recipe=s["recipe"], group_size=s["group_size"], prompts_per_step=s["prompts"], num_minibatches=1,
        max_new_tokens=s["max_new_tokens"], lr=s["lr"], sample_budget=steps * s["prompts"] * s["group_size"],
        eval_every=0, checkpoint_every=10**6, seed=seed,
    )  # fmt: skip
    problems = read_text_problems(POOL)
    start = time.perf_counter()
    result = train(policy, problems, [], config, out)
    wall = time.perf_counter() - start
    records = [r for r in load_run(out)[1] if r["step"] > 0]
    samples = result.samples_generated
    tokens = sum(r["completions/mean_length"] * r["samples/step_generated"] for r in records)
    return {
        "wall_s": wall,
        "steps": result.steps,
        "samples": samples,
        "samples_per_s": samples / wall,
        "completion_tokens": tokens,
        "completion_tokens_per_s": tokens / wall,
        "step_s": [r["time/generation_s"] + r["time/update_s"] for r in records],
        "generation_s": [r["time/generation_s"] for r in records],
        "update_s": [r["time/update_s"] for r in records],
        "mean_length": [r["completions/mean_length"] for r in records],
        "reward": [r["reward"] for r in records],
        "kl": [r.get("kl") for r in records],
    }


def trl_trainer(folder: Path, steps: int, seed: int, workdir: Path) -> Any:
    """TRL's GRPOTrainer on SmolLM2 with LoRA, set as the engine is (see the module)."""
    import peft
    from trl import GRPOTrainer

    from stddial_book.bridges.lm_data import load_model_and_tokenizer, load_prompts
    from stddial_book.bridges.lm_pool import ANSWER_PROMPT
    from stddial_book.bridges.lm_rewards import CorrectnessReward
    from stddial_book.bridges.trl_keywords import grpo_config_from
    from stddial_book.bridges.trl_settings import trl_settings

    s = SETTINGS
    model, tokenizer = load_model_and_tokenizer(str(folder), "float32")
    settings = trl_settings(
        s["recipe"], group_size=s["group_size"], max_new_tokens=s["max_new_tokens"], prompts_per_step=s["prompts"],
        num_minibatches=1, micro_batch_size=TRL_MICRO_BATCH, temperature=s["temperature"],
    )  # fmt: skip
    overrides = {
        "learning_rate": s["lr"], "lr_scheduler_type": "constant", "warmup_steps": 0, "weight_decay": 0.0,
        "max_grad_norm": 1.0, "optim": "adamw_torch_fused", "max_steps": steps, "seed": seed, "data_seed": seed,
        "use_cpu": True, "bf16": False, "fp16": False, "activation_checkpointing": False,
        "dataloader_num_workers": 0, "dataloader_pin_memory": False, "logging_steps": 1, "save_strategy": "no",
        "report_to": "none", "log_completions": False, "disable_tqdm": True,
    }  # fmt: skip
    lora = peft.LoraConfig(
        r=s["lora_r"], lora_alpha=s["lora_alpha"], lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM"
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[CorrectnessReward(1.0, 0.0, "last-number")],
        args=grpo_config_from(settings, workdir, overrides),
        train_dataset=load_prompts(str(POOL), None, "train", None, ANSWER_PROMPT),
        processing_class=tokenizer,
        peft_config=lora,
    )
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    return trainer


def run_trl(folder: Path, steps: int, seed: int, workdir: Path) -> dict[str, Any]:
    """``steps`` steps of TRL's GRPOTrainer; wall time of ``trainer.train()`` and its generation time per step."""
    trainer = trl_trainer(folder, steps, seed, workdir)
    generation: list[float] = []
    lengths: list[float] = []
    rows: list[int] = []
    original = trainer._generate_and_score_completions

    @functools.wraps(original)
    def timed(inputs):
        t = time.perf_counter()
        out = original(inputs)
        generation.append(time.perf_counter() - t)
        rows.append(int(out["completion_ids"].shape[0]))
        lengths.append(float(out["completion_mask"].sum(dim=1).float().mean()))
        return out

    trainer._generate_and_score_completions = timed
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    samples = sum(rows)
    tokens = sum(n * length for n, length in zip(rows, lengths))
    logs = [h for h in trainer.state.log_history if "reward" in h]
    return {
        "wall_s": wall,
        "steps": int(trainer.state.global_step),
        "samples": samples,
        "samples_per_s": samples / wall,
        "completion_tokens": tokens,
        "completion_tokens_per_s": tokens / wall,
        "generation_s": generation,
        "mean_length": lengths,
        "reward": [h["reward"] for h in logs],
        "kl": [h.get("kl") for h in logs],
    }


def git(*args: str) -> str:
    """The output of a git command in the repository ('' when git cannot run)."""
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, cwd=ROOT).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def provenance(start_commit: str) -> dict[str, Any]:
    """Where and with what the benchmark ran: the commit it started from and the HEAD at its end (others may
    commit meanwhile in a shared checkout), the uncommitted paths, versions, CPU, threads."""

    cpu = platform.processor()
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    dirty = [line[3:] for line in git("status", "--porcelain").splitlines() if line.strip()]
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_commit_at_start": start_commit,
        "git_commit": git("rev-parse", "HEAD").strip(),
        "uncommitted_paths": dirty,
        "versions": {
            name: metadata.version(name)
            for name in ("torch", "transformers", "trl", "peft", "accelerate", "tokenizers", "datasets", "numpy")
        },
        "python": platform.python_version(),
        "cpu": {"model": cpu, "logical_cpus": os.cpu_count(), "machine": platform.machine()},
        "threads": {"torch": torch.get_num_threads(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")},
        "note": "a shared 2-core machine: other processes ran beside the benchmark; both sides alike",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1, help="measured steps of each run (default 1)")
    parser.add_argument("--repeats", type=int, default=2, help="rounds of one run of each side (default 2)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--replace", action="store_true")
    args = parser.parse_args(argv)
    if RESULT.exists() and not args.replace:
        print(f"error: {RESULT.relative_to(ROOT)} exists; pass --replace to write a new result.", file=sys.stderr)
        return 2
    from stddial_book.bridges.smollm2 import SMOLLM2_NAME, smollm2_model_dir

    torch.set_num_threads(1)
    start_commit = git("rev-parse", "HEAD").strip()
    folder = smollm2_model_dir()
    with tempfile.TemporaryDirectory(prefix="bench_engine_") as tmp:
        work = Path(tmp)
        run_engine(folder, 1, args.seed, work / "warm-engine")  # warm-up, not measured
        gc.collect()
        run_trl(folder, 1, args.seed, work / "warm-trl")
        gc.collect()
        engine, trl = [], []
        for repeat in range(args.repeats):
            seed = args.seed + 1 + repeat
            runs = [("engine", run_engine, engine), ("trl", run_trl, trl)]
            for name, run, into in runs if repeat % 2 == 0 else runs[::-1]:
                into.append(run(folder, args.steps, seed, work / f"{name}-{repeat}"))
                gc.collect()  # each run's model and trainer go before the next is built
    ratios = [e["samples_per_s"] / t["samples_per_s"] for e, t in zip(engine, trl)]
    token_ratios = [e["completion_tokens_per_s"] / t["completion_tokens_per_s"] for e, t in zip(engine, trl)]
    result = {
        "benchmark": "GRPO with LoRA on SmolLM2: stddial_book.rl.trainer.train (rl.hf_policy) vs trl.GRPOTrainer",
        "model": SMOLLM2_NAME,
        "settings": {
            **SETTINGS,
            "trl_micro_batch": TRL_MICRO_BATCH,
            "measured_steps_per_run": args.steps,
            "repeats": args.repeats,
            "warmup_steps": 1,
            "seeds": [args.seed + 1 + r for r in range(args.repeats)],
        },  # fmt: skip
        "engine": engine,
        "trl": trl,
        "ratios_per_repeat": ratios,
        "ratio_samples_per_s": statistics.median(ratios),
        "ratio_completion_tokens_per_s": statistics.median(token_ratios),
        "engine_samples_per_s_median": statistics.median(e["samples_per_s"] for e in engine),
        "trl_samples_per_s_median": statistics.median(t["samples_per_s"] for t in trl),
        "engine_step_s_median": statistics.median(s for e in engine for s in e["step_s"]),
        "engine_generation_s_median": statistics.median(s for e in engine for s in e["generation_s"]),
        "engine_update_s_median": statistics.median(s for e in engine for s in e["update_s"]),
        "provenance": provenance(start_commit),
    }
    RESULT.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k not in ("engine", "trl", "provenance")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
