"""The RL loop: draw prompts, roll out groups, update, evaluate, log and checkpoint (chapters 10-12)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from stddial_book.core.outdir import checked_path, claim_dir, read_marker, require_owned
from stddial_book.rl.batches import Batch, _decode, bucket_of, encode_prompts
from stddial_book.rl.checkpoints import (
    CHECKPOINT,
    INIT,
    _check_log_matches,
    _config_fingerprint,
    _load_checkpoint,
    _save_checkpoint,
    _State,
    _truncate_metrics,
    checkpoint_dir,
)
from stddial_book.rl.configs import TrainConfig, _require_config, _require_model, _require_problems
from stddial_book.rl.evaluate import EvalResult, evaluate
from stddial_book.rl.model import CharCodec
from stddial_book.rl.rollout import sample
from stddial_book.rl.runlog import RunLog, load_run
from stddial_book.rl.sampling import DynamicSampler, overlong_penalty
from stddial_book.rl.sft import _adamw, _progress
from stddial_book.rl.tasks import Problem
from stddial_book.rl.tasks import rewards as verify
from stddial_book.rl.update import _batch_metrics, _update, peak_memory_mb
from stddial_book.theory.recipes import Recipe, group_advantages

__all__ = ["TrainResult", "train"]


@dataclass
class TrainResult:
    """Where a run ended: steps, samples generated and kept, the final evaluation."""

    steps: int
    samples_generated: int
    samples_kept: int
    updates: int
    final_eval: EvalResult | None
    directory: Path
    stopped_early: bool = False


def _rollout_round(
    model,
    problems: Sequence[Problem],
    config: TrainConfig,
    state: _State,
    codec: CharCodec,
    num_prompts: int | None = None,
    exclude: np.ndarray | None = None,
) -> Batch:
    """One round: draw ``num_prompts`` prompts (default
    ``prompts_per_step``), none of them in ``exclude`` (the prompts a DAPO
    step already drew), sample G completions each, verify, shape rewards."""
    recipe = config.recipe
    device = next(model.parameters()).device
    # train() checked the pool holds it
    wanted = config.prompts_per_step if num_prompts is None else num_prompts
    if exclude is None or len(exclude) == 0:
        rows = state.rng.choice(len(problems), size=wanted, replace=False)
    else:
        # a refill round: distinct prompts within the step, as verl's DAPO
        # batch holds
        available = np.setdiff1d(np.arange(len(problems)), exclude)
        rows = available[state.rng.choice(len(available), size=wanted, replace=False)]
    chosen = [problems[i] for i in rows]
    ids, pmask = encode_prompts(chosen, codec, device)
    out = sample(
        model,
        ids,
        config.max_new_tokens,
        codec.eos_id,
        codec.pad_id,
        prompt_mask=pmask,
        temperature=config.temperature,
        generator=state.gen,
        num_samples=config.group_size,
    )
    repeated = [p for p in chosen for _ in range(config.group_size)]
    correct = verify(_decode(codec, out.completion_ids), repeated)
    shaped = np.where(correct > 0, recipe.reward_correct, recipe.reward_wrong)
    if recipe.overlong_penalty:
        shaped = shaped + overlong_penalty(out.lengths.cpu().numpy(), config.max_new_tokens, config.overlong_cache)
    return Batch(
        out.prompt_ids,
        out.prompt_mask,
        out.completion_ids,
        out.mask,
        out.truncated,
        out.logprobs,
        correct,
        shaped,
        np.array([bucket_of(p) for p in repeated]),
        np.repeat(np.asarray(rows, dtype=np.int64), config.group_size),
    )


def train(
    model,
    train_problems: Sequence[Problem],
    heldout: Sequence[Problem],
    config: TrainConfig,
    out: str | os.PathLike,
    *,
    resume: bool = False,
    stop_after: int | None = None,
    progress: bool = False,
    command: str = "",
    profile: str = "custom",
    codec: CharCodec | None = None,
    extra_provenance: dict[str, Any] | None = None,
) -> TrainResult:
    """Run RL from ``model`` under ``config.recipe`` and write the run log to ``out``.

    The starting weights are saved in ``out/init`` (the reference policy of the KL term, and what
    a resumed run rebuilds it from). ``resume=True`` continues from ``out/checkpoint`` after
    checking that the configuration is the same; ``stop_after`` ends the run early after that
    many steps (to test interruption). Returns a :class:`TrainResult`.
    """
    from safetensors.torch import load_model, save_model

    _require_config(config, TrainConfig)
    _require_model(model)
    train_problems = _require_problems(train_problems, "train_problems", allow_empty=True)
    heldout = _require_problems(heldout, "heldout", allow_empty=True)
    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"out must be a directory path (str or Path); got {type(out).__name__}.")
    codec = codec or CharCodec()
    recipe: Recipe = config.recipe
    directory = checked_path(out)
    if config.eval_every and len(heldout) == 0:
        raise ValueError(
            "train got no held-out problems but eval_every > 0; pass a held-out set or set "
            "eval_every=0 (no evaluation)."
        )
    if config.pool_size is not None and len(train_problems) < config.pool_size:
        raise ValueError(
            f"pool_size is {config.pool_size} but only {len(train_problems)} training problems "
            "were given; pass more problems or a smaller pool_size."
        )
    if len(train_problems) < config.prompts_per_step:
        raise ValueError(
            f"{len(train_problems)} training problems cannot fill a step of prompts_per_step = "
            f"{config.prompts_per_step} distinct prompts; pass more problems or lower prompts_per_step."
        )
    pool = list(train_problems) if config.pool_size is None else list(train_problems[: config.pool_size])
    device = next(model.parameters()).device
    config_dict = config.to_dict()
    if resume:
        directory = require_owned(directory)
    else:
        directory = claim_dir(directory, "train")  # a new, empty or marked directory; anything else refused
    saved_checkpoint = checkpoint_dir(directory)
    if resume and saved_checkpoint is None:
        raise ValueError(f"cannot resume: {directory / CHECKPOINT} holds no checkpoint; run without --resume first.")
    if resume:
        saved = load_run(directory)[0].get("config", {}).get("train")
        if saved is not None and json.loads(json.dumps(saved)) != json.loads(json.dumps(config_dict)):
            raise ValueError(
                f"the run in {directory} was started with a different configuration; resume it with "
                "the same recipe, profile and seed, or write to a new --out directory."
            )
    elif (directory / "metrics.jsonl").exists():
        raise ValueError(f"{directory} already holds a run; pass resume=True (--resume) or choose another --out.")
    run_id = read_marker(directory)["run_id"]
    log = RunLog(
        directory,
        command=command,
        seed=config.seed,
        profile=profile,
        config={"train": config_dict, **(extra_provenance or {})},
        resume=resume,
        device=str(device),
        run_id=run_id,
    )
    fingerprint = _config_fingerprint(config_dict, run_id)
    init = directory / INIT / "model.safetensors"
    if not resume:
        init.parent.mkdir(parents=True, exist_ok=True)
        save_model(model, str(init))
    ref_model = None
    if recipe.kl_coef > 0:
        import copy

        ref_model = copy.deepcopy(model)
        load_model(ref_model, str(init))
        ref_model.eval().requires_grad_(False)

    optimizer = _adamw(model, config.lr)
    state = _State(config.seed, device)
    torch.manual_seed(config.seed)
    if resume:
        _load_checkpoint(saved_checkpoint, model, optimizer, state, fingerprint)
        _check_log_matches(directory, saved_checkpoint, state)
        _truncate_metrics(directory, state.step)
    model.train()
    eval_gen_seed = 1_000_003 * (config.seed + 1)

    def run_eval(step: int) -> EvalResult:
        gen = torch.Generator(device=device).manual_seed(eval_gen_seed + step)
        return evaluate(model, heldout, config.max_new_tokens, config.eval_samples, gen, codec)

    def measure_pool(step: int) -> dict[str, Any]:
        if config.pool_size is None:
            return {}
        from stddial_book.rl.evaluate import model_solve_counts

        counts = model_solve_counts(
            model, pool, config.pool_samples, config.max_new_tokens, seed=eval_gen_seed + 500_009 + step
        )
        model.train()
        return {"pool/k": counts.num_correct.tolist(), "pool/n": config.pool_samples}

    if state.step == 0 and config.eval_every:
        first = run_eval(0)
        log.log(0, {**first.metrics(), **measure_pool(0), "samples/generated": 0, "samples/kept": 0, "updates": 0})
    last_eval: EvalResult | None = None
    bar = _progress(config.sample_budget, f"RL {recipe.name}", progress)
    bar.update(state.samples_generated)
    stopped_early = False
    while state.samples_generated < config.sample_budget:
        if stop_after is not None and state.step >= stop_after:
            stopped_early = True
            break
        t0 = time.perf_counter()
        generated: list[Batch] = []

        def draw(_round: int, num_groups: int | None = None) -> tuple[Batch, np.ndarray]:
            drawn = (
                np.unique(np.concatenate([b.prompt_index for b in generated]))
                if generated
                else np.zeros(0, dtype=np.int64)
            )
            wanted = config.prompts_per_step if num_groups is None else num_groups
            wanted = min(wanted, len(pool) - len(drawn))
            if wanted == 0:  # every pool prompt was drawn this step: the round is empty
                return generated[-1][np.zeros(0, dtype=np.int64)], np.zeros(0)
            batch = _rollout_round(model, pool, config, state, codec, wanted, drawn)
            generated.append(batch)
            return batch, batch.correct

        discarded = {"silent": 0, "surplus": 0}
        if recipe.dynamic_sampling:
            # refill rounds ask for the groups still missing, from new prompts (verl's DAPO)
            sampler = DynamicSampler(config.prompts_per_step, config.group_size, config.max_rounds)
            parts, cost = sampler.fill(draw)
            kept = Batch.cat(parts, codec.pad_id) if parts else None
            rounds, hit_cap = cost.rounds, cost.hit_cap
            discarded = {
                "silent": cost.groups_silent * config.group_size,
                "surplus": cost.groups_surplus * config.group_size,
            }
        else:
            batch, _ = draw(0)
            kept, rounds, hit_cap = batch, 1, False
        num_generated = sum(len(b) for b in generated)
        t1 = time.perf_counter()
        state.step += 1
        state.samples_generated += num_generated
        if kept is not None and len(kept):
            # the overlong filter masks truncated samples out of the loss: out of the group's statistics too
            valid = ~kept.truncated.cpu().numpy() if recipe.overlong_filter else None
            advantages = group_advantages(kept.rewards, config.group_size, recipe, valid=valid)
            metrics = _batch_metrics(generated, kept, advantages, config)
            check = bool(config.identity_check_every) and (state.step - 1) % config.identity_check_every == 0
            metrics.update(_update(model, optimizer, kept, advantages, config, state, ref_model, check))
            state.samples_kept += len(kept)
        else:
            metrics = _batch_metrics(generated, generated[0][np.array([], dtype=int)], np.zeros(0), config)
            metrics["optimizer_steps"] = 0
        t2 = time.perf_counter()
        metrics.update(
            {
                "samples/generated": state.samples_generated,
                "samples/kept": state.samples_kept,
                "samples/discarded": state.samples_generated - state.samples_kept,
                "samples/step_discarded_silent": discarded["silent"],
                "samples/step_discarded_surplus": discarded["surplus"],
                "samples/step_generated": num_generated,
                "updates": state.updates,
                "dynamic_sampling/rounds": rounds,
                "dynamic_sampling/hit_cap": bool(hit_cap),
                "time/generation_s": t1 - t0,
                "time/update_s": t2 - t1,
            }
        )
        done = state.samples_generated >= config.sample_budget
        if config.eval_every and (state.step % config.eval_every == 0 or done):
            last_eval = run_eval(state.step)
            metrics.update(last_eval.metrics())
            metrics.update(measure_pool(state.step))
        log.log(state.step, metrics)
        bar.update(num_generated)
        bar.set_postfix(acc=f"{metrics['accuracy']:.2f}", silent=f"{metrics['frac_reward_zero_std']:.2f}")
        if state.step % config.checkpoint_every == 0 or done:
            _save_checkpoint(directory, model, optimizer, state, fingerprint)
            log.finish()  # the wall time so far, so that a resumed run's total counts this segment
    bar.close()
    if last_eval is None and config.eval_every and state.step > 0 and not stopped_early:
        # a resumed run that had already finished: the final evaluation, as logged (its samples are
        # seeded by the step, so this is the same measurement)
        last_eval = run_eval(state.step)
    log.provenance.update(peak_memory_mb(device))
    log.finish()
    return TrainResult(
        steps=state.step,
        samples_generated=state.samples_generated,
        samples_kept=state.samples_kept,
        updates=state.updates,
        final_eval=last_eval,
        directory=directory,
        stopped_early=stopped_early,
    )
