"""Device-correct by construction: every tensor and generator the package creates follows the
model's device, so a GPU run (Colab) works although the book is built and tested on a CPU.

A CPU cannot run CUDA code, so this is a static check over the package's source: every call of a
torch factory (``torch.tensor``, ``full``, ``zeros``, ``ones``, ``arange``, ``empty``, ``rand*``,
``as_tensor``, ``Generator``) passes ``device=``, ``*_like`` is used, or the line says
``# cpu-then-move`` and the function moves the result with ``.to(device)`` before returning it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "stddial_book"
FACTORIES = {
    "tensor",
    "full",
    "zeros",
    "ones",
    "arange",
    "empty",
    "rand",
    "randn",
    "randint",
    "as_tensor",
    "Generator",
    "linspace",
}


def factory_calls(path: Path):
    tree = ast.parse(path.read_text())
    lines = path.read_text().split("\n")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in FACTORIES:
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "torch":
                yield node, lines[node.lineno - 1]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_torch_factory_names_its_device(path: Path) -> None:
    offenders = []
    for node, line in factory_calls(path):
        has_device = any(k.arg == "device" for k in node.keywords)
        if not has_device and "# cpu-then-move" not in line:
            offenders.append(f"{path.name}:{node.lineno}: {line.strip()}")
    assert not offenders, "torch tensors created without device= (pass the model's device):\n" + "\n".join(offenders)


def test_the_check_catches_a_cpu_tensor(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n\ndef f(model):\n    return torch.zeros(3)\n")
    assert [n.lineno for n, line in factory_calls(bad) if not any(k.arg == "device" for k in n.keywords)] == [4]
