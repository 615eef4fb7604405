"""The warm-start measurements behind data/runs/persistent/PLAN.md (Part V): how often the reference
testbed's warm start solves 4-digit sums (the persistent block) and its easiest prompts (is there an
"always solved" block?). Prints only; writes nothing but the warm start the run cache already keys.

    STDDIAL_CACHE=.cache/runs OMP_NUM_THREADS=1 python tools/probe_persistent_pool.py
"""

from __future__ import annotations

import numpy as np
import torch

from stddial_book.experiments.testbed.runs import load_model_from, warm_start
from stddial_book.rl.evaluate import evaluate
from stddial_book.rl.profiles import PROFILES
from stddial_book.rl.tasks import make_problem, sample_problems


def main() -> None:
    profile = PROFILES["reference"]
    model = load_model_from(profile, warm_start(profile, 0))
    generator = torch.Generator().manual_seed(1)
    blocks = {
        "4-digit sums (32 samples)": (sample_problems(256, 4, seed=7), 32),
        "the persistent profile's block (32 samples)": (PROFILES["persistent"].rl_problems()[0][:171], 32),
        "2-digit sums without a carry (32 samples)": (sample_problems(256, 2, carries=0, seed=7), 32),
        "2-digit, both operands < 5 (64 samples)": ([make_problem(a, b, 2) for a in range(5) for b in range(5)], 64),
        "2-digit, b = 0 (64 samples)": ([make_problem(a, 0, 2) for a in range(10, 99, 3)], 64),
        "2-digit, a = b without a carry (64 samples)": ([make_problem(a, a, 2) for a in range(50) if a % 10 < 5], 64),
        "2-digit, multiples of 10 (64 samples)": ([make_problem(10 * a, 10 * b, 2) for a in range(5) for b in range(5)], 64),
    }  # fmt: skip
    for name, (problems, n) in blocks.items():
        k = evaluate(model, problems, 8, num_samples=n, generator=generator, greedy=False).successes
        print(f"{name}: {len(problems)} prompts, mean pass rate {np.mean(k / n):.3f}, "
              f"never solved {np.mean(k == 0):.3f}, always solved {np.mean(k == n):.3f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
