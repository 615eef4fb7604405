"""The notebooks the Colab launch button opens: each notebook page as the published site shows it.

``tools/colab.py`` (``make sync``) writes the notebooks committed next to the chapters: plain Markdown, no
outputs, each number the text cites named in code type, the package pinned to the release on the package index. A reader
who opens one sees nothing until it has run. This module makes the notebook a reader opens from the
website instead, from the site build itself (``_build/jupyter_execute``, which ``jupyter-book build``
writes):

- the same generated notebook, with every ``{glue:text}``/``{glue:md}`` value the build glued put in
  the text, formatted as the site shows it and marked as the site's (the notebook's second cell says
  so, and names the build's commit);
- the outputs of the build's executed notebook in its code cells, figures included; the code cells
  correspond one to one and their code must be the page's own, or it stops (a stale build);
- the install cell pinned to the build's commit (``git rev-parse HEAD``), with its runtime check;
- at most :data:`BUDGET_MIB` MiB a notebook: over it, the largest outputs are left out, largest first,
  each replaced by a line pointing to the website; a notebook over budget without them stops it.

They are written into the site's output, ``_build/html/_colab/<page>.ipynb`` (``make book`` runs this
after the build), and travel with the site to the ``gh-pages`` branch (``make publish``, which the
Pages workflow runs too): Colab opens a notebook from a branch of a GitHub repository, and main's history
never holds the outputs. The theme's Colab button points at the committed notebook; ``_ext/stddial_build.py``
points it at :func:`launch_url` instead.

    python tools/colab_publish.py --allow-dirty            # every notebook page of _toc.yml (make book)
    python tools/colab_publish.py --check _build/html/_colab  # refuses a build from uncommitted changes
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "BUDGET_MIB",
    "PUBLISHED_BRANCH",
    "PUBLISHED_DIR",
    "build_commit",
    "check_published",
    "launch_url",
    "notebook_pages",
    "publish",
    "published_notebook",
]

ROOT = Path(__file__).resolve().parents[1]
#: Where the published notebooks go, in the site's output and so on the gh-pages branch.
PUBLISHED_DIR = "_colab"
#: The branch ``make publish`` pushes the site to, the one Colab opens the notebooks from.
PUBLISHED_BRANCH = "gh-pages"
#: The most a published notebook may weigh (MiB): a chapter's figures are a few hundred KB in all.
BUDGET_MIB = 3.0
COLAB_URL = "https://colab.research.google.com"
BUILD_RECORD = "build.json"

#: The kind of folder the published notebooks go to (:func:`stddial_book.core.outdir.claim_dir`).
OUT_KIND = "colab-notebooks"


@functools.cache
def _load_colab():
    """tools/colab.py, the generator, loaded from its file (tools/ is not a package), once."""
    spec = importlib.util.spec_from_file_location("colab", Path(__file__).with_name("colab.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def launch_url(repo_url: str, pagename: str, colab_url: str = COLAB_URL) -> str:
    """The Colab address of a page's published notebook: ``<colab>/github/<org>/<repo>/blob/gh-pages/_colab/
    <page>.ipynb`` (``pagename``: the page's path without suffix, as Sphinx names it)."""
    match = re.fullmatch(r"https://github\.com/(?P<org>[^/\s]+)/(?P<repo>[^/\s]+?)(?:\.git)?/?", repo_url or "")
    if not match:
        raise ValueError(f"Colab opens notebooks from GitHub; the repository URL {repo_url!r} is not a GitHub one.")
    return f"{colab_url.rstrip('/')}/github/{match['org']}/{match['repo']}/blob/{PUBLISHED_BRANCH}/{PUBLISHED_DIR}/{pagename}.ipynb"


def notebook_pages(root: Path = ROOT) -> list[Path]:
    """The pages of ``_toc.yml`` that are notebooks (a ``kernelspec`` in their front matter), in order."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text())

    def files(node: Any):
        if isinstance(node, dict):
            if "file" in node:
                yield node["file"]
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key) or []:
                    yield from files(child)

    pages = [root / (re.sub(r"\.(md|ipynb)$", "", name) + ".md") for name in files(toc)]
    return [p for p in pages if p.is_file() and re.search(r"^kernelspec:", p.read_text(), re.M)]


def build_commit(root: Path = ROOT) -> tuple[str, bool]:
    """(commit, dirty) of the checkout the site is built from: tracked files changed since the commit make
    it dirty (the notebooks then install a commit without those changes)."""

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise ValueError(
                f"git {' '.join(args)} failed in {root}: {out.stderr.strip()} (the site needs a checkout)."
            )
        return out.stdout.strip()

    commit = git("rev-parse", "HEAD")
    return commit, bool(git("status", "--porcelain", "--untracked-files=no"))


def _fill_outputs(notebook: Any, executed: Any, md_path: Path) -> None:
    """Copy the executed notebook's outputs into ``notebook``, cell for cell, after checking that the code
    cells are the page's own in the same order."""
    import jupytext

    page = [c for c in jupytext.read(md_path).cells if c.cell_type == "code"]
    ours = [c for c in notebook.cells if c.cell_type == "code"]
    built = [c for c in executed.cells if c.cell_type == "code"]
    if not len(page) == len(ours) == len(built):
        raise ValueError(
            f"{md_path.name}: the page has {len(page)} code cells and the build's executed notebook {len(built)}; "
            "the build is not of this page (run `make book`)."
        )
    for index, (source, cell, run) in enumerate(zip(page, ours, built)):
        if source.source.strip() != run.source.strip():
            raise ValueError(
                f"{md_path.name}: code cell {index + 1} differs from the build's executed notebook, which is older "
                f"than the page (run `make book`): {source.source.strip()[:80]!r}"
            )
        cell.outputs = [
            o
            for o in run.get("outputs", [])
            if not any(k.startswith("application/papermill.record/") for k in o.get("data", {}))
        ]
        cell.execution_count = run.get("execution_count")


def _size(notebook: Any) -> int:
    import nbformat

    return len((nbformat.writes(notebook) + "\n").encode())


def _enforce_budget(notebook: Any, budget: int, page_url: str) -> list[str]:
    """Leave out the largest outputs until the notebook weighs at most ``budget`` bytes; returns what was left out.
    Each is replaced by a line pointing to the page on the website."""
    import nbformat

    mib = f"{budget / 2**20:g}"
    note = f"*Output left out of this notebook to keep it under {mib} MiB: see it [on the website]({page_url}), or run the cell.*"
    left_out = []
    while _size(notebook) > budget:
        found = [
            (len(json.dumps(output)), index, k)
            for index, cell in enumerate(notebook.cells)
            if cell.cell_type == "code"
            for k, output in enumerate(cell.outputs)
            if output.get("data", {}).get("text/markdown") != note
        ]
        if not found:
            raise ValueError(
                f"the notebook weighs {_size(notebook)} bytes without any output, over the {mib} MiB budget."
            )
        size, index, k = max(found)
        kinds = sorted(notebook.cells[index].outputs[k].get("data", {})) or [
            notebook.cells[index].outputs[k].output_type
        ]
        notebook.cells[index].outputs[k] = nbformat.v4.new_output(
            "display_data", data={"text/markdown": note, "text/plain": note}
        )
        left_out.append(f"cell {index}: {size} bytes ({', '.join(kinds)})")
    return left_out


def _outputs_count(notebook) -> int:
    return sum(len(cell.get("outputs", [])) for cell in notebook.cells if cell.cell_type == "code")


def _with_outputs(executed, rel: Path, cache_dir: Path | None):
    """``executed`` with its outputs. A page the build read from the execution cache is written to
    ``_build/jupyter_execute`` without them (MyST-NB merges the cached outputs only into the page it
    renders), so they are taken from the cache (``cache_dir``, the book's ``execute.cache``) by the
    same match on the code cells that the build made."""
    if _outputs_count(executed) or cache_dir is None or not Path(cache_dir).is_dir():
        merged = executed
    else:
        from jupyter_cache import get_cache

        try:
            merged = get_cache(str(cache_dir)).merge_match_into_notebook(executed)[1]
        except KeyError:
            merged = executed
    if not _outputs_count(merged):
        raise ValueError(
            f"{rel}: the build's executed notebook has no outputs and the execution cache none for it "
            "(a stale build): run `make book` again."
        )
    return merged


def published_notebook(
    md_path: Path,
    root: Path,
    executed_dir: Path,
    commit: str,
    dirty: bool = False,
    budget_mib: float = BUDGET_MIB,
    cache_dir: Path | None = None,
) -> tuple[Any, list[str]]:
    """The published notebook of one page and what the size budget left out of it (outputs from the
    executed notebook, or from ``cache_dir``, the execution cache, where the build read the page from it)."""
    import nbformat

    colab = _load_colab()
    md_path, root = Path(md_path).resolve(), Path(root).resolve()
    rel = md_path.relative_to(root).with_suffix("")
    executed_path = Path(executed_dir) / f"{rel.as_posix()}.ipynb"
    if not executed_path.is_file():
        raise ValueError(f"{rel}: no executed notebook {executed_path} (run `jupyter-book build` / `make book` first).")
    executed = _with_outputs(nbformat.read(executed_path, as_version=4), rel, cache_dir)
    glue_path = executed_path.with_name(rel.name + ".glue.json")
    values = json.loads(glue_path.read_text()) if glue_path.is_file() else {}
    notebook = colab.colab_notebook(md_path, root, ref=commit, site_values=values, dirty=dirty)
    _fill_outputs(notebook, executed, md_path)
    if "widgets" in executed.metadata:  # the widgets' saved state, so that a viewer can draw them
        notebook.metadata["widgets"] = executed.metadata["widgets"]
    page_url = colab._site_config(root)["baseurl"] + f"{rel.as_posix()}.html"
    left_out = _enforce_budget(notebook, int(budget_mib * 2**20), page_url)
    nbformat.validate(notebook)
    return notebook, left_out


def publish(
    pages: list[Path],
    root: Path,
    executed_dir: Path,
    out: Path,
    commit: str,
    dirty: bool = False,
    budget_mib: float = BUDGET_MIB,
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """Write each page's published notebook under ``out`` (``out/<page>.ipynb``) and ``out/build.json`` (the
    commit, whether the tree was dirty, the budget, each notebook's size and what it left out)."""
    import nbformat

    from stddial_book.core.outdir import claim_dir, replace_own

    out = claim_dir(out, OUT_KIND)  # new, empty, or this tool's own folder; anything else refused
    record: dict[str, Any] = {"commit": commit, "dirty": dirty, "budget_mib": budget_mib, "notebooks": {}}
    for md in pages:
        notebook, left_out = published_notebook(md, root, executed_dir, commit, dirty, budget_mib, cache_dir)
        rel = Path(md).resolve().relative_to(Path(root).resolve()).with_suffix(".ipynb").as_posix()
        text = nbformat.writes(notebook) + "\n"
        replace_own(out, rel, text)  # by an atomic rename, never through a link
        record["notebooks"][rel] = {"bytes": len(text.encode()), "left_out": left_out}
    replace_own(out, BUILD_RECORD, json.dumps(record, indent=1) + "\n")
    return record


def check_published(out: Path, head: str | None = None) -> dict[str, Any]:
    """The build record of published notebooks; a ValueError when there is none, the build was dirty (its
    notebooks would install a commit that lacks what they show) or, given ``head`` (the commit checked out
    now), it names another commit (the site would be published as this commit's)."""
    path = Path(out) / BUILD_RECORD
    if not path.is_file() or path.is_symlink():
        raise ValueError(f"no {path}: the site has no published notebooks (run `make book`).")
    try:
        record = json.loads(path.read_text())
        commit = str(record["commit"])
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{path} is damaged; run `make book` again.") from None
    if head is not None and commit != head:
        raise ValueError(
            f"the site was built from {commit[:12]}, not from the commit checked out ({head[:12]}); "
            "run `make book` again, then `make publish`."
        )
    if record.get("dirty"):
        raise ValueError(
            f"the site was built from {record['commit'][:12]} with uncommitted changes: its Colab notebooks would "
            "install a commit without them. Commit, then `make book` again."
        )
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pages", nargs="*", type=Path, help="notebook pages (default: every one in _toc.yml)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the book's root (holds _config.yml and _toc.yml)")
    parser.add_argument(
        "--executed", type=Path, default=None, help="the build's executed notebooks (default: _build/jupyter_execute)"
    )
    parser.add_argument("--out", type=Path, default=None, help=f"where they go (default: _build/html/{PUBLISHED_DIR})")
    parser.add_argument(
        "--budget-mib", type=float, default=BUDGET_MIB, help=f"most MiB a notebook may weigh (default: {BUDGET_MIB:g})"
    )
    parser.add_argument(
        "--allow-dirty", action="store_true", help="build from uncommitted changes (the notebooks say so)"
    )
    parser.add_argument(
        "--check", type=Path, metavar="DIR", help="only check DIR's published notebooks come from a commit"
    )
    args = parser.parse_args(argv)
    try:
        if args.check is not None:
            record = check_published(args.check, head=build_commit(args.root.resolve())[0])
            print(f"published notebooks of commit {record['commit'][:12]}: {len(record['notebooks'])}")
            return 0
        root = args.root.resolve()
        commit, dirty = build_commit(root)
        if dirty and not args.allow_dirty:
            raise ValueError(
                f"the checkout at {commit[:12]} has uncommitted changes, which the notebooks' pinned commit lacks: "
                "commit them, or pass --allow-dirty (the notebooks then say so)."
            )
        if dirty:
            print(f"warning: built from {commit[:12]} with uncommitted changes; `make publish` will refuse this site.")
        pages = args.pages or notebook_pages(root)
        executed = args.executed or root / "_build" / "jupyter_execute"
        out = args.out or root / "_build" / "html" / PUBLISHED_DIR
        from stddial_book.core.outdir import check_claimable

        out = check_claimable(out, "--out", OUT_KIND)  # checked before any notebook is made
        cache = root / "_build" / ".jupyter_cache"  # _config.yml's execute.cache
        record = publish(pages, root, executed, out, commit, dirty, args.budget_mib, cache)
    except ValueError as err:
        print(f"colab_publish: {err}", file=sys.stderr)
        return 2
    for rel, entry in record["notebooks"].items():
        extra = f", left out {len(entry['left_out'])} outputs over budget" if entry["left_out"] else ""
        print(f"{rel}: {entry['bytes'] / 2**10:.0f} KiB{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
