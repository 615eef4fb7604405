"""The Colab notebook generator turns each MyST construct the chapters use into plain Markdown."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from conftest import load_colab, load_tool

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


# --- the notebooks the site publishes for Colab (tools/colab_publish.py) -------------------------

ROOT = Path(__file__).resolve().parents[1]

INSTALL = """# Install the book's package only when it is missing (a fresh Colab runtime).
try:
    import stddial_book
except ImportError:
    %pip install -q \\
        "stddial-book @ git+https://github.com/org/book"
    import stddial_book"""

PAGE = f"""# Title

At $G = 8$, {{glue:text}}`share:.0%` of the pool is silent; the recipe is {{glue:text}}`recipe`, and the
settings that differ are {{glue:md}}`differ`.

```{{code-cell}} ipython3
:tags: [remove-cell]
{INSTALL}
```

```{{code-cell}} ipython3
print("hello")
```

```{{code-cell}} ipython3
share = 0.4375
```
"""

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def load_publish():
    return load_tool("colab_publish")


@pytest.fixture
def publisher(monkeypatch):
    """tools/colab_publish.py, its generator given a runtime line for the fixture's page."""
    module = load_publish()
    monkeypatch.setitem(module._load_colab().RUNTIME, "chapters/01_x", ("a GPU helps", "a CPU is fine"))
    return module


def executed_fixture(tmp_path: Path, chapter: Path, image_bytes: int = 64) -> Path:
    """What a site build leaves for the page: its executed notebook and its glued values."""
    import base64

    import jupytext

    executed = tmp_path / "_build" / "jupyter_execute"
    (executed / "chapters").mkdir(parents=True)
    cells = []
    for cell in jupytext.read(chapter).cells:
        if cell.cell_type != "code":
            cells.append(nbformat.v4.new_markdown_cell(cell.source))
            continue
        new = nbformat.v4.new_code_cell(cell.source, execution_count=len(cells))
        if "hello" in cell.source:
            png = base64.b64encode(b"\x89PNG" + b"\x00" * image_bytes).decode()
            new.outputs = [
                nbformat.v4.new_output("stream", name="stdout", text="hello\n"),
                nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"}),
            ]
        cells.append(new)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), executed / "chapters" / "01_x.ipynb")
    glue = {
        "share": {"output_type": "display_data", "metadata": {}, "data": {"text/plain": "0.4375"}},
        "recipe": {"output_type": "display_data", "metadata": {}, "data": {"text/plain": "'dr_grpo'"}},
        "differ": {
            "output_type": "display_data",
            "metadata": {},
            "data": {"text/markdown": "`loss_type` and `scale_rewards`", "text/plain": "<Markdown>"},
        },
    }
    (executed / "chapters" / "01_x.glue.json").write_text(json.dumps(glue))
    return executed


