"""Store a study's recorded runs compactly: one Parquet table (zstd) of every run's metric records and one
provenance table holding each run's files, verbatim, with the digests of the files they came from.

    python tools/compact_runs.py SOURCE [SOURCE ...] --out NEW [--drop KEY ...] [--portable-init | --portable-paths]

A SOURCE is the ``--out`` folder of ``record`` or ``record-ablation`` (one folder a run, each with its
``provenance.json`` and ``metrics.jsonl.gz`` or ``metrics.jsonl``), a folder of runs that ``train`` wrote
whole (its weights, ``checkpoint/``, ``checkpoint.alt/`` and ``init/``, are left out and the run's entry
names them), or a study already stored this way (so a new recording joins the shipped runs: give both). NEW must not exist; the tool creates it and writes
only there, never deleting anything:

- ``metrics.parquet`` (:data:`stddial_book.rl.runlog.STUDY_TABLE`): one row a logged record, the columns
  ``run``, ``record_keys`` (the record's keys in their logged order) and one a metric, typed as logged (a
  metric whose values are not all of one JSON type, or are objects, is stored as JSON text);
- ``provenance.json.gz`` (:data:`stddial_book.rl.runlog.STUDY_INDEX`): per run, every small file of its
  folder verbatim (``provenance.json``, ``sft.json``, the marker), the size, sha256 and git blob id of
  each file the folder held (the compressed log included: the original is in the repository's history
  under that blob id), the number of records, the sha256 of the log's text and of the text of what the
  table stores (the same when nothing was left out: the log is then restored byte for byte);
- the study's own files (``README.md``, ``pilot.json``) copied as they are (the table holds the digests of
  its data files, ``pilot.json``; a README may be edited later).

``--drop KEY`` leaves a metric out of the table (for metrics no reader of the study reads; each run's
entry names what it lost). ``--portable-init`` reduces ``--init <path>`` in each provenance's command to
the folder's name (the warm start's sha256 stays in ``config.init_sha256``); ``--portable-paths`` does the
same to ``--init``, ``--work`` and ``--out`` (so no path of the recording machine is shipped); the run's
entry says so.
Before it finishes, the tool reads every run back through ``stddial_book.rl.runlog.load_run`` and checks
it against its source. Every input is checked before anything is written; a refusal is one line.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stddial_book.rl import runlog  # noqa: E402  (the checkout's package, beside this tool)
from stddial_book.rl.checkpoints import INIT, SLOTS  # noqa: E402

#: The folders of weights that ``train`` writes into a run's own folder (its two checkpoint slots and the
#: starting model): a study stores logs, so these are left out, and the run's entry says so.
WEIGHT_FOLDERS = (*SLOTS, INIT)

#: Files that make a folder a tool's own (never shipped as files: their text is kept in the table).
TOOL_FILES = (".stddial-run.json", ".stddial-manifest.json")
#: A run folder's small files are kept verbatim; anything larger is not part of a recorded run.
SMALL = 1 << 16
PATH_FLAGS = ("--init", "--work", "--out")


class Refusal(Exception):
    """An input the tool will not take; its message is the one line printed."""


def digest(data: bytes) -> dict[str, Any]:
    """Size, sha256 and git blob id of a file's bytes (``git cat-file -p <blob>`` shows the file)."""
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "git_blob": blob}


def log_text(records: list[dict[str, Any]]) -> str:
    """The JSON-lines text of records, as ``RunLog`` writes it (one ``json.dumps`` a line)."""
    return "".join(json.dumps(r, allow_nan=False) + "\n" for r in records)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _read_log(path: Path) -> tuple[str, list[dict[str, Any]]]:
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict) or "step" not in record:
            raise Refusal(f"{path}, line {number}, is not a metric record; restore the log before compacting.")
        records.append(record)
    if log_text(records) != text:
        raise Refusal(
            f"{path} is not a log as RunLog writes it (one json.dumps a line); it cannot be restored exactly."
        )
    return text, records


