"""The package's shape: layers as subpackages, imports running one way, no cycle, short modules and
functions, no build tooling inside. Read from the sources (nothing is imported), so a violation
anywhere, deferred imports included, fails here with the file and line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import stddial_book

PACKAGE = Path(stddial_book.__file__).parent
REPO = Path(__file__).resolve().parents[1]  # tests/, tools/, bench/ (the package may be a wheel install)
LAYERS = stddial_book.LAYERS
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60


def modules() -> dict[str, Path]:
    """Dotted name (relative to the package) -> file, for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[0] == "data":  # the shipped data folder (a package only in a wheel install), no code
            continue
        found[".".join(parts)] = path
    return found


def package_imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported package module) for every import of the package in ``path``, at any depth."""
    known = modules()
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                raise AssertionError(f"{path}:{node.lineno}: relative import; the package imports by full name")
            module = node.module or ""
            if module == "stddial_book" or module.startswith("stddial_book."):
                base = module.removeprefix("stddial_book").removeprefix(".")
                for alias in node.names:
                    candidate = f"{base}.{alias.name}" if base else alias.name
                    out.append((node.lineno, candidate if candidate in known else base))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("stddial_book."):
                    out.append((node.lineno, alias.name.removeprefix("stddial_book.")))
    return out


def layer_of(module: str) -> int:
    """A module's floor: its layer's index; the top-level modules (cli, __main__, __init__) sit above all."""
    first = module.split(".")[0]
    return LAYERS.index(first) if first in LAYERS else len(LAYERS)


def graph() -> dict[str, set[str]]:
    return {name: {m for _, m in package_imports(path) if m and m != name} for name, path in modules().items()}


def test_every_module_lives_in_a_layer() -> None:
    top = sorted(name for name in modules() if "." not in name)
    assert top == ["__init__", "__main__", "cli"], top
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert sorted(packages - {"data"}) == sorted(LAYERS)  # data: the shipped files, in a wheel install


def test_imports_run_down_the_layers() -> None:
    upward = []
    for name, path in modules().items():
        for line, target in package_imports(path):
            if target and layer_of(target) > layer_of(name):
                upward.append(f"{path.relative_to(PACKAGE)}:{line} imports {target}")
    assert not upward, "imports running up the layers:\n" + "\n".join(upward)


def test_no_import_cycle() -> None:
    edges = graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            pytest.fail("import cycle: " + " -> ".join(cycle))


def test_the_checks_find_what_they_look_for(tmp_path) -> None:
    """The checks above are not vacuous: on a made-up package they see an upward import and a cycle."""
    edges = {"a": {"b"}, "b": {"a"}}
    assert any(x in edges[y] and y in edges[x] for x in edges for y in edges)
    assert layer_of("presentation.plots") > layer_of("core.checks") and layer_of("cli") == len(LAYERS)
    fake = tmp_path / "m.py"
    fake.write_text("def f():\n    from stddial_book.presentation.plots import dial_figure\n")
    assert package_imports(fake) == [(2, "presentation.plots")]
    assert len(graph()) == len(modules()) > 40


def docstring_lines(tree: ast.AST) -> set[int]:
    """The line numbers the docstrings of a parsed module span (the module's, each class's and each
    function's): the size limits below count code, so that documenting every parameter (the API page's
    rule) never pushes a module or a function over them."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def code_lines(path: Path) -> int:
    """A module's lines, its docstrings left out."""
    text = path.read_text(encoding="utf-8")
    return len(text.splitlines()) - len(docstring_lines(ast.parse(text)))


