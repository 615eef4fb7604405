"""A reader's own solve-rate data as a pool of prompts: what ``python -m stddial_book diagnose`` reads.

A table with one row per prompt, in CSV, Parquet or JSONL (or a Hugging Face dataset id, read with
``datasets.load_dataset``), holding either

- counts: ``correct`` successes of ``samples`` rollouts (column names configurable; ``samples`` may
  also be one whole number for every prompt), or
- a pass rate p in [0, 1] per prompt, with the number of samples n given (a number or a column) or
  unknown. Without n the closed forms still apply with p as the solve rate, but the subsampled silent
  fraction (G of the n stored samples) cannot be computed; :attr:`ReaderPool.limits` says so.

Every refusal is a :class:`ReaderDataError` (a ``ValueError``) whose one line names the file, the
column and the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stddial_book.corpora.histograms import KHistogram, SolveCounts

__all__ = ["ReaderDataError", "ReaderPool", "load_reader_pool", "read_reader_table", "as_reader_pool", "TABLE_SUFFIXES"]


#: The file formats the loader reads, by suffix.
TABLE_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl"}

_FORMATS = "a .csv, .parquet or .jsonl file (one row per prompt) or a Hugging Face dataset id"


class ReaderDataError(ValueError):
    """A reader's table that cannot be read as solve-rate data; the message names the problem and the fix."""


@dataclass(frozen=True)
class ReaderPool:
    """One entry per prompt: its solve rate p, and when known its k successes of n samples."""

    name: str
    solve_rates: np.ndarray
    num_correct: np.ndarray | None = None  # k per prompt, None when only pass rates were given
    num_samples: np.ndarray | None = None  # n per prompt, None when unknown
    kind: str = "counts"  # "counts" or "pass rates"
    limits: tuple[str, ...] = ()

    @property
    def num_prompts(self) -> int:
        return int(self.solve_rates.size)

    @property
    def counts_known(self) -> bool:
        """Whether each prompt's k and n are known (needed for the subsampled silent fraction)."""
        return self.num_correct is not None and self.num_samples is not None

    def histograms(self) -> dict[int, KHistogram]:
        """n -> the k-of-n histogram of the prompts with n samples (one entry unless n varies)."""
        if not self.counts_known:
            raise ValueError(f"{self.name}: the number of samples per prompt is unknown, so there is no k-of-n table.")
        out = {}
        for n in np.unique(self.num_samples).tolist():
            k = self.num_correct[self.num_samples == n]
            out[int(n)] = KHistogram(int(n), np.bincount(k, minlength=int(n) + 1))
        return out


def as_reader_pool(data: Any, name: str = "pool") -> ReaderPool:
    """A :class:`ReaderPool` from a ReaderPool, a :class:`SolveCounts` or a :class:`KHistogram`."""
    if isinstance(data, ReaderPool):
        return data
    if isinstance(data, SolveCounts):
        k, n = data.num_correct, data.num_rollouts
        return _counts_pool(data.name, k, np.full(k.shape, n, dtype=np.int64))
    if isinstance(data, KHistogram):
        k = np.repeat(np.arange(data.num_rollouts + 1), np.asarray(data.counts, dtype=np.int64))
        return _counts_pool(name, k, np.full(k.shape, data.num_rollouts, dtype=np.int64))
    raise TypeError(
        "counts must be a ReaderPool (load_reader_pool reads one from a file), a SolveCounts or a KHistogram; "
        f"got {type(data).__name__}."
    )


def _counts_pool(name: str, k: np.ndarray, n: np.ndarray, kind: str = "counts", limits=()) -> ReaderPool:
    if k.size == 0:
        raise ReaderDataError(f"{name} holds no prompts; pass a table with one row per prompt.")
    k, n = k.astype(np.int64), n.astype(np.int64)
    return ReaderPool(name, k / n, k, n, kind, tuple(limits))


