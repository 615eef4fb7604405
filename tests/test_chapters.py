"""Every chapter of the book executes, and its paired .ipynb is in step with the .md.

Executing a chapter here is the same check the site build makes (a cell error fails), so a
broken chapter is caught by ``make test`` as well as by ``make book``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import time
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def toc_chapters() -> list[Path]:
    """The notebook chapters listed in _toc.yml (pages with a kernelspec), in order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [entry["file"] for part in toc["parts"] for entry in part["chapters"]]
    pages = [ROOT / f"{name}.md" for name in files]
    return [page for page in pages if re.search(r"^kernelspec:", page.read_text(), re.M)]


CHAPTERS = toc_chapters()


def test_toc_lists_the_chapters() -> None:
    names = [page.stem for page in CHAPTERS]
    assert names[:3] == ["01_introduction", "02_group_relative_rl", "03_identity_derivation"]
    assert all(page.exists() for page in CHAPTERS)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_colab_notebook_is_generated_from_the_chapter(chapter: Path) -> None:
    """The .ipynb Colab opens is exactly what stddial_book._colab makes of the .md, with the
    same code cells in the same order and no outputs."""
    from stddial_book._colab import colab_notebook

    paired = chapter.with_suffix(".ipynb")
    assert paired.exists(), f"{paired.name} is missing: run `make sync`"
    expected = nbformat.writes(colab_notebook(chapter, ROOT)) + "\n"
    assert paired.read_text() == expected, f"{paired.name} is out of date with {chapter.name}: run `make sync`"
    md_code = [c.source.strip() for c in jupytext.read(chapter).cells if c.cell_type == "code"]
    nb = nbformat.read(paired, as_version=4)
    assert [c.source.strip() for c in nb.cells if c.cell_type == "code"] == md_code
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_colab_notebook_has_no_myst(chapter: Path) -> None:
    """Colab renders markdown, not MyST: no role or directive may reach the reader's notebook."""
    text = chapter.with_suffix(".ipynb").read_text()
    for marker in ("{glue", "{literalinclude", "{cite", "{code-cell", "{note", "{bibliography", "{dropdown"):
        assert marker not in text, f"{chapter.with_suffix('.ipynb').name} contains {marker!r}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_first_cell_installs_only_when_missing(chapter: Path) -> None:
    """The first code cell installs the package from the repository named in _config.yml."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    url = config["repository"]["url"]
    first = next(c for c in jupytext.read(chapter).cells if c.cell_type == "code")
    assert "import stddial_book" in first.source and "except ImportError" in first.source
    assert f'"stddial-book @ git+{url}"' in first.source, "install URL differs from _config.yml"
    assert not re.search(r"(torch|numpy|transformers)\s*==", first.source)


@pytest.mark.chapters
@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_executes(chapter: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the kernel must pick its inline backend, as in the book and in Colab: with MPLBACKEND=Agg
    # (the tests' setting) a notebook shows no figure at all
    monkeypatch.delenv("MPLBACKEND", raising=False)
    notebook = _read_page(chapter)
    env_path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    os.environ["PATH"] = env_path  # the kernel must be this environment's Python
    # From an empty working directory, as a Colab reader runs it: a chapter must find its data
    # through the package, never through a path relative to the repository.
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(tmp_path)}})
    started = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - started
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    # every cell that draws a figure (a line "fig = ...") shows it: a figure lost to a backend
    # mix-up raises nothing, so check the outputs themselves
    for cell in notebook.cells:
        if cell.cell_type == "code" and re.search(r"^fig = ", cell.source, re.M):
            kinds = {key for out in cell.get("outputs", []) for key in out.get("data", {})}
            assert "image/png" in kinds, f"no figure shown by the cell:\n{cell.source[:200]}"
    # every {glue:text}`name` the prose uses was glued by a cell: recorded for myst-nb where it is
    # installed, and printed as "name = value" by stddial_book.display.glue outside the site build
    glued = set()
    for cell in notebook.cells:
        for out in cell.get("outputs", []):
            glued |= set(out.get("metadata", {}).get("scrapbook", {}).get("name", "").split())
            if out.get("output_type") == "stream":
                glued |= set(re.findall(r"^([A-Za-z0-9_]+) = ", out.get("text", ""), re.M))
    used = set(re.findall(r"\{glue:text\}`([A-Za-z0-9_]+)", chapter.read_text()))
    assert used <= glued, f"glue names used but never glued: {sorted(used - glued)}"
    # checked: the build may render these outputs instead of executing the page again
    if os.environ.get(BOOK_CACHE_ENV) and _EXEC_CACHE is not None:
        _EXEC_CACHE.store(notebook, chapter, seconds, Path(os.environ[BOOK_CACHE_ENV]))


#: ``make test`` sets this to the book's execution cache (tools/exec_cache.py): each chapter the
#: tests execute and check is stored there, parsed as the site build parses it, and ``make book``
#: renders it instead of executing the chapter a second time.
BOOK_CACHE_ENV = "STDDIAL_BOOK_CACHE"


def _load_exec_cache():
    """tools/exec_cache.py, where the build's parser (myst-nb) is installed; else None (the
    lowest-versions job, which has no Sphinx and never writes the book's cache)."""
    try:
        import myst_nb  # noqa: F401
    except ImportError:
        return None
    spec = importlib.util.spec_from_file_location("exec_cache", ROOT / "tools" / "exec_cache.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_EXEC_CACHE = _load_exec_cache()


def _read_page(chapter: Path):
    """The page as the site build reads it (myst-nb), or as jupytext reads it without Sphinx."""
    return _EXEC_CACHE.read_page(chapter) if _EXEC_CACHE is not None else jupytext.read(chapter)
