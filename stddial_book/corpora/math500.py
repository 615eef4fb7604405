"""MATH-500 solve counts from five sampling runs of 256 samples per problem (chapter 16).

The file ``rhow_counts.json`` holds, for each of the 500 MATH-500 problems (Hendrycks et al., 2021;
the 500-problem test subset of Lightman et al., 2023), how many of 256 samples of
Llama-3.2-1B-Instruct at temperature 0.8 were graded correct by ``math-verify``, in each of five
independent runs (seeds 0-4), as the public best-of-N release
``HuggingFaceH4/Llama-3.2-1B-Instruct-best-of-N-completions`` gives them; the file comes from the
repository of Bay and Yearick's companion paper ("When more sampling hurts", arXiv 2606.28661).

The book does not ship the file: its licence is not stated. It is read from the shared data folder
beside the checkout (``../shared/data/math500-best-of-n/``) or wherever ``STDDIAL_SHARED_DATA``
points, the same place the tests look (tests/conftest.py), or from any path given. The schema:

``counts``
    one list per problem: correct samples in each run (whole numbers);
``ns``
    the same shape: samples drawn in each run (256);
``uids``
    one MATH-500 id per problem, such as ``test/algebra/1004.json``.

:func:`load_math500` sums the chosen runs into one :class:`~stddial_book.corpora.histograms.SolveCounts`
(k of n per problem, n = 256 × runs), the object every other pool of the book is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stddial_book.corpora.histograms import SolveCounts

__all__ = ["MATH500_FILE", "Math500DataError", "math500_path", "math500_available", "load_math500"]

#: The file's place under the shared folder's ``data/``.
MATH500_FILE = ("math500-best-of-n", "rhow_counts.json")

_SHARED_ENV = "STDDIAL_SHARED_DATA"

_FIX = (
    "pass the rhow_counts.json of the math500-best-of-n data folder (see its SOURCE.md), or set "
    f"{_SHARED_ENV} to the folder that holds data/math500-best-of-n/"
)


class Math500DataError(ValueError):
    """The MATH-500 counts file is missing or not of its schema; the one-line message names the file and the fix."""


def math500_path() -> Path:
    """Where the MATH-500 counts are looked for: ``$STDDIAL_SHARED_DATA/data/...`` if the variable is set, else
    the ``shared`` folder beside the checkout (which a clone of the public repository does not have)."""
    configured = os.environ.get(_SHARED_ENV)
    root = Path(configured).expanduser() if configured else Path(__file__).resolve().parents[3] / "shared"
    return root.joinpath("data", *MATH500_FILE)


def math500_available(path: str | os.PathLike | None = None) -> bool:
    """Whether the counts file exists (at ``path``, or at :func:`math500_path` when ``path`` is None, the
    default); a chapter leaves MATH-500 out when not."""
    return (math500_path() if path is None else Path(path)).is_file()


def _read_json(path: Path) -> dict[str, Any]:
    """The file's top-level object, or a :class:`Math500DataError` naming the file and the fix."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise Math500DataError(f"{path} is missing; {_FIX}.") from None
    except (OSError, UnicodeDecodeError) as err:
        raise Math500DataError(f"{path} cannot be read ({err}); {_FIX}.") from None
    try:
        data = json.loads(text)
    except ValueError as err:
        raise Math500DataError(f"{path} is not valid JSON ({' '.join(str(err).split())}); {_FIX}.") from None
    if not isinstance(data, dict):
        raise Math500DataError(f"{path} must hold one JSON object with counts, ns and uids; {_FIX}.")
    return data


def _whole_table(path: Path, data: dict[str, Any], key: str) -> np.ndarray:
    """``data[key]`` as a (problems, runs) array of whole numbers >= 0."""
    if key not in data:
        raise Math500DataError(f"{path} has no {key!r} field (it needs counts, ns and uids); {_FIX}.")
    rows = data[key]
    if not isinstance(rows, list) or not rows or not all(isinstance(r, list) and r for r in rows):
        raise Math500DataError(f"{path}: {key} must be a non-empty list of per-run lists, one per problem; {_FIX}.")
    if len({len(r) for r in rows}) != 1:
        raise Math500DataError(f"{path}: every problem's {key} must list the same number of runs; {_FIX}.")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for r in rows for v in r):
        raise Math500DataError(f"{path}: {key} must hold whole numbers >= 0; {_FIX}.")
    return np.array(rows, dtype=np.int64)


