"""What a profile's training runs cost: counted work, measured overhead, estimated time.

The appendix page "This edition" reports how long each chapter took to execute in the build (CPU,
measured) and, for the ``full`` profile that no author has run, how long its runs should take on a
GPU. That second number cannot be measured without a GPU, so it is an estimate built from two parts:

* the **work** of a run, counted from its configuration: samples generated (rollouts, held-out
  evaluations, pool measurements) and samples trained on, each costing about 2·N floating-point
  operations per token in a forward pass and 6·N in a forward and backward pass, for a model of N
  parameters (the usual transformer accounting; attention's own quadratic term is negligible at
  these sequence lengths of about 20 tokens);
* the **overhead** of each pass, the Python and dispatch time spent per forward (and backward) pass
  whatever the batch size, *measured* on the machine that builds the book with a two-row batch.
  On a GPU the host still issues every kernel, so this time stays; the arithmetic moves to the GPU.

A pass is then estimated to take ``max(overhead, work / throughput)``. The same accounting with
this machine's measured throughput predicts the build's own CPU runs, whose wall time is logged;
:func:`check_on_cpu` compares the two, so the page shows how far the accounting can be trusted.
The one number not measured is the GPU's sustained throughput (:data:`GPU_ASSUMPTION`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

from stddial_book.core.checks import check_int, check_number, to_numpy

__all__ = [
    "GPU_ASSUMPTION",
    "RunWork",
    "run_work",
    "sft_work",
    "parameter_count",
    "skeleton_config",
    "measure_overheads",
    "measure_cpu_throughput",
    "estimate_seconds",
    "check_on_cpu",
    "full_profile_estimates",
]

#: The GPU a Colab reader gets on the free tier, an NVIDIA T4: 8.1 TFLOP/s peak in float32 (NVIDIA's
#: T4 datasheet), of which a small model's passes are assumed to sustain 30 %: an assumption, stated
#: on the page, not a measurement.
GPU_ASSUMPTION = {"name": "NVIDIA T4 (Colab free tier)", "peak_flops": 8.1e12, "utilisation": 0.30}


@dataclass(frozen=True)
class RunWork:
    """Counted work of one run: passes and the samples they process, split by kind.

    ``generate_passes``/``generate_tokens``: sampling forward passes (one per generated token
    position of a batch) and the tokens they process; ``train_passes``/``train_tokens``: forward
    and backward passes and their tokens; ``forward_passes``/``forward_tokens``: forward-only
    passes without sampling (the KL reference model's log-probs).
    """

    generate_passes: int
    generate_tokens: int
    train_passes: int
    train_tokens: int
    forward_passes: int = 0
    forward_tokens: int = 0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = check_int(
                getattr(self, f.name),
                f"RunWork.{f.name}",
                minimum=0,
                hint="It counts passes or tokens (run_work and sft_work count them for a profile).",
            )
            object.__setattr__(self, f.name, value)

    def flops(self, num_params: int) -> float:
        """2·N per forward token, 6·N per trained token."""
        num_params = _check_num_params(num_params)
        return 2.0 * num_params * (self.generate_tokens + self.forward_tokens) + 6.0 * num_params * self.train_tokens

    def __add__(self, other: RunWork) -> RunWork:
        if not isinstance(other, RunWork):
            return NotImplemented
        return RunWork(*(a + b for a, b in zip(_fields(self), _fields(other))))


#: Most repetitions / rows a measurement takes: beyond, a typo (10**30) would run for ever.
_MAX_REPEATS = 10_000
_MAX_ROWS = 1 << 16


def _check_num_params(num_params: Any) -> int:
    return check_int(
        num_params, "num_params", minimum=1, hint="It is N, the model's parameter count (parameter_count(profile))."
    )


def _check_profile(profile: Any, *sections: str) -> Any:
    """``profile`` after checking it is a :class:`~stddial_book.rl.profiles.Profile` whose named sections build
    valid configurations (the same checks a run of it would make)."""
    from stddial_book.rl.profiles import Profile

    if not isinstance(profile, Profile):
        raise TypeError(
            f"profile must be a stddial_book.rl.profiles.Profile (e.g. PROFILES['quick']); got "
            f"{type(profile).__name__}."
        )
    for section in sections:
        values = getattr(profile, section)
        if not isinstance(values, dict):
            raise TypeError(f"profile.{section} must be a dict of settings; got {type(values).__name__}.")
        missing = [key for key in _NEEDED[section] if key not in values]
        if missing:
            raise ValueError(
                f"profile.{section} of profile {profile.name!r} lacks {', '.join(map(repr, missing))}; "
                "start from a profile of stddial_book.rl.profiles.PROFILES and change what differs."
            )
    if "task" in sections:
        profile.task_config()  # TaskConfig refuses bad digit counts and pool sizes, naming the field
    if "train" in sections:
        profile.train_config("grpo")  # TrainConfig refuses a bad group size, budget, schedule, ...
    if "sft" in sections:
        profile.sft_config()
    return profile


#: The settings each section of a profile needs for the accounting.
_NEEDED = {
    "task": ("digits", "num_heldout"),
    "train": ("prompts_per_step", "group_size", "sample_budget", "num_minibatches", "max_new_tokens", "eval_samples"),
    "sft": ("max_steps", "batch_size", "eval_every", "eval_prompts", "eval_samples"),
    "model": (),
}


def _check_overheads(overheads: Any) -> dict[str, float]:
    """Seconds per pass as :func:`measure_overheads` returns them: finite and non-negative."""
    if not isinstance(overheads, dict):
        raise TypeError(
            f"overheads must be the dict measure_overheads(profile) returns ({{'generate_s': ..., "
            f"'train_s': ...}}); got {type(overheads).__name__}."
        )
    out = {}
    for key in ("generate_s", "train_s"):
        if key not in overheads:
            raise ValueError(f"overheads lacks {key!r}; pass what measure_overheads(profile) returns.")
        value = check_number(overheads[key], f"overheads[{key!r}]", hint="Seconds per pass, from measure_overheads.")
        if value < 0:
            raise ValueError(
                f"overheads[{key!r}] must be >= 0 seconds per pass; got {value!r}. Pass what "
                "measure_overheads(profile) returns."
            )
        out[key] = value
    return out


def _check_throughput(throughput: Any) -> float:
    value = check_number(throughput, "throughput", hint="It is FLOP/s, e.g. measure_cpu_throughput(profile).")
    if not value > 0:
        raise ValueError(
            f"throughput must be a positive number of FLOP/s (e.g. measure_cpu_throughput(profile) or "
            f"GPU_ASSUMPTION's peak × utilisation); got {throughput!r}."
        )
    return value


def _fields(work: RunWork) -> tuple[int, ...]:
    return (
        work.generate_passes,
        work.generate_tokens,
        work.train_passes,
        work.train_tokens,
        work.forward_passes,
        work.forward_tokens,
    )


def _lengths(profile) -> tuple[int, int]:
    """Prompt and completion length in tokens at the profile's largest digit count (an upper bound)."""
    from stddial_book.rl.model import CharCodec
    from stddial_book.rl.tasks import make_problem

    digits = (
        max(profile.task["digits"]) if isinstance(profile.task["digits"], (tuple, list)) else profile.task["digits"]
    )
    largest = 10**digits - 1
    problem = make_problem(largest, largest, digits)
    codec = CharCodec()
    return len(codec.encode(problem.prompt)), int(profile.train["max_new_tokens"])


def _generation(num_sequences: int, prompt_len: int, new_tokens: int, chunk: int | None = None) -> RunWork:
    """Sampling ``num_sequences`` completions: one prompt pass and ``new_tokens - 1`` cached passes per
    chunk (every completion taken to the cap: an upper bound)."""
    chunks = 1 if chunk is None else math.ceil(num_sequences / chunk)
    return RunWork(
        generate_passes=chunks * new_tokens,
        generate_tokens=num_sequences * (prompt_len + new_tokens - 1),
        train_passes=0,
        train_tokens=0,
    )


def run_work(profile, recipe) -> RunWork:
    """Work of one RL run of ``profile`` with ``recipe`` (chapters 10-12): rollouts, minibatch
    updates, the KL reference passes (when the recipe has a KL penalty), held-out evaluations and
    pool measurements, each completion taken to the cap. The in-update identity check (a few groups
    every ``identity_check_every`` steps) is left out, and DAPO's refill rounds are counted as one
    rollout of the step's size (the samples are the same, the passes a little more)."""
    from stddial_book.theory.recipes import as_recipe

    profile = _check_profile(profile, "task", "train")
    recipe = as_recipe(recipe)
    t = profile.train
    prompt_len, new_tokens = _lengths(profile)
    per_step = t["prompts_per_step"] * t["group_size"]
    steps = math.ceil(t["sample_budget"] / per_step)
    seq = prompt_len + new_tokens
    step = _generation(per_step, prompt_len, new_tokens) + RunWork(0, 0, t["num_minibatches"], per_step * seq)
    if recipe.kl_coef > 0:
        step = step + RunWork(0, 0, 0, 0, t["num_minibatches"], per_step * seq)
    work = RunWork(*(steps * x for x in _fields(step)))
    evals = (steps // t["eval_every"] + 1) if t.get("eval_every") else 0
    heldout = profile.task["num_heldout"]
    per_eval = _generation(heldout * t["eval_samples"], prompt_len, new_tokens, chunk=256) + _generation(
        heldout, prompt_len, new_tokens, chunk=256
    )  # sampled and greedy accuracy
    if t.get("pool_size"):
        per_eval = per_eval + _generation(t["pool_size"] * t["pool_samples"], prompt_len, new_tokens, chunk=256)
    return work + RunWork(*(evals * x for x in _fields(per_eval)))


def sft_work(profile) -> RunWork:
    """Work of the profile's SFT warm start (chapter 9) if it runs to ``max_steps``: an upper bound,
    since it stops once the held-out pass rate reaches its target. ``profile`` is a
    :class:`~stddial_book.rl.profiles.Profile`."""
    profile = _check_profile(profile, "task", "train", "sft")
    s = profile.sft
    prompt_len, new_tokens = _lengths(profile)
    steps = s["max_steps"]
    work = RunWork(0, 0, steps, steps * s["batch_size"] * (prompt_len + new_tokens))
    evals = steps // s["eval_every"] + 1
    probe = _generation(s["eval_prompts"] * s["eval_samples"], prompt_len, new_tokens, chunk=256)
    return work + RunWork(*(evals * x for x in _fields(probe)))


def parameter_count(profile) -> int:
    """Parameters of the profile's model (built on the CPU from ``profile.model``).
    ``profile`` is a :class:`~stddial_book.rl.profiles.Profile`."""
    from stddial_book.rl.model import tiny_model

    profile = _check_profile(profile, "model")
    return sum(p.numel() for p in tiny_model(**profile.model).parameters())


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def skeleton_config(profile) -> dict[str, int]:
    """The profile's model with the same layers, heads, vocabulary and parameter tensors but a width of
    two per head: it dispatches the same operations per pass as the real one, with almost no arithmetic.
    ``profile`` is a :class:`~stddial_book.rl.profiles.Profile`; the result is keyword arguments for
    :func:`~stddial_book.rl.model.tiny_model`."""
    profile = _check_profile(profile, "model")
    heads = check_int(profile.model.get("num_heads"), "profile.model['num_heads']", minimum=1)
    return dict(profile.model, hidden_size=2 * heads, intermediate_size=4 * heads)


def measure_overheads(profile, repeats: int = 15) -> dict[str, float]:
    """Seconds per pass that do not shrink with the batch, measured here on the profile's skeleton
    (:func:`skeleton_config`) with a two-row batch: a cached sampling pass (one new token,
    softmax and a draw) and a training pass (forward over prompt and completion, log-probs of the
    taken tokens, backward, AdamW step). ``profile`` is a :class:`~stddial_book.rl.profiles.Profile`;
    ``repeats`` is how many times each pass is timed (the median is kept; 1 to 10,000, default 15).
    Returns ``{"generate_s": ..., "train_s": ...}``, seconds per pass."""
    import torch
    from transformers import DynamicCache

    from stddial_book.rl.model import tiny_model

    profile = _check_profile(profile, "task", "train", "model")
    repeats = check_int(repeats, "repeats", minimum=1)
    if repeats > _MAX_REPEATS:
        raise ValueError(
            f"repeats={repeats} would time the passes for ever; pass at most {_MAX_REPEATS} (15 is plenty)."
        )
    torch.manual_seed(0)
    model = tiny_model(**skeleton_config(profile))
    prompt_len, new_tokens = _lengths(profile)
    ids = torch.randint(0, model.config.vocab_size, (2, prompt_len + new_tokens), device=model.device)
    gen = torch.Generator(device=model.device).manual_seed(0)

    def sampling_pass() -> None:
        with torch.no_grad():
            cache = DynamicCache()
            out = model(input_ids=ids[:, :prompt_len], past_key_values=cache, use_cache=True)
            nxt = ids[:, prompt_len : prompt_len + 1]
            for _ in range(4):
                out = model(input_ids=nxt, past_key_values=out.past_key_values, use_cache=True)
                probs = torch.softmax(out.logits[:, -1].float(), dim=-1)
                nxt = torch.multinomial(probs, 1, generator=gen)

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)

    def training_pass() -> None:
        logits = model(input_ids=ids).logits[:, prompt_len - 1 : -1].float()
        logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, prompt_len:, None]).squeeze(-1)
        optimizer.zero_grad(set_to_none=True)
        (-logp.mean()).backward()
        optimizer.step()

    sampling_pass(), training_pass()  # warm-up
    # sampling_pass makes one prompt pass and four cached passes; the cached ones dominate
    return {"generate_s": _median_time(sampling_pass, repeats) / 5, "train_s": _median_time(training_pass, repeats)}


