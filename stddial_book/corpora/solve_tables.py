"""The solve-rate tables of real data: Big-Math and DeepScaleR loaders, the committed tables, and their builder (chapter 7)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stddial_book.core.outdir import check_claimable, claim_dir
from stddial_book.core.resources import data_path, sha256  # sha256: provenance of the derived tables
from stddial_book.corpora.histograms import KHistogram, SolveCounts, read_counts_csv

__all__ = [
    "BIG_MATH_REPO",
    "BIG_MATH_CONFIGS",
    "big_math_histogram",
    "BIG_MATH_COLUMN",
    "BIG_MATH_ROLLOUTS",
    "DEEPSCALER_ROLLOUTS",
    "load_big_math",
    "union_of_deepscaler",
    "build_deepscaler_tables",
    "load_committed_histograms",
    "DEEPSCALER_SOURCE",
]


#: Where the DeepScaleR difficulty files come from (see the provenance JSON beside the tables).
DEEPSCALER_SOURCE = {
    "repository": "https://github.com/uscnlp-lime/verl",
    "commit": "bf2dd7e675b4dca3c0de972544ddd9e7929c8dd9",
    "path": "verl/data/deepscaler_<name>_train.parquet",
    "paper": "Shi et al., 2025, Efficient Reinforcement Finetuning via Adaptive Curriculum Learning (arXiv 2504.05520)",
    "meaning": "k = 128 * (1 - difficulty/100) successes of 128 Qwen2.5-Math-7B samples",
}


DEEPSCALER_TABLE = "deepscaler_k_histograms"
#: What a message about a missing or damaged committed DeepScaleR table tells the reader to do.
TABLES_FIX = (
    "it ships with the repository (data/solve_rates/); rebuild it with python -m stddial_book.corpora.solve_tables "
    "build-tables --shared <folder of the DeepScaleR parquet files>."
)


DEFAULT_DATA_DIR = data_path("solve_rates")  # data/solve_rates/ in the repository, shipped in the package


#: The source paper's Big-Math (Bay and Yearick, 2026, §6): the ungated mirror, config ``all``.
BIG_MATH_REPO = "open-r1/Big-Math-RL-Verified-Processed"


#: Hub datasets of Big-Math's schema, with the config each needs.
BIG_MATH_CONFIGS = {BIG_MATH_REPO: "all", "SynthLabsAI/Big-Math-RL-Verified": None}


BIG_MATH_COLUMN = "llama8b_solve_rate"


BIG_MATH_ROLLOUTS = 64


DEEPSCALER_ROLLOUTS = 128


def _as_path(path: Any, name: str) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or Path); got {type(path).__name__}.")
    return Path(path)


def _read_parquet(path: str | os.PathLike, columns: list[str] | None = None):
    """A parquet file as a pyarrow table; ``ValueError`` naming the file when it is missing or not parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = _as_path(path, "path")
    if not path.is_file():
        raise ValueError(f"{path} does not exist (or is not a file); pass the path of a parquet file.")
    try:
        return pq.read_table(path, columns=columns)
    except (pa.ArrowException, OSError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(
            f"{path} could not be read as a parquet file ({reason:.120}); pass an intact parquet "
            "file (download or copy it again)."
        ) from None


def load_big_math(source: str | os.PathLike | None = None, config: str | None = None) -> SolveCounts:
    """Big-Math's per-problem solve counts: k = round(64 · llama8b_solve_rate).

    ``source`` is a hub dataset id or a local parquet file of the dataset's schema (columns
    ``llama8b_solve_rate``, and ``source`` and ``domain`` when present; ``domain`` is a list of
    strings per problem). ``None`` means the source paper's dataset,
    ``open-r1/Big-Math-RL-Verified-Processed`` (config ``all``, N = 215,608); the original
    ``SynthLabsAI/Big-Math-RL-Verified`` (about 251k rows, some without a solve rate) works too.
    Hub datasets are read with ``datasets.load_dataset``, which fails at once offline with a
    message naming the alternatives. Rows whose solve rate is null are counted in
    ``num_missing`` and excluded. ``config`` is the hub dataset's configuration (None, the default:
    the one :data:`BIG_MATH_CONFIGS` gives for it); a local file ignores it. (Bay and Yearick, 2026,
    §6; chapter 7.)
    """
    source = BIG_MATH_REPO if source is None else source
    _as_path(source, "source")
    if config is not None and not isinstance(config, str):
        raise TypeError(
            f"config must be a dataset config name (a string such as 'all') or None; got {type(config).__name__}."
        )
    if Path(source).suffix == ".parquet" or Path(source).is_file():
        if not Path(source).is_file():
            raise ValueError(f"{source} does not exist; pass a parquet file of Big-Math's schema or a hub dataset id.")
        return _big_math_counts(_read_parquet(source), str(source))
    return _big_math_counts(
        _load_hub_table(str(source), config if config is not None else BIG_MATH_CONFIGS.get(str(source))), str(source)
    )


def _load_hub_table(repo: str, config: str | None):
    """A hub dataset's train split as a pyarrow table, through ``datasets.load_dataset``."""
    from stddial_book.core.hub import hub_unavailable_reason

    reason = hub_unavailable_reason()
    if reason is not None:
        raise RuntimeError(
            f"cannot fetch {repo}: {reason}. Pass a local parquet file of its schema to load_big_math(path), "
            "or use the committed histogram (stddial_book.corpora.solve_tables.big_math_histogram)."
        )
    import datasets

    dataset = datasets.load_dataset(repo, config, split="train")
    return dataset.with_format("arrow")[:]


def _big_math_counts(table, name: str) -> SolveCounts:
    if BIG_MATH_COLUMN not in table.column_names:
        raise ValueError(
            f"{name} has no {BIG_MATH_COLUMN!r} column (it has {table.column_names}); pass a "
            f"parquet file or dataset of {BIG_MATH_REPO}'s schema."
        )
    import pyarrow.types as patypes

    column = table.column(BIG_MATH_COLUMN)
    if patypes.is_boolean(column.type):
        raise ValueError(
            f"{name}: column {BIG_MATH_COLUMN!r} holds booleans, not solve rates (True/False would be read "
            f"as rates 1 and 0); pass the dataset's own column of rates k/{BIG_MATH_ROLLOUTS} in [0, 1]."
        )
    if not (patypes.is_floating(column.type) or patypes.is_integer(column.type) or patypes.is_null(column.type)):
        raise ValueError(
            f"{name}: column {BIG_MATH_COLUMN!r} is of type {column.type}, not numeric solve rates; pass the "
            f"dataset's own column of rates k/{BIG_MATH_ROLLOUTS} (floats in [0, 1])."
        )
    all_rates = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)
    missing = np.isnan(all_rates)
    present = np.flatnonzero(~missing)
    rates = all_rates[present]
    if rates.size == 0:
        raise ValueError(
            f"{name}: column {BIG_MATH_COLUMN!r} holds no solve rate ({len(all_rates)} rows, all null); "
            "pass a file or dataset of Big-Math's schema with its rates filled in."
        )
    outside = np.flatnonzero((rates < 0) | (rates > 1))
    if outside.size:
        row = int(present[outside[0]])
        raise ValueError(
            f"{name}: {BIG_MATH_COLUMN} must lie in [0, 1] (a solve rate k/{BIG_MATH_ROLLOUTS}); row {row} "
            f"holds {float(rates[outside[0]])!r}. If the column holds counts k, divide them by {BIG_MATH_ROLLOUTS}."
        )
    scaled = rates * BIG_MATH_ROLLOUTS
    k = np.round(scaled)
    off = np.flatnonzero(np.abs(scaled - k) > 1e-6)
    if off.size:
        row = int(present[off[0]])
        raise ValueError(
            f"{name}: {BIG_MATH_COLUMN} must be a multiple of 1/{BIG_MATH_ROLLOUTS} (k successes of "
            f"{BIG_MATH_ROLLOUTS} rollouts), but row {row} holds {float(rates[off[0]])!r} (= {scaled[off[0]]:.4g}/"
            f"{BIG_MATH_ROLLOUTS}) and {off.size} row(s) in all are off the grid; pass the dataset's own "
            f"column, or solve rates from another number of rollouts through SolveCounts directly."
        )
    k = k.astype(np.int64)
    labels = {}
    for column in ("source", "domain"):
        if column in table.column_names:
            values = table.column(column).to_pylist()
            kept = np.empty(int((~missing).sum()), dtype=object)
            kept[:] = [v for v, drop in zip(values, missing) if not drop]
            labels[column] = kept
    return SolveCounts("Big-Math", k, BIG_MATH_ROLLOUTS, labels, num_missing=int(missing.sum()))


