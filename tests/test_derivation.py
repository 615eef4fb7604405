"""The SymPy derivation: every claim holds, the checker can fail, explicit cases for small G."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from stddial_book import DR_GRPO, GRPO, bessel_factor, silent_probability, update_weight
from stddial_book.theory import derivation as d


@pytest.mark.parametrize("claim", d.all_claims(), ids=lambda c: c.label)
def test_every_claim_holds(claim: d.Claim) -> None:
    assert claim.holds(), claim.difference()


def test_a_wrong_claim_is_rejected() -> None:
    right = d.group_term_claim("grpo")
    wrong = d.Claim("wrong", "GRPO weight is sigma squared", right.lhs, right.rhs * d.sigma)
    assert not wrong.holds()
    assert not d.Claim(
        "off", "Dr. GRPO with 0/1 is 2 sigma^2", d.mean_abs_advantage_claim("dr_grpo").lhs, 4 * d.sigma**2
    ).holds()


@pytest.mark.parametrize("G", range(2, 9))
def test_explicit_groups(G: int) -> None:
    for k in range(1, G):
        for label in d.VARIANTS:
            assert d.explicit_group_term_claim(G, k, label).holds()


def test_explicit_rejects_silent() -> None:
    with pytest.raises(ValueError, match="0 < num_correct < group_size"):
        d.explicit_group_term_claim(4, 0)
    with pytest.raises(ValueError, match="unknown variant"):
        d.variant_advantages("ppo")


def test_symbolic_weights_match_numeric_closed_forms() -> None:
    """The SymPy weights and stddial_book.theory.identity agree at numeric points."""
    for p in (0.125, 0.3, 0.5, 0.9):
        for G in (2, 8, 33):
            subs = {d.phat: p, d.G: G}
            for label, recipe in (
                ("grpo", GRPO),
                ("dr_grpo", DR_GRPO),
                ("grpo_bessel", GRPO.replace(std_correction=1)),
            ):
                weight = float(d.variant_advantages(label)[3].subs(subs))
                assert weight == pytest.approx(update_weight(p, recipe, G), rel=1e-13)
    assert float(sp.sqrt(sp.Rational(7, 8))) == pytest.approx(bessel_factor(8))
    expr = d.silent_probability_claim().rhs
    assert float(expr.subs({d.p: 0.2, d.G: 5})) == pytest.approx(silent_probability(0.2, 5))


def test_expected_variance_sum_for_several_g() -> None:
    for G in (2, 3, 5, 12):
        assert d.expected_variance_sum_claim(G).holds()


def test_latex_renders() -> None:
    text = d.group_term_claim("grpo").latex()
    assert r"\bar{g}_+" in text and "=" in text
    assert np.isfinite(float(d.eps_claim().rhs.subs({d.eps_sigma: 0.1, d.phat: 0.5})))


def test_aggregations_are_not_interchangeable() -> None:
    """Pairing one aggregation's loss with another's gᵢ fails: the length normaliser matters."""
    claims = d.aggregation_claims((2, 3, 1))
    for i, left in enumerate(claims):
        for j, right in enumerate(claims):
            if i != j:
                assert not d.Claim("mix", "mix", left.lhs, right.rhs).holds()
    # with equal lengths, GRPO's per-sequence mean and DAPO's token mean coincide
    equal = d.aggregation_claims((3, 3, 3))
    assert d.Claim("eq", "eq", equal[0].lhs, equal[2].rhs).holds()


@pytest.mark.parametrize(
    "claim",
    [
        d.attenuation_claim(),
        d.group_size_law_claim(),
        d.arcsine_weight_claim(),
        d.arcsine_weight_at_half_claim(),
        *d.logit_chain_claims(),
    ],
    ids=lambda c: c.label,
)
def test_every_theory_claim_holds(claim: d.Claim) -> None:
    assert claim.holds(), claim.difference()


def test_wrong_theory_claims_are_rejected() -> None:
    right = d.attenuation_claim()
    assert not d.Claim(
        "x", "1/(4G) instead of 1/(8G)", right.lhs, sp.sqrt(d.p * (1 - d.p)) * (1 - 1 / (4 * d.G * d.p * (1 - d.p)))
    ).holds()
    assert not d.Claim("x", "w = 1/(p(1-p))", d.arcsine_weight_claim().lhs, 1 / (d.p * (1 - d.p))).holds()
    assert not d.Claim(
        "x", "RLOO factor G/(G-1)", d.rloo_claim().lhs, d.G / (d.G - 1) * d.rloo_claim().rhs * d.G / (d.G - 1)
    ).holds()


def test_attenuation_is_the_exact_sum_to_first_order_in_one_over_G() -> None:
    """The exact E[g] differs from the expansion by O(1/G²): G² times the gap stays bounded."""
    from stddial_book.theory.group_size import attenuated_fidelity, gradient_fidelity

    for p_value in (0.3, 0.5):
        gaps = [abs(gradient_fidelity(p_value, G) - attenuated_fidelity(p_value, G)) * G**2 for G in (64, 256, 1024)]
        # G² times the gap tends to a constant, as c + O(1/G): it moves by 1.0% (p = 0.3) and 0.5% (p = 0.5)
        # from G = 256 to 1024, and by four times as much from 64 to 256. A first-order coefficient 1% off
        # would add 0.01 G/(8p(1 − p)) to it, 5 at G = 1024: far outside both bounds.
        assert max(gaps) < 2.0 and gaps[-1] == pytest.approx(gaps[-2], rel=0.02)
        assert abs(gaps[-1] - gaps[-2]) < abs(gaps[-2] - gaps[-3]) / 3


@pytest.mark.parametrize("label", list(d.VARIANTS))
def test_advantages_have_the_shape_w_times_one_minus_phat_over_sigma_squared(label: str) -> None:
    """A₊ = w(1 − p̂)/σ², A₋ = −w p̂/σ², proved, and shown with σ (not rewritten by SymPy)."""
    plus, minus = d.advantage_claims(label)
    assert plus.holds() and minus.holds()
    weight = d.variant_advantages(label)[3]
    assert plus.display_rhs.subs(d.sigma_symbol, d.sigma) == plus.rhs
    assert sp.simplify(plus.rhs - weight * (1 - d.phat) / d.sigma**2) == 0
    assert d.sigma_symbol in plus.rhs_in_sigma().free_symbols or label.startswith("dr")
    assert not d.Claim("off", "A₊ twice too large", plus.lhs, 2 * plus.rhs).holds()


def test_grpo_advantage_is_shown_as_one_minus_phat_over_sigma() -> None:
    plus, minus = d.advantage_claims("grpo")
    assert sp.latex(plus.rhs_in_sigma()) == r"\frac{1 - \hat{p}}{\sigma}"
    assert sp.latex(minus.rhs_in_sigma()) == r"- \frac{\hat{p}}{\sigma}"


def test_variants_table_lists_every_variant_in_short_closed_forms() -> None:
    text = d.variants_table().data
    lines = text.splitlines()
    assert len(lines) == 2 + len(d.VARIANTS)
    grpo = next(line for line in lines if line.startswith("| GRPO, population std, 0/1"))
    assert r"$\sigma$" in grpo and r"$2 \sigma$" in grpo and "sqrt{\\hat{p}}" not in grpo
    dr = next(line for line in lines if line.startswith("| Dr. GRPO, ±1"))
    assert r"$2 \sigma^{2}$" in dr and r"$4 \sigma^{2}$" in dr


def test_variants_table_refuses_a_claim_that_does_not_hold(monkeypatch) -> None:
    right = d.advantage_claims

    def wrong(label):
        plus, minus = right(label)
        return d.Claim(plus.label, plus.statement, plus.lhs, 2 * plus.rhs), minus

    monkeypatch.setattr(d, "advantage_claims", wrong)
    with pytest.raises(AssertionError, match="does not hold"):
        d.variants_table()


def test_latex_lines_breaks_long_sums_between_terms_only() -> None:
    long_sum = d.expected_variance_sum_claim(8).lhs
    lines = d.latex_lines(long_sum)
    assert len(lines) > 1
    # the lines hold the sum's terms, in order, each once, joined by their signs
    terms = [sp.latex(t) for t in long_sum.as_ordered_terms()]
    expected = " ".join(t if i == 0 or t.startswith("-") else f"+ {t}" for i, t in enumerate(terms))
    assert " ".join(lines) == expected
    assert not lines[0].startswith("+") and lines[1].startswith("+ ")
    # a short sum, or anything not a sum, stays on one line
    assert d.latex_lines(d.gbar_plus - d.gbar_minus) == [sp.latex(d.gbar_plus - d.gbar_minus)]
    assert d.latex_lines(d.sigma * (d.gbar_plus - d.gbar_minus)) == [sp.latex(d.sigma * (d.gbar_plus - d.gbar_minus))]
    assert len(d.latex_lines(long_sum, width=1)) == len(terms)  # one term a line at the narrowest
    with pytest.raises(ValueError, match="width must be at least 1; got 0"):
        d.latex_lines(long_sum, width=0)


def test_latex_aligned_puts_continuation_lines_between_the_two_sides() -> None:
    claim = d.expected_variance_sum_claim(8)
    text = claim.latex_aligned()
    assert text.startswith(r"\begin{aligned} & ") and text.endswith(r"\end{aligned}")
    rows = text[len(r"\begin{aligned} ") : -len(r" \end{aligned}")].split(r" \\ ")
    assert len(rows) == len(d.latex_lines(claim.lhs)) + 1
    assert all(row.startswith(r"&\quad") for row in rows[1:-1]) and rows[-1].startswith("&= ")


def test_display_rhs_must_be_sympy() -> None:
    with pytest.raises(TypeError, match="display_rhs"):
        d.Claim("x", "x", d.sigma, d.sigma, display_rhs="sigma")
