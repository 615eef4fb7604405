"""The audit of the write policy (issue 33): each loss and silently wrong case it found, as a test.

A marker counts only in the directory where it was made, for its own kind, outside a repository's
tracked files; nothing is ever deleted; nothing is written through a link; a resume verifies what
it resumes and a refused one writes nothing; inputs are checked before anything is written. Every
case runs under ``tmp_path`` (a repository for the "tracked" cases is made there too) and compares
every byte of the sandbox before and after. The property test at the end drives the writing entry
points over generated folders.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import TINY, fresh, load_tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stddial_book.cli import main
from stddial_book.core.outdir import (
    MARKER,
    SET_ASIDE,
    append_own,
    claim_dir,
    make_own_dir,
    remove_owned,
    replace_own,
    require_owned,
)
from stddial_book.experiments.testbed.record import check_directories, publish_run
from stddial_book.rl.runlog import RunLog, load_run


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a file's sha256, ``dir``, or ``link -> target``."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = "link -> " + os.readlink(path)
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True, capture_output=True
    )


@pytest.fixture
def user_files(tmp_path: Path) -> Path:
    """A reader's project: files and folders with a run's names, no marker."""
    project = tmp_path / "project"
    (project / "checkpoint").mkdir(parents=True)
    (project / "checkpoint" / "weights.bin").write_bytes(b"\x00\x01")
    (project / "sft").mkdir()
    (project / "init").mkdir()
    (project / "init" / "model.safetensors").write_bytes(b"theirs")
    (project / "diary.txt").write_text("mine")
    return project


# ---- a marker counts only where it was made ----------------------------------------------------------------


def test_a_marker_of_another_kind_is_refused_sft_over_a_finished_rl_run(
    tiny_profile, tmp_path, capsys, monkeypatch
) -> None:
    """`sft --out RUN` deleted a finished RL run's checkpoint, warm start, metrics and provenance."""
    monkeypatch.chdir(tmp_path)
    run = claim_dir(tmp_path / "rl-run", "train")
    (run / "checkpoint").mkdir()
    (run / "checkpoint" / "model.safetensors").write_bytes(b"weights")
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    before = snapshot(tmp_path)
    assert main(["sft", "--profile", "tiny", "--out", str(run), "--no-progress"]) == 2
    assert "holds a 'train' run, not a 'sft' one" in one_line_error(capsys)
    assert snapshot(tmp_path) == before


def test_a_copied_marker_hands_nothing_over(tiny_profile, tmp_path, user_files, capsys, monkeypatch) -> None:
    """A marker copied into a reader's project: sft then deleted its checkpoint/, sft/ and init/."""
    monkeypatch.chdir(tmp_path)
    made = claim_dir(tmp_path / "elsewhere", "sft")
    shutil.copy(made / MARKER, user_files / MARKER)
    before = snapshot(tmp_path)
    assert main(["sft", "--profile", "tiny", "--out", str(user_files), "--no-progress"]) == 2
    assert "made in another directory" in one_line_error(capsys)
    for kind in ("sft", "train", "recorded"):
        with pytest.raises(ValueError, match="made in another directory"):
            claim_dir(user_files, kind)
    with pytest.raises(ValueError, match="cannot resume.*made in another directory"):
        require_owned(user_files)
    copy = tmp_path / "copy"
    shutil.copytree(made, copy)  # a whole run copied: the copy is not the run
    with pytest.raises(ValueError, match="made in another directory"):
        remove_owned(copy, ["sft"])
    assert {k: v for k, v in snapshot(tmp_path).items() if not k.startswith("copy")} == before


