"""The reproduction page: every numbered result of the source paper, recomputed, agrees at the
paper's rounding (Bay and Yearick, 2026)."""

from __future__ import annotations

import pytest

from stddial_book.corpora.bigmath_figure import load_big_math_histogram
from stddial_book.experiments.controlled import controlled_run_study
from stddial_book.experiments.reproduction import (
    Row,
    controlled_run_rows,
    identity_max_error,
    reproduction_rows,
    rloo_max_error,
)

_HIST = load_big_math_histogram()
ROWS = reproduction_rows(
    dapo_bootstrap=300,
    controlled_run=controlled_run_rows(controlled_run_study(_HIST.solve_rates, _HIST.counts, seeds=5)),
)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.section} {r.quantity}")
def test_row_agrees_with_the_paper(row: Row) -> None:
    if row.expected_to_differ:
        assert not row.agrees, f"{row.quantity} now agrees: drop expected_to_differ and its note"
        assert row.note, "a row that differs must say why"
    else:
        assert row.agrees, f"{row.quantity}: paper {row.paper}, book {row.book}"


def test_rows_cover_the_paper() -> None:
    sections = {r.section.split(",")[0] for r in ROWS}
    assert {"§2", "§3", "§4", "§5", "§6", "§7", "§8"} <= sections
    assert len(ROWS) >= 50


def test_agreement_is_a_real_comparison() -> None:
    assert not Row("x", "y", 0.54, 0.546, 2).agrees and Row("x", "y", 0.54, 0.544, 2).agrees
    # a random result: within two SD over seeds, give or take the paper's rounding
    assert Row("x", "y", 0.88, 0.89, 2, spread=0.003).agrees and not Row("x", "y", 0.88, 0.90, 2, spread=0.003).agrees
    assert identity_max_error(max_group_size=8) < 1e-12 and rloo_max_error(max_group_size=8) < 1e-12