def big_math_histogram(use_hub: bool = True) -> tuple[KHistogram, str]:
    """Big-Math's k-of-64 histogram and a sentence saying where it came from.

    With the hub reachable (and ``use_hub``), the source paper's dataset through
    :func:`load_big_math`; otherwise the committed table extracted from the paper's own figure
    (:mod:`stddial_book.corpora.bigmath_figure`), which holds the same 215,608 counts.
    """
    from stddial_book.core.hub import hub_unavailable_reason
    from stddial_book.corpora.bigmath_figure import load_big_math_histogram

    if not isinstance(use_hub, (bool, np.bool_)):
        raise TypeError(f"use_hub must be True or False; got {type(use_hub).__name__}.")
    reason = hub_unavailable_reason() if use_hub else "not asked to use the hub"
    if reason is None:
        return load_big_math().histogram(), f"{BIG_MATH_REPO} (config all), read from the Hugging Face hub"
    return (
        load_big_math_histogram(),
        "the k-of-64 histogram extracted from the source paper's figure (committed with the book; "
        f"the hub was not used: {reason})",
    )


def _deepscaler_rows(path: str | os.PathLike) -> tuple[list[str], np.ndarray]:
    table = _read_parquet(path)
    if "extra_info" not in table.column_names or "prompt" not in table.column_names:
        raise ValueError(
            f"{path} lacks the 'prompt' and 'extra_info' columns of the DeepScaleR difficulty files "
            f"(it has {table.column_names})."
        )
    if table.num_rows == 0:
        raise ValueError(
            f"{path} holds no rows; pass one of the DeepScaleR difficulty files (deepscaler_*_train.parquet)."
        )
    rows = table.select(["prompt", "extra_info"]).to_pylist()
    try:
        raw = [r["extra_info"]["difficulty"] for r in rows]
        texts = [r["prompt"][0]["content"] for r in rows]
        bad = next(
            (
                i
                for i, d in enumerate(raw)
                if isinstance(d, bool) or not isinstance(d, (int, float)) or not np.isfinite(d)
            ),
            None,
        )
        if bad is not None:
            raise ValueError(f"row {bad} has difficulty {raw[bad]!r}, not a number")
        difficulty = np.array(raw, dtype=np.float64)
    except (KeyError, TypeError, IndexError, ValueError) as err:
        raise ValueError(
            f"{path}: extra_info.difficulty or the prompt text is missing or not a number ({err}); pass "
            "one of the DeepScaleR difficulty files (deepscaler_*_train.parquet)."
        ) from None
    k = DEEPSCALER_ROLLOUTS * (1.0 - difficulty / 100.0)
    off = np.flatnonzero((np.abs(k - np.round(k)) > 1e-6) | (k < -1e-6) | (k > DEEPSCALER_ROLLOUTS + 1e-6))
    if off.size:
        raise ValueError(
            f"{path}: difficulty is not 100·(1 − k/128) for an integer k in [0, 128]: row {off[0]} holds "
            f"{float(difficulty[off[0]])!r}; pass one of the DeepScaleR difficulty files."
        )
    return texts, np.round(k).astype(np.int64)