def test_a_committed_marker_is_refused_even_in_its_own_folder(tiny_profile, tmp_path, capsys, monkeypatch) -> None:
    """Committed markers under data/ made tracked folders look claimable (`sft --out data/runs/reference`
    deleted the warm start; `record --out` overwrote the reference SFT)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    run = claim_dir(repo / "data" / "runs" / "reference", "recorded")  # same inode: only git says it is tracked
    (run / "provenance.json").write_text("{}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "runs")
    monkeypatch.chdir(repo)
    before = snapshot(tmp_path)
    with pytest.raises(ValueError, match="tracks .*nothing was changed"):
        claim_dir(run, "recorded")
    with pytest.raises(ValueError, match="tracks"):
        check_directories(repo / "work", run)
    with pytest.raises(ValueError, match="tracks"):
        require_owned(run, kind="recorded")
    assert main(["sft", "--profile", "tiny", "--out", "data/runs/reference", "--no-progress"]) == 2
    assert "data/runs/reference" in one_line_error(capsys)
    new = claim_dir(repo / "data" / "runs" / "new", "recorded")  # a new folder beside it is fine
    assert new.is_dir() and {k: v for k, v in snapshot(tmp_path).items() if "runs/new" not in k} == before


# ---- never through a link ----------------------------------------------------------------------------------


def test_planted_links_are_never_written_through(tmp_path) -> None:
    """A provenance.json or init/ planted as a link was written through, into the reader's file or folder."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.json").write_text("mine")
    run = claim_dir(tmp_path / "run", "train")
    (run / "provenance.json").symlink_to(theirs / "notes.json")
    (run / "init").symlink_to(theirs)
    before = snapshot(tmp_path)
    with pytest.raises(ValueError, match="symbolic link"):
        RunLog(run, "cmd", 0, "quick")
    with pytest.raises(ValueError, match="symbolic link"):
        replace_own(run, "init/model.safetensors", b"weights")
    with pytest.raises(ValueError, match="symbolic link"):
        make_own_dir(run, "init/more")
    (run / "metrics.jsonl").symlink_to(theirs / "notes.json")
    with pytest.raises(ValueError, match="symbolic link|cannot be appended"):
        append_own(run, "metrics.jsonl", "{}\n")
    assert snapshot(theirs) == {"notes.json": before["theirs/notes.json"]}
    assert {k: v for k, v in snapshot(tmp_path).items() if k != "run/metrics.jsonl"} == before


# ---- nothing is deleted --------------------------------------------------------------------------------------


def test_starting_afresh_sets_aside_and_deletes_nothing(tmp_path) -> None:
    run = claim_dir(tmp_path / "run", "lm-run")
    (run / "trl").mkdir()
    (run / "trl" / "adapter.bin").write_bytes(b"a")
    (run / "metrics.jsonl").write_text("{}\n")
    hashes = sorted(v for v in snapshot(run).values() if v != "dir")
    assert remove_owned(run, ["trl", "metrics.jsonl"]) == ["trl", "metrics.jsonl"]
    assert sorted(v for v in snapshot(run).values() if v != "dir") == hashes  # every byte still there
    assert not (run / "trl").exists() and (run / SET_ASIDE).is_dir()


def test_a_recorded_folder_is_written_once(tmp_path) -> None:
    src = claim_dir(tmp_path / "work" / "run", "train")
    log = RunLog(src, "cmd", 0, "quick")
    log.log(1, {"reward": 0.5})
    log.finish()
    dst = publish_run(src, tmp_path / "out" / "run", allow_dirty=True)
    before = snapshot(dst)
    log.log(2, {"reward": 0.75})
    assert publish_run(src, dst, allow_dirty=True) == dst and snapshot(dst) == before  # never re-opened
    assert [r["step"] for r in load_run(dst)[1]] == [1]


# ---- validate before writing -----------------------------------------------------------------------------------


def test_record_refuses_one_folder_for_work_and_out(tmp_path) -> None:
    for work, out in ((tmp_path / "a", tmp_path / "a"), (tmp_path / "a", tmp_path / "a" / "out")):
        with pytest.raises(ValueError, match="overlap"):
            check_directories(work, out)
    assert not any(tmp_path.iterdir())


def test_record_ablation_refuses_a_missing_init_before_anything(tmp_path) -> None:
    from stddial_book.experiments.ablation.record import record_ablation

    with pytest.raises(ValueError, match="--init .*holds no SFT model"):
        record_ablation(TINY, [0], tmp_path / "work", tmp_path / "out", init=tmp_path / "typo", allow_dirty=True)
    assert not any(tmp_path.iterdir())


