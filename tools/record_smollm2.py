"""Record chapter 15's SmolLM2 runs as data/runs/smollm2/PLAN.md states them: the base model's pool, the
learning-rate pilot, the rule, then the main runs, each run in its own `record-lm` process.

    python tools/record_smollm2.py --out NEW_FOLDER [--jobs N] [--allow-cpu] [--steps 40] [--seeds 0 1 2]
    python tools/record_smollm2.py --out FOLDER --resume [the same options]
    python tools/record_smollm2.py --out NEW_FOLDER --pilots-from RECORDING [the same options]

Writes only into NEW_FOLDER, which it creates and marks as its own (refused when it exists):
measure-train/, measure-heldout/ (`measure`, 64 samples), pilot/<recipe>-<lr>/ and main/<recipe>-seed<k>/
(`record-lm`'s --out), work/ (checkpoints), logs/ (each process's output, one file per attempt) and
driver.json (the settings, the chosen rates, the commands, exit statuses and wall times of every attempt).
On a GPU the runs of one stage share it as parallel processes; on a CPU give --jobs 2 at most (one thread
each). A recording stopped part way (a process failed or timed out, the machine was taken back) continues
with --resume on the same folder and the same settings: each command runs again, and `measure` and
`record-lm` keep what they finished and resume what they did not from its last checkpoint. The main runs
start only once every pilot has finished.

--pilots-from RECORDING records the main runs only, at the rates that another recording's finished pilots
chose (read, never written; recomputed from its pilots' logs by the same rule): a recording whose main runs
could not finish where its pilots ran (a lent GPU's time ran out) continues on another machine that way,
since a run folder moved between machines is never resumed; it also records more seeds of a finished
study under a plan of their own (--seeds, --plan). Its settings must equal RECORDING's, except --seeds and
--plan (the main runs' own), --allow-cpu and --micro-batch-size (where a step is computed, and in how many
passes; TRL accumulates the passes into the same update); driver.json names RECORDING, the sha256 of its
driver.json and the commits its pilots ran from.

--learning-rate RATE runs no pilots: every main run trains at RATE, the rate a plan fixes in advance, and the
base model's pool (unless --no-measure) is measured in the same queue as the main runs, its two processes first
(nothing waits on it). With --no-measure, --recipes and --seeds it records only the runs named, in a new
folder: the runs that a recording lost with its machine had not finished (its finished part having been shipped
with ship_smollm2.py --partial); run it from that recording's commit, which each run's provenance records.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from stddial_book.bridges.lm_record import lm_run_name
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
    parser.add_argument(
        "--timeout", type=float, default=None,
        help="seconds per process (default 3600; with --allow-cpu 36000, a CPU run taking an hour or more)",
    )  # fmt: skip
    parser.add_argument("--allow-cpu", action="store_true")
    parser.add_argument(
        "--pilot-recipes", nargs="+", default=["grpo"], choices=RECIPES,
        help="recipes that pilot their own learning rate (default: grpo, whose rate every recipe then uses)",
    )  # fmt: skip
    parser.add_argument("--plan", default="data/runs/smollm2/PLAN.md", help="the plan the runs follow")
    parser.add_argument("--resume", action="store_true", help="continue the recording in --out (this tool's own)")
    parser.add_argument(
        "--pilots-from", type=Path, default=None, metavar="RECORDING",
        help="record the main runs only, at the rates RECORDING's finished pilots chose (see above)",
    )  # fmt: skip
    parser.add_argument(
        "--learning-rate", type=float, default=None, metavar="RATE",
        help="the rate the plan fixes for every main run: no pilots are run (see above)",
    )  # fmt: skip
    parser.add_argument(
        "--recipes", nargs="+", default=list(RECIPES), choices=RECIPES, help="the main runs' recipes (default all)"
    )  # fmt: skip
    parser.add_argument(
        "--no-measure", dest="measure", action="store_false",
        help="with --learning-rate: record the main runs only, without the base model's pool",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        if args.learning_rate is not None and not (math.isfinite(args.learning_rate) and args.learning_rate > 0):
            raise ValueError(f"--learning-rate {args.learning_rate}: give a finite rate > 0, such as 3e-4.")
        if args.learning_rate is not None and args.pilots_from is not None:
            raise ValueError("--learning-rate replaces the pilots: give it without --pilots-from.")
        args.recipes = sorted(args.recipes, key=list(RECIPES).index)  # the same runs, in whatever order given
        if not args.measure and args.learning_rate is None:
            raise ValueError("--no-measure goes with --learning-rate (a recording with pilots measures the pool too).")
        if args.pilots_from is not None:  # recorded in the settings as a folder name
            args.pilots_from = str(Path(args.pilots_from).expanduser().resolve())
        source = _pilots_source(args) if args.pilots_from is not None else None
        out, record = _open_recording(args)
        lock = _hold(out)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        return _record(args, out, record, source)
    finally:
        os.close(lock)


def _record(args: argparse.Namespace, out: Path, record: dict, source: dict | None = None) -> int:
    """The stages of a recording opened by :func:`_open_recording`; 0 when every process finished. With
    ``source`` (:func:`_pilots_source`) the measure and pilot stages are that recording's, and only the main
    runs are recorded here; with ``args.learning_rate`` no pilot runs, and the measurements (unless
    ``args.measure`` is False) share one queue with the main runs."""
    py = [sys.executable, "-m", "stddial_book"]
    cpu = ["--allow-cpu"] if args.allow_cpu else []
    common = [
        "--preset", "smollm2", "--dataset", str(TRAIN), "--max-steps", str(args.steps),
        "--micro-batch-size", str(args.micro_batch_size), "--eval", str(HELDOUT),
        "--eval-samples", str(args.eval_samples), "--measure-pool", "--save-every", "20", "--no-progress", *cpu,
    ]  # fmt: skip
    start = time.perf_counter()
    from stddial_book.rl.runlog import git_state

    attempt = len(record["attempts"]) + 1
    commit, dirty = git_state(ROOT)[:2]
    record["attempts"].append(
        {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "git_commit": commit, "dirty": dirty,
         "jobs": args.jobs, "timeout_s": args.timeout, "stages": {}}
    )  # fmt: skip
    stages = record["attempts"][-1]["stages"]
    _write(out / "driver.json", record)  # at once: a killed attempt is on record, and the next one numbered past it

    measures = []
    if args.learning_rate is not None:  # the plan fixes the rate: no pilots, the pool measured beside the runs
        measures = _measure_jobs(args, out, py, attempt) if args.measure else []
        rates = dict.fromkeys(RECIPES, args.learning_rate)
    else:
        if source is None:
            pilots = _measure_and_pilot(args, out, record, stages, py, common, attempt)
            if pilots is None:
                return 1
        else:
            pilots, record["pilots_from"] = source["pilots"], source["record"]
        record["pilots"] = pilots
        chosen = {recipe: pilot["chosen_learning_rate"] for recipe, pilot in pilots.items()}
        rates = {}
        for recipe in RECIPES:  # a recipe without its own pilot takes the first pilot's rate
            rates[recipe] = chosen.get(recipe, chosen[args.pilot_recipes[0]])
        if args.pilot_recipes == ["grpo"]:  # the first plan's record, as its study reads it
            record["pilot"] = record["pilots"]["grpo"]
    _write(out / "driver.json", record)
    shown = {recipe: rate for recipe, rate in rates.items() if recipe in args.recipes}
    print(f"{'the plan' if args.learning_rate is not None else 'pilot'}: learning rates {shown}", flush=True)

    mains = [
        (py + ["record-lm", *common, "--recipes", recipe, "--seeds", str(seed), "--learning-rate", repr(rates[recipe]),
               "--work", str(out / "work" / lm_run_name(recipe, seed)),
               "--out", str(out / "main" / lm_run_name(recipe, seed))],
         _log(out, lm_run_name(recipe, seed), attempt))
        for seed in args.seeds for recipe in RECIPES if recipe in args.recipes
    ]  # fmt: skip
    done = _parallel(measures + mains, args.jobs, args.timeout)  # nothing waits on the pool: one queue
    if measures:
        stages["measure"] = done[: len(measures)]
    stages["main"] = done[len(measures) :]
    record["attempts"][-1]["wall_s"] = round(time.perf_counter() - start, 1)
    failed = [s for stage in stages.values() for s in stage if s["returncode"] != 0]
    if not failed:
        record["stages"] = stages  # the attempt that finished every process (the first plan's study reads these)
    _write(out / "driver.json", record)
    print(f"done in {record['attempts'][-1]['wall_s']} s; {len(failed)} process(es) failed"
          + ("; rerun this command with --resume" if failed else ""), flush=True)  # fmt: skip
    return 1 if failed else 0


def _measure_jobs(args, out: Path, py: list, attempt: int) -> list:
    """The two `measure` processes of the base model's pool (training and held-out questions), with their logs."""
    return [
        (py + ["measure", "--model", "smollm2", "--prompts", str(src), "--samples", str(args.measure_samples),
               "--out", str(out / f"measure-{name}"), "--batch-size", "1024"], _log(out, f"measure-{name}", attempt))
        for name, src in (("train", TRAIN), ("heldout", HELDOUT))
    ]  # fmt: skip