def _folder_run(run: Path, portable: tuple[str, ...]) -> dict[str, Any]:
    """One run folder of a recording: its entry for the provenance table, and where its log is."""
    files, digests, log, left_out = {}, {}, None, []
    for item in sorted(run.iterdir()):
        if item.name in WEIGHT_FOLDERS and item.is_dir() and not item.is_symlink():
            left_out.append(f"{item.name}/")
            continue
        if item.is_symlink() or not item.is_file():
            raise Refusal(f"{item} is a link or a folder; a recorded run holds files only: give the --out of record.")
        data = item.read_bytes()
        digests[item.name] = digest(data)
        if item.name in (runlog.METRICS, runlog.METRICS + ".gz"):
            log = item
            continue
        try:
            files[item.name] = data.decode()
        except UnicodeDecodeError:
            files[item.name] = None
        if files[item.name] is None or "\0" in files[item.name] or len(data) > SMALL:
            raise Refusal(
                f"{item} is not a small text file of a recorded run; give the --out of record, not its --work."
            )
    if log is None or runlog.PROVENANCE not in files:
        raise Refusal(f"{run} lacks its log or its provenance.json; a recorded run must carry both.")
    entry: dict[str, Any] = {"files": files, "digests": digests}
    if left_out:
        entry["left_out"] = f"{', '.join(left_out)}: the run's weights (train's checkpoints, its starting model)"
    if portable:
        provenance = json.loads(files[runlog.PROVENANCE])
        alternatives = "|".join(re.escape(flag) for flag in portable)
        flags = re.compile(rf"({alternatives})\s+(\S+)")
        reduced: list[str] = []

        def reduce(match: re.Match) -> str:
            name = Path(match.group(2)).name
            if name != match.group(2):
                reduced.append(match.group(1))
            return f"{match.group(1)} {name}"

        command = flags.sub(reduce, provenance.get("command", ""))
        notes = []
        if reduced:
            provenance["command"] = command
            notes.append(f"the command's {', '.join(reduced)} paths")
        policy = provenance.get("config", {}).get("policy")
        if "--work" in portable and isinstance(policy, dict) and Path(str(policy.get("model", ""))).is_absolute():
            policy["model"] = Path(policy["model"]).name  # a model folder of the recording machine's cache
            notes.append("config.policy.model's path")
        if notes:
            files[runlog.PROVENANCE] = json.dumps(provenance, indent=2) + "\n"
            entry["rewritten"] = f"provenance.json: {' and '.join(notes)} reduced to their folders' names"
    return {"entry": entry, "log": log}


