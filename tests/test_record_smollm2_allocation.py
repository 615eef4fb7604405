"""tools/record_smollm2_allocation.py: its settings are the plan's, and bad input is refused before anything is
written (the runs themselves need SmolLM2's file and about 30 CPU-minutes each: not run here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_tool

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    return load_tool("record_smollm2_allocation")


def test_the_settings_are_the_plans() -> None:
    tool = _tool()
    plan = (ROOT / "data" / "runs" / "smollm2_allocation" / "PLAN.md").read_text()
    assert tool.RULES == ("uniform", "dapo", "greso", "knapsack_paper", "dial_grpo")
    for rule in tool.RULES:
        assert f"`{rule}`" in plan or rule == "uniform"
        config = tool.plan_config(rule, 2)
        assert (config.group_size, config.prompts_per_step, config.sample_budget) == (8, 8, 1920)
        assert (config.lr, config.recipe.kl_coef, config.num_minibatches, config.max_new_tokens) == (3e-4, 0.0, 1, 24)
        assert (config.pool_size, config.pool_samples, config.eval_samples, config.eval_every_samples) == (
            224,
            2,
            1,
            384,
        )
        assert config.allocation == rule and config.seed == 2
    assert tool.run_name("uniform", 1) == "grpo-seed1" and tool.run_name("greso", 0) == "grpo-greso-seed0"
    for stated in ("1,920 generated samples", "AdamW at 3e-4", "every 384 generated samples", "Seeds 0, 1 and 2"):
        assert stated in plan


@pytest.mark.parametrize("args", [["--seeds", "-1"], ["--stop-after", "0"]])
def test_bad_input_is_refused_in_one_line_before_anything_is_written(args, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert _tool().main(["--out", str(out), "--allow-dirty", *args]) == 2
    assert not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


def test_a_folder_that_is_not_its_own_is_refused(tmp_path, capsys) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("a reader's file\n")
    assert _tool().main(["--out", str(out), "--allow-dirty"]) == 2
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert "--out" in capsys.readouterr().err


def test_a_run_stopped_before_its_first_checkpoint_starts_again(problems, warm, tmp_path, monkeypatch) -> None:
    """A run killed before its first checkpoint (marker, start weights and provenance only) is recorded afresh
    in its folder; one with logged steps but no checkpoint is refused in one line; one with a checkpoint
    resumes (tiny model; TINY checkpoints every 2 steps)."""
    from conftest import TINY, fresh

    from stddial_book.rl import trainer
    from stddial_book.rl.trainer import train

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # the process ends here

    tool = _tool()
    train_set, heldout = problems
    config = TINY.train_config("grpo", sample_budget=320)
    run = tmp_path / "grpo-dapo-seed2"
    assert tool.resumes(run) is False  # not started
    for where in ("held_out", "_train_step"):  # in the first evaluation, then in the first step
        with monkeypatch.context() as patch:
            patch.setattr(trainer._Measurements if where == "held_out" else trainer, where, killed)
            with pytest.raises(KeyboardInterrupt):
                train(fresh(warm), train_set, heldout, config, run)  # a fresh start, accepted in its folder
        if where == "held_out":
            assert (run / "provenance.json").exists() and not (run / "metrics.jsonl").exists()
            assert tool.resumes(run) is False
    with pytest.raises(ValueError, match="logged steps but no checkpoint to continue from; move it out of --out"):
        tool.resumes(run)  # step 0 logged, no checkpoint yet
    other = tmp_path / "grpo-seed2"
    train(fresh(warm), train_set, heldout, config, other, stop_after=2)
    assert tool.resumes(other) is True
    assert train(fresh(warm), train_set, heldout, config, other, resume=True, stop_after=3).steps == 3
