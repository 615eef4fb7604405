"""The training loop, end to end on a tiny model: every recipe, resume, dynamic sampling, bad configs, CLI."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY, fresh
from safetensors.torch import save_model

from stddial_book.cli import main
from stddial_book.core.outdir import MARKER, SET_ASIDE, claim_dir, read_marker
from stddial_book.core.resources import sha256 as file_sha256
from stddial_book.experiments.testbed import runs as experiments
from stddial_book.rl import profiles, update
from stddial_book.rl import trainer as train_module
from stddial_book.rl.batches import Batch, bucket_of, make_problems
from stddial_book.rl.checkpoints import checkpoint_dir
from stddial_book.rl.configs import SFTConfig, TaskConfig, TrainConfig
from stddial_book.rl.evaluate import evaluate
from stddial_book.rl.model import model_for_profile
from stddial_book.rl.runlog import load_run, metric_series
from stddial_book.rl.sft import sft
from stddial_book.rl.trainer import train
from stddial_book.theory import recipes
from stddial_book.theory.recipes import DAPO, GRPO

TRL_NAMES = [
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "completions/mean_length",
    "completions/clipped_ratio",
    "entropy",
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "clip_ratio/region_mean",
]


@pytest.mark.parametrize("recipe", ["grpo", "dr_grpo", "dapo"])
def test_each_recipe_end_to_end(recipe, problems, warm, tmp_path) -> None:
    train_set, heldout = problems
    config = TINY.train_config(recipe)
    result = train(fresh(warm), train_set, heldout, config, tmp_path)
    provenance, records = load_run(tmp_path)
    assert provenance["wall_time_s"] > 0 and provenance["peak_rss_mb"] > 0
    assert provenance["config"]["train"]["recipe"]["name"] == config.recipe.name
    steps = [r for r in records if r["step"] > 0]
    assert [r["step"] for r in steps] == list(range(1, result.steps + 1))
    for name in TRL_NAMES:
        assert all(name in r for r in steps if r["optimizer_steps"]), name
    # the budget counts every generated sample, and stops as soon as it is spent
    generated = sum(r["samples/step_generated"] for r in steps)
    assert generated == result.samples_generated == steps[-1]["samples/generated"] >= config.sample_budget
    assert generated - steps[-1]["samples/step_generated"] < config.sample_budget
    assert steps[-1]["samples/discarded"] == result.samples_generated - result.samples_kept
    # evaluation at the start, every eval_every steps and at the end, with per-bucket accuracies
    evals = [r["step"] for r in records if "eval/accuracy_greedy" in r]
    assert evals[0] == 0 and evals[-1] == result.steps
    assert any(k.startswith("eval/accuracy_sampled/D1") for k in records[0])
    assert (tmp_path / "checkpoint" / "model.safetensors").exists()
    if recipe == "dapo":
        for r in steps:  # only mixed groups reach the update
            assert all(s > 0 for s in r.get("groups/sigma", []))
        assert result.samples_kept < result.samples_generated or all(r["dial/silent_fraction"] == 0 for r in steps)
    else:
        assert result.samples_kept == result.samples_generated


@pytest.mark.parametrize("recipe", ["grpo", "dapo"])
def test_a_fixed_pool_is_measured_and_every_group_names_its_prompt(recipe, problems, warm, tmp_path) -> None:
    train_set, heldout = problems
    config = TINY.train_config(recipe, pool_size=12, pool_samples=6)
    train(fresh(warm), train_set, heldout, config, tmp_path)
    _, records = load_run(tmp_path)
    measured = [r for r in records if "pool/k" in r]
    assert measured[0]["step"] == 0 and [r["step"] for r in measured] == [
        r["step"] for r in records if "eval/accuracy_greedy" in r
    ]
    assert all(
        len(r["pool/k"]) == 12 and r["pool/n"] == 6 and 0 <= min(r["pool/k"]) <= max(r["pool/k"]) <= 6 for r in measured
    )
    for r in records[1:]:
        G = config.group_size
        assert all(0 <= i < 12 for i in r["groups_generated/prompt"])  # only pool prompts are drawn
        assert len(r["groups_generated/k"]) * G == r["samples/step_generated"]
        silent = [k in (0, G) for k in r["groups_generated/k"]]
        assert r["dial/silent_fraction"] == pytest.approx(np.mean(silent))
        assert set(r.get("groups/prompt", [])) <= set(r["groups_generated/prompt"])
        if recipe == "dapo":  # refill rounds ask only for the groups still missing
            assert r["samples/step_discarded_surplus"] == 0
            assert r["samples/step_discarded_silent"] == G * sum(silent)


def test_pool_settings_are_checked(problems) -> None:
    train_set, heldout = problems
    with pytest.raises(ValueError, match="pool_size"):
        TINY.train_config("grpo", pool_size=4)  # fewer than prompts_per_step = 8
    with pytest.raises(ValueError, match="pool_samples"):
        TINY.train_config("grpo", pool_size=12, pool_samples=1)
    with pytest.raises(ValueError, match="pool_size is 500"):
        train(model_for_profile(TINY), train_set[:20], heldout, TINY.train_config("grpo", pool_size=500), "unused")


def test_update_mass_is_the_identity_weight(problems, warm, tmp_path) -> None:
    """Logged per-group weight mean|A|/2 is σ for GRPO (0/1 rewards, population std)."""
    train_set, heldout = problems
    train(fresh(warm), train_set, heldout, TINY.train_config(GRPO.replace(kl_coef=0.0), sample_budget=32), tmp_path)
    record = load_run(tmp_path)[1][1]
    assert np.allclose(record["groups/weight"], record["groups/sigma"], atol=1e-6)
    mass = sum(v for k, v in record.items() if k.startswith("dial/update_mass/"))
    assert mass == pytest.approx(np.mean(record["groups/weight"]))


@pytest.mark.parametrize("recipe, pool", [("grpo", None), ("dapo", None), ("dapo", 12)])
def test_resume_continues_exactly(recipe, pool, problems, warm, tmp_path) -> None:
    """Stop after 3 steps (checkpoint at 2), resume: same weights and metrics as one straight run
    (with a fixed pool too, whose measurements must not disturb the sampler's random state)."""
    train_set, heldout = problems
    config = TINY.train_config(recipe, sample_budget=320, pool_size=pool)
    straight = fresh(warm)
    train(straight, train_set, heldout, config, tmp_path / "a")
    interrupted = fresh(warm)
    first = train(interrupted, train_set, heldout, config, tmp_path / "b", stop_after=3)
    assert first.stopped_early and first.steps == 3
    resumed = fresh(warm)  # a new process would start from scratch weights, then load the checkpoint
    train(resumed, train_set, heldout, config, tmp_path / "b", resume=True)
    for (name, p), q in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(p, q), name

    def clean(records):
        return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in records]

    assert clean(load_run(tmp_path / "a")[1]) == clean(load_run(tmp_path / "b")[1])
    assert len(load_run(tmp_path / "b")[0]["resumed_at"]) == 1


