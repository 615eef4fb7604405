"""Benchmark: which allocation rule reaches a pool accuracy with the fewest generated samples.

Chapter 8's controlled setting (one Bernoulli-logit parameter per prompt) with each step's groups
chosen by every rule of ``stddial_book.rl.allocation``, under GRPO and Dr. GRPO, with plain SGD and
Adam, on three pools (chapter 8's, Big-Math whole, bimodal), 20 seeds, learning rates matched to
uniform GRPO's update norm (``stddial_book.experiments.allocation.controlled_run``). Also the no-training table
of update signal per 1,000 generated samples on the Big-Math histogram. A few CPU minutes:

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_allocation.py
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from stddial_book.core.outdir import claim_dir
from stddial_book.experiments.allocation.controlled_run import (
    POOLS,
    TARGET_FRACTIONS,
    AllocatedRun,
    allocation_run_study,
)
from stddial_book.experiments.allocation.signal import signal_by_rule, summarize_run_study
from stddial_book.rl.runlog import write_gzip


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=Path(__file__).parent
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def lm_headline(path: Path) -> dict:
    """The LM testbed's key, from bench/bench_allocation_lm.py's last result (it reads recorded runs)."""
    if not path.is_file():
        return {
            "samples_to_target_vs_dapo": None,
            "samples_to_target_vs_dapo_note": "run bench/bench_allocation_lm.py on the recorded LM runs",
        }
    return {
        "samples_to_target_vs_dapo": json.loads(path.read_text())["samples_to_target_vs_dapo"],
        "samples_to_target_vs_dapo_source": "bench/bench_allocation_lm.py (bench/results/allocation_lm.json)",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--prompts", type=int, default=64, help="prompts per pool (subsampled from each pool)")
    parser.add_argument("--batch-prompts", type=int, default=16, help="uniform's prompts per step (B = 8x)")
    parser.add_argument("--steps", type=int, default=60, help="the step budget; sample budget = steps x B")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "allocation.json"))
    parser.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[1] / "data" / "allocation"))
    args = parser.parse_args()
    config = AllocatedRun(batch_prompts=args.batch_prompts, steps=args.steps)
    start = time.perf_counter()
    table = signal_by_rule(num_prompts=4096, batch_prompts=64, steps=40)
    table_s = time.perf_counter() - start
    study = allocation_run_study(seeds=args.seeds, num_prompts=args.prompts, config=config)
    summary = summarize_run_study(study)
    wall = time.perf_counter() - start
    head = summary["headline"].get("book/sgd/grpo", {})
    result = {
        "benchmark": "allocation rules: samples to a target pool accuracy, controlled Bernoulli-logit run",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "versions": {"python": platform.python_version(), "numpy": np.__version__},
        "cpu": {"model": cpu_model(), "machine": platform.machine(), "platform": platform.platform()},
        "threads": {"OMP_NUM_THREADS": "1"},
        "wall_s": wall,
        "signal_table_s": table_s,
        "settings": {
            "pools": list(POOLS),
            "prompts_per_pool": args.prompts,
            "seeds": args.seeds,
            "batch_prompts": config.batch_prompts,
            "group_size": config.group_size,
            "step_samples": config.step_samples,
            "step_budget": config.steps,
            "sample_budget": config.sample_budget,
            "overrun": config.overrun,
            "max_size": config.max_size,
            "estimator_decay": config.decay,
            "target_fractions_of_uniform_grpo_budget": list(TARGET_FRACTIONS),
            "step_size_control": "each rule's learning rate scaled so its mean update norm per step (pilot run, "
            "seed 10001, own pool draw) equals uniform GRPO's at the base rate; realised ratios in cells[*].norm_ratio",
            "bootstrap": summary["bootstrap"],
        },
        "samples_to_target_vs_dapo_controlled": {
            "value": head.get("dapo_over_best"),
            "cell": "book pool / SGD / GRPO",
            "best_rule": head.get("best_rule"),
            "ratio_ci": head.get("ratio_ci"),
            "within_noise": head.get("within_noise"),
            "meaning": "DAPO's mean generated samples to the middle target (uniform GRPO's accuracy after 1/5 of "
            "its sample budget) / the best rule's, paired by seed, step size matched",
            "per_cell": summary["headline"],
        },
        **lm_headline(Path(args.out).parent / "allocation_lm.json"),
        "signal_per_1000_samples_bigmath": table,
        "targets": summary["targets"],
        "comparisons_counted": summary["comparisons_counted"],
        "outside_noise": summary["outside_noise"],
        "expected_false_alarms": summary["expected_false_alarms"],
        "cells": summary["cells"],
        "comparisons": summary["comparisons"],
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    # the copy the package ships (chapter 15 reads it through data_path, in a checkout and in Colab)
    shipped = claim_dir(Path(args.data_dir), "bench", flag="--data-dir")
    write_gzip(out, shipped / "allocation.json.gz")
    print(
        json.dumps(
            {k: result[k] for k in ("wall_s", "samples_to_target_vs_dapo_controlled", "outside_noise")}, indent=1
        )
    )


if __name__ == "__main__":
    main()
