"""The quick profile's nine RL runs (three recipes, three seeds), which chapters 10-13 read: each is
made once through the run cache (chapter 9's warm start first), here as one test per run so that
``make chapters`` spreads them over its processes, and checked for what the chapters rely on."""

from __future__ import annotations

import numpy as np
import pytest

from stddial_book.core.resources import sha256
from stddial_book.experiments.testbed.runs import rl_run, warm_start
from stddial_book.rl.profiles import PROFILES
from stddial_book.rl.runlog import load_run
from stddial_book.theory.recipes import RECIPES

QUICK = PROFILES["quick"]
RUNS = [(recipe, seed) for recipe in RECIPES for seed in QUICK.seeds]


@pytest.mark.quick_runs
@pytest.mark.slow
@pytest.mark.parametrize(("recipe", "seed"), RUNS, ids=[f"{r}-seed{s}" for r, s in RUNS])
def test_quick_run(recipe: str, seed: int) -> None:
    provenance, records = load_run(rl_run(QUICK, recipe, seed))
    config = QUICK.train_config(recipe, seed)
    # it started from this build's warm start, under the settings the chapters name
    assert provenance["config"]["init_sha256"] == sha256(warm_start(QUICK) / "model.safetensors")
    assert provenance["profile"] == "quick" and provenance["seed"] == seed
    assert provenance["config"]["train"]["recipe"]["name"] == config.recipe.name
    # it ran to its sample budget: the generated samples add up to it, no step after it
    generated = sum(r.get("samples/step_generated", 0) for r in records)
    assert generated >= config.sample_budget
    assert generated - records[-1].get("samples/step_generated", 0) < config.sample_budget
    # the identity held inside the update on the first minibatch, where the ratio is 1 and the clip
    # is inert (chapter 10's check; later minibatches see a moved policy and agree only roughly)
    first = [
        err
        for r in records
        for err, minibatch in zip(r.get("identity/rel_error", []), r.get("identity/minibatch", []))
        if minibatch == 0
    ]
    assert first, "no group of a first minibatch was checked against the identity"
    assert max(first) < 1e-4
    # every evaluation the chapters plot is there, and finite
    evals = [r["eval/accuracy_sampled"] for r in records if "eval/accuracy_sampled" in r]
    assert len(evals) >= 2 and np.all(np.isfinite(evals)) and all(0.0 <= a <= 1.0 for a in evals)
