"""The machinery of the SymPy derivation (chapter 3): the symbols, a :class:`Claim` and its LaTeX.

A :class:`Claim` is an equation lhs = rhs with a label and a sentence; ``claim.holds()`` asks SymPy
to simplify lhs − rhs to zero, with p̂ = a/(a + b), p = c/(c + d) and G = n + 1 for positive a, b,
c, d, n so that square roots of p̂(1 − p̂) may be combined. :func:`latex_lines` breaks a long sum
into lines about :data:`LINE_WIDTH` characters wide, so that an equation fits the text column.
The claims themselves are built in :mod:`stddial_book.theory.derivation`.

Symbols follow the notation table: G (group size), k (correct samples), p̂ = k/G, σ, ḡ₊, ḡ₋,
p (true solve rate), ε (std epsilon), L_max.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import sympy as sp

from stddial_book.core.checks import check_int, shown

__all__ = [
    "Claim",
    "G",
    "k",
    "phat",
    "sigma",
    "p",
    "eps",
    "eps_sigma",
    "L_max",
    "r_plus",
    "r_minus",
    "gbar_plus",
    "gbar_minus",
    "sigma_symbol",
    "MAX_SYMBOLIC_SIZE",
    "check_symbolic_size",
    "scalar_expr",
    "LINE_WIDTH",
    "latex_lines",
]

# --- symbols ---------------------------------------------------------------------------------
G = sp.Symbol("G", positive=True, integer=True)
k = sp.Symbol("k", nonnegative=True, integer=True)
phat = sp.Symbol(r"\hat{p}", positive=True)
p = sp.Symbol("p", positive=True)
eps = sp.Symbol(r"\varepsilon", positive=True)  # the group-size law's tolerance (the source paper's ε)
eps_sigma = sp.Symbol(r"\varepsilon_\sigma", positive=True)  # the std floor added before dividing
L_max = sp.Symbol(r"L_{\max}", positive=True)
r_plus = sp.Symbol("r_+", real=True)
r_minus = sp.Symbol("r_-", real=True)
gbar_plus = sp.Symbol(r"\bar{g}_+", real=True)
gbar_minus = sp.Symbol(r"\bar{g}_-", real=True)
#: σ = sqrt(p̂(1 − p̂)), the population std of 0/1 rewards.
sigma = sp.sqrt(phat * (1 - phat))

# Positive stand-ins used only to decide whether a difference is zero: p̂ = a/(a + b) keeps
# p̂ and 1 − p̂ positive, G = n + 1 keeps G − 1 positive, so SymPy may combine square roots.
_a, _b, _n = sp.symbols("a b n", positive=True)
_c, _d = sp.symbols("c d", positive=True)  # p = c/(c + d): a solve rate strictly between 0 and 1
_gap = sp.Symbol("Delta", positive=True)
#: σ as one symbol, for display only, which :meth:`Claim.rhs_in_sigma` writes for sqrt(p̂(1 − p̂)).
sigma_symbol = sp.Symbol(r"\sigma", positive=True)

#: The largest group size, or sequence length, that the sample-by-sample claims build. Each sample is
#: a symbol, and SymPy's cost grows fast with their number; the symbolic-G claims hold for every G.
MAX_SYMBOLIC_SIZE = 256


def check_symbolic_size(value: int, name: str, minimum: int) -> int:
    """``value`` as a group size (or sequence length) a sample-by-sample claim can build: an integer of at
    least ``minimum`` and at most :data:`MAX_SYMBOLIC_SIZE`, else a ``ValueError`` naming ``name``."""
    value = check_int(value, name, minimum=minimum)
    if value > MAX_SYMBOLIC_SIZE:
        raise ValueError(
            f"{name}={value} is too large for a sample-by-sample SymPy claim (at most "
            f"{MAX_SYMBOLIC_SIZE}); the claims in symbolic G hold for every G."
        )
    return value


def scalar_expr(value: object, name: str) -> sp.Expr:
    """A reward value or eps: a SymPy expression (a symbol such as ``r_plus``) or a finite real number.

    ``value`` is what is checked and returned as a SymPy expression; ``name`` is the argument's name, used
    in the error raised otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, (sp.Expr, int, float)):
        raise TypeError(
            f"{name} must be a SymPy expression (e.g. r_plus) or a real number; got "
            f"{type(value).__name__} {shown(value)}."
        )
    expr = sp.sympify(value)
    if expr.has(sp.nan, sp.zoo, sp.oo, -sp.oo) or expr.is_real is False:
        raise ValueError(f"{name} must be finite and real; got {shown(value)}.")
    return expr


#: How wide (in characters of SymPy's 2-D pretty print, about the width of the rendered formula)
#: one line of a displayed equation may be: a longer sum is broken over several lines, so that
#: no equation is wider than the book's text column.
LINE_WIDTH = 56


def _symbol_width(symbol: sp.Symbol) -> int:
    """About how many characters wide a symbol is on the page: ``\\bar{g}_+`` is 2, ``s_{1,1}`` 3."""
    name = re.sub(r"\\(bar|hat|tilde|mathrm|operatorname)", "", symbol.name)
    name = re.sub(r"\\[a-zA-Z]+", "x", name)  # a Greek letter or \\max: about one character
    return max(1, math.ceil(0.8 * len(re.sub(r"[{}_^]", "", name))))