def make_published_book(tmp_path: Path, page: str = PAGE) -> Path:
    chapter = make_book(tmp_path, page)
    (tmp_path / "_config.yml").write_text(CONFIG + "repository:\n  url: https://github.com/org/book\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1.2.3"\n')
    return chapter


def test_the_published_notebook_reads_as_the_site(tmp_path: Path, publisher) -> None:
    chapter = make_published_book(tmp_path)
    executed = executed_fixture(tmp_path, chapter)
    notebook, left_out = publisher.published_notebook(chapter, tmp_path, executed, COMMIT)
    nbformat.validate(notebook)
    text = markdown_of(notebook)
    marker = f'<abbr title="{colab.SITE_VALUE}">'
    # the values as the site formats them (myst-nb's format spec, the repr's quotes gone, Markdown kept),
    # each marked as the site's, and no MyST left
    assert f"{marker}44%</abbr> of the pool" in text
    assert f"{marker}dr\\_grpo</abbr>" in text
    assert f"{marker}`loss_type` and `scale_rewards`</abbr>" in text
    assert "{glue" not in text and not MYST_RESIDUE.search(text)
    # the note says whose numbers they are and which commit built them
    assert "published site's" in notebook.cells[1].source and COMMIT[:12] in notebook.cells[1].source
    # the build's outputs, cell for cell
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert [len(c.outputs) for c in code] == [0, 2, 0]
    assert code[1].outputs[0]["text"] == "hello\n" and "image/png" in code[1].outputs[1]["data"]
    assert code[0].metadata["tags"] == ["remove-cell"]  # as the generated notebook has it
    # the install pinned to the build's commit, then the runtime check
    assert f'"stddial-book @ git+https://github.com/org/book@{COMMIT}"' in code[0].source
    assert "torch.cuda.is_available()" in code[0].source and "a GPU helps" in code[0].source
    assert not left_out


def test_the_committed_notebook_installs_the_release_from_the_package_index(tmp_path: Path, publisher) -> None:
    chapter = make_published_book(tmp_path)
    notebook = publisher._load_colab().colab_notebook(chapter, tmp_path)
    install = next(c for c in notebook.cells if c.cell_type == "code")
    assert '"stddial-book==1.2.3"' in install.source and "git+" not in install.source
    assert "`share`" in markdown_of(notebook)  # names in code type, no site values
    assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code")


@pytest.mark.parametrize("ref", ["main", "gh-pages", "0123abc", "HEAD", "v1.x", "v0.1.0", "1.x", ""])
def test_an_install_never_pins_a_branch_or_a_tag(ref: str) -> None:
    with pytest.raises(ValueError, match="released version"):
        colab.pin_install(INSTALL, ref, "chapters/01_introduction")


@pytest.mark.parametrize("ref", ["1", "0.1.0", "2.0.0rc1", "1.0.post1"])
def test_a_release_is_installed_from_the_package_index(ref: str) -> None:
    source = colab.pin_install(INSTALL, ref, "chapters/01_introduction")
    assert f'"stddial-book=={ref}"' in source and "git+" not in source


def test_a_commit_is_installed_from_github() -> None:
    assert f'"stddial-book @ git+https://github.com/org/book@{COMMIT}"' in colab.pin_install(
        INSTALL, COMMIT, "chapters/01_introduction"
    )


def test_a_page_without_a_runtime_line_fails() -> None:
    with pytest.raises(ValueError, match="RUNTIME"):
        colab.pin_install(INSTALL, "1.0.0", "chapters/99_new")


def test_the_runtime_check_runs_and_says_what_a_gpu_means() -> None:
    source = colab.pin_install(INSTALL, "1.0.0", "chapters/15_real_language_model")
    check = source[source.index("# What this runtime is") :]
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(check, {})
    gpu, cpu = colab.RUNTIME["chapters/15_real_language_model"]
    assert printed.getvalue().splitlines()[-1] in (gpu, cpu)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda page: page.replace('print("hello")', 'print("hello, again")'), "code cell 2 differs"),
        (lambda page: page + "\n```{code-cell} ipython3\nx = 1\n```\n", "4 code cells"),
        (lambda page: page.replace("{glue:text}`recipe`", "{glue:text}`missing`"), "glued no 'missing'"),
    ],
)
def test_a_stale_build_stops_the_publishing(tmp_path: Path, publisher, change, message: str) -> None:
    chapter = make_published_book(tmp_path)
    executed = executed_fixture(tmp_path, chapter)
    chapter.write_text(change(chapter.read_text()))  # the page changed after the build
    with pytest.raises(ValueError, match=message):
        publisher.published_notebook(chapter, tmp_path, executed, COMMIT)


def test_the_size_budget_leaves_out_the_largest_output(tmp_path: Path, publisher) -> None:
    chapter = make_published_book(tmp_path)
    executed = executed_fixture(tmp_path, chapter, image_bytes=300_000)
    budget = 0.1  # MiB: the figure alone is about 0.4 MiB
    notebook, left_out = publisher.published_notebook(chapter, tmp_path, executed, COMMIT, budget_mib=budget)
    assert len(left_out) == 1 and "image/png" in left_out[0]
    assert len(nbformat.writes(notebook)) + 1 <= budget * 2**20
    output = next(c for c in notebook.cells if c.cell_type == "code" and c.outputs).outputs[1]
    assert "on the website" in output["data"]["text/markdown"] and "01_x.html" in output["data"]["text/markdown"]
    with pytest.raises(ValueError, match="without any output"):
        publisher.published_notebook(chapter, tmp_path, executed, COMMIT, budget_mib=0.001)


def test_publish_writes_the_notebooks_and_a_record_make_publish_checks(tmp_path: Path, publisher) -> None:
    chapter = make_published_book(tmp_path)
    executed = executed_fixture(tmp_path, chapter)
    out = tmp_path / "_build" / "html" / publisher.PUBLISHED_DIR
    record = publisher.publish([chapter], tmp_path, executed, out, COMMIT)
    written = out / "chapters" / "01_x.ipynb"
    assert written.is_file() and record["notebooks"]["chapters/01_x.ipynb"]["bytes"] == written.stat().st_size
    assert publisher.check_published(out)["commit"] == COMMIT
    publisher.publish([chapter], tmp_path, executed, out, COMMIT, dirty=True)
    assert "uncommitted changes" in nbformat.read(written, as_version=4).cells[1].source
    with pytest.raises(ValueError, match="uncommitted changes"):
        publisher.check_published(out)


