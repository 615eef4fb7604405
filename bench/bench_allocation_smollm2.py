"""Benchmark, a pretrained model: how many generated samples the allocation rules save against DAPO on
SmolLM2-135M-Instruct's arithmetic pool (data/runs/smollm2_allocation/PLAN.md).

Reads the recorded runs in ``data/runs/smollm2_allocation`` (GRPO in the book's engine, LoRA on the dequantized
Q4_1 model, under every rule of ``stddial_book.experiments.allocation.smollm2_runs.SMOLLM2_RULES``, three seeds
each, recorded with ``tools/record_smollm2_allocation.py``; nothing is trained here) and writes:

* ``bench/results/allocation_smollm2.json``: :func:`smollm2_benchmark` (every rule's samples to the three
  targets, the paired comparisons counted, the headline with the silent ceiling beside it, held-out accuracy
  at both ends, the silent share of generated groups, the persistence of silence on the pool);
* ``data/allocation/allocation_smollm2.json.gz``: the same, the copy the package ships (chapter 16 reads it);
* ``bench/results/allocation.json``: its key ``samples_to_target_vs_dapo_real`` (and the shipped copy of
  that file).

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_allocation_smollm2.py --data-dir NEW

The shipped copies go to a new folder (``--data-dir``; ``data/allocation`` is tracked, and no tool writes into
tracked files): copy its files into ``data/allocation`` and commit them.
"""

from __future__ import annotations

from bench_allocation_lm import ship_study

from stddial_book.experiments.allocation.smollm2_runs import SMOLLM2_RUNS, SMOLLM2_SUMMARY_FILE, smollm2_benchmark


def main() -> None:
    ship_study(
        smollm2_benchmark,
        SMOLLM2_RUNS,
        SMOLLM2_SUMMARY_FILE,
        "samples_to_target_vs_dapo_real",
        "bench_allocation_smollm2.py",
        __doc__.splitlines()[0],
    )


if __name__ == "__main__":
    main()