def test_no_module_over_600_lines() -> None:
    long = {name: n for name, path in modules().items() if (n := code_lines(path)) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines of code (docstrings aside): {long}"


def _is_table(node: ast.FunctionDef) -> bool:
    """A function whose body (docstring aside) is one return of a literal table (dict, list or tuple)."""
    body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return (
        len(body) == 1
        and isinstance(body[0], ast.Return)
        and isinstance(body[0].value, (ast.Dict, ast.List, ast.Tuple))
    )


def test_no_function_over_60_lines() -> None:
    long = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        documented = docstring_lines(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                span = set(range(node.lineno, node.end_lineno + 1))
                size = len(span - documented)
                if size > MAX_FUNCTION_LINES and not _is_table(node):
                    long.append(f"{name}.{node.name} ({size} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines of code (docstrings aside): {long}"


def test_the_size_limits_count_code_not_docstrings(tmp_path) -> None:
    """A function of 3 code lines under a 4-line docstring counts 3; the module's docstring is left out too."""
    fake = tmp_path / "m.py"
    fake.write_text('"""Module."""\n\n\ndef f(x):\n    """One.\n\n    Two.\n    """\n    y = x\n    return y\n')
    tree = ast.parse(fake.read_text())
    assert docstring_lines(tree) == {1, 5, 6, 7, 8}
    assert code_lines(fake) == 10 - 5


def test_no_build_tooling_in_the_package() -> None:
    tooling = ("jupytext", "nbformat", "nbclient", "sphinx", "ghp_import", "jupyter_cache", "subprocess")
    found = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found += [f"{name}: {n}" for n in names if n.split(".")[0] in tooling]
    # git: the commit of a recorded run's checkout and the files it tracks (the write policy)
    assert found == ["core.repository: subprocess"], found


def test_every_public_name_is_reachable_from_the_top() -> None:
    owners = stddial_book._owners()
    assert len(owners) > 300
    for name, mods in owners.items():
        if len(mods) == 1:
            assert name in dir(stddial_book)
    assert stddial_book.group_std is stddial_book.theory.identity.group_std
    with pytest.raises(AttributeError, match="no attribute"):
        stddial_book.no_such_name  # noqa: B018


def test_teaching_code_stands_alone() -> None:
    """The chapters' reference functions read top to bottom without the engine: the teaching layer
    imports nothing of the package but core (tests/test_teaching.py ties each to its engine twin)."""
    leaks = [
        f"{name}:{line} imports {target}"
        for name, path in modules().items()
        if name.startswith("teaching.")
        for line, target in package_imports(path)
        if target and not target.startswith(("teaching", "core"))
    ]
    assert not leaks, leaks


# --- private names stay in their module ----------------------------------------------------------

#: Imports of another module's private name, (importer, module, name): none remain, and it must stay empty.
PRIVATE_IMPORTS_ALLOWED: set = set()


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(path: Path) -> set[tuple[str, str, int]]:
    """(module, private name, line) for every private name of another package module that ``path``
    uses: imported by name (``from stddial_book.a.b import _x``, at any depth), or read as an attribute
    of an imported package module (``from stddial_book.a import b`` then ``b._x``)."""
    known = modules()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found, aliases = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("stddial_book"):
            base = node.module.removeprefix("stddial_book").removeprefix(".")
            for alias in node.names:
                if _is_private(alias.name):
                    found.add((base, alias.name, node.lineno))
                elif f"{base}.{alias.name}".lstrip(".") in known:
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}".lstrip(".")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("stddial_book.") and alias.asname:
                    aliases[alias.asname] = alias.name.removeprefix("stddial_book.")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and _is_private(node.attr)
        ):
            found.add((aliases[node.value.id], node.attr, node.lineno))
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    """A module's private names are its own: what another module needs is a public name (issue 33,
    item 5). None is allowed: PRIVATE_IMPORTS_ALLOWED is empty and stays so."""
    found = {}
    for name, path in modules().items():
        for module, private, line in private_imports(path):
            if module != name:
                found[(name, module, private)] = f"{path.relative_to(PACKAGE)}:{line} imports {module}.{private}"
    new = sorted(text for key, text in found.items() if key not in PRIVATE_IMPORTS_ALLOWED)
    assert not new, "private names imported across modules (make them public, or move the function):\n" + "\n".join(new)
    stale = sorted(PRIVATE_IMPORTS_ALLOWED - set(found))
    assert not stale, f"fixed, so remove them from PRIVATE_IMPORTS_ALLOWED: {stale}"


def test_the_private_import_check_sees_both_forms(tmp_path) -> None:
    fake = tmp_path / "m.py"
    fake.write_text(
        "from stddial_book.rl.sft import _made_up, sft\n"
        "from stddial_book.rl import trainer\n"
        "def f():\n    return trainer._hidden, trainer.train\n"
    )
    assert private_imports(fake) == {("rl.sft", "_made_up", 1), ("rl.trainer", "_hidden", 4)}


# --- the studies, and the registry of recipe names -------------------------------------------

#: The modules of ``experiments`` that are no study: what the studies share, and the build's record.
EXPERIMENTS_SHARED = {"statistics", "edition"}


def test_the_experiments_are_sorted_by_study() -> None:
    """``experiments`` holds one subpackage per study, named by the chapters' subject (DESIGN §4), beside
    the modules the studies share; each study says in its docstring what it serves."""
    folder = PACKAGE / "experiments"
    flat = {p.stem for p in folder.glob("*.py")} - {"__init__"}
    assert flat == EXPERIMENTS_SHARED, f"a module of experiments outside a study: {sorted(flat - EXPERIMENTS_SHARED)}"
    studies = sorted(p for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert len(studies) >= 6
    for study in studies:
        assert (study / "__init__.py").is_file(), f"{study.name} is not a package"
        assert ast.get_docstring(ast.parse((study / "__init__.py").read_text(encoding="utf-8"))), study.name
        assert not [p for p in study.iterdir() if p.is_dir() and p.name != "__pycache__"], f"{study.name} nests"


#: Files that still spell the three recipe keys out, with the reason: both are being rewritten in
#: parallel (issue 33: the language-model command line and the SmolLM2 recording tools).
RECIPE_LISTS_ALLOWED = {"stddial_book/bridges/lm_cli.py", "tools/ship_smollm2.py"}


def _recipe_lists(path: Path) -> list[int]:
    """The lines where ``path`` lists the three recipe keys as literals: a tuple, list or set of them, or
    a table (a dict of constants) keyed by them. A dict of computed values per recipe is data, not a list."""
    from stddial_book.theory.recipes import RECIPES

    keys, lines = set(RECIPES), []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Dict) and all(isinstance(v, ast.Constant) for v in node.values):
            items = node.keys
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        else:
            continue
        strings = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}
        if keys <= strings:
            lines.append(node.lineno)
    return lines


