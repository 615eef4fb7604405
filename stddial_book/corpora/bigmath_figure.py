"""Big-Math's exact k-of-64 histogram, read from the source paper's vector figure (chapter 7).

The source paper (Bay and Yearick, 2026, §6) computes its Big-Math numbers from the
``llama8b_solve_rate`` column of ``open-r1/Big-Math-RL-Verified-Processed`` (N = 215,608
problems, p̂ = k/64). That dataset lives on the Hugging Face hub; the paper's figure
``fig_realdata.pdf`` (CC BY 4.0) holds the same histogram as filled rectangles with exact
coordinates. This module reads it back without a PDF library:

1. inflate the page's content stream (zlib) and run a small interpreter over its operators,
   collecting filled rectangles (with their colour and clip box), short axis tick strokes and
   the text drawn after each (tick labels, legend entries);
2. calibrate each panel's y axis from its labelled ticks (a least-squares line through them);
3. the left panel's 64 bars (``bins = linspace(0, 1, 65)``: bar j holds k = j for j < 63, the
   last bar k = 63 and 64 together) convert to whole numbers of problems;
4. the right panel's gradient-budget shares by decile of p̂ (weights p(1−p) and √(p(1−p)),
   both zero at p = 1) fix how many of the last bar's problems have k = 63: the share of the
   top decile is linear in that number, and both weights must give the same integer.

:func:`check_against_paper` then recomputes every published Big-Math number from the 65 counts
and :func:`build_big_math_table` refuses to write the table unless all agree at the paper's
rounding. Run ``python -m stddial_book.corpora.bigmath_figure --pdf <fig_realdata.pdf>``.
"""

from __future__ import annotations

import argparse
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from stddial_book.core.checks import to_numpy
from stddial_book.corpora.histograms import (
    KHistogram,
    band_shares,
    decile_of,
    decile_shares,
    gradient_budget,
    read_counts_csv,
    silent_fraction,
)
from stddial_book.theory.group_size import large_group_gradient
from stddial_book.theory.recipes import get_recipe

__all__ = [
    "FIGURE_SOURCE",
    "PUBLISHED",
    "FigureData",
    "read_figure",
    "counts_from_figure",
    "check_against_paper",
    "build_big_math_table",
    "load_big_math_histogram",
    "BIG_MATH_TABLE",
]

ROLLOUTS = 64
BIG_MATH_TABLE = "big_math_k_histogram"

#: The figure itself ships with the package: ``data_path(*FIGURE_FILE)`` (data/sources/bigmath/).
FIGURE_FILE = ("sources", "bigmath", "fig_realdata.pdf")

#: Where the figure comes from (data/sources/bigmath/SOURCE.md).
FIGURE_SOURCE = {
    "paper": "Bay and Yearick (2026), GRPO, Dr. GRPO, and DAPO Are Three Operations on One Number: "
    "The Group-Standard-Deviation Identity, arXiv 2607.00152",
    "repository": "https://github.com/bay-yearick-lab/grpo-standard-deviation-identity",
    "commit": "b67492903f387f3b2db74c366c35d6cb4a426182",
    "path": "paper/figures/fig_realdata.pdf",
    "blob": "eda03a9f1b0a160300db550d781cb0ecb1553172",
    "sha256": "42180a19e388d1ac75520ae7f8283a0509a791ee3f2b5a024cc13c203af15037",
    "licence": "CC BY 4.0 (https://creativecommons.org/licenses/by/4.0/); figure by Bay and Yearick, "
    "counts extracted from it by The Std Dial",
    "dataset": "open-r1/Big-Math-RL-Verified-Processed, config all, column llama8b_solve_rate = k/64 "
    "(Llama-3.1-8B, 64 rollouts per problem)",
}

#: Every Big-Math number the paper publishes (§6, Table 3), at the paper's rounding.
#: Percentages are given in percent with the number of decimals the paper prints.
PUBLISHED: dict[str, tuple[float, int]] = {
    "num_problems": (215_608, 0),
    "never_solved_pct": (4.0, 1),
    "always_solved_pct": (7.2, 1),
    "irreducible_silent_pct": (11.2, 1),
    "silent_bernoulli_G4_pct": (59, 0),
    "silent_bernoulli_G8_pct": (44, 0),
    "silent_bernoulli_G16_pct": (32, 0),
    "silent_bernoulli_G32_pct": (23, 0),
    "silent_bernoulli_G64_pct": (17, 0),
    "silent_subsampled_G4_pct": (59, 0),
    "silent_subsampled_G8_pct": (43, 0),
    "silent_subsampled_G16_pct": (30, 0),
    "extreme_mass_dr_grpo_pct": (13.9, 1),
    "extreme_mass_grpo_pct": (24.7, 1),
    "medium_mass_dr_grpo_pct": (22.8, 1),
    "medium_mass_grpo_pct": (17.5, 1),
}