def test_resume_survives_crash_debris(problems, warm, tmp_path) -> None:
    """A crash while the next checkpoint is written leaves a half-written slot (not yet recorded in
    the run's manifest), and a kill mid-write leaves half a log line: resume falls back to the last
    complete checkpoint, drops the partial line, ends exactly where one straight run ends, and sets
    the debris aside instead of deleting it."""
    train_set, heldout = problems
    config = TINY.train_config("grpo", sample_budget=320)
    straight = fresh(warm)
    train(straight, train_set, heldout, config, tmp_path / "a")
    train(fresh(warm), train_set, heldout, config, tmp_path / "b", stop_after=3)
    run = tmp_path / "b"
    assert checkpoint_dir(run) == run / "checkpoint"
    (run / "checkpoint.alt").mkdir()  # the crash: the next checkpoint half written
    (run / "checkpoint.alt" / "model.safetensors").write_bytes(b"half")
    with open(run / "metrics.jsonl", "a") as handle:
        handle.write('{"step": 4, "rew')
    assert checkpoint_dir(run) == run / "checkpoint"
    resumed = fresh(warm)
    with pytest.warns(UserWarning, match="partial last line"):
        train(resumed, train_set, heldout, config, run, resume=True)
    for (name, p), q in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(p, q), name
    shelved = [p.read_bytes() for p in (run / SET_ASIDE).rglob("model.safetensors")]
    assert b"half" in shelved and (checkpoint_dir(run) / "state.json").exists()
    steps = [r["step"] for r in load_run(run)[1]]
    assert steps == sorted(set(steps)) == [r["step"] for r in load_run(tmp_path / "a")[1]]


@pytest.mark.parametrize("victim", ["model.safetensors", "optimizer.pt", "rng.pt", "state.json"])
def test_a_damaged_checkpoint_is_named(victim, problems, warm, tmp_path) -> None:
    train_set, heldout = problems
    config = TINY.train_config("grpo", sample_budget=64, eval_every=0)
    train(fresh(warm), train_set, heldout, config, tmp_path, stop_after=2)
    (tmp_path / "checkpoint" / victim).write_bytes(b"{garbage")
    with pytest.raises(ValueError, match=victim.replace(".", r"\.") + r".*(damaged|not the file this run wrote)"):
        train(fresh(warm), train_set, heldout, config, tmp_path, resume=True)


