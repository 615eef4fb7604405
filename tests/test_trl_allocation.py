"""Chapter 16's decision procedure in TRL (stddial_book.bridges.trl_allocation): pruning, the group size and
the plan on hand-computed pools, the silence watcher and GRESO's skip on hand-made groups, the sampler's
layout against TRL's RepeatSampler, and the script training a tiny local model for two steps on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stddial_book.bridges.trl_allocation import (
    SilenceWatcher,
    SkipSampler,
    learnable_prompts,
    plan_allocation,
    plan_text,
    round_group_size,
)
from stddial_book.rl.allocation_rules import GresoSkip
from stddial_book.rl.pool_state import ALL_CORRECT, ALL_WRONG, MIXED, NOT_SEEN, new_pool_state

# --- pruning and the group size ----------------------------------------------------------------------


def test_prompts_never_or_always_solved_are_pruned() -> None:
    assert learnable_prompts([0, 3, 8, 1, 7], 8).tolist() == [False, True, False, True, True]
    # n per prompt: 4 of 4 is always solved, 4 of 16 is not
    assert learnable_prompts([4, 4, 0], [4, 16, 2]).tolist() == [False, True, False]
    for correct, samples in (([1.5], 4), ([5], 4), ([-1], 4), ([1], 0), ([1, 2], [4]), ([], 4)):
        with pytest.raises(ValueError):
            learnable_prompts(correct, samples)


def test_group_size_is_the_law_rounded_up() -> None:
    assert round_group_size(10.16) == 12  # to a multiple of 4
    assert round_group_size(12.0) == 12
    assert round_group_size(10.16, multiple=1) == 11
    assert round_group_size(10.16, multiple=8) == 16
    assert round_group_size(0.3, multiple=1) == 2  # a group that can disagree
    assert round_group_size(200.0) == 64  # the cap
    assert round_group_size(20.4, max_group_size=16) == 16
    for bad in (float("nan"), float("inf"), 0.0, -3.0):
        with pytest.raises(ValueError):
            round_group_size(bad)


def test_the_plan_of_a_hand_pool() -> None:
    # five prompts measured with 8 samples: 0, 2, 4, 6, 8 correct. Kept: p = 1/4, 1/2, 3/4 (median 1/2);
    # G* = 1/(8 · 0.05 · 1/2 · 1/2) = 10, rounded up to 12
    plan = plan_allocation([0, 2, 4, 6, 8], 8, "grpo", prompts_per_step=8)
    assert plan.keep.tolist() == [False, True, True, True, False]
    assert plan.pruned_share == pytest.approx(0.4)
    assert plan.median_p == 0.5
    assert plan.g_star == pytest.approx(10.0)
    assert plan.num_generations == 12
    kept = [0.25**12 + 0.75**12, 2 * 0.5**12, 0.75**12 + 0.25**12]
    assert plan.silent_after == pytest.approx(np.mean(kept))
    assert plan.silent_before == pytest.approx((2 + sum(kept)) / 5)  # p = 0 and p = 1 are always silent
    s = plan.settings
    assert s["num_generations"] == 12 and s["generation_batch_size"] == 96  # 8 prompts × 12
    assert s["scale_rewards"] == "group" and s["loss_type"] == "grpo"
    assert s["per_device_train_batch_size"] * s["gradient_accumulation_steps"] == 96  # one optimizer step
    assert set(plan.gaps) == {"std_correction", "std_eps"}  # TRL's Bessel std and its fixed epsilon
    text = plan_text(plan)
    assert "pruned 40.0%" in text and "num_generations = 12" in text


def test_the_recipe_sets_trl_and_its_gaps() -> None:
    dr = plan_allocation([1, 2, 3], 4, "dr_grpo", epsilon=0.1, max_new_tokens=64)
    assert dr.settings["scale_rewards"] == "none" and dr.settings["loss_type"] == "dr_grpo"
    assert dr.settings["max_completion_length"] == 64
    assert dr.gaps == ()  # Dr. GRPO divides by no std: TRL computes it exactly
    dapo = plan_allocation([1, 2, 3], 4, "dapo")
    assert dapo.settings["loss_type"] == "dapo" and dapo.settings["mask_truncated_completions"] is True
    assert "dynamic_sampling" in dapo.gaps  # no refill in TRL


def test_a_pool_with_nothing_to_learn_is_refused() -> None:
    with pytest.raises(ValueError, match="no prompt"):
        plan_allocation([0, 4, 0], 4)
    with pytest.raises(ValueError, match="epsilon"):
        plan_allocation([1, 2], 4, epsilon=1.5)


# --- the silence watcher and GRESO's skip --------------------------------------------------------------


def _correct(completions, answer, **kwargs):
    return [1.0 if c == a else 0.0 for c, a in zip(completions, answer)]


def test_the_watcher_records_each_group_and_returns_the_rewards() -> None:
    state = new_pool_state(3)
    watch = SilenceWatcher(_correct, state, group_size=4)
    assert watch.__name__ == "_correct"
    # prompt 0: 4 of 4 right (silent, all correct); prompt 2: 1 of 4 (mixed)
    rewards = watch(completions=list("77775222"), answer=list("77772222"), prompt_id=[0] * 4 + [2] * 4)
    assert rewards == [1, 1, 1, 1, 0, 1, 1, 1]
    assert state.silent_streak.tolist() == [1, 0, 0]
    assert state.last_outcome.tolist() == [ALL_CORRECT, NOT_SEEN, MIXED]
    assert state.successes.tolist() == [4, 0, 3]
    watch(completions=list("0000"), answer=list("7777"), prompt_id=[0] * 4)  # now all wrong: silent again
    assert state.silent_streak.tolist() == [2, 0, 0] and state.last_outcome[0] == ALL_WRONG
    # GRESO's skip probability 1 − max(0.5^z, 0.01): z = 2 → 0.75; a mixed or unseen prompt is never skipped
    rule = GresoSkip(group_size=4)
    assert rule.skip_probability(state, np.arange(3)).tolist() == [0.75, 0.0, 0.0]
    with pytest.raises(ValueError, match="mixes prompts"):
        watch(completions=list("1111"), answer=list("1111"), prompt_id=[0, 0, 1, 1])


def test_the_watcher_reads_raw_correctness_only() -> None:
    # DAPO's ±1 rewards: a completion passed when its reward is the correct value
    state = new_pool_state(1)
    watch = SilenceWatcher(lambda completions, **kw: [-1.0, -1.0, -1.0], state, group_size=3, correct=1.0)
    watch(completions=["a", "b", "c"], prompt_id=[0, 0, 0])
    assert state.last_outcome[0] == ALL_WRONG and state.successes[0] == 0


def _batches(sampler: SkipSampler) -> list[list[int]]:
    """The sampler's output cut into generation batches (one per batch_size × G × repeat indices)."""
    flat = list(sampler)
    size = sampler.batch_size * sampler.mini_repeat_count * sampler.repeat_count
    assert len(flat) == len(sampler) and len(flat) % size == 0
    return [flat[i : i + size] for i in range(0, len(flat), size)]


