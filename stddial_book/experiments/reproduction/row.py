"""One row of the reproduction page: the paper's value, the book's, and whether they agree.

Agreement: a deterministic value agrees when equal at the paper's rounding; a random one (``spread``
> 0, the sampling SD at the paper's own sample size) when the paper's value lies within two SD of
the book's, give or take the paper's rounding, and :attr:`Row.verdict` says when only that rounding
brings it in; a bound (``bound``) when the book's rounded value does not exceed it; a row with a
``tolerance`` when the two differ by at most that.
"""

from __future__ import annotations

from dataclasses import dataclass

from stddial_book.core.checks import check_int, check_number

__all__ = ["Row"]


@dataclass(frozen=True)
class Row:
    """One claim of the paper set beside the book's value, with the rule by which they agree.

    ``section`` is where the paper makes the claim (``"§8, controlled run"``) and ``quantity`` what is
    compared, in words; ``paper`` is the paper's printed value and ``book`` the book's, both finite
    numbers in the same unit; ``decimals`` how many decimals the paper prints (0 to 20), its
    rounding; ``unit`` is ``"%"`` when both values are percentages (default: none); ``note`` is text
    shown beside the row (default empty); ``expected_to_differ`` marks a row the book expects to
    disagree (its verdict then reads "differs", not "no"; default False). At most one of the last
    three is set: ``spread``, the sampling SD of a random result at the paper's own sample size
    (≥ 0, default 0: deterministic); ``bound``, True when the paper's value is an upper bound;
    ``tolerance``, the largest |book − paper| that still agrees (≥ 0, default 0: none).
    """

    section: str
    quantity: str
    paper: float
    book: float
    decimals: int
    unit: str = ""  # "%" when both values are percentages
    note: str = ""
    expected_to_differ: bool = False
    spread: float = 0.0  # sampling SD at the paper's sample size, for results of random runs
    bound: bool = False  # the paper's value is an upper bound ("within two points")
    tolerance: float = 0.0  # agree when |book − paper| is at most this (a test's own threshold)

    def __post_init__(self) -> None:
        for name in ("section", "quantity", "unit", "note"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"Row.{name} must be a string; got {type(getattr(self, name)).__name__}.")
        for name in ("paper", "book", "spread", "tolerance"):  # checked, kept as given (an int stays an int)
            check_number(getattr(self, name), f"Row.{name}", hint="Rows hold finite numbers (a NaN cannot agree).")
        if check_int(self.decimals, "Row.decimals", minimum=0) > 20:
            raise ValueError(f"Row.decimals is how many decimals the paper prints (0..20); got {self.decimals}.")
        if self.spread < 0 or self.tolerance < 0:
            raise ValueError(f"Row.spread and Row.tolerance must be >= 0; got {self.spread} and {self.tolerance}.")
        for name in ("expected_to_differ", "bound"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"Row.{name} must be True or False; got {getattr(self, name)!r:.40}.")
        if sum((self.spread > 0, self.bound, self.tolerance > 0)) > 1:
            raise ValueError("a Row has at most one of spread, bound and tolerance.")

    @property
    def agrees(self) -> bool:
        """Equal at the paper's rounding; for a random result (``spread`` > 0), the paper's value
        lies within two standard deviations of the book's value, give or take the paper's
        rounding; for a bound, the book's rounded value does not exceed it; with a ``tolerance``,
        the two differ by at most that."""
        if self.tolerance > 0:
            return bool(abs(self.book - self.paper) <= self.tolerance)
        if self.bound:
            return bool(round(self.book, self.decimals) <= self.paper)
        if self.spread > 0:
            return bool(abs(self.book - self.paper) <= 2 * self.spread + 0.5 * 10.0**-self.decimals)
        return bool(round(self.book, self.decimals) == round(self.paper, self.decimals))

    @property
    def distance_sd(self) -> tuple[float, float] | None:
        """For a random result (``spread`` > 0): |book − paper| in standard deviations, from the
        printed value and from the interval of values that round to it; None otherwise."""
        if self.spread <= 0:
            return None
        gap = abs(self.book - self.paper)
        return gap / self.spread, max(0.0, gap - 0.5 * 10.0**-self.decimals) / self.spread

    @property
    def verdict(self) -> str:
        """``yes``; ``at rounding`` when only the paper's rounding brings the row in (a random result
        more than two SD from the printed value that does not round to it, a bound the unrounded
        value exceeds); ``differs`` for a row expected to differ; ``no`` otherwise."""
        if not self.agrees:
            return "differs" if self.expected_to_differ else "no"
        if self.bound and self.book > self.paper:
            return "at rounding"
        rounds_to_paper = round(self.book, self.decimals) == round(self.paper, self.decimals)
        if self.spread > 0 and not rounds_to_paper and self.distance_sd[0] > 2:
            return "at rounding"
        return "yes"

    @property
    def notes(self) -> str:
        """``note``, and for a random result its distance from the paper's value in SD."""
        parts = [self.note] if self.note else []
        if self.spread > 0:
            printed, interval = self.distance_sd
            text = f"{printed:.1f} SD from the printed value"
            if round(self.book, self.decimals) != round(self.paper, self.decimals):
                text += f", {interval:.1f} SD from the interval that rounds to it"
            parts.append(text)
        return "; ".join(parts)
