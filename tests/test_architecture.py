"""The package's shape: layers as subpackages, imports running one way, no cycle, short modules and
functions, no build tooling inside. Read from the sources (nothing is imported), so a violation
anywhere, deferred imports included, fails here with the file and line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import stddial_book

PACKAGE = Path(stddial_book.__file__).parent
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


def test_no_module_over_600_lines() -> None:
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


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
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES and not _is_table(node):
                    long.append(f"{name}.{node.name} ({size} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


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