@dataclass
class _Rect:
    x0: float
    y0: float
    x1: float
    y1: float
    color: tuple[float, ...]
    clip: tuple[float, float, float, float] | None


@dataclass
class FigureData:
    """What the figure's two panels hold, in data units.

    ``bar_counts`` holds the left panel's 64 bar heights, in problems (floats, as read);
    ``decile_shares`` maps ``"dr_grpo"`` and ``"grpo"`` to the right panel's ten shares of the gradient
    budget, one per tenth of p̂, in percent; ``calibration`` holds each panel's worst tick residual of the
    axis calibration (empty by default).
    """

    bar_counts: np.ndarray  # (64,) problems per bar of the left panel (floats)
    decile_shares: dict[str, np.ndarray]  # legend label -> (10,) percent of the gradient budget
    calibration: dict[str, float] = field(default_factory=dict)  # worst tick residual per panel

    def __post_init__(self) -> None:
        bars = to_numpy(self.bar_counts, "bar_counts")
        if bars.shape != (ROLLOUTS,):
            raise ValueError(
                f"bar_counts must hold the {ROLLOUTS} bar heights of the left panel; got shape {bars.shape}."
            )
        if not isinstance(self.decile_shares, dict) or sorted(self.decile_shares) != ["dr_grpo", "grpo"]:
            raise ValueError("decile_shares must map 'dr_grpo' and 'grpo' to their ten decile shares (in percent).")
        shares = {name: to_numpy(values, f"decile_shares[{name!r}]") for name, values in self.decile_shares.items()}
        if any(v.shape != (10,) for v in shares.values()):
            raise ValueError("decile_shares must hold ten shares (one per tenth of p̂) for each recipe.")
        if not isinstance(self.calibration, dict):
            raise TypeError(f"calibration must be a dict; got {type(self.calibration).__name__}.")
        self.bar_counts, self.decile_shares = bars, shares


def _content_stream(pdf: bytes) -> str:
    if not pdf.startswith(b"%PDF"):
        raise ValueError("it is not a PDF (it does not start with %PDF)")
    page = re.search(rb"/Type /Page\b.*?/Contents (\d+) 0 R", pdf, re.S)
    if page is None:
        raise ValueError("no page with /Contents in this PDF")
    obj = re.search(rb"\n" + page.group(1) + rb" 0 obj\n<<(.*?)>>\nstream\r?\n", pdf, re.S)
    if obj is None or b"/FlateDecode" not in obj.group(1):
        raise ValueError("the page's content stream is missing or not a FlateDecode stream this reader understands")
    end = pdf.find(b"endstream", obj.end())
    if end < 0:
        raise ValueError("the page's content stream has no end (the file is truncated)")
    try:
        return zlib.decompress(pdf[obj.end() : end]).decode("latin-1")
    except zlib.error as err:
        raise ValueError(
            f"the page's content stream does not inflate ({err}; the file is truncated or damaged)"
        ) from None


_TOKEN = re.compile(r"\((?:\\.|[^\\)])*\)|\[|\]|/[^\s/\[\]()<>]+|[-+]?(?:\d+\.?\d*|\.\d+)|[A-Za-z'\"*]+")


def _operations(content: str):
    """Each operator of a content stream, in order, as (operator, numeric operands, string operands):
    a ``(...)`` string keeps its printable characters; names (``/F1``) and array brackets are dropped
    from both operand lists."""
    stack: list = []
    for token in _TOKEN.findall(content):
        if token[0] == "(":
            stack.append("".join(ch for ch in token[1:-1] if ch >= " ").strip())
            continue
        if token in ("[", "]") or token[0] == "/":
            stack.append(token)
            continue
        try:
            stack.append(float(token))
            continue
        except ValueError:
            pass
        args = [a for a in stack if isinstance(a, float)]
        strings = [a for a in stack if isinstance(a, str) and a not in ("[", "]") and not a.startswith("/")]
        stack = []
        yield token, args, strings


