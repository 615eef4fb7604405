"""No typed results: every decimal number in the prose of a chapter or appendix page is glued
from an executed cell, or it is on the short allow-list below with the reason it may be typed (a
value quoted from a source, or a setting or definition the text states rather than finds).

Not prose, so not searched: the front matter, code cells and other fenced blocks (code, literal
includes, directives), display math, roles (``{glue:text}``, ``{cite:p}``, ...), inline code, link
targets, and inline math that defines an input: an assignment such as $p = 0.05$ or
$\\beta = 0.04$, a band such as $0.9 < \\hat p < 1$, an interval, a bare setting, and the
arguments of a function written out, as in $w(0.05)$. Any other number in inline math, such as
$R^2 > 0.99$, is a result and counts.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([*ROOT.glob("chapters/*.md"), *ROOT.glob("appendix/*.md")])

#: (page, number) -> why it may be typed. Keep it short: a typed result is glued instead.
ALLOWED: dict[tuple[str, str], str] = {
    # settings of the recipes, as their papers state them (DAPO's clip-higher, GRPO's KL weight)
    ("02_group_relative_rl", "0.2"): "setting: the PPO clip range ε_low = ε_high every recipe starts from",
    ("02_group_relative_rl", "0.28"): "setting: DAPO's clip-higher ε_high",
    ("02_group_relative_rl", "0.04"): "setting: GRPO's KL weight β",
    ("04_identity_real_gradients", "0.2"): "setting: the symmetric clip ε_high compared",
    ("04_identity_real_gradients", "0.28"): "setting: DAPO's clip-higher ε_high compared",
    ("04_identity_real_gradients", "0.8"): "setting: the lower clip bound 1 − ε_low with ε_low = 0.2",
    ("12_dapo_run", "0.28"): "setting: DAPO's clip-higher ε_high",
    ("13_comparison", "1.0"): "setting: the gradient-norm clip of the ablation's clipped cells",
    ("13_comparison", "0.2"): "setting: the PPO clip range every arm of the ablation shares",
    ("08_controlled_run", "0.5"): "setting: the controlled run's learning rate, from the paper's code",
    # values quoted from the source paper beside the book's glued ones
    ("07_silent_fraction_real_data", "13.9"): "quoted: the paper's Dr. GRPO extreme share (§7)",
    ("07_silent_fraction_real_data", "24.7"): "quoted: the paper's GRPO extreme share (§7)",
    ("07_silent_fraction_real_data", "22.8"): "quoted: the paper's Dr. GRPO medium share (§7)",
    ("07_silent_fraction_real_data", "17.5"): "quoted: the paper's GRPO medium share (§7)",
    ("07_silent_fraction_real_data", "0.92"): "quoted: the paper's R² for DAPO's Figure 3b (§5)",
    ("07_silent_fraction_real_data", "0.91"): "quoted: the paper's bootstrap range, lower end (§5)",
    ("07_silent_fraction_real_data", "0.96"): "quoted: the paper's bootstrap range, upper end (§5)",
    ("08_controlled_run", "17.0"): "quoted: the paper's GRPO extreme share at G = 8 (§8)",
    ("08_controlled_run", "14.3"): "quoted: the paper's Dr. GRPO extreme share at G = 8 (§8)",
    ("08_controlled_run", "24.7"): "quoted: the paper's large-group GRPO extreme share (§7)",
    ("08_controlled_run", "0.99"): "quoted: the paper's GRPO hardest quartile (§8)",
    ("08_controlled_run", "0.88"): "quoted: the paper's Dr. GRPO hardest quartile (§8)",
    ("08_controlled_run", "3.5"): "quoted: the paper's DAPO oversampling (§8)",
    # names and hypotheticals
    ("07_silent_fraction_real_data", "4.0"): "name: the licence, CC BY 4.0",
    ("09_testbed", "0.15"): "definition: a warm-start target the exercise asks about",
    ("09_testbed", "0.6"): "definition: a warm-start target the exercise asks about",
}

_INPUT = r"(?:p|\\hat\s*p|\\delta|\\beta|\\varepsilon(?:_\{\\text\{\w+\}\})?|G|M)"
_DEFINITIONS = (
    re.compile(rf"^\s*{_INPUT}\s*=\s*[\d.]+\s*$"),  # an input's value: $p = 0.05$
    re.compile(rf"^[\d./\s]*(?:<|\\le|\\leq)?\s*{_INPUT}\s*(?:<|>|\\le|\\ge|\\leq|\\geq)\s*[\d./]+\s*$"),  # a band
    re.compile(r"^\s*\[[\d.]+,\s*[\d.]+\]\s*$"),  # an interval
    re.compile(r"^\s*[\d.]+\s*$"),  # a bare setting
)
_NUMBER = re.compile(r"(?<![\w.-])\d*\.\d+(?![\w.-]*\w)")


def _inline_math(match: re.Match) -> str:
    body = match.group(1)
    if any(d.match(body) for d in _DEFINITIONS):
        return ""
    return re.sub(r"\([^()=<>]*\)|\[[^\[\]=<>]*\]|\\mid\s*[\d.]+", "", body)  # a function's arguments


def prose(text: str) -> str:
    """The page's prose, with everything that is not prose removed (see the module's docstring)."""
    text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)
    text = re.sub(r"^(`{3,}|~{3,}).*?\n.*?^\1\s*$", "", text, flags=re.S | re.M)
    text = re.sub(r"\$\$.*?\$\$", "", text, flags=re.S)
    text = re.sub(r"\{[\w:-]+\}`[^`]*`", "", text)
    text = re.sub(r"`[^`]*`", "", text)
    text = re.sub(r"(?<!\\)\$([^$]+)\$", _inline_math, text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return re.sub(r"<https?://[^>]*>", "", text)


def typed_numbers(page: Path) -> list[tuple[str, str]]:
    """(number, its line) for every decimal number in the page's prose."""
    return [(m.group(), line.strip()) for line in prose(page.read_text()).splitlines() for m in _NUMBER.finditer(line)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_no_typed_results(page: Path) -> None:
    typed = [(n, line) for n, line in typed_numbers(page) if (page.stem, n) not in ALLOWED]
    assert not typed, f"{page.stem}: glue these numbers or allow-list them with a reason: {typed}"


def test_allow_list_is_short_and_used() -> None:
    assert len(ALLOWED) <= 30 and all(len(why) > 10 for why in ALLOWED.values())
    found = {(page.stem, n) for page in PAGES for n, _ in typed_numbers(page)}
    assert not set(ALLOWED) - found, f"stale allow-list entries: {sorted(set(ALLOWED) - found)}"


def test_the_search_finds_typed_numbers() -> None:
    page = "---\nfront: 1.5\n---\nA typed 0.91 and $R^2 > 0.99$, not $p = 0.05$, $w(0.05)$ or {glue:text}`x:.2f`.\n"
    page += "```{code-cell} ipython3\nx = 0.5\n```\n$$\nG = 0.25\n$$\nLlama-3.1-8B\n"
    assert [m.group() for m in _NUMBER.finditer(prose(page))] == ["0.91", "0.99"]
