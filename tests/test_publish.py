"""The site is published by the conventional GitHub Pages workflow, with the same build as CI.

The workflow cannot run here (no GitHub runner); these checks pin what can be checked offline:
it parses, it runs the Makefile's strict `book` target rather than a build of its own, it keeps
torch on the CPU build, and it deploys exactly the directory that target writes.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from stddial_book import LAYERS

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"


def _makefile_recipe(target: str) -> list[str]:
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"^{target}:", line))
    body = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        body.append(line.strip())
    return body


def _steps(workflow: dict, job: str) -> list[dict]:
    return workflow["jobs"][job]["steps"]


def test_the_workflow_parses_and_deploys_on_push_to_main() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert triggers["push"]["branches"] == ["main"]
    assert workflow["permissions"]["pages"] == "write" and workflow["permissions"]["id-token"] == "write"
    uses = [s.get("uses", "") for s in _steps(workflow, "build")]
    assert any(u.startswith("actions/upload-pages-artifact@") for u in uses)
    assert workflow["jobs"]["deploy"]["needs"] == "build"
    assert any(s.get("uses", "").startswith("actions/deploy-pages@") for s in _steps(workflow, "deploy"))


def test_the_workflow_runs_the_same_strict_build_as_the_makefile() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    runs = [s["run"] for s in _steps(workflow, "build") if "run" in s]
    assert any(line.strip() == "make book" for run in runs for line in run.splitlines())
    assert not any("jupyter-book build" in run for run in runs)  # no second, looser build command
    book = " ".join(_makefile_recipe("book"))
    assert re.search(r"jupyter-book build \. -W -n --keep-going", book)
    # what is deployed is what `make book` writes
    upload = next(s for s in _steps(workflow, "build") if s.get("uses", "").startswith("actions/upload-pages"))
    assert upload["with"]["path"] == "_build/html" and "_build/html" in book
    # torch stays the CPU build: installed from the CPU index before make installs requirements.txt
    pinned = re.search(r"^torch==(\S+)", (ROOT / "requirements.txt").read_text(), re.M).group(1)
    install = next(run for run in runs if "torch==" in run)
    assert f"torch=={pinned}" in install and "download.pytorch.org/whl/cpu" in install
    assert runs.index(install) < next(i for i, run in enumerate(runs) if "make book" in run)


def test_make_publish_pushes_the_built_site_with_ghp_import() -> None:
    recipe = " ".join(_makefile_recipe("publish"))
    assert "ghp-import" in recipe and "_build/html" in recipe


def test_the_site_also_goes_to_gh_pages_where_colab_opens_its_notebooks() -> None:
    """Colab opens a notebook from a branch of the repository: after deploying, the workflow runs
    `make publish`, which pushes the built site (with _colab/, the published notebooks) to gh-pages as
    one commit without parents, forced, so the branch never grows; and refuses a dirty build."""
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert workflow["permissions"]["contents"] == "write"
    runs = [s["run"] for s in _steps(workflow, "build") if "run" in s]
    book = next(i for i, run in enumerate(runs) if "make book" in run)
    publish = next(i for i, run in enumerate(runs) if any(line.strip() == "make publish" for line in run.splitlines()))
    assert book < publish
    recipe = _makefile_recipe("publish")
    push = next(line for line in recipe if "ghp-import" in line and "pip" not in line)
    assert re.search(r"\s-o\s", push) and re.search(r"\s-f\s", push) and push.endswith("_build/html")
    check = next(i for i, line in enumerate(recipe) if "colab_publish.py --check _build/html/_colab" in line)
    assert check < recipe.index(push)
    assert any("colab_publish.py" in line and "_build/html/_colab" in line for line in _makefile_recipe("book"))


def test_citation_file_is_valid_and_matches_the_package() -> None:
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"].startswith("1.2") and citation["title"] and citation["authors"]
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert str(citation["version"]) == version
    assert citation["url"] == yaml.safe_load((ROOT / "_config.yml").read_text())["html"]["baseurl"].rstrip("/") + "/"
    assert any("2607.00152" in str(ref) for ref in citation["references"])  # the paper the book reproduces


def test_the_front_page_lists_every_page_of_the_book() -> None:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [entry["file"] for part in toc["parts"] for entry in part["chapters"]]
    linked = set(re.findall(r"\]\(([^)#]+)\.md\)", (ROOT / "index.md").read_text()))
    assert [p for p in pages if p not in linked] == []


def test_build_tooling_lives_outside_the_package() -> None:
    """The site's Sphinx extensions are local extensions in _ext/ (each a module with a top-level
    setup; read, not imported, since the package's own environment need not have Sphinx) and the
    screenshot script and the Colab notebook generator are in tools/: the package holds no build tooling."""
    import ast

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    local = config["sphinx"]["local_extensions"]
    assert set(local) == {"stddial_mathjax", "stddial_build"}
    for name, folder in local.items():
        path = ROOT / folder / f"{name}.py"
        tree = ast.parse(path.read_text())
        assert any(isinstance(node, ast.FunctionDef) and node.name == "setup" for node in tree.body), (
            f"{path} has no Sphinx setup()"
        )
    # the only extensions from elsewhere are Sphinx's own, for the API reference (appendix/api.md)
    assert config["sphinx"]["extra_extensions"] == ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
    assert (ROOT / "tools" / "screenshots.py").is_file()
    package = {str(p.relative_to(ROOT / "stddial_book")) for p in (ROOT / "stddial_book").rglob("_*.py")}
    # no private module: only packages' __init__.py (the layers' and their subpackages') and __main__.py
    assert {p for p in package if not p.endswith("__init__.py")} == {"__main__.py"}, package
    assert {"__init__.py"} | {f"{layer}/__init__.py" for layer in LAYERS} <= package, package
    assert (ROOT / "tools" / "colab.py").is_file()
    assert {"_ext", "tools"} <= set(config["exclude_patterns"])


def test_the_stylesheet_the_build_adds_is_there() -> None:
    """stddial_build adds _ext/static/stddial.css to every page (code font and table wrapping that
    keep code and tables inside the text column); a missing file would only show as a 404."""
    source = (ROOT / "_ext" / "stddial_build.py").read_text()
    assert 'add_css_file("stddial.css")' in source
    css = (ROOT / "_ext" / "static" / "stddial.css").read_text()
    assert ".bd-article pre" in css and "overflow-wrap" in css
    assert "code.literal span.pre" in css  # a long name in running text breaks instead of sticking out
    assert (ROOT / "tools" / "overflow.py").is_file()


def test_the_site_has_one_search_box() -> None:
    """The theme puts a search field both in the page header and in the sidebar; the sidebar is
    given without its own (html_sidebars), so a reader sees one search box at every width."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    sidebars = config["sphinx"]["config"]["html_sidebars"]
    assert set(sidebars) == {"**"}
    assert "sbt-sidebar-nav.html" in sidebars["**"]  # the table of contents stays
    assert not any("search" in template for template in sidebars["**"])
