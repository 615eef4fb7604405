"""glue: the value goes into the book's prose, and is printed wherever the site is not being built; the
phrasings the prose pastes; show_claim shows what SymPy proved."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from stddial_book.presentation.display import (
    BOOK_BUILD_ENV,
    code_list,
    glue,
    glue_all,
    glue_md,
    of_total,
    prose_claim,
    range_in_words,
    show_claim,
    words_list,
)
from stddial_book.theory import derivation as d


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


def test_glue_refuses_backticks_which_glue_text_would_show_literally() -> None:
    with pytest.raises(ValueError, match="glue_md"):
        glue("names", "`scale_std`, `kl_coef`")


def test_glue_md_prints_its_markdown_outside_the_book_build(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.delenv(BOOK_BUILD_ENV, raising=False)
    glue_md("names", code_list(["scale_std", "kl_coef"]))
    assert capsys.readouterr().out.splitlines() == ["names = `scale_std` and `kl_coef`"]
    with pytest.raises(TypeError, match="Markdown text"):
        glue_md("names", 3)


def test_lists_read_as_a_person_writes_them() -> None:
    assert words_list([]) == "" and words_list(["a"]) == "a" and words_list(["a", "b"]) == "a and b"
    assert words_list(["a", "b", "c"], last="or") == "a, b or c"
    assert code_list(["loss_aggregation"]) == "`loss_aggregation`"


@pytest.mark.parametrize(
    "low, high, digits, expected",
    [
        (1.99999, 2.00001, 4, "2 to four decimal places"),  # not "between 2.0000 and 2.0000"
        (2.0, 2.0, 4, "2"),
        (0.25, 0.25, 4, "0.25"),
        (-0.00001, 0.00001, 3, "0 to three decimal places"),  # no "-0.000"
        (0.4, 0.6, 0, "between 0 and 1"),
        (0.6, 0.9, 0, "1 when rounded to a whole number"),
        (1.9, 2.1, 2, "between 1.90 and 2.10"),
    ],
)
def test_a_range_with_equal_ends_reads_as_one_value(low, high, digits, expected) -> None:
    assert range_in_words(low, high, digits) == expected


def test_range_in_words_refuses_a_reversed_or_open_range() -> None:
    with pytest.raises(ValueError, match="low <= high"):
        range_in_words(2.0, 1.0, 2)
    with pytest.raises(ValueError, match="low <= high"):
        range_in_words(0.0, float("nan"), 2)
    with pytest.raises(ValueError, match="digits"):
        range_in_words(0.0, 1.0, -1)


def _shown_claim(monkeypatch: pytest.MonkeyPatch, claim) -> list[str]:
    """What show_claim puts on the page, in order: Markdown text and LaTeX."""
    import IPython.display

    shown: list[str] = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj.data))
    show_claim(claim)
    return shown


def test_show_claim_names_the_statement_and_what_was_simplified(monkeypatch: pytest.MonkeyPatch) -> None:
    claim = d.arcsine_weight_at_half_claim()
    text, equation, proof = _shown_claim(monkeypatch, claim)
    assert claim.statement in text and claim.assumptions in text
    # the left side as built, a derivative evaluated at p = 1/2, not the number it simplifies to
    assert r"\frac{d}{d p}" in equation and "p=\\frac{1}{2}" in equation
    assert "difference of the two sides to $0$" in proof


def test_show_claim_refuses_a_claim_that_shows_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="shows nothing proved"):
        _shown_claim(monkeypatch, d.Claim("two", "two is two", sp.Integer(2), sp.Integer(2)))


def _shown_claims() -> list:
    """Every claim a chapter hands to show_claim (chapters 3, 5 and 6)."""
    claims = [d.explicit_group_term_claim(4, 1, "grpo"), d.explicit_group_term_claim(16, 5, "grpo_bessel")]
    for label in d.VARIANTS:
        claims += [d.group_term_claim(label), d.mean_abs_advantage_claim(label)]
    claims += [d.rloo_claim(), *d.affine_invariance_claims(), d.eps_claim(), *d.aggregation_claims((2, 3, 1))]
    claims += [d.dapo_weight_claim(), d.silent_probability_claim(), d.expected_variance_claim()]
    claims += [d.expected_variance_sum_claim(8), d.attenuation_claim(), d.group_size_law_claim()]
    return claims + [*d.logit_chain_claims(), d.arcsine_weight_claim(), d.arcsine_weight_at_half_claim()]


def test_every_claim_a_chapter_shows_has_two_different_sides() -> None:
    for claim in _shown_claims():
        assert sp.latex(claim.lhs) != sp.latex(claim.rhs_in_sigma()), claim.label


def test_a_count_of_a_total_reads_as_a_person_says_it() -> None:
    assert of_total(150, 150, "steps") == "all 150 steps"  # not "150 of the 150 steps"
    assert of_total(0, 12, "comparisons") == "none of the 12 comparisons"
    assert of_total(np.int64(1), 12, "comparisons") == "one of the 12 comparisons"
    assert of_total(97, 150, "steps") == "97 of the 150 steps"
    with pytest.raises(ValueError, match="count <= total"):
        of_total(3, 2, "steps")
    with pytest.raises(TypeError, match="int"):
        of_total(1.5, 2, "steps")


def test_a_list_of_names_is_not_a_string() -> None:
    with pytest.raises(TypeError, match="list of names"):
        code_list("loss_aggregation")  # would list its letters


def test_a_prose_claim_fails_when_the_numbers_part_from_it() -> None:
    """The sentence's direction, computed from its numbers: passes while they agree, and raises,
    quoting the claim, when they do not (numpy truth values too)."""
    prose_claim(0.33 < 0.35, "the silent fraction stays flat")
    prose_claim(np.float64(0.14) < 0.5, "GRPO's ninth sample is worth most off the middle")
    with pytest.raises(AssertionError, match="the silent fraction grows"):
        prose_claim(np.bool_(False), "the silent fraction grows")
    with pytest.raises(ValueError, match="quote the claim"):
        prose_claim(True, " ")
    with pytest.raises(TypeError, match="truth value"):
        prose_claim(np.array([True, False]), "two claims at once")