def test_checkpoints_load_onto_the_models_device(problems, warm, tmp_path, monkeypatch) -> None:
    """torch.load maps the optimizer state onto the model's device and the random states onto the
    CPU, so a checkpoint written on a GPU resumes on a CPU (and the other way round)."""
    train_set, heldout = problems
    config = TINY.train_config("grpo", sample_budget=64, eval_every=0)
    train(fresh(warm), train_set, heldout, config, tmp_path, stop_after=2)
    seen = {}
    real_load = torch.load

    def spy(path, *args, **kwargs):
        seen[Path(path).name] = kwargs.get("map_location")
        return real_load(path, *args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    train(fresh(warm), train_set, heldout, config, tmp_path, resume=True)
    assert seen == {"optimizer.pt": torch.device("cpu"), "rng.pt": "cpu"}


def test_a_resumed_finished_run_returns_its_final_evaluation(problems, warm, tmp_path) -> None:
    train_set, heldout = problems
    config = TINY.train_config("grpo", sample_budget=64)
    first = train(fresh(warm), train_set, heldout, config, tmp_path)
    again = train(fresh(warm), train_set, heldout, config, tmp_path, resume=True)
    assert again.steps == first.steps and again.final_eval is not None
    assert again.final_eval.metrics() == first.final_eval.metrics()
    assert [r["step"] for r in load_run(tmp_path)[1]].count(first.steps) == 1  # nothing logged twice


def test_frac_reward_zero_std_is_trls_metric_under_shaped_rewards() -> None:
    """TRL counts groups whose (shaped) reward std is zero; the dial's silent fraction counts groups
    unanimous in correctness. A length penalty inside an all-wrong group separates the two."""
    from stddial_book.rl.update import batch_metrics

    G = 4
    n = 2 * G
    correct = np.zeros(n)
    rewards = np.zeros(n)
    rewards[1] = -0.5  # group 0: all wrong, one penalised for length; group 1: all wrong, unpenalised
    batch = Batch(
        torch.zeros(n, 2, dtype=torch.long),
        torch.ones(n, 2, dtype=torch.bool),
        torch.zeros(n, 3, dtype=torch.long),
        torch.ones(n, 3, dtype=torch.bool),
        torch.zeros(n, dtype=torch.bool),
        torch.zeros(n, 3),
        correct,
        rewards,
        np.array(["D1"] * n),
        np.repeat(np.arange(2), G),
    )
    config = TrainConfig(recipe="grpo", group_size=G, prompts_per_step=2, num_minibatches=1)
    metrics = batch_metrics([batch], batch[np.array([], dtype=int)], np.zeros(0), config)
    assert metrics["dial/silent_fraction"] == 1.0 and metrics["frac_reward_zero_std"] == 0.5


@pytest.mark.slow
def test_sft_reports_a_fresh_measurement_not_the_crossing_estimate(problems) -> None:
    """The estimate that stops SFT is the first of many noisy ones to cross the target (biased
    upwards); the pass rate reported is measured again on every held-out prompt with new samples."""
    train_set, heldout = problems
    config = TINY.sft_config(final_eval_samples=3)
    model = model_for_profile(TINY)
    result = sft(model, train_set, heldout, config, max_new_tokens=4)
    assert result.reached and result.stop_estimate == result.history[-1]["sft/pass_rate"] >= 0.25
    check = torch.Generator().manual_seed(config.seed + 104_729)
    again = evaluate(model, heldout, 4, 3, check, greedy=False)
    assert result.pass_rate == again.sampled and again.successes.sum() <= 3 * len(heldout)


@pytest.mark.parametrize("recipe", ["grpo", "dr_grpo", "dapo"])
def test_identity_check_inside_the_update(recipe, problems, warm, tmp_path) -> None:
    """The per-group gradient at the weights each minibatch sees, against w (ḡ₊ − ḡ₋): to float32
    rounding on the first minibatch (ratio 1), measurably off on the second (the policy moved).
    The check only reads the model: the run is the same with and without it."""
    train_set, heldout = problems
    config = TINY.train_config(recipe, sample_budget=64, eval_every=0, identity_check_every=1, identity_check_groups=4)
    checked, plain = fresh(warm), fresh(warm)
    train(checked, train_set, heldout, config, tmp_path / "checked")
    train(plain, train_set, heldout, dataclasses.replace(config, identity_check_every=0), tmp_path / "plain")
    for p, q in zip(checked.parameters(), plain.parameters()):
        assert torch.equal(p, q)
    records = [r for r in load_run(tmp_path / "checked")[1] if r["step"] > 0]
    first = [e for r in records for e, m in zip(r["identity/rel_error"], r["identity/minibatch"]) if m == 0]
    later = [e for r in records for e, m in zip(r["identity/rel_error"], r["identity/minibatch"]) if m > 0]
    assert first and later
    assert max(first) < 1e-3, first  # float32 rounding only
    assert min(later) > 10 * max(first), (first, later)  # the moved policy is seen
    assert all(0.0 < s <= 0.5 for r in records for s in r["identity/sigma"])


def test_resume_refuses_other_config_and_missing_checkpoint(problems, warm, tmp_path) -> None:
    train_set, heldout = problems
    config = TINY.train_config("grpo", sample_budget=32)
    with pytest.raises(ValueError, match="was not written by stddial_book"):
        train(fresh(warm), train_set, heldout, config, tmp_path, resume=True)
    claim_dir(tmp_path / "marked", "train")
    with pytest.raises(ValueError, match="holds no checkpoint"):
        train(fresh(warm), train_set, heldout, config, tmp_path / "marked", resume=True)
    run = tmp_path / "run"
    train(fresh(warm), train_set, heldout, config, run)
    with pytest.raises(ValueError, match="already holds a run"):
        train(fresh(warm), train_set, heldout, config, run)
    with pytest.raises(ValueError, match="different configuration"):
        train(fresh(warm), train_set, heldout, TINY.train_config("dapo", sample_budget=32), run, resume=True)


def test_micro_batches_give_the_same_update(problems, warm, tmp_path) -> None:
    """Gradient accumulation over micro-batches changes memory, not the update (float64)."""
    train_set, heldout = problems
    models = []
    for micro in (None, 2):
        for recipe in ("dapo",):
            model = fresh(warm, torch.float64)
            config = TINY.train_config(recipe, sample_budget=32, micro_batch_size=micro, eval_every=0)
            train(model, train_set, heldout, config, tmp_path / f"{recipe}-{micro}")
            models.append(model)
    for p, q in zip(models[0].parameters(), models[1].parameters()):
        torch.testing.assert_close(p, q, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
def test_dynamic_sampling_counts_what_it_discards(problems, tmp_path) -> None:
    """An untrained model solves nothing: every group is silent, DAPO refills to its cap and skips."""
    train_set, heldout = problems
    config = TINY.train_config(DAPO, sample_budget=1, max_rounds=3, eval_every=0)
    result = train(model_for_profile(TINY), train_set, heldout, config, tmp_path)
    record = load_run(tmp_path)[1][-1]
    assert record["dynamic_sampling/rounds"] == 3 and record["dynamic_sampling/hit_cap"] is True
    assert record["samples/generated"] == 3 * 8 * 4 and record["samples/kept"] == 0
    assert record["optimizer_steps"] == 0 and result.updates == 0
    assert record["dial/silent_fraction"] == 1.0


def test_dapo_refills_with_prompts_not_yet_drawn_this_step(problems, warm, tmp_path) -> None:
    """Refill rounds ask for the missing groups only, from prompts the step has not drawn: no prompt
    twice in a step. A pool the step exhausts ends the refill (short batch, hit_cap)."""
    train_set, heldout = problems
    config = TINY.train_config(DAPO, sample_budget=256, eval_every=0, pool_size=40)
    train(fresh(warm), train_set, heldout, config, tmp_path / "pool")
    records = [r for r in load_run(tmp_path / "pool")[1] if r["step"] > 0]
    assert any(r["dynamic_sampling/rounds"] > 1 for r in records)
    for r in records:
        drawn = r["groups_generated/prompt"]
        assert len(drawn) == len(set(drawn)), drawn
        assert r["samples/step_discarded_surplus"] == 0
        assert r["samples/step_generated"] == len(drawn) * 4
    small = TINY.train_config(DAPO, sample_budget=1, eval_every=0, pool_size=8, max_rounds=4)
    train(model_for_profile(TINY), train_set, heldout, small, tmp_path / "exhausted")  # untrained: all silent
    record = load_run(tmp_path / "exhausted")[1][-1]
    assert record["dynamic_sampling/hit_cap"] is True
    assert record["samples/step_generated"] == 8 * 4  # the first round took the whole pool


def test_evaluate_per_bucket_adds_up(problems, warm) -> None:
    _, heldout = problems
    result = evaluate(fresh(warm), heldout, 4, 4, torch.Generator().manual_seed(0))
    buckets = np.array([bucket_of(p) for p in heldout])
    weighted = sum(result.sampled_by_bucket[b] * np.mean(buckets == b) for b in result.sampled_by_bucket)
    assert weighted == pytest.approx(result.sampled)
    assert result.successes.max() <= 4 and 0 <= result.silent_fraction <= 1


@pytest.mark.slow
def test_sft_reports_an_unreached_target(problems) -> None:
    train_set, heldout = problems
    config = SFTConfig(
        lr=1e-3, batch_size=8, target_pass_rate=1.0, eval_every=2, eval_prompts=4, eval_samples=2, max_steps=4
    )
    result = sft(model_for_profile(TINY), train_set, heldout, config, max_new_tokens=4)
    assert not result.reached and result.steps == 4 and len(result.history) == 2


def test_batch_concatenation_pads_both_sides() -> None:
    def part(prompt_width, completion_width, fill):
        n = 2
        return Batch(
            torch.full((n, prompt_width), fill),
            torch.ones(n, prompt_width, dtype=torch.bool),
            torch.full((n, completion_width), fill),
            torch.ones(n, completion_width, dtype=torch.bool),
            torch.zeros(n, dtype=torch.bool),
            torch.zeros(n, completion_width),
            np.ones(n),
            np.ones(n),
            np.array(["a"] * n),
            np.arange(n) + fill,
        )

    out = Batch.cat([part(4, 2, 5), part(6, 3, 7)], pad_id=0)
    assert out.prompt_ids.shape == (4, 6) and out.completion_ids.shape == (4, 3)
    assert out.prompt_ids[0].tolist() == [0, 0, 5, 5, 5, 5] and not bool(out.prompt_mask[0, :2].any())
    assert out.completion_ids[0].tolist() == [5, 5, 0] and not bool(out.mask[0, 2])
    assert out[np.array([3])].completion_ids.tolist() == [[7, 7, 7]]
    assert out.prompt_index.tolist() == [5, 6, 7, 8] and out[np.array([3])].prompt_index.tolist() == [8]


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(group_size=1), "group_size G must be at least 2"),
        (dict(prompts_per_step=6, num_minibatches=4), "not divisible by num_minibatches"),
        (dict(micro_batch_size=5), "must divide the minibatch"),
        (dict(recipe="ppo"), "unknown recipe 'ppo'"),
        (dict(recipe=DAPO, max_new_tokens=2), "penalty band"),
        (dict(eval_every=-1), "eval_every must be >= 0"),
        (dict(seed=-1), "seed must be a whole number from 0 to"),
        (dict(seed=2**40), "seed must be a whole number from 0 to"),
    ],
)
def test_bad_configs_name_the_fix(changes, message) -> None:
    with pytest.raises(ValueError, match=message):
        TrainConfig(**{"recipe": "grpo", **changes})


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: TrainConfig(group_size="8"), "group_size must be a whole number"),
        (lambda: TrainConfig(prompts_per_step=32.0), "prompts_per_step must be a whole number"),
        (lambda: TrainConfig(pool_size=2.5), "pool_size must be a whole number or None"),
        (lambda: TrainConfig(max_rounds=True), "max_rounds must be a whole number"),
        (lambda: SFTConfig(batch_size="128"), "batch_size must be a whole number"),
        (lambda: SFTConfig(lr="1e-3"), "lr must be a number"),
        (lambda: TaskConfig(digits=2), "digits must be a sequence"),
        (lambda: TaskConfig(num_train=10.5), "num_train must be a whole number"),
    ],
)
def test_config_fields_of_the_wrong_type_are_named(make, message) -> None:
    with pytest.raises(TypeError, match=message):
        make()
    assert TaskConfig(digits=[2, 3]).digits == (2, 3)  # a list is a sequence of digit counts too


