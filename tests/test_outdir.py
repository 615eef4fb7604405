"""The output-directory policy: no command ever deletes or overwrites what it did not write.

Every case runs in a sandbox (a fresh temporary tree with its own home directory and working
directory) whose every file is hashed before and after: a refusal must leave it byte-identical,
and an accepted directory may only add the new directory and the tool's marker.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stddial_book
from stddial_book.cli import main
from stddial_book.core import outdir
from stddial_book.core.outdir import (
    MARKER,
    SET_ASIDE,
    check_claimable,
    claim_dir,
    expand_path,
    owns,
    read_marker,
    refusal,
    remove_owned,
)
from stddial_book.experiments.testbed.runs import remove_stale_run

PACKAGE = Path(stddial_book.__file__).resolve().parent


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a file's sha256, or ``dir`` / ``link -> target``."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "link -> " + os.readlink(path)
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def build_sandbox(root: Path) -> Path:
    """A home directory holding a working directory with a reader's files; returns the working dir."""
    home = root / "home"
    work = home / "desk"
    (work / "theirs" / "checkpoint").mkdir(parents=True)  # another trainer's run: run-like names
    (work / "theirs" / "metrics.jsonl").write_text('{"step": 1}\n')
    (work / "theirs" / "checkpoint" / "weights.bin").write_bytes(b"\x00\x01")
    (work / "project" / ".git").mkdir(parents=True)  # a repository's root
    (work / "project" / "notes.md").write_text("mine")
    (work / "empty").mkdir()
    (work / "afile").write_text("a file, not a directory")
    (work / "link").symlink_to(work / "theirs")
    return work


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = build_sandbox(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(work)
    return tmp_path


#: A typed path and what the refusal must say about it (claiming it; removing a stale run there).
DANGEROUS = {
    "": "current directory",
    " ": "current directory",
    ".": "current directory",
    "..": "current directory",
    "./": "current directory",
    "../": "home directory",
    "~/desk": "current directory",
    "~": "home directory",
    "~/": "home directory",
    "$HOME": "home directory",
    "${HOME}": "home directory",
    "~/..": "home directory or one of its parents",
    "../..": "home directory or one of its parents",
    "/": "filesystem root",
    "project": "repository's root",
    "$UNSET_VARIABLE_XYZ/run": "environment variable",
    "theirs": "not empty and was not written",
    "./theirs": "not empty and was not written",
    "theirs/": "not empty and was not written",
    "project/../theirs": "not empty and was not written",
    "~/desk/theirs": "not empty and was not written",
    "link": "a file or a link",
    "afile": "is a file",
}
#: What removing a stale run says where the directory exists but is not the tool's.
NOT_THE_TOOLS = {
    "theirs": "not written by stddial_book",
    "./theirs": "not written by stddial_book",
    "theirs/": "not written by stddial_book",
    "project/../theirs": "not written by stddial_book",
    "~/desk/theirs": "not written by stddial_book",
    "link": "not written by stddial_book",
    "afile": "is a file",
}


@pytest.mark.parametrize("path", DANGEROUS)
def test_dangerous_paths_are_refused_and_nothing_is_touched(sandbox: Path, path: str) -> None:
    before = snapshot(sandbox)
    with pytest.raises(ValueError, match=re.escape(DANGEROUS[path])) as err:
        claim_dir(path, "train")
    assert "\n" not in str(err.value) and len(str(err.value)) < 300
    with pytest.raises(ValueError, match=re.escape(NOT_THE_TOOLS.get(path, DANGEROUS[path]))):
        remove_stale_run(path)
    assert snapshot(sandbox) == before
    assert not (Path.cwd() / "~").exists()


def test_the_package_and_its_checkout_are_refused(sandbox: Path) -> None:
    """Checked without a chance to write: check_claimable creates nothing even if the refusal broke
    (a test once claimed stddial_book/new for real and its marker was committed)."""
    for path in (PACKAGE, PACKAGE / "runs", PACKAGE / "new", PACKAGE.parent):
        assert refusal(path) is not None
        with pytest.raises(ValueError, match="inside the stddial_book package|holds the stddial_book package"):
            check_claimable(path)
    assert not (PACKAGE / "new").exists() and not (PACKAGE / "runs").exists()
    assert not (PACKAGE / "runs").exists() and not (PACKAGE / MARKER).exists()


def test_home_and_variables_are_expanded_as_a_shell_would(sandbox: Path, monkeypatch) -> None:
    monkeypatch.setenv("RUNS_ROOT", str(sandbox / "scratch"))
    assert expand_path("~/runs/a") == sandbox / "home" / "runs" / "a"
    made = claim_dir("$RUNS_ROOT/run-1", "train")
    assert made == sandbox / "scratch" / "run-1" and owns(made)
    assert not any(p.name in ("~", "$RUNS_ROOT") for p in sandbox.rglob("*"))


def test_a_new_or_empty_directory_is_claimed_and_marked(sandbox: Path) -> None:
    made = claim_dir("runs/one", "sft")
    marker = read_marker(made)
    assert marker["kind"] == "sft" and len(marker["run_id"]) == 32
    assert claim_dir("runs/one", "sft") == made and read_marker(made) == marker  # claimed again: same run
    empty = claim_dir("empty", "train")
    assert sorted(p.name for p in empty.iterdir()) == [MARKER]


def test_remove_owned_sets_named_entries_aside_and_deletes_nothing(sandbox: Path) -> None:
    run = claim_dir("runs/two", "train")
    (run / "checkpoint").mkdir()
    (run / "checkpoint" / "x").write_text("x")
    (run / "keep.txt").write_text("keep")
    (run / "theirs").symlink_to(sandbox / "home" / "desk" / "theirs")
    before = snapshot(sandbox / "home" / "desk" / "theirs")
    inside = snapshot(run)
    assert remove_owned(run, ["checkpoint", "theirs", "missing"]) == ["checkpoint", "theirs"]
    assert snapshot(sandbox / "home" / "desk" / "theirs") == before  # the link moved, its target untouched
    assert sorted(p.name for p in run.iterdir()) == [MARKER, SET_ASIDE, "keep.txt"]
    (shelf,) = (run / SET_ASIDE).iterdir()
    moved = snapshot(shelf)  # every byte is still there, one folder down
    assert moved == {k: v for k, v in inside.items() if k.split("/")[0] in ("checkpoint", "theirs")}
    for bad in ("..", "../theirs", MARKER, ""):
        with pytest.raises(ValueError, match="plain entry names"):
            remove_owned(run, [bad])
    with pytest.raises(ValueError, match="not written by stddial_book"):
        remove_owned(sandbox / "home" / "desk" / "theirs", ["metrics.jsonl"])


# A path a reader might type: pieces of real names, dots, ~, variables and slashes, relative to the
# working directory or written out from the sandbox's root ("ROOT/" stands for it). Every accepted
# path lands inside the sandbox: ".." climbs at most to the home directory's parent, the root.
PIECES = st.sampled_from(
    [
        "",
        ".",
        "..",
        "~",
        "$HOME",
        "theirs",
        "project",
        "empty",
        "afile",
        "link",
        "new",
        "checkpoint",
        "metrics.jsonl",
        "desk",
        "home",
    ]
)
PATHS = st.one_of(
    st.lists(PIECES, min_size=1, max_size=3).map("/".join),
    st.lists(PIECES, min_size=0, max_size=3).map(lambda parts: "ROOT/" + "/".join(parts)),
    st.sampled_from(["ROOT/site/stddial_book", "ROOT/site/stddial_book/new", "ROOT/site"]),
)


def test_any_typed_path_leaves_the_readers_files_byte_identical(monkeypatch) -> None:
    """Property: for any path built from the sandbox's names, claiming it either refuses with the
    tree unchanged or only adds directories and the marker; removing a stale run never changes a
    byte of the reader's files. Enough paths must be accepted for the property to mean something."""
    outcome = {"accepted": 0, "refused": 0}

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(PATHS)
    def check(path: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp).resolve()
            work = build_sandbox(root)
            monkeypatch.setenv("HOME", str(root / "home"))
            monkeypatch.chdir(work)
            # the package as the policy sees it is a copy in the sandbox: a broken refusal writes there,
            # never into the checkout
            (root / "site" / "stddial_book").mkdir(parents=True)
            (root / "site" / "stddial_book" / "__init__.py").write_text("")
            monkeypatch.setattr(outdir, "_PACKAGE_DIR", root / "site" / "stddial_book")
            try:
                examine(root, path.replace("ROOT", str(root)))
            finally:
                monkeypatch.chdir(Path(__file__).parent)

    def examine(root: Path, path: str) -> None:
        target = Path(os.path.abspath(os.path.expandvars(os.path.expanduser(path))))
        if target == root / "site" or root / "site" in target.parents:
            with pytest.raises(ValueError, match="stddial_book package"):
                claim_dir(path, "train")
            assert sorted(p.name for p in (root / "site" / "stddial_book").iterdir()) == ["__init__.py"]
            return
        if target != root and root not in target.parents:
            return  # "../../.." from the working directory leaves the sandbox: not tried
        before = snapshot(root)
        try:
            made = claim_dir(path, "train")
        except ValueError:
            outcome["refused"] += 1
            assert snapshot(root) == before, path
        else:
            outcome["accepted"] += 1
            after = snapshot(root)
            assert {k: v for k, v in after.items() if k in before} == before, path
            added = set(after) - set(before)
            assert all(after[k] == "dir" or k.endswith(MARKER) for k in added), (path, added)
            assert owns(made) and root in made.parents, path
            remove_stale_run(made)
            assert {k: v for k, v in snapshot(root).items() if k in before} == before, path
        for name in ("theirs", "project", "empty", "link"):
            with contextlib.suppress(ValueError):
                remove_stale_run(name)
        assert {k: v for k, v in snapshot(root).items() if k in before} == before, path

    check()
    assert outcome["accepted"] >= 30 and outcome["refused"] >= 30, outcome


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "command",
    [
        ["sft", "--profile", "tiny", "--out", "theirs"],
        ["sft", "--profile", "tiny", "--out", ""],
        ["sft", "--profile", "tiny", "--out", "~"],
        ["sft", "--profile", "tiny", "--out", "project"],
        ["train", "--recipe", "grpo", "--profile", "tiny", "--out", ""],
        ["train", "--recipe", "grpo", "--profile", "tiny", "--out", "~"],
        ["train", "--recipe", "grpo", "--profile", "tiny", "--out", ".."],
        ["train", "--recipe", "grpo", "--profile", "tiny", "--out", "theirs"],
        ["train", "--recipe", "grpo", "--profile", "tiny", "--out", "theirs", "--resume"],
        ["train", "--recipe", "grpo", "--profile", "tiny", "--out", str(PACKAGE)],
        ["train", "--recipe", "grpo", "--profile", "tiny", "--out", str(PACKAGE / "runs")],
        ["record", "--profile", "tiny", "--seeds", "0", "--work", "theirs", "--out", "new", "--allow-dirty"],
        ["record", "--profile", "tiny", "--seeds", "0", "--work", "new", "--out", "theirs", "--allow-dirty"],
        ["record", "--profile", "tiny", "--seeds", "0", "--work", "~", "--out", "new", "--allow-dirty"],
    ],
    ids=lambda c: " ".join(c[:1] + c[c.index("--out") : c.index("--out") + 2] if "--out" in c else c),
)
def test_the_cli_refuses_with_one_line_and_touches_nothing(command, sandbox, tiny_profile, capsys, monkeypatch) -> None:
    from stddial_book.rl import sft, trainer

    # the run functions import these at call time, so a refusal that came too late would call them
    monkeypatch.setattr(sft, "sft", lambda *a, **k: pytest.fail("work started before refusing"))
    monkeypatch.setattr(trainer, "train", lambda *a, **k: pytest.fail("work started before refusing"))
    before = snapshot(sandbox)
    assert main(command + ["--no-progress"]) == 2
    message = _one_line_error(capsys)
    assert "--out" in message or "--work" in message or "not written by stddial_book" in message, message
    assert snapshot(sandbox) == before
    assert not (PACKAGE / "runs").exists()