def _source_runs(source: Path, portable: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """The runs of one source folder, by name: a recording's run folders, or a stored study's runs."""
    if source.is_symlink() or not source.is_dir():
        raise Refusal(f"{source} is not a folder; give the --out folder of a recording, or a stored study.")
    runs = {}
    index = runlog.study_index(source)
    for name, entry in (index or {}).get("runs", {}).items():
        runs[name] = {"entry": json.loads(json.dumps(entry)), "stored": source / name}
    for run in sorted(p for p in source.iterdir() if p.is_dir() and not p.is_symlink()):
        if runlog.metrics_path(run) is None and not (run / runlog.PROVENANCE).exists():
            continue
        if run.name in runs:
            raise Refusal(f"{source} holds {run.name} both as a folder and in its tables; give one of them.")
        runs[run.name] = _folder_run(run, portable)
    if not runs:
        raise Refusal(f"{source} holds no recorded run (a folder with provenance.json and metrics.jsonl.gz).")
    return runs


def _study_files(sources: list[Path]) -> tuple[dict[str, Path], dict[str, str]]:
    """The study's own files to copy (``README.md``, ``pilot.json``) and the tools' files to keep as text."""
    copy: dict[str, Path] = {}
    kept: dict[str, str] = {}
    skip = {runlog.STUDY_TABLE, runlog.STUDY_INDEX}
    for source in sources:
        for item in sorted(p for p in source.iterdir() if p.is_file() and p.name not in skip):
            if item.is_symlink():
                raise Refusal(f"{item} is a link; copy the file it points to into {source} or remove the link.")
            if item.name in TOOL_FILES:
                kept[f"{source.name}/{item.name}"] = item.read_text()
            elif item.name in copy and copy[item.name].read_bytes() != item.read_bytes():
                raise Refusal(
                    f"{item} differs from {copy[item.name]}: the sources disagree on the study's {item.name}."
                )
            else:
                copy.setdefault(item.name, item)
    return copy, kept


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int" if -(2**63) <= value < 2**63 else "json"
    if isinstance(value, (float, str)):
        return {float: "float", str: "str"}[type(value)]
    if isinstance(value, list) and value:
        kinds = {_kind(v) for v in value}
        return f"list[{kinds.pop()}]" if len(kinds) == 1 and kinds <= {"bool", "int", "float", "str"} else "json"
    return "json"


def _arrow_types() -> dict[str, Any]:
    import pyarrow as pa

    scalar = {"bool": pa.bool_(), "int": pa.int64(), "float": pa.float64(), "str": pa.string()}
    return {**scalar, **{f"list[{k}]": pa.list_(t) for k, t in scalar.items()}, "json": pa.string()}


def _column_kinds(kinds: dict[str, set[str]]) -> dict[str, str]:
    """One type a metric: the one its values share, else JSON text (an empty list takes its column's type)."""
    chosen = {}
    for key, found in kinds.items():
        found = found - {"none"}
        if "list[]" in found:
            found = (found - {"list[]"}) or {"json"}
            found = found if all(k.startswith("list[") for k in found) else {"json"}
        chosen[key] = found.pop() if len(found) == 1 else "json"
    return chosen


def _records(run: dict[str, Any]) -> list[dict[str, Any]]:
    if "stored" in run:
        return runlog.load_run(run["stored"])[1]
    return _read_log(run["log"])[1]


def _survey(runs: dict[str, dict[str, Any]], drop: set[str]) -> dict[str, str]:
    """Check every log and fill each run's ``log`` entry; the type of every stored metric."""
    kinds: dict[str, set[str]] = {}
    for name, run in runs.items():
        records = _records(run)
        if not records:
            raise Refusal(f"{name}: the log holds no record; a recorded run logs at least one step.")
        log = run["entry"].get("log") or {"records": len(records), "sha256": _sha(log_text(records)), "dropped": []}
        kept = [{k: v for k, v in r.items() if k not in drop} for r in records]
        lost = sorted({k for r in records for k in r} & drop)
        log.update(dropped=sorted(set(log["dropped"]) | set(lost)), stored_sha256=_sha(log_text(kept)))
        run["entry"]["log"] = log
        for record in kept:
            for key, value in record.items():
                kinds.setdefault(key, set()).add("none" if value is None else _kind(value) if value != [] else "list[]")
    for reserved in (runlog.RUN_COLUMN, runlog.KEYS_COLUMN):
        if reserved in kinds:
            raise Refusal(f"a metric is named {reserved!r}, the table's own column; rename it in the logs first.")
    return _column_kinds(kinds)


def _table(runs: dict[str, dict[str, Any]], drop: set[str], kinds: dict[str, str]):
    """The study's table: every run's records, runs in name order, with the schema's metadata."""
    import pyarrow as pa

    types = _arrow_types()
    parts = []
    for name in sorted(runs):
        records = [{k: v for k, v in r.items() if k not in drop} for r in _records(runs[name])]
        columns = {runlog.RUN_COLUMN: pa.array([name] * len(records), pa.string())}
        columns[runlog.KEYS_COLUMN] = pa.array([json.dumps(list(r)) for r in records], pa.string())
        for key, kind in kinds.items():
            values = [r.get(key) for r in records]
            if kind == "json":
                values = [None if v is None else json.dumps(v) for v in values]
            columns[key] = pa.array(values, types[kind])
        parts.append(pa.table(columns))
    table = pa.concat_tables(parts)
    json_columns = sorted(k for k, kind in kinds.items() if kind == "json")
    return table.replace_schema_metadata({"stddial": json.dumps({"json_columns": json_columns})})


def _check_written(out: Path, runs: dict[str, dict[str, Any]]) -> None:
    """Every run read back from ``out`` is its source: provenance text and the records the table stores."""
    for name, run in sorted(runs.items()):
        provenance, records = runlog.load_run(out / name)
        entry = run["entry"]
        if provenance != json.loads(entry["files"][runlog.PROVENANCE]):
            raise Refusal(f"{out / name}: the provenance read back differs from its source; {out} is not valid.")
        if _sha(log_text(records)) != entry["log"]["stored_sha256"]:
            raise Refusal(f"{out / name}: the records read back differ from the log; {out} is not valid.")


def _check_out(out: Path, sources: list[Path]) -> None:
    if out.exists() or out.is_symlink():
        raise Refusal(f"{out} exists; give a new folder for --out (this tool writes only into a folder it creates).")
    if not out.parent.is_dir():
        raise Refusal(f"{out.parent} is not a folder; create it, or give --out inside an existing folder.")
    for source in sources:
        if out.resolve().is_relative_to(source.resolve()):
            raise Refusal(f"{out} is inside {source}; give --out outside the sources.")


def compact(sources: list[Path], out: Path, drop: set[str], portable: tuple[str, ...] = ()) -> dict[str, Any]:
    """Write ``out`` (a new folder) from ``sources``; returns its provenance table."""
    import pyarrow.parquet as pq

    runs: dict[str, dict[str, Any]] = {}
    for source in sources:
        for name, run in _source_runs(source, portable).items():
            if name in runs:
                raise Refusal(f"{source} holds {name}, which another source holds too; give each run once.")
            runs[name] = run
    copy, kept = _study_files(sources)
    _check_out(out, sources)
    kinds = _survey(runs, drop)
    table = _table(runs, drop, kinds)
    out.mkdir()
    pq.write_table(table, out / runlog.STUDY_TABLE, compression="zstd", compression_level=19)
    index = {
        "format": runlog.STUDY_FORMAT,
        "tool": "tools/compact_runs.py",
        "table": {
            "file": runlog.STUDY_TABLE,
            "rows": table.num_rows,
            **digest((out / runlog.STUDY_TABLE).read_bytes()),
        },
        "dropped": sorted({k for run in runs.values() for k in run["entry"]["log"]["dropped"]}),
        "study_files": {n: digest(p.read_bytes()) for n, p in sorted(copy.items()) if not n.endswith(".md")},
        "tool_files": kept,
        "runs": {name: runs[name]["entry"] for name in sorted(runs)},
    }
    text = json.dumps(index, indent=1, sort_keys=True).encode()
    (out / runlog.STUDY_INDEX).write_bytes(gzip.compress(text, mtime=0))
    for name, path in sorted(copy.items()):
        shutil.copyfile(path, out / name)
    _check_written(out, runs)
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", type=Path, help="recordings (record's --out) or stored studies")
    parser.add_argument("--out", required=True, type=Path, help="a new folder, created here")
    parser.add_argument("--drop", nargs="*", default=[], metavar="KEY", help="metrics to leave out of the table")
    portable = parser.add_mutually_exclusive_group()
    portable.add_argument("--portable-init", action="store_true", help="reduce --init <path> to the folder's name")
    portable.add_argument(
        "--portable-paths", action="store_true", help="reduce the paths of --init, --work and --out to folder names"
    )
    args = parser.parse_args(argv)
    flags = PATH_FLAGS if args.portable_paths else ("--init",) if args.portable_init else ()
    try:
        index = compact(args.sources, args.out, set(args.drop), flags)
    except Refusal as refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"wrote {args.out}: {len(index['runs'])} runs, {index['table']['rows']} records, {size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
