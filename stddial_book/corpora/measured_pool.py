"""The table of a measured pool, as ``python -m stddial_book measure`` writes it (``pool.csv``).

One row per prompt: ``prompt_id``, ``correct`` (k, the count the chosen verifier accepts) and ``samples`` (n),
the columns :mod:`stddial_book.corpora.reader_pool` reads for ``diagnose``; then, where the measurement
counted every verifier on the same completions, one column per verifier, ``correct_<verifier>`` with the
verifier's hyphens as underscores (``correct_math_verify``, ``correct_last_number``). The writer
(:mod:`stddial_book.bridges.lm_measure`) and the readers (the SmolLM2 study) share these names from here.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from typing import Any

__all__ = ["MEASURE_COLUMNS", "verifier_column", "pool_table_text", "read_pool_table"]

MEASURE_COLUMNS = ("prompt_id", "correct", "samples")
_PREFIX = "correct_"


def verifier_column(verifier: str) -> str:
    """The column that holds ``verifier``'s count: ``correct_`` and its name with ``-`` as ``_``."""
    return _PREFIX + verifier.replace("-", "_")


def pool_table_text(rows: Sequence[dict[str, Any]], verifiers: Sequence[str] = ()) -> str:
    """The CSV text of ``rows`` (dicts with ``prompt_id``, ``correct``, ``samples`` and, when ``verifiers`` is
    given, ``correct_by``: each verifier's count), one column per verifier after the three; a ``prompt_id``
    holding a comma is quoted."""
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow([*MEASURE_COLUMNS, *(verifier_column(v) for v in verifiers)])
    writer.writerows(
        [r["prompt_id"], r["correct"], r["samples"], *(r["correct_by"][v] for v in verifiers)] for r in rows
    )
    return table.getvalue()


def read_pool_table(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a ``pool.csv`` (``path``): ``prompt_id`` (text), ``correct`` and ``samples`` (whole numbers),
    and ``correct_by`` (verifier name to count) when the table has per-verifier columns (a table without them,
    as the first SmolLM2 recording wrote, gives rows without it). A ValueError naming the file when a column
    is missing or a count is not a whole number. Verifier names are read back with hyphens (``correct_math_verify``
    is ``math-verify``), as the book's verifiers are named."""
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in MEASURE_COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path} lacks the column(s) {missing}; it is not a table `measure` wrote.")
        by = {c: c.removeprefix(_PREFIX).replace("_", "-") for c in reader.fieldnames or () if c.startswith(_PREFIX)}
        rows = []
        for line, r in enumerate(reader, start=2):
            try:
                row: dict[str, Any] = {
                    "prompt_id": r["prompt_id"],
                    "correct": int(r["correct"]),
                    "samples": int(r["samples"]),
                }
                if by:
                    row["correct_by"] = {name: int(r[column]) for column, name in by.items()}
            except (TypeError, ValueError):
                raise ValueError(
                    f"{path}, line {line}: a count is not a whole number; re-measure with `measure`."
                ) from None
            rows.append(row)
    return rows
