"""``DialDiagnostics`` in a TRL ``GRPOTrainer`` as a reader would use it: passed as ``callbacks=[...]`` with a
plain reward function, its ``dial/`` keys in ``log_history`` and in TensorBoard's event files, G read from
the trainer, and under two CPU processes (``torchrun``, gloo) the same numbers as TRL's own
``frac_reward_zero_std`` at every step. A tiny random Qwen2 model, trained for two steps; no network.

Run as a script (``python tests/test_dial_callback.py MODEL OUT``) it is the worker of the two-process test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

pytestmark = pytest.mark.trl

GROUP_SIZE = 4
STEPS = 2


def parity_reward(prompts: list[str], completions: list[str], **kwargs) -> list[float]:
    """A plain reward function, no attributes: 1 for a completion of even length in characters, except that
    the questions that find 0 or 1 more apples never pass (about half the groups are silent)."""
    return [
        float(len(c) % 2 == 0 and "finds 0 " not in p and "finds 1 " not in p) for p, c in zip(prompts, completions)
    ]


def constant_reward(completions: list[str], **kwargs) -> list[float]:
    """Every completion passes: every group is silent."""
    return [1.0 for _ in completions]


def tiny_trainer(model_dir: str, out: Path, reward_funcs: list, callbacks: list, **overrides):
    """A GRPOTrainer on the tiny model: G = 4, 3 groups a step (per process), 2 steps, 8 new tokens."""
    import datasets
    import trl

    prompts = [{"prompt": f"Tom has {a} apples and finds {b} more. How many?"} for a in range(6) for b in range(4)]
    settings = {
        "output_dir": str(out),
        "per_device_train_batch_size": 3 * GROUP_SIZE,
        "num_generations": GROUP_SIZE,
        "max_completion_length": 8,
        "max_steps": STEPS,
        "logging_steps": 1,
        "learning_rate": 1e-3,
        "report_to": "none",
        "save_strategy": "no",
        "disable_tqdm": True,
        "use_cpu": True,
        "seed": 0,
        **overrides,
    }
    return trl.GRPOTrainer(
        model=model_dir,
        reward_funcs=reward_funcs,
        args=trl.GRPOConfig(**settings),
        train_dataset=datasets.Dataset.from_list(prompts),
        callbacks=callbacks,
    )


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from stddial_book.bridges.lm_data import build_tiny_model, write_tiny_gsm8k

    root = tmp_path_factory.mktemp("dial")
    return str(build_tiny_model(root / "model", write_tiny_gsm8k(root / "tiny.jsonl")))


def train_logs(trainer) -> list[dict]:
    """The training loop's per-step logs (without the closing summary)."""
    return [r for r in trainer.state.log_history if "train_runtime" not in r]


def test_plain_reward_function_passed_as_callbacks_logs_the_dial(model_dir, tmp_path, capsys):
    from stddial_book import DialDiagnostics
    from stddial_book.bridges.dial_diagnostics import dial_log_keys

    dial = DialDiagnostics(print_every=1)
    trainer = tiny_trainer(model_dir, tmp_path / "run", [parity_reward], [dial])
    trainer.train()
    logs = train_logs(trainer)
    assert [r["step"] for r in logs] == [1, 2]
    for record in logs:
        assert set(dial_log_keys(GROUP_SIZE)) <= set(record)  # read G = 4 from the trainer: k = 0..4
        assert record["dial/silent_fraction"] == pytest.approx(record["frac_reward_zero_std"], abs=1e-6)
        assert record["dial/pass_rate"] == pytest.approx(record["reward"], abs=1e-6)  # one 0/1 reward
        assert sum(record[f"dial/k_counts/{k}"] for k in range(GROUP_SIZE + 1)) == record["dial/groups"] == 3
        assert record["dial/advantage_gap"] < 1e-5 and record["dial/identity_gap"] < 1e-5
    assert [r["step"] for r in dial.records] == [1, 2]
    assert [r["mean_length"] for r in dial.records] == [r["completions/mean_length"] for r in logs]
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in printed] == ["1/2", "2/2"]


def test_a_batch_used_twice_counts_once_and_a_log_averages_its_batches(model_dir, tmp_path):
    from stddial_book import DialDiagnostics

    dial = DialDiagnostics()  # num_iterations 2: one generation batch for the two steps, one log at step 2
    trainer = tiny_trainer(model_dir, tmp_path / "run", [parity_reward], [dial], num_iterations=2, logging_steps=2)
    trainer.train()
    (log,) = train_logs(trainer)
    assert log["step"] == 2 and log["dial/groups"] == 3
    assert log["dial/silent_fraction"] == pytest.approx(log["frac_reward_zero_std"], abs=1e-6)
    assert "pass_rate" in dial.records[0] and "pass_rate" not in dial.records[1]  # nothing new at step 2


