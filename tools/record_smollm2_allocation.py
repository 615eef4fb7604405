"""Record Part V's allocation comparison on SmolLM2-135M-Instruct as data/runs/smollm2_allocation/PLAN.md
states it: GRPO in the book's engine (LoRA adapters on the dequantized Q4_1 model), one run per rule and seed.

    python tools/record_smollm2_allocation.py --out FOLDER [--rules uniform dapo ...] [--seeds 0 1 2]
        [--allow-dirty] [--stop-after STEPS]

FOLDER is created and marked as this tool's; given again, it is continued: a finished run is skipped (its
``done-<run>`` file), an interrupted one resumes from its checkpoint, exactly (one stopped before its first
checkpoint starts again). Each run is written by
``stddial_book.rl.trainer.train`` into FOLDER/<run> (``grpo-seed<k>`` for uniform groups,
``grpo-<rule>-seed<k>`` otherwise): metrics.jsonl, provenance.json (the commit, the settings, the model's
description) and its checkpoint. Runs go one after the other in this process; two processes on two cores
may share nothing but the model cache, so give each its own FOLDER (or its own seeds). A checkout with
uncommitted changes is refused unless --allow-dirty (the provenance then says so). ``--stop-after`` ends each
run after that many steps (a timing smoke test, never a recorded run).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "data" / "smollm2" / "pool_train.jsonl"
HELDOUT = ROOT / "data" / "smollm2" / "pool_heldout.jsonl"
RULES = ("uniform", "dapo", "greso", "knapsack_paper", "dial_grpo")
SYSTEM_PROMPT = "Answer with just the number."
KIND = "smollm2-allocation"


def plan_config(rule: str, seed: int):
    """The plan's TrainConfig for ``rule`` and ``seed`` (PLAN.md, "Settings")."""
    from stddial_book.experiments.allocation.testbed_runs import lm_allocation_changes
    from stddial_book.rl.configs import TrainConfig
    from stddial_book.theory.recipes import GRPO

    return TrainConfig(
        recipe=dataclasses.replace(GRPO, kl_coef=0.0),  # beta = 0, as chapter 15's runs
        group_size=8,
        prompts_per_step=8,
        num_minibatches=1,
        lr=3e-4,  # chapter 15's pilot's rate for SmolLM2 with these adapters
        max_grad_norm=1.0,
        max_new_tokens=24,
        sample_budget=1920,
        eval_every=1,
        eval_every_samples=384,
        eval_samples=1,
        checkpoint_every=1,
        temperature=1.0,
        seed=seed,
        pool_size=224,
        pool_samples=2,
        **lm_allocation_changes(rule, prompts_per_step=8, group_size=8),
    )


def run_name(rule: str, seed: int) -> str:
    return f"grpo-seed{seed}" if rule == "uniform" else f"grpo-{rule}-seed{seed}"


def resumes(run_dir: Path) -> bool:
    """Whether the run in ``run_dir`` continues from its checkpoint (``True``) or starts afresh (``False``:
    no folder yet, or one stopped before its first checkpoint, which holds only the start's files and is
    written again). A folder with logged steps but no checkpoint is refused: its steps cannot be continued."""
    from stddial_book.rl.checkpoints import checkpoint_dir

    if checkpoint_dir(run_dir) is not None:
        return True
    if (run_dir / "metrics.jsonl").exists():
        raise ValueError(
            f"{run_dir} holds logged steps but no checkpoint to continue from; move it out of --out and "
            "run again to record it afresh."
        )
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="a new folder, or this tool's own to continue")
    parser.add_argument("--rules", nargs="+", default=list(RULES), choices=RULES)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--allow-dirty", action="store_true")
    parser.add_argument("--stop-after", type=int, default=None, help="steps per run (timing only)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from stddial_book.bridges.smollm2 import smollm2_model_dir
    from stddial_book.core.outdir import claim_dir
    from stddial_book.rl.hf_policy import hf_policy
    from stddial_book.rl.runlog import git_state, refuse_dirty
    from stddial_book.rl.text_tasks import read_text_problems
    from stddial_book.rl.trainer import train

    try:
        if any(seed < 0 for seed in args.seeds) or (args.stop_after is not None and args.stop_after < 1):
            raise ValueError("--seeds must be whole numbers >= 0 and --stop-after at least 1.")
        commit, dirty = git_state(ROOT)[:2]
        refuse_dirty(commit, dirty, args.allow_dirty)
        out = claim_dir(args.out, KIND)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    model = smollm2_model_dir()
    pool, heldout = read_text_problems(TRAIN), read_text_problems(HELDOUT)
    for seed in args.seeds:
        for rule in args.rules:
            name = run_name(rule, seed)
            if (out / f"done-{name}").exists():
                print(f"{name}: done, skipped", flush=True)
                continue
            try:
                resume = resumes(out / name)
            except ValueError as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
            start = time.perf_counter()
            policy = hf_policy(model, lora_r=16, lora_alpha=32, system_prompt=SYSTEM_PROMPT, seed=seed)
            command = f"python tools/record_smollm2_allocation.py --out {out.name} --rules {rule} --seeds {seed}"
            result = train(
                policy, pool, heldout, plan_config(rule, seed), out / name, resume=resume,
                stop_after=args.stop_after, command=command, profile=KIND,
            )  # fmt: skip
            wall = time.perf_counter() - start
            print(f"{name}: {result.steps} steps, {result.samples_generated} samples, {wall:.0f} s", flush=True)
            if args.stop_after is None and not result.stopped_early:
                with open(out / f"done-{name}", "x", encoding="utf-8") as handle:
                    handle.write(f"{result.samples_generated} samples, {result.steps} steps\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
