"""The group-standard-deviation identity, derived in SymPy (chapter 3).

Each result is a :class:`~stddial_book.theory.claim.Claim` (its symbols, checker and LaTeX live in
:mod:`stddial_book.theory.claim`): a left-hand side built from the definitions (rewards, their
mean and std, the recipe's advantage, a loss aggregation) and the closed form it should equal.
``claim.holds()`` asks SymPy to simplify the difference to zero; the chapter asserts it for
every claim, so the book fails to build if a result ever stops holding, and the tests do too.

Symbols follow the notation table: G (group size), k (correct samples), p̂ = k/G, σ, ḡ₊, ḡ₋,
p (true solve rate), ε_σ (the std floor), ε (the group-size law's tolerance), L_max, and token
scores g_{i,t}. References: Shao et al. (2024) for GRPO, Liu et al. (2025) for Dr. GRPO, Yu et al.
(2025) for DAPO.
"""

from __future__ import annotations

import sympy as sp

from stddial_book.core.checks import check_int, shown
from stddial_book.theory.claim import (  # noqa: F401  (k, LINE_WIDTH, latex_lines: kept as derivation.<name>)
    LINE_WIDTH,
    MAX_SYMBOLIC_SIZE,
    Claim,
    G,
    L_max,
    check_symbolic_size,
    eps,
    eps_sigma,
    gbar_minus,
    gbar_plus,
    k,
    latex_lines,
    p,
    phat,
    r_minus,
    r_plus,
    scalar_expr,
    sigma,
    sigma_symbol,
)

__all__ = [
    "reward_moments",
    "advantages",
    "variant_advantages",
    "VARIANTS",
    "advantage_claims",
    "variants_table",
    "mean_abs_advantage_claim",
    "group_term_claim",
    "explicit_group_term_claim",
    "aggregation_claims",
    "expected_variance_claim",
    "expected_variance_sum_claim",
    "silent_probability_claim",
    "eps_claim",
    "dapo_weight_claim",
    "affine_invariance_claims",
    "all_claims",
    "rloo_claim",
    "attenuation_claim",
    "group_size_law_claim",
    "arcsine_weight_claim",
    "arcsine_weight_at_half_claim",
    "logit_chain_claims",
]


def _check_correction(correction: int) -> int:
    if isinstance(correction, bool) or not isinstance(correction, (int, float)) or correction not in (0, 1):
        raise ValueError(f"correction must be 0 (population std) or 1 (Bessel's); got {shown(correction)}.")
    return int(correction)


def reward_moments(
    reward_correct: sp.Expr = sp.Integer(1), reward_wrong: sp.Expr = sp.Integer(0), correction: int = 0
) -> tuple[sp.Expr, sp.Expr]:
    """Mean and std of a group of binary rewards with a fraction p̂ correct.

    mean = r₋ + (r₊ − r₋) p̂; population variance = (r₊ − r₋)² p̂(1 − p̂); Bessel's correction
    multiplies the variance by G/(G − 1). ``reward_correct`` and ``reward_wrong`` are r₊ > r₋, numbers or
    SymPy expressions (1 and 0 by default); ``correction`` is 0 (the default, the population std) or 1
    (Bessel's).
    """
    correction = _check_correction(correction)
    reward_correct = scalar_expr(reward_correct, "reward_correct")
    reward_wrong = scalar_expr(reward_wrong, "reward_wrong")
    gap = reward_correct - reward_wrong
    if gap.is_number and not gap > 0:
        raise ValueError(
            f"reward_correct must exceed reward_wrong (r₊ > r₋: a correct sample is rewarded more); got "
            f"{reward_correct} and {reward_wrong}."
        )
    mean = phat * reward_correct + (1 - phat) * reward_wrong
    second = phat * reward_correct**2 + (1 - phat) * reward_wrong**2
    variance = sp.factor(sp.expand(second - mean**2))
    if correction:
        variance = variance * G / (G - 1)
    return mean, sp.sqrt(variance)