def test_without_history_the_sampler_lays_out_batches_as_trl_does() -> None:
    state = new_pool_state(10)
    sampler = SkipSampler(10, state, GresoSkip(), mini_repeat_count=3, batch_size=4, repeat_count=2, seed=0)
    assert len(sampler) == (10 // 4) * 4 * 3 * 2
    trl_utils = pytest.importorskip("trl.trainer.utils")
    assert len(sampler) == len(trl_utils.RepeatSampler(range(10), 3, batch_size=4, repeat_count=2))
    for batch in _batches(sampler):
        first = batch[: 4 * 3]
        assert batch == first * 2  # the generation batch repeated for TRL's reuse
        prompts = first[::3]
        assert len(set(prompts)) == 4  # distinct prompts
        assert first == [i for i in prompts for _ in range(3)]  # each G times in a row
    assert sampler.skipped == 0


def test_prompts_seen_silent_are_passed_over() -> None:
    # eight prompts; 0-5 silent at their last three visits. With p_e = 0 and a floor of 1e-12 their skip
    # probability is 1 − 1e-12: only 6 and 7 are drawn
    state = new_pool_state(8)
    state.silent_streak[:6] = 3
    state.last_outcome[:6] = ALL_WRONG
    state.last_outcome[6:] = MIXED
    rule = GresoSkip(p_easy=0.0, p_hard=0.0, floor=1e-12)
    sampler = SkipSampler(8, state, rule, mini_repeat_count=2, batch_size=2, seed=1)
    batches = _batches(sampler)
    assert len(batches) == 4  # as many batches as TRL's sampler: the budget goes to the others
    assert all(sorted(set(b)) == [6, 7] for b in batches)
    assert sampler.skipped > 0
    # the skip is read when a batch is drawn: a prompt that turns mixed is drawn again
    state.silent_streak[0], state.last_outcome[0] = 0, MIXED
    drawn = {i for b in _batches(sampler) for i in b}
    assert 0 in drawn and drawn <= {0, 6, 7}


# --- the script on a tiny local model --------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_pool(tmp_path_factory):
    pytest.importorskip("trl")
    pytest.importorskip("peft")
    pytest.importorskip("math_verify")
    from stddial_book.bridges.lm_data import build_tiny_model, write_tiny_gsm8k

    root = tmp_path_factory.mktemp("alloc")
    data = write_tiny_gsm8k(root / "tiny.jsonl", num_rows=24)
    model = build_tiny_model(root / "model", data)
    # the measurement a reader makes with the starting model: k of 8 per prompt, a third never or always solved
    rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines()]
    pattern = [0, 8, 1, 4, 7, 3]
    pool = root / "pool.jsonl"
    pool.write_text(
        "".join(json.dumps({**r, "correct": pattern[i % 6], "samples": 8}) + "\n" for i, r in enumerate(rows)),
        encoding="utf-8",
    )
    return root, pool, model


