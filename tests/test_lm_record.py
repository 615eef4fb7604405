"""``python -m stddial_book record-lm``: chapter 15's GPU run, recorded. Without CUDA it refuses in one line
unless --allow-cpu is given; every argument is checked before any work; a dirty checkout is refused; the
tiny CPU smoke run writes each run's compressed log and a provenance naming the device, dtype, memory
estimate and versions, and nothing outside --work and --out; an interrupted run resumes from its last
checkpoint."""

from __future__ import annotations

import gzip
import json

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")
pytest.importorskip("math_verify")

from stddial_book.bridges import lm_record
from stddial_book.bridges.lm_data import build_tiny_model, write_tiny_gsm8k
from stddial_book.bridges.lm_setup import colab_t4_config
from stddial_book.cli import main
from stddial_book.core.outdir import MARKER, claim_dir, read_marker
from stddial_book.rl import runlog
from stddial_book.rl.runlog import load_run

pytestmark = pytest.mark.trl

COMMIT = "abc1234def"
#: The smallest run the CLI takes: 2 questions × G = 4 per step, 8 tokens, 2 steps.
SIZES = ["--num-prompts", "16", "--group-size", "4", "--prompts-per-step", "2", "--micro-batch-size", "8"]
SIZES += ["--max-new-tokens", "8", "--max-steps", "2"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm-inputs")
    data = write_tiny_gsm8k(root / "tiny.jsonl", num_rows=16)
    return build_tiny_model(root / "model", data), data


@pytest.fixture
def clean_tree(monkeypatch):
    monkeypatch.setattr(runlog, "git_state", lambda *a, **k: (COMMIT, False))


def _args(tiny, tmp_path, *extra) -> list[str]:
    model, data = tiny
    return ["record-lm", "--model", str(model), "--dataset", str(data), *SIZES, "--no-progress"] + [
        "--work",
        str(tmp_path / "work"),
        "--out",
        str(tmp_path / "out"),
        *extra,
    ]


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def _no_training(monkeypatch):
    import stddial_book.bridges.lm_run as lm_run

    monkeypatch.setattr(lm_run, "build_trainer", lambda *a, **k: pytest.fail("a run started"))


def test_refuses_without_cuda_unless_allowed(tiny, tmp_path, monkeypatch, capsys, clean_tree) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    _no_training(monkeypatch)
    assert main(_args(tiny, tmp_path)) == 2
    err = _one_line_error(capsys)
    assert "no CUDA GPU" in err and "--allow-cpu" in err
    assert not (tmp_path / "work").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "bad, message",
    [
        (["--recipes", "ppo"], "unknown recipe 'ppo'"),
        (["--seeds", "-1"], "out of range"),
        (["--group-size", "1"], "group_size"),
        (["--micro-batch-size", "3"], "must divide"),
        (["--max-steps", "0"], "out of range"),
        (["--save-every", "x"], "not a whole number"),
        (["--model", "{tmp}/no-model"], "no such directory"),
        (["--model", "{data}"], "not a model directory"),
        (["--model", "someone/not-cached-model"], "not in the local cache and HF_HUB_OFFLINE is set"),
        (["--dataset", "{model}"], "not a .json or .jsonl file"),
        (["--dataset", "{tmp}/missing.jsonl"], "no such file"),
        (["--dataset", "openai/gsm8k"], "HF_HUB_OFFLINE is set"),
        (["--out", ""], "--out: "),
        (["--work", "~"], "home directory"),
        (["--out", "{tmp}/work/inside"], "separate directories"),
        (["--out", "{tmp}/theirs"], "not empty and was not written by stddial_book"),
    ],
)
def test_every_argument_is_checked_before_any_work(
    tiny, tmp_path, monkeypatch, capsys, clean_tree, bad, message
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _no_training(monkeypatch)
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "notes.txt").write_text("a reader's file\n")
    names = {"tmp": tmp_path, "model": tiny[0], "data": tiny[1]}
    bad = [b.format(**names) for b in bad]
    assert main(_args(tiny, tmp_path, "--allow-cpu") + bad) == 2
    assert message in _one_line_error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs"]  # nothing created
    assert (tmp_path / "theirs" / "notes.txt").read_text() == "a reader's file\n"


