"""A reader's own solve-rate data as a pool of prompts: what ``python -m stddial_book diagnose`` reads.

A table in CSV, Parquet or JSONL (or a Hugging Face dataset id, read with ``datasets.load_dataset``,
or a folder of Parquet files such as TRL's ``completions/`` log), with either one row per completion
(a prompt column and a 0/1 reward or correctness column: TRL's completion logs, evaluation harnesses'
sample logs; the rows are grouped per prompt into k of n) or one row per prompt, holding either

- counts: ``correct`` successes of ``samples`` rollouts (column names configurable; ``samples`` may
  also be one whole number for every prompt), or
- a pass rate p in [0, 1] per prompt, with the number of samples n given (a number or a column) or
  unknown. Without n the closed forms still apply with p as the solve rate, but the subsampled silent
  fraction (G of the n stored samples) cannot be computed; :attr:`ReaderPool.limits` says so.

Every refusal is a :class:`ReaderDataError` (a ``ValueError``) whose one line names the file, the
column and the fix.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from stddial_book.core.checks import printable
from stddial_book.corpora.histograms import KHistogram, SolveCounts
from stddial_book.corpora.reader_files import ReaderDataError, read_reader_table

__all__ = [
    "ReaderPool",
    "load_reader_pool",
    "as_reader_pool",
    "PROMPT_ID_COLUMNS",
    "REWARD_COLUMNS",
    "ROW_LAYOUTS",
]


#: Columns that name a prompt, looked for in this order when ``prompt`` is not given.
PROMPT_ID_COLUMNS = ("prompt_id", "id", "uid", "prompt", "problem", "question")

#: Columns of a per-completion table that hold its 0/1 reward, looked for in this order when ``reward`` is not given.
REWARD_COLUMNS = ("correct", "is_correct", "correctness", "reward", "accuracy")

#: What one row of a table is: ``auto`` decides from the columns (see :func:`load_reader_pool`).
ROW_LAYOUTS = ("auto", "prompts", "completions")

#: Columns of TRL's completion log that are never a reward (``GRPOTrainer.log``: step, prompt, completion,
#: one column per reward function, extra columns, advantage).
_NOT_REWARDS = ("step", "prompt", "completion", "advantage", "sample_idx", "sample", "samples")


@dataclass(frozen=True)
class ReaderPool:
    """One entry per prompt: its solve rate p, and when known its k successes of n samples.

    ``name`` names the pool (the file or dataset read); ``solve_rates`` holds each prompt's p in [0, 1];
    ``num_correct`` and ``num_samples`` its k and n (None when unknown, as for bare pass rates); ``kind``
    says what the table held (``"counts"``, ``"pass rates"`` or completions grouped per prompt);
    ``limits`` holds sentences saying what the data cannot give or left out (none by default);
    ``prompt_ids`` holds one id per prompt, from the column ``id_column`` (both None when the table has
    none); ``warnings`` holds what the reader should check, such as ids that repeat (none by default).
    """

    name: str
    solve_rates: np.ndarray
    num_correct: np.ndarray | None = None  # k per prompt, None when only pass rates were given
    num_samples: np.ndarray | None = None  # n per prompt, None when unknown
    kind: str = "counts"  # "counts", "pass rates" or "completions grouped per prompt"
    limits: tuple[str, ...] = ()
    prompt_ids: list | None = None  # one id per prompt (the prompt column's values), None when the table has none
    id_column: str | None = None  # the column the ids came from
    warnings: tuple[str, ...] = ()  # what the reader should check (ids that repeat in a per-prompt table)

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
    """A :class:`ReaderPool` from a ReaderPool, a :class:`SolveCounts` or a :class:`KHistogram`.

    ``data`` is one of those three (a ReaderPool is returned as it is); ``name`` names the pool made of a
    :class:`~stddial_book.corpora.histograms.KHistogram`, which has no name of its own (``"pool"`` by default).
    """
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
    *,
    rows: str = "auto",
    prompt: str | None = None,
    reward: str | None = None,
) -> ReaderPool:
    """A reader's solve-rate table as a :class:`ReaderPool`, one entry per prompt, with its id.

    ``source``: a .csv, .parquet or .jsonl file, a folder of .parquet files (TRL's ``completions/``
    log, one file per logged step), or a hub dataset id (``config`` and ``split`` go to
    ``datasets.load_dataset``). ``prompt`` names the column that names each prompt (default: the
    first of :data:`PROMPT_ID_COLUMNS` present); its values are kept as ``prompt_ids``.

    ``rows`` says what one row is. ``"completions"``: one row per completion, grouped per prompt
    into k correct of n; ``reward`` names the 0/1 (or ±1) reward or correctness column (default:
    ``correct`` when named, else the first of :data:`REWARD_COLUMNS`, else the one reward column of
    a TRL log that holds only 0 and 1); a row with no reward (None or NaN) is left out and said so.
    ``"prompts"``: counts, column ``correct`` (successes) and ``samples`` (a column name, or one
    whole number n for every prompt); with ``pass_rate`` (a column of p in [0, 1]) the counts are
    k = p·n when n is known, unknown otherwise; ids that repeat are read row by row, with a
    warning (refused where every row holds one sample: those rows are completions). ``"auto"``:
    prompts when ``pass_rate`` is given or the ``samples`` column (or number) is there, completions
    when ``reward`` is given, the table has a ``completion`` column, or the prompt ids repeat.
    """
    table, name = read_reader_table(source, config, split)
    for option, value in (("correct", correct), ("pass_rate", pass_rate), ("prompt", prompt), ("reward", reward)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{option} must be a column name (a string); got {type(value).__name__}.")
    if rows not in ROW_LAYOUTS:
        raise ReaderDataError(f"--rows {printable(str(rows))[:40]}: choose one of {', '.join(ROW_LAYOUTS)}.")
    if table.num_rows == 0:
        raise ReaderDataError(f"{name} holds no rows; pass a table with one row per prompt or per completion.")
    id_column = _id_column(table, name, prompt)
    layout = rows if rows != "auto" else _layout(table, samples, pass_rate, reward, id_column)
    if layout == "completions":
        if pass_rate is not None:
            raise ReaderDataError(
                f"{name}: --pass-rate reads one row per prompt; leave it out to group the completions per prompt."
            )
        column = reward if reward is not None else _reward_column(table, name, correct, id_column)
        return _completions_pool(table, name, id_column, column)
    fixed_n = _fixed_samples(samples, table)
    if pass_rate is not None:
        pool = _rates_pool(table, name, pass_rate, samples, fixed_n)
    else:
        if correct not in table.column_names:
            raise _missing(
                name, correct, table, "name the column of successes with --correct NAME, or give --pass-rate NAME"
            )
        k = _whole_column(table, name, correct, "--correct")
        n = np.full(k.shape, fixed_n) if fixed_n is not None else _samples_column(table, name, samples)
        _check_counts(name, k, n, correct, samples)
        pool = _counts_pool(name, k, n)
    return _with_ids(pool, table, name, id_column)


def _id_column(table, name: str, prompt: str | None) -> str | None:
    """The column that names each prompt: ``prompt`` (which must exist), else the first of :data:`PROMPT_ID_COLUMNS`."""
    if prompt is not None:
        if prompt not in table.column_names:
            raise _missing(name, prompt, table, "name the column that names each prompt with --prompt COL")
        return prompt
    return next((c for c in PROMPT_ID_COLUMNS if c in table.column_names), None)


def _layout(table, samples: Any, pass_rate: str | None, reward: str | None, id_column: str | None) -> str:
    """``"prompts"`` or ``"completions"``, for ``rows="auto"`` (see :func:`load_reader_pool`)."""
    if pass_rate is not None:
        return "prompts"
    if reward is not None:
        return "completions"
    names = table.column_names
    if not isinstance(samples, str) or samples in names or samples.strip().isdigit():
        return "prompts"
    if "completion" in names:
        return "completions"
    if id_column is not None and _distinct(table.column(id_column)) < table.num_rows:
        return "completions"
    return "prompts"


def _keys(column):
    """``(keys, nested)``: the column as a flat array to group by; nested values (TRL's conversational
    prompts, lists of messages) as their JSON text, with ``nested`` True."""
    import pyarrow as pa
    import pyarrow.types as patypes

    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if patypes.is_dictionary(values.type):
        values = values.dictionary_decode()
    if patypes.is_nested(values.type):
        text = [None if v is None else json.dumps(v, sort_keys=True, ensure_ascii=False) for v in values.to_pylist()]
        return pa.array(text, pa.string()), True
    return values, False


def _distinct(column) -> int:
    import pyarrow.compute as pc

    return int(pc.count_distinct(_keys(column)[0], mode="all").as_py())


def _with_ids(pool: ReaderPool, table, name: str, id_column: str | None) -> ReaderPool:
    """``pool`` with its prompts' ids; a warning where ids repeat, a refusal where the rows are completions."""
    if id_column is None:
        return pool
    ids = table.column(id_column).to_pylist()
    distinct = _distinct(table.column(id_column))
    if distinct == len(ids):
        return replace(pool, prompt_ids=ids, id_column=id_column)
    if pool.num_samples is not None and np.all(pool.num_samples == 1):
        raise ReaderDataError(
            f"{name}: column {id_column!r} names {distinct:,} prompts in {len(ids):,} rows of one sample each: "
            "these rows look like completions; leave out --samples (or pass --rows completions) to group them per prompt."
        )
    warning = (
        f"column {id_column!r} names {distinct:,} prompts in {len(ids):,} rows; each row is read as one prompt "
        "(a repeated prompt counts once per row). If the rows are parts of one prompt's samples, add up each "
        "prompt's successes and samples into one row."
    )
    return replace(pool, prompt_ids=ids, id_column=id_column, warnings=(warning,))