def test_overlong_cache_longer_than_the_cap_is_refused() -> None:
    with pytest.raises(ValueError, match="overlong_cache_fraction"):
        DAPO.replace(overlong_cache_fraction=1.5)
    from stddial_book.rl.sampling import overlong_penalty

    with pytest.raises(ValueError, match="must lie in"):
        overlong_penalty([3], max_new_tokens=4, overlong_cache=5)


def test_task_config_mixes_digit_counts() -> None:
    train_set, heldout = make_problems(TaskConfig(digits=(2, 3), num_train=40, num_heldout=10))
    assert {p.digits for p in heldout[:6]} == {2, 3}  # interleaved, so SFT's probe set is mixed
    assert not {(p.a, p.b, p.digits) for p in train_set} & {(p.a, p.b, p.digits) for p in heldout}
    with pytest.raises(ValueError, match="at least one digit count"):
        TaskConfig(digits=())


# ------------------------------------------------------------------------- CLI and cached runs


def test_cli_train_then_eval(tiny_profile, tmp_path, capsys) -> None:
    out = tmp_path / "run"
    assert main(["train", "--recipe", "dapo", "--profile", "tiny", "--out", str(out), "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["samples_generated"] >= TINY.train["sample_budget"]
    assert (out / "sft" / "model.safetensors").exists() and json.loads((out / "sft" / "sft.json").read_text())[
        "reached"
    ]
    provenance, records = load_run(out)
    assert provenance["command"].startswith("python -m stddial_book train --recipe dapo")
    steps, acc = metric_series(records, "eval/accuracy_sampled")
    assert steps[0] == 0 and len(acc) >= 2
    assert main(["eval", "--checkpoint", str(out), "--profile", "tiny", "--samples", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert 0.0 <= report["accuracy_greedy"] <= 1.0 and "accuracy_sampled/D1" in report
    # resuming a finished run with another recipe is refused with a readable message
    assert main(["train", "--recipe", "grpo", "--profile", "tiny", "--out", str(out), "--resume", "--no-progress"]) == 2
    assert "different configuration" in capsys.readouterr().err


def test_cli_errors_are_readable(tiny_profile, tmp_path, capsys, monkeypatch) -> None:
    assert main(["train", "--recipe", "nope", "--profile", "tiny", "--out", str(tmp_path)]) == 2
    assert "choose one of" in capsys.readouterr().err
    assert main(["eval", "--checkpoint", str(tmp_path), "--profile", "tiny"]) == 2
    assert "holds no model" in capsys.readouterr().err

    def out_of_memory(*args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(experiments, "train_to_dir", out_of_memory)
    run = claim_dir(tmp_path / "run", "train")
    claim_dir(run / "sft", "sft")
    (run / "sft" / "model.safetensors").write_text("")
    assert main(["train", "--recipe", "grpo", "--profile", "tiny", "--out", str(run), "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert "ran out of memory" in err and "--micro-batch-size 8" in err


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_cli_checks_the_configuration_before_any_work(tiny_profile, tmp_path, capsys) -> None:
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--recipe",
                "grpo",
                "--profile",
                "tiny",
                "--out",
                str(out),
                "--sample-budget",
                "-5",
                "--no-progress",
            ]
        )
        == 2
    )
    assert "--sample-budget: -5 is out of range" in _one_line_error(capsys)
    assert not out.exists()  # no SFT was run first
    assert (
        main(
            [
                "train",
                "--recipe",
                "grpo",
                "--profile",
                "tiny",
                "--out",
                str(out),
                "--micro-batch-size",
                "5",
                "--no-progress",
            ]
        )
        == 2
    )
    assert "must divide the minibatch" in _one_line_error(capsys) and not out.exists()
    assert (
        main(
            [
                "train",
                "--recipe",
                "grpo",
                "--profile",
                "tiny",
                "--out",
                str(out),
                "--init",
                str(tmp_path / "missing"),
                "--no-progress",
            ]
        )
        == 2
    )
    assert "holds no SFT model" in _one_line_error(capsys)
    assert main(["train", "--recipe", "grpo", "--profile", "tiny", "--out", str(out), "--resume", "--no-progress"]) == 2
    assert "cannot resume" in _one_line_error(capsys) and not out.exists()
    (tmp_path / "afile").write_text("x")
    assert (
        main(["train", "--recipe", "grpo", "--profile", "tiny", "--out", str(tmp_path / "afile"), "--no-progress"]) == 2
    )
    assert "is a file" in _one_line_error(capsys)


def test_cli_names_damaged_and_mismatched_files(tiny_profile, tmp_path, capsys, monkeypatch) -> None:
    sft_dir = tmp_path / "sft"
    sft_dir.mkdir()
    (sft_dir / "model.safetensors").write_bytes(b"not a safetensors file")
    assert main(["eval", "--checkpoint", str(sft_dir), "--profile", "tiny"]) == 2
    assert "model.safetensors cannot be read" in _one_line_error(capsys)
    assert main(["eval", "--checkpoint", str(tmp_path / "nowhere"), "--profile", "tiny"]) == 2
    assert "is not a directory" in _one_line_error(capsys)
    small = dataclasses.replace(TINY, name="small", model={**TINY.model, "num_layers": 1})
    monkeypatch.setitem(profiles.PROFILES, "small", small)
    save_model(model_for_profile(TINY), str(sft_dir / "model.safetensors"))
    assert main(["eval", "--checkpoint", str(sft_dir), "--profile", "small"]) == 2
    assert "does not match profile 'small'" in _one_line_error(capsys)
    # a damaged run log: resume names the file and the line
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--recipe",
                "grpo",
                "--profile",
                "tiny",
                "--out",
                str(run),
                "--init",
                str(sft_dir),
                "--sample-budget",
                "64",
                "--no-progress",
            ]
        )
        == 0
    )
    capsys.readouterr()
    (run / "provenance.json").write_text("{")
    assert (
        main(
            [
                "train",
                "--recipe",
                "grpo",
                "--profile",
                "tiny",
                "--out",
                str(run),
                "--init",
                str(sft_dir),
                "--sample-budget",
                "64",
                "--resume",
                "--no-progress",
            ]
        )
        == 2
    )
    error = _one_line_error(capsys)
    assert "provenance.json is not the file this run wrote" in error and "delete" not in error
    assert (run / "provenance.json").read_text() == "{"  # a refused resume writes nothing


def test_cached_runs_are_reused(tiny_profile, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(experiments.ENV_CACHE, str(tmp_path))
    first = experiments.rl_run(TINY, "dr_grpo", seed=1, sample_budget=32)
    calls = []

    def record(profile, recipe, seed, init, out, **kwargs):
        calls.append(seed)
        Path(out).mkdir(parents=True)

    monkeypatch.setattr(experiments, "train_to_dir", record)
    again = experiments.rl_run(TINY, "dr_grpo", seed=1, sample_budget=32)
    assert again == first and not calls and (first / "done").exists()
    experiments.rl_run(TINY, "dr_grpo", seed=2, sample_budget=32)  # another seed is another run
    assert calls == [2]


def test_record_copies_logs_not_checkpoints_and_reuses_finished_runs(tiny_profile, tmp_path) -> None:
    from stddial_book.experiments.testbed.record import record_runs

    out = tmp_path / "data"
    paths = record_runs(tiny_profile, ["grpo", "dapo"], [0], tmp_path / "work", out, allow_dirty=True)
    assert [p.name for p in paths] == ["grpo-seed0", "dapo-seed0"]
    for p in paths:
        assert sorted(f.name for f in p.iterdir()) == [MARKER, "metrics.jsonl.gz", "provenance.json"]
        work = tmp_path / "work" / p.name
        assert load_run(p)[1] == load_run(work)[1]  # the compressed log reads as the run's own
        provenance = load_run(p)[0]
        assert provenance["config"]["init_sha256"] == file_sha256(tmp_path / "work" / "sft-seed0" / "model.safetensors")
        assert provenance["run_id"] == read_marker(work)["run_id"] and provenance["git_commit"]
    sft_provenance = load_run(out / "sft")[0]
    assert sft_provenance["model_sha256"] == file_sha256(tmp_path / "work" / "sft-seed0" / "model.safetensors")
    assert (out / "sft" / "sft.json").exists() and not (out / "sft" / "model.safetensors").exists()
    before = (tmp_path / "work" / "grpo-seed0" / "metrics.jsonl").stat().st_mtime_ns
    record_runs(tiny_profile, ["grpo"], [0], tmp_path / "work", out, allow_dirty=True)  # finished: not run again
    assert (tmp_path / "work" / "grpo-seed0" / "metrics.jsonl").stat().st_mtime_ns == before


def test_record_runs_each_allocation_rule_under_its_own_name(tiny_profile, tmp_path) -> None:
    """``record --allocations``: every recipe × rule × seed from the one SFT model; a rule's run is
    named after it and its provenance says which rule chose its groups; uniform keeps the plain name."""
    from stddial_book.experiments.testbed.record import record_runs, run_name

    out = tmp_path / "data"
    paths = record_runs(
        tiny_profile, ["grpo"], [0], tmp_path / "work", out, allow_dirty=True, allocations=["uniform", "knapsack"]
    )
    assert (
        [p.name for p in paths]
        == ["grpo-seed0", "grpo-knapsack-seed0"]
        == [
            run_name("grpo", "uniform", 0),
            run_name("grpo", "knapsack", 0),
        ]
    )
    rules = [load_run(p)[0]["config"]["train"].get("allocation", "uniform") for p in paths]  # uniform: no field
    assert rules == ["uniform", "knapsack"]
    records = load_run(paths[1])[1]
    assert any("allocation/groups_by_size" in r for r in records)
    assert not any("allocation/groups_by_size" in r for r in load_run(paths[0])[1])


def test_record_ablation_refuses_bad_arguments_and_a_dirty_tree_before_any_work(tmp_path, monkeypatch, capsys) -> None:
    """``record-ablation`` (chapter 13's design): a bad shard or seed is one line and exit 2, and a
    checkout with uncommitted changes is refused before the warm start."""
    from stddial_book.rl import runlog as runs

    monkeypatch.setattr(experiments, "sft_to_dir", lambda *a, **k: pytest.fail("SFT ran before the checks"))
    args = ["record-ablation", "--work", str(tmp_path / "w"), "--out", str(tmp_path / "o"), "--no-progress"]
    for bad, message in (
        (["--shard", "2/2"], "not a shard"),
        (["--shard", "x"], "not a shard"),
        (["--seeds", "-1"], "out of range"),
    ):
        assert main(args + bad) == 2
        assert message in _one_line_error(capsys)
    monkeypatch.setattr(runs, "git_state", lambda *a, **k: ("abc1234def", True))
    assert main(args + ["--seeds", "0"]) == 2
    assert "uncommitted changes" in _one_line_error(capsys)
    assert not (tmp_path / "w").exists() and not (tmp_path / "o").exists()


def test_record_refuses_a_dirty_tree_and_bad_arguments_before_any_work(
    tiny_profile, tmp_path, monkeypatch, capsys
) -> None:
    """A recorded run must come from a commit: a checkout with uncommitted changes is refused (unless
    allowed, which the provenance then says), and so is every bad argument, before SFT starts."""
    from stddial_book.experiments.testbed import record
    from stddial_book.rl import runlog as runs

    monkeypatch.setattr(runs, "git_state", lambda *a, **k: ("abc1234def", True))
    monkeypatch.setattr(experiments, "sft_to_dir", lambda *a, **k: pytest.fail("SFT ran before the checks"))
    args = [
        "record",
        "--profile",
        "tiny",
        "--seeds",
        "0",
        "--work",
        str(tmp_path / "w"),
        "--out",
        str(tmp_path / "o"),
        "--no-progress",
    ]
    assert main(args) == 2
    assert "uncommitted changes" in _one_line_error(capsys)
    monkeypatch.setattr(runs, "git_state", lambda *a, **k: ("abc1234def", False))
    for bad, message in (
        (["--recipes", "ppo"], "unknown recipe"),
        (["--out", ""], "--out: "),
        (["--work", "~"], "home directory"),
        (["--seeds", "-1"], "out of range"),
        (["--allocations", "greedy"], "rule must be one of"),
        (["--allocations", "knapsack_oracle"], "true pass rate"),
    ):
        assert main(args + bad) == 2
        assert message in _one_line_error(capsys)
    assert not (tmp_path / "w").exists() and not (tmp_path / "o").exists()
    with pytest.raises(ValueError, match="recipes must be a non-empty list"):
        record.check_record(tiny_profile, [], [0], tmp_path / "w", tmp_path / "o")


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda m, p: evaluate(None, p[1], 4), TypeError, "model must be a torch module"),
        (lambda m, p: evaluate(m, ["1+1="], 4), TypeError, "must hold Problem objects"),
        (lambda m, p: sft(m, p[0], p[1], {"lr": 1e-3}), TypeError, "config must be a SFTConfig"),
        (lambda m, p: train(m, p[0], p[1], {"group_size": 4}, "unused"), TypeError, "config must be a TrainConfig"),
        (lambda m, p: train(m, p[0], p[1], TINY.train_config("grpo"), None), TypeError, "out must be a directory"),
        (lambda m, p: bucket_of("D2"), TypeError, "bucket_of takes a Problem"),
        (lambda m, p: profiles.active_profile(3), TypeError, "profile name must be a string"),
    ],
)
def test_the_training_path_names_a_wrong_argument(call, error, message, problems) -> None:
    with pytest.raises(error, match=message):
        call(model_for_profile(TINY), problems)


