"""tools/record_smollm2.py, the driver of chapter 15's recording: a new folder is made its own, bad input and
a folder not its own are refused before anything is written, and a recording stopped part way continues with
--resume under the same settings only (the record-lm processes are replaced by a stand-in here: each real
one takes an hour on a CPU)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import load_tool

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    return load_tool("record_smollm2")


def _write_pilot_log(run: Path, level: float, steps: int = 12) -> None:
    """A pilot run's metrics.jsonl.gz as record-lm logs it: ``level`` as the batch pass rate of every step."""
    lines = [json.dumps({"step": s, "dial/pass_rate": level}) for s in range(1, steps + 1)]
    with gzip.open(run / "metrics.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")


class _StandIn:
    """Replaces the driver's process pool: records each command, writes its log, and for a pilot that is to
    succeed, the pass-rate curve record-lm would have logged (rate 3e-4 learns best)."""

    def __init__(self, pilots_succeed: bool) -> None:
        self.pilots_succeed, self.commands = pilots_succeed, []

    def __call__(self, jobs, workers, timeout):
        results = []
        for cmd, log in jobs:
            with open(log, "x", encoding="utf-8") as handle:  # the driver never reuses a log
                handle.write("stand-in\n")
            self.commands.append(cmd)
            pilot = "record-lm" in cmd and "100" in cmd[cmd.index("--seeds") + 1 :][:1]
            code = 0
            if pilot and self.pilots_succeed:
                out, rate = Path(cmd[cmd.index("--out") + 1]), cmd[cmd.index("--learning-rate") + 1]
                recipe = cmd[cmd.index("--recipes") + 1]
                run = out / f"{recipe}-seed100"
                run.mkdir(parents=True)
                _write_pilot_log(run, {"1e-4": 0.2, "3e-4": 0.5, "1e-3": 0.3}[rate])
            elif pilot:
                code = 1
            results.append({"command": " ".join(cmd[2:]), "returncode": code, "wall_s": 0.0})
        return results


def _is_main(cmd: list[str]) -> bool:
    return "--out" in cmd and Path(cmd[cmd.index("--out") + 1]).parent.name == "main"


ARGS = ["--allow-cpu", "--jobs", "2", "--steps", "12", "--pilot-recipes", "grpo", "dr_grpo", "dapo"]


def test_a_recording_stopped_part_way_continues_with_resume(tmp_path, monkeypatch, capsys) -> None:
    tool = _tool()
    out = tmp_path / "rec"
    first = _StandIn(pilots_succeed=False)
    monkeypatch.setattr(tool, "_parallel", first)
    assert tool.main(["--out", str(out), *ARGS]) == 1  # every pilot failed: no main run is started
    assert "--resume" in capsys.readouterr().out
    assert not [cmd for cmd in first.commands if _is_main(cmd)]
    driver = json.loads((out / "driver.json").read_text())
    assert driver["settings"]["pilot_recipes"] == ["grpo", "dr_grpo", "dapo"] and len(driver["attempts"]) == 1

    # the same folder without --resume, or with other settings, is refused and left as it was
    before = (out / "driver.json").read_text()
    assert tool.main(["--out", str(out), *ARGS]) == 2
    assert tool.main(["--out", str(out), "--resume", *ARGS, "--steps", "20"]) == 2  # the last --steps counts
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "--resume" in err[0] and "--steps" in err[1] and "steps=12" in err[1]
    assert (out / "driver.json").read_text() == before

    second = _StandIn(pilots_succeed=True)
    monkeypatch.setattr(tool, "_parallel", second)
    assert tool.main(["--out", str(out), "--resume", *ARGS]) == 0
    driver = json.loads((out / "driver.json").read_text())
    assert len(driver["attempts"]) == 2
    # each recipe takes the rate its own pilot chose; nine main runs, logged under the second attempt's names
    assert {r: p["chosen_learning_rate"] for r, p in driver["pilots"].items()} == dict.fromkeys(
        ("grpo", "dr_grpo", "dapo"), 3e-4
    )
    mains = [cmd for cmd in second.commands if _is_main(cmd)]
    assert len(mains) == 9 and all(cmd[cmd.index("--learning-rate") + 1] == "0.0003" for cmd in mains)
    assert (out / "logs" / "grpo-seed0.2.log").is_file() and (out / "logs" / "pilot-grpo-1e-4.log").is_file()
    assert driver["stages"] == driver["attempts"][1]["stages"]


