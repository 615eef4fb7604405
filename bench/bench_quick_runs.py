"""What the update pass buys the build: wall time of the quick profile's live runs.

The site build trains the ``quick`` profile's runs when its run cache is empty (a fresh clone,
CI): one SFT warm start, then GRPO, Dr. GRPO and DAPO over three seeds. This script trains
exactly those, in an empty cache of its own, and records each one's wall time, so that two
versions of the package can be compared on one machine:

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_quick_runs.py --label after
    OMP_NUM_THREADS=1 PYTHONPATH=<older checkout> .venv/bin/python bench/bench_quick_runs.py \\
        --label before

It writes ``results/quick_runs_<label>.json`` with the commit of the package it imported. The
runs are the build's own (``stddial_book.experiments.testbed.runs``), nothing is changed or skipped.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_trainer import cpu_info, git_commit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True, help="names the result file, e.g. before/after")
    parser.add_argument("--out-dir", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="quick_runs_") as cache:
        os.environ["STDDIAL_CACHE"] = cache  # an empty cache: every run trains
        import stddial_book
        from stddial_book.experiments.testbed import runs as experiments
        from stddial_book.rl.profiles import PROFILES
        from stddial_book.theory.recipes import RECIPES

        profile = PROFILES["quick"]
        timings: list[dict] = []
        t = time.perf_counter()
        experiments.warm_start(profile)
        timings.append({"run": "sft", "wall_s": time.perf_counter() - t})
        print(f"sft: {timings[-1]['wall_s']:.1f} s", flush=True)
        for recipe in RECIPES:
            for seed in profile.seeds:
                t = time.perf_counter()
                experiments.rl_run(profile, recipe, seed=seed)
                timings.append({"run": f"{recipe}/seed{seed}", "wall_s": time.perf_counter() - t})
                print(f"{recipe} seed {seed}: {timings[-1]['wall_s']:.1f} s", flush=True)
    package_dir = Path(stddial_book.__file__).resolve().parent
    result = {
        "benchmark": "wall time of the quick profile's live runs (SFT + 3 recipes x 3 seeds)",
        "label": args.label,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "package_commit": git_commit(package_dir),  # the imported package's checkout
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu": cpu_info(),
        "runs": timings,
        "rl_total_s": sum(r["wall_s"] for r in timings if r["run"] != "sft"),
        "total_s": sum(r["wall_s"] for r in timings),
    }
    out = Path(args.out_dir) / f"quick_runs_{args.label}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"total {result['total_s']:.1f} s (RL {result['rl_total_s']:.1f} s) -> {out}")


if __name__ == "__main__":
    main()