def _reward_column(table, name: str, correct: str, id_column: str | None) -> str:
    """The 0/1 reward column of a per-completion table when ``reward`` is not given (see :func:`load_reader_pool`)."""
    names = table.column_names
    if correct != "correct":
        if correct not in names:
            raise _missing(name, correct, table, "name the 0/1 reward column of each completion with --reward COL")
        return correct
    found = next((c for c in REWARD_COLUMNS if c in names), None)
    if found is not None:
        return found
    others = [c for c in names if c not in _NOT_REWARDS and c != id_column and _is_numeric(table.column(c).type)]
    binary = [c for c in others if _two_valued(table.column(c))]
    if len(binary) == 1:
        return binary[0]
    listed = ", ".join(repr(c) for c in (binary or others)[:8])
    if binary:
        raise ReaderDataError(
            f"{name}: columns {listed} all hold 0/1 rewards; name the correctness one with --reward COL."
        )
    if others:
        raise ReaderDataError(
            f"{name}: no reward column holds only 0 and 1 (it has {listed}); diagnose counts correct completions: "
            "name a 0/1 correctness reward with --reward COL (in TRL, a reward function returning 1.0 or 0.0)."
        )
    raise _missing(name, "correct", table, "name the 0/1 reward column of each completion with --reward COL")


