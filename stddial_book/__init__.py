"""The Std Dial: GRPO, Dr. GRPO and DAPO as three settings of one dial.

The book's package, in layers. Each layer imports only from the layers above it in this list:

* ``core``: argument checks, the output-directory policy, the shipped data files;
* ``theory``: the recipes' advantages, the identity's closed forms, silent groups, the group-size
  law, the SymPy derivation;
* ``teaching``: the short reference functions the chapters show, tied to the engine by tests;
* ``corpora``: solve-rate data (Big-Math, DeepScaleR, DAPO's Figure 3b) and what the closed forms
  make of it;
* ``rl``: the RL engine (task, model, rollout, losses, sampling, SFT, trainer, checkpoints, logs);
* ``experiments``: the controlled run, the cached testbed runs, recorded runs, statistics;
* ``bridges``: TRL;
* ``presentation``: figures, glue and tables, widgets.

``from stddial_book import name`` works for every public name of every layer (each module's
``__all__``): the module that defines it is imported on first use, so ``import stddial_book`` stays
cheap. ``python -m stddial_book`` is the command line (:mod:`stddial_book.cli`).
"""

from __future__ import annotations

import ast
import importlib
from functools import cache
from pathlib import Path

__version__ = "0.1.0"

#: The layers, in import order: a module may import from its own layer and the layers before it.
LAYERS = ("core", "theory", "teaching", "corpora", "rl", "experiments", "bridges", "presentation")


@cache
def _owners() -> dict[str, tuple[str, ...]]:
    """Public name -> the modules whose ``__all__`` lists it, read from the sources (nothing imported)."""
    owners: dict[str, list[str]] = {}
    root = Path(__file__).parent
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*.py")):  # a layer's modules, its subpackages' included
            module = ".".join((__name__, *path.relative_to(root).with_suffix("").parts))
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                    for name in ast.literal_eval(node.value):
                        owners.setdefault(name, []).append(module)
    return {name: tuple(modules) for name, modules in owners.items()}


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    modules = _owners().get(name)
    if not modules:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if len(modules) > 1:
        raise AttributeError(
            f"{name!r} is defined in several modules ({', '.join(modules)}); import it from one of them."
        )
    value = getattr(importlib.import_module(modules[0]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | {n for n, m in _owners().items() if len(m) == 1})
