"""Chapter 15's strict SmolLM2 runs (data/runs/smollm2/strict, PLAN-strict.md with its third amendment): every
shipped run is what the amended plan says, from one clean commit that holds the amendment, and, once the
recording is complete, the shipped summary recomputes from the logs. While it records, the shipped folder holds
the finished runs and a partial.json naming the rest."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import STRICT_ENV, same_summary, smollm2_wheel_or_skip

from stddial_book.core.resources import data_path
from stddial_book.experiments.smollm2.study import STRICT_STUDY_FILE, load_study, write_study

STRICT = data_path("runs", "smollm2", "strict")
PLAN = "data/runs/smollm2/PLAN-strict.md"
pytestmark = pytest.mark.skipif(not STRICT.is_dir(), reason="the recorded logs are in the repository only")
COMPLETE = not (STRICT / "partial.json").exists()  # False while the runs are still recording
complete_only = pytest.mark.skipif(not COMPLETE, reason="the strict runs are still recording (partial.json)")


def _sha(name: str) -> str:
    return hashlib.sha256(data_path("smollm2", name).read_bytes()).hexdigest()


def _plan_at(commit: str) -> str:
    """The plan's text at ``commit`` (needs git and the history; skipped without, failed under CI_STRICT)."""
    root = Path(__file__).resolve().parents[1]
    try:
        return subprocess.run(["git", "show", f"{commit}:{PLAN}"], cwd=root, capture_output=True, text=True,
                              timeout=20, check=True).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        if os.environ.get(STRICT_ENV) == "1":
            raise
        pytest.skip("no git history here")


def _provenances() -> dict[str, dict]:
    return {run.name: json.loads((run / "provenance.json").read_text()) for run in sorted((STRICT / "main").iterdir())}


def test_every_shipped_run_is_what_the_amended_plan_says():
    """Each finished run: the plan's settings at the rate its third amendment fixed, on the CPU in float32 with
    steps of 16 completions a pass, the strict check, the committed question files, 40 steps each logged once,
    before and after evaluated under both checks with two completions of each held-out question kept; all from
    one clean commit whose plan holds the third amendment."""
    provenances = _provenances() if (STRICT / "main").is_dir() else {}
    if not provenances:
        assert not COMPLETE, "a complete recording ships its main runs"
        pytest.skip("no main run has finished yet")
    commits = {prov["git_commit"] for prov in provenances.values()}
    assert len(commits) == 1 and all(prov["dirty"] is False for prov in provenances.values())
    assert "## Third amendment" in _plan_at(commits.pop())
    for name, prov in provenances.items():
        run = prov["config"]["run"]
        assert run["learning_rate"] == 3e-4 and run["verifier"] == "last-number" and run["max_steps"] == 40, name
        assert run["model_id"] == "smollm2" and run["micro_batch_size"] == 16, name
        assert prov["precision"]["dtype"] == "float32" and prov["gpu"] is None and prov["device"].startswith("cpu")
        assert prov["inputs_sha256"]["dataset"] == _sha("pool_train.jsonl")
        assert prov["inputs_sha256"]["eval_file"] == _sha("pool_heldout.jsonl")
        with gzip.open(STRICT / "main" / name / "metrics.jsonl.gz", "rt") as handle:
            assert [json.loads(line)["step"] for line in handle] == list(range(1, 41)), name
        with gzip.open(STRICT / "main" / name / "eval.json.gz", "rt") as handle:
            evals = json.load(handle)
        for when in ("before", "after"):
            held = evals[when]["heldout"]
            assert len(held) == 112 and all(row["samples"] == 16 for row in held), (name, when)
            assert all(set(row["correct_by"]) == {"last-number", "math-verify"} for row in held)
            assert all(row["correct"] == row["correct_by"]["last-number"] for row in held)
            assert all(len(row["examples"]) == 2 for row in held) and len(evals[when]["pool"]) == 224
    driver = json.loads((STRICT / "driver.json").read_text())
    assert driver["settings"]["learning_rate"] == 3e-4 and "pilots" not in driver and driver["plan"] == PLAN


def test_the_base_pool_is_measured_under_both_checks():
    for kind, count in (("train", 224), ("heldout", 112)):
        if not (STRICT / "measure" / kind).is_dir():
            assert not COMPLETE, f"a complete recording ships measure/{kind}"
            continue
        record = json.loads(gzip.decompress((STRICT / "measure" / kind / "measure.json.gz").read_bytes()))
        assert record["settings"]["samples"] == 64 and len(record["rows"]) == count
        assert all(set(row["correct_by"]) == {"last-number", "math-verify"} for row in record["rows"])
        assert record["provenance"]["dirty"] is False and record["provenance"]["device"].startswith("cpu")
        assert record["settings"]["prompts_sha256"] == _sha(f"pool_{kind}.jsonl")
        assert "## Third amendment" in _plan_at(record["provenance"]["git_commit"])  # the runs' commit (above)
        commits = {p["git_commit"] for p in _provenances().values()} if (STRICT / "main").is_dir() else set()
        assert commits <= {record["provenance"]["git_commit"]}


def test_the_shipped_part_and_what_is_unfinished_make_the_whole_recording():
    """Every run the plan asks for and both measurements are either shipped or named as unfinished, never both;
    a complete recording names none."""
    runs = {f"main/{r}-seed{s}" for r in ("grpo", "dr_grpo", "dapo") for s in (0, 1, 2)}
    shipped = {f"main/{run}" for run in _provenances()} if (STRICT / "main").is_dir() else set()
    shipped |= {f"measure/{kind}" for kind in ("train", "heldout") if (STRICT / "measure" / kind).is_dir()}
    unfinished = set(json.loads((STRICT / "partial.json").read_text())["unfinished"]) if not COMPLETE else set()
    assert not shipped & unfinished and shipped | unfinished == runs | {"measure/train", "measure/heldout"}


@complete_only
def test_the_recording_is_complete():
    assert sorted(_provenances()) == sorted(f"{r}-seed{s}" for r in ("grpo", "dr_grpo", "dapo") for s in (0, 1, 2))


@complete_only
def test_the_shipped_summary_recomputes_from_the_logs(tmp_path):
    smollm2_wheel_or_skip()
    from stddial_book.bridges.smollm2 import smollm2_token_counter

    fresh = write_study(STRICT, tmp_path / "study.json.gz", count_tokens=smollm2_token_counter())
    same_summary(load_study(fresh), load_study(STRICT_STUDY_FILE))