def test_refuses_a_dirty_tree(tiny, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(runlog, "git_state", lambda *a, **k: (COMMIT, True))
    _no_training(monkeypatch)
    assert main(_args(tiny, tmp_path, "--allow-cpu")) == 2
    assert "uncommitted changes" in _one_line_error(capsys)
    assert not (tmp_path / "work").exists() and not (tmp_path / "out").exists()


def test_tiny_cpu_run_records_log_and_provenance(tiny, tmp_path, monkeypatch, capsys, clean_tree) -> None:
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    # a run an interruption left without a checkpoint: restarted from scratch, inside the tool's folder
    claim_dir(tmp_path / "work", "lm-record-work")
    stale = claim_dir(tmp_path / "work" / "dr_grpo-seed0", "lm-run")
    (stale / "metrics.jsonl").write_text('{"step": 7, "loss": 1.0}\n{"st')
    inputs = sorted(p.name for p in tiny[0].iterdir())
    assert main(_args(tiny, tmp_path, "--allow-cpu", "--recipes", "dr_grpo")) == 0
    run = tmp_path / "out" / "dr_grpo-seed0"
    assert f"recorded {run}" in capsys.readouterr().out
    assert sorted(f.name for f in run.iterdir()) == [MARKER, "metrics.jsonl.gz", "provenance.json"]
    provenance, records = load_run(run)
    assert [r["step"] for r in records] == [1, 2]
    for record in records:
        assert 0.0 <= record["dial/silent_fraction"] <= 1.0 and sum(record["dial/k_counts"]) == 2
        assert record["dial/advantage_gap"] < 1e-5 and "loss" in record and "reward" in record  # TRL's log
    assert "record-lm" in provenance["command"] and provenance["run_id"] == read_marker(stale)["run_id"]
    assert (provenance["git_commit"], provenance["dirty"], provenance["seed"]) == (COMMIT, False, 0)
    assert provenance["device"].startswith("cpu") and provenance["gpu"] is None
    assert provenance["precision"] == {"device": "cpu", "dtype": "float32", "bf16": False, "fp16": False}
    assert provenance["memory_estimate_gib"]["total"] > 0 and provenance["wall_time_s"] > 0
    assert all(provenance["packages"][name] for name in ("torch", "transformers", "trl", "peft", "math-verify"))
    assert provenance["config"]["recipe"] == "dr_grpo" and provenance["config"]["run"]["group_size"] == 4
    assert provenance["trl_settings"]["scale_rewards"] == "none"
    # nothing outside --work and --out: the working directory and the inputs are as they were
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "out", "work"]
    assert not any((tmp_path / "cwd").iterdir()) and sorted(p.name for p in tiny[0].iterdir()) == inputs
    # the same command again: the finished run is not trained again and the record is unchanged
    before = (run / "metrics.jsonl.gz").read_bytes()
    _no_training(monkeypatch)
    assert main(_args(tiny, tmp_path, "--allow-cpu", "--recipes", "dr_grpo")) == 0
    assert (run / "metrics.jsonl.gz").read_bytes() == before
    # other settings on the same --work: refused before any work
    assert main(_args(tiny, tmp_path, "--allow-cpu", "--recipes", "dr_grpo", "--max-steps", "3")) == 2
    assert "other settings" in _one_line_error(capsys)


def _resumable_config(tiny, **changes):
    """The tiny run the resume tests stop and resume: 4 questions × G = 8 a step, 8 tokens, one pass a step."""
    model, data = tiny
    sizes = {"num_prompts": 16, "group_size": 8, "prompts_per_step": 4, "micro_batch_size": 32, "max_new_tokens": 8}
    return colab_t4_config(model_id=str(model), dataset_id=str(data), **sizes, **changes)


