"""The SFT warm start: supervised training until the held-out pass rate reaches a target (chapter 9)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from stddial_book.rl.configs import SFTConfig, require_config, require_model, require_problems
from stddial_book.rl.evaluate import EvalResult, evaluate
from stddial_book.rl.model import CharCodec
from stddial_book.rl.rollout import position_ids_of
from stddial_book.rl.runlog import RunLog
from stddial_book.rl.tasks import Problem

__all__ = ["SFTResult", "sft"]


@dataclass
class SFTResult:
    """How the warm start ended.

    ``reached`` says whether the stopping rule fired (``stop_estimate``, the probe's estimate at
    that step, crossed the target) before ``max_steps``; ``pass_rate`` is the held-out pass rate
    measured afterwards with fresh samples, an unbiased estimate of where RL starts.
    ``steps`` is the optimizer steps taken, ``wall_time_s`` the seconds SFT took (the final
    measurement included), ``history`` one record per probe (``step`` and the logged metrics, such
    as ``sft/loss`` and ``sft/pass_rate``).
    """

    steps: int
    pass_rate: float
    reached: bool
    wall_time_s: float
    history: list[dict[str, float]] = field(default_factory=list)
    stop_estimate: float = float("nan")


def adamw_optimizer(model, lr: float) -> torch.optim.AdamW:
    """AdamW at ``lr``, no weight decay, for the trainers here, over ``model``'s parameters (or the list
    of parameters given); its fused kernel (one pass over all parameters instead of a dozen per
    tensor) where this torch has one for the model's device (CPU since torch 2.4). The update is
    the same to float rounding."""
    params = list(model.parameters()) if isinstance(model, torch.nn.Module) else list(model)
    try:
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.0, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.0)


def _sft_batch(problems: Sequence[Problem], codec: CharCodec, device) -> tuple[torch.Tensor, ...]:
    """Left-padded prompt + answer + EOS ids, attention mask and the answer-token loss mask."""
    rows = [(codec.encode(p.prompt), codec.encode(p.answer) + [codec.eos_id]) for p in problems]
    width = max(len(a) + len(b) for a, b in rows)
    ids = torch.full((len(rows), width), codec.pad_id, dtype=torch.long)  # cpu-then-move
    attn = torch.zeros((len(rows), width), dtype=torch.bool)  # cpu-then-move
    target = torch.zeros((len(rows), width), dtype=torch.bool)  # cpu-then-move
    for r, (a, b) in enumerate(rows):
        seq = a + b
        ids[r, width - len(seq) :] = torch.tensor(seq)  # cpu-then-move
        attn[r, width - len(seq) :] = True
        target[r, width - len(b) :] = True
    return ids.to(device), attn.to(device), target.to(device)


def _checked_problems(train_problems, heldout, config) -> tuple[list[Problem], list[Problem]]:
    """Validate :func:`sft`'s problems and config; both problem lists must be non-empty, since
    the stopping rule is measured on the held-out one (chapter 9)."""
    train_problems = require_problems(train_problems, "train_problems", allow_empty=True)
    heldout = require_problems(heldout, "heldout", allow_empty=True)
    if len(train_problems) == 0:
        raise ValueError("sft got no training problems; pass a non-empty list (TaskConfig.num_train > 0).")
    if len(heldout) == 0:
        raise ValueError(
            "sft got no held-out problems, so its stopping rule (the held-out pass rate) "
            "cannot be measured; pass a non-empty held-out set."
        )
    require_config(config, SFTConfig)
    return train_problems, heldout


def _sft_step(model, optimizer, problems: Sequence[Problem], codec: CharCodec, device) -> torch.Tensor:
    """One optimizer step on the mean cross-entropy −log π(answer token | prompt, earlier answer
    tokens) over the answer tokens and EOS of ``problems``; returns that loss (chapter 9)."""
    ids, attn, target = _sft_batch(problems, codec, device)
    # the last column (EOS) is only a target, so it is not fed in
    inputs, seen = ids[:, :-1], attn[:, :-1]
    logits = model(input_ids=inputs, attention_mask=seen.long(), position_ids=position_ids_of(seen)).logits
    logp = torch.log_softmax(logits.float(), dim=-1)
    nll = -logp.gather(2, ids[:, 1:, None]).squeeze(2)
    loss = (nll * target[:, 1:]).sum() / target[:, 1:].sum()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss


def _sft_record(loss: torch.Tensor, result: EvalResult, start: float) -> dict[str, float]:
    """What a probe logs: the last step's loss, the probe's pass rate and silent fraction, and
    the seconds since SFT started (chapter 9)."""
    return {
        "sft/loss": float(loss.detach()),
        "sft/pass_rate": result.sampled,
        "sft/silent_fraction": result.silent_fraction,
        "time/elapsed_s": time.perf_counter() - start,
    }


def sft(
    model,
    train_problems: Sequence[Problem],
    heldout: Sequence[Problem],
    config: SFTConfig = SFTConfig(),
    *,
    max_new_tokens: int = 8,
    log: RunLog | None = None,
    progress: bool = False,
    codec: CharCodec | None = None,
) -> SFTResult:
    """Supervised warm start until the held-out sampled pass rate reaches the target (chapter 9).

    The loss is the mean cross-entropy of the answer tokens (the reversed digits and EOS) given
    the prompt. Every ``eval_every`` steps the pass rate is measured on the first
    ``eval_prompts`` held-out problems with ``eval_samples`` samples each; training stops as
    soon as it reaches ``config.target_pass_rate``.

    ``model`` is the testbed's causal LM, trained in place; ``train_problems`` and ``heldout`` are
    non-empty lists of :class:`~stddial_book.rl.tasks.Problem` (the probe uses the first
    ``eval_prompts`` held-out ones, the final measurement all of them); ``config`` is the
    :class:`~stddial_book.rl.configs.SFTConfig` (default: its defaults); ``max_new_tokens`` caps the
    evaluation samples, in tokens (default 8); ``log`` is a :class:`~stddial_book.rl.runlog.RunLog`
    that receives each probe's record (``None``: no log); ``progress`` shows a progress bar; ``codec``
    is the tokenizer (``None``: a fresh :class:`~stddial_book.rl.model.CharCodec`).
    """
    train_problems, heldout = _checked_problems(train_problems, heldout, config)
    codec = codec or CharCodec()
    device = require_model(model)
    rng = np.random.default_rng(config.seed)
    gen = torch.Generator(device=device).manual_seed(config.seed)
    optimizer = adamw_optimizer(model, config.lr)
    probe = list(heldout[: config.eval_prompts])
    start = time.perf_counter()
    history: list[dict[str, float]] = []
    bar = progress_bar(config.max_steps, "SFT", progress)
    pass_rate, step = 0.0, 0
    model.train()
    for step in range(1, config.max_steps + 1):
        rows = rng.choice(len(train_problems), size=min(config.batch_size, len(train_problems)), replace=False)
        loss = _sft_step(model, optimizer, [train_problems[i] for i in rows], codec, device)
        bar.update(1)
        if step % config.eval_every == 0 or step == config.max_steps:
            result = evaluate(model, probe, max_new_tokens, config.eval_samples, gen, codec, greedy=False)
            pass_rate = result.sampled
            record = _sft_record(loss, result, start)
            history.append({"step": step, **record})
            if log is not None:
                log.log(step, record)
            bar.set_postfix(loss=f"{float(loss.detach()):.3f}", pass_rate=f"{pass_rate:.2f}")
            if pass_rate >= config.target_pass_rate:
                break
    bar.close()
    # the crossing estimate is the maximum of many noisy ones: measure again, independently
    check = torch.Generator(device=device).manual_seed(config.seed + 104_729)
    final = evaluate(model, heldout, max_new_tokens, config.final_eval_samples, check, codec, greedy=False)
    model.eval()
    return SFTResult(
        steps=step,
        pass_rate=final.sampled,
        reached=pass_rate >= config.target_pass_rate,
        wall_time_s=time.perf_counter() - start,
        history=history,
        stop_estimate=pass_rate,
    )


def progress_bar(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, dynamic_ncols=True)