@dataclass
class _PageReader:
    """The state of :func:`_interpret` over one page: the graphics state (colour, clip, the saved
    states), the path being built, the last tick stroke and the text since ``BT``; and what it
    found so far (``rects``, ``ticks``, ``legend``)."""

    rects: list[_Rect] = field(default_factory=list)
    ticks: list[tuple[float, float, float, str]] = field(default_factory=list)
    legend: list[tuple[tuple[float, ...], str]] = field(default_factory=list)
    color: tuple[float, ...] = (0.0,)
    clip: tuple[float, float, float, float] | None = None
    saved: list[tuple] = field(default_factory=list)
    path: list[tuple[float, float]] = field(default_factory=list)
    pending_clip: tuple[float, float, float, float] | None = None
    last_tick: tuple[float, float, float] | None = None
    text_parts: list[str] = field(default_factory=list)

    def apply(self, op: str, args: list[float], strings: list[str]) -> None:
        """One operator: ``q Q rg g`` set the graphics state, ``m l re W n`` build a path or clip,
        ``f F f* B S B*`` paint it, ``BT Tj TJ ET`` draw text; any other is ignored."""
        if op in ("q", "Q", "rg", "g"):
            self._state(op, args)
        elif op in ("m", "l", "re", "W", "n"):
            self._build(op, args)
        elif op in ("f", "F", "f*", "B", "S", "B*"):
            self._paint(op)
        elif op in ("BT", "Tj", "TJ", "ET"):
            self._text(op, strings)

    def _state(self, op: str, args: list[float]) -> None:
        if op == "q":
            self.saved.append((self.color, self.clip))
        elif op == "Q":
            self.color, self.clip = self.saved.pop() if self.saved else (self.color, None)
        elif op == "rg":
            self.color = tuple(args[-3:])
        else:
            self.color = (args[-1],)

    def _build(self, op: str, args: list[float]) -> None:
        if op == "m":
            self.path = [(args[-2], args[-1])]
        elif op == "l":
            self.path.append((args[-2], args[-1]))
        elif op == "re":
            x, y, w, h = args[-4:]
            self.path = [(x, y), (x + w, y), (x + w, y + h), (x, y + h)]
            self.pending_clip = (x, y, x + w, y + h)
        elif op == "W":
            self.clip = self.pending_clip
        else:
            self.path = []

    def _paint(self, op: str) -> None:
        """A fill of four or more points is a rectangle; a stroke of one short horizontal segment
        (at most 5 points long) is a tick."""
        path, self.path = self.path, []
        if op in ("f", "F", "f*"):
            xs, ys = [p[0] for p in path], [p[1] for p in path]
            if len(path) >= 4:
                self.rects.append(_Rect(min(xs), min(ys), max(xs), max(ys), self.color, self.clip))
        elif len(path) == 2 and path[0][1] == path[1][1]:
            (xa, y), (xb, _) = path
            if 0 < abs(xa - xb) <= 5:
                self.last_tick = (max(xa, xb), y, abs(xa - xb))

    def _text(self, op: str, strings: list[str]) -> None:
        """At ``ET`` the text is the label of the tick just drawn, or else of a legend entry: a
        small unclipped swatch, the last rectangle filled."""
        if op == "BT":
            self.text_parts = []
        elif op in ("Tj", "TJ"):
            self.text_parts.extend(strings)
        else:
            label = "".join(self.text_parts)
            if self.last_tick is not None:
                self.ticks.append((*self.last_tick, label))
                self.last_tick = None
            elif self.rects and _is_swatch(self.rects[-1]) and label:
                self.legend.append((self.rects[-1].color, label))


def _is_swatch(rect: _Rect) -> bool:
    """A legend's colour patch: unclipped, under 12 points wide and 8 high."""
    return rect.clip is None and (rect.x1 - rect.x0) < 12 and (rect.y1 - rect.y0) < 8


def _interpret(
    content: str,
) -> tuple[list[_Rect], list[tuple[float, float, float, str]], list[tuple[tuple[float, ...], str]]]:
    """Filled rectangles; (tick x, tick y, tick length, label) of every short stroke that a text
    follows; and (colour, label) of every legend entry, a small unclipped swatch that a text
    follows. Only the operators matplotlib's PDF backend writes are understood."""
    reader = _PageReader()
    for op, args, strings in _operations(content):
        reader.apply(op, args, strings)
    return reader.rects, reader.ticks, reader.legend