def test_the_table_builders_refuse_a_readers_folder(sandbox: Path, capsys) -> None:
    """build-tables and the figure/curve tables write only into a new, empty or marked folder (the
    committed data/solve_rates and data/dapo carry the marker), never into a reader's."""
    from stddial_book.core.resources import data_path, write_table
    from stddial_book.corpora.solve_tables import _main

    before = snapshot(sandbox)
    with pytest.raises(ValueError, match="not empty and was not written by stddial_book"):
        write_table("theirs", "table", ["k", "count"], [[0, 1]], {"made_by": "a test"})
    (sandbox / "parquet").mkdir()
    (sandbox / "parquet" / "deepscaler_x_train.parquet").write_bytes(b"not read: the folder is refused first")
    before = snapshot(sandbox)
    with pytest.raises(SystemExit) as done:
        _main(["build-tables", "--shared", str(sandbox / "parquet"), "--out", "theirs"])
    assert done.value.code == 2 and "not written by stddial_book" in capsys.readouterr().err
    assert snapshot(sandbox) == before
    made = write_table("tables/new", "table", ["k", "count"], [[0, 1]], {"made_by": "a test"})
    assert made.read_text() == "k,count\n0,1\n" and owns(made.parent)
    for folder in ("solve_rates", "dapo"):
        assert read_marker(data_path(folder))["kind"] == "tables"