def _shown_width(expr: sp.Expr) -> int:
    """The width of ``expr``'s pretty print, each symbol stood in for by one as wide as it shows."""
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    stand_ins = {
        symbol: sp.Symbol(letters[i % len(letters)] * _symbol_width(symbol))
        for i, symbol in enumerate(sorted(expr.free_symbols, key=str))
    }
    drawn = sp.pretty(expr.xreplace(stand_ins), use_unicode=True)
    return max(len(row) for row in drawn.splitlines())


def latex_lines(expr: sp.Expr, width: int = LINE_WIDTH) -> list[str]:
    """``expr`` as LaTeX, a sum broken between its terms into lines about ``width`` wide.

    The width of a term is that of its SymPy pretty print (a fraction counts as its wider part),
    close to its width on the page. A product or a single term stays on one line. Joining the
    lines with spaces gives the same formula as ``sp.latex(expr)``, term for term.
    """
    width = check_int(width, "width", minimum=1)
    if isinstance(expr, bool) or not isinstance(expr, (sp.Expr, int, float)):
        raise TypeError(
            f"expr must be a SymPy expression (e.g. a Claim's lhs); got {type(expr).__name__} {shown(expr)}."
        )
    if isinstance(expr, float) and not math.isfinite(expr):
        raise ValueError(f"expr must be finite; got {expr}.")
    expr = sp.sympify(expr)
    if not isinstance(expr, sp.Add):
        return [sp.latex(expr)]
    lines: list[str] = []
    current: list[str] = []
    used = 0
    for term in expr.as_ordered_terms():
        text = sp.latex(term)
        size = _shown_width(term) + 3  # with the operator between terms
        if current and used + size > width:
            lines.append(" ".join(current))
            current, used = [], 0
        current.append(text if not (lines or current) or text.startswith("-") else f"+ {text}")
        used += size
    lines.append(" ".join(current))
    return lines


@dataclass(frozen=True)
class Claim:
    """An equation ``lhs = rhs`` that the book derives, with a label and a sentence.

    ``label`` is a short identifier (``"group_term_grpo"``); ``statement`` the sentence the page shows;
    ``lhs`` the side built from the definitions and ``rhs`` the closed form, SymPy expressions (or
    numbers, turned into them); ``assumptions`` says where it holds, as text (``"0 < k < G"`` by default);
    ``notes`` holds further remarks (none by default); ``display_rhs`` is the closed form as shown.
    """

    label: str
    statement: str
    lhs: sp.Expr
    rhs: sp.Expr
    assumptions: str = "0 < k < G"
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: The closed form as the page shows it, written with the symbol σ (``rhs`` is this with σ
    #: replaced by sqrt(p̂(1 − p̂)); ``derivation._in_sigma`` makes both). None: ``rhs`` is shown.
    display_rhs: sp.Expr | None = None

    def __post_init__(self) -> None:
        for name in ("lhs", "rhs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (sp.Basic, int, float)):
                raise TypeError(
                    f"{name} must be a SymPy expression (or a number); got {type(value).__name__} "
                    f"{value!r:.40}. Build it from the module's symbols, e.g. sigma * (gbar_plus - gbar_minus)."
                )
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{name} must be finite; got {value}.")
            object.__setattr__(self, name, sp.sympify(value))
        if self.display_rhs is not None and not isinstance(self.display_rhs, sp.Basic):
            raise TypeError(f"display_rhs must be a SymPy expression or None; got {type(self.display_rhs).__name__}.")

    def difference(self) -> sp.Expr:
        """lhs − rhs, simplified under the assumptions (p̂ and 1 − p̂ positive, G > 1)."""
        diff = (self.lhs - self.rhs).subs({phat: _a / (_a + _b), p: _c / (_c + _d), G: _n + 1})
        diff = diff.subs(r_plus, r_minus + _gap)
        return sp.simplify(sp.radsimp(sp.simplify(diff)))

    def holds(self) -> bool:
        """True when SymPy proves lhs − rhs = 0."""
        return self.difference() == 0

    def rhs_in_sigma(self) -> sp.Expr:
        """The closed form with sqrt(p̂)·sqrt(1 − p̂) written as the symbol σ, for display."""
        if self.display_rhs is not None:
            return self.display_rhs
        return self.rhs.subs(sp.sqrt(phat) * sp.sqrt(1 - phat), sigma_symbol)

    def latex(self) -> str:
        """The equation as LaTeX (the closed form in terms of σ), for ``IPython.display.Math``."""
        return f"{sp.latex(self.lhs)} = {sp.latex(self.rhs_in_sigma())}"

    def latex_aligned(self, width: int = LINE_WIDTH) -> str:
        """The equation over several lines for a narrow page: the left side, then ``= right side``,
        each side's sum broken into lines about ``width`` characters wide (:func:`latex_lines`)."""
        left = latex_lines(self.lhs, width)
        right = latex_lines(self.rhs_in_sigma(), width)
        rows = [
            f"& {left[0]}",
            *(rf"&\quad {line}" for line in left[1:]),
            f"&= {right[0]}",
            *(rf"&\quad {line}" for line in right[1:]),
        ]
        return r"\begin{aligned} " + r" \\ ".join(rows) + r" \end{aligned}"