@pytest.mark.parametrize(
    "args",
    [["--steps", "5"], ["--jobs", "0"], ["--seeds", "-1"], ["--timeout", "0"], ["--seeds", "0", "0"],
     ["--pilot-recipes", "grpo", "grpo"]],
)  # fmt: skip
def test_bad_input_is_refused_in_one_line_before_anything_is_written(args, tmp_path, capsys) -> None:
    out = tmp_path / "rec"
    assert _tool().main(["--out", str(out), *args]) == 2
    assert not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


def test_a_folder_that_is_not_its_own_is_never_continued(tmp_path, capsys) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "driver.json").write_text('{"settings": {}}\n')  # a reader's file of the same name
    assert _tool().main(["--out", str(out), "--resume"]) == 2
    assert sorted(p.name for p in out.iterdir()) == ["driver.json"]
    assert "cannot resume" in capsys.readouterr().err


def test_a_driver_killed_in_its_first_stage_is_on_record_and_continues(tmp_path, monkeypatch) -> None:
    """The attempt is written before any process starts, so a driver killed mid-stage leaves it on record, and
    the next attempt's logs take new names (they never collide with what the killed one left)."""
    tool = _tool()
    out = tmp_path / "rec"

    def killed(jobs, workers, timeout):
        for _, log in jobs[:2]:
            log.write_text("started\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(tool, "_parallel", killed)
    with pytest.raises(KeyboardInterrupt):
        tool.main(["--out", str(out), *ARGS])
    driver = json.loads((out / "driver.json").read_text())
    assert len(driver["attempts"]) == 1 and driver["attempts"][0]["stages"] == {}
    assert driver["attempts"][0]["jobs"] == 2 and driver["attempts"][0]["timeout_s"] == 36000.0  # --allow-cpu
    second = _StandIn(pilots_succeed=True)
    monkeypatch.setattr(tool, "_parallel", second)
    assert tool.main(["--out", str(out), "--resume", *ARGS]) == 0
    assert (out / "logs" / "measure-train.log").read_text() == "started\n"
    assert (out / "logs" / "measure-train.2.log").read_text() == "stand-in\n"
    assert len(json.loads((out / "driver.json").read_text())["attempts"]) == 2


def test_two_drivers_never_run_one_recording(tmp_path, monkeypatch, capsys) -> None:
    tool = _tool()
    out = tmp_path / "rec"
    monkeypatch.setattr(tool, "_parallel", _StandIn(pilots_succeed=False))
    assert tool.main(["--out", str(out), *ARGS]) == 1
    held = tool._hold(out)  # another driver, still running
    try:
        assert tool.main(["--out", str(out), "--resume", *ARGS]) == 2
        assert "another driver" in capsys.readouterr().err
    finally:
        import os

        os.close(held)
    assert len(json.loads((out / "driver.json").read_text())["attempts"]) == 1


def test_main_runs_continue_elsewhere_at_the_rates_another_recordings_pilots_chose(tmp_path, monkeypatch, capsys):
    """--pilots-from: the main runs only, at the rates the source's pilot logs give (recomputed, not copied),
    the source read and never written; other settings, or a source without finished pilots, are refused in
    one line before anything is written."""
    tool = _tool()
    gpu = tmp_path / "gpu"
    first = _StandIn(pilots_succeed=True)
    monkeypatch.setattr(tool, "_parallel", first)
    on_gpu = [a for a in ARGS if a != "--allow-cpu"]
    assert tool.main(["--out", str(gpu), *on_gpu]) == 0
    before = {p: p.read_bytes() for p in gpu.rglob("*") if p.is_file()}

    cpu = tmp_path / "cpu"
    second = _StandIn(pilots_succeed=True)
    monkeypatch.setattr(tool, "_parallel", second)
    assert tool.main(["--out", str(cpu), "--pilots-from", str(gpu), *ARGS]) == 0
    assert all("record-lm" in cmd and _is_main(cmd) for cmd in second.commands) and len(second.commands) == 9
    assert all(cmd[cmd.index("--learning-rate") + 1] == "0.0003" and "--allow-cpu" in cmd for cmd in second.commands)
    driver = json.loads((cpu / "driver.json").read_text())
    assert driver["pilots_from"]["folder"] == str(gpu.resolve()) and driver["pilots_from"]["allow_cpu"] is False
    assert driver["pilots_from"]["micro_batch_size"] == 64 and driver["settings"]["micro_batch_size"] == 64
    assert driver["pilots"]["dapo"]["chosen_learning_rate"] == 3e-4 and not (cpu / "pilot").exists()
    assert {p: p.read_bytes() for p in gpu.rglob("*") if p.is_file()} == before

    # a pilot log whose curve now picks another rate than the source's record: refused, nothing written
    run = gpu / "pilot" / "grpo-1e-4" / "grpo-seed100"
    _write_pilot_log(run, 0.9)
    for args, words in (
        (["--pilots-from", str(gpu), *ARGS], "do not give the rates"),
        (["--pilots-from", str(tmp_path / "nowhere"), *ARGS], "holds no driver.json"),
        (["--pilots-from", str(cpu / "logs"), *ARGS], "holds no driver.json"),
    ):
        assert tool.main(["--out", str(tmp_path / "new"), *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0] and not (tmp_path / "new").exists()
    run.parent.rename(tmp_path / "moved")  # a pilot's logs missing
    assert tool.main(["--out", str(tmp_path / "new"), "--pilots-from", str(gpu), *ARGS]) == 2
    assert "cannot be read" in capsys.readouterr().err and not (tmp_path / "new").exists()
    (tmp_path / "moved").rename(run.parent)
    assert tool.main(["--out", str(tmp_path / "new"), "--pilots-from", str(gpu), *ARGS, "--steps", "20"]) == 2
    assert "--steps" in capsys.readouterr().err and not (tmp_path / "new").exists()
    # fewer completions a pass (a CPU's memory) computes the same step: accepted, and on record
    third = _StandIn(pilots_succeed=True)
    monkeypatch.setattr(tool, "_parallel", third)
    _write_pilot_log(run, 0.2)  # the stand-in's own log again
    assert (
        tool.main(["--out", str(tmp_path / "cpu16"), "--pilots-from", str(gpu), *ARGS, "--micro-batch-size", "16"]) == 0
    )
    assert all(cmd[cmd.index("--micro-batch-size") + 1] == "16" for cmd in third.commands)
    assert json.loads((tmp_path / "cpu16" / "driver.json").read_text())["settings"]["micro_batch_size"] == 16
    # more seeds of the same study, at the same pilots' rates
    fourth = _StandIn(pilots_succeed=True)
    monkeypatch.setattr(tool, "_parallel", fourth)
    more = ["--seeds", "3", "4", "--plan", "data/runs/smollm2/PLAN-more.md"]
    assert tool.main(["--out", str(tmp_path / "more"), "--pilots-from", str(gpu), *ARGS, *more]) == 0
    assert sorted(cmd[cmd.index("--seeds") + 1] for cmd in fourth.commands) == ["3"] * 3 + ["4"] * 3
    driver = json.loads((tmp_path / "more" / "driver.json").read_text())
    assert driver["plan"] == "data/runs/smollm2/PLAN-more.md" and driver["pilots_from"]["seeds"] == [0, 1, 2]


def test_a_rate_the_plan_fixes_runs_no_pilots_and_a_lost_part_is_finished_in_a_new_folder(
    tmp_path, monkeypatch, capsys
):
    """--learning-rate: the base pool, then the main runs at that rate, no pilot; with --recipes, --seeds and
    --no-measure only the runs named (a recording lost before it was shipped is finished elsewhere); what
    contradicts itself is refused in one line before anything is written."""
    tool = _tool()
    fixed = ["--allow-cpu", "--jobs", "2", "--steps", "12", "--learning-rate", "3e-4"]
    first = _StandIn(pilots_succeed=False)  # a pilot would fail: none may run
    monkeypatch.setattr(tool, "_parallel", first)
    assert tool.main(["--out", str(tmp_path / "rec"), *fixed]) == 0
    assert [Path(cmd[cmd.index("--out") + 1]).name for cmd in first.commands[:2]] == [
        "measure-train",
        "measure-heldout",
    ]
    mains = first.commands[2:]
    assert len(mains) == 9 and all(_is_main(cmd) and cmd[cmd.index("--learning-rate") + 1] == "0.0003" for cmd in mains)
    driver = json.loads((tmp_path / "rec" / "driver.json").read_text())
    assert (
        "pilots" not in driver
        and driver["settings"]["learning_rate"] == 3e-4
        and not (tmp_path / "rec" / "pilot").exists()
    )
    assert tool.main(["--out", str(tmp_path / "rec"), "--resume", *fixed]) == 0  # continues under the same settings
    assert tool.main(["--out", str(tmp_path / "rec"), "--resume", *fixed[:-1], "1e-4"]) == 2
    assert "--learning-rate" in capsys.readouterr().err

    second = _StandIn(pilots_succeed=False)
    monkeypatch.setattr(tool, "_parallel", second)
    rest = ["--no-measure", "--recipes", "dr_grpo", "dapo", "--seeds", "1"]
    assert tool.main(["--out", str(tmp_path / "rest"), *fixed, *rest]) == 0
    assert sorted((cmd[cmd.index("--recipes") + 1], cmd[cmd.index("--seeds") + 1]) for cmd in second.commands) == [
        ("dapo", "1"), ("dr_grpo", "1")
    ]  # fmt: skip

    for args, words in (
        ([*fixed, "--pilots-from", str(tmp_path / "rec")], "without --pilots-from"),
        ([*fixed[:-1], "0"], "> 0"),
        (["--no-measure"], "goes with --learning-rate"),
        ([*fixed, "--recipes", "dapo", "dapo"], "each recipe once"),
    ):
        assert tool.main(["--out", str(tmp_path / "new"), *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0] and not (tmp_path / "new").exists()


def test_the_pool_shares_one_queue_with_the_main_runs_and_old_recordings_resume_as_they_ran(
    tmp_path, monkeypatch, capsys
):
    """With a fixed rate the measurements go first into the one queue of the main runs (one call of the process
    pool, so no core waits on the pool), on record as their own stage. The recipes name the same runs in any
    order. A recording made before --learning-rate, --recipes and --no-measure existed (its driver.json names
    none of them) resumes as it ran: all recipes, measured, piloted; another value is refused naming what it ran."""
    tool = _tool()
    calls = []

    def queue(jobs, workers, timeout):
        calls.append([Path(cmd[cmd.index("--out") + 1]).name for cmd, _ in jobs])
        return _StandIn(pilots_succeed=False)(jobs, workers, timeout)

    monkeypatch.setattr(tool, "_parallel", queue)
    fixed = ["--allow-cpu", "--steps", "12", "--learning-rate", "3e-4", "--recipes", "dapo", "grpo", "--seeds", "0"]
    assert tool.main(["--out", str(tmp_path / "rec"), *fixed]) == 0
    assert calls == [["measure-train", "measure-heldout", "grpo-seed0", "dapo-seed0"]]
    driver = json.loads((tmp_path / "rec" / "driver.json").read_text())
    assert [s["command"].split()[1] for s in driver["stages"]["measure"]] == ["measure", "measure"]
    assert driver["settings"]["recipes"] == ["grpo", "dapo"]
    reordered = [*fixed[:-5], "--recipes", "grpo", "dapo", "--seeds", "0"]
    assert tool.main(["--out", str(tmp_path / "rec"), "--resume", *reordered]) == 0

    old = tmp_path / "old"
    first = _StandIn(pilots_succeed=False)
    monkeypatch.setattr(tool, "_parallel", first)
    assert tool.main(["--out", str(old), *ARGS]) == 1  # its pilots failed; it is to be resumed
    driver = json.loads((old / "driver.json").read_text())
    for key in ("learning_rate", "recipes", "measure"):  # as a recording made before these settings wrote it
        del driver["settings"][key]
    (old / "driver.json").write_text(json.dumps(driver))
    monkeypatch.setattr(tool, "_parallel", _StandIn(pilots_succeed=True))
    assert tool.main(["--out", str(old), "--resume", *ARGS]) == 0
    assert tool.main(["--out", str(old), "--resume", *ARGS, "--recipes", "grpo"]) == 2
    assert "recipes=['grpo', 'dr_grpo', 'dapo']" in capsys.readouterr().err
    for rate, words in (("inf", "finite rate > 0"), ("0", "finite rate > 0")):
        assert tool.main(["--out", str(tmp_path / "new"), "--learning-rate", rate]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0] and not (tmp_path / "new").exists()