def test_resume_verifies_state_and_a_refusal_writes_nothing(problems, warm, tmp_path) -> None:
    """An edited random state resumed silently (another final reward); a refused resume still added
    `resumed_at`; a damaged state.json was met with advice to delete the checkpoint."""
    from stddial_book.rl.trainer import train

    train_set, heldout = problems
    config = TINY.train_config("grpo", sample_budget=64, eval_every=0)
    train(fresh(warm), train_set, heldout, config, tmp_path / "run", stop_after=2)
    run = tmp_path / "run"
    state = json.loads((run / "checkpoint" / "state.json").read_text())
    state["numpy_rng"]["state"]["state"] += 1  # a valid state, edited
    (run / "checkpoint" / "state.json").write_text(json.dumps(state))
    before = snapshot(tmp_path)
    with pytest.raises(ValueError, match="state.json is not the file this run wrote") as err:
        train(fresh(warm), train_set, heldout, config, run, resume=True)
    assert "delete" not in str(err.value) and "new --out" in str(err.value)
    assert snapshot(tmp_path) == before and "resumed_at" not in load_run(run)[0]


def test_diagnose_refuses_a_fifo_repeated_ids_huge_counts_and_prints_no_escape(tmp_path, capsys) -> None:
    fifo = tmp_path / "pool.csv"
    os.mkfifo(fifo)
    assert main(["diagnose", str(fifo)]) == 2  # returns: the pipe is never opened
    assert "not a regular file" in one_line_error(capsys)
    repeated = tmp_path / "repeated.csv"  # a per-prompt table whose ids repeat: read row by row, with a warning
    repeated.write_text("prompt_id,correct,samples\n" + "".join(f"{i % 2},1,8\n" for i in range(8)))
    assert main(["diagnose", str(repeated)]) == 0
    assert "warning: column 'prompt_id' names 2 prompts in 8 rows" in capsys.readouterr().err
    ones = tmp_path / "ones.csv"  # ... and refused where each row is one sample: those rows are completions
    ones.write_text("prompt_id,correct,samples\n" + "".join(f"{i % 2},1,1\n" for i in range(8)))
    assert main(["diagnose", str(ones)]) == 2
    assert "look like completions" in one_line_error(capsys)
    plain = tmp_path / "plain.csv"
    plain.write_text("correct\n3\n")
    assert main(["diagnose", str(plain), "--samples", str(10**29)]) == 2
    assert "from 1 to" in one_line_error(capsys)
    escaped = tmp_path / "esc\x1b[2J.csv"
    escaped.write_text("correct,samples\n3,8\n")
    assert main(["diagnose", str(escaped)]) == 0
    assert "\x1b" not in capsys.readouterr().out
    assert main(["diagnose", str(escaped), "--correct", "\x1b[31mred"]) == 2
    assert "\x1b" not in one_line_error(capsys)


def test_rewards_and_diagnostics_refuse_what_they_would_misread() -> None:
    from stddial_book.bridges.lm_diagnostics import batch_diagnostics
    from stddial_book.bridges.lm_rewards import CorrectnessReward
    from stddial_book.bridges.trl_rewards import _AdditionReward
    from stddial_book.theory.recipes import GRPO

    for correct, wrong in ((0, 1), (1, 1), (float("nan"), 0), (1, float("-inf"))):
        with pytest.raises(ValueError, match="reward"):
            CorrectnessReward(correct=correct, wrong=wrong)
        with pytest.raises(ValueError, match="reward"):
            _AdditionReward(correct, wrong)
    with pytest.raises(TypeError, match="one entry per completion"):
        CorrectnessReward()(["1", "2", "3"], answer="123")  # was paired with the characters
    with pytest.raises(TypeError, match="booleans"):
        batch_diagnostics(["no", "yes", "no", "yes"], [0, 1, 0, 1], [0, 0, 0, 0], 4, GRPO)  # read as all passed
    assert batch_diagnostics([0, 1, 0, 1], [0, 1, 0, 1], [-1, 1, -1, 1], 4, GRPO)["pass_rate"] == 0.5


def test_make_publish_refuses_a_build_of_another_commit(tmp_path) -> None:
    module = load_tool("colab_publish")
    out = claim_dir(tmp_path / "_colab", module.OUT_KIND)
    replace_own(out, module.BUILD_RECORD, json.dumps({"commit": "a" * 40, "dirty": False, "notebooks": {}}))
    assert module.check_published(out, head="a" * 40)["commit"] == "a" * 40
    with pytest.raises(ValueError, match="not from the commit checked out"):
        module.check_published(out, head="b" * 40)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "keep.txt").write_text("mine")
    assert module.main(["--out", str(theirs), "--allow-dirty"]) == 2
    assert sorted(p.name for p in theirs.iterdir()) == ["keep.txt"]