def _is_numeric(kind) -> bool:
    import pyarrow.types as patypes

    return patypes.is_integer(kind) or patypes.is_floating(kind) or patypes.is_boolean(kind)


def _two_valued(column) -> bool:
    """Whether the column's values (nulls and NaN aside) are 0 and 1, or −1 and 1."""
    import pyarrow.compute as pc

    levels = np.asarray(pc.unique(pc.drop_null(column)).to_numpy(zero_copy_only=False), dtype=np.float64)
    levels = set(levels[~np.isnan(levels)].tolist())
    return bool(levels) and (levels <= {0.0, 1.0} or levels <= {-1.0, 1.0})


def _reward_values(table, name: str, column: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(correct, missing, notes)`` per row of a reward column: 0/1 (or ±1, 1 = correct), None/NaN missing."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = table.column(column)
    if not _is_numeric(values.type) and not pa.types.is_null(values.type):
        first = next((v for v in values.to_pylist() if v is not None), None)
        raise ReaderDataError(
            f"{name}: column {column!r} holds {values.type} values such as {first!r:.30}, not rewards; "
            "name the 0/1 reward column of each completion with --reward COL."
        )
    if pa.types.is_boolean(values.type):
        values = pc.cast(values, pa.int8())
    arr = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)
    missing = np.isnan(arr)
    levels = set(np.unique(arr[~missing]).tolist())
    if levels <= {0.0, 1.0}:
        return arr == 1.0, missing, []
    if levels <= {-1.0, 1.0}:
        return arr == 1.0, missing, [f"column {column!r} holds rewards of ±1: 1 is read as correct, −1 as wrong"]
    bad = int(np.flatnonzero(~missing & (arr != 0.0) & (arr != 1.0))[0])
    raise ReaderDataError(
        f"{name}: column {column!r} holds {arr[bad]:g} in row {bad + 1}, not a 0/1 reward; diagnose counts correct "
        "completions: name a 0/1 correctness column with --reward COL, or threshold the reward into one first."
    )


