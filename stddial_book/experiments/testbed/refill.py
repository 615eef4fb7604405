"""DAPO's dynamic sampling measured and replayed: its cost, the bands of what it refills, the round cap (chapter 12)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from stddial_book.core.checks import check_group_size, check_int, to_numpy
from stddial_book.experiments.testbed.logs import check_records, check_run_group_size, training_steps
from stddial_book.experiments.testbed.predictions import initial_bands, pool_history, silent_check

__all__ = ["dapo_cost", "refill_band_shares", "replay_refill", "max_rounds_study", "sample_coefficients"]


def dapo_cost(records: list[dict[str, Any]], group_size: int) -> dict[str, float]:
    """What DAPO's refill cost in one run (chapter 12): samples generated per sample kept; the same
    from the measured silent fraction f of the generated groups, 1/(1 − f) (equal to the first
    when rounds ask only for the missing groups and no step hit the cap: bookkeeping); and from
    the closed form, f = E[p^G + (1 − p)^G] over the prompts drawn (:func:`silent_check`: the
    prediction); samples discarded as silent and as surplus mixed groups; steps that hit the cap.
    ``records`` is the DAPO run's log (per-step metric dicts with pool measurements, as
    :func:`~stddial_book.rl.runlog.load_run` returns); ``group_size`` is its G, checked against the log."""
    group_size = check_run_group_size(records, group_size)
    steps = [r for r in check_records(records) if r["step"] > 0 and "groups_generated/k" in r]
    if not steps:
        raise ValueError("this run log holds no training step.")
    ks = np.concatenate([np.asarray(r["groups_generated/k"]) for r in steps])
    measured = float(np.mean((ks == 0) | (ks == group_size)))
    check = silent_check(records, group_size)
    counts = np.array([len(r["groups_generated/k"]) for r in steps], dtype=np.float64)
    predicted = float(np.average(check["predicted"], weights=counts))
    last = steps[-1]
    return {
        "generated_per_kept": last["samples/generated"] / last["samples/kept"],
        "from_measured_f": 1.0 / (1.0 - measured),
        "from_closed_form_f": 1.0 / (1.0 - predicted),
        "silent_measured": measured,
        "silent_closed_form": predicted,
        "discarded_silent": float(sum(r.get("samples/step_discarded_silent", 0) for r in steps)),
        "discarded_surplus": float(sum(r.get("samples/step_discarded_surplus", 0) for r in steps)),
        "capped_steps": int(sum(bool(r.get("dynamic_sampling/hit_cap")) for r in steps)),
    }


def refill_band_shares(
    records: list[dict[str, Any]], group_size: int, redraw_tries: int = 4, num_bands: int = 4
) -> dict[str, np.ndarray]:
    """Share of the expected update weight per band of initial solve rate under three ways of
    handling silent groups (chapter 12): none (GRPO), DAPO's refill with new prompts (verl, this
    book's trainer) and the source paper's same-prompt redraw of up to ``redraw_tries`` draws
    (:func:`stddial_book.theory.silent.refill_weight`). p is each pool prompt's measured solve rate at
    the start of RL (plug-in), bands as :func:`initial_bands`. Each entry sums to 1. ``records`` is a
    run's log with pool measurements; ``group_size`` the G the three rules are evaluated at (at least 2);
    ``num_bands`` the bands (default 4: quartiles).
    """
    from stddial_book.theory.recipes import GRPO
    from stddial_book.theory.silent import expected_update_weight, refill_weight, silent_probability

    G = check_group_size(group_size)
    _, n, K = pool_history(records)
    p0 = K[0] / n
    bands = initial_bands(records, num_bands)
    f0 = float(np.mean(silent_probability(p0, G)))
    rules = {
        "GRPO, no refill": expected_update_weight(p0, G, GRPO),
        "new-prompt refill (verl, this book)": refill_weight(p0, G, GRPO, pool_silent_fraction=f0),
        f"same-prompt redraw, {redraw_tries} draws (the paper)": refill_weight(p0, G, GRPO, redraw_tries=redraw_tries),
    }
    out = {}
    for name, weight in rules.items():
        weight = np.asarray(weight, dtype=np.float64)
        if weight.sum() <= 0:
            raise ValueError("every pool prompt is silent at the start (p = 0 or 1): no weight to share.")
        out[name] = np.array([weight[bands == b].sum() for b in range(num_bands)]) / weight.sum()
    return out


def replay_refill(
    records: list[dict[str, Any]], group_size: int, prompts_per_step: int, max_rounds: int
) -> dict[str, np.ndarray]:
    """DAPO's refill replayed on a run's logged groups with a cap of ``max_rounds`` rounds.

    Each step's generated groups are logged in the order they were drawn (``groups_generated/k``),
    and every round asked for exactly the groups still missing; feeding them in that order to a
    :class:`~stddial_book.rl.sampling.DynamicSampler` reproduces the step's rounds at the run's own
    cap and shows what a lower cap would have kept from the same groups (chapter 12). Per step:
    ``rounds``, ``hit_cap``, ``groups_kept``, ``groups_generated``, and as logged
    ``logged_rounds`` and ``logged_hit_cap``. ``records`` is the DAPO run's log; ``group_size`` its G,
    checked against the log; ``prompts_per_step`` the mixed groups a step's batch asks for (the run's own).
    """
    from stddial_book.rl.sampling import DynamicSampler

    G = check_run_group_size(records, group_size)
    prompts_per_step = check_int(prompts_per_step, "prompts_per_step", minimum=1)
    max_rounds = check_int(max_rounds, "max_rounds", minimum=1)
    out: dict[str, list] = {
        "rounds": [],
        "hit_cap": [],
        "groups_kept": [],
        "groups_generated": [],
        "logged_rounds": [],
        "logged_hit_cap": [],
    }
    for r in training_steps(records):
        ks = np.asarray(r["groups_generated/k"], dtype=np.int64)
        if np.any(ks < 0) or np.any(ks > G):
            raise ValueError(f"step {r['step']} logs k outside 0..{G}; pass the run's group size.")
        position = [0]

        def draw(_round: int, wanted: int, ks=ks, position=position) -> tuple[np.ndarray, np.ndarray]:
            chunk = ks[position[0] : position[0] + wanted]
            position[0] += chunk.size
            correct = (np.arange(G)[None, :] < chunk[:, None]).astype(np.float64).reshape(-1)
            return np.zeros(correct.size), correct

        _, cost = DynamicSampler(prompts_per_step, G, max_rounds).fill(draw)
        out["rounds"].append(cost.rounds)
        out["hit_cap"].append(cost.hit_cap)
        out["groups_kept"].append(cost.groups_kept)
        out["groups_generated"].append(cost.groups_generated)
        out["logged_rounds"].append(int(r.get("dynamic_sampling/rounds", -1)))
        out["logged_hit_cap"].append(bool(r.get("dynamic_sampling/hit_cap", False)))
    return {k: np.asarray(v) for k, v in out.items()}


def max_rounds_study(records: list[dict[str, Any]], train: dict[str, Any], max_rounds: int = 1) -> dict[str, Any]:
    """What a DAPO run would have done with another cap on refill rounds, from its own log.

    ``train`` is the run's training configuration (``provenance["config"]["train"]``). The logged
    groups are replayed (:func:`replay_refill`) at the run's own cap (``reproduced``: the replay
    gives the logged rounds and short batches at every step) and at ``max_rounds``. Returns, as
    logged: ``steps_logged``, ``updates_logged``, ``hit_cap_logged`` (share of steps); replayed at
    ``max_rounds``: ``hit_cap`` (share of steps with a short batch), ``groups_kept`` (mean per
    step), ``kept_share`` (of the batch), ``samples_per_step`` (generated), and for the same
    sample budget ``steps`` = ⌈budget / samples per step⌉ and ``updates`` = steps × the mean of
    min(num_minibatches, groups kept) per step. The last two are estimates that assume the
    silent fraction stays as in the logged run; with ``max_rounds = 1`` every step costs exactly
    one round, so ``steps`` is exact (chapter 12). ``records`` is the DAPO run's log (the per-step
    metric dicts :func:`~stddial_book.rl.runlog.load_run` returns).
    """
    if not isinstance(train, dict):
        raise TypeError(f"train must be the run's training configuration (a dict); got {type(train).__name__}.")
    missing = [
        k
        for k in ("group_size", "prompts_per_step", "max_rounds", "sample_budget", "num_minibatches")
        if k not in train
    ]
    if missing:
        raise ValueError(f"train lacks {', '.join(missing)}; pass provenance['config']['train'] of the run.")
    G, per_step = train["group_size"], train["prompts_per_step"]
    own = replay_refill(records, G, per_step, train["max_rounds"])
    new = replay_refill(records, G, per_step, max_rounds)
    steps = training_steps(records)
    samples_per_step = float(np.mean(new["groups_generated"])) * G
    num_steps = math.ceil(train["sample_budget"] / samples_per_step)
    updates_per_step = float(np.mean(np.minimum(train["num_minibatches"], new["groups_kept"])))
    return {
        "reproduced": bool(
            np.array_equal(own["rounds"], own["logged_rounds"])
            and np.array_equal(own["hit_cap"], own["logged_hit_cap"])
        ),
        "steps_logged": len(steps),
        "updates_logged": int(steps[-1]["updates"]),
        "hit_cap_logged": float(np.mean(own["logged_hit_cap"])),
        "hit_cap": float(np.mean(new["hit_cap"])),
        "groups_kept": float(np.mean(new["groups_kept"])),
        "kept_share": float(np.mean(new["groups_kept"])) / per_step,
        "samples_per_step": samples_per_step,
        "steps": num_steps,
        "updates": num_steps * updates_per_step,
    }


def sample_coefficients(recipe, correct, lengths, group_size: int, max_new_tokens: int) -> np.ndarray:
    """Each sample's coefficient cᵢ in the update the recipe's loss makes at ratio 1:
    −∇L = Σᵢ cᵢ ∇ Σₜ log π(oᵢₜ), the gradient of the summed log-probabilities of sample i.

    Taken by autograd through :func:`stddial_book.rl.losses.policy_loss` (KL off) on a batch with the
    given correctness and completion lengths, so it is what the trainer's loss does: Aᵢ / (B ℓᵢ)
    for the per-sequence token mean (GRPO), Aᵢ / (B L_max) for the sum over L_max (Dr. GRPO),
    Aᵢ / Σⱼ ℓⱼ for the token mean (DAPO), with B samples and ℓᵢ the lengths (chapters 4 and 13).
    ``recipe`` is a :class:`~stddial_book.theory.recipes.Recipe` or its name; ``correct`` the 0/1 correctness
    and ``lengths`` the completion lengths in tokens (1 to ``max_new_tokens``), 1-D, one entry per sample,
    groups of ``group_size`` contiguous; ``max_new_tokens`` is L_max, the completion cap in tokens.
    """
    from stddial_book.core.checks import check_binary
    from stddial_book.experiments.testbed.probes import token_weights
    from stddial_book.theory.recipes import as_recipe, group_advantages

    recipe = as_recipe(recipe)
    G = check_group_size(group_size)
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1)
    correct = to_numpy(correct, "correct")
    check_binary(correct, "correct")
    lengths = to_numpy(lengths, "lengths")
    if correct.ndim != 1 or lengths.shape != correct.shape:
        raise ValueError(
            f"correct and lengths must be 1-D, one entry per sample; got shapes {correct.shape} and {lengths.shape}."
        )
    if np.any(lengths != np.round(lengths)) or lengths.min() < 1 or lengths.max() > max_new_tokens:
        raise ValueError(f"lengths must be whole token counts in 1..max_new_tokens={max_new_tokens}.")
    rewards = np.where(correct > 0, recipe.reward_correct, recipe.reward_wrong)
    weights = token_weights(
        lengths.astype(np.int64).tolist(),
        group_advantages(rewards, G, recipe),
        recipe.replace(kl_coef=0.0),
        max_new_tokens,
    )
    return weights[:, 0]  # the same on every token of a sample; token 0 is always in the mask