@pytest.mark.trl
def test_the_script_prunes_and_trains_two_steps_with_the_skip(tiny_pool, capsys) -> None:
    from stddial_book.bridges.trl_allocation import build_parser, run

    root, pool, model = tiny_pool
    out = root / "run"
    argv = [str(pool), "--model", str(model), "--out", str(out), "--skip", "--lora-r", "4", "--max-steps", "2"]
    argv += ["--prompts-per-step", "4", "--max-new-tokens", "12", "--max-group-size", "4", "--learning-rate", "1e-3"]
    result = run(build_parser().parse_args(argv))
    printed = capsys.readouterr().out
    # 24 prompts, 8 of them at k = 0 or 8: 16 kept; the law asks for 12 at median p = 7/16, capped at 4
    assert "kept 16 (0 < k < n)" in printed and "num_generations = 4" in printed
    assert result["settings"]["num_generations"] == 4 and result["settings"]["generation_batch_size"] == 16
    assert result["groups_seen"] == 2 * 4  # two steps of 4 prompts, each group watched once
    assert isinstance(result["skipped_prompts"], int)
    losses = [entry["loss"] for entry in result["log"] if "loss" in entry]
    assert len(losses) == 2 and all(np.isfinite(losses))
    written = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert written["gaps"] == ["std_correction", "std_eps"] and written["groups_seen"] == 8