# ---- the property: every writing entry point over generated folders ---------------------------------------------

#: What a folder holds before a command meets it.
SITUATIONS = ("absent", "empty", "user files", "copied marker", "other kind", "own run", "planted link", "tracked")
KINDS = ("sft", "train", "recorded", "diagnose")


def _prepare(root: Path, situation: str, kind: str, repo_run: Path) -> Path:
    """The folder the command is pointed at, in ``situation``; a reader's files live in ``root/theirs``."""
    theirs = root / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    target = root / "target"
    if situation == "tracked":
        return repo_run
    if situation == "absent":
        return target
    target.mkdir()
    if situation == "user files":
        (target / "checkpoint").mkdir()
        (target / "provenance.json").write_text("{}")
    elif situation == "copied marker":
        shutil.copy(claim_dir(root / "origin", kind) / MARKER, target / MARKER)
    elif situation in ("other kind", "own run", "planted link"):
        target.rmdir()
        claim_dir(target, "train" if kind != "train" and situation == "other kind" else kind)
        if situation == "other kind" and kind == "train":
            target = claim_dir(root / "sft-run", "sft")
        if situation == "planted link":
            (target / "provenance.json").symlink_to(theirs / "notes.txt")
            (target / "init").symlink_to(theirs)
    return target


def _command(target: Path, kind: str) -> None:
    """A writing command as every one of them runs: claim, then its files (log, provenance, weights)."""
    run = claim_dir(target, kind)
    log = RunLog(run, "cmd", 0, "quick")
    log.log(1, {"reward": 1.0})
    replace_own(run, "init/model.safetensors", b"weights")
    log.finish()


@pytest.fixture(scope="module")
def repo_run(tmp_path_factory) -> Path:
    """A run folder committed in a repository: its marker made there (same inode), its files tracked."""
    repo = tmp_path_factory.mktemp("repo")
    git(repo, "init", "-q")
    run = claim_dir(repo / "data" / "run", "train")
    (run / "provenance.json").write_text("{}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "run")
    return run


def test_every_writing_entry_point_leaves_every_byte_it_did_not_create(tmp_path_factory, repo_run) -> None:
    """Property: whatever the folder holds, a command either refuses with the whole sandbox (and the
    repository) byte-identical, or only adds files: everything that was there before is still there,
    byte for byte, at its place (a new run) or set aside (never deleted). Only a new, empty or own
    folder of the command's kind is ever accepted."""
    seen = {"accepted": set(), "refused": set()}
    repo_before = snapshot(repo_run.parent.parent)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.sampled_from(SITUATIONS), st.sampled_from(KINDS))
    def check(situation: str, kind: str) -> None:
        root = tmp_path_factory.mktemp("case")
        target = _prepare(root, situation, kind, repo_run)
        before = {**snapshot(root), **{"repo/" + k: v for k, v in snapshot(repo_run.parent.parent).items()}}
        try:
            _command(target, kind)
        except ValueError as err:
            assert "\n" not in str(err) and ("nothing" in str(err) or "symbolic link" in str(err)), err
            after = {**snapshot(root), **{"repo/" + k: v for k, v in snapshot(repo_run.parent.parent).items()}}
            # a planted link is met after the claim: its run keeps what it had, the reader's files too
            assert after == before, (situation, kind)
            seen["refused"].add(situation)
        else:
            assert situation in ("absent", "empty", "own run"), (situation, kind)
            after = {**snapshot(root), **{"repo/" + k: v for k, v in snapshot(repo_run.parent.parent).items()}}
            assert all(k in after and after[k] == v for k, v in before.items()), (situation, kind)
            seen["accepted"].add(situation)

    check()
    assert snapshot(repo_run.parent.parent) == repo_before
    assert seen["refused"] >= {"user files", "copied marker", "other kind", "planted link", "tracked"}, seen
    assert seen["accepted"] >= {"absent", "empty", "own run"}, seen