def advantages(
    scale_std: bool,
    correction: int = 0,
    reward_correct: sp.Expr = sp.Integer(1),
    reward_wrong: sp.Expr = sp.Integer(0),
    std_eps: sp.Expr = sp.Integer(0),
) -> tuple[sp.Expr, sp.Expr]:
    """(A₊, A₋): the advantage of a correct and of a wrong sample under the given settings.

    ``scale_std`` (True or False) divides the centred rewards by the std plus ``std_eps`` (a number or
    expression ≥ 0, 0 by default); ``correction`` (0 or 1), ``reward_correct`` and ``reward_wrong`` are
    those of :func:`reward_moments`.
    """
    if not isinstance(scale_std, bool):
        raise TypeError(f"scale_std must be True or False; got {type(scale_std).__name__} {shown(scale_std)}.")
    mean, std = reward_moments(reward_correct, reward_wrong, correction)
    reward_correct = scalar_expr(reward_correct, "reward_correct")
    reward_wrong = scalar_expr(reward_wrong, "reward_wrong")
    std_eps = scalar_expr(std_eps, "std_eps")
    if std_eps.is_number and std_eps < 0:
        raise ValueError(f"std_eps is added to the std and must be >= 0; got {std_eps}.")
    a_plus, a_minus = reward_correct - mean, reward_wrong - mean
    if scale_std:
        a_plus, a_minus = a_plus / (std + std_eps), a_minus / (std + std_eps)
    return a_plus, a_minus


_VARIANTS = {
    # label: (description, scale_std, correction, rewards, closed form of the group weight w)
    "grpo": ("GRPO, population std, 0/1 rewards", True, 0, (1, 0), sigma),
    "grpo_bessel": ("GRPO, Bessel std, 0/1 rewards", True, 1, (1, 0), sigma * sp.sqrt((G - 1) / G)),
    "grpo_pm1": ("GRPO, population std, ±1 rewards", True, 0, (1, -1), sigma),
    "dr_grpo": ("Dr. GRPO, 0/1 rewards", False, 0, (1, 0), sigma**2),
    "dr_grpo_pm1": ("Dr. GRPO, ±1 rewards", False, 0, (1, -1), 2 * sigma**2),
}
#: The variants chapter 3 derives: label → human description.
VARIANTS = {label: spec[0] for label, spec in _VARIANTS.items()}


def variant_advantages(label: str) -> tuple[str, sp.Expr, sp.Expr, sp.Expr]:
    """(description, A₊, A₋, closed-form weight w) of one of the :data:`VARIANTS`, named by its ``label``."""
    if not isinstance(label, str) or label not in _VARIANTS:
        raise ValueError(f"unknown variant {shown(label)}; choose one of {sorted(_VARIANTS)}.")
    description, scale, correction, (hi, lo), weight = _VARIANTS[label]
    a_plus, a_minus = advantages(scale, correction, sp.Integer(hi), sp.Integer(lo))
    return description, a_plus, a_minus, weight


