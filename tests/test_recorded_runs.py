"""Every committed run log reproduces: its provenance names a clean commit, the SFT model it started
from, the versions, the device and a wall time, and the study's storage restores what it stored.

These read the studies under ``data/runs/`` as they are committed: ``record`` writes the runs (see
``stddial_book.experiments.testbed.record``) and ``tools/compact_runs.py`` stores a study's runs compactly (one
Parquet table of the logs, one provenance table with each run's files verbatim and their digests), so a
hand-copied, dirty-tree or edited run fails here. The last tests run the tool on a small recording.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
from pathlib import Path

import pytest
from conftest import load_tool

from stddial_book.rl.runlog import RECORDED_DIR, STUDY_INDEX, STUDY_TABLE, load_run, run_folders, study_index

ROOT = Path(__file__).resolve().parents[1]
# the testbed's recorded studies, each with the SFT warm start its runs share (the language-model runs under
# data/runs/smollm2 have their own checks: tests/test_smollm2_study.py)
PROFILES = (
    sorted(p for p in Path(RECORDED_DIR).iterdir() if any(r.name == "sft" for r in run_folders(p)))
    if Path(RECORDED_DIR).is_dir()
    else []
)
RUNS = [run for profile in PROFILES for run in run_folders(profile)]
HEX40 = re.compile(r"[0-9a-f]{40}")


def _tool():
    return load_tool("compact_runs")


def _jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r, allow_nan=False) + "\n" for r in records)


def test_there_are_recorded_runs() -> None:
    assert PROFILES and len(RUNS) >= 16, (PROFILES, RUNS)
    assert {p.name for p in PROFILES} >= {"reference"}


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_each_provenance_names_a_clean_commit_and_what_ran(profile: Path) -> None:
    for run in (r for r in RUNS if r.parent == profile):
        provenance, records = load_run(run)
        assert HEX40.fullmatch(provenance.get("git_commit", "")), f"{run}: no commit recorded"
        assert provenance.get("dirty") is False, f"{run}: recorded from a tree with uncommitted changes"
        assert re.fullmatch(r"[0-9a-f]{32}", provenance.get("run_id") or ""), f"{run}: no run id"
        assert provenance["packages"]["torch"] and provenance["python"] and provenance["device"]
        wall = provenance.get("wall_time_s")
        assert isinstance(wall, (int, float)) and math.isfinite(wall) and wall > 0, f"{run}: wall time {wall!r}"
        assert records and all("step" in r for r in records)
        if "-seed" in run.name:
            assert records[-1]["samples/generated"] >= provenance["config"]["train"]["sample_budget"], (
                f"{run}: the log stops before the run's sample budget"
            )


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_a_study_is_stored_compactly_and_restores_what_it_stored(profile: Path) -> None:
    """One table and one provenance table, no run folder; each run's provenance text is the file it was
    (sha256), the marker of the folder ``record`` wrote says ``recorded``, the table's records are what
    was stored (sha256 of their text), and a study that left nothing out restores each log byte for byte."""
    assert not [p for p in profile.iterdir() if p.is_dir()], f"{profile}: run folders beside the tables"
    index = study_index(profile)
    table = profile / STUDY_TABLE
    assert index["table"]["sha256"] == hashlib.sha256(table.read_bytes()).hexdigest(), f"{table} changed"
    for name, entry in index["runs"].items():
        for file, text in entry["files"].items():
            if "rewritten" not in entry or file != "provenance.json":
                assert hashlib.sha256(text.encode()).hexdigest() == entry["digests"][file]["sha256"], (name, file)
        assert json.loads(entry["files"][".stddial-run.json"])["kind"] == "recorded", name
        assert "metrics.jsonl.gz" in entry["digests"], f"{name}: the log was not stored compressed"
        records = load_run(profile / name)[1]
        text = _jsonl(records)
        log = entry["log"]
        assert len(records) == log["records"] and hashlib.sha256(text.encode()).hexdigest() == log["stored_sha256"]
        if not log["dropped"]:
            assert log["stored_sha256"] == log["sha256"], f"{name}: the log is not restored byte for byte"
    assert set(index["study_files"]) <= {p.name for p in profile.iterdir()}
    for name, digest in index["study_files"].items():
        assert hashlib.sha256((profile / name).read_bytes()).hexdigest() == digest["sha256"], name


def test_the_reference_runs_lose_nothing() -> None:
    """The reference runs, which the chapters plot, keep every metric; the shipped files are in the wheel's
    package data (the Parquet table and its provenance table)."""
    index = study_index(Path(RECORDED_DIR) / "reference")
    assert index["dropped"] == [] and all(not e["log"]["dropped"] for e in index["runs"].values())
    assert {"grpo-seed0", "dr_grpo-seed0", "dapo-seed0", "sft"} <= set(index["runs"])


#: Runs a study's plan added by an amendment, recorded from the amendment's commit (data/runs/<study>/PLAN.md).
AMENDMENTS = {"persistent": ("grpo-knapsack_paper-",)}


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_a_profiles_runs_share_one_commit_and_start_from_its_sft_model(profile: Path) -> None:
    """The runs of a folder come from one commit; its warm start may come from an earlier one (the
    ablation's runs started from the reference runs' SFT model, passed with --init): what ties
    them is the model's sha256, which every run records."""
    runs = {r.name: load_run(r)[0] for r in RUNS if r.parent == profile}
    amended = AMENDMENTS.get(profile.name, ())
    commits = {p["git_commit"] for name, p in runs.items() if name != "sft" and not name.startswith(amended)}
    assert len(commits) == 1, f"{profile.name}: runs from several commits {sorted(commits)}"
    if amended:  # a plan's amendment adds runs from its own commit, one commit for all of them
        later = {p["git_commit"] for name, p in runs.items() if name.startswith(amended)}
        assert len(later) == 1 and later != commits, f"{profile.name}: the amendment's runs come from {later}"
    model = runs["sft"].get("model_sha256")
    assert model and re.fullmatch(r"[0-9a-f]{64}", model)
    for name, provenance in runs.items():
        if name != "sft":
            started = provenance["config"]["init_sha256"]
            assert started == model, f"{name}: started from {started[:12]}, not the recorded SFT model {model[:12]}"


