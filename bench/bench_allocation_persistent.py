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

from bench_allocation_lm import ship_study

from stddial_book.experiments.allocation.testbed_runs import (
    PERSISTENT_RUNS,
    PERSISTENT_SUMMARY_FILE,
    persistent_benchmark,
)


def main() -> None:
    ship_study(
        persistent_benchmark,
        PERSISTENT_RUNS,
        PERSISTENT_SUMMARY_FILE,
        "samples_to_target_vs_dapo_persistent",
        "bench_allocation_persistent.py",
        __doc__.splitlines()[0],
    )


if __name__ == "__main__":
    main()
