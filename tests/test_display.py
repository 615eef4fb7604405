"""glue: the value goes into the book's prose, and is printed wherever the site is not being built."""

from __future__ import annotations

import numpy as np
import pytest

from stddial_book.presentation.display import BOOK_BUILD_ENV, glue, glue_all


def test_glue_prints_the_value_outside_the_book_build(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.delenv(BOOK_BUILD_ENV, raising=False)
    glue("ratio", np.float64(0.123456789))
    assert "ratio = 0.1235" in capsys.readouterr().out


def test_glue_prints_nothing_of_its_own_in_the_book_build(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv(BOOK_BUILD_ENV, "1")
    glue("ratio", 0.5)
    assert "ratio = " not in capsys.readouterr().out


def test_glue_all_glues_every_entry_under_its_prefixed_name(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.delenv(BOOK_BUILD_ENV, raising=False)
    glue_all({"acc": 0.25, "steps": 3}, prefix="g_")
    assert capsys.readouterr().out.splitlines() == ["g_acc = 0.25", "g_steps = 3"]


@pytest.mark.parametrize("values, prefix", [([("a", 1)], ""), ({1: 2}, "g_"), ({"a": 1}, 3), ({"": 1}, "")])
def test_glue_all_refuses_what_is_not_a_mapping_of_names(values, prefix) -> None:
    with pytest.raises(TypeError, match="glue_all"):
        glue_all(values, prefix)