def _recording(folder: Path) -> Path:
    """A small recording as ``record`` writes it: a warm start and two runs, one with an object metric."""
    folder.mkdir()
    (folder / "README.md").write_text("a study\n")
    logs = {
        "sft": [{"step": 0, "sft/loss": 1.5}, {"step": 1, "sft/loss": 0.25, "time/elapsed_s": 0.1}],
        "grpo-seed0": [
            {"step": 0, "pool/k": [1, 2], "pool/n": 4, "note": None},
            {"step": 1, "loss": -0.5, "groups/sigma": [0.5, 0.0], "hit": True, "by_size": {"8": 2}, "name": "a"},
        ],
        "grpo-seed1": [{"step": 1, "loss": 3, "groups/sigma": [], "hit": False, "by_size": [1], "name": "b"}],
    }
    for name, records in logs.items():
        run = folder / name
        run.mkdir()
        (run / "metrics.jsonl.gz").write_bytes(gzip.compress(_jsonl(records).encode(), mtime=0))
        provenance = {"command": "record --init /somewhere/sft-seed0", "git_commit": "0" * 40, "dirty": False}
        (run / "provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
        (run / ".stddial-run.json").write_text('{"kind": "recorded"}\n')
    return folder


def test_compact_runs_stores_a_recording_and_reads_back_exactly(tmp_path: Path) -> None:
    recording = _recording(tmp_path / "recording")
    before = {p: p.read_bytes() for p in recording.rglob("*") if p.is_file()}
    out = tmp_path / "study"
    assert _tool().main([str(recording), "--out", str(out), "--portable-init"]) == 0
    assert {p.name for p in out.iterdir()} == {STUDY_TABLE, STUDY_INDEX, "README.md"}
    assert {p: p.read_bytes() for p in recording.rglob("*") if p.is_file()} == before  # nothing touched
    for run in ("sft", "grpo-seed0", "grpo-seed1"):
        provenance, records = load_run(out / run)
        original = gzip.decompress((recording / run / "metrics.jsonl.gz").read_bytes()).decode()
        assert _jsonl(records) == original  # types, nulls, key order and objects as logged
        assert provenance["command"] == "record --init sft-seed0"
    assert [p.name for p in run_folders(out)] == ["grpo-seed0", "grpo-seed1", "sft"]


def test_compact_runs_portable_paths_reduce_init_work_and_out_to_folder_names(tmp_path: Path) -> None:
    recording = _recording(tmp_path / "recording")
    for run in recording.iterdir():
        if run.is_dir():
            provenance = json.loads((run / "provenance.json").read_text())
            provenance["command"] = "record --init /a/b/sft-seed0 --work /c/work --out /d/e/out-3 --seeds 3"
            (run / "provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
    out = tmp_path / "study"
    assert _tool().main([str(recording), "--out", str(out), "--portable-paths"]) == 0
    provenance, _ = load_run(out / "grpo-seed0")
    assert provenance["command"] == "record --init sft-seed0 --work work --out out-3 --seeds 3"
    entry = json.loads(gzip.decompress((out / STUDY_INDEX).read_bytes()))["runs"]["grpo-seed0"]
    assert (
        entry["rewritten"]
        == "provenance.json: the command's --init, --work, --out paths reduced to their folders' names"
    )
    assert "/c/work" not in gzip.decompress((out / STUDY_INDEX).read_bytes()).decode()


def test_compact_runs_portable_paths_reduce_an_hf_policys_model_folder(tmp_path: Path) -> None:
    """A run of the engine on a Hugging Face model names the model's folder in the recording machine's cache
    (config.policy.model): --portable-paths keeps its name only, and says so."""
    recording = _recording(tmp_path / "recording")
    run = recording / "grpo-seed1"
    provenance = json.loads((run / "provenance.json").read_text())
    provenance["config"] = {"policy": {"kind": "hf", "model": str(tmp_path / "cache" / "b179c95-float32")}}
    (run / "provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
    out = tmp_path / "study"
    assert _tool().main([str(recording), "--out", str(out), "--portable-paths"]) == 0
    assert load_run(out / "grpo-seed1")[0]["config"]["policy"]["model"] == "b179c95-float32"
    index = gzip.decompress((out / STUDY_INDEX).read_bytes()).decode()
    assert str(tmp_path) not in index
    assert json.loads(index)["runs"]["grpo-seed1"]["rewritten"] == (
        "provenance.json: the command's --init paths and config.policy.model's path reduced to their folders' names"
    )


def test_compact_runs_drops_keys_joins_a_stored_study_and_refuses_in_one_line(tmp_path: Path, capsys) -> None:
    tool = _tool()
    recording = _recording(tmp_path / "recording")
    first = tmp_path / "first"
    assert tool.main([str(recording / "sft"), "--out", str(first)]) == 2  # a run folder is not a recording
    assert "holds no recorded run" in capsys.readouterr().err and not first.exists()
    assert tool.main([str(recording), "--out", str(first), "--drop", "loss"]) == 0
    assert not any("loss" in r for r in load_run(first / "grpo-seed0")[1])
    assert study_index(first)["runs"]["grpo-seed0"]["log"]["dropped"] == ["loss"]
    assert tool.main([str(first), str(recording), "--out", str(tmp_path / "twice")]) == 2
    assert "another source holds too" in capsys.readouterr().err and not (tmp_path / "twice").exists()
    assert tool.main([str(first), "--out", str(first)]) == 2
    assert "exists" in capsys.readouterr().err
    (recording / "grpo-seed0" / "model.safetensors").write_bytes(b"\0" * 8)
    assert tool.main([str(recording), "--out", str(tmp_path / "work")]) == 2
    err = capsys.readouterr().err
    assert "not a small text file" in err and len(err.strip().splitlines()) == 1


def test_compact_runs_leaves_out_the_weights_train_writes_into_a_run(tmp_path: Path) -> None:
    """A run folder written whole by ``train`` (tools/record_smollm2_allocation.py) holds its checkpoints and
    starting model: the study keeps the logs, leaves those folders out and names them; any other folder in a
    run is still refused."""
    recording = _recording(tmp_path / "recording")
    for name in ("checkpoint", "checkpoint.alt", "init"):
        (recording / "grpo-seed0" / name).mkdir()
        (recording / "grpo-seed0" / name / "model.safetensors").write_bytes(b"\0" * 8)
    out = tmp_path / "study"
    assert _tool().main([str(recording), "--out", str(out)]) == 0
    entry = json.loads(gzip.decompress((out / STUDY_INDEX).read_bytes()))["runs"]["grpo-seed0"]
    assert entry["left_out"].startswith("checkpoint/, checkpoint.alt/, init/: the run's weights")
    assert (
        "model.safetensors" not in entry["digests"]
        and "left_out" not in json.loads(gzip.decompress((out / STUDY_INDEX).read_bytes()))["runs"]["grpo-seed1"]
    )
    (recording / "grpo-seed1" / "notes").mkdir()
    assert _tool().main([str(recording), "--out", str(tmp_path / "again")]) == 2