def _axis(ticks: list[tuple[float, float, float, str]], left_edge: float) -> tuple[float, float, float]:
    """(slope, intercept, worst residual) mapping page y to data y, from the labelled y ticks
    drawn at one panel's left edge."""
    points = []
    for x, y, _, label in ticks:
        value = label.replace(" ", "").replace("%", "").replace(",", "").replace("\u2212", "-")
        if abs(x - left_edge) < 1e-3 and re.fullmatch(r"-?\d+(\.\d+)?", value):
            points.append((y, float(value)))
    if len(points) < 3:
        raise ValueError(f"found {len(points)} labelled y ticks at x = {left_edge}; need at least 3 to calibrate")
    ys, values = np.array(points).T
    slope, intercept = np.polyfit(ys, values, 1)
    residual = float(np.max(np.abs(slope * ys + intercept - values)))
    return float(slope), float(intercept), residual


def read_figure(path: str | Path) -> FigureData:
    """Read both panels of ``fig_realdata.pdf`` into data units.

    ``path`` is the PDF file (a str or Path). Raises ``ValueError`` naming the file for a missing,
    unreadable, truncated or other file."""
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be the path of fig_realdata.pdf (str or Path); got {type(path).__name__}.")
    try:
        return _read_figure(Path(path))
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist; {_FIGURE_FIX}") from None
    except OSError as err:
        raise ValueError(f"{path} cannot be read ({err.strerror or err}); {_FIGURE_FIX}") from None
    except (ValueError, IndexError, KeyError) as err:
        raise ValueError(f"{path} could not be read as the paper's figure: {err}; {_FIGURE_FIX}") from None


#: What to pass instead of a file the figure reader refuses.
_FIGURE_FIX = (
    "pass the source paper's fig_realdata.pdf, shipped as data/sources/bigmath/fig_realdata.pdf "
    f"(sha256 {FIGURE_SOURCE['sha256'][:12]}...)."
)


def _read_figure(path: Path) -> FigureData:
    rects, ticks, legend = _interpret(_content_stream(path.read_bytes()))
    clips = sorted({r.clip for r in rects if r.clip is not None}, key=lambda c: c[0])
    if len(clips) != 2:
        raise ValueError(f"expected two panels (clip boxes), found {len(clips)}")
    left, right = clips
    bars = sorted(
        (r for r in rects if r.clip == left and r.y0 == left[1] and (r.x1 - r.x0) < (left[2] - left[0]) / 2),
        key=lambda r: r.x0,
    )
    if len(bars) != ROLLOUTS:
        raise ValueError(f"expected {ROLLOUTS} histogram bars in the left panel, found {len(bars)}")
    slope_l, icpt_l, res_l = _axis(ticks, left[0])
    counts = np.array([(slope_l * b.y1 + icpt_l) - (slope_l * b.y0 + icpt_l) for b in bars])
    slope_r, icpt_r, res_r = _axis(ticks, right[0])
    share_bars = [r for r in rects if r.clip == right and r.y0 == right[1] and (r.x1 - r.x0) < 30]
    by_color: dict[tuple[float, ...], list[_Rect]] = {}
    for r in share_bars:
        by_color.setdefault(r.color, []).append(r)
    series = {c: sorted(rs, key=lambda r: r.x0) for c, rs in by_color.items() if len(rs) == 10}
    if len(series) != 2:
        raise ValueError(f"expected two series of 10 decile bars in the right panel, found {len(series)}")
    # The legend names each series: a small swatch of its colour, then its label.
    names = {color: re.sub(r"[^a-z]+", "_", label.lower()).strip("_") for color, label in legend}
    if sorted(names.get(c, "?") for c in series) != ["dr_grpo", "grpo"]:
        raise ValueError(f"the right panel's legend should name Dr. GRPO and GRPO; it holds {sorted(legend)!r:.120}")
    # The axis is labelled as a fraction of the budget; shares are kept in percent.
    shares = {names[c]: 100 * np.array([slope_r * r.y1 - slope_r * r.y0 for r in rs]) for c, rs in series.items()}
    return FigureData(counts, shares, {"left_tick_residual": res_l, "right_tick_residual": res_r})


def _weights(name: str) -> np.ndarray:
    """Each k's large-group weight under a recipe: p(1 − p) for Dr. GRPO, √(p(1 − p)) for GRPO."""
    return np.asarray(large_group_gradient(np.arange(ROLLOUTS + 1) / ROLLOUTS, get_recipe(name)))


