"""Every committed run log reproduces: its provenance names a clean commit, the SFT model it started
from, the versions, the device and a wall time, and the log is stored compressed.

These read the files under ``data/runs/`` as they are committed; ``record`` writes them (see
``stddial_book.experiments.record``), so a hand-copied or dirty-tree run fails here.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from stddial_book.core.outdir import MARKER, read_marker
from stddial_book.rl.runlog import RECORDED_DIR, load_run, read_json

# the testbed's recorded folders, each with the SFT warm start its runs share (the language-model runs under
# data/runs/smollm2 have their own checks: tests/test_lm_study.py)
PROFILES = (
    sorted(p for p in Path(RECORDED_DIR).iterdir() if (p / "sft").is_dir()) if Path(RECORDED_DIR).is_dir() else []
)
RUNS = [run for profile in PROFILES for run in sorted(profile.iterdir()) if (run / "provenance.json").is_file()]
HEX40 = re.compile(r"[0-9a-f]{40}")


def test_there_are_recorded_runs() -> None:
    assert PROFILES and len(RUNS) >= 16, (PROFILES, RUNS)


@pytest.mark.parametrize("run", RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_provenance_names_a_clean_commit_and_what_ran(run: Path) -> None:
    provenance, records = load_run(run)
    assert HEX40.fullmatch(provenance.get("git_commit", "")), f"{run}: no commit recorded"
    assert provenance.get("dirty") is False, f"{run}: recorded from a tree with uncommitted changes"
    assert re.fullmatch(r"[0-9a-f]{32}", provenance.get("run_id") or ""), f"{run}: no run id"
    assert provenance["packages"]["torch"] and provenance["python"] and provenance["device"]
    wall = provenance.get("wall_time_s")
    assert isinstance(wall, (int, float)) and math.isfinite(wall) and wall > 0, f"{run}: wall time {wall!r}"
    assert records and all("step" in r for r in records)
    names = {p.name for p in run.iterdir()}
    assert "metrics.jsonl.gz" in names and "metrics.jsonl" not in names, f"{run}: log not stored compressed"
    assert MARKER in names and read_marker(run)["kind"] == "recorded"
    if "-seed" in run.name:
        assert records[-1]["samples/generated"] >= provenance["config"]["train"]["sample_budget"], (
            f"{run}: the log stops before the run's sample budget"
        )


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_a_profiles_runs_share_one_commit_and_start_from_its_sft_model(profile: Path) -> None:
    """The runs of a folder come from one commit; its warm start may come from an earlier one (the
    ablation's runs started from the reference runs' SFT model, passed with --init): what ties
    them is the model's sha256, which every run records."""
    runs = [r for r in RUNS if r.parent == profile]
    commits = {read_json(r / "provenance.json")["git_commit"] for r in runs if r.name != "sft"}
    assert len(commits) == 1, f"{profile.name}: runs from several commits {sorted(commits)}"
    sft = read_json(profile / "sft" / "provenance.json")
    model = sft.get("model_sha256")
    assert model and re.fullmatch(r"[0-9a-f]{64}", model)
    for run in runs:
        if run.name != "sft":
            started = read_json(run / "provenance.json")["config"]["init_sha256"]
            assert started == model, f"{run}: started from {started[:12]}, not the recorded SFT model {model[:12]}"
