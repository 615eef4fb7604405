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

from stddial_book.core.outdir import checked_path, claim_dir, read_marker, replace_own, require_owned
from stddial_book.rl.allocation import allocate, record_allocation
from stddial_book.rl.batches import Batch, GroupLayout, group_sizes_of
from stddial_book.rl.checkpoints import (
    CHECKPOINT,
    INIT,
    TrainState,
    check_log_matches,
    checkpoint_dir,
    config_fingerprint,
    load_checkpoint,
    save_checkpoint,
    truncate_metrics,
)
from stddial_book.rl.configs import TrainConfig, require_config, require_model, require_problems
from stddial_book.rl.evaluate import EvalResult, evaluate, policy_solve_counts
from stddial_book.rl.model import CharCodec
from stddial_book.rl.policy import Policy, as_policy
from stddial_book.rl.pool_state import new_pool_state
from stddial_book.rl.rollout import sample
from stddial_book.rl.runlog import RunLog, load_run
from stddial_book.rl.sampling import DynamicSampler, kept_rows, overlong_penalty, rows_by_prompt
from stddial_book.rl.sft import progress_bar
from stddial_book.rl.update import batch_metrics, build_optimizer, peak_memory_mb, update_policy
from stddial_book.theory.recipes import Recipe, group_advantages

__all__ = ["TrainResult", "train"]


@dataclass
class TrainResult:
    """Where a run ended: steps, samples generated and kept, the final evaluation.

    ``steps`` is the RL steps taken; ``samples_generated`` and ``samples_kept`` count the samples
    drawn (discarded ones included) and those that reached an update; ``updates`` counts optimizer
    steps; ``final_eval`` is the last held-out :class:`~stddial_book.rl.evaluate.EvalResult`
    (``None`` when nothing was evaluated); ``directory`` is the run directory; ``stopped_early`` is
    true when ``stop_after`` ended the run before its sample budget (default false).
    """

    steps: int
    samples_generated: int
    samples_kept: int
    updates: int
    final_eval: EvalResult | None
    directory: Path
    stopped_early: bool = False


def _rollout_round(
    model,
    problems: Sequence[Any],
    config: TrainConfig,
    state: TrainState,
    codec: CharCodec | Policy,
    num_prompts: int | None = None,
    exclude: np.ndarray | None = None,
    group_sizes: np.ndarray | None = None,
    rows: np.ndarray | None = None,
) -> Batch:
    """One round: draw ``num_prompts`` prompts (default
    ``prompts_per_step``), none of them in ``exclude`` (the prompts a DAPO
    step already drew), sample G completions each, verify, shape rewards.
    ``group_sizes`` (one G per problem) gives each prompt its own G;
    ``rows`` names the prompts instead of drawing them (an allocation
    rule's choice, Part V). ``codec``: the policy (or the testbed's codec)."""
    policy = as_policy(model, codec)
    recipe = config.recipe
    device = next(model.parameters()).device
    # train() checked the pool holds it
    wanted = config.prompts_per_step if num_prompts is None else num_prompts
    if rows is None and (exclude is None or len(exclude) == 0):
        rows = state.rng.choice(len(problems), size=wanted, replace=False)
    elif rows is None:
        # a refill round: distinct prompts within the step, as verl's DAPO batch holds
        available = np.setdiff1d(np.arange(len(problems)), exclude)
        rows = available[state.rng.choice(len(available), size=wanted, replace=False)]
    chosen = [problems[i] for i in rows]
    counts = config.group_size if group_sizes is None else [int(group_sizes[i]) for i in rows]
    ids, pmask = policy.encode(chosen, device)
    out = sample(
        model,
        ids,
        config.max_new_tokens,
        policy.eos_id,
        policy.pad_id,
        prompt_mask=pmask,
        temperature=config.temperature,
        generator=state.gen,
        num_samples=counts,
    )
    repeats = np.broadcast_to(counts, len(rows))
    repeated = [p for p, n in zip(chosen, repeats) for _ in range(n)]
    correct = policy.verify(policy.decode(out.completion_ids), repeated)
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
        np.array([policy.bucket(p) for p in repeated]),
        np.repeat(np.asarray(rows, dtype=np.int64), repeats),
    )