def _decile_shares(counts: np.ndarray, name: str) -> np.ndarray:
    """The percent of a recipe's large-group gradient budget per tenth of p̂, as the figure shows."""
    hist = KHistogram(ROLLOUTS, counts)
    return 100 * decile_shares(hist, gradient_budget(hist, get_recipe(name)))


def counts_from_figure(figure: FigureData) -> np.ndarray:
    """The 65 whole counts n_k, k = 0..64, from the bars and the top decile's share.

    Bars 0..62 are n_0..n_62. The last bar is n_63 + n_64; with n_64 weightless, the top decile's
    share s = (M_top + n_63 w_63)/(M + n_63 w_63) of each weight gives
    n_63 = (s M − M_top)/(w_63 (1 − s)). Both weights must round to the same integer. ``figure`` is
    the :class:`FigureData` that :func:`read_figure` returns.
    """
    if not isinstance(figure, FigureData):
        raise TypeError(f"figure must be what read_figure returns (a FigureData); got {type(figure).__name__}.")
    bars = np.round(figure.bar_counts)
    if np.max(np.abs(figure.bar_counts - bars)) > 0.05:
        raise ValueError("the bar heights are not whole numbers of problems: the axis calibration is off.")
    base = np.zeros(ROLLOUTS + 1)
    base[: ROLLOUTS - 1] = bars[: ROLLOUTS - 1]
    top = decile_of(np.arange(ROLLOUTS + 1) / ROLLOUTS) == 9
    estimates = {}
    for name, shares in figure.decile_shares.items():
        s = shares[-1] / shares.sum()
        w = _weights(name)
        estimates[name] = (s * (base * w).sum() - (base * w)[top].sum()) / (w[ROLLOUTS - 1] * (1 - s))
    rounded = {name: round(value) for name, value in estimates.items()}
    if len(set(rounded.values())) != 1:
        raise ValueError(f"the two weights disagree on n_63: {estimates}; the figure was not read correctly.")
    n63 = next(iter(rounded.values()))
    counts = base.copy()
    counts[ROLLOUTS - 1] = n63
    counts[ROLLOUTS] = bars[-1] - n63
    if counts[ROLLOUTS] < 0 or n63 < 0:
        raise ValueError(f"negative count after splitting the last bar (n_63 = {n63}).")
    for name, shares in figure.decile_shares.items():
        worst = np.max(np.abs(_decile_shares(counts, name) - shares))
        if worst > 0.01:
            raise ValueError(
                f"the {name} decile shares recomputed from the counts miss the figure's by "
                f"{worst:.3f} points; the figure was not read correctly."
            )
    return counts.astype(np.int64)


def _paper_numbers(counts: np.ndarray) -> dict[str, float]:
    """Every number of :data:`PUBLISHED`, recomputed from the 65 counts (in percent)."""
    hist = KHistogram(ROLLOUTS, counts)
    n = counts.sum()
    out: dict[str, float] = {
        "num_problems": float(n),
        "never_solved_pct": 100 * counts[0] / n,
        "always_solved_pct": 100 * counts[-1] / n,
        "irreducible_silent_pct": 100 * (counts[0] + counts[-1]) / n,
    }
    for G, value in zip((4, 8, 16, 32, 64), silent_fraction(hist, [4, 8, 16, 32, 64])):
        out[f"silent_bernoulli_G{G}_pct"] = 100 * float(value)
    for G, value in zip((4, 8, 16), silent_fraction(hist, [4, 8, 16], model="hypergeometric")):
        out[f"silent_subsampled_G{G}_pct"] = 100 * float(value)
    for name in ("dr_grpo", "grpo"):  # the paper's bands (solve_rates.PAPER_BANDS), large-group weights
        shares = band_shares(hist, gradient_budget(hist, get_recipe(name)))
        out[f"extreme_mass_{name}_pct"] = 100 * shares["extreme"]
        out[f"medium_mass_{name}_pct"] = 100 * shares["medium"]
    return out


def check_against_paper(counts: Sequence[int]) -> list[dict[str, object]]:
    """One row per published number: the paper's value, the value from ``counts`` and whether
    they agree when the latter is rounded as the paper rounds."""
    values = to_numpy(counts, "counts")
    if (
        values.shape != (ROLLOUTS + 1,)
        or np.any(values < 0)
        or np.any(values != np.round(values))
        or values.sum() <= 0
        or values.max() > 2**53
    ):
        raise ValueError(
            f"counts must be {ROLLOUTS + 1} whole numbers of problems, k = 0..{ROLLOUTS}, not all 0 (as "
            "load_big_math_histogram().counts); got shape "
            f"{values.shape}."
        )
    ours = _paper_numbers(values.astype(np.int64))
    rows = []
    for name, (paper, decimals) in PUBLISHED.items():
        value = float(ours[name])
        rows.append(
            {
                "quantity": name,
                "paper": paper,
                "book": value,
                "decimals": decimals,
                "agrees": bool(round(value, decimals) == round(paper, decimals)),
            }
        )
    return rows