def test_a_cached_run_checks_its_recipe_before_the_warm_start(tiny_profile, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(experiments.ENV_CACHE, str(tmp_path))
    monkeypatch.setattr(experiments, "warm_start", lambda *a, **k: pytest.fail("SFT ran before the check"))
    with pytest.raises(ValueError, match="unknown recipe 'ppo'"):
        experiments.rl_run(TINY, "ppo")


def test_tempered_sampling_starts_at_ratio_one(problems, warm, tmp_path) -> None:
    """π_old is the tempered sampler's policy, so the loss takes its log-probs at the same
    temperature: with one minibatch per step no token can be clipped (every ratio is 1). The
    untempered loss put ratios at 0.6 to 1.4 at temperature 0.5, and clipped many tokens."""
    train_set, heldout = problems
    model = fresh(warm, torch.float64)
    config = TINY.train_config(
        GRPO.replace(kl_coef=0.0, clip_low=0.01, clip_high=0.01),
        sample_budget=64,
        num_minibatches=1,
        temperature=0.5,
        eval_every=0,
    )
    train(model, train_set, heldout, config, tmp_path / "tempered")
    steps = [r for r in load_run(tmp_path / "tempered")[1] if r["step"] > 0]
    assert len(steps) >= 2 and all(r["clip_ratio/region_mean"] == 0.0 for r in steps)


def test_nothing_is_ever_deleted_and_only_a_runs_own_files_are_set_aside(
    tiny_profile, tmp_path, monkeypatch, capsys
) -> None:
    """Starting a run afresh sets an unfinished run's own files aside, never anything else: `--out ''`
    once meant the current directory, which was deleted; a folder with run-like names
    (metrics.jsonl, checkpoint/) is a reader's unless the tool's marker is in it."""
    from stddial_book.experiments.testbed.runs import remove_stale_run

    work = tmp_path / "work"
    (work / "notes").mkdir(parents=True)
    (work / "notes" / "mine.txt").write_text("keep")
    monkeypatch.chdir(work)
    for path in ("", ".", str(tmp_path), "/"):
        with pytest.raises(ValueError, match="current directory|root"):
            remove_stale_run(path)
    with pytest.raises(ValueError, match="not written by stddial_book"):
        remove_stale_run("notes")
    assert main(["sft", "--profile", "tiny", "--out", "", "--no-progress"]) == 2
    assert "current directory" in _one_line_error(capsys)
    assert main(["sft", "--profile", "tiny", "--out", "notes", "--no-progress"]) == 2
    assert "not written by stddial_book" in _one_line_error(capsys)
    assert (work / "notes" / "mine.txt").read_text() == "keep"
    lookalike = work / "lookalike"  # another trainer's run: run-like names, no marker
    (lookalike / "checkpoint").mkdir(parents=True)
    (lookalike / "metrics.jsonl").write_text("theirs")
    with pytest.raises(ValueError, match="not written by stddial_book"):
        remove_stale_run(lookalike)
    assert (lookalike / "metrics.jsonl").read_text() == "theirs" and (lookalike / "checkpoint").is_dir()
    stale = claim_dir(work / "stale", "train")  # the tool's own unfinished run
    (stale / "checkpoint").mkdir()
    (stale / "metrics.jsonl").write_text("")
    (stale / "readme.txt").write_text("a reader's note inside a run directory")
    remove_stale_run(stale)
    assert sorted(p.name for p in stale.iterdir()) == [MARKER, SET_ASIDE, "readme.txt"]
    assert sorted(p.name for p in next((stale / SET_ASIDE).iterdir()).iterdir()) == ["checkpoint", "metrics.jsonl"]
    assert (work / "notes" / "mine.txt").exists()


def test_the_cache_key_covers_the_code_a_run_executes() -> None:
    """Runs are cached under a hash of the modules they execute, lazy imports included (the in-update
    identity check imports gradcheck inside a function); the figures, widgets and build tooling are
    left out, so editing a page's helpers does not retrain every chapter's runs."""
    modules = set(experiments.run_modules())
    assert {
        "rl.trainer",
        "rl.update",
        "rl.sft",
        "rl.checkpoints",
        "rl.rollout",
        "rl.losses",
        "theory.recipes",
        "rl.sampling",
        "rl.tasks",
        "rl.model",
        "rl.gradcheck",
        "corpora.histograms",
        "theory.identity",
        "rl.runlog",
        "rl.profiles",
    } <= modules
    assert not {m for m in modules if m.split(".")[0] in ("presentation", "bridges", "teaching")}
    assert all((Path(experiments.__file__).parents[2] / (m.replace(".", "/") + ".py")).is_file() for m in modules)


def test_the_cache_key_ignores_documentation_but_not_code() -> None:
    """Rewording a docstring or a comment keeps a module's fingerprint; changing a statement does not."""
    from stddial_book.experiments.testbed.runs import _code_of

    base = 'def f(x):\n    """Double x."""\n    return 2 * x  # twice\n'
    reworded = '"""A module."""\n\n\ndef f(x):\n    """Twice x, reworded."""\n    # the same code\n    return 2 * x\n'
    assert _code_of(base) == _code_of(reworded)
    assert _code_of(base) != _code_of(base.replace("2 * x", "3 * x"))
    only_doc = 'class A:\n    """Only a docstring."""\n'
    assert _code_of(only_doc) == _code_of("class A:\n    pass\n")


def test_the_code_fingerprint_is_kept_only_while_the_sources_stay_the_same(tmp_path, monkeypatch) -> None:
    """code_fingerprint is memoised within a process (parsing the modules takes about a second, and
    a chapter asks for it once per run), yet an edited statement in a run module gives a new key at
    once, in the same process; an edited docstring does not."""
    import shutil

    from stddial_book.experiments.testbed import runs as testbed

    copy = tmp_path / "stddial_book"
    shutil.copytree(testbed._PACKAGE_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__", "data"))
    monkeypatch.setattr(testbed, "_PACKAGE_ROOT", copy)
    first = testbed.code_fingerprint()
    assert testbed.code_fingerprint() == first
    losses = copy / "rl" / "losses.py"
    source = losses.read_text()
    losses.write_text(source.replace('"""', '"""Reworded. ', 1))
    assert testbed.code_fingerprint() == first
    losses.write_text(source + "\nEXTRA = 1\n")
    assert testbed.code_fingerprint() != first
    losses.write_text(source)
    assert testbed.code_fingerprint() == first


def test_the_overlong_filter_masks_truncated_samples_out_of_the_advantages(
    problems, warm, tmp_path, monkeypatch
) -> None:
    """The trainer passes the overlong filter's mask to group_advantages (and no mask without it)."""

    seen = []
    real = recipes.group_advantages

    def spy(rewards, group_size, recipe, valid=None):
        seen.append(valid)
        return real(rewards, group_size, recipe, valid=valid)

    monkeypatch.setattr(train_module, "group_advantages", spy)
    train_set, heldout = problems
    cut = DAPO.replace(overlong_penalty=False, overlong_cache_fraction=0.0, dynamic_sampling=False)
    train(
        fresh(warm),
        train_set,
        heldout,
        TINY.train_config(cut, max_new_tokens=2, sample_budget=32, eval_every=0),
        tmp_path / "cut",
    )
    records = [r for r in load_run(tmp_path / "cut")[1] if r["step"] > 0]
    assert seen and all(v is not None and v.dtype == bool for v in seen)
    assert any((~v).any() for v in seen) and records[0]["completions/clipped_ratio"] > 0
    seen.clear()
    train(
        fresh(warm), train_set, heldout, TINY.train_config("grpo", sample_budget=32, eval_every=0), tmp_path / "plain"
    )
    assert seen and all(v is None for v in seen)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: make_problems(None), TypeError, "make_problems takes a TaskConfig"),
        (lambda: Batch.cat([], 0), ValueError, "at least one batch"),
        (lambda: TaskConfig(digits=(2, 2)), ValueError, "twice"),
        (lambda: experiments.warm_start(None), TypeError, "profile must be a Profile"),
        (lambda: experiments.rl_run("quick", "grpo"), TypeError, "profile must be a Profile"),
        (lambda: load_run(None), TypeError, "load_run takes a run directory"),
        (lambda: metric_series([{"x": 1}], "x"), ValueError, "with a 'step' each"),
    ],
)
def test_more_wrong_arguments_are_named(call, error, message) -> None:
    from stddial_book.rl.checkpoints import checkpoint_dir

    with pytest.raises(error, match=message):
        call()
    with pytest.raises(TypeError, match="run directory path"):
        checkpoint_dir(None)


