"""A release: the version in one place, the command line that reports it, the console command.

The version is ``pyproject.toml``'s; ``stddial_book.__version__``, the installed distribution and
``python -m stddial_book --version`` must all say the same.
"""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
VERSION = PROJECT["version"]


def test_the_package_version_is_pyprojects() -> None:
    import stddial_book

    assert stddial_book.__version__ == VERSION, "stddial_book/__init__.py's __version__ differs from pyproject.toml's"
    assert metadata.version("stddial-book") == VERSION, (
        "the installed package is stale: reinstall it (pip install -e .)"
    )


def test_python_m_stddial_book_version_prints_the_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "stddial_book", "--version"], capture_output=True, text=True, timeout=120, check=False
    )
    assert (out.returncode, out.stdout.strip(), out.stderr) == (0, f"stddial-book {VERSION}", "")


def test_the_console_command_runs_the_command_line() -> None:
    """``stddial`` ([project.scripts]) is installed with the package and is ``python -m stddial_book``."""
    assert PROJECT["scripts"] == {"stddial": "stddial_book.cli:main"}
    script = Path(sysconfig.get_path("scripts")) / "stddial"
    assert script.is_file(), f"{script} is missing: reinstall the package (pip install -e .)"
    version = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=120, check=False)
    assert (version.returncode, version.stdout.strip()) == (0, f"stddial-book {VERSION}")
    bad = subprocess.run([str(script), "nosuch"], capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and len(bad.stderr.strip().splitlines()) == 1


# --- the release workflow (it cannot run here: no GitHub runner; what can be checked offline is) -------

WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


def _release_workflow() -> dict:
    import yaml

    return yaml.safe_load(WORKFLOW.read_text())


def test_the_release_workflow_runs_on_a_version_tag_and_checks_it_is_pyprojects() -> None:
    workflow = _release_workflow()
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert triggers == {"push": {"tags": ["v*"]}}
    runs = [step.get("run", "") for step in workflow["jobs"]["build"]["steps"]]
    check = next(run for run in runs if "GITHUB_REF_NAME" in run)
    # the check itself, run as the workflow runs it, on a matching and a wrong tag
    for tag, status in ((f"v{VERSION}", 0), ("v999.0.0", 1)):
        done = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", check],
            cwd=ROOT,
            env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "GITHUB_REF_NAME": tag},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == status, (tag, done.stdout, done.stderr)
    assert f"is not v{VERSION}" in done.stdout


def test_the_release_workflow_builds_checks_then_publishes_what_it_built() -> None:
    workflow = _release_workflow()
    build = workflow["jobs"]["build"]["steps"]
    runs = [step.get("run", "") for step in build]
    order = [
        next(i for i, run in enumerate(runs) if "GITHUB_REF_NAME" in run),
        next(i for i, run in enumerate(runs) if "python -m build" in run),
        next(i for i, run in enumerate(runs) if "twine check" in run and "dist/*" in run),
        next(i for i, run in enumerate(runs) if run.strip().startswith(".ci/lowest dist/") and ".whl" in run),
        next(i for i, step in enumerate(build) if step.get("uses", "").startswith("actions/upload-artifact@")),
    ]
    assert order == sorted(order), "tag check, build, twine check, .ci/lowest on the wheel, then the upload"
    # .ci/lowest takes the wheel it is given instead of building its own
    lowest = (ROOT / ".ci" / "lowest").read_text()
    assert 'WHEEL=${1:+$(realpath "$1")}' in lowest and 'pip install -q --no-deps "$WHEEL"' in lowest
    publish = workflow["jobs"]["publish"]
    assert publish["needs"] == "build"
    assert publish["permissions"] == {"id-token": "write"} and workflow["permissions"] == {"contents": "read"}
    assert publish["environment"]["name"] == "pypi"
    uses = [step.get("uses", "") for step in publish["steps"]]
    assert uses[0].startswith("actions/download-artifact@") and uses[-1].startswith("pypa/gh-action-pypi-publish@")
    assert not any("password" in (step.get("with") or {}) for step in publish["steps"])  # no token: trusted


# --- every install or checkout a reader is told to run names what exists ----------------------------