def test_one_registry_of_recipe_names() -> None:
    """The recipes are named once, in ``theory.recipes`` (``PRESETS`` and ``RECIPES``); the package, the
    tools and the benchmarks refer to that registry instead of listing the names again, and the figures'
    colours cover exactly its recipes."""
    from stddial_book.presentation.style import RECIPE_COLORS, RECIPE_NAMES
    from stddial_book.theory.recipes import PRESETS, RECIPES

    files = {f"stddial_book/{path.relative_to(PACKAGE).as_posix()}": path for path in PACKAGE.rglob("*.py")}
    files |= {
        path.relative_to(REPO).as_posix(): path
        for folder in ("tools", "bench")
        for path in (REPO / folder).glob("*.py")
    }
    listed = [
        f"{name}:{line}"
        for name, path in sorted(files.items())
        if name != "stddial_book/theory/recipes.py" and name not in RECIPE_LISTS_ALLOWED
        for line in _recipe_lists(path)
    ]
    assert not listed, "the recipe names listed again (use theory.recipes.RECIPES):\n" + "\n".join(listed)
    assert tuple(PRESETS) == RECIPES and set(RECIPE_NAMES) == set(RECIPES)
    assert set(RECIPE_COLORS) == {PRESETS[key].name for key in RECIPES}
    for allowed in RECIPE_LISTS_ALLOWED:  # the allowance is still needed, or it goes
        assert _recipe_lists(files[allowed]), f"{allowed} no longer lists the recipes: remove it from the allowance"


# --- the tests mirror the package ----------------------------------------------------------------

#: Test files named by a subject rather than by one module: properties across the package, the book and
#: its build, the recorded data, and one aspect of a module (``trainer_optimizer``). Any other test file
#: is named after a module (``test_<module>.py``, or ``test_<subpackage>_<module>.py`` where the module's
#: name alone is ambiguous), so that a module's tests are found by its name.
SUBJECT_TESTS = {
    "api_properties",  # malformed input to every public function
    "architecture",  # this file: the package's shape
    "audit_write_policy",  # every writing entry point under the write policy
    "bad_input",
    "bad_input_audit",
    "bench",  # bench/
    "chapters",  # the chapters executed
    "data",  # data/ and the wheel
    "device",  # the accelerator's path
    "dial_callback",  # bridges.dial_diagnostics.DialDiagnostics inside TRL's trainer
    "git_state",  # the provenance's record of the checkout
    "lm_pool_measure",  # bridges.lm_pool and lm_measure together
    "lm_processes",  # record-lm under several processes
    "prose_numbers",  # the numbers the prose states
    "publish",  # the site's publishing
    "quick_runs",  # the quick profile's runs the chapters read
    "ragged",  # ragged groups across the engine
    "recorded_runs",  # the recorded runs in data/runs
    "release",  # the release's pins
    "run_summaries",  # the numbers chapters 9-12 glue
    "smollm2_strict",  # chapter 15's strict recording in data/runs/smollm2/strict
    "sources",  # data/sources
    "statistics_scipy",  # experiments.statistics against scipy.stats
    "trainer_allocation",  # rl.trainer under every allocation rule
    "trainer_optimizer",  # rl.trainer's optimizer choice
}


def _module_names() -> set[str]:
    """What a test file may be named after: each module, subpackage and tool, and ``<subpackage>_<module>``."""
    names = {path.stem for path in (REPO / "tools").glob("*.py")}
    for dotted in modules():
        parts = [part for part in dotted.split(".") if part != "__init__"]
        names.update(parts)
        if len(parts) >= 2:
            names.add("_".join(parts[-2:]))
    return names


def test_tests_are_named_after_modules_or_subjects() -> None:
    tests = {path.stem.removeprefix("test_") for path in (REPO / "tests").glob("test_*.py")}
    stale = sorted(tests - _module_names() - SUBJECT_TESTS)
    assert not stale, f"tests named after no module (rename to test_<module>.py, or list the subject): {stale}"
    assert tests >= SUBJECT_TESTS, f"listed subjects without a test file: {sorted(SUBJECT_TESTS - tests)}"
