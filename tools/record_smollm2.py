"""Record chapter 15's SmolLM2 runs as data/runs/smollm2/PLAN.md states them: the base model's pool, the
learning-rate pilot, the rule, then the main runs, each run in its own `record-lm` process.

    python tools/record_smollm2.py --out NEW_FOLDER [--jobs N] [--allow-cpu] [--steps 40] [--seeds 0 1 2]

Writes only into NEW_FOLDER, which it creates (refused when it exists): measure-train/, measure-heldout/
(`measure`, 64 samples), pilot/<recipe>-<lr>/ and main/<recipe>-seed<k>/ (`record-lm`'s --out), work/ (checkpoints),
logs/ (each process's output) and driver.json (the chosen rate, the commands, wall times). On a GPU the runs
of one stage share it as parallel processes; on a CPU give --jobs 2 at most (one thread each).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from stddial_book.theory.recipes import RECIPES

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "data" / "smollm2" / "pool_train.jsonl"
HELDOUT = ROOT / "data" / "smollm2" / "pool_heldout.jsonl"
PILOT_RATES = ("1e-4", "3e-4", "1e-3")
PILOT_SEED = 100


def _run(cmd: list[str], log: Path, timeout: float) -> dict:
    start = time.perf_counter()
    with open(log, "x", encoding="utf-8") as handle:
        try:
            code = subprocess.run(cmd, stdout=handle, stderr=subprocess.STDOUT, timeout=timeout, check=False).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    return {"command": " ".join(cmd[2:]), "returncode": code, "wall_s": round(time.perf_counter() - start, 1)}


def _parallel(jobs: list[tuple[list[str], Path]], workers: int, timeout: float) -> list[dict]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: _run(job[0], job[1], timeout), jobs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="a new folder")
    parser.add_argument("--jobs", type=int, default=2, help="processes at once (default 2)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--measure-samples", type=int, default=64)
    parser.add_argument("--eval-samples", type=int, default=16)
    parser.add_argument("--micro-batch-size", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per process")
    parser.add_argument("--allow-cpu", action="store_true")
    parser.add_argument(
        "--pilot-recipes", nargs="+", default=["grpo"], choices=RECIPES,
        help="recipes that pilot their own learning rate (default: grpo, whose rate every recipe then uses)",
    )  # fmt: skip
    parser.add_argument("--plan", default="data/runs/smollm2/PLAN.md", help="the plan the runs follow")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.steps < 10:
        print(
            "error: --jobs must be >= 1 and --steps >= 10 (the pilot's rule reads the last 10 steps).", file=sys.stderr
        )
        return 2
    out = args.out.expanduser()
    if out.exists() or out.is_symlink():
        print(
            f"error: {out} exists; give a new folder (this tool writes only into a folder it creates).", file=sys.stderr
        )
        return 2
    out.mkdir(parents=True)
    (out / "logs").mkdir()
    py = [sys.executable, "-m", "stddial_book"]
    cpu = ["--allow-cpu"] if args.allow_cpu else []
    common = [
        "--preset", "smollm2", "--dataset", str(TRAIN), "--max-steps", str(args.steps),
        "--micro-batch-size", str(args.micro_batch_size), "--eval", str(HELDOUT),
        "--eval-samples", str(args.eval_samples), "--measure-pool", "--save-every", "20", "--no-progress", *cpu,
    ]  # fmt: skip
    record: dict = {"plan": args.plan, "stages": {}}
    start = time.perf_counter()

    measures = [
        (py + ["measure", "--model", "smollm2", "--prompts", str(src), "--samples", str(args.measure_samples),
               "--out", str(out / f"measure-{name}"), "--batch-size", "1024"], out / "logs" / f"measure-{name}.log")
        for name, src in (("train", TRAIN), ("heldout", HELDOUT))
    ]  # fmt: skip
    # one folder per recipe and rate: pilot/<recipe>-<rate>/<recipe>-seed100
    pilots = [
        (py + ["record-lm", *common, "--recipes", recipe, "--seeds", str(PILOT_SEED), "--learning-rate", rate,
               "--work", str(out / "work" / f"pilot-{recipe}-{rate}"), "--out", str(out / "pilot" / f"{recipe}-{rate}")],
         out / "logs" / f"pilot-{recipe}-{rate}.log")
        for rate in PILOT_RATES for recipe in args.pilot_recipes
    ]  # fmt: skip
    record["stages"]["measure+pilot"] = _parallel(measures + pilots, args.jobs, args.timeout)
    _write(out / "driver.json", record)

    from stddial_book.experiments.smollm2.study import choose_learning_rate, pass_rate_curve

    rates, chosen = {}, {}
    for recipe in args.pilot_recipes:
        curves = {
            float(r): pass_rate_curve(out / "pilot" / f"{recipe}-{r}" / f"{recipe}-seed{PILOT_SEED}")
            for r in PILOT_RATES
        }
        chosen[recipe] = choose_learning_rate(curves)
        record.setdefault("pilots", {})[recipe] = {"curves": curves, "chosen_learning_rate": chosen[recipe]}
    for recipe in RECIPES:  # a recipe without its own pilot takes the first pilot's rate
        rates[recipe] = chosen.get(recipe, chosen[args.pilot_recipes[0]])
    if args.pilot_recipes == ["grpo"]:  # the first plan's record, as its study reads it
        record["pilot"] = record["pilots"]["grpo"]
    _write(out / "driver.json", record)
    print(f"pilot: learning rates {rates}", flush=True)

    mains = [
        (py + ["record-lm", *common, "--recipes", recipe, "--seeds", str(seed), "--learning-rate", repr(rates[recipe]),
               "--work", str(out / "work" / f"{recipe}-seed{seed}"), "--out", str(out / "main" / f"{recipe}-seed{seed}")],
         out / "logs" / f"{recipe}-seed{seed}.log")
        for seed in args.seeds for recipe in RECIPES
    ]  # fmt: skip
    record["stages"]["main"] = _parallel(mains, args.jobs, args.timeout)
    record["wall_s"] = round(time.perf_counter() - start, 1)
    _write(out / "driver.json", record)
    failed = [s for stage in record["stages"].values() for s in stage if s["returncode"] != 0]
    print(f"done in {record['wall_s']} s; {len(failed)} process(es) failed", flush=True)
    return 1 if failed else 0


def _write(path: Path, record: dict) -> None:
    staging = path.with_name(f".{path.name}.tmp")
    staging.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    os.replace(staging, path)


if __name__ == "__main__":
    sys.exit(main())