def _run_tables(path: Path, data: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The checked (problems, runs) tables of correct samples and samples drawn, and the problem ids."""
    correct, drawn = _whole_table(path, data, "counts"), _whole_table(path, data, "ns")
    if correct.shape != drawn.shape:
        raise Math500DataError(
            f"{path}: counts has shape {correct.shape} but ns {drawn.shape}; they must match, one entry per "
            f"problem and run; {_FIX}."
        )
    if np.any(drawn < 1) or np.any(correct > drawn):
        raise Math500DataError(f"{path}: each run needs ns >= 1 and 0 <= counts <= ns; {_FIX}.")
    uids = data.get("uids")
    if not isinstance(uids, list) or len(uids) != len(correct) or not all(isinstance(u, str) for u in uids):
        raise Math500DataError(f"{path}: uids must list one string id per problem ({len(correct)}); {_FIX}.")
    return correct, drawn, np.array(uids, dtype=object)


def _chosen_runs(runs: Sequence[int] | None, num_runs: int) -> list[int]:
    """The run indices to pool: all by default; otherwise distinct indices in [0, num_runs)."""
    if runs is None:
        return list(range(num_runs))
    if isinstance(runs, (str, bytes)) or not isinstance(runs, Sequence) or len(runs) == 0:
        raise ValueError(f"runs must be a non-empty list of run indices, e.g. (0,) or (0, 1, 2); got {runs!r:.40}.")
    chosen = list(runs)
    if not all(isinstance(r, (int, np.integer)) and not isinstance(r, bool) and 0 <= r < num_runs for r in chosen):
        raise ValueError(f"runs must be whole numbers in [0, {num_runs}); got {chosen!r:.60}.")
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"runs must not repeat a run (a sample would count twice); got {chosen!r:.60}.")
    return [int(r) for r in chosen]


def _subject(uid: str) -> str:
    """The MATH subject of an id such as ``test/algebra/1004.json`` ("algebra"); "" when the id has no folder."""
    parts = uid.split("/")
    return parts[-2] if len(parts) >= 2 else ""


def load_math500(path: str | os.PathLike | None = None, runs: Sequence[int] | None = None) -> SolveCounts:
    """MATH-500's per-problem solve counts as :class:`SolveCounts`: k correct of n samples, summed over ``runs``.

    ``path`` is the ``rhow_counts.json`` file (default: :func:`math500_path`). ``runs`` lists the indices of
    the sampling runs to pool (default all five: n = 1,280 per problem); ``(0,)`` gives one run of 256, the
    size of measurement a reader is likely to make.

    Labels: ``uid`` (the problem's id) and ``subject`` (its MATH subject, from the id).

    Raises:
        Math500DataError: the file is missing, unreadable or not of the schema (one line: the file and the fix).
        ValueError: ``runs`` names no run, a run twice, or one outside the file; the runs pooled give the
            problems different n.
    """
    path = math500_path() if path is None else Path(path)
    correct, drawn, uids = _run_tables(path, _read_json(path))
    chosen = _chosen_runs(runs, correct.shape[1])
    k, n = correct[:, chosen].sum(axis=1), drawn[:, chosen].sum(axis=1)
    if np.any(n != n[0]):
        raise ValueError(
            f"{path}: the chosen runs give the problems different numbers of samples ({n.min()} to {n.max()}); "
            "pick runs with the same ns for every problem."
        )
    subjects = np.array([_subject(u) for u in uids], dtype=object)
    name = f"MATH-500 ({len(chosen)} run{'s' if len(chosen) > 1 else ''} of {drawn[0, chosen[0]]})"
    return SolveCounts(name, k, int(n[0]), labels={"uid": uids, "subject": subjects})