def _measure_and_pilot(args, out: Path, record: dict, stages: dict, py: list, common: list, attempt: int):
    """The base model's pool and the learning-rate pilots, run here; each pilot recipe's curves and chosen rate
    (:func:`_read_pilots`), or None when a process failed (the main runs need every pilot)."""
    measures = _measure_jobs(args, out, py, attempt)
    # one folder per recipe and rate: pilot/<recipe>-<rate>/<recipe>-seed100
    pilots = [
        (py + ["record-lm", *common, "--recipes", recipe, "--seeds", str(PILOT_SEED), "--learning-rate", rate,
               "--work", str(out / "work" / f"pilot-{recipe}-{rate}"), "--out", str(out / "pilot" / f"{recipe}-{rate}")],
         _log(out, f"pilot-{recipe}-{rate}", attempt))
        for rate in PILOT_RATES for recipe in args.pilot_recipes
    ]  # fmt: skip
    stages["measure+pilot"] = _parallel(measures + pilots, args.jobs, args.timeout)
    _write(out / "driver.json", record)
    failed = [s for s in stages["measure+pilot"] if s["returncode"] != 0]
    if failed:
        print(f"{len(failed)} measure or pilot process(es) failed (logs/); the main runs need every pilot: "
              f"rerun this command with --resume.", flush=True)  # fmt: skip
        return None

    return _read_pilots(out, args.pilot_recipes)