def load_reader_pool(
    source: str | os.PathLike,
    correct: str = "correct",
    samples: str | int = "samples",
    pass_rate: str | None = None,
    config: str | None = None,
    split: str = "train",
) -> ReaderPool:
    """A reader's per-prompt solve-rate table as a :class:`ReaderPool`.

    ``source``: a .csv, .parquet or .jsonl file, or a hub dataset id (``config`` and ``split`` go to
    ``datasets.load_dataset``). Counts: column ``correct`` (successes) and ``samples`` (a column
    name, or one whole number n for every prompt). With ``pass_rate`` (a column of p in [0, 1]) the
    counts are k = p·n when n is known (``samples`` a number or a column of the table), and unknown
    otherwise.
    """
    table, name = read_reader_table(source, config, split)
    for option, value in (("correct", correct), ("pass_rate", pass_rate)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{option} must be a column name (a string); got {type(value).__name__}.")
    fixed_n = _fixed_samples(samples, table)
    if table.num_rows == 0:
        raise ReaderDataError(f"{name} holds no rows; pass a table with one row per prompt.")
    if pass_rate is not None:
        return _rates_pool(table, name, pass_rate, samples, fixed_n)
    if correct not in table.column_names:
        raise _missing(
            name, correct, table, "name the column of successes with --correct NAME, or give --pass-rate NAME"
        )
    k = _whole_column(table, name, correct, "--correct")
    n = np.full(k.shape, fixed_n) if fixed_n is not None else _samples_column(table, name, samples)
    _check_counts(name, k, n, correct, samples)
    return _counts_pool(name, k, n)


def _fixed_samples(samples: Any, table) -> int | None:
    """``samples`` as one n for every prompt (a number, or a numeric string that names no column), or None."""
    if isinstance(samples, bool) or not isinstance(samples, (str, int, np.integer)):
        raise TypeError(f"samples must be a column name or a whole number; got {type(samples).__name__}.")
    if isinstance(samples, str):
        if samples in table.column_names or not samples.strip().isdigit():
            return None
        samples = int(samples)
    if samples < 1:
        raise ReaderDataError(f"--samples {samples}: n must be at least 1 sample per prompt; give the number you drew.")
    return int(samples)


def _rates_pool(table, name: str, pass_rate: str, samples: Any, fixed_n: int | None) -> ReaderPool:
    if pass_rate not in table.column_names:
        raise _missing(name, pass_rate, table, "name the column of pass rates with --pass-rate NAME")
    p = _numeric_column(table, name, pass_rate, "--pass-rate")
    bad = np.flatnonzero((p < 0) | (p > 1))
    if bad.size:
        raise ReaderDataError(
            f"{name}: column {pass_rate!r} must hold pass rates in [0, 1]; row {bad[0] + 1} holds {float(p[bad[0]])!r}. "
            "If it holds counts of successes, pass it as --correct instead."
        )
    if fixed_n is None and samples not in table.column_names:
        if samples != "samples":
            raise _missing(name, samples, table, "give --samples N (a number) or the column of samples per prompt")
        limit = (
            "the number of samples per prompt is unknown (a pass-rate column without --samples): the closed "
            "forms use p as the solve rate, and the subsampled silent fraction cannot be computed"
        )
        return ReaderPool(name, p, None, None, "pass rates", (limit,))
    n = np.full(p.shape, fixed_n) if fixed_n is not None else _samples_column(table, name, samples)
    scaled = p * n
    k = np.round(scaled)
    off = np.flatnonzero(np.abs(scaled - k) > 1e-6 * np.maximum(1.0, n))
    if off.size:
        i = off[0]
        raise ReaderDataError(
            f"{name}: column {pass_rate!r} is not a multiple of 1/n: row {i + 1} holds {float(p[i])!r}, and "
            f"{float(p[i])!r} × {int(n[i])} = {scaled[i]:.4g} is not a whole number of successes; give the right "
            "--samples, or leave --samples out to treat n as unknown."
        )
    return _counts_pool(name, k, n, "pass rates")


def _samples_column(table, name: str, samples: str) -> np.ndarray:
    if samples not in table.column_names:
        raise _missing(
            name, samples, table, "name the column of samples per prompt with --samples NAME, or give a number"
        )
    n = _whole_column(table, name, samples, "--samples")
    zero = np.flatnonzero(n < 1)
    if zero.size:
        raise ReaderDataError(
            f"{name}: column {samples!r} must be at least 1 (samples drawn per prompt); row {zero[0] + 1} holds "
            f"{int(n[zero[0]])}. Drop the prompts that were never sampled."
        )
    return n


def _check_counts(name: str, k: np.ndarray, n: np.ndarray, correct: str, samples: Any) -> None:
    over = np.flatnonzero(k > n)
    if over.size:
        i = over[0]
        where = f"column {samples!r}" if isinstance(samples, str) and not samples.strip().isdigit() else "--samples"
        raise ReaderDataError(
            f"{name}: row {i + 1} has {correct} = {int(k[i])} > {int(n[i])} samples ({where}); {correct} must count "
            "successes among the samples: check that --correct and --samples name the right columns."
        )


def _missing(name: str, column: str, table, fix: str) -> ReaderDataError:
    have = ", ".join(repr(c) for c in table.column_names[:12]) + (" ..." if len(table.column_names) > 12 else "")
    return ReaderDataError(f"{name} has no column {column!r} (it has {have}); {fix}.")


def _numeric_column(table, name: str, column: str, option: str) -> np.ndarray:
    """A column as float64, refusing text, booleans, nested values, nulls and NaN with the row that holds one."""
    import pyarrow.types as patypes

    values = table.column(column)
    if patypes.is_boolean(values.type) or not (
        patypes.is_integer(values.type) or patypes.is_floating(values.type) or patypes.is_null(values.type)
    ):
        first = next((v for v in values.to_pylist() if v is not None), None)
        raise ReaderDataError(
            f"{name}: column {column!r} holds {values.type} values such as {first!r:.30}, not numbers; "
            f"name a numeric column with {option}."
        )
    arr = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise ReaderDataError(
            f"{name}: column {column!r} is empty, NaN or infinite in row {bad[0] + 1} ({bad.size} row(s) in all); "
            "drop those prompts or fill them in."
        )
    return arr


def _whole_column(table, name: str, column: str, option: str) -> np.ndarray:
    arr = _numeric_column(table, name, column, option)
    negative = np.flatnonzero(arr < 0)
    if negative.size:
        raise ReaderDataError(
            f"{name}: column {column!r} must be >= 0 (a count); row {negative[0] + 1} holds {arr[negative[0]]:g}. "
            f"Check that {option} names a column of counts."
        )
    fractional = np.flatnonzero(arr != np.round(arr))
    if fractional.size:
        i = fractional[0]
        raise ReaderDataError(
            f"{name}: column {column!r} must hold whole counts; row {i + 1} holds {arr[i]:g}. If it holds pass "
            "rates, pass it as --pass-rate (with --samples N) instead."
        )
    if arr.size and arr.max() > 2**53:
        raise ReaderDataError(f"{name}: column {column!r} holds counts above 2**53, beyond exact float64 counts.")
    return arr.astype(np.int64)


def read_reader_table(source: str | os.PathLike, config: str | None = None, split: str = "train"):
    """``(pyarrow.Table, name)`` for a .csv, .parquet or .jsonl file or a hub dataset id; a
    :class:`ReaderDataError` naming the file and the fix when it cannot be read as a table."""
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
        raise ReaderDataError(f"{name} is a folder; pass {_FORMATS}.")
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