def _checked_arguments(model, train_problems, heldout, config: TrainConfig, out) -> tuple[list, list, Path]:
    """Validate :func:`train`'s arguments; returns both problem lists and the output path.

    ``model`` is the testbed's torch module or a :class:`Policy`, which checks its own problems. The
    pool must fill a step with ``prompts_per_step`` distinct prompts, and evaluation needs held-out
    problems (chapter 10)."""
    require_config(config, TrainConfig)
    require_model(model.model if isinstance(model, Policy) else model)
    check = model.check_problems if isinstance(model, Policy) else require_problems
    train_problems = check(train_problems, "train_problems", allow_empty=True)
    heldout = check(heldout, "heldout", allow_empty=True)
    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"out must be a directory path (str or Path); got {type(out).__name__}.")
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
    _check_allocation_pool(config, len(train_problems) if config.pool_size is None else config.pool_size)
    if len(train_problems) < config.prompts_per_step:
        raise ValueError(
            f"{len(train_problems)} training problems cannot fill a step of prompts_per_step = "
            f"{config.prompts_per_step} distinct prompts; pass more problems or lower prompts_per_step."
        )
    return train_problems, heldout, directory


def _check_allocation_pool(config: TrainConfig, pool: int) -> None:
    """An allocation rule's pool-sized settings fit the pool: candidates and oracle pass rates."""
    if config.allocation_candidates is not None and config.allocation_candidates > pool:
        raise ValueError(
            f"allocation_candidates ({config.allocation_candidates}) exceeds the pool of {pool} prompts; lower it."
        )
    rates = dict(config.allocation_options).get("solve_rates")
    if rates is not None and len(rates) != pool:
        raise ValueError(
            f"allocation_options['solve_rates'] holds {len(rates)} pass rates for a pool of {pool} prompts."
        )


def _run_directory(
    directory: Path, config_dict: dict[str, Any], resume: bool, described: dict[str, Any] | None = None
) -> tuple[Path, Path | None]:
    """Claim ``directory`` for a new run, or check that a resumed one holds a checkpoint of the
    same configuration; returns the directory and its saved checkpoint (``None`` if there is none;
    chapter 10)."""
    if resume:
        directory = require_owned(directory, kind="train")
    else:
        directory = claim_dir(directory, "train")  # a new, empty or marked directory; anything else refused
    saved_checkpoint = checkpoint_dir(directory)
    if resume and saved_checkpoint is None:
        raise ValueError(f"cannot resume: {directory / CHECKPOINT} holds no checkpoint; run without --resume first.")
    if resume:
        recorded = load_run(directory)[0].get("config", {})
        saved = recorded.get("train")
        if saved is not None and json.loads(json.dumps(saved)) != json.loads(json.dumps(config_dict)):
            raise ValueError(
                f"the run in {directory} was started with a different configuration; resume it with "
                "the same recipe, profile and seed, or write to a new --out directory."
            )
        if saved is not None and json.loads(json.dumps(recorded.get("policy"))) != json.loads(json.dumps(described)):
            raise ValueError(
                f"the run in {directory} was started with another policy (model, LoRA or prompt); resume it "
                "with the same policy, or write to a new --out directory."
            )
    elif (directory / "metrics.jsonl").exists():
        raise ValueError(f"{directory} already holds a run; pass resume=True (--resume) or choose another --out.")
    return directory, saved_checkpoint


def _reference_policy(policy: Policy, directory: Path, recipe: Recipe, resume: bool):
    """Save the starting weights in ``directory/init`` (a new run; a LoRA policy's adapters) and, when
    the recipe has a KL term (β > 0), return a frozen π_ref at them for the k3 estimator (chapter 2):
    a copy of the testbed's model, or a Hugging Face policy with its adapters off."""
    init = directory / INIT / "model.safetensors"
    if not resume:  # never through a link planted at init/ (stddial_book.core.outdir)
        replace_own(directory, f"{INIT}/model.safetensors", policy.save_weights)
    if not recipe.kl_coef > 0:
        return None
    return policy.reference(init)


