"""The book's API reference page, ``appendix/api.md``, generated from the package's public names.

Every module of the layers that has an ``__all__`` gets a section. A module whose docstrings pass the
site's strict build (``-W -n``: every cross-reference resolves, no reST error) is documented in full by
Sphinx autodoc (``:members:`` follows its ``__all__``); a module in :data:`SIGNATURES_ONLY`, whose
docstrings do not pass it yet, gets each public name as a target only (so that references to it resolve),
with no docstring. Move a module out of that list once its docstrings are fixed.

Run ``python tools/api_page.py`` to regenerate; ``tests/test_api_page.py`` checks the committed page is
what this writes.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "appendix" / "api.md"
LAYERS = ("core", "theory", "teaching", "corpora", "rl", "experiments", "bridges", "presentation")

#: Modules whose docstrings do not pass the strict build yet (unresolved short references such as
#: ``:func:`trl_gaps``` for a name of another module, ``|A|`` read as a reST substitution, Google-style
#: "Returns:" prose read as a type): listed by name only.
SIGNATURES_ONLY: tuple[str, ...] = (
    "stddial_book.bridges.dial_diagnostics",
    "stddial_book.bridges.lm_diagnostics",
    "stddial_book.bridges.lm_pool",
    "stddial_book.bridges.lm_run",
    "stddial_book.bridges.trl_allocation",
    "stddial_book.bridges.trl_check",
    "stddial_book.bridges.trl_differences",
    "stddial_book.core.outdir",
    "stddial_book.corpora.histograms",
    "stddial_book.corpora.math500",
    "stddial_book.corpora.reader_pool",
    "stddial_book.corpora.solve_tables",
    "stddial_book.experiments.ablation.pooled",
    "stddial_book.experiments.ablation.report",
    "stddial_book.experiments.ablation.study",
    "stddial_book.experiments.allocation.controlled_run",
    "stddial_book.experiments.allocation.signal",
    "stddial_book.experiments.allocation.testbed_runs",
    "stddial_book.experiments.controlled.study",
    "stddial_book.experiments.diagnose.report",
    "stddial_book.experiments.identity.report",
    "stddial_book.experiments.reproduction.checks",
    "stddial_book.experiments.reproduction.results",
    "stddial_book.experiments.reproduction.row",
    "stddial_book.experiments.smollm2.study",
    "stddial_book.experiments.statistics",
    "stddial_book.experiments.testbed.numbers",
    "stddial_book.experiments.testbed.predictions",
    "stddial_book.experiments.testbed.record",
    "stddial_book.experiments.testbed.refill",
    "stddial_book.experiments.testbed.runs",
    "stddial_book.presentation.display",
    "stddial_book.presentation.identity_plots",
    "stddial_book.presentation.intuition",
    "stddial_book.presentation.lm_figures",
    "stddial_book.presentation.style",
    "stddial_book.rl.allocation_base",
    "stddial_book.rl.checkpoints",
    "stddial_book.rl.configs",
    "stddial_book.rl.costs",
    "stddial_book.rl.model",
    "stddial_book.rl.pool_state",
    "stddial_book.rl.rollout",
    "stddial_book.rl.runlog",
    "stddial_book.teaching.aggregation",
    "stddial_book.teaching.worked_step",
    "stddial_book.theory.derivation",
    "stddial_book.theory.group_size",
    "stddial_book.theory.identity",
    "stddial_book.theory.recipes",
    "stddial_book.theory.silent",
)

INTRO = """# API reference

Every public name of the package, by layer and module, generated from each module's `__all__`
(`tools/api_page.py`). Each name is listed by one module only and is importable from the top
level too, `from stddial_book import <name>`, as the same object. The modules whose docstrings
pass the site's strict build are documented in full; the others (their docstrings still raise
warnings) list their names only, and `help(<name>)` shows their docstrings.
"""


def public_modules(root: Path = ROOT) -> list[str]:
    """Every module of the layers that declares ``__all__``, in layer order, read without importing."""
    found = []
    for layer in LAYERS:
        for path in sorted((root / "stddial_book" / layer).rglob("*.py")):  # subpackages' modules included
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if any(
                isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets)
                for node in tree.body
            ):
                found.append(".".join(path.relative_to(root).with_suffix("").parts))
    return found


def _target(module: str, name: str) -> str:
    """A name of a module in SIGNATURES_ONLY, as a Python-domain target without a docstring."""
    value = getattr(importlib.import_module(module), name)
    kind = "py:class" if inspect.isclass(value) else "py:function" if callable(value) else "py:data"
    return f".. {kind}:: {name}\n   :no-contents-entry:\n"


def page_text(root: Path = ROOT) -> str:
    modules = public_modules(root)
    unknown = sorted(set(SIGNATURES_ONLY) - set(modules))
    if unknown:
        raise ValueError(f"SIGNATURES_ONLY names modules with no __all__: {unknown}; remove them from the list.")
    parts = [INTRO]
    for layer in LAYERS:
        in_layer = [m for m in modules if m.split(".")[1] == layer]
        if not in_layer:
            continue
        parts.append(f"## `{layer}`\n")
        for module in in_layer:
            if module in SIGNATURES_ONLY:
                names = importlib.import_module(module).__all__
                parts.append(f"### `{module}`\n\nNames only (its docstrings do not pass the strict build yet).\n")
                targets = "\n".join(_target(module, name) for name in names)
                parts.append(f"```{{eval-rst}}\n.. py:module:: {module}\n\n{targets}```\n")
            else:  # docstrings are reST: eval-rst, so that MyST does not parse them
                parts.append(f"### `{module}`\n\n```{{eval-rst}}\n.. automodule:: {module}\n   :members:\n```\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if appendix/api.md is out of date")
    args = parser.parse_args(argv)
    text = page_text()
    if args.check:
        if PAGE.read_text(encoding="utf-8") != text:
            raise SystemExit("appendix/api.md is out of date: run python tools/api_page.py")
        return
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