def measure_cpu_throughput(profile, rows: int = 256, repeats: int = 3) -> float:
    """FLOP/s of a training pass of the profile's model on this machine at a batch of ``rows``
    sequences, counted as 6·N per token. ``profile`` is a :class:`~stddial_book.rl.profiles.Profile`;
    ``rows`` is at most 65,536 (default 256); ``repeats`` is how many times the pass is timed (the
    median is kept; default 3)."""
    import torch

    from stddial_book.rl.model import tiny_model

    profile = _check_profile(profile, "task", "train", "model")
    rows = check_int(rows, "rows", minimum=1)
    repeats = check_int(repeats, "repeats", minimum=1)
    if rows > _MAX_ROWS or repeats > _MAX_REPEATS:
        raise ValueError(
            f"rows={rows} and repeats={repeats} must stay at most {_MAX_ROWS} and {_MAX_REPEATS} (a "
            "larger batch measures nothing new and may not fit in memory); the defaults are 256 and 3."
        )
    torch.manual_seed(0)
    model = tiny_model(**profile.model)
    prompt_len, new_tokens = _lengths(profile)
    ids = torch.randint(0, model.config.vocab_size, (rows, prompt_len + new_tokens), device=model.device)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(input_ids=ids).logits.float().logsumexp(-1).mean().backward()

    step()
    seconds = _median_time(step, repeats)
    return 6.0 * parameter_count(profile) * ids.numel() / seconds