def _in_sigma(expr: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """(``expr`` in p̂, ``expr`` as written with σ): ``expr`` is given with p̂(1 − p̂) as σ², so that
    the page can show (1 − p̂)/σ, which SymPy would otherwise rewrite as sqrt(1 − p̂)/sqrt(p̂)."""
    return expr.subs(sigma_symbol, sigma), expr


def advantage_claims(label: str) -> tuple[Claim, Claim]:
    """A₊ = w (1 − p̂)/σ² and A₋ = −w p̂/σ²: each variant's advantages, from the definitions,
    equal these short forms in its weight w (so (1 − p̂)/σ and −p̂/σ for GRPO). ``label`` names one of
    the :data:`VARIANTS`."""
    description, a_plus, a_minus, weight = variant_advantages(label)
    shown_weight = weight.subs(sp.sqrt(phat) * sp.sqrt(1 - phat), sigma_symbol)
    plus, plus_shown = _in_sigma(shown_weight * (1 - phat) / sigma_symbol**2)
    minus, minus_shown = _in_sigma(-shown_weight * phat / sigma_symbol**2)
    return (
        Claim(f"a_plus_{label}", f"{description}: A₊ = w (1 − p̂)/σ²", a_plus, plus, display_rhs=plus_shown),
        Claim(f"a_minus_{label}", f"{description}: A₋ = −w p̂/σ²", a_minus, minus, display_rhs=minus_shown),
    )


def variants_table():
    """Chapter 3: every variant's advantages, weight and mean |A|, as a Markdown table of short
    closed forms in σ (:func:`stddial_book.core.markdown.table`).

    Each entry is the right side of a :class:`Claim` whose left side is built from the definitions
    (:func:`advantage_claims`, :func:`group_term_claim`, :func:`mean_abs_advantage_claim`); the
    table is made only after SymPy proves every one, and raises ``AssertionError`` otherwise.
    """
    from stddial_book.core.markdown import table

    rows = []
    for label, description in VARIANTS.items():
        a_plus, a_minus = advantage_claims(label)
        claims = [a_plus, a_minus, group_term_claim(label), mean_abs_advantage_claim(label)]
        wrong = next((claim for claim in claims if not claim.holds()), None)
        if wrong is not None:
            raise AssertionError(f"{wrong.label} does not hold: lhs - rhs = {wrong.difference()}")
        weight = claims[2].rhs_in_sigma() / (gbar_plus - gbar_minus)
        displayed = [a_plus.rhs_in_sigma(), a_minus.rhs_in_sigma(), weight, claims[3].rhs_in_sigma()]
        rows.append([description, *(f"${sp.latex(expr)}$" for expr in displayed)])
    return table(["variant", "$A_+$", "$A_-$", "$w$", r"mean $\lvert A_i \rvert$"], rows)


def mean_abs_advantage_claim(label: str) -> Claim:
    """mean |A| = p̂ A₊ + (1 − p̂)(−A₋) = 2w (2σ for GRPO, 2σ² for Dr. GRPO, …) for the variant named
    ``label`` (one of the :data:`VARIANTS`)."""
    description, a_plus, a_minus, weight = variant_advantages(label)
    lhs = phat * a_plus - (1 - phat) * a_minus
    return Claim(f"mean_abs_{label}", f"{description}: mean |A| = 2w", lhs, 2 * weight)


def group_term_claim(label: str) -> Claim:
    """(1/G) Σᵢ Aᵢ gᵢ = p̂ A₊ ḡ₊ + (1 − p̂) A₋ ḡ₋ = w (ḡ₊ − ḡ₋), for the variant named ``label`` (one of
    the :data:`VARIANTS`)."""
    description, a_plus, a_minus, weight = variant_advantages(label)
    lhs = phat * a_plus * gbar_plus + (1 - phat) * a_minus * gbar_minus
    return Claim(
        f"group_term_{label}", f"{description}: group term = w (ḡ₊ − ḡ₋)", lhs, weight * (gbar_plus - gbar_minus)
    )


def explicit_group_term_claim(group_size: int, num_correct: int, label: str = "grpo") -> Claim:
    """The group term written out sample by sample, for a concrete G and k.

    With score symbols g₁ … g_G (the first k correct), (1/G) Σᵢ Aᵢ gᵢ must equal
    w (ḡ₊ − ḡ₋) where ḡ₊ and ḡ₋ are the means of the correct and wrong scores. This checks the
    bookkeeping the symbolic-p̂ version abstracts away. ``group_size`` is G (2 to
    :data:`~stddial_book.theory.claim.MAX_SYMBOLIC_SIZE`), ``num_correct`` is k with 0 < k < G, and
    ``label`` names one of the :data:`VARIANTS` (GRPO by default).
    """
    group_size = check_symbolic_size(group_size, "group_size", 2)
    num_correct = check_int(num_correct, "num_correct")
    if not 0 < num_correct < group_size:
        raise ValueError(f"need 0 < num_correct < group_size; got k={num_correct}, G={group_size}.")
    description, a_plus, a_minus, weight = variant_advantages(label)
    subs = {phat: sp.Rational(num_correct, group_size), G: group_size}
    scores = sp.symbols(f"g_1:{group_size + 1}", real=True)
    adv = [a_plus.subs(subs)] * num_correct + [a_minus.subs(subs)] * (group_size - num_correct)
    lhs = sum(a * g for a, g in zip(adv, scores)) / group_size
    g_plus = sum(scores[:num_correct]) / num_correct
    g_minus = sum(scores[num_correct:]) / (group_size - num_correct)
    return Claim(
        f"explicit_{label}_G{group_size}_k{num_correct}",
        f"{description}, G = {group_size}, k = {num_correct}, sample by sample",
        lhs,
        weight.subs(subs) * (g_plus - g_minus),
        assumptions=f"G = {group_size}, k = {num_correct}",
    )


def aggregation_claims(lengths: tuple[int, ...] = (2, 3, 1)) -> list[Claim]:
    """Each loss aggregation's gradient at ratio 1 is −(1/G) Σᵢ Aᵢ gᵢ for its own gᵢ.

    The group's samples have the given ``lengths``; token t of sample i has score symbol
    g_{i,t} = ∇ log π(o_{i,t}) and the batch is padded to L_max = max(lengths) + 1 with a mask,
    as the training code stores it. The left sides aggregate the per-token terms Aᵢ g_{i,t}
    exactly as each recipe does; the right sides are (1/G) Σᵢ Aᵢ gᵢ with g̃ᵢ = Σₜ g_{i,t} (the
    summed score, chapter 2's notation) and gᵢ = g̃ᵢ/ℓᵢ (GRPO, per-sequence token mean),
    gᵢ = g̃ᵢ/L_max (Dr. GRPO, the constant cap) and gᵢ = g̃ᵢ/ℓ̄ (DAPO, token mean over the step,
    ℓ̄ the mean length).
    """
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, (tuple, list)) or not lengths:
        raise ValueError(
            f"lengths must be a non-empty tuple of sequence lengths, e.g. (2, 3, 1); got {shown(lengths)}."
        )
    check_symbolic_size(len(lengths), "the number of sequences", 1)
    lengths = tuple(check_symbolic_size(length, "each length", 1) for length in lengths)
    if len(lengths) * (max(lengths) + 1) > 4 * MAX_SYMBOLIC_SIZE:
        raise ValueError(
            f"lengths {lengths!r:.40} need {len(lengths) * (max(lengths) + 1)} score symbols, more than "
            f"{4 * MAX_SYMBOLIC_SIZE}: too large for SymPy; use fewer or shorter sequences (the claims "
            "hold for any lengths)."
        )
    n = len(lengths)
    width = max(lengths) + 1  # one padding column at least, to show the mask at work
    A = sp.symbols(f"A_1:{n + 1}", real=True)
    s = [[sp.Symbol(f"g_{{{i + 1},{t + 1}}}", real=True) for t in range(width)] for i in range(n)]
    mask = [[1 if t < lengths[i] else 0 for t in range(width)] for i in range(n)]
    term = [[mask[i][t] * A[i] * s[i][t] for t in range(width)] for i in range(n)]
    S = [sum(s[i][: lengths[i]]) for i in range(n)]
    ell_bar = sp.Rational(sum(lengths), n)
    seq_mean = sum(sum(term[i]) / sum(mask[i]) for i in range(n)) / n
    sum_norm = sum(sum(term[i]) / L_max for i in range(n)) / n
    token_mean = sum(sum(row) for row in term) / sum(sum(row) for row in mask)
    where = f"lengths {tuple(lengths)}, padded to {width} with a mask"
    return [
        Claim(
            "aggregation_seq_mean_token_mean",
            "GRPO: gᵢ = g̃ᵢ / ℓᵢ",
            seq_mean,
            sum(A[i] * S[i] / lengths[i] for i in range(n)) / n,
            assumptions=where,
        ),
        Claim(
            "aggregation_seq_mean_token_sum_norm",
            "Dr. GRPO: gᵢ = g̃ᵢ / L_max",
            sum_norm,
            sum(A[i] * S[i] / L_max for i in range(n)) / n,
            assumptions=where,
        ),
        Claim(
            "aggregation_token_mean",
            "DAPO: gᵢ = g̃ᵢ / ℓ̄ with ℓ̄ the step's mean length",
            token_mean,
            sum(A[i] * S[i] / ell_bar for i in range(n)) / n,
            assumptions=where,
        ),
    ]


