"""Write the shipped study of the dial-only ablation from its recorded runs.

    python tools/ship_ablation.py --out NEW                  # the study of data/runs/ablation
    python tools/ship_ablation.py --runs STUDY --out NEW     # of another stored study or recording

The study (:func:`stddial_book.experiments.ablation.study.ablation_study` of the runs, plus the power analysis of
the reference runs at the design's run length) is written to ``NEW/ablation.json.gz``, a new folder this
tool creates; it replaces ``data/ablation/ablation.json.gz`` in the repository by hand (``git``), and
``tests/test_ablation_report.py`` recomputes it. A new recording (the ``--out`` of
``python -m stddial_book record-ablation``) joins the shipped runs through ``tools/compact_runs.py``:
give it ``data/runs/ablation`` and the recording, ``--portable-init`` (the warm start named by its folder,
not the recording machine's path) and the ``--drop`` list of ``data/runs/ablation/README.md``; then the
new folder replaces the study's files in the repository, and this tool writes the study of it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "data" / "runs" / "ablation"
SUMMARY_NAME = "ablation.json.gz"


def write_study(runs: Path, out: Path) -> dict:
    """The shipped study of ``runs``, written to ``out/ablation.json.gz`` (``out`` is created here)."""
    sys.path.insert(0, str(ROOT))
    from stddial_book.experiments.ablation.study import RUN_SAMPLES, ablation_study, power_analysis
    from stddial_book.rl.runlog import load_run, recorded_runs

    study = ablation_study(runs)
    reference = {k: [load_run(p)[1] for p in v] for k, v in recorded_runs("reference").items()}
    study["power"] = power_analysis(reference, samples=RUN_SAMPLES)
    text = json.dumps(study, indent=1, sort_keys=True).encode()
    out.mkdir()
    (out / SUMMARY_NAME).write_bytes(gzip.compress(text, mtime=0))
    return study


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=RUNS, help="the stored study (default: data/runs/ablation)")
    parser.add_argument("--out", type=Path, required=True, help="a new folder for ablation.json.gz")
    args = parser.parse_args(argv)
    if args.out.exists() or args.out.is_symlink():
        print(f"error: {args.out} exists; give a new folder for --out (nothing is overwritten).", file=sys.stderr)
        return 2
    if not args.out.parent.is_dir():
        print(f"error: {args.out.parent} is not a folder; give --out inside an existing folder.", file=sys.stderr)
        return 2
    if not args.runs.is_dir():
        print(f"error: {args.runs} is not a folder; give a stored study or a recording.", file=sys.stderr)
        return 2
    try:
        study = write_study(args.runs, args.out)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    seeds = [n for arms in study["seeds"].values() for n in arms.values()]
    print(f"wrote {args.out / SUMMARY_NAME}: {sum(seeds)} runs, {study['comparisons']} comparisons")
    return 0


if __name__ == "__main__":
    sys.exit(main())