def _padded_batch(prompt_lens, completion_lens, prompt_width=6, completion_width=8) -> Batch:
    """A batch with left-padded prompts and right-padded completions of the given lengths."""
    n = len(prompt_lens)
    prompt_mask = torch.arange(prompt_width)[None, :] >= torch.tensor([prompt_width - p for p in prompt_lens])[:, None]
    mask = torch.arange(completion_width)[None, :] < torch.tensor(completion_lens)[:, None]
    ids = torch.full((n, prompt_width), 2)
    return Batch(
        ids,
        prompt_mask,
        torch.full((n, completion_width), 3),
        mask,
        torch.zeros(n, dtype=torch.bool),
        torch.zeros(n, completion_width),
        np.zeros(n),
        np.zeros(n),
        np.array(["b"] * n),
        np.arange(n),
    )


def test_passes_cover_every_row_and_every_real_token() -> None:
    """The passes partition the minibatch, and each one's cut keeps every real token of its rows."""
    rng = np.random.default_rng(0)
    for micro in (None, 4):
        prompt_lens = rng.integers(3, 7, size=16).tolist()
        completion_lens = rng.integers(1, 9, size=16).tolist()
        batch = _padded_batch(prompt_lens, completion_lens)
        rows = torch.arange(2, 14)
        passes = update._passes(batch, rows, 4, micro)
        seen = torch.cat([r for r, _, _ in passes]).tolist()
        assert sorted(seen) == rows.tolist()
        for r, start, width in passes:
            assert not batch.prompt_mask[r][:, :start].any()  # only padding is cut from prompts
            assert not batch.mask[r][:, width:].any()  # and from completions
            assert batch.mask[r][:, width - 1].any()  # the widest row sets the width
            if micro is not None:
                assert len(r) <= micro