#: The pages a reader runs installs from: the chapters and their notebooks, the appendix, the README.
PAGES = sorted(
    {*ROOT.glob("chapters/*.md"), *ROOT.glob("chapters/*.ipynb"), *ROOT.glob("appendix/*"), ROOT / "README.md"}
)
#: ``stddial-book==X`` (with extras or not): a release from the package index (``==<version>`` is prose).
RELEASE_PIN = re.compile(r"stddial[-_]book(?:\[[\w,\s-]+\])?\s*==\s*(\d[^\s\"'`\\,;)]*)")
#: A git install or clone at a ref (``the-std-dial@REF``), a checkout or a clone of a branch or tag.
GIT_REF = re.compile(
    r"the-std-dial(?:\.git)?@([^\s\"'`\\,;)#]+)|git (?:checkout|switch) (?!-)([^\s\"'`\\;]+)|--branch[ =]([^\s\"'`\\;]+)"
)
#: The chapters' install line before tools/colab.py pins it: no notebook may keep it.
UNPINNED = re.compile(r"\"stddial-book @ git\+https://[^\"@\s]+\"")


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)


def _pins(pattern: re.Pattern) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for page in PAGES:
        for match in pattern.finditer(page.read_text(encoding="utf-8")):
            found.setdefault(next(group for group in match.groups() if group), set()).add(page.name)
    return found


def test_every_release_pin_is_pyprojects_version() -> None:
    pins = _pins(RELEASE_PIN)
    assert set(pins) == {VERSION}, (
        f"pages pin stddial-book versions other than pyproject.toml's {VERSION}: "
        f"{ {v: sorted(p) for v, p in pins.items() if v != VERSION} }; run `make sync` and edit the pages"
    )
    # every notebook installs the release, none keeps the unpinned line of the chapter sources
    notebooks = sorted({*ROOT.glob("chapters/*.ipynb"), *ROOT.glob("appendix/*.ipynb")})
    assert notebooks and all(nb.name in pins[VERSION] for nb in notebooks)
    assert [nb.name for nb in notebooks if UNPINNED.search(nb.read_text(encoding="utf-8"))] == []


def test_no_page_names_a_tag_or_commit_the_repository_lacks() -> None:
    """A git ref a page installs or checks out must be a tag or a full commit id this repository has (never
    a branch, which moves). The check needs the checkout's tags and history (CI: fetch-depth 0)."""
    assert _git("rev-parse", "--git-dir").returncode == 0, "the tests run in a git checkout of the book"
    tags = set(_git("tag", "--list").stdout.split())
    missing = {}
    for ref, pages in _pins(GIT_REF).items():
        is_commit = re.fullmatch(r"[0-9a-f]{40}", ref) and _git("cat-file", "-e", f"{ref}^{{commit}}").returncode == 0
        if ref not in tags and not is_commit:
            missing[ref] = sorted(pages)
    assert missing == {}, f"pages install or check out refs this repository has no tag or commit for: {missing}"


def test_the_pin_patterns_find_what_they_look_for() -> None:
    text = (
        'pip install "stddial-book[lm]==9.9.9" stddial_book==1.0 '
        '"stddial-book @ git+https://github.com/std-dial/the-std-dial@v0.0.1" git checkout v0.0.2 '
        "git clone --branch v0.0.3 https://github.com/std-dial/the-std-dial"
    )
    assert [m.group(1) for m in RELEASE_PIN.finditer(text)] == ["9.9.9", "1.0"]
    assert [next(g for g in m.groups() if g) for m in GIT_REF.finditer(text)] == ["v0.0.1", "v0.0.2", "v0.0.3"]


def test_the_readmes_three_steps_name_options_the_commands_take() -> None:
    """The README's quick start for one's own run: each ``stddial`` command it shows exists, and every option
    it passes is one that command's --help lists (a renamed flag would leave the README wrong)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Your own run in three steps", 1)[1].split("\n## ", 1)[0]
    commands = [line.split("#")[0].split() for line in section.splitlines() if line.startswith("stddial ")]
    assert [c[1] for c in commands] == ["measure", "diagnose"]
    for words in commands:
        shown = subprocess.run(
            [sys.executable, "-m", "stddial_book", words[1], "--help"], capture_output=True, text=True, timeout=120
        )
        assert shown.returncode == 0, shown.stderr
        for option in (w for w in words[2:] if w.startswith("--")):
            assert option in shown.stdout, f"README: stddial {words[1]} has no option {option}"
    assert "callbacks=[DialDiagnostics(" in section