@dataclass
class _Measurements:
    """The run's two measurements, each seeded by the step so a resumed run repeats them: the
    held-out pass rates (:func:`evaluate`) and, with a pool, each pool prompt's solve count k of n
    (chapters 9-13)."""

    policy: Policy
    heldout: list[Any]
    pool: list[Any]
    config: TrainConfig
    device: torch.device

    @property
    def seed(self) -> int:
        return 1_000_003 * (self.config.seed + 1)

    def held_out(self, step: int) -> EvalResult:
        gen = torch.Generator(device=self.device).manual_seed(self.seed + step)
        return evaluate(self.policy, self.heldout, self.config.max_new_tokens, self.config.eval_samples, gen)

    def solve_counts(self, step: int) -> dict[str, Any]:
        """``pool/k`` (correct of ``pool/n`` samples, per pool prompt); empty without a pool."""
        config = self.config
        if config.pool_size is None:
            return {}
        counts = policy_solve_counts(
            self.policy, self.pool, config.pool_samples, config.max_new_tokens, seed=self.seed + 500_009 + step
        )
        self.policy.model.train()
        return {"pool/k": counts.tolist(), "pool/n": config.pool_samples}


def _generate(model, pool: list[Any], config: TrainConfig, state: TrainState, policy: Policy, group_sizes=None):
    """The rollouts of one step: a round of ``prompts_per_step`` groups, or with dynamic sampling
    refill rounds of new prompts until that many non-silent groups are kept (chapter 12).
    ``group_sizes`` (one G per pool prompt) gives each prompt its own G.

    Returns every batch generated, the kept batch (``None`` when nothing was kept), the rounds,
    whether the round cap was hit, and the samples discarded as silent and as surplus."""
    generated: list[Batch] = []

    def draw(_round: int, num_groups: int | None = None) -> tuple:
        drawn = (
            np.unique(np.concatenate([b.prompt_index for b in generated])) if generated else np.zeros(0, dtype=np.int64)
        )
        wanted = config.prompts_per_step if num_groups is None else num_groups
        wanted = min(wanted, len(pool) - len(drawn))
        if wanted == 0:  # every pool prompt was drawn this step: the round is empty
            return generated[-1][np.zeros(0, dtype=np.int64)], np.zeros(0)
        batch = _rollout_round(model, pool, config, state, policy, wanted, drawn, group_sizes)
        generated.append(batch)
        if group_sizes is not None:
            return batch, batch.correct, group_sizes_of(batch.prompt_index)
        return batch, batch.correct

    discarded = {"silent": 0, "surplus": 0}
    if config.recipe.dynamic_sampling:
        # refill rounds ask for the groups still missing, from new prompts (verl's DAPO)
        sampler = DynamicSampler(config.prompts_per_step, config.group_size, config.max_rounds)
        parts, cost = sampler.fill(draw)
        kept = Batch.cat(parts, policy.pad_id) if parts else None
        rounds, hit_cap = cost.rounds, cost.hit_cap
        discarded = {"silent": cost.samples_silent, "surplus": cost.samples_surplus}
    else:
        batch = draw(0)[0]
        kept, rounds, hit_cap = batch, 1, False
    return generated, kept, rounds, hit_cap, discarded


