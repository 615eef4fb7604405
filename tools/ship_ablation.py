"""Bring a recording of the dial-only ablation into the repository, and ship its study.

    python tools/ship_ablation.py RECORDED_DIR      # copy the new runs, then write the study
    python tools/ship_ablation.py RECORDED_DIR --whole-seeds   # only seeds with every run finished
    python tools/ship_ablation.py --study-only      # rewrite the study from data/runs/ablation

RECORDED_DIR is the ``--out`` of ``python -m stddial_book record-ablation``. Every run folder in it
(the runs, the pilot's, ``sft``) and ``pilot.json`` are copied to ``data/runs/ablation`` unless
already there: a folder already there with other contents stops the copy (nothing is overwritten).
The one change made while copying: the provenance's ``command`` names the warm start by its folder
name (``--init sft-seed0``) instead of the recording machine's absolute path; the warm start's
sha256 stays in each run's provenance (``init_sha256``). Then the study
(:func:`stddial_book.experiments.ablation.ablation_study` of that folder, plus the power analysis of
the reference runs at the design's run length) is written to ``data/ablation/ablation.json.gz``,
which ``tests/test_ablation_report.py`` recomputes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "data" / "runs" / "ablation"
SUMMARY = ROOT / "data" / "ablation" / "ablation.json.gz"
_INIT = re.compile(r"--init\s+(\S+)")


def _portable(provenance: str) -> str:
    """The provenance text with ``--init <path>`` reduced to the folder's name."""
    data = json.loads(provenance)
    command = data.get("command", "")
    data["command"] = _INIT.sub(lambda m: "--init " + Path(m.group(1)).name, command)
    return json.dumps(data, indent=2) + "\n"


def _same(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir())
    if names != sorted(p.name for p in b.iterdir()):
        return False
    for name in names:
        left = (a / name).read_bytes()
        if name == "provenance.json":
            left = _portable(left.decode()).encode()
        if left != (b / name).read_bytes():
            return False
    return True


def whole_seeds(recorded: Path) -> set[int]:
    """The seeds for which every arm × cell of the design has finished in ``recorded``."""
    sys.path.insert(0, str(ROOT))
    from stddial_book.experiments.ablation import ARMS, CELLS, run_label

    found = {p.name for p in recorded.iterdir() if (p / "provenance.json").is_file()}
    seeds = {int(name.rsplit("-seed", 1)[1]) for name in found if name.split("-", 1)[0] in ARMS}
    return {s for s in seeds if all(run_label(a, c, s) in found for a in ARMS for c in CELLS)}


def copy_runs(recorded: Path, only_whole_seeds: bool = False) -> list[str]:
    """Copy every run folder of ``recorded`` not yet in :data:`RUNS` (with ``only_whole_seeds``, of
    the main runs only those of :func:`whole_seeds`); the names copied."""
    RUNS.mkdir(parents=True, exist_ok=True)
    copied = []
    keep = whole_seeds(recorded) if only_whole_seeds else None
    for source in sorted(p for p in recorded.iterdir() if p.is_dir()):
        if not (source / "provenance.json").is_file():
            continue
        main_run = "-seed" in source.name and not source.name.startswith("pilot-")
        if keep is not None and main_run and int(source.name.rsplit("-seed", 1)[1]) not in keep:
            continue
        target = RUNS / source.name
        if target.exists():
            if not _same(source, target):
                raise SystemExit(f"{target} exists with other contents: remove it by hand if it should be replaced.")
            continue
        target.mkdir()
        for item in source.iterdir():
            if item.name == "provenance.json":
                (target / item.name).write_text(_portable(item.read_text()))
            elif item.is_file():
                shutil.copy2(item, target / item.name)
        copied.append(source.name)
    pilot = recorded / "pilot.json"
    if pilot.is_file():
        if (RUNS / "pilot.json").is_file() and (RUNS / "pilot.json").read_bytes() != pilot.read_bytes():
            raise SystemExit(f"{RUNS / 'pilot.json'} differs from {pilot}: the two recordings used other pilots.")
        shutil.copy2(pilot, RUNS / "pilot.json")
    return copied


def write_study() -> dict:
    """The shipped study: the ablation's study of :data:`RUNS` and the power analysis behind its seeds."""
    sys.path.insert(0, str(ROOT))
    from stddial_book.experiments.ablation import RUN_SAMPLES, ablation_study, power_analysis
    from stddial_book.rl.runlog import load_run, recorded_runs

    study = ablation_study(RUNS)
    reference = {k: [load_run(p)[1] for p in v] for k, v in recorded_runs("reference").items()}
    study["power"] = power_analysis(reference, samples=RUN_SAMPLES)
    SUMMARY.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(study, indent=1, sort_keys=True).encode()
    SUMMARY.write_bytes(gzip.compress(text, mtime=0))
    return study


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recorded", nargs="?", type=Path, help="the --out folder of record-ablation")
    parser.add_argument("--study-only", action="store_true", help="only rewrite the shipped study")
    parser.add_argument(
        "--whole-seeds", action="store_true", help="copy only seeds whose every arm and cell has finished"
    )
    args = parser.parse_args(argv)
    if args.recorded is None and not args.study_only:
        parser.error("give the recorded folder, or --study-only")
    if args.recorded is not None:
        if not args.recorded.is_dir():
            parser.error(f"{args.recorded} is not a folder: give the --out folder of record-ablation.")
        copied = copy_runs(args.recorded, args.whole_seeds)
        print(f"copied {len(copied)} run folders into {RUNS.relative_to(ROOT)}")
    study = write_study()
    seeds = [n for arms in study["seeds"].values() for n in arms.values()]
    print(f"wrote {SUMMARY.relative_to(ROOT)}: {sum(seeds)} runs, {study['comparisons']} comparisons")


if __name__ == "__main__":
    main()