@pytest.mark.slow
def test_an_interrupted_run_resumes_from_its_checkpoint(tiny, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(runlog, "git_state", lambda *a, **k: (COMMIT, True))  # allowed, and said so
    config = _resumable_config(tiny, max_steps=3)
    # seed 1: steps 1 and 2 move the adapters, so step 3 depends on what the checkpoint restores
    plan = lm_record.check_record_lm(
        ["grpo"], [1], config, tmp_path / "work", tmp_path / "out", allow_cpu=True, allow_dirty=True, save_every=2
    )
    real = lm_record._log_writer

    def interrupted_after_step_2(log, dial):
        writer = real(log, dial)
        save = writer.on_save

        def on_save(args, state, control, **kwargs):
            save(args, state, control, **kwargs)
            if state.global_step == 2:
                raise KeyboardInterrupt

        writer.on_save = on_save
        return writer

    monkeypatch.setattr(lm_record, "_log_writer", interrupted_after_step_2)
    with pytest.raises(KeyboardInterrupt):
        lm_record.record_lm_runs(plan, print_every=0)
    work = tmp_path / "work" / "grpo-seed1"
    assert (work / "trl" / "checkpoint-2").is_dir() and not (work / "done").exists()
    assert not (tmp_path / "out" / "grpo-seed1").exists()
    monkeypatch.setattr(lm_record, "_log_writer", real)
    [run] = lm_record.record_lm_runs(plan, print_every=0)
    provenance, records = load_run(run)
    assert [r["step"] for r in records] == [1, 2, 3]  # each step once
    assert [s["from_step"] for s in provenance["segments"]] == [0, 2] and len(provenance["resumed_at"]) == 1
    assert provenance["dirty"] is True and provenance["dirty_allowed"] is True
    with gzip.open(run / "metrics.jsonl.gz", "rt") as handle:
        assert [json.loads(line)["step"] for line in handle] == [1, 2, 3]
    # the same command once more (tools/record_smollm2.py --resume reruns every command): the finished run is
    # kept as it is, not trained or written again
    logged = (run / "metrics.jsonl.gz").read_bytes()
    rerun = lm_record.check_record_lm(
        ["grpo"], [1], config, tmp_path / "work", tmp_path / "out", allow_cpu=True, allow_dirty=True, save_every=2
    )
    assert lm_record.record_lm_runs(rerun, print_every=0) == [run]
    assert (run / "metrics.jsonl.gz").read_bytes() == logged
    # TRL restores the adapters, the optimizer and the random states: the same run as never stopping
    again = lm_record.check_record_lm(
        ["grpo"], [1], config, tmp_path / "work2", tmp_path / "out2", allow_cpu=True, allow_dirty=True, save_every=2
    )
    [uninterrupted] = lm_record.record_lm_runs(again, print_every=0)
    expected = load_run(uninterrupted)[1]
    assert [r["dial/k_counts"] for r in records] == [r["dial/k_counts"] for r in expected]
    assert any(r["grad_norm"] > 0 for r in records[:2])
    for name in ("loss", "grad_norm", "entropy", "reward"):
        assert [r[name] for r in records] == pytest.approx([r[name] for r in expected], rel=1e-6, abs=1e-9)


@pytest.mark.slow
def test_a_run_stopped_in_its_last_evaluation_is_evaluated_not_trained_again(tiny, tmp_path, monkeypatch) -> None:
    """Stopped after its last step's checkpoint, in the held-out measurement after training: the resumed run trains
    no further step (TRL, resumed at max_steps, would train one: transformers looks at the step count only after a
    step) and measures the checkpoint's adapters, the numbers of a run never stopped."""
    monkeypatch.setattr(runlog, "git_state", lambda *a, **k: (COMMIT, True))
    heldout = write_tiny_gsm8k(tmp_path / "heldout.jsonl", num_rows=4, seed=1)
    config = _resumable_config(tiny, max_steps=2, eval_file=str(heldout), eval_samples=4)
    # seed 1: both steps move the adapters, so what is measured after them depends on what is restored

    def plan(name: str):
        return lm_record.check_record_lm(
            ["grpo"], [1], config, tmp_path / name / "work", tmp_path / name / "out", allow_cpu=True,
            allow_dirty=True, save_every=2,
        )  # fmt: skip

    real = lm_record._evaluate_into

    def stopped_after_training(run, when, trainer, config):
        if when == "after":
            raise KeyboardInterrupt
        real(run, when, trainer, config)

    monkeypatch.setattr(lm_record, "_evaluate_into", stopped_after_training)
    with pytest.raises(KeyboardInterrupt):
        lm_record.record_lm_runs(plan("stopped"), print_every=0)
    work = tmp_path / "stopped" / "work" / "grpo-seed1"
    assert [p.name for p in (work / "trl").glob("checkpoint-*")] == ["checkpoint-2"]
    monkeypatch.setattr(lm_record, "_evaluate_into", real)
    [run] = lm_record.record_lm_runs(plan("stopped"), print_every=0)
    provenance, records = load_run(run)
    assert [r["step"] for r in records] == [1, 2]
    assert [p.name for p in (work / "trl").glob("checkpoint-*")] == ["checkpoint-2"]  # no step 3 trained
    assert [s["from_step"] for s in provenance["segments"]] == [0, 2]
    [uninterrupted] = lm_record.record_lm_runs(plan("whole"), print_every=0)
    with gzip.open(run / "eval.json.gz", "rt") as a, gzip.open(uninterrupted / "eval.json.gz", "rt") as b:
        resumed, whole = json.load(a), json.load(b)
    assert resumed["after"]["step"] == whole["after"]["step"] == 2
    assert whole["after"]["heldout"] != whole["before"]["heldout"]  # the two steps changed what the model writes
    for when in ("before", "after"):
        assert resumed[when]["heldout"] == whole[when]["heldout"]
