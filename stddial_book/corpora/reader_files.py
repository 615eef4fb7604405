"""Reading a reader's table: a .csv, .parquet or .jsonl file, a folder of .parquet files (TRL's
``completions/`` log) or a Hugging Face dataset id, as a ``pyarrow.Table``; every refusal one line
(:class:`ReaderDataError`) naming the file and the fix. :mod:`stddial_book.corpora.reader_pool` makes
a pool of prompts of it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ReaderDataError", "read_reader_table", "TABLE_SUFFIXES"]

#: The file formats the loader reads, by suffix.
TABLE_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl"}

_FORMATS = (
    "a .csv, .parquet or .jsonl file (one row per prompt or per completion), a folder of .parquet files "
    "(TRL's completions/ log) or a Hugging Face dataset id"
)


class ReaderDataError(ValueError):
    """A reader's table that cannot be read as solve-rate data; the message names the problem and the fix."""


def read_reader_table(source: str | os.PathLike, config: str | None = None, split: str = "train"):
    """``(pyarrow.Table, name)`` for a .csv, .parquet or .jsonl file or a hub dataset id; a
    :class:`ReaderDataError` naming the file and the fix when it cannot be read as a table.

    ``source`` is a file path, a folder of .parquet files or a hub dataset id (``owner/name``, read only when
    no such path exists); ``config`` and ``split`` pick the hub dataset's configuration (None: its default)
    and split (``"train"`` by default), and are ignored for local files.
    """
    if not isinstance(source, (str, os.PathLike)) or isinstance(os.fspath(source), bytes):
        raise TypeError(f"source must be a path or a dataset id (a string); got {type(source).__name__}.")
    path = Path(os.path.expanduser(os.fspath(source)))
    name = os.fspath(source)
    fmt = TABLE_SUFFIXES.get(path.suffix.lower())
    if fmt is None and path.suffix.lower() == ".json":
        fmt = "jsonl"
    if not path.exists():
        if fmt is None and _looks_like_hub_id(name):
            return _hub_table(name, config, split), name
        raise ReaderDataError(f"{name} does not exist; pass {_FORMATS}.")
    if path.is_dir():
        return _read_folder(path, name), name
    if fmt is None:
        raise ReaderDataError(f"{name}: unknown file type {path.suffix or '(no suffix)'!r}; pass {_FORMATS}.")
    try:
        with open(path, "rb") as handle:
            empty = not handle.read(1)
    except OSError as err:
        raise ReaderDataError(f"{name} cannot be read ({err.strerror}); check the path and its permissions.") from None
    if empty:
        raise ReaderDataError(f"{name} is an empty file; pass a table with one row per prompt.")
    return _read_file(path, name, fmt), name


def _read_file(path: Path, name: str, fmt: str):
    import pyarrow as pa

    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path)
        if fmt == "csv":
            import pyarrow.csv as pcsv

            return pcsv.read_csv(path)
        import pyarrow.json as pjson

        return pjson.read_json(path)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as err:
        reason = " ".join(str(err).split())[:100] or type(err).__name__
        shape = "one JSON object per line" if fmt == "jsonl" else f"a {fmt} table"
        raise ReaderDataError(
            f"{name} is not a table that can be read as {fmt} ({reason}); pass {shape} with one row per prompt."
        ) from None


def _read_folder(path: Path, name: str):
    """The .parquet files of a folder (TRL's ``completions/``: ``completions_00010.parquet``, one per logged
    step), in name order, as one table."""
    import pyarrow as pa

    files = sorted(path.glob("*.parquet"))
    if not files:
        raise ReaderDataError(f"{name} is a folder with no .parquet file in it; pass {_FORMATS}.")
    odd = next((f for f in files if not f.is_file()), None)
    if odd is not None:
        raise ReaderDataError(f"{odd} is not a regular file and was not read; pass a folder of .parquet files only.")
    tables = [_read_file(f, str(f), "parquet") for f in files]
    try:
        return pa.concat_tables(tables, promote_options="default")
    except pa.ArrowException as err:
        reason = " ".join(str(err).split())[:100]
        raise ReaderDataError(
            f"{name}: its .parquet files hold different columns ({reason}); pass one file, or a folder of one run's log."
        ) from None


def _looks_like_hub_id(text: str) -> bool:
    parts = text.split("/")
    return len(parts) == 2 and all(parts) and not text.startswith((".", "~")) and " " not in text


def _hub_table(repo: str, config: str | None, split: str):
    """A hub dataset's split as a pyarrow table; fails at once, on one line, when the hub cannot be reached."""
    from stddial_book.core.hub import hub_unavailable_reason

    reason = hub_unavailable_reason()
    if reason is not None:
        raise ReaderDataError(
            f"cannot fetch the dataset {repo}: {reason}; download it elsewhere and pass a .csv, .parquet or "
            ".jsonl file of it instead."
        )
    import datasets

    try:
        dataset = datasets.load_dataset(repo, config, split=split)
    except Exception as err:  # the hub's errors vary (missing repo, config, split, network): one line each
        reason = " ".join(str(err).split())[:160] or type(err).__name__
        raise ReaderDataError(
            f"cannot load the dataset {repo} (config {config!r}, split {split!r}): {reason}; check the id, "
            "--config and the split, or pass a local file."
        ) from None
    return dataset.with_format("arrow")[:]
