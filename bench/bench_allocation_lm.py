"""Benchmark, LM testbed: which allocation rule reaches a pool accuracy with the fewest generated samples.

Reads the recorded runs in ``data/runs/allocation`` (GRPO under every rule of
``stddial_book.experiments.allocation.testbed_runs.LM_RULES``, five seeds each, recorded with
``python -m stddial_book record --profile reference --recipes grpo --allocations ...``; nothing is
trained here) and writes:

* ``bench/results/allocation_lm.json``: every rule's samples to the three targets, accuracy at the
  budget, update-norm ratio, final accuracy by starting quartile, the paired comparisons (counted)
  and ``samples_to_target_vs_dapo``;
* ``data/allocation/allocation_lm.json.gz``: the same, the copy the package ships (chapter 16 reads it);
* ``bench/results/allocation.json``: its ``samples_to_target_vs_dapo`` key (and the shipped copy of
  that file), which the controlled benchmark leaves to this one.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_allocation_lm.py --data-dir NEW

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
from stddial_book.experiments.allocation.testbed_runs import LM_ALLOCATION_SUMMARY_FILE, RUNS_PROFILE, lm_benchmark
from stddial_book.rl.runlog import write_gzip

ROOT = Path(__file__).resolve().parents[1]


def ship_study(benchmark, runs: str, summary_file: tuple[str, str], key: str, script: str, description: str) -> None:
    """Analyse a study of recorded LM-testbed runs and write its three results: ``benchmark(runs folder)``
    into bench/results/<summary name>.json, its gzip copy into ``--data-dir`` (the summary the package
    ships, ``summary_file``) and its headline under ``key`` of bench/results/allocation.json (with the shipped
    copy of that file). ``runs`` names the study's folder under data/runs; ``script`` is the bench script
    named as the key's source; ``description`` is the command line's help."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--runs", default=str(ROOT / "data" / "runs" / runs))
    parser.add_argument("--results", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--data-dir", default=str(ROOT / "data" / summary_file[0]))
    args = parser.parse_args()
    start = time.perf_counter()
    study = benchmark(args.runs)
    study["analysed"] = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "wall_s": time.perf_counter() - start,
        "runs": f"data/runs/{runs}",
    }
    results = Path(args.results)
    out = results / summary_file[1].removesuffix(".gz")
    out.write_text(json.dumps(study, indent=1) + "\n")
    shipped = claim_dir(Path(args.data_dir), "bench", flag="--data-dir")
    write_gzip(out, shipped / summary_file[1])
    controlled = results / "allocation.json"
    whole = json.loads(controlled.read_text())
    whole[key] = study["samples_to_target_vs_dapo"]
    whole.pop(f"{key}_note", None)
    whole[f"{key}_source"] = f"bench/{script} (bench/results/{out.name})"
    controlled.write_text(json.dumps(whole, indent=1) + "\n")
    write_gzip(controlled, shipped / "allocation.json.gz")
    print(
        json.dumps({"samples_to_target_vs_dapo": study["samples_to_target_vs_dapo"], "seeds": study["seeds"]}, indent=1)
    )


def main() -> None:
    ship_study(
        lm_benchmark,
        RUNS_PROFILE,
        LM_ALLOCATION_SUMMARY_FILE,
        "samples_to_target_vs_dapo",
        "bench_allocation_lm.py",
        __doc__.splitlines()[0],
    )


if __name__ == "__main__":
    main()