def expected_variance_claim() -> Claim:
    """E[σ̂²] = E[k]/G − E[k²]/G² = p(1 − p)(G − 1)/G, from k ~ Binomial(G, p)."""
    mean_k = G * p
    second_k = G * p * (1 - p) + (G * p) ** 2
    lhs = mean_k / G - second_k / G**2
    return Claim(
        "expected_variance",
        "E[σ̂² | p, G] from the binomial moments",
        lhs,
        p * (1 - p) * (G - 1) / G,
        assumptions="k ~ Binomial(G, p)",
    )


def expected_variance_sum_claim(group_size: int) -> Claim:
    """The same expectation as an explicit binomial sum for a concrete G (a polynomial in p).

    ``group_size`` is that G, from 1 to :data:`~stddial_book.theory.claim.MAX_SYMBOLIC_SIZE`.
    """
    n = check_symbolic_size(group_size, "group_size", 1)
    lhs = sum(
        sp.binomial(n, j) * p**j * (1 - p) ** (n - j) * sp.Rational(j, n) * (1 - sp.Rational(j, n))
        for j in range(n + 1)
    )
    return Claim(
        f"expected_variance_sum_G{n}",
        f"E[σ̂²] as a sum over k = 0..{n}",
        lhs,
        p * (1 - p) * sp.Rational(n - 1, n),
        assumptions=f"G = {n}",
    )


