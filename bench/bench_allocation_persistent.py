"""Benchmark, persistent silence: how many generated samples the allocation rules save against DAPO when
two thirds of the pool stays silent (data/runs/persistent/PLAN.md).

Reads the recorded runs in ``data/runs/persistent`` (GRPO under every rule of
``stddial_book.experiments.allocation.testbed_runs.PERSISTENT_RULES`` and the amendment's
``knapsack_paper``, five seeds each, recorded with ``python -m stddial_book record --profile persistent
...``; nothing is trained here) and writes:

* ``bench/results/allocation_persistent.json``: :func:`persistent_benchmark` (every rule's samples to the
  three targets, the paired comparisons counted, the headline with the silent ceiling beside it, the
  block's accuracy, the amendment's secondary comparisons and the exploratory sample-matched check);
* ``data/allocation/allocation_persistent.json.gz``: the same, the copy the package ships (chapter 16
  reads it);
* ``bench/results/allocation.json``: its key ``samples_to_target_vs_dapo_persistent`` (and the shipped
  copy of that file).

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_allocation_persistent.py --data-dir NEW

The shipped copies go to a new folder (``--data-dir``; ``data/allocation`` is tracked, and no tool
writes into tracked files): copy its files into ``data/allocation`` and commit them.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime, timezone
from pathlib import Path

from bench_allocation import git_commit

from stddial_book.core.outdir import claim_dir
from stddial_book.experiments.allocation.testbed_runs import (
    PERSISTENT_RUNS,
    PERSISTENT_SUMMARY_FILE,
    persistent_benchmark,
)
from stddial_book.rl.runlog import write_gzip

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default=str(ROOT / "data" / "runs" / PERSISTENT_RUNS))
    parser.add_argument("--results", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--data-dir", default=str(ROOT / "data" / PERSISTENT_SUMMARY_FILE[0]))
    args = parser.parse_args()
    start = time.perf_counter()
    study = persistent_benchmark(args.runs)
    study["analysed"] = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "wall_s": time.perf_counter() - start,
        "runs": f"data/runs/{PERSISTENT_RUNS}",
    }
    results = Path(args.results)
    out = results / "allocation_persistent.json"
    out.write_text(json.dumps(study, indent=1) + "\n")
    shipped = claim_dir(Path(args.data_dir), "bench", flag="--data-dir")
    write_gzip(out, shipped / PERSISTENT_SUMMARY_FILE[1])
    controlled = results / "allocation.json"
    whole = json.loads(controlled.read_text())
    whole["samples_to_target_vs_dapo_persistent"] = study["samples_to_target_vs_dapo"]
    whole["samples_to_target_vs_dapo_persistent_source"] = (
        "bench/bench_allocation_persistent.py (bench/results/allocation_persistent.json)"
    )
    controlled.write_text(json.dumps(whole, indent=1) + "\n")
    write_gzip(controlled, shipped / "allocation.json.gz")
    print(
        json.dumps({"samples_to_target_vs_dapo": study["samples_to_target_vs_dapo"], "seeds": study["seeds"]}, indent=1)
    )


if __name__ == "__main__":
    main()