def build_big_math_table(pdf: str | Path, out_dir: str | Path | None = None) -> Path:
    """Extract, check against every published number, and write ``big_math_k_histogram.csv`` and
    its provenance. Raises ``ValueError`` naming each mismatch; writes nothing then. ``pdf`` is the
    paper's ``fig_realdata.pdf`` (its sha256 is checked); ``out_dir`` is the folder written to (None,
    the default: the package's ``data/solve_rates``). Returns the CSV's path."""
    from stddial_book.core.resources import data_path, require_sha256, write_table

    pdf = Path(pdf)
    require_sha256(pdf, FIGURE_SOURCE["sha256"], "the paper's figure")
    figure = read_figure(pdf)
    counts = counts_from_figure(figure)
    rows = check_against_paper(counts)
    bad = [r for r in rows if not r["agrees"]]
    if bad:
        raise ValueError(
            "the extracted histogram disagrees with the paper: "
            + "; ".join(f"{r['quantity']}: paper {r['paper']}, extracted {r['book']:.3f}" for r in bad)
        )
    worst = float(np.max(np.abs(figure.bar_counts - np.round(figure.bar_counts))))
    provenance = {
        "source": FIGURE_SOURCE,
        "method": "the left panel's 64 bar heights (bins linspace(0, 1, 65)), calibrated by a least-squares "
        "line through the labelled y ticks, rounded to whole problems (largest deviation from a whole "
        f"number {worst:.2e}); the last bar (k = 63 and 64) split by the right panel's top-decile "
        "gradient-budget shares, both weights giving the same n_63; all ten decile shares of both "
        "weights then recomputed from the counts and matched.",
        "checked_against_paper": {
            r["quantity"]: {"paper": r["paper"], "extracted": round(float(r["book"]), 4)} for r in rows
        },
        "made_by": "python -m stddial_book.corpora.bigmath_figure --pdf <fig_realdata.pdf>",
    }
    out = Path(out_dir) if out_dir is not None else data_path("solve_rates")
    return write_table(out, BIG_MATH_TABLE, ["k", "count"], ([k, int(c)] for k, c in enumerate(counts)), provenance)


def load_big_math_histogram(data_dir: str | Path | None = None):
    """The committed Big-Math k-of-64 histogram as a :class:`~stddial_book.corpora.histograms.KHistogram`.

    ``data_dir`` is the folder holding ``big_math_k_histogram.csv`` (None, the default: the package's
    ``data/solve_rates``).
    """
    from stddial_book.core.resources import data_path

    if data_dir is not None and not isinstance(data_dir, (str, Path)):
        raise TypeError(f"data_dir must be a folder path (str or Path) or None; got {type(data_dir).__name__}.")
    path = (Path(data_dir) if data_dir is not None else data_path("solve_rates")) / f"{BIG_MATH_TABLE}.csv"
    fix = (
        "it ships with the package (data/solve_rates/); rebuild it with python -m stddial_book.corpora.bigmath_figure "
        "--pdf <fig_realdata.pdf>."
    )
    rows = read_counts_csv(path, ("k", "count"), fix)
    k = [r["k"] for r in rows]
    if k != list(range(ROLLOUTS + 1)):
        raise ValueError(f"{path} must list k = 0..{ROLLOUTS} once each, in order; {fix}")
    return KHistogram(ROLLOUTS, np.array([r["count"] for r in rows], dtype=np.int64))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Extract Big-Math's k-of-64 histogram from the paper's figure.")
    parser.add_argument("--pdf", required=True, help="fig_realdata.pdf of the source paper")
    parser.add_argument("--out", default=None, help="output folder (default: the package's data/solve_rates)")
    args = parser.parse_args(argv)
    try:
        table = build_big_math_table(args.pdf, args.out)
    except (ValueError, OSError) as err:
        raise SystemExit(f"error: {err}") from None
    print(f"wrote {table}")


if __name__ == "__main__":
    main()
