"""The notebook a Colab reader opens: a chapter's ``.ipynb`` generated from its MyST ``.md``.

The book is written in MyST (``chapters/NN_name.md``); Jupyter Book renders its roles and
directives, but Colab and Jupyter show them as literal text. This module writes, next to each
chapter, an ``.ipynb`` with the same code cells and markdown that reads cleanly anywhere:

- ``{glue:text}`name:fmt``` (and ``{glue:md}`name```) becomes the name in code type; the cell that computes the value
  prints it there (:func:`stddial_book.presentation.display.glue` shows glued values outside the site build).
  Given the values a site build glued (``site_values``, what ``tools/colab_publish.py`` passes), it becomes
  that value instead, formatted as the site shows it and marked as the site's;
- ``{literalinclude}`` becomes a fenced code block holding the included lines (read with
  Sphinx's own reader, so the options mean what they mean in the book);
- ``{cite:p}`` becomes "(Author et al., year)", and a References cell closes the notebook;
- admonitions become block quotes, dropdowns ``<details>``, links to other pages point at
  the website, ``(label)=`` targets and ``%`` comments are dropped.

The install cell (the chapter's first code cell, ``"stddial-book @ git+URL"`` in the source) is pinned: the
notebooks committed next to the chapters install the release ``stddial-book==<version>`` of ``pyproject.toml``
from the package index (as d2l's notebooks install ``d2l==<version>``; the release workflow publishes it when
the tag ``v<version>`` is pushed); the published ones, whose text and numbers come from a site build that may
be newer than the latest release, install from GitHub at the build's commit, and say so. Never a branch. It also gets a few lines that say whether the runtime
has a GPU and what that means for this page (:data:`RUNTIME`, one entry per notebook page).

Anything else MyST-specific raises :class:`ValueError`, so a new construct in a chapter fails
``make sync`` and the tests until it has a plain-Markdown form here.

Run ``python tools/colab.py`` (``make sync``) to regenerate; ``tests/test_chapters.py``
checks that the committed notebooks equal what this module generates.
"""

from __future__ import annotations

import argparse
import codecs
import copy
import re
from pathlib import Path
from typing import Any

__all__ = ["colab_notebook", "write_colab_notebooks", "MYST_RESIDUE", "RUNTIME", "pin_install", "release_ref"]

#: Text that must not appear in a generated notebook (MyST roles and directives).
MYST_RESIDUE = re.compile(r"\{[a-z][a-z:-]*\}`|^\s*(```+|:::+)\s*\{[a-z]", re.M)

ADMONITIONS = {
    "note",
    "tip",
    "hint",
    "important",
    "warning",
    "caution",
    "attention",
    "danger",
    "error",
    "seealso",
    "admonition",
}
FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[a-z-]+)\}(?P<arg>[^\n]*)$")
ROLE = re.compile(r"\{(?P<role>[a-z][a-z:-]*)\}`(?P<body>[^`]*)`")

#: The install line of a page's first code cell, as the chapters write it (unpinned).
INSTALL = re.compile(r'"stddial-book @ git\+(?P<url>https://[^"@\s]+)"')
#: A released version, as the package index names it (0.1.0, 1.2.0rc1, 1.0.post1).
VERSION = re.compile(r"\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?")
#: A full commit id: what a published notebook installs from GitHub.
COMMIT = re.compile(r"[0-9a-f]{40}")

#: The title of the marker on each number a published notebook takes from the site.
SITE_VALUE = "the published site's value; the cells below recompute it"