def union_of_deepscaler(paths: Sequence[str | os.PathLike]) -> tuple[SolveCounts, int]:
    """Unique problems (by text) across files, first occurrence kept in the given file order.

    ``paths`` is a non-empty list of DeepScaleR difficulty files (``deepscaler_*_train.parquet``).
    Returns the table and the number of problem texts that appear with more than one k (the
    source dataset holds duplicate problems, measured separately).
    """
    if isinstance(paths, (str, bytes, os.PathLike)) or not isinstance(paths, Sequence):
        raise TypeError(f"paths must be a list of parquet files; got {type(paths).__name__}.")
    if not paths:
        raise ValueError("paths is empty; pass at least one DeepScaleR difficulty file (deepscaler_*_train.parquet).")
    return _union([_deepscaler_rows(path) for path in paths])


def _union(files_rows: Sequence[tuple[list[str], np.ndarray]]) -> tuple[SolveCounts, int]:
    seen: dict[str, int] = {}
    conflicting: set[str] = set()
    for texts, k in files_rows:
        for text, value in zip(texts, k.tolist()):
            if text in seen:
                if seen[text] != value:
                    conflicting.add(text)
            else:
                seen[text] = value
    return (
        SolveCounts("deepscaler_union", np.array(list(seen.values()), dtype=np.int64), DEEPSCALER_ROLLOUTS),
        len(conflicting),
    )