def _allocated(model, pool: list[Any], config: TrainConfig, state: TrainState, policy: Policy):
    """The rollouts of one step under an allocation rule (Part V): the rule reads the pool history
    ``state.pool_state`` and calls ``draw`` (groups sampled from the model, on the shared prompt
    cache) within ``config.step_budget`` samples; every draw is then recorded in the history.

    Returns, as :func:`_generate` does, the generated samples (one batch, each prompt's draws
    merged into one group), the kept groups (``None`` if none), the rounds, whether a batch-filling
    rule fell short, and the samples discarded; then the step's allocation metrics."""
    drawn: list[Batch] = []

    def draw(ids: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        per_prompt = np.zeros(len(pool), dtype=np.int64)
        per_prompt[ids] = sizes
        batch = _rollout_round(model, pool, config, state, policy, len(ids), None, per_prompt, rows=ids)
        drawn.append(batch)
        return np.add.reduceat(batch.correct, np.cumsum(sizes) - sizes).astype(np.int64)

    rule, candidates = config.allocation_rule(), None
    if config.allocation_candidates is not None:
        candidates = np.sort(state.rng.choice(len(pool), size=config.allocation_candidates, replace=False))
    result = allocate(rule, state.pool_state, config.step_budget, draw, state.rng, candidates)
    if not drawn:
        raise RuntimeError(
            f"allocation rule {config.allocation!r} drew no sample at step {state.step + 1} (budget "
            f"{config.step_budget}); raise allocation_budget or allocation_candidates, or change its options."
        )
    record_allocation(state.pool_state, result)
    allgen = Batch.cat(drawn, policy.pad_id) if len(drawn) > 1 else drawn[0]
    merged = allgen[rows_by_prompt(allgen.prompt_index)]
    rows = kept_rows(merged.prompt_index, merged.correct, result.prompts, result.group_sizes, result.num_correct)
    kept = merged[rows] if len(rows) else None
    limit = getattr(rule, "batch_prompts", None)
    sizes, counts = np.unique(result.group_sizes, return_counts=True)
    metrics = {
        "allocation/rule": config.allocation,
        "allocation/step_budget": config.step_budget,
        "allocation/prompts_drawn": int(np.unique(result.drawn_prompts).size),
        "allocation/groups_by_size": {int(g): int(c) for g, c in zip(sizes, counts)},
        "samples/step_kept": result.kept,
    }
    discarded = {"silent": result.discarded_silent, "surplus": result.discarded_surplus}
    return [merged], kept, result.rounds, limit is not None and len(result.prompts) < limit, discarded, metrics


def _learn(
    model,
    optimizer,
    generated: list[Batch],
    kept: Batch | None,
    config: TrainConfig,
    state: TrainState,
    ref_model,
    ragged,
):
    """The update on the kept batch: group advantages A_i = (r_i − mean)/σ as the recipe scales
    them (chapter 2), then :func:`update_policy`; returns the step's batch and loss metrics. With
    ``ragged`` each group's size is read from the rows of its prompt."""
    recipe = config.recipe
    sizes = group_sizes_of(kept.prompt_index) if ragged and kept is not None else None
    layout = GroupLayout.of(config.group_size if sizes is None else sizes)
    if kept is not None and len(kept):
        # the overlong filter masks truncated samples out of the loss: out of the group's statistics too
        valid = ~kept.truncated.cpu().numpy() if recipe.overlong_filter else None
        advantages = group_advantages(kept.rewards, layout.group_size, recipe, valid=valid)
        metrics = batch_metrics(generated, kept, advantages, config, layout)
        check = bool(config.identity_check_every) and (state.step - 1) % config.identity_check_every == 0
        metrics.update(update_policy(model, optimizer, kept, advantages, config, state, ref_model, check, sizes))
        state.samples_kept += len(kept)
    else:
        empty = generated[0][np.array([], dtype=int)]
        metrics = batch_metrics(generated, empty, np.zeros(0), config, GroupLayout(sizes=()) if ragged else None)
        metrics["optimizer_steps"] = 0
    return metrics


def _train_step(
    model, optimizer, pool: list[Any], config: TrainConfig, state: TrainState, codec, ref_model, group_sizes=None
):
    """One step of the loop: generate, count, update; returns its metrics and samples generated
    (chapter 10). ``codec`` is the policy (or the testbed's :class:`CharCodec`, :func:`as_policy`);
    ``group_sizes`` (one G per pool prompt) gives each prompt its own G."""
    t0 = time.perf_counter()
    policy = as_policy(model, codec)
    allocated: dict[str, Any] = {}
    if config.allocation == "uniform":
        generated, kept, rounds, hit_cap, discarded = _generate(model, pool, config, state, policy, group_sizes)
    else:
        generated, kept, rounds, hit_cap, discarded, allocated = _allocated(model, pool, config, state, policy)
    num_generated = sum(len(b) for b in generated)
    t1 = time.perf_counter()
    state.step += 1
    state.samples_generated += num_generated
    ragged = group_sizes is not None or bool(allocated)
    metrics = _learn(model, optimizer, generated, kept, config, state, ref_model, ragged)
    metrics.update(allocated)
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
    return metrics, num_generated


@dataclass
class _Run:
    """The working parts of one run: the policy, its optimizer and frozen reference, the counters
    and random states, the prompt pool, and the log and directory it writes."""

    policy: Policy
    optimizer: torch.optim.Optimizer
    ref_model: Any
    state: TrainState
    pool: list[Any]
    config: TrainConfig
    log: RunLog
    directory: Path
    fingerprint: str


def _run_steps(run: _Run, measure: _Measurements, stop_after: int | None, progress: bool):
    """Steps until ``sample_budget`` samples are generated (or ``stop_after`` steps are done), each
    logged, evaluated every ``eval_every`` steps and checkpointed every ``checkpoint_every`` (both
    at the end too). Returns the last evaluation (``None`` if none ran) and whether it stopped early
    (chapter 10)."""
    config, state = run.config, run.state
    last_eval: EvalResult | None = None
    bar = progress_bar(config.sample_budget, f"RL {config.recipe.name}", progress)
    bar.update(state.samples_generated)
    stopped_early = False
    while state.samples_generated < config.sample_budget:
        if stop_after is not None and state.step >= stop_after:
            stopped_early = True
            break
        metrics, num_generated = _train_step(
            run.policy.model, run.optimizer, run.pool, config, state, run.policy, run.ref_model
        )
        done = state.samples_generated >= config.sample_budget
        if config.eval_every and (_evaluation_due(config, state.step, state.samples_generated, num_generated) or done):
            last_eval = measure.held_out(state.step)
            metrics.update(last_eval.metrics())
            metrics.update(measure.solve_counts(state.step))
        run.log.log(state.step, metrics)
        bar.update(num_generated)
        bar.set_postfix(acc=f"{metrics['accuracy']:.2f}", silent=f"{metrics['frac_reward_zero_std']:.2f}")
        if state.step % config.checkpoint_every == 0 or done:
            save_checkpoint(run.directory, run.policy, run.optimizer, state, run.fingerprint)
            run.log.finish()  # the wall time so far, so that a resumed run's total counts this segment
    bar.close()
    return last_eval, stopped_early


def _evaluation_due(config: TrainConfig, step: int, generated: int, just_generated: int) -> bool:
    """Whether the step that just ended is an evaluation step of the schedule: every ``eval_every`` steps, or
    with ``eval_every_samples`` the first step after each multiple of that many generated samples (the samples
    before the step were ``generated - just_generated``)."""
    if config.eval_every_samples:
        return generated // config.eval_every_samples > (generated - just_generated) // config.eval_every_samples
    return step % config.eval_every == 0


def _start(
    policy: Policy,
    config: TrainConfig,
    directory: Path,
    pool: list[Any],
    resume: bool,
    log_fields: dict[str, Any],
    extra_provenance: dict[str, Any] | None,
) -> _Run:
    """Open a run: claim ``directory`` (or check the one resumed), start its log (``log_fields``:
    command and profile), save the starting weights, freeze π_ref, build the optimizer and seed
    the counters; a resumed run then restores its checkpoint and cuts its log back to it (chapter 10).
    A policy that describes itself (:meth:`Policy.describe`) is recorded beside the settings and is
    part of the checkpoints' fingerprint; the testbed's model adds nothing, as before."""
    model = policy.model
    device = next(model.parameters()).device
    config_dict, described = config.to_dict(), policy.describe()
    identity = config_dict if described is None else {**config_dict, "policy": described}
    directory, saved_checkpoint = _run_directory(directory, config_dict, resume, described)
    run_id = read_marker(directory)["run_id"]
    recorded = {"train": config_dict} if described is None else {"train": config_dict, "policy": described}
    log = RunLog(
        directory,
        **log_fields,
        seed=config.seed,
        config={**recorded, **(extra_provenance or {})},
        resume=resume,
        device=str(device),
        run_id=run_id,
    )
    fingerprint = config_fingerprint(identity, run_id)
    ref_model = _reference_policy(policy, directory, config.recipe, resume)
    optimizer = build_optimizer(model, config)
    state = TrainState(config.seed, device)
    if config.allocation != "uniform":  # what the rule knows of each pool prompt (checkpointed)
        state.pool_state = new_pool_state(len(pool), **config.pool_estimator())
    torch.manual_seed(config.seed)
    if resume:
        load_checkpoint(saved_checkpoint, policy, optimizer, state, fingerprint)
        check_log_matches(directory, saved_checkpoint, state)
        truncate_metrics(directory, state.step)
    return _Run(policy, optimizer, ref_model, state, pool, config, log, directory, fingerprint)


def train(
    model,
    train_problems: Sequence[Any],
    heldout: Sequence[Any],
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

    ``model`` is the testbed's model (a torch module; ``codec`` its character codec, by default
    :class:`~stddial_book.rl.model.CharCodec`), prompting :class:`~stddial_book.rl.tasks.Problem` objects, or any
    :class:`~stddial_book.rl.policy.Policy`, such as a Hugging Face causal LM with LoRA adapters
    (:func:`stddial_book.rl.hf_policy.hf_policy`) prompting
    :class:`~stddial_book.rl.text_tasks.TextProblem` objects: every recipe, allocation rule and DAPO's
    refill run on either. The starting weights are saved in ``out/init`` (the reference policy of
    the KL term, and what a resumed run rebuilds it from). ``resume=True`` continues from
    ``out/checkpoint`` after checking that the configuration is the same; ``stop_after`` ends the
    run early after that many steps (to test interruption). Returns a :class:`TrainResult`.

    ``train_problems`` are the training problems (the pool is the first ``config.pool_size`` of them,
    or all); ``heldout`` the held-out problems evaluated every ``config.eval_every`` steps; ``config``
    the run's :class:`~stddial_book.rl.configs.TrainConfig`. ``resume`` defaults to false (a new run);
    ``progress`` shows a progress bar; ``command`` (the command line, default empty) and ``profile``
    (the profile's name, default ``"custom"``) are recorded in the run's provenance, and
    ``extra_provenance`` (a dict; ``None``: nothing) is added to the settings recorded there.
    """
    train_problems, heldout, directory = _checked_arguments(model, train_problems, heldout, config, out)
    policy = as_policy(model, codec)
    model = policy.model
    pool = list(train_problems) if config.pool_size is None else list(train_problems[: config.pool_size])
    device = next(model.parameters()).device
    log_fields = {"command": command, "profile": profile}
    run = _start(policy, config, directory, pool, resume, log_fields, extra_provenance)
    state, log = run.state, run.log
    model.train()
    measure = _Measurements(policy, heldout, pool, config, device)
    if state.step == 0 and config.eval_every:
        first = {**measure.held_out(0).metrics(), **measure.solve_counts(0)}
        log.log(0, {**first, "samples/generated": 0, "samples/kept": 0, "updates": 0})
    last_eval, stopped_early = _run_steps(run, measure, stop_after, progress)
    if last_eval is None and config.eval_every and state.step > 0 and not stopped_early:
        # a resumed run that had already finished: the final evaluation, as logged (its samples are
        # seeded by the step, so this is the same measurement)
        last_eval = measure.held_out(state.step)
    log.provenance.update(peak_memory_mb(device))
    log.finish()
    return TrainResult(
        steps=state.step,
        samples_generated=state.samples_generated,
        samples_kept=state.samples_kept,
        updates=state.updates,
        final_eval=last_eval,
        directory=run.directory,
        stopped_early=stopped_early,
    )
