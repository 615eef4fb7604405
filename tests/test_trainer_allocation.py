"""The trainer under every allocation rule (Part V): each rule runs inside train(), its samples add
up, its pool history resumes exactly, and the default rule is the plain loop of chapters 10-12."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from conftest import TINY as BASE
from conftest import fresh

from stddial_book.rl.allocation import RULES
from stddial_book.rl.checkpoints import checkpoint_dir
from stddial_book.rl.model import model_for_profile
from stddial_book.rl.runlog import load_run
from stddial_book.rl.sampling import kept_rows, rows_by_prompt
from stddial_book.rl.trainer import train

# The tests' tiny profile (1-digit sums, a 2-layer model of width 32, 8 groups of 4 a step: 32
# samples) with a pool of 40 prompts measured with 4 samples each.
TINY = dataclasses.replace(BASE, train={**BASE.train, "pool_size": 40, "pool_samples": 4})

#: Options that fit each rule into a step of 32 samples.
OPTIONS = {
    "dapo": {},
    "greso": {},
    "knapsack": {"max_size": 8},
    "knapsack_oracle": {"max_size": 8, "solve_rates": list(np.linspace(0.05, 0.95, 40))},
    "speed": {"screen_size": 2, "continue_size": 4, "round_prompts": 8},
    "reinforce_ada": {"round_size": 2, "max_rounds": 2, "final_size": 2},
    "dial_grpo": {"max_size": 8},
    "dial_dr_grpo": {"max_size": 8, "decay": 0.9},
    "knapsack_paper": {"max_size": 8},
}


def clean(records):
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in records]


def test_every_rule_has_a_case() -> None:
    assert set(OPTIONS) == set(RULES) - {"uniform"}


@pytest.mark.parametrize("rule", sorted(OPTIONS))
def test_each_rule_runs_inside_train_and_its_samples_add_up(rule, problems, warm, tmp_path) -> None:
    train_set, heldout = problems
    config = TINY.train_config("grpo", allocation=rule, allocation_options=OPTIONS[rule])
    result = train(fresh(warm), train_set, heldout, config, tmp_path)
    _, records = load_run(tmp_path)
    steps = [r for r in records if r["step"] > 0]
    assert [r["step"] for r in steps] == list(range(1, result.steps + 1)) and result.steps >= 3
    generated = kept = 0
    for r in steps:
        assert r["allocation/rule"] == rule and r["allocation/step_budget"] == 32
        assert 0 < r["samples/step_generated"] <= 32  # screening and redraws count against the step
        parts = r["samples/step_kept"] + r["samples/step_discarded_silent"] + r["samples/step_discarded_surplus"]
        assert parts == r["samples/step_generated"]
        generated += r["samples/step_generated"]
        kept += r["samples/step_kept"]
        assert (r["samples/generated"], r["samples/kept"]) == (generated, kept)
        assert r["samples/discarded"] == generated - kept
        sizes = r.get("groups/size", [])  # the kept groups, each at its own size
        assert sum(sizes) == r["samples/step_kept"]
        assert r["allocation/groups_by_size"] == {str(g): sizes.count(g) for g in sorted(set(sizes))}
        # generated groups: one per prompt drawn this step, its rounds merged
        assert sum(r["groups_generated/size"]) == r["samples/step_generated"]
        assert (
            len(r["groups_generated/prompt"]) == len(set(r["groups_generated/prompt"])) == r["allocation/prompts_drawn"]
        )
        assert all(0 <= p < 40 for p in r["groups_generated/prompt"])
        if rule in ("dapo", "greso", "speed", "reinforce_ada"):  # rules that drop silent groups
            assert all(s > 0 for s in r.get("groups/sigma", []))
    # the run stops once the sample budget is spent, as the plain loop does
    assert (
        generated == result.samples_generated >= config.sample_budget > generated - steps[-1]["samples/step_generated"]
    )
    assert kept == result.samples_kept
    # the pool history saw every sample generated, discarded ones included
    saved = json.loads((checkpoint_dir(tmp_path) / "state.json").read_text())["pool_state"]
    assert sum(saved["samples"]) == generated and sum(saved["visits"]) == sum(
        r["allocation/prompts_drawn"] for r in steps
    )


@pytest.mark.parametrize("rule", ["speed", "dial_grpo", "greso"])
def test_resume_continues_exactly_under_a_rule(rule, problems, warm, tmp_path) -> None:
    """Stop after 3 steps (checkpoint at 2), resume: the pool history comes back with the weights and
    random states, so the run ends where one straight run ends."""
    train_set, heldout = problems
    config = TINY.train_config(
        "grpo", sample_budget=192, allocation=rule, allocation_options=OPTIONS[rule], allocation_candidates=24
    )
    straight = fresh(warm)
    train(straight, train_set, heldout, config, tmp_path / "a")
    first = train(fresh(warm), train_set, heldout, config, tmp_path / "b", stop_after=3)
    assert first.stopped_early and first.steps == 3
    resumed = fresh(warm)
    train(resumed, train_set, heldout, config, tmp_path / "b", resume=True)
    for (name, p), q in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(p, q), name
    assert clean(load_run(tmp_path / "a")[1]) == clean(load_run(tmp_path / "b")[1])
    state = [json.loads((checkpoint_dir(tmp_path / run) / "state.json").read_text()) for run in "ab"]
    assert state[0]["pool_state"] == state[1]["pool_state"]


def test_the_default_rule_is_the_plain_loop(problems, warm, tmp_path) -> None:
    """allocation="uniform", named or not, runs the loop of chapters 10-12: same settings on disk
    (no allocation fields), same metrics, same weights; and no pool history is kept."""
    train_set, heldout = problems
    default = TINY.train_config("dapo", sample_budget=64)
    named = TINY.train_config("dapo", sample_budget=64, allocation="uniform")
    assert default == named and default.to_dict() == named.to_dict()
    assert not any(k.startswith("allocation") for k in default.to_dict())
    models = []
    for name, config in (("a", default), ("b", named)):
        models.append(fresh(warm))
        train(models[-1], train_set, heldout, config, tmp_path / name)
    for p, q in zip(models[0].parameters(), models[1].parameters()):
        assert torch.equal(p, q)
    records = [clean(load_run(tmp_path / name)[1]) for name in "ab"]
    assert records[0] == records[1] and not any("allocation/rule" in r for r in records[0])
    assert "pool_state" not in json.loads((checkpoint_dir(tmp_path / "a") / "state.json").read_text())


def test_a_rule_is_part_of_the_runs_identity(problems, warm, tmp_path) -> None:
    """Another rule, option or budget is another configuration: a resume under it is refused."""
    train_set, heldout = problems
    dial = TINY.train_config("grpo", sample_budget=64, allocation="dial_grpo", allocation_options={"max_size": 8})
    assert dial.to_dict()["allocation"] == "dial_grpo" and dial.to_dict()["allocation_options"] == {"max_size": 8}
    other = TINY.train_config("grpo", sample_budget=64, allocation="dial_grpo", allocation_options={"max_size": 6})
    assert hash(dial) != hash(other) and dial.to_dict() != other.to_dict()
    train(fresh(warm), train_set, heldout, dial, tmp_path, stop_after=2)
    with pytest.raises(ValueError, match="different configuration"):
        train(fresh(warm), train_set, heldout, other, tmp_path, resume=True)


def test_the_dapo_rule_keeps_only_mixed_groups_up_to_the_batch(problems, warm, tmp_path) -> None:
    """Rule "dapo" is allocation.DynamicSampling, DAPO's dynamic sampling counted in one currency:
    fresh prompts each round for the groups still missing, mixed ones kept up to prompts_per_step,
    silent ones discarded; with room for every round it is never cut short by the budget."""
    train_set, heldout = problems
    config = TINY.train_config("grpo", sample_budget=256, allocation="dapo", allocation_budget=256)
    train(fresh(warm), train_set, heldout, config, tmp_path)
    steps = [r for r in load_run(tmp_path)[1] if r["step"] > 0]
    for r in steps:
        kept = len(r.get("groups/sigma", []))
        assert kept <= 8 and all(s > 0 for s in r.get("groups/sigma", []))
        assert r["dynamic_sampling/hit_cap"] == (kept < 8)
        assert r["samples/step_discarded_surplus"] == 0  # each round asks only for the groups missing
        assert r["samples/step_generated"] == 4 * len(r["groups_generated/prompt"])


@pytest.mark.parametrize(
    "changes, error, message",
    [
        (dict(allocation="greedy"), ValueError, "allocation must name a rule"),
        (dict(allocation="dial_grpo", allocation_options={"colour": 1}), ValueError, "do not fit rule 'dial_grpo'"),
        (dict(allocation_options={"max_size": 8}), ValueError, "apply to the other rules only"),
        (dict(allocation_budget=64), ValueError, "apply to the other rules only"),
        (dict(allocation="knapsack_oracle"), ValueError, "needs allocation_options"),
        (dict(allocation="speed", allocation_budget=3), ValueError, "smallest step costs 4"),
        (dict(allocation="reinforce_ada", allocation_budget=31), ValueError, "smallest step costs 32"),
        (dict(allocation="dapo", allocation_options=[1, 2]), TypeError, "must be a dict"),
        (dict(allocation="dapo", allocation_options={"max_rounds": "two"}), TypeError, "number or a list"),
        (dict(allocation="dapo", allocation_candidates=0), ValueError, "at least 1"),
        (dict(allocation="dapo", allocation_budget=2.5), TypeError, "whole number"),
    ],
)
def test_bad_allocation_settings_are_named(changes, error, message) -> None:
    with pytest.raises(error, match=message):
        TINY.train_config("grpo", **{"sample_budget": 64, **changes})


def test_pool_sized_settings_are_checked_against_the_pool(problems, tmp_path) -> None:
    train_set, heldout = problems
    model = model_for_profile(TINY)
    config = TINY.train_config("grpo", allocation="dapo", allocation_candidates=41)
    with pytest.raises(ValueError, match="exceeds the pool of 40"):
        train(model, train_set, heldout, config, tmp_path / "a")
    rates = {"solve_rates": [0.5] * 39}
    with pytest.raises(ValueError, match="39 pass rates for a pool of 40"):
        train(
            model,
            train_set,
            heldout,
            TINY.train_config("grpo", allocation="knapsack_oracle", allocation_options=rates),
            tmp_path / "b",
        )


def test_a_prompts_rounds_become_one_group_and_kept_rows_follow_the_rule() -> None:
    prompt_index = np.array([5, 5, 2, 2, 9, 9, 2, 2, 2, 9, 9])  # round 1: 5, 2, 9; round 2: 2, 9
    correct = np.array([1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 1])
    order = rows_by_prompt(prompt_index)
    assert prompt_index[order].tolist() == [5, 5, 2, 2, 2, 2, 2, 9, 9, 9, 9]
    assert order.tolist() == [0, 1, 2, 3, 6, 7, 8, 4, 5, 9, 10]
    merged, right = prompt_index[order], correct[order]
    # every sample of prompt 2 (SPEED's screen and continuation); a balanced pair from prompt 9
    rows = kept_rows(merged, right, [2, 9], [5, 2], [2, 1])
    assert rows.tolist() == [2, 3, 4, 5, 6, 7, 9]
    assert right[rows[-2:]].tolist() == [1, 0]
    with pytest.raises(ValueError, match="which were not drawn"):
        kept_rows(merged, right, [5], [2], [2])
    assert kept_rows(merged, right, [], [], []).size == 0


@pytest.mark.parametrize("rule", ["speed", "dial_grpo", "greso", "knapsack"])
def test_dapos_refill_and_another_rule_are_refused_in_one_line(rule) -> None:
    """DAPO's recipe refills silent groups; a rule that decides the step's groups itself would skip that refill
    silently, so the combination is refused before anything runs (issue 37)."""
    with pytest.raises(ValueError) as err:
        TINY.train_config("dapo", sample_budget=192, allocation=rule, allocation_options=OPTIONS.get(rule, {}))
    message = str(err.value)
    assert "\n" not in message and "refill" in message and "dynamic_sampling=False" in message


def test_dapos_refill_composes_with_the_dapo_rule_and_the_plain_loop() -> None:
    """The refill itself as a rule ('dapo') and the plain loop ('uniform') both carry it out."""
    for rule, options in (("dapo", {}), ("uniform", {})):
        config = TINY.train_config("dapo", sample_budget=192, allocation=rule, allocation_options=options)
        assert config.recipe.dynamic_sampling and config.allocation == rule
    plain = TINY.train_config("dapo", sample_budget=192).recipe.replace(dynamic_sampling=False)
    assert TINY.train_config(plain, sample_budget=192, allocation="speed", allocation_options=OPTIONS["speed"])


def test_evaluation_by_generated_samples_measures_every_rule_at_the_same_sample_counts(
    problems, warm, tmp_path
) -> None:
    """With eval_every_samples the pool and held-out set are measured at the start, at the first step after
    each multiple of that many generated samples and at the end, whatever a step generates (DAPO's refill
    generates more than a uniform step); without it, every eval_every steps as before. Both schedules
    train the same: only the measurements move."""
    train_set, heldout = problems
    by_samples = TINY.train_config("grpo", sample_budget=256, allocation="dapo", allocation_budget=128,
                                   eval_every_samples=64)  # fmt: skip
    train(fresh(warm), train_set, heldout, by_samples, tmp_path / "samples")
    records = load_run(tmp_path / "samples")[1]
    steps = [r for r in records if r["step"] > 0]
    measured = [r["step"] for r in records if "pool/k" in r]
    before, expected = 0, [0]
    for r in steps:
        after = r["samples/generated"]
        if after // 64 > before // 64 or after >= 256:
            expected.append(r["step"])
        before = after
    assert measured == expected and len(expected) >= 4
    assert any(r["samples/step_generated"] > 32 for r in steps)  # steps of several sizes: the schedule matters
    assert by_samples.to_dict()["eval_every_samples"] == 64
    assert "eval_every_samples" not in TINY.train_config("grpo").to_dict()  # old runs' settings read as before
    by_steps = dataclasses.replace(by_samples, eval_every_samples=0)
    train(fresh(warm), train_set, heldout, by_steps, tmp_path / "steps")
    other = load_run(tmp_path / "steps")[1]
    assert [r["step"] for r in other if "pool/k" in r] == [
        r["step"] for r in other if r["step"] % by_steps.eval_every == 0 or r is other[-1]
    ]
    same = [{k: v for k, v in r.items() if k.startswith(("samples/", "loss"))} for r in steps]
    assert same == [{k: v for k, v in r.items() if k.startswith(("samples/", "loss"))} for r in other if r["step"] > 0]
    with pytest.raises(ValueError, match="eval_every_samples must be >= 0"):
        dataclasses.replace(by_samples, eval_every_samples=-1)