_CPU_PAGE = (
    "This page runs on a CPU (closed forms, NumPy and the data shipped with the package); a GPU changes nothing here."
)
_LIVE_GPU = (
    "With STDDIAL_PROFILE unset, a GPU selects the `full` profile: this page then trains {what} at GPU scale, runs "
    "not recorded for this edition. For the website's runs, set STDDIAL_PROFILE=quick before "
    "the first cell."
)
_LIVE_CPU = (
    "The `quick` profile runs, as on the website: this page trains {what} on the CPU, in minutes (the first "
    "training page opened in a runtime also trains chapter 9's warm start)."
)
#: What a GPU means for each notebook page (its path without suffix): (with a GPU, without one).
#: The install cell prints the line that applies; tests/test_colab.py checks every page has one.
RUNTIME: dict[str, tuple[str, str]] = {
    "chapters/01_introduction": (
        "Nothing on this page trains; with a GPU the training chapters (9 to 14) pick the `full` profile, "
        "and this page reports that choice.",
        "Nothing on this page trains; the training chapters will run the `quick` profile, as the website does.",
    ),
    "chapters/02_group_relative_rl": (_CPU_PAGE, _CPU_PAGE),
    "chapters/03_identity_derivation": (_CPU_PAGE, _CPU_PAGE),
    "chapters/04_identity_real_gradients": (
        "Its tiny transformer and SmolLM2-135M-Instruct run on the CPU in float64; a GPU changes nothing here.",
        "Its tiny transformer and SmolLM2-135M-Instruct run on the CPU in float64, as on the website (a minute "
        "or two for SmolLM2's check).",
    ),
    "chapters/05_silent_prompts": (_CPU_PAGE, _CPU_PAGE),
    "chapters/06_what_the_division_optimises": (_CPU_PAGE, _CPU_PAGE),
    "chapters/07_silent_fraction_real_data": (_CPU_PAGE, _CPU_PAGE),
    "chapters/08_controlled_run": (
        "The controlled run is NumPy on the CPU; a GPU changes nothing here.",
        "The controlled run is NumPy on the CPU, as on the website.",
    ),
    "chapters/09_testbed": (
        _LIVE_GPU.format(what="the SFT warm start and GRPO's runs"),
        _LIVE_CPU.format(what="the SFT warm start and GRPO's runs"),
    ),
    "chapters/10_grpo_run": (_LIVE_GPU.format(what="GRPO's runs"), _LIVE_CPU.format(what="GRPO's runs")),
    "chapters/11_dr_grpo_run": (_LIVE_GPU.format(what="Dr. GRPO's runs"), _LIVE_CPU.format(what="Dr. GRPO's runs")),
    "chapters/12_dapo_run": (_LIVE_GPU.format(what="DAPO's runs"), _LIVE_CPU.format(what="DAPO's runs")),
    "chapters/13_comparison": (
        _LIVE_GPU.format(what="the runs of chapters 10 to 12 this runtime does not have yet"),
        _LIVE_CPU.format(what="the runs of chapters 10 to 12 this runtime does not have yet")
        + " The recorded reference runs are read from the package.",
    ),
    "chapters/14_dial_in_trl": (
        _LIVE_GPU.format(what="a run of the book's trainer and TRL's short run of the same recipe"),
        _LIVE_CPU.format(what="a run of the book's trainer and TRL's short run of the same recipe"),
    ),
    "chapters/15_real_language_model": (
        "This page reads the recorded SmolLM2 runs and runs a tiny model. On this GPU, record-lm --preset smollm2 "
        "(tools/record_smollm2.py) records SmolLM2's runs in minutes, and the call 'The GPU run' shows trains "
        "Qwen2.5-0.5B-Instruct on GSM8K; the page estimates that one's time on a T4.",
        "This page reads the recorded SmolLM2 runs and runs a tiny model on the CPU. SmolLM2's runs take about a "
        "minute a step on one CPU core; on a GPU runtime (Runtime > Change runtime type > T4 GPU) they take "
        "minutes, and the call 'The GPU run' shows trains Qwen2.5-0.5B-Instruct on GSM8K.",
    ),
    "chapters/16_spending_samples": (_CPU_PAGE, _CPU_PAGE),
    "appendix/reproduction": (_CPU_PAGE, _CPU_PAGE),
    "appendix/this_edition": (
        "This page reports the machine it runs on: with a GPU, it names the GPU and the `full` profile.",
        "This page reports the machine it runs on; the website's build ran on a CPU too.",
    ),
    "appendix/run_on_gpu": (
        "This page only computes estimates; the commands it shows are the ones to run on this GPU.",
        "This page only computes estimates; the runs it describes need a GPU runtime.",
    ),
}


def _print(message: str, indent: str) -> str:
    """A ``print`` of ``message``, its literal wrapped over lines of the cell."""
    import textwrap

    parts = textwrap.wrap(message, 88, break_on_hyphens=False)
    literals = [repr(part + " ") for part in parts[:-1]] + [repr(parts[-1])]
    return f"{indent}print(" + f"\n{indent}      ".join(literals) + ")"