def silent_probability_claim() -> Claim:
    """P(k = 0) + P(k = G) = p^G + (1 − p)^G."""
    # unevaluated, so that the page shows the two binomial terms and not the closed form twice
    pmf = lambda j: sp.Mul(
        sp.binomial(G, j, evaluate=False),
        sp.Pow(p, j, evaluate=False),
        sp.Pow(1 - p, G - j, evaluate=False),
        evaluate=False,
    )
    return Claim(
        "silent_probability",
        "P(silent | p, G)",
        sp.Add(pmf(0), pmf(G), evaluate=False),
        p**G + (1 - p) ** G,
        assumptions="k ~ Binomial(G, p)",
    )


def eps_claim() -> Claim:
    """With std + ε_σ in the denominator GRPO's weight is σ²/(σ + ε_σ): σ / w = 1 + ε_σ/σ exactly."""
    a_plus, _ = advantages(True, 0, sp.Integer(1), sp.Integer(0), eps_sigma)
    weight = phat * a_plus  # A₊ = α(1 − p̂), so w = α p̂(1 − p̂) = p̂ A₊
    return Claim("eps", "GRPO with std + ε_σ: σ / w − 1 = ε_σ / σ", sigma / weight - 1, eps_sigma / sigma)


def dapo_weight_claim() -> Claim:
    """DAPO's effective per-prompt weight: σ divided by the non-silent fraction 1 − f.

    A prompt type with population share π and silence probability s_q is kept with share
    π(1 − s_q)/(1 − f) in a refilled batch (f the overall silent fraction); per sampled group
    that is not silent this multiplies GRPO's weight σ by 1/(1 − f).
    """
    share, f = sp.symbols(r"\pi f", positive=True)
    kept_share = share / (1 - f)  # P(type | not silent) / P(not silent | type), per mixed group
    return Claim(
        "dapo_weight",
        "DAPO: effective weight per mixed group",
        kept_share / share * sigma,
        sigma / (1 - f),
        assumptions="0 < k < G, f < 1",
    )


def affine_invariance_claims() -> list[Claim]:
    """GRPO's advantages do not depend on the reward values; Dr. GRPO's scale with r₊ − r₋."""
    grpo_general = advantages(True, 0, r_plus, r_minus)
    grpo_01 = advantages(True, 0)
    dr_general = advantages(False, 0, r_plus, r_minus)
    dr_01 = advantages(False, 0)
    return [
        Claim(
            "affine_grpo_plus",
            "GRPO: A₊ for rewards (r₊, r₋) equals A₊ for (1, 0)",
            grpo_general[0],
            grpo_01[0],
            assumptions="r₊ > r₋",
        ),
        Claim(
            "affine_grpo_minus",
            "GRPO: A₋ for rewards (r₊, r₋) equals A₋ for (1, 0)",
            grpo_general[1],
            grpo_01[1],
            assumptions="r₊ > r₋",
        ),
        Claim(
            "affine_dr_grpo_plus",
            "Dr. GRPO: A₊ scales with r₊ − r₋",
            dr_general[0],
            (r_plus - r_minus) * dr_01[0],
            assumptions="r₊ > r₋",
        ),
    ]


def rloo_claim() -> Claim:
    """Group-mean centring is the leave-one-out advantage rescaled: Rᵢ − μ = (G − 1)/G · (Rᵢ − bᵢ).

    With S = Σ_{j≠i} Rⱼ, the RLOO baseline is bᵢ = S/(G − 1) and the mean μ = (Rᵢ + S)/G
    (Kool et al., 2019; Ahmadian et al., 2024; Bay and Yearick, 2026, Prop. 1).
    """
    r_i, others = sp.symbols("R_i S", real=True)
    return Claim(
        "rloo",
        "group-mean centring is RLOO times (G − 1)/G",
        r_i - (r_i + others) / G,
        (G - 1) / G * (r_i - others / (G - 1)),
        assumptions="G ≥ 2, any rewards",
    )