def test_report_to_tensorboard_gets_the_dial_tags(model_dir, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from stddial_book import DialDiagnostics

    runs = tmp_path / "run"  # TensorBoard writes under output_dir/runs/
    trainer = tiny_trainer(model_dir, runs, [constant_reward], [DialDiagnostics()], report_to="tensorboard")
    trainer.train()
    (events,) = {p.parent for p in runs.rglob("events.out.tfevents.*")}
    scalars = EventAccumulator(str(events)).Reload()
    tags = set(scalars.Tags()["scalars"])
    assert {"train/dial/silent_fraction", "train/dial/sigma_mean", "train/dial/k_counts/4"} <= tags
    assert [e.value for e in scalars.Scalars("train/dial/silent_fraction")] == [1.0] * STEPS  # all pass
    assert [e.value for e in scalars.Scalars("train/dial/k_counts/4")] == [3.0] * STEPS


def test_a_group_size_other_than_num_generations_is_refused(model_dir, tmp_path):
    from stddial_book import DialDiagnostics

    trainer = tiny_trainer(model_dir, tmp_path / "run", [parity_reward], [DialDiagnostics(group_size=2)])
    with pytest.raises(ValueError, match=r"group_size=2\) but the trainer's num_generations is 4"):
        trainer.train()


def test_two_reward_functions_of_one_name_are_refused(model_dir, tmp_path):
    from stddial_book import DialDiagnostics

    trainer = tiny_trainer(model_dir, tmp_path / "run", [parity_reward, parity_reward], [DialDiagnostics()])
    with pytest.raises(ValueError, match=r"two reward functions share a name in \['parity_reward', 'parity_reward'\]"):
        trainer.train()


def test_without_a_trainer_it_says_how_to_give_one():
    from transformers import TrainerControl, TrainerState

    from stddial_book import DialDiagnostics

    with pytest.raises(RuntimeError, match=r"found no Trainer running it; pass it: DialDiagnostics\(trainer=trainer\)"):
        DialDiagnostics().on_train_begin(None, TrainerState(), TrainerControl())


def test_a_trl_outside_the_read_versions_is_refused_in_one_line():
    from stddial_book.bridges.dial_diagnostics import check_trl_version

    check_trl_version("1.16.0")
    check_trl_version("1.17.0.dev0")
    for version in ("0.19.1", "2.0.0", "2.0.0rc1"):
        with pytest.raises(RuntimeError, match=r"pip install 'trl>=0.20,<2'") as caught:
            check_trl_version(version)
        assert "\n" not in str(caught.value)


def test_two_processes_log_trls_silent_fraction_at_every_step(model_dir, tmp_path):
    """torchrun, 2 CPU processes (gloo), 6 completions a process: the second group of 4 spans both."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    done = subprocess.run(
        [*command, __file__, model_dir, str(tmp_path)], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    dial = [[{k: v for k, v in r.items() if k.startswith("dial/")} for r in rank["history"]] for rank in ranks]
    assert dial[0] == dial[1] and dial[0][0]  # every process logs the same numbers, of the gathered batch
    logs = ranks[0]["history"]
    assert [r["step"] for r in logs] == [1, 2]
    for record in logs:
        assert record["dial/groups"] == 3  # both processes' groups: 2 x 6 completions / G
        assert record["dial/silent_fraction"] == pytest.approx(record["frac_reward_zero_std"], abs=1e-6)
        assert record["dial/pass_rate"] == pytest.approx(record["reward"], abs=1e-6)
        assert record["dial/advantage_gap"] < 1e-5
    assert any(0.0 < r["dial/silent_fraction"] < 1.0 for r in logs)  # silent and live groups in one batch
    progress = [line for line in done.stdout.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in progress] == ["1/2", "2/2"]  # the main process's lines only


def _worker(model_dir: str, out: str) -> None:
    """One process of the two-process test: train, then write this rank's log."""
    from stddial_book import DialDiagnostics

    dial = DialDiagnostics(print_every=1)
    trainer = tiny_trainer(model_dir, Path(out) / "run", [parity_reward], [dial], per_device_train_batch_size=6)
    trainer.train()
    rank = trainer.accelerator.process_index
    history = train_logs(trainer)
    (Path(out) / f"rank{rank}.json").write_text(json.dumps({"history": history}), encoding="utf-8")
    # leave the process group together, as a script under torchrun should: a process that exits while a worker
    # thread of the gloo group still holds a collective's tensors can end on SIGABRT (see lm_setup.end_processes)
    trainer.accelerator.wait_for_everyone()
    trainer.accelerator.end_training()


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])


def test_a_resumed_run_times_only_the_steps_it_trained(model_dir, tmp_path):
    """Resumed from step 1's checkpoint, the process trains step 2 alone: its pace is the time since it began
    over one step (counting step 1 too would halve it, and the time left with it)."""
    from stddial_book import DialDiagnostics

    first = tiny_trainer(model_dir, tmp_path / "run", [parity_reward], [DialDiagnostics()],
                         save_strategy="steps", save_steps=1)  # fmt: skip
    first.train()
    dial = DialDiagnostics()
    again = tiny_trainer(model_dir, tmp_path / "run", [parity_reward], [dial], save_strategy="no")
    again.train(resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-1"))
    assert [r["step"] for r in dial.records] == [2]
    assert dial.records[0]["step_s"] == pytest.approx(dial.records[0]["elapsed_s"])
    assert dial.records[0]["eta_s"] == 0.0