def test_the_launch_button_opens_the_published_notebook(tmp_path: Path) -> None:
    import importlib.util
    import re

    import yaml

    publish = load_publish()
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    url = publish.launch_url(config["repository"]["url"], "chapters/08_controlled_run")
    assert url == (
        "https://colab.research.google.com/github/std-dial/the-std-dial/blob/gh-pages/"
        "_colab/chapters/08_controlled_run.ipynb"
    )
    # make book writes the notebooks where that address points, in the site that goes to gh-pages
    book = (ROOT / "Makefile").read_text().split("\nbook:", 1)[1].split("\n\n", 1)[0]
    assert re.search(rf"tools/colab_publish\.py .*--out _build/html/{publish.PUBLISHED_DIR}\b", book)
    assert book.index("jupyter-book build") < book.index("colab_publish.py")
    assert publish.PUBLISHED_BRANCH == "gh-pages"
    # the build's hook rewrites the theme's Colab button into that address
    spec = importlib.util.spec_from_file_location("stddial_build", ROOT / "_ext" / "stddial_build.py")
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)

    class App:
        class config:
            html_theme_options = {
                "repository_url": config["repository"]["url"],
                "launch_buttons": {"colab_url": config["launch_buttons"]["colab_url"]},
            }

    button = {"text": "Colab", "url": "https://colab.research.google.com/github/std-dial/the-std-dial/blob/main/x"}
    context = {"header_buttons": [{"label": "launch-buttons", "buttons": [button]}]}
    ext.colab_to_published(App, "chapters/08_controlled_run", "page.html", context, None)
    assert button["url"] == url


def test_every_notebook_page_has_a_runtime_line() -> None:
    pages = load_publish().notebook_pages(ROOT)
    keys = [p.relative_to(ROOT).with_suffix("").as_posix() for p in pages]
    assert "chapters/15_real_language_model" in keys and "appendix/run_on_gpu" in keys
    assert sorted(keys) == sorted(colab.RUNTIME), "tools/colab.py's RUNTIME must name exactly the notebook pages"
    for gpu, cpu in colab.RUNTIME.values():
        assert gpu.strip() and cpu.strip()


def test_the_committed_notebooks_install_the_release() -> None:
    """The notebooks in main install stddial-book==<version> of pyproject.toml from the package index, never a
    branch or a tag (tests/test_release.py checks every pin of every page)."""
    version = colab.release_ref(ROOT)
    pages = load_publish().notebook_pages(ROOT)
    for page in pages:
        notebook = nbformat.read(page.with_suffix(".ipynb"), as_version=4)
        install = next(c.source for c in notebook.cells if c.cell_type == "code")
        assert f'"stddial-book=={version}"' in install, f"{page.name}: the install does not pin {version}"
        assert "torch.cuda.is_available()" in install


def test_outputs_come_from_the_execution_cache_when_the_build_read_the_page_from_it(tmp_path, publisher) -> None:
    """A page the build took from the execution cache is written to _build/jupyter_execute without its
    outputs; the publisher then takes them from the cache, matched on the code cells as the build
    matches them, and refuses a page whose outputs are nowhere."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    def notebook(with_outputs: bool):
        cell = nbformat.v4.new_code_cell("print('hello')", execution_count=1 if with_outputs else None)
        if with_outputs:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hello\n")]
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# a page"), cell])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        return nb

    rel = Path("chapters/01_x")
    kept = publisher._with_outputs(notebook(True), rel, None)
    assert kept.cells[1].outputs[0]["text"] == "hello\n"  # an executed notebook keeps its own
    with pytest.raises(ValueError, match="no outputs"):
        publisher._with_outputs(notebook(False), rel, tmp_path / "no-cache")
    cache_dir = tmp_path / "cache"
    get_cache(str(cache_dir)).cache_notebook_bundle(CacheBundleIn(notebook(True), "page.ipynb"), check_validity=False)
    merged = publisher._with_outputs(notebook(False), rel, cache_dir)
    assert merged.cells[1].outputs[0]["text"] == "hello\n"
    other = notebook(False)
    other.cells[1].source = "print('other')"  # different code: no match in the cache
    with pytest.raises(ValueError, match="stale build"):
        publisher._with_outputs(other, rel, cache_dir)