@pytest.mark.trl
def test_the_trainer_gets_only_the_kept_prompts_and_the_planned_group(tiny_pool) -> None:
    from stddial_book.bridges.lm_data import load_model_and_tokenizer, load_prompts
    from stddial_book.bridges.lm_rewards import CorrectnessReward
    from stddial_book.bridges.trl_allocation import allocated_trainer

    root, pool, model_dir = tiny_pool
    rows = [json.loads(line) for line in pool.read_text(encoding="utf-8").splitlines()]
    plan = plan_allocation([r["correct"] for r in rows], 8, "dr_grpo", max_new_tokens=12, max_group_size=4)
    model, tokenizer = load_model_and_tokenizer(str(model_dir))
    trainer, state = allocated_trainer(
        plan, model, tokenizer, load_prompts(str(pool)), [CorrectnessReward()], root / "plain", use_cpu=True
    )
    assert state is None  # no skip: TRL's own sampler
    assert type(trainer._get_train_sampler()).__name__ == "RepeatSampler"
    assert len(trainer.train_dataset) == 16 and trainer.train_dataset["prompt_id"] == list(range(16))
    kept_answers = [rows[i]["answer"].rsplit("####", 1)[1].strip() for i in np.flatnonzero(plan.keep)]
    assert trainer.train_dataset["answer"] == kept_answers
    assert trainer.num_generations == 4 and trainer.args.scale_rewards == "none"
    assert trainer.args.loss_type == "dr_grpo"
    with pytest.raises(ValueError, match="rows"):
        allocated_trainer(plan, model, tokenizer, load_prompts(str(pool)).select(range(5)), [], root / "x")


def test_the_module_runs_as_a_script() -> None:
    # `python -m stddial_book.bridges.trl_allocation` is the command the chapter gives
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "stddial_book.bridges.trl_allocation", "--help"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert run.returncode == 0, run.stderr
    usage = " ".join(run.stdout.split())
    assert "--skip" in usage and "question, answer (#### N), correct, samples" in usage


def _pool_file(path: Path) -> Path:
    rows = [
        {"question": f"{i} + {i}?", "answer": f"#### {2 * i}", "correct": k, "samples": 8}
        for i, k in enumerate([0, 3, 5, 8])
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_plan_only_prints_the_plan_and_writes_nothing(tmp_path, monkeypatch, capsys) -> None:
    from stddial_book.bridges.trl_allocation import main

    pool = _pool_file(tmp_path / "pool.jsonl")
    monkeypatch.chdir(tmp_path)
    assert main([str(pool), "--plan-only", "--recipe", "dr_grpo"]) == 0
    printed = capsys.readouterr().out
    assert "kept 2 (0 < k < n)" in printed and "num_generations = 12" in printed and '"loss_type": "dr_grpo"' in printed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pool.jsonl"]


@pytest.mark.parametrize(
    "args, phrase",
    [
        (["--max-steps", "-1"], "-1 is out of range"),
        (["--max-steps", "ten"], "is not a whole number"),
        (["--learning-rate", "nan"], "not a positive finite number"),
        (["--epsilon", "2"], "not below 1"),
        (["--lora-r", "-3"], "out of range"),
        (["--max-group-size", "1"], "out of range"),
        (["--recipe", "ppo"], "invalid choice"),
        ([], "--out is required"),
        (["--out", "."], "--out"),
        (["--model", "no/such-model", "--out", "new"], "--model no/such-model"),
        (["--pool-missing"], "does not exist"),
        (["--bad-json"], "line 2 is not JSON"),
        (["--no-counts"], "line 1 lacks correct, samples"),
    ],
)
def test_bad_input_is_one_line_with_status_2_and_nothing_written(tmp_path, monkeypatch, capsys, args, phrase) -> None:
    from stddial_book.bridges.trl_allocation import main

    pool = _pool_file(tmp_path / "pool.jsonl")
    if args and args[0] == "--pool-missing":
        pool, args = tmp_path / "nowhere.jsonl", ["--plan-only"]
    elif args and args[0] == "--bad-json":
        pool, args = tmp_path / "bad.jsonl", ["--plan-only"]
        pool.write_text('{"question": "1?", "answer": "#### 1", "correct": 1, "samples": 2}\n{oops\n')
    elif args and args[0] == "--no-counts":
        pool, args = tmp_path / "plain.jsonl", ["--plan-only"]
        pool.write_text('{"question": "1?", "answer": "#### 1"}\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = sorted(p.name for p in tmp_path.iterdir())
    try:
        status = main([str(pool), *args])
    except SystemExit as stop:  # argparse's refusal of an option
        status = stop.code
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and "Traceback" not in err
    assert phrase in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
