"""Measuring a model: pass rates on held-out prompts and solve counts on a pool (chapters 9-12)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from stddial_book.core.checks import (
    check_int,
)
from stddial_book.corpora.histograms import SolveCounts
from stddial_book.rl.configs import require_model, require_problems
from stddial_book.rl.model import CharCodec
from stddial_book.rl.policy import CharPolicy, Policy, as_policy
from stddial_book.rl.rollout import sample

__all__ = ["model_solve_counts", "policy_solve_counts", "EvalResult", "evaluate"]


def model_solve_counts(
    model, problems, num_rollouts: int, max_new_tokens: int, seed: int = 0, batch_prompts: int = 64
) -> SolveCounts:
    """The testbed model's own solve counts: k correct of ``num_rollouts`` samples per problem.

    Samples at temperature 1 with :func:`stddial_book.rl.rollout.sample` (each prompt encoded once
    for its samples) and scores with the task's verifier; labels hold each problem's digit and
    carry counts, so curves can be split by difficulty. Fully reproducible for a given seed.

    ``model`` is the testbed's causal LM (its vocabulary :class:`~stddial_book.rl.model.CharCodec`'s);
    ``problems`` is a non-empty list of :class:`~stddial_book.rl.tasks.Problem`; ``max_new_tokens``
    caps each completion, in tokens; ``seed`` seeds the sampling generator (default 0);
    ``batch_prompts`` is how many prompts are sampled together (default 64; memory, not results).
    """
    import torch

    from stddial_book.rl.model import CharCodec
    from stddial_book.rl.rollout import sample
    from stddial_book.rl.tasks import Problem, reward

    num_rollouts = check_int(num_rollouts, "num_rollouts", minimum=1)
    batch_prompts = check_int(batch_prompts, "batch_prompts", minimum=1)
    if isinstance(problems, (str, Problem)) or not isinstance(problems, Sequence):
        raise TypeError(f"problems must be a list of Problem objects; got {type(problems).__name__}.")
    if not problems:
        raise ValueError("problems is empty; pass at least one task problem.")
    wrong = next((q for q in problems if not isinstance(q, Problem)), None)
    if wrong is not None:
        raise TypeError(
            f"problems must hold Problem objects (from tasks.make_problem); found {type(wrong).__name__} {wrong!r:.40}."
        )
    codec = CharCodec()
    device = next(model.parameters()).device  # ids and the generator follow the model (CPU or GPU)
    generator = torch.Generator(device=device).manual_seed(seed)
    counts: list[int] = []
    order = sorted(range(len(problems)), key=lambda i: len(problems[i].prompt))  # equal lengths together
    by_index: dict[int, int] = {}
    for start in range(0, len(order), batch_prompts):
        chunk = order[start : start + batch_prompts]
        lengths = {len(problems[i].prompt) for i in chunk}
        for length in sorted(lengths):
            rows = [i for i in chunk if len(problems[i].prompt) == length]
            ids = torch.tensor([codec.encode(problems[i].prompt) for i in rows], device=device)
            out = sample(
                model, ids, max_new_tokens, codec.eos_id, codec.pad_id, generator=generator, num_samples=num_rollouts
            )
            texts = [codec.decode(row) for row in out.completion_ids.tolist()]  # decode drops the padding
            for j, i in enumerate(rows):
                group = texts[j * num_rollouts : (j + 1) * num_rollouts]
                by_index[i] = int(sum(reward(t, problems[i]) for t in group))
    counts = [by_index[i] for i in range(len(problems))]
    labels = {"digits": np.array([p.digits for p in problems]), "carries": np.array([p.carries for p in problems])}
    return SolveCounts("testbed", np.array(counts, dtype=np.int64), num_rollouts, labels)


@torch.no_grad()
def policy_solve_counts(
    policy: Policy, problems: Sequence, num_rollouts: int, max_new_tokens: int, seed: int = 0, batch_prompts: int = 16
) -> np.ndarray:
    """k correct of ``num_rollouts`` temperature-1 samples for each problem, in order (a pool's measurement).

    The testbed's policy (:class:`~stddial_book.rl.policy.CharPolicy`) gives exactly
    :func:`model_solve_counts`; any other policy samples
    ``batch_prompts`` left-padded prompts at a time, each prompt's samples sharing its KV cache, and
    verifies with its own verifier. Reproducible for a given seed; leaves the model in eval mode.

    ``policy`` is a :class:`~stddial_book.rl.policy.Policy` and ``problems`` its problems;
    ``max_new_tokens`` caps each completion, in tokens; ``seed`` seeds the sampling generator
    (default 0); ``batch_prompts`` (default 16) is not used for a ``CharPolicy``, which samples 64
    prompts at a time."""
    if isinstance(policy, CharPolicy):
        return model_solve_counts(policy.model, problems, num_rollouts, max_new_tokens, seed=seed).num_correct
    num_rollouts = check_int(num_rollouts, "num_rollouts", minimum=1)
    problems = policy.check_problems(problems, "problems")
    model = policy.model
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    counts = np.zeros(len(problems), dtype=np.int64)
    for start in range(0, len(problems), batch_prompts):
        part = problems[start : start + batch_prompts]
        ids, mask = policy.encode(part, device)
        out = sample(
            model, ids, max_new_tokens, policy.eos_id, policy.pad_id, prompt_mask=mask, generator=generator,
            num_samples=num_rollouts,
        )  # fmt: skip
        ok = policy.verify(policy.decode(out.completion_ids), [p for p in part for _ in range(num_rollouts)])
        counts[start : start + len(part)] = ok.reshape(len(part), num_rollouts).sum(axis=1).astype(np.int64)
    return counts


@dataclass
class EvalResult:
    """Held-out accuracy, overall and per bucket, greedy and sampled; per-prompt success counts.

    ``greedy`` and ``sampled`` are the pass rates in [0, 1] of greedy decoding and of temperature-1
    samples (``greedy`` is NaN when greedy decoding was not run); ``greedy_by_bucket`` and
    ``sampled_by_bucket`` are the same per difficulty bucket (the greedy one empty when it was not run);
    ``successes`` holds each prompt's correct samples out of ``num_samples``; ``buckets`` holds each
    prompt's bucket.
    """

    greedy: float
    sampled: float
    greedy_by_bucket: dict[str, float]
    sampled_by_bucket: dict[str, float]
    successes: np.ndarray  # per prompt, correct samples out of ``num_samples``
    num_samples: int
    buckets: np.ndarray

    @property
    def silent_fraction(self) -> float:
        """Share of held-out prompts whose ``num_samples`` samples all agree (0 or all correct)."""
        return float(np.mean((self.successes == 0) | (self.successes == self.num_samples)))

    def metrics(self, prefix: str = "eval/") -> dict[str, float]:
        out = {
            f"{prefix}accuracy_greedy": self.greedy,
            f"{prefix}accuracy_sampled": self.sampled,
            f"{prefix}silent_fraction": self.silent_fraction,
        }
        for b, v in self.greedy_by_bucket.items():
            out[f"{prefix}accuracy_greedy/{b}"] = v
        for b, v in self.sampled_by_bucket.items():
            out[f"{prefix}accuracy_sampled/{b}"] = v
        return out


#: The most sequences :func:`evaluate` samples in one pass (memory stays bounded for any num_samples).
EVAL_ROWS = 16384


def _checked_eval_args(model, problems, max_new_tokens, num_samples, chunk) -> list:
    """Validate :func:`evaluate`'s arguments (at least one problem, counts ≥ 1); returns the
    problems as a list (chapter 9). A :class:`Policy` checks its own problems."""
    if hasattr(problems, "__len__") and len(problems) == 0:
        raise ValueError(
            "evaluate got no problems: an accuracy over zero prompts is undefined; "
            "pass a non-empty held-out set (TaskConfig.num_heldout > 0)."
        )
    if isinstance(model, Policy):
        problems = model.check_problems(problems, "problems")
        require_model(model.model)
    else:
        problems = require_problems(problems, "problems")
        require_model(model)
    for name, value in (("num_samples", num_samples), ("chunk", chunk), ("max_new_tokens", max_new_tokens)):
        if name == "chunk" and value is None:  # the policy's own
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1; got {value!r}.")
    return problems


@torch.no_grad()
def evaluate(
    model,
    problems: Sequence,
    max_new_tokens: int,
    num_samples: int = 8,
    generator: torch.Generator | None = None,
    codec: CharCodec | None = None,
    chunk: int | None = None,
    greedy: bool = True,
) -> EvalResult:
    """Greedy and temperature-1 sampled accuracy on ``problems``, overall and per bucket.

    ``model`` is the testbed's model (``codec`` its codec) or any :class:`~stddial_book.rl.policy.Policy`,
    which prompts, verifies and buckets its own problems. ``chunk`` prompts are sampled in one pass
    (default: the policy's ``eval_chunk``, 256 for the testbed's model). ``max_new_tokens`` caps each
    completion, in tokens; ``num_samples`` is the temperature-1 samples per prompt (default 8);
    ``generator`` is the ``torch.Generator`` they draw from (``None``: torch's global one);
    ``greedy`` (default true) also measures greedy accuracy, which ``False`` skips (it is then NaN).
    The model's train/eval mode is restored afterwards."""
    problems = _checked_eval_args(model, problems, max_new_tokens, num_samples, chunk)
    policy = as_policy(model, codec)
    model = policy.model
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    successes = np.zeros(len(problems), dtype=np.int64)
    greedy_ok = np.zeros(len(problems))
    # at most EVAL_ROWS sequences in one sampling pass, however many samples are asked for
    per_pass = min(num_samples, EVAL_ROWS)
    step = max(1, min(policy.eval_chunk if chunk is None else chunk, EVAL_ROWS // num_samples))
    for start in range(0, len(problems), step):
        part = list(problems[start : start + step])
        ids, mask = policy.encode(part, device)
        for drawn in range(0, num_samples, per_pass):
            n = min(per_pass, num_samples - drawn)
            out = sample(
                model,
                ids,
                max_new_tokens,
                policy.eos_id,
                policy.pad_id,
                prompt_mask=mask,
                generator=generator,
                num_samples=n,
            )
            ok = policy.verify(policy.decode(out.completion_ids), [p for p in part for _ in range(n)])
            successes[start : start + len(part)] += ok.reshape(len(part), n).sum(axis=1).astype(np.int64)
        if greedy:
            out = sample(model, ids, max_new_tokens, policy.eos_id, policy.pad_id, prompt_mask=mask, greedy=True)
            greedy_ok[start : start + len(part)] = policy.verify(policy.decode(out.completion_ids), part)
    model.train(was_training)
    buckets = np.array([policy.bucket(p) for p in problems])
    rate = successes / num_samples
    names = sorted(set(buckets.tolist()))
    return EvalResult(
        greedy=float(greedy_ok.mean()) if greedy else float("nan"),
        sampled=float(rate.mean()),
        greedy_by_bucket={b: float(greedy_ok[buckets == b].mean()) for b in names} if greedy else {},
        sampled_by_bucket={b: float(rate[buckets == b].mean()) for b in names},
        successes=successes,
        num_samples=num_samples,
        buckets=buckets,
    )
