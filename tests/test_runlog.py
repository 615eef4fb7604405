"""Run logs: metrics JSONL, provenance, resume, loaders."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stddial_book.rl.runlog import RunLog, load_run, metric_series


def test_write_and_load(tmp_path) -> None:
    log = RunLog(
        tmp_path,
        command="python -m stddial_book train --recipe dapo",
        seed=3,
        profile="quick",
        config={"group_size": 8},
    )
    log.log(0, {"reward": np.float64(0.5), "kl": float("nan")})
    log.log(1, {"reward": 0.75, "frac_reward_zero_std": 0.25})
    log.finish()
    provenance, records = load_run(tmp_path)
    assert provenance["seed"] == 3 and provenance["profile"] == "quick"
    assert provenance["config"] == {"group_size": 8} and provenance["wall_time_s"] >= 0
    assert {"torch", "numpy"} <= set(provenance["packages"]) and provenance["device"]
    steps, reward = metric_series(records, "reward")
    assert steps.tolist() == [0, 1] and reward.tolist() == [0.5, 0.75]
    assert np.isnan(metric_series(records, "kl")[1][0])
    with pytest.raises(ValueError, match="never logged"):
        metric_series(records, "entropy")


def test_resume_appends_and_fresh_run_refuses_to_overwrite(tmp_path) -> None:
    first = RunLog(tmp_path, "cmd", 0, "quick")
    first.log(0, {"reward": 0.1})
    first.finish()
    with pytest.raises(ValueError, match="resume=True"):
        RunLog(tmp_path, "cmd", 0, "quick")
    second = RunLog(tmp_path, "cmd", 0, "quick", resume=True)
    second.log(1, {"reward": 0.2})
    second.finish()
    provenance, records = load_run(tmp_path)
    assert [r["step"] for r in records] == [0, 1] and len(provenance["resumed_at"]) == 1
    assert all(json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines())


def test_load_run_rejects_other_folders(tmp_path) -> None:
    with pytest.raises(ValueError, match="not a run directory"):
        load_run(tmp_path)


def test_a_cpu_run_is_recorded_as_cpu(tmp_path) -> None:
    """Never labelled with a GPU it did not use: the device comes from the run, not the machine."""
    from stddial_book.rl.runlog import environment

    assert environment("cpu")["device"].startswith("cpu (") and environment()["device"].startswith("cpu (")
    log = RunLog(tmp_path, "cmd", 0, "quick", device="cpu")
    assert log.provenance["device"].startswith("cpu (")


def test_a_partial_last_line_is_skipped_with_a_warning(tmp_path) -> None:
    """A run killed while writing leaves half a line: loading warns and keeps the complete records."""
    log = RunLog(tmp_path, "cmd", 0, "quick")
    log.log(0, {"reward": 0.1})
    log.log(1, {"reward": 0.2})
    with open(tmp_path / "metrics.jsonl", "a") as handle:
        handle.write('{"step": 2, "rew')
    with pytest.warns(UserWarning, match="partial last line"):
        records = load_run(tmp_path)[1]
    assert [r["step"] for r in records] == [0, 1]


def test_damaged_run_files_are_named(tmp_path) -> None:
    log = RunLog(tmp_path, "cmd", 0, "quick")
    log.log(0, {"reward": 0.1})
    log.log(1, {"reward": 0.2})
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    (tmp_path / "metrics.jsonl").write_text(lines[0][:-3] + "\n" + lines[1] + "\n")  # damage a middle line
    with pytest.raises(ValueError, match=r"metrics.jsonl, line 1, is damaged"):
        load_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "provenance.json").write_text('{"seed": 0,')
    with pytest.raises(ValueError, match=r"provenance.json is damaged"):
        load_run(tmp_path)
    with pytest.raises(ValueError, match=r"provenance.json is damaged"):
        RunLog(tmp_path, "cmd", 0, "quick", resume=True)


def test_a_file_in_the_way_of_the_run_directory(tmp_path) -> None:
    (tmp_path / "taken").write_text("not a directory")
    with pytest.raises(ValueError, match="a file of that name is in the way"):
        RunLog(tmp_path / "taken", "cmd", 0, "quick")
