"""The Colab notebook generator turns each MyST construct the chapters use into plain Markdown."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from conftest import load_colab

colab = load_colab()
MYST_RESIDUE = colab.MYST_RESIDUE
colab_notebook = colab.colab_notebook

FRONT = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
    format_version: 0.13
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""

CONFIG = """html:
  baseurl: https://example.org/book
bibtex_bibfiles:
  - refs.bib
"""

BIB = """@article{smith2020one,
  title = {A {Title} with {\\'e}},
  author = {Smith, Ann and Jones, Bo and others},
  journal = {A Journal},
  year = {2020},
  url = {https://example.org/paper}
}
@article{lee2021two,
  title = {Second},
  author = {Lee, Cy and Park, Di},
  journal = {Other},
  year = {2021}
}
"""

MODULE = '''"""A module."""




def helper(x):
    """Return ``D{x}``."""
    return f"D{x}"


def other():
    return 2
'''


def make_book(tmp_path: Path, body: str) -> Path:
    (tmp_path / "_config.yml").write_text(CONFIG)
    (tmp_path / "refs.bib").write_text(BIB)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(MODULE)
    (tmp_path / "chapters").mkdir()
    chapter = tmp_path / "chapters" / "01_x.md"
    chapter.write_text(FRONT + body)
    return chapter


def markdown_of(notebook) -> str:
    return "\n\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")


def test_each_construct_becomes_plain_markdown(tmp_path: Path) -> None:
    body = """# Title

Value {glue:text}`ratio:.2f` and {glue:text}`name`, as {cite:p}`smith2020one,lee2021two` show.
See [chapter 2](02_y.md#part) and {doc}`the notation <../appendix/notation>`.

(sec-label)=
## Code

```{literalinclude} ../pkg/mod.py
:language: python
:pyobject: helper
```

```{note}
A note with {glue:text}`ratio`.
```

```{dropdown} Solution
Hidden answer.
```

```python
print(f"{x}`")
```

```{code-cell} ipython3
:tags: [remove-input]
x = 1
```
"""
    notebook = colab_notebook(make_book(tmp_path, body), tmp_path)
    text = markdown_of(notebook)
    assert "Value `ratio` and `name`" in text
    assert "(Smith et al., 2020; Lee and Park, 2021)" in text
    assert "[chapter 2](https://example.org/book/chapters/02_y.html#part)" in text
    assert "[the notation](https://example.org/book/appendix/notation.html)" in text
    assert 'def helper(x):\n    """Return ``D{x}``."""\n    return f"D{x}"\n```' in text
    assert "def other" not in text
    assert "> **Note.**\n> A note with `ratio`." in text
    assert "<details><summary>Solution</summary>" in text and "Hidden answer." in text
    assert 'print(f"{x}`")' in text  # ordinary code blocks are left alone
    assert "(sec-label)=" not in text
    refs = notebook.cells[-1].source
    assert refs.startswith("## References")
    assert "Ann Smith, Bo Jones et al. (2020). *A Title with é*. A Journal. <https://example.org/paper>" in refs
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert [c.source for c in code] == ["x = 1"] and code[0].metadata["tags"] == ["remove-input"]
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    assert "website" in notebook.cells[1].source  # the note on where the book lives
    nbformat.validate(notebook)


def test_regenerating_gives_the_same_file(tmp_path: Path) -> None:
    chapter = make_book(tmp_path, "# T\n\nText {cite:p}`lee2021two`.\n")
    assert nbformat.writes(colab_notebook(chapter, tmp_path)) == nbformat.writes(colab_notebook(chapter, tmp_path))


@pytest.mark.parametrize(
    "body, message",
    [
        ("Text {eq}`label`.\n", "{eq} role"),
        ("```{figure} x.png\n```\n", "{figure} directive"),
        ("Text {cite:p}`missing2020`.\n", "missing2020"),
        ("```{literalinclude} ../pkg/none.py\n```\n", "does not exist"),
        ("```{note}\nnever closed\n", "never closed"),
    ],
)
def test_unsupported_myst_fails_with_the_fix(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("{", r"\{").replace("}", r"\}")):
        colab_notebook(make_book(tmp_path, "# T\n\n" + body), tmp_path)


def test_residue_pattern_catches_roles_and_directives() -> None:
    assert MYST_RESIDUE.search("a {glue:text}`x` b")
    assert MYST_RESIDUE.search("```{note}\nx\n```")
    assert not MYST_RESIDUE.search("a `x` b and $\\{0, 1\\}$")