def attenuation_claim() -> Claim:
    """E[σ̂] to second order in 1/G: √(p(1 − p)) · (1 − 1/(8 G p(1 − p))).

    The delta method on f(x) = √(x(1 − x)) at x = p with Var(p̂) = p(1 − p)/G: E f(p̂) ≈ f(p) +
    f''(p) Var(p̂)/2 (Bay and Yearick, 2026, Corollary 1; chapter 5).
    """
    x = sp.Symbol("x", positive=True)
    f = sp.sqrt(x * (1 - x))
    lhs = f.subs(x, p) + sp.diff(f, x, 2).subs(x, p) * (p * (1 - p) / G) / 2
    return Claim(
        "attenuation",
        "E[g] to second order (delta method)",
        lhs,
        sp.sqrt(p * (1 - p)) * (1 - 1 / (8 * G * p * (1 - p))),
        assumptions="0 < p < 1, G → ∞",
    )


def group_size_law_claim() -> Claim:
    """Solving 1 − 1/(8 G p(1 − p)) = 1 − ε for G gives G* = 1/(8 ε p(1 − p)) = w(p)²/(8ε)."""
    solution = sp.solve(sp.Eq(1 - 1 / (8 * G * p * (1 - p)), 1 - eps), G)
    if len(solution) != 1:
        raise AssertionError(f"expected one solution for G, got {solution}")
    weight = 1 / sp.sqrt(p * (1 - p))
    return Claim(
        "group_size_law",
        "the group size at fidelity 1 − ε",
        solution[0],
        weight**2 / (8 * eps),
        assumptions="0 < p < 1, 0 < ε < 1",
    )


def arcsine_weight_claim() -> Claim:
    """w(p) = d/dp 2·arcsin√p = 1/√(p(1 − p)) (Bay and Yearick, 2026, eq. (weight); chapter 6)."""
    return Claim(
        "arcsine_weight",
        "the derivative of GRPO's objective is the difficulty weight",
        sp.Derivative(2 * sp.asin(sp.sqrt(p)), p),  # unevaluated: the page shows what is differentiated
        1 / sp.sqrt(p * (1 - p)),
        assumptions="0 < p < 1",
    )


def arcsine_weight_at_half_claim() -> Claim:
    """w(1/2) = 2, the bottom of the bathtub."""
    return Claim(
        "arcsine_weight_half",
        "w(1/2)",
        sp.Subs(sp.Derivative(2 * sp.asin(sp.sqrt(p)), p), p, sp.Rational(1, 2)),  # not "2 = 2" on the page
        sp.Integer(2),
        assumptions="p = 1/2",
    )


def logit_chain_claims() -> list[Claim]:
    """For a Bernoulli-logit prompt p = ς(θ): dp/dθ = p(1 − p), so the gradient in θ of GRPO's
    objective 2·arcsin√p is w(p)·p(1 − p) = √(p(1 − p)) (the large-G limit of E[g]) and that of
    Dr. GRPO's objective p is p(1 − p) (the large-G limit of E[σ̂²]). Chapter 6."""
    theta = sp.Symbol(r"\theta", real=True)
    logistic = 1 / (1 + sp.exp(-theta))
    dp = sp.diff(logistic, theta)
    return [
        Claim(
            "logistic_derivative",
            "dp/dθ for p = ς(θ)",
            dp.subs(sp.exp(-theta), (1 - p) / p),
            p * (1 - p),
            assumptions="p = ς(θ) ∈ (0, 1)",
        ),
        Claim(
            "grpo_large_group_gradient",
            "d/dθ 2·arcsin√p",
            sp.Derivative(2 * sp.asin(sp.sqrt(p)), p) * p * (1 - p),
            sp.sqrt(p * (1 - p)),
            assumptions="p = ς(θ) ∈ (0, 1)",
        ),
    ]


def all_claims() -> list[Claim]:
    """Every result chapter 3 displays, in the chapter's order."""
    claims: list[Claim] = []
    for label in _VARIANTS:
        claims += advantage_claims(label)
        claims.append(mean_abs_advantage_claim(label))
        claims.append(group_term_claim(label))
    claims += affine_invariance_claims()
    claims += aggregation_claims()
    claims += [
        eps_claim(),
        dapo_weight_claim(),
        rloo_claim(),
        expected_variance_claim(),
        expected_variance_sum_claim(8),
        silent_probability_claim(),
    ]
    return claims