def build_deepscaler_tables(shared_dir: str | os.PathLike, out_dir: str | os.PathLike = DEFAULT_DATA_DIR) -> Path:
    """Write the k-histogram of each DeepScaleR file and of their union, with provenance.

    Output: ``<out_dir>/deepscaler_k_histograms.csv`` (columns table, k, count) and
    ``deepscaler_k_histograms.provenance.json`` (source repository, commit, each file's sha256,
    the command that made them). The raw parquet files are not copied. ``shared_dir`` is the folder
    holding the ``deepscaler_*_train.parquet`` files; ``out_dir`` the folder written to (by default the
    package's ``data/solve_rates``). Returns the CSV's path.
    """
    shared = _as_path(shared_dir, "shared_dir")
    if not shared.is_dir():
        raise ValueError(
            f"{shared} is not a folder; pass the folder holding the deepscaler_*_train.parquet files "
            "(../shared/data/deepscaler-difficulty/)."
        )
    files = sorted(shared.glob("deepscaler_*_train.parquet"))
    if not files:
        raise ValueError(
            f"no deepscaler_*_train.parquet files in {shared}; pass the folder that holds them "
            "(../shared/data/deepscaler-difficulty/)."
        )
    out = check_claimable(_as_path(out_dir, "out_dir"), "--out")  # a reader's folder is refused, before any work
    rows = {f.stem: _deepscaler_rows(f) for f in files}  # each file read once
    out = claim_dir(out, "tables")
    tables = {name: SolveCounts(name, k, DEEPSCALER_ROLLOUTS) for name, (_, k) in rows.items()}
    union, conflicting = _union(list(rows.values()))
    tables["union"] = union
    lines = ["table,k,count"]
    for name, table in tables.items():
        for k, count in enumerate(table.histogram().counts.tolist()):
            lines.append(f"{name},{k},{count}")
    (out / f"{DEEPSCALER_TABLE}.csv").write_text("\n".join(lines) + "\n")
    provenance = {
        "source": DEEPSCALER_SOURCE,
        "files": {f.name: {"sha256": sha256(f), "rows": int(len(tables[f.stem].num_correct))} for f in files},
        "union": {
            "unique_problems": int(len(union.num_correct)),
            "texts_with_several_k": conflicting,
            "rule": "unique problem texts; first occurrence kept, files in name order",
        },
        "made_by": "python -m stddial_book.corpora.solve_tables build-tables --shared <dir with the parquet files>",
        "caveat": "difficulty subsets built by the AdaRFT authors, not a random sample of DeepScaleR",
    }
    (out / f"{DEEPSCALER_TABLE}.provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
    return out / f"{DEEPSCALER_TABLE}.csv"


def load_committed_histograms(data_dir: str | os.PathLike = DEFAULT_DATA_DIR) -> dict[str, KHistogram]:
    """The committed DeepScaleR k-histograms: table name → :class:`KHistogram` (n = 128).

    ``data_dir`` is the folder holding ``deepscaler_k_histograms.csv`` (by default the package's
    ``data/solve_rates``).
    """
    path = _as_path(data_dir, "data_dir") / f"{DEEPSCALER_TABLE}.csv"
    fix = TABLES_FIX
    out: dict[str, list[int]] = {}
    seen: set[tuple[str, int]] = set()
    for row in read_counts_csv(path, ("table", "k", "count"), fix):
        name, k = row["table"], row["k"]
        if not name or k > DEEPSCALER_ROLLOUTS or (name, k) in seen:
            raise ValueError(
                f"{path}: the row ({name!r}, k = {k}) needs a table name and k in 0..{DEEPSCALER_ROLLOUTS}, "
                f"once per table; {fix}"
            )
        seen.add((name, k))
        out.setdefault(name, [0] * (DEEPSCALER_ROLLOUTS + 1))[k] = row["count"]
    return {name: KHistogram(DEEPSCALER_ROLLOUTS, np.array(c)) for name, c in out.items()}


def _main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m stddial_book.corpora.solve_tables", description="Build the committed solve-rate tables."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build-tables", help="k-histograms of the DeepScaleR difficulty files")
    build.add_argument("--shared", required=True, help="folder holding deepscaler_*_train.parquet")
    build.add_argument("--out", default=str(DEFAULT_DATA_DIR), help="where the tables go")
    args = parser.parse_args(argv)
    try:
        print(build_deepscaler_tables(args.shared, args.out))
    except (ValueError, TypeError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    _main()
