"""Run logs: a metrics JSONL file and a provenance JSON per run (chapters 9-13).

A run directory holds ``metrics.jsonl`` (one JSON object per logged step) and
``provenance.json`` (the command, git commit, package versions, device, seed, profile, start
time and, once finished, the wall time). Chapters plot committed run logs with
:func:`load_run` and print their provenance beside the plot, so a GPU result is always shown
with where it came from.

The committed runs of a study are stored compactly (``tools/compact_runs.py``): the folder holds one
Parquet table of every run's records (:data:`STUDY_TABLE`) and one provenance table
(:data:`STUDY_INDEX`: each run's ``provenance.json`` and small files, verbatim, with the sizes, sha256
and git blob ids of the files they came from). A run there is named by the path it would have as a
folder, ``<study>/<run>``: :func:`load_run`, :func:`run_json`, :func:`run_folders` and
:func:`recorded_runs` read both layouts alike.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import os
import platform
import sys
import time
import warnings
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from stddial_book.core.outdir import append_own, record_files, replace_own
from stddial_book.core.repository import run_git
from stddial_book.core.resources import data_path

__all__ = [
    "RunLog",
    "load_run",
    "read_json",
    "read_records",
    "metric_series",
    "environment",
    "recorded_runs",
    "RECORDED_DIR",
    "git_state",
    "refuse_dirty",
    "metrics_path",
    "write_gzip",
    "run_json",
    "run_folders",
    "study_index",
    "STUDY_TABLE",
    "STUDY_INDEX",
    "STUDY_FORMAT",
]

#: Where the committed reference runs live (package data, ``data/runs/<profile>/<recipe>-seed<n>``).
RECORDED_DIR = data_path("runs")

METRICS = "metrics.jsonl"
PROVENANCE = "provenance.json"

#: A study's compact storage: every run's metric records in one Parquet table (one row a record; the
#: columns ``run`` and ``record_keys``, the record's keys in order as a JSON list, then one column a
#: metric), and the provenance table, gzip-compressed JSON (``runs``: each run's files, verbatim).
STUDY_TABLE = "metrics.parquet"
STUDY_INDEX = "provenance.json.gz"
STUDY_FORMAT = "stddial-book recorded study 1"
RUN_COLUMN, KEYS_COLUMN = "run", "record_keys"


#: The package's source folder: its git checkout (if it is one) is the code a run executed.
_SOURCE = Path(__file__).resolve().parents[1]  # the package directory


def git_state(cwd: str | Path = _SOURCE) -> tuple[str, bool | None]:
    """(commit, dirty) of the book's own checkout: the code a run executes.

    Only a checkout of this project counts: the top of the git work tree holding ``cwd`` (default: the
    package's source folder) must hold ``pyproject.toml`` naming ``stddial-book`` and, as ``stddial_book/``,
    the very package that runs. Anything else, such as the package installed from a wheel into a virtual
    environment inside a reader's own repository, is no checkout: git is not run there, so a reader's
    repository is never read (and its uncommitted files never make :func:`refuse_dirty` refuse); the
    commit is then ``"stddial-book <version>, no checkout"`` and ``dirty`` None.

    ``dirty`` is True when tracked files differ from the commit, None when it cannot be told; without git
    the commit is ``"unknown"``."""
    from stddial_book.core.repository import repository_root

    top = repository_root(Path(cwd).resolve())
    pyproject = top / "pyproject.toml" if top is not None else None
    if (
        top is None
        or (top / "stddial_book").resolve() != _SOURCE
        or not pyproject.is_file()
        or not any(line.replace(" ", "") == 'name="stddial-book"' for line in pyproject.read_text().splitlines())
    ):
        try:
            version = metadata.version("stddial-book")
        except metadata.PackageNotFoundError:
            version = "(version unknown)"
        return f"stddial-book {version}, no checkout", None
    out = run_git(["rev-parse", "HEAD"], top, timeout=5)
    commit = out.stdout.decode(errors="replace").strip() if out is not None else ""
    if out is None or out.returncode != 0 or not commit:
        return "unknown", None
    status = run_git(["status", "--porcelain", "--untracked-files=no"], top, timeout=5)
    if status is None:
        return "unknown", None
    return commit, (bool(status.stdout.strip()) if status.returncode == 0 else None)


def refuse_dirty(commit: str, dirty: bool | None, allow_dirty: bool) -> None:
    """Refuse to record from a checkout with uncommitted changes to tracked files (``dirty`` from
    :func:`git_state`) unless ``allow_dirty``: a recorded run must come from a commit. ``commit`` is
    the checkout's commit, named in the error."""
    if dirty and not allow_dirty:
        raise ValueError(
            f"the checkout at {commit[:10]} has uncommitted changes to tracked files; a recorded run must come "
            "from a commit: commit or stash them, or pass --allow-dirty (the provenance then says so)."
        )


def environment(device: str | None = None) -> dict[str, Any]:
    """Package versions and the device a run used.

    ``device`` is the torch device the run computed on (``"cpu"``, ``"cuda"``, ``"cuda:1"``):
    a CPU run is recorded as ``cpu (<processor>, <n> cores)`` even on a machine that has a GPU, and
    only a run on a CUDA device names the GPU. Without ``device`` the CPU is assumed.
    """
    versions = {}
    for name in ("stddial-book", "torch", "transformers", "numpy"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    kind = str(device or "cpu")
    name = f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"
    if kind.startswith("cuda"):
        import torch

        name = torch.cuda.get_device_name(torch.device(kind))
    return {"python": sys.version.split()[0], "packages": versions, "device": name, "platform": platform.platform()}


def _clean(value: Any) -> Any:
    """JSON-safe metric values: numpy and torch scalars to floats, NaN and inf to None."""
    if hasattr(value, "item") and getattr(value, "shape", ()) == ():
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


class RunLog:
    """Writes one run's metrics and provenance; appends when the run is resumed.

    Files go through :func:`stddial_book.core.outdir.replace_own` and ``append_own`` (never through a
    link; recorded in the manifest of the tool's directory). A resumed log writes nothing until its
    first record or :meth:`finish`, so a resume refused after it was opened leaves the run as it was
    (no ``resumed_at``).

    ``directory`` is the run directory (created if missing). A new log records in its provenance the
    ``command`` that started the run, its ``seed``, the ``profile``'s name, ``config`` (the run's
    settings as a dict; ``None``: empty), the ``device`` it computes on (a torch device name; ``None``:
    the CPU) and ``run_id`` (``None``: none). With ``resume`` true an existing log is continued, its
    provenance kept (those arguments are then not used) and a ``resumed_at`` time added; with
    ``resume`` false (the default) a directory that already holds a metrics log is refused.
    """

    def __init__(
        self,
        directory: str | Path,
        command: str,
        seed: int,
        profile: str,
        config: dict[str, Any] | None = None,
        resume: bool = False,
        device: str | None = None,
        run_id: str | None = None,
    ) -> None:
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise ValueError(
                f"cannot write a run log into {self.directory}: a file of that name is in the way; "
                "choose another output directory."
            ) from None
        self._start = time.perf_counter()
        path = self.directory / PROVENANCE
        self._pending = False
        if resume and path.exists():
            self.provenance = read_json(path)
            if not isinstance(self.provenance, dict):
                raise ValueError(f"{path} is damaged (not a JSON object); nothing was changed: restore it.")
            self.provenance.setdefault("resumed_at", []).append(datetime.now(timezone.utc).isoformat())
            self._pending = True  # written with the first record: a refused resume writes nothing
            return
        if not resume and (self.directory / METRICS).exists():
            raise ValueError(
                f"{self.directory} already holds a run log; pass resume=True to continue it "
                "or choose another output directory."
            )
        commit, dirty = git_state()
        self.provenance = {
            "command": command,
            "run_id": run_id,
            "git_commit": commit,
            "dirty": dirty,
            "seed": seed,
            "profile": profile,
            "config": _clean(config or {}),
            "started_at": datetime.now(timezone.utc).isoformat(),
            **environment(device),
            "wall_time_s": None,
        }
        self._write_provenance()

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """Append one step's metrics (TRL's names where TRL has them)."""
        record = {"step": int(step), **_clean(metrics)}
        if self._pending:
            self._write_provenance()
        append_own(self.directory, METRICS, json.dumps(record, allow_nan=False) + "\n")

    def finish(self) -> None:
        """Record the wall time so far, added up across resumed segments (:func:`train` calls this
        at every checkpoint, so an interrupted segment's time up to its last checkpoint counts)."""
        previous = self.provenance.get("wall_time_s") or 0.0
        self.provenance["wall_time_s"] = previous + time.perf_counter() - self._start
        self._start = time.perf_counter()
        self._write_provenance()

    def _write_provenance(self) -> None:
        self._pending = False
        replace_own(self.directory, PROVENANCE, json.dumps(self.provenance, indent=2) + "\n")
        record_files(self.directory, [], append=[METRICS] if (self.directory / METRICS).is_file() else [])


def read_json(path: str | Path) -> Any:
    """The JSON document in ``path`` (``.json`` or ``.json.gz``); a ``ValueError`` naming the file when it
    is missing or damaged."""
    path = Path(path)
    try:
        return json.loads(_read_text(path))
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist; check the directory, or rerun what writes it.") from None
    except (json.JSONDecodeError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as err:
        raise ValueError(f"{path} is damaged ({err}); restore it, or delete the run directory and rerun.") from None


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` file, one JSON object a line.

    A run killed while writing leaves a partial last line: it is skipped with a warning (the step
    it belonged to was not checkpointed, so a resumed run logs it again). A damaged line anywhere
    else is an error that names the file and the line. ``path`` is the file (``.gz`` is
    decompressed).
    """
    path = Path(path)
    try:
        text = _read_text(path)
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist; it is not a run directory written by RunLog.") from None
    except (UnicodeDecodeError, OSError, EOFError) as err:
        raise ValueError(f"{path} is not a readable text log ({err}); restore it or rerun the run.") from None
    lines = text.split("\n")
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or "step" not in record:
                raise ValueError("not a record with a step")
        except ValueError as err:
            if number == len(lines):  # the last line, with no newline after it: a write cut short
                warnings.warn(f"{path}: skipped a partial last line (a run stopped while writing it).", stacklevel=2)
                break
            raise ValueError(
                f"{path}, line {number}, is damaged ({err}); restore the file, or delete the run directory and rerun."
            ) from None
        records.append(record)
    return records


def _read_text(path: Path) -> str:
    """A file's text; ``.gz`` files (the committed logs) are decompressed."""
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return handle.read()
    return path.read_text()


def metrics_path(directory: str | Path) -> Path | None:
    """A run directory's metrics log: ``metrics.jsonl``, or the compressed ``metrics.jsonl.gz`` of a
    committed run; ``None`` when it has neither. ``directory`` is the run directory's path."""
    for name in (METRICS, METRICS + ".gz"):
        if (Path(directory) / name).is_file():
            return Path(directory) / name
    return None


def write_gzip(src: str | Path, dst: str | Path) -> Path:
    """Compress ``src`` into ``dst`` reproducibly (no time stamp or name in the header): the same log
    gives the same bytes, so re-recording an unchanged run leaves the committed file unchanged."""
    data = Path(src).read_bytes()
    with open(dst, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as handle:
        handle.write(data)
    return Path(dst)


def load_run(directory: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(provenance, metric records) of a run directory (:func:`read_records` for the records), or of a
    run stored in its study's tables (``<study>/<run>``, see the module's docstring). ``directory`` is
    that path (str or Path)."""
    if not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"load_run takes a run directory path (str or Path); got {type(directory).__name__}.")
    path = Path(directory)
    metrics = metrics_path(path)
    if metrics is None and not (path / PROVENANCE).exists():
        stored = _stored_entry(path)
        if stored is not None:
            return _stored_provenance(path, stored), _stored_records(path)
    for name, found in ((PROVENANCE, (path / PROVENANCE).is_file()), (METRICS, metrics is not None)):
        if not found:
            raise ValueError(f"{path} has no {name}; it is not a run directory written by RunLog.")
    provenance = read_json(path / PROVENANCE)
    if not isinstance(provenance, dict):
        raise ValueError(f"{path / PROVENANCE} is damaged (not a JSON object); restore it or rerun the run.")
    return provenance, read_records(metrics)


def run_json(directory: str | Path, name: str) -> Any:
    """The JSON file ``name`` of a run (``provenance.json``, ``sft.json``): from its folder, or, for a run
    stored in its study's tables, from the study's provenance table. ``directory`` is the run's path
    (a folder, or ``<study>/<run>``)."""
    path = Path(directory)
    stored = None if (path / name).exists() else _stored_entry(path)
    if stored is None:
        return read_json(path / name)
    if name not in stored["files"]:
        raise ValueError(f"{path} has no {name}; the recorded run's files are {sorted(stored['files'])}.")
    try:
        return json.loads(stored["files"][name])
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}/{name} in {path.parent / STUDY_INDEX} is damaged ({err}); restore it.") from None


def run_folders(directory: str | Path) -> list[Path]:
    """The runs in ``directory``, sorted by name: its run folders (a metrics log each) and the runs stored
    in its study's tables (named ``directory/<run>``, see the module's docstring)."""
    folder = Path(directory)
    found: dict[str, Path] = {}
    if folder.is_dir():
        found = {p.name: p for p in folder.iterdir() if p.is_dir() and metrics_path(p) is not None}
    index = study_index(folder)
    for name in index["runs"] if index else ():
        found.setdefault(name, folder / name)
    return [found[name] for name in sorted(found)]


def study_index(directory: str | Path) -> dict[str, Any] | None:
    """The provenance table of the study stored in ``directory`` (:data:`STUDY_INDEX`), or None when
    the folder holds none. ``runs`` maps each run's name to its ``files`` (name: text, verbatim), their
    ``digests`` (bytes, sha256 and git blob id of each file the run's folder held, the log included) and
    ``log`` (records, the log's sha256, the sha256 of what the table stores, the keys left out)."""
    path = Path(directory) / STUDY_INDEX
    if not path.is_file():
        return None
    stat = path.stat()
    return _cached_index(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _cached_index(path: str, mtime_ns: int, size: int) -> dict[str, Any]:
    index = read_json(path)
    if not isinstance(index, dict) or index.get("format") != STUDY_FORMAT or not isinstance(index.get("runs"), dict):
        raise ValueError(f"{path} is not a recorded study's provenance table ({STUDY_FORMAT!r}); restore it.")
    return index


def _stored_entry(path: Path) -> dict[str, Any] | None:
    index = study_index(path.parent) if path.name else None
    return index["runs"].get(path.name) if index else None


def _stored_provenance(path: Path, entry: dict[str, Any]) -> dict[str, Any]:
    provenance = run_json(path, PROVENANCE)
    if not isinstance(provenance, dict):
        raise ValueError(f"{path}/{PROVENANCE} in {path.parent / STUDY_INDEX} is not a JSON object; restore it.")
    return provenance


@functools.lru_cache(maxsize=4)
def _cached_table(path: str, mtime_ns: int, size: int) -> tuple[Any, dict[str, tuple[int, int]], frozenset]:
    """The study's table, each run's (first row, rows) and the columns stored as JSON text."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
        meta = json.loads((table.schema.metadata or {}).get(b"stddial", b"{}"))
    except (OSError, ValueError) as err:
        raise ValueError(f"{path} could not be read as a recorded study's table ({err}); restore it.") from None
    spans: dict[str, tuple[int, int]] = {}
    names = table.column(RUN_COLUMN).to_pylist()
    for row, name in enumerate(names):
        start, count = spans.get(name, (row, 0))
        if start + count != row:
            raise ValueError(
                f"{path}: the rows of run {name} are not contiguous; rewrite it with tools/compact_runs.py."
            )
        spans[name] = (start, count + 1)
    return table, spans, frozenset(meta.get("json_columns", ()))


def _stored_records(path: Path) -> list[dict[str, Any]]:
    """The metric records of the stored run ``path`` (``<study>/<run>``), in their order, each with
    its keys in the order they were logged."""
    file = path.parent / STUDY_TABLE
    if not file.is_file():
        raise ValueError(f"{path.parent} has {STUDY_INDEX} but no {STUDY_TABLE}; restore it.")
    stat = file.stat()
    table, spans, json_columns = _cached_table(str(file.resolve()), stat.st_mtime_ns, stat.st_size)
    if path.name not in spans:
        raise ValueError(f"{file} holds no records of {path.name}; restore it.")
    part = table.slice(*spans[path.name])
    orders: dict[str, list[str]] = {}
    key_texts = part.column(KEYS_COLUMN).to_pylist()
    for text in set(key_texts):
        orders[text] = json.loads(text)
    wanted = {k for keys in orders.values() for k in keys}
    columns = {k: part.column(k).to_pylist() for k in wanted}
    for k in wanted & json_columns:
        columns[k] = [None if v is None else json.loads(v) for v in columns[k]]
    return [{k: columns[k][row] for k in orders[text]} for row, text in enumerate(key_texts)]


def metric_series(records: list[dict[str, Any]], name: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of one metric; steps where it was not logged are skipped, None is NaN.
    ``records`` is the list of metric records :func:`load_run` returns; ``name`` the metric's name
    (such as ``"eval/accuracy_sampled"``)."""
    if isinstance(records, (str, bytes, dict)) or not hasattr(records, "__iter__"):
        raise TypeError(f"records must be the list of metric records load_run returns; got {type(records).__name__}.")
    if any(not isinstance(r, dict) or "step" not in r for r in records):
        raise ValueError("records must be metric records with a 'step' each, as load_run returns them.")
    pairs = [(r["step"], np.nan if r[name] is None else r[name]) for r in records if name in r]
    if not pairs:
        available = sorted({k for r in records for k in r} - {"step"})
        raise ValueError(f"metric {name!r} was never logged; logged metrics: {available}.")
    steps, values = zip(*pairs)
    try:
        return np.array(steps), np.array(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"metric {name!r} is not a number at every step (a list or text metric?); read "
            "such metrics from the records directly."
        ) from None


def recorded_runs(profile: str = "full", root: str | os.PathLike | None = None) -> dict[str, list[Path]]:
    """Committed runs per recipe key (``grpo``, ``dr_grpo``, ``dapo``), seeds sorted: run folders, or
    runs stored in the study's tables (:func:`run_folders`; read each with :func:`load_run`).

    An empty dict means no run of that profile has been recorded yet; chapters then say so.
    ``profile`` is the profile's name (default ``"full"``), the folder under ``root`` searched;
    ``root`` defaults to :data:`RECORDED_DIR`.
    """
    if not isinstance(profile, str):
        raise TypeError(f"profile must be a profile name such as 'full' or 'quick'; got {type(profile).__name__}.")
    base = Path(root) if root is not None else RECORDED_DIR
    found: dict[str, list[Path]] = {}
    for path in run_folders(base / profile):
        if "-seed" not in path.name:
            continue
        if path.is_dir() and not (path / PROVENANCE).exists():
            raise ValueError(f"{path} has metrics but no provenance.json; a recorded run must carry its provenance.")
        found.setdefault(path.name.rsplit("-seed", 1)[0], []).append(path)
    return found