def estimate_seconds(work: RunWork, num_params: int, overheads: dict[str, float], throughput: float) -> float:
    """``work``'s time when each pass takes the larger of its overhead and its arithmetic at
    ``throughput`` FLOP/s (the work of a kind spread evenly over its passes). ``num_params`` is N, the
    model's parameter count (:func:`parameter_count`); ``overheads`` holds the seconds per pass
    :func:`measure_overheads` returns. Returns seconds."""
    if not isinstance(work, RunWork):
        raise TypeError(
            f"work must be a RunWork (run_work(profile, recipe) or sft_work(profile)); got {type(work).__name__}."
        )
    num_params = _check_num_params(num_params)
    overheads = _check_overheads(overheads)
    throughput = _check_throughput(throughput)
    total = 0.0
    kinds = (
        (work.generate_passes, work.generate_tokens, 2.0, overheads["generate_s"]),
        (work.forward_passes, work.forward_tokens, 2.0, overheads["generate_s"]),
        (work.train_passes, work.train_tokens, 6.0, overheads["train_s"]),
    )
    for passes, tokens, flops_per_token, overhead in kinds:
        if passes:
            arithmetic = flops_per_token * num_params * tokens / passes / throughput
            total += passes * max(overhead, arithmetic)
    return total


def check_on_cpu(
    profile, recipe, measured_run_seconds: list[float], overheads: dict[str, float], throughput: float
) -> dict[str, float]:
    """The accounting's prediction of one run of ``profile`` with ``recipe`` on this CPU against
    measured wall times of such runs (``measured_run_seconds``, one per seed; their median).
    ``overheads`` holds the seconds per pass :func:`measure_overheads` returns and ``throughput`` this
    CPU's FLOP/s (:func:`measure_cpu_throughput`). Returns ``predicted_s``, ``measured_s`` and their
    ``ratio`` (measured over predicted)."""
    import numpy as np

    seconds = np.atleast_1d(to_numpy(measured_run_seconds, "measured_run_seconds"))  # one run: a number is fine
    if seconds.ndim != 1 or np.any(seconds <= 0):
        raise ValueError(
            f"measured_run_seconds must be a list of positive wall times in seconds, one per seed; got "
            f"{np.asarray(seconds).tolist()!r:.80}."
        )
    overheads, throughput = _check_overheads(overheads), _check_throughput(throughput)
    predicted = estimate_seconds(run_work(profile, recipe), parameter_count(profile), overheads, throughput)
    measured = float(np.median(seconds))  # the median: a resumed run logs only its last part
    if not predicted > 0:
        raise ValueError("the accounting predicts no work for this profile (zero passes); check its train settings.")
    return {"predicted_s": predicted, "measured_s": measured, "ratio": measured / predicted}


def full_profile_estimates(overheads: dict[str, float]) -> dict[str, Any]:
    """Estimated GPU seconds of the ``full`` profile's runs, per chapter that trains: chapter 9's SFT
    (an upper bound, run to ``max_steps``) and, for chapters 10-12, every seed of its recipe.
    ``overheads`` holds the seconds per pass :func:`measure_overheads` returns (measured on this
    machine: the host's cost per pass stays on a GPU); the throughput is :data:`GPU_ASSUMPTION`'s."""
    from stddial_book.rl.profiles import PROFILES

    overheads = _check_overheads(overheads)
    full = PROFILES["full"]
    n = parameter_count(full)
    throughput = GPU_ASSUMPTION["peak_flops"] * GPU_ASSUMPTION["utilisation"]
    seeds = len(full.seeds)
    chapters = {"09_testbed": estimate_seconds(sft_work(full), n, overheads, throughput)}
    for chapter, recipe in (("10_grpo_run", "grpo"), ("11_dr_grpo_run", "dr_grpo"), ("12_dapo_run", "dapo")):
        chapters[chapter] = seeds * estimate_seconds(run_work(full, recipe), n, overheads, throughput)
    return {"num_params": n, "seeds": seeds, "throughput": throughput, "chapters": chapters}