def _runtime_check(gpu: str, cpu: str) -> str:
    """The lines after the install: whether the runtime has a GPU, and what that means for the page."""
    lines = ["", "", "# What this runtime is, and what that means for this page.", "import torch", ""]
    if gpu == cpu:
        lines.append(
            'print(f"GPU: {torch.cuda.get_device_name(0)}." if torch.cuda.is_available() '
            'else "No GPU: this runtime computes on its CPU.")'
        )
        lines.append(_print(gpu, ""))
    else:
        lines += ["if torch.cuda.is_available():", '    print(f"GPU: {torch.cuda.get_device_name(0)}.")']
        lines += [_print(gpu, "    "), "else:", '    print("No GPU: this runtime computes on its CPU.")']
        lines.append(_print(cpu, "    "))
    return "\n".join(lines)


def release_ref(root: str | Path) -> str:
    """The release the committed notebooks install from the package index: the version of ``pyproject.toml``."""
    import tomllib

    return tomllib.loads((Path(root) / "pyproject.toml").read_text())["project"]["version"]


def pin_install(source: str, ref: str, page: str) -> str:
    """The install cell ``source`` with its ``stddial-book @ git+URL`` pinned to ``ref`` and the runtime check
    of ``page`` (a :data:`RUNTIME` key) after it; ``source`` unchanged when it installs nothing.

    ``ref`` is a released version (``1.2.3``: ``stddial-book==1.2.3`` from the package index) or a full commit
    id (the package from GitHub at that commit), never a branch or a tag."""
    if not INSTALL.search(source):
        return source
    if COMMIT.fullmatch(ref):
        requirement = lambda m: f'"stddial-book @ git+{m["url"]}@{ref}"'
    elif VERSION.fullmatch(ref):
        requirement = lambda m: f'"stddial-book=={ref}"'
    else:
        raise ValueError(
            f"{page}: the install must pin a released version (1.2.3, as pyproject.toml has it) or a full commit "
            f"id, not {ref!r}."
        )
    if page not in RUNTIME:
        raise ValueError(f"{page}: no entry in RUNTIME (tools/colab.py): say what a GPU means for this page.")
    pinned = INSTALL.sub(requirement, source, count=1)
    gpu, cpu = RUNTIME[page]
    return pinned.rstrip() + _runtime_check(gpu, cpu)


def _site_config(root: Path) -> dict[str, Any]:
    import yaml

    config = yaml.safe_load((root / "_config.yml").read_text())
    base = (config.get("html", {}) or {}).get("baseurl")
    if not base:
        raise ValueError("_config.yml needs html.baseurl (the site's address) for links in the Colab notebooks.")
    repository = ((config.get("repository") or {}).get("url") or "").rstrip("/")
    return {"baseurl": base.rstrip("/") + "/", "bibfiles": config.get("bibtex_bibfiles", []), "repository": repository}


def _latex_to_text(text: str) -> str:
    import latexcodec  # noqa: F401  (registers the "ulatex" codec; installed with pybtex)

    text = codecs.decode(text, "ulatex")
    return text.replace("{", "").replace("}", "").replace("--", "–")


class _Bibliography:
    """The entries of the book's .bib files, rendered as plain Markdown."""

    def __init__(self, paths: list[Path]):
        from pybtex.database import parse_file

        self.entries: dict[str, Any] = {}
        for path in paths:
            self.entries.update(parse_file(str(path)).entries)

    def _entry(self, key: str):
        if key not in self.entries:
            raise ValueError(f"citation key {key!r} is not in references.bib; add the entry or fix the key.")
        return self.entries[key]

    def _authors(self, key: str) -> list[str]:
        return [_latex_to_text(" ".join(p.last_names)) for p in self._entry(key).persons.get("author", [])]

    def label(self, key: str) -> str:
        """'Shao et al., 2024'."""
        entry = self._entry(key)
        names = self._authors(key)
        if not names:
            who = "Anonymous"
        elif len(names) == 1 and names[0] != "others":
            who = names[0]
        elif len(names) == 2 and names[1] != "others":
            who = f"{names[0]} and {names[1]}"
        else:
            who = f"{names[0]} et al."
        return f"{who}, {entry.fields.get('year', 'n.d.')}"

    def reference(self, key: str) -> str:
        """One line of the References cell."""
        entry = self._entry(key)
        people = entry.persons.get("author", [])
        names = ", ".join(
            _latex_to_text(" ".join(p.first_names + p.middle_names + p.prelast_names + p.last_names))
            for p in people
            if " ".join(p.last_names) != "others"
        )
        if any(" ".join(p.last_names) == "others" for p in people):
            names += " et al."
        title = _latex_to_text(entry.fields.get("title", ""))
        venue = _latex_to_text(
            entry.fields.get("journal", entry.fields.get("booktitle", entry.fields.get("howpublished", "")))
        )
        url = entry.fields.get("url")
        parts = [f"{names} ({entry.fields.get('year', 'n.d.')}). *{title}*."]
        if venue:
            parts.append(f"{venue}.")
        if url:
            parts.append(f"<{url}>")
        return " ".join(parts)


