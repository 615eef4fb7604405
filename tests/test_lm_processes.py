"""``record-lm`` under several processes (issue 36, item 4): two CPU processes (gloo), launched by ``torchrun`` and
by ``accelerate launch``, train one run together; the main process alone writes, and the run folder is laid
out as a one-process run's; the dial's numbers in the log are TRL's own at every step; a refusal ends both
processes with one line and status 2, writing nothing; an interrupted two-process run resumes from its
checkpoint to the very numbers of a run never stopped. A tiny random Qwen2 model, three steps; no network.
A finished run's processes wait for each other before they leave the group (so none leaves while the group's
worker threads still hold a collective's tensors); a failed run's leave at once.

Run as a script (``python tests/test_lm_processes.py ARGS...``) it is a process of the interrupted run: the
``record-lm`` command with ARGS, stopped on every process (as Ctrl-C stops it) once checkpoint 2 is saved.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")
pytest.importorskip("math_verify")

pytestmark = [pytest.mark.trl, pytest.mark.xdist_group("lm_processes")]

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
#: 3 questions × G = 4 a step: 6 completions a process, so the second group spans both processes.
SIZES = ["--num-prompts", "16", "--group-size", "4", "--prompts-per-step", "3", "--micro-batch-size", "12"]
SIZES += ["--max-new-tokens", "8", "--max-steps", "3", "--save-every", "2", "--eval-samples", "2"]
#: What a one-process run publishes (tests/test_lm_record.py), with the held-out measurement.
RUN_FILES = [".stddial-run.json", "eval.json.gz", "metrics.jsonl.gz", "provenance.json"]
#: The accelerate configuration of the test: two processes on this machine. On a machine without GPUs
#: ``accelerate launch --cpu`` starts one process (its multi-CPU launch goes through mpirun); MULTI_GPU starts
#: them as torchrun does, and the run takes the CPU (--allow-cpu; no CUDA).
ACCELERATE_CONFIG = """compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
num_machines: 1
num_processes: 2
machine_rank: 0
gpu_ids: all
mixed_precision: 'no'
use_cpu: false
debug: false
"""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    from stddial_book.bridges.lm_data import build_tiny_model, write_tiny_gsm8k

    root = tmp_path_factory.mktemp("lm-processes")
    data = write_tiny_gsm8k(root / "tiny.jsonl", num_rows=16)
    heldout = write_tiny_gsm8k(root / "heldout.jsonl", num_rows=5, seed=1)
    return {"root": root, "model": build_tiny_model(root / "model", data), "data": data, "heldout": heldout}


def record_args(inputs: dict[str, Path], work: Path, out: Path, *extra: str) -> list[str]:
    model, data, heldout = (str(inputs[k]) for k in ("model", "data", "heldout"))
    return ["record-lm", "--model", model, "--dataset", data, "--eval", heldout, *SIZES, "--recipes", "grpo"] + [
        "--work",
        str(work),
        "--out",
        str(out),
        "--allow-cpu",
        "--allow-dirty",  # the subprocesses read the checkout's real state, which others may be editing
        "--no-progress",
        *extra,
    ]


def launch(command: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def torchrun_run(inputs) -> dict:
    """The run as torchrun trains it with two processes, never stopped."""
    root = inputs["root"] / "torchrun"
    root.mkdir()
    done = launch([*TORCHRUN, "-m", "stddial_book", *record_args(inputs, root / "work", root / "out")], root)
    return {"root": root, "done": done, "run": root / "out" / "grpo-seed0"}


def read_log(run: Path) -> tuple[dict, list[dict], dict]:
    with gzip.open(run / "metrics.jsonl.gz", "rt") as handle:
        records = [json.loads(line) for line in handle]
    with gzip.open(run / "eval.json.gz", "rt") as handle:
        measured = json.load(handle)
    return json.loads((run / "provenance.json").read_text()), records, measured


def check_two_process_run(run: Path, heldout: Path) -> tuple[dict, list[dict], dict]:
    """One run folder laid out as a one-process run's, its log TRL's combined numbers, its provenance naming two
    processes, its held-out measurement whole and in order."""
    assert sorted(p.name for p in run.parent.iterdir()) == [".stddial-run.json", run.name]  # one run folder
    assert sorted(p.name for p in run.iterdir()) == RUN_FILES
    provenance, records, measured = read_log(run)
    assert [r["step"] for r in records] == [1, 2, 3]  # each step once: the main process alone wrote
    for record in records:
        assert record["dial/groups"] == 3  # both processes' groups: 2 × 6 completions / G
        assert record["dial/silent_fraction"] == pytest.approx(record["frac_reward_zero_std"], abs=1e-6)
        assert record["dial/pass_rate"] == pytest.approx(record["reward"], abs=1e-6)
        assert sum(record["dial/k_counts"]) == 3 and record["dial/advantage_gap"] < 1e-5
    assert provenance["world_size"] == 2 and {s["world_size"] for s in provenance["segments"]} == {2}
    settings = provenance["trl_settings"]
    assert (settings["per_device_train_batch_size"], settings["gradient_accumulation_steps"]) == (6, 1)
    assert provenance["config"]["run"]["micro_batch_size"] == 12  # the run's own sizes, as one process runs it
    from stddial_book.bridges.lm_measure import read_prompt_rows

    questions = [row["prompt_id"] for row in read_prompt_rows(heldout)]
    for when in ("before", "after"):  # question i measured on process i mod 2, gathered in order
        assert [r["prompt_id"] for r in measured[when]["heldout"]] == questions
        assert {r["samples"] for r in measured[when]["heldout"]} == {2}
    return provenance, records, measured


def test_torchrun_two_processes_record_the_run_once(inputs, torchrun_run) -> None:
    done, run = torchrun_run["done"], torchrun_run["run"]
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [f"recorded {run}"]  # printed by the main process alone
    check_two_process_run(run, inputs["heldout"])
    assert "Traceback" not in done.stderr
    # TRL's checkpoint holds each process's random state; nothing else differs from a one-process run's folder
    work = torchrun_run["root"] / "work" / "grpo-seed0"
    assert sorted(p.name for p in work.iterdir()) == [
        ".stddial-manifest.json",
        ".stddial-run.json",
        "done",
        "eval.json",
        "metrics.jsonl",
        "provenance.json",
        "trl",
    ]
    [checkpoint] = (work / "trl").glob("checkpoint-*")  # the last one kept
    assert {"rng_state_0.pth", "rng_state_1.pth", "trainer_state.json"} <= {p.name for p in checkpoint.iterdir()}
    assert sorted(p.name for p in torchrun_run["root"].iterdir()) == ["out", "work"]  # nothing in the cwd


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_refusal_ends_both_processes_with_one_line(inputs, tmp_path) -> None:
    """The two processes started as torchrun starts them (its variables), each watched on its own: a launcher
    stops the other processes once one has ended, which would hide their own exit status."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("a reader's file\n")
    port, argv = str(free_port()), record_args(inputs, tmp_path / "work", theirs)
    ranks = []
    for rank in (0, 1):
        env = {**ENV, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
        env.update(RANK=str(rank), LOCAL_RANK=str(rank))
        command = [sys.executable, "-m", "stddial_book", *argv]
        ranks.append(
            subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    try:
        ended = [process.communicate(timeout=120) for process in ranks]
    finally:
        for process in ranks:
            if process.poll() is None:
                process.kill()
    assert [process.returncode for process in ranks] == [2, 2]
    assert [out for out, _ in ended] == ["", ""]
    lines = [err.strip().splitlines() for _, err in ended]
    assert lines[0] == lines[1] and len(lines[0]) == 1, lines  # the same one line, no traceback
    assert lines[0][0].startswith("error: record-lm: --out ") and "not written by stddial_book" in lines[0][0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs"]  # no --work, nothing in the cwd
    assert sorted(p.name for p in theirs.iterdir()) == ["notes.txt"]


def test_a_micro_batch_that_does_not_split_over_the_processes_is_refused_before_any_work(
    inputs, tmp_path, monkeypatch
) -> None:
    from stddial_book.bridges.lm_record import check_record_lm
    from stddial_book.bridges.lm_setup import tiny_config

    monkeypatch.setenv("WORLD_SIZE", "2")  # as torchrun sets it; the check starts no process group
    config = tiny_config(inputs["model"], inputs["data"], prompts_per_step=3, micro_batch_size=3)
    with pytest.raises(ValueError, match=r"^--micro-batch-size with 2 processes: .*divisible by the number of"):
        check_record_lm(["grpo"], [0], config, tmp_path / "work", tmp_path / "out", allow_cpu=True, allow_dirty=True)
    assert not any(tmp_path.iterdir())
    monkeypatch.setenv("WORLD_SIZE", "3")
    plan = check_record_lm(["grpo"], [0], config, tmp_path / "work", tmp_path / "out", allow_cpu=True, allow_dirty=True)
    assert plan.world_size == 3 and not any(tmp_path.iterdir())


def test_accelerate_launch_cpu_on_a_gpu_machine_is_refused_unless_allowed(inputs, tmp_path, monkeypatch, capsys):
    import torch

    from stddial_book.cli import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU machine ...
    monkeypatch.setenv("ACCELERATE_USE_CPU", "True")  # ... launched with accelerate launch --cpu
    args = [a for a in record_args(inputs, tmp_path / "work", tmp_path / "out") if a != "--allow-cpu"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: record-lm: accelerate launch --cpu asks for the CPU") and len(err.splitlines()) == 1
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_accelerate_launch_resumes_an_interrupted_run_to_the_same_numbers(inputs, torchrun_run) -> None:
    root = inputs["root"] / "resumed"
    root.mkdir()
    args = record_args(inputs, root / "work", root / "out")
    stopped = launch([*TORCHRUN, __file__, *args], root)  # both processes stop once checkpoint 2 is saved
    assert stopped.returncode != 0 and "exitcode  : 130" in stopped.stderr, stopped.stderr[-3000:]
    work = root / "work" / "grpo-seed0"
    assert (work / "trl" / "checkpoint-2" / "trainer_state.json").is_file() and not (work / "done").exists()
    assert not (root / "out" / "grpo-seed0").exists()
    config = root / "accelerate.yaml"
    config.write_text(ACCELERATE_CONFIG)
    accelerate = [sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch", "--config_file", str(config)]
    resumed = launch([*accelerate, "--main_process_port", str(free_port()), "-m", "stddial_book", *args], root)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    run = root / "out" / "grpo-seed0"
    assert resumed.stdout.splitlines() == [f"recorded {run}"]
    provenance, records, measured = check_two_process_run(run, inputs["heldout"])
    assert [s["from_step"] for s in provenance["segments"]] == [0, 2]
    # TRL restores the adapters, the optimizer and each process's random state: the run never stopped
    _, expected, expected_measured = read_log(torchrun_run["run"])
    assert [r["dial/k_counts"] for r in records] == [r["dial/k_counts"] for r in expected]
    for name in ("loss", "grad_norm", "reward", "frac_reward_zero_std", "entropy"):  # entropy: the sampled tokens
        assert [r[name] for r in records] == pytest.approx([r[name] for r in expected], rel=1e-5, abs=1e-8)
    assert measured["after"]["heldout"] == expected_measured["after"]["heldout"]  # counts and sampled texts


def _stopped_after_checkpoint_2(argv: list[str]) -> int:
    """``record-lm`` with every process interrupted (KeyboardInterrupt, as Ctrl-C) once checkpoint 2 is saved."""
    import torch
    from transformers import TrainerCallback

    import stddial_book.bridges.lm_run as lm_run
    from stddial_book.cli import main

    class Stop(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if state.global_step == 2:
                torch.distributed.barrier()  # every process has saved its part of the checkpoint
                raise KeyboardInterrupt

    build = lm_run.build_trainer

    def build_and_stop(*args, **kwargs):
        trainer, dial, info = build(*args, **kwargs)
        trainer.add_callback(Stop())
        return trainer, dial, info

    lm_run.build_trainer = build_and_stop
    return main(argv)


if __name__ == "__main__":
    sys.exit(_stopped_after_checkpoint_2(sys.argv[1:]))


def test_a_numbered_cpu_location_loads_as_the_cpu(tmp_path) -> None:
    """Under several CPU processes accelerate names each process's device cpu:0, and transformers before
    4.57 resumes the optimizer with map_location=args.device; torch 2.13 alone refuses that location. In a
    fresh interpreter: refused before accept_numbered_cpu_locations (where this torch refuses it), loaded
    to the same values after."""
    script = f"""
import torch
from stddial_book.bridges.lm_setup import accept_numbered_cpu_locations
path = {str(tmp_path / "state.pt")!r}
torch.save({{"exp_avg": torch.arange(6.0).reshape(2, 3)}}, path)
try:
    torch.load(path, map_location=torch.device("cpu", 0), weights_only=True)
    print("loaded before")
except RuntimeError as err:
    print("refused before:", "cpu:0" in str(err))
accept_numbered_cpu_locations()
accept_numbered_cpu_locations()  # once is enough; a second call adds nothing
state = torch.load(path, map_location=torch.device("cpu", 0), weights_only=True)
assert state["exp_avg"].device.type == "cpu" and state["exp_avg"].tolist() == [[0, 1, 2], [3, 4, 5]]
print("loaded after")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "loaded after"
    import torch

    # the pinned torch refuses it (the failure this guards against); a later one may accept it by itself
    assert lines[0] == "refused before: True" if torch.__version__.startswith("2.13.") else lines[0] != ""


#: How record-lm leaves its group (end_processes), in two processes where the main one arrives LATE_S later.
LATE_S = 2.0
END_SCRIPT = f"""
import os, sys, time
import torch.distributed as dist
from stddial_book.bridges.lm_setup import end_processes, start_processes

finished = sys.argv[1] == "finished"
assert start_processes(cpu=True) and dist.get_world_size() == 2
dist.barrier()  # both processes are here: the clocks below start together
if dist.get_rank() == 0:
    time.sleep({LATE_S})
start = time.monotonic()
end_processes(finished)
print(f"rank {{os.environ['RANK']}} waited {{time.monotonic() - start:.2f}} initialized {{dist.is_initialized()}}")
"""


def _end_in_two_processes(tmp_path, how: str) -> dict[str, tuple[float, str]]:
    """The two processes' wait in end_processes(finished or not) and whether a group is left afterwards."""
    script = tmp_path / "end.py"
    script.write_text(END_SCRIPT)
    done = launch([*TORCHRUN, str(script), how], tmp_path, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    found = {}
    for line in done.stdout.splitlines():
        _, rank, _, waited, _, initialized = line.split()
        found[rank] = (float(waited), initialized)
    assert sorted(found) == ["0", "1"]
    return found


def test_a_finished_run_waits_for_every_process_then_leaves_the_group(tmp_path) -> None:
    found = _end_in_two_processes(tmp_path, "finished")
    assert found["1"][0] >= LATE_S - 0.5  # the other process waited for the late main process
    assert {initialized for _, initialized in found.values()} == {"False"}


def test_a_failed_run_leaves_the_group_without_waiting(tmp_path) -> None:
    found = _end_in_two_processes(tmp_path, "failed")
    assert found["1"][0] < LATE_S - 0.5  # it did not wait: after a failure the others may never arrive
    assert {initialized for _, initialized in found.values()} == {"False"}