def test_passes_split_by_length_only_where_it_saves_work() -> None:
    """Half the rows need 1 completion column and half 8: two passes; equal lengths: one pass."""
    mixed = _padded_batch([6] * 64, [1] * 32 + [8] * 32)
    passes = update._passes(mixed, torch.arange(64), 8, None)
    assert [(len(r), w) for r, _, w in passes] == [(32, 1), (32, 8)]
    alike = _padded_batch([6] * 64, [3] * 63 + [4])
    assert len(update._passes(alike, torch.arange(64), 8, None)) == 1


def test_length_cuts_are_the_cheapest_split_at_length_boundaries() -> None:
    """The dynamic programme against every set of cuts at the boundaries between lengths."""
    import itertools

    rng = np.random.default_rng(1)
    cost_per_pass = update._PASS_COST_TOKENS
    for _ in range(30):
        n = int(rng.integers(1, 40))
        prompt = rng.integers(2, 7, size=n)
        completion = rng.integers(1, 9, size=n)
        group = rng.integers(0, 6, size=n)
        order = np.argsort(completion, kind="stable")
        prompt, completion, group = (x[order].tolist() for x in (prompt, completion, group))
        boundaries = [i for i in range(1, n) if completion[i] != completion[i - 1]]

        def cost(cuts):
            # each distinct prompt once at the widest prompt, completions less their last column
            return sum(
                len(set(group[a:b])) * max(prompt[a:b]) + (b - a) * (max(completion[a:b]) - 1) + cost_per_pass
                for a, b in zip(cuts[:-1], cuts[1:])
            )

        best = min(
            cost([0, *chosen, n])
            for k in range(len(boundaries) + 1)
            for chosen in itertools.combinations(boundaries, k)
        )
        cuts = update._length_cuts(prompt, completion, group)
        assert cuts[0] == 0 and cuts[-1] == n and cost(cuts) == best


def test_two_processes_sharing_the_cache_make_a_run_once(tiny_profile, tmp_path, monkeypatch) -> None:
    """The test runner's workers (and a build beside them) share one run cache: the second process
    waits for the warm start the first is making and reuses it, instead of training into the same
    directory at the same time."""
    import multiprocessing

    monkeypatch.setenv(experiments.ENV_CACHE, str(tmp_path / "cache"))
    made = tmp_path / "made.txt"
    real = experiments.sft_to_dir

    def counting(*args, **kwargs):
        with open(made, "a") as handle:
            handle.write("sft\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(experiments, "sft_to_dir", counting)
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=experiments.warm_start, args=(TINY,)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    assert [w.exitcode for w in workers] == [0, 0]
    assert made.read_text() == "sft\n"
    assert (experiments.warm_start(TINY) / "model.safetensors").is_file()