def _include(directive_arg: str, options: dict[str, str], md_path: Path) -> str:
    """The lines a ``{literalinclude}`` shows in the book, read by Sphinx's own reader."""
    from sphinx.directives.code import LiteralIncludeReader

    source = (md_path.parent / directive_arg.strip()).resolve()
    if not source.is_file():
        raise ValueError(f"{md_path.name}: literalinclude of {directive_arg.strip()!r}, which does not exist.")

    class _Config:
        source_encoding = "utf-8"

    reader_options = {k: v for k, v in options.items() if k not in ("language", "caption", "linenos")}
    text, _ = LiteralIncludeReader(str(source), reader_options, _Config()).read()
    return f"From `{source.parent.name}/{source.name}`:\n\n```{options.get('language', '')}\n{text.rstrip()}\n```"


def _directive_options(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    options: dict[str, str] = {}
    i = 0
    while i < len(lines) and re.match(r"^:[a-z-]+:", lines[i]):
        key, _, value = lines[i][1:].partition(":")
        options[key] = value.strip().strip('"')
        i += 1
    if i < len(lines) and not lines[i].strip():
        i += 1
    return options, lines[i:]


def _convert_blocks(text: str, md_path: Path, stash) -> str:
    """Replace the fenced directives of one markdown cell (recursively for nested bodies)."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        plain = re.match(r"^(`{3,}|~{3,})(?!\{)", lines[i])
        if plain:  # an ordinary code block: kept as it is, out of reach of the role rewriting
            j = i + 1
            while j < len(lines) and lines[j].rstrip() != plain.group(1):
                j += 1
            out.append(stash("\n".join(lines[i : j + 1])))
            i = j + 1
            continue
        match = FENCE.match(lines[i].rstrip())
        if not match:
            out.append(lines[i])
            i += 1
            continue
        fence, name, arg = match["fence"], match["name"], match["arg"].strip()
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != fence:
            j += 1
        if j == len(lines):
            raise ValueError(f"{md_path.name}: the {{{name}}} block opened by {lines[i]!r} is never closed.")
        options, body = _directive_options(lines[i + 1 : j])
        body_text = _convert_blocks("\n".join(body), md_path, stash)
        if name == "literalinclude":
            out.append(stash(_include(arg, options, md_path)))
        elif name == "dropdown" or (name in ADMONITIONS and "dropdown" in options.get("class", "")):
            title = arg or name.capitalize()
            out.extend([f"<details><summary>{title}</summary>", "", body_text, "", "</details>"])
        elif name in ADMONITIONS:
            title = arg if name == "admonition" else (name.capitalize() + (f": {arg}" if arg else ""))
            out.append(f"> **{title}.**")
            out.extend("> " + line if line else ">" for line in body_text.split("\n"))
        elif name == "math":
            out.extend(["$$", body_text, "$$"])
        elif name == "nb-exec-table":  # filled in by the site build from its own execution records
            out.append("*(On the website, a table of how long each page took to execute in its build.)*")
        else:
            raise ValueError(f"{md_path.name}: no Colab form for the {{{name}}} directive; add one to tools/colab.py.")
        i = j + 1
    return "\n".join(out)


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>$|~])")


def _site_value(role: str, body: str, values: dict[str, Any], md_path: Path) -> str:
    """A glued value as the site shows it (myst-nb's own formatting), marked as the site's."""
    from myst_nb.core.variables import format_plain_text

    if role == "glue:text":
        key, fmt = body.rsplit(":", 1) if ":" in body else (body, "s")
    else:
        key, fmt = body, ""
    if "::" in key:
        raise ValueError(f"{md_path.name}: no Colab form for a value glued on another page ({body!r}).")
    if key not in values:
        raise ValueError(
            f"{md_path.name}: the site build glued no {key!r}; its executed notebook is older than the page "
            "(run `make book`)."
        )
    data = values[key].get("data", {})
    if role != "glue:text" and "text/markdown" in data:
        shown = data["text/markdown"]
    elif "text/plain" in data:
        shown = _MARKDOWN_SPECIAL.sub(r"\\\1", format_plain_text(data["text/plain"], fmt))
    else:
        raise ValueError(f"{md_path.name}: the value glued as {key!r} has no text to paste ({sorted(data)}).")
    return f'<abbr title="{SITE_VALUE}">{shown}</abbr>'


def _convert_roles(
    text: str,
    md_path: Path,
    bib: _Bibliography,
    cited: list[str],
    baseurl: str,
    site_values: dict[str, Any] | None = None,
) -> str:
    def page_url(target: str) -> str:
        page = (md_path.parent / target).resolve()
        root = md_path.parent.parent.resolve()
        rel = page.relative_to(root).with_suffix(".html").as_posix()
        return baseurl + rel

    def role(match: re.Match) -> str:
        name, body = match["role"], match["body"]
        if name in ("glue", "glue:text", "glue:md", "glue:"):
            if site_values is not None:
                return _site_value(name, body, site_values, md_path)
            return f"`{body.split(':', 1)[0]}`"
        if name in ("cite", "cite:p", "cite:t"):
            keys = [k.strip() for k in body.split(",")]
            for key in keys:
                if key not in cited:
                    cited.append(key)
            if name == "cite:t":
                return "; ".join(bib.label(k).replace(", ", " (", 1) + ")" for k in keys)
            return "(" + "; ".join(bib.label(k) for k in keys) + ")"
        if name == "math":
            return f"${body}$"
        if name == "doc":
            explicit = re.fullmatch(r"(?P<text>.*?)\s*<(?P<target>[^>]+)>", body)
            title, target = (explicit["text"], explicit["target"]) if explicit else (Path(body).name, body)
            return f"[{title}]({page_url(target + '.md')})"
        raise ValueError(f"{md_path.name}: no Colab form for the {{{name}}} role; add one to tools/colab.py.")

    text = ROLE.sub(role, text)

    def link(match: re.Match) -> str:
        target, anchor = match["target"], match["anchor"] or ""
        return f"]({page_url(target)}{anchor})"

    return re.sub(r"\]\((?P<target>(?!https?:)[^)#\s]+\.md)(?P<anchor>#[^)\s]*)?\)", link, text)


def _markdown(
    text: str,
    md_path: Path,
    bib: _Bibliography,
    cited: list[str],
    baseurl: str,
    site_values: dict[str, Any] | None = None,
) -> str:
    text = "\n".join(
        line
        for line in text.split("\n")
        if not re.fullmatch(r"\([A-Za-z0-9_.:-]+\)=\s*", line) and not line.startswith("%")
    )
    code: list[str] = []  # code blocks are set aside, so that roles are never rewritten inside code

    def stash(block: str) -> str:
        code.append(block)
        return f"\x00CODE{len(code) - 1}\x00"

    text = _convert_blocks(text, md_path, stash)
    text = re.sub(r"\$\$\s*\([A-Za-z0-9_.:-]+\)\s*$", "$$", text, flags=re.M)  # labelled display math
    text = _convert_roles(text, md_path, bib, cited, baseurl, site_values)
    return re.sub(r"\x00CODE(\d+)\x00", lambda m: code[int(m.group(1))], text).strip()


def _intro(site: dict[str, Any], page: str, ref: str, site_values: dict[str, Any] | None, dirty: bool) -> str:
    book = f"This notebook is a chapter of [The Std Dial]({site['baseurl']})"
    if site_values is None:
        return (
            f"*{book}; the same chapter, executed, is [on the website]({page}). Where the book's text shows a "
            "number computed below, this notebook names it in `code type`, and the cell that computes it "
            "prints its value.*"
        )
    commit = f"[`{ref[:12]}`]({site['repository']}/tree/{ref})" if site.get("repository") else f"`{ref[:12]}`"
    caveat = (
        " The first cell installs the package from GitHub at that commit (the site may be newer than the latest "
        "release on the package index) and says whether this runtime has a GPU."
    )
    if dirty:
        caveat += " (That build had uncommitted changes, which the commit lacks.)"
    return (
        f"*{book}, as [the website]({page}) shows it: the numbers in the text "
        f'(<abbr title="{SITE_VALUE}">marked</abbr> where your viewer shows it) and the outputs below the '
        f"cells are the published site's, from its build of commit {commit}, so it reads complete before you "
        f"run anything. The cells recompute them: run them (Runtime > Run all) and each cell that computes "
        f"a number the text cites prints it.{caveat}*"
    )


def colab_notebook(
    md_path: str | Path,
    root: str | Path | None = None,
    *,
    ref: str | None = None,
    site_values: dict[str, Any] | None = None,
    dirty: bool = False,
):
    """The Colab notebook (an ``nbformat`` notebook) generated from one MyST chapter.

    ``ref``: what the install cell pins (default: the release, :func:`release_ref`). ``site_values``:
    the values a site build glued (its ``<page>.glue.json``: name -> output with ``data``), to put in the
    text instead of the names; the notebook then says they are the site's, from commit ``ref`` (``dirty``:
    built with uncommitted changes).
    """
    import jupytext
    import nbformat

    md_path = Path(md_path).resolve()
    root = Path(root).resolve() if root is not None else md_path.parent.parent
    site = _site_config(root)
    bib = _Bibliography([root / name for name in site["bibfiles"]])
    source = jupytext.read(md_path)
    page_key = md_path.relative_to(root).with_suffix("").as_posix()
    if site_values is not None and (ref is None or not re.fullmatch(r"[0-9a-f]{40}", ref)):
        raise ValueError(f"{md_path.name}: a notebook with the site's values pins the build's commit; got {ref!r}.")
    cited: list[str] = []
    cells = []
    installed = False
    for cell in source.cells:
        if cell.cell_type == "markdown":
            text = _markdown(cell.source, md_path, bib, cited, site["baseurl"], site_values)
            if text:
                cells.append(nbformat.v4.new_markdown_cell(text))
        elif cell.cell_type == "code":
            code = cell.source
            if not installed and INSTALL.search(code):
                code = pin_install(code, ref or release_ref(root), page_key)
                installed = True
            new = nbformat.v4.new_code_cell(code)
            tags = cell.metadata.get("tags")
            if tags:
                new.metadata["tags"] = list(tags)
            cells.append(new)
        else:  # raw cells have no place in a reader's notebook
            raise ValueError(f"{md_path.name}: a {cell.cell_type} cell has no Colab form.")
    page = site["baseurl"] + md_path.relative_to(root).with_suffix(".html").as_posix()
    intro = _intro(site, page, ref or "", site_values, dirty)
    cells.insert(1 if cells and cells[0].cell_type == "markdown" else 0, nbformat.v4.new_markdown_cell(intro))
    if cited:
        refs = "\n".join(f"- {bib.reference(key)}" for key in cited)
        cells.append(nbformat.v4.new_markdown_cell(f"## References\n\n{refs}"))
    for index, cell in enumerate(cells):
        cell["id"] = f"cell-{index:03d}"  # stable ids: regenerating changes nothing
        prose = re.sub(r"^(`{3,}).*?^\1\s*$", "", cell.source, flags=re.M | re.S)  # code blocks aside
        if cell.cell_type == "markdown" and MYST_RESIDUE.search(prose):
            raise ValueError(f"{md_path.name}: MyST syntax left in a Colab cell: {cell.source[:120]!r}")
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = copy.deepcopy({k: v for k, v in source.metadata.items() if k == "kernelspec"})
    notebook.metadata["language_info"] = {"name": "python"}
    notebook.metadata["colab"] = {"provenance": []}
    return notebook


def write_colab_notebooks(chapters: list[Path], root: str | Path) -> list[Path]:
    """Write ``NN_name.ipynb`` next to each chapter; returns the paths written."""
    import nbformat

    written = []
    for md in chapters:
        if not re.search(r"^kernelspec:", Path(md).read_text(), re.M):
            continue  # a text page (no kernel), nothing to run in Colab
        target = Path(md).with_suffix(".ipynb")
        text = nbformat.writes(colab_notebook(md, root)) + "\n"
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("chapters", nargs="+", type=Path, help="MyST chapter files (chapters/*.md)")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the book's root (holds _config.yml)")
    args = parser.parse_args(argv)
    for path in write_colab_notebooks(args.chapters, args.root):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