def _read_pilots(recording: Path, recipes: list[str]) -> dict:
    """Each recipe's pilot curves (mean batch pass rate per step, from its runs' logs in ``recording``) and the
    rate the plan's rule chooses from them."""
    from stddial_book.experiments.smollm2.study import choose_learning_rate, pass_rate_curve

    pilots = {}
    for recipe in recipes:
        curves = {
            float(r): pass_rate_curve(recording / "pilot" / f"{recipe}-{r}" / lm_run_name(recipe, PILOT_SEED))
            for r in PILOT_RATES
        }
        pilots[recipe] = {"curves": curves, "chosen_learning_rate": choose_learning_rate(curves)}
    return pilots


def _pilots_source(args: argparse.Namespace) -> dict:
    """What --pilots-from names, checked before anything is written: a recording of this tool whose pilots
    all finished under the settings given now (except HOW_A_STEP_RUNS and OWN), its pilots recomputed from
    their logs and agreeing with its record; else a ValueError."""
    import hashlib

    source = Path(args.pilots_from)
    driver = source / "driver.json"
    if not source.is_dir() or driver.is_symlink() or not driver.is_file():
        raise ValueError(f"--pilots-from {source} holds no driver.json of this tool; name a recording it made.")
    raw = driver.read_bytes()
    try:
        was = json.loads(raw)
        recorded = was["pilots"]
        settings = was["settings"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(
            f"--pilots-from {source}: its driver.json records no finished pilots; finish them first."
        ) from None
    now = {name: getattr(args, name) for name in SETTINGS if name not in HOW_A_STEP_RUNS + ("pilots_from",) + OWN}
    changed = sorted(k for k in now if settings.get(k, BEFORE.get(k)) != now[k])
    if changed:
        raise ValueError(
            f"--pilots-from {source} was recorded with other {', '.join('--' + k.replace('_', '-') for k in changed)} "
            f"({', '.join(f'{k}={settings.get(k, BEFORE.get(k))!r}' for k in changed)}); give the same values."
        )
    try:
        pilots = _read_pilots(source, args.pilot_recipes)
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(
            f"--pilots-from {source}: a pilot's log cannot be read ({err}); finish its pilots first."
        ) from None
    if {r: p["chosen_learning_rate"] for r, p in pilots.items()} != {
        r: recorded.get(r, {}).get("chosen_learning_rate") for r in pilots
    }:
        raise ValueError(f"--pilots-from {source}: its pilots' logs do not give the rates its driver.json records.")
    commits = sorted({a.get("git_commit") for a in was.get("attempts", []) if a.get("stages", {}).get("measure+pilot")})
    return {
        "pilots": pilots,
        "record": {"folder": str(source.resolve()), "driver_sha256": hashlib.sha256(raw).hexdigest(),
                   "pilot_commits": commits, **{k: settings.get(k) for k in HOW_A_STEP_RUNS + OWN}},
    }  # fmt: skip


#: The settings that say where and in how many passes a step is computed, not what it computes: --pilots-from
#: may differ in them from the recording whose pilots it reads.
HOW_A_STEP_RUNS = ("allow_cpu", "micro_batch_size")
#: The main runs' own settings, which --pilots-from may also change: which seeds and recipes, under which plan.
OWN = ("seeds", "plan", "recipes", "measure")
#: What a recording made before a setting existed ran as (its driver.json does not name it).
BEFORE = {"learning_rate": None, "recipes": list(RECIPES), "measure": True}
#: The marker kind of this tool's folders (stddial_book.core.outdir).
KIND = "smollm2-recording"
#: The options a continued recording must share with its start (--jobs and --timeout may change).
SETTINGS = (
    "steps",
    "seeds",
    "measure_samples",
    "eval_samples",
    "micro_batch_size",
    "allow_cpu",
    "pilot_recipes",
    "plan",
    "pilots_from",
    "learning_rate",
    "recipes",
    "measure",
)


def _open_recording(args: argparse.Namespace) -> tuple[Path, dict]:
    """The recording's folder and its driver record: a new folder created and marked as this tool's, or
    with --resume this tool's own folder, its files as it wrote them and its settings those given now;
    else a ValueError, with nothing written."""
    from stddial_book.core.outdir import claim_dir, require_owned

    if args.timeout is None:
        args.timeout = 36000.0 if args.allow_cpu else 3600.0
    if args.jobs < 1 or args.steps < 10 or args.timeout <= 0:
        raise ValueError(
            "--jobs must be >= 1, --steps >= 10 (the pilot's rule reads the last 10 steps), --timeout > 0."
        )
    if any(seed < 0 for seed in args.seeds) or len(set(args.seeds)) < len(args.seeds):
        raise ValueError("--seeds must be distinct whole numbers >= 0 (two processes must never share a run).")
    if len(set(args.pilot_recipes)) < len(args.pilot_recipes) or len(set(args.recipes)) < len(args.recipes):
        raise ValueError(
            "--pilot-recipes and --recipes must name each recipe once (two processes must never share a run)."
        )
    settings = {name: getattr(args, name) for name in SETTINGS}
    if not args.resume:
        out = args.out.expanduser()
        if out.exists() or out.is_symlink():
            raise ValueError(f"{out} exists; give a new folder, or --resume to continue this tool's recording there.")
        out = claim_dir(out, KIND)
        record = {"plan": args.plan, "settings": settings, "attempts": []}
        (out / "logs").mkdir()
        _write(out / "driver.json", record)
        return out, record
    out = require_owned(args.out, kind=KIND)
    driver, logs = out / "driver.json", out / "logs"
    damaged = [p.name for p in (driver, logs, _staging(driver)) if p.is_symlink()]
    if damaged or not driver.is_file() or not logs.is_dir():  # require_owned checked the marker
        raise ValueError(
            f"cannot resume: {out} holds no driver.json and logs/ of this tool"
            + (f" ({', '.join(damaged)} a link)" if damaged else "")
            + "; start a new --out without --resume."
        )
    try:
        record = json.loads(driver.read_text(encoding="utf-8"))
        if not isinstance(record.get("attempts"), list):
            raise ValueError
    except ValueError:
        raise ValueError(f"cannot resume: {driver} is not this tool's record; start a new --out.") from None
    was = record.get("settings", {})
    changed = sorted(k for k in SETTINGS if was.get(k, BEFORE.get(k)) != settings[k])
    if changed:
        raise ValueError(
            f"cannot resume: {', '.join('--' + k.replace('_', '-') for k in changed)} differ from the recording's "
            f"start ({', '.join(f'{k}={was.get(k, BEFORE.get(k))!r}' for k in changed)}); give the same values."
        )
    return out, record


def _log(out: Path, name: str, attempt: int) -> Path:
    """logs/<name>.log for the first attempt, logs/<name>.<attempt>.log after it; past any log of that name a
    killed attempt left (no log is overwritten)."""
    logs = out / "logs"
    path = logs / (f"{name}.log" if attempt == 1 else f"{name}.{attempt}.log")
    extra = 1
    while path.exists() or path.is_symlink():
        path, extra = logs / f"{name}.{attempt}-{extra}.log", extra + 1
    return path


def _staging(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp")


def _write(path: Path, record: dict) -> None:
    """``record`` as JSON into ``path``, atomically, never through a link (the staging file is opened without
    following one)."""
    staging = _staging(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(staging, flags, 0o644), "w", encoding="utf-8") as handle:
        handle.write(json.dumps(record, indent=1) + "\n")
    os.replace(staging, path)


def _hold(out: Path):
    """An exclusive lock on the recording (released when this process ends, however it ends), or a
    ValueError when another driver holds it: two drivers must never run the same commands."""
    import fcntl

    descriptor = os.open(out / ".driver.lock", os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        raise ValueError(f"{out} is being recorded by another driver now; wait for it to end.") from None
    return descriptor


if __name__ == "__main__":
    sys.exit(main())