def _completions_pool(table, name: str, id_column: str | None, column: str) -> ReaderPool:
    """One row per completion, grouped per prompt (in order of first appearance): k correct of n."""
    if id_column is None:
        raise ReaderDataError(
            f"{name}: no column names the prompt of each completion (looked for {', '.join(PROMPT_ID_COLUMNS)}); "
            "name it with --prompt COL."
        )
    if column not in table.column_names:
        raise _missing(name, column, table, "name the 0/1 reward column of each completion with --reward COL")
    correct, missing, limits = _reward_values(table, name, column)
    keys, nested = _keys(table.column(id_column))
    if keys.null_count:
        row = int(np.flatnonzero(np.asarray(keys.is_null().to_numpy(zero_copy_only=False)))[0])
        raise ReaderDataError(
            f"{name}: column {id_column!r} is empty in row {row + 1}; every completion needs its prompt: drop "
            "that row or fill it in."
        )
    encoded = keys.dictionary_encode()
    index = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)[~missing]
    ids = encoded.dictionary.to_pylist()
    n = np.bincount(index, minlength=len(ids))
    k = np.rint(np.bincount(index, weights=correct[~missing], minlength=len(ids))).astype(np.int64)
    keep = n > 0
    if not keep.any():
        raise ReaderDataError(
            f"{name}: column {column!r} holds no reward in any row; name the reward with --reward COL."
        )
    if missing.any():
        limits.append(
            f"{int(missing.sum()):,} completions have no reward (empty or NaN: the reward function returned None) "
            "and were left out" + (f", and with them {int((~keep).sum()):,} prompts" if not keep.all() else "")
        )
    limits += _step_note(table)
    ids = [json.loads(v) if nested else v for v, kept in zip(ids, keep) if kept]
    kind = f"{int(n.sum()):,} completions grouped per prompt (prompt column {id_column!r}, reward {column!r})"
    pool = _counts_pool(name, k[keep], n[keep], kind, limits)
    return replace(pool, prompt_ids=ids, id_column=id_column)


def _step_note(table) -> list[str]:
    """A limit where a completion log spans several training steps (TRL's ``step`` column)."""
    if "step" not in table.column_names or not _is_numeric(table.column("step").type):
        return []
    steps = np.asarray(table.column("step").to_numpy(zero_copy_only=False), dtype=np.float64)
    steps = steps[~np.isnan(steps)]
    if np.unique(steps).size < 2:
        return []
    return [
        f"the completions come from {np.unique(steps).size} logged steps ({steps.min():g} to {steps.max():g}): a "
        "prompt's samples pool completions of the policy at different steps"
    ]


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
            name,
            samples,
            table,
            "name the column of samples per prompt with --samples NAME, or give a number; if each row is one "
            "completion, pass --rows completions to group them per prompt",
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
