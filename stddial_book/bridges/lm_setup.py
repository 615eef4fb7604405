"""The settings of a GRPO run on a real language model (chapter 15): sizes, precision, memory, time and processes.

One :class:`LMRunConfig` holds everything that differs between the run a reader records on a GPU
(:func:`colab_t4_config`: Qwen2.5-0.5B-Instruct on GSM8K, Cobbe et al., 2021) and the run the book
executes on its CPU build (:func:`tiny_config`: a small random-init Qwen2 model on a local dataset of
GSM8K's schema, :mod:`stddial_book.bridges.lm_data`). The code that trains is the same.

Launched with several processes (``torchrun --nproc_per_node N`` or ``accelerate launch --num_processes N``),
the run is data-parallel: every process trains it together (TRL's DDP), one optimizer step is the same
P·G completions split over the processes. :func:`process_layout` reads where this process stands,
:func:`start_processes` joins the launch's process group before anything else happens, :func:`on_main`
runs a piece of work (checking or writing folders) on the main process only and hands its result, or its
refusal, to every process, and :func:`end_processes` leaves the group once the run is done.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stddial_book.bridges.lm_data import SYSTEM_PROMPT
from stddial_book.core.checks import check_int

__all__ = [
    "DEFAULT_MODEL_ID",
    "DEFAULT_DATASET_ID",
    "T4",
    "LMRunConfig",
    "colab_t4_config",
    "tiny_config",
    "smollm2_config",
    "precision_for",
    "detect_precision",
    "run_precision",
    "memory_estimate_gib",
    "time_estimate",
    "process_layout",
    "start_processes",
    "end_processes",
    "accept_numbered_cpu_locations",
    "on_main",
    "gather_from_processes",
]

DEFAULT_MODEL_ID = "Qwen/Qwen2.5-0.5B-Instruct"
DEFAULT_DATASET_ID = "openai/gsm8k"

#: What :func:`time_estimate` assumes of a free Colab T4 (16 GB). ``peak_fp16_flops``: NVIDIA's T4 datasheet
#: (65 TFLOPS mixed precision); ``achieved_fraction``: an assumed share of that peak in the training passes
#: of a small model; ``decode_step_s``: an assumed time of one decode step of a 24-layer model under
#: ``transformers``' ``generate`` with LoRA adapters (launch-bound, nearly flat in the batch up to a few
#: dozen sequences). Assumptions, not measurements: chapter 15 says so.
T4: dict[str, float] = {
    "memory_gib": 15.0,
    "peak_fp16_flops": 65e12,
    "achieved_fraction": 0.25,
    "decode_step_s": 0.045,
}


@dataclass(frozen=True)
class LMRunConfig:
    """One GRPO run on a language model with TRL and LoRA (chapter 15).

    ``model_id`` is a hub id, a local directory (:func:`~stddial_book.bridges.lm_data.build_tiny_model`) or
    ``"smollm2"``; ``dataset_id`` a hub id (GSM8K's schema) or a local ``.jsonl`` file of question/answer rows;
    ``dataset_config`` and ``split`` the hub dataset's configuration and split. ``num_prompts`` is how many of
    the dataset's questions the run draws from (the first ones; None: all).

    ``group_size`` is G, completions per question (TRL's ``num_generations``, at least 2); ``prompts_per_step``
    P, questions per optimizer step (one generation batch of P·G completions per step); ``micro_batch_size``
    the completions per forward/backward pass over all processes (TRL's ``per_device_train_batch_size`` times
    the processes, the rest of the step accumulated; it must divide P·G). ``max_new_tokens`` is L_max, the
    generation cap (``max_completion_length``); ``max_steps`` the optimizer steps. ``learning_rate`` is AdamW's
    constant learning rate (of the LoRA adapters). ``lora_r`` and ``lora_alpha`` are LoRA's rank and scale
    (Hu et al., 2021; peft's ``r`` and ``lora_alpha``), on every linear layer. ``format_weight`` is the weight
    of the format reward in the sum TRL normalises (its entry in ``reward_weights``; 0: logged only, so the
    reward the advantage sees stays two-valued and the identity holds exactly). ``activation_checkpointing``
    recomputes activations in the backward pass (saves memory on a T4; ``GRPOConfig``'s setting of that
    name). ``temperature`` is the sampling temperature; ``seed`` the run's seed (TRL's ``seed`` and
    ``data_seed``).

    ``system_prompt`` is the chat's system message before every question (GSM8K's asks for a ``\\boxed{}``
    answer; the arithmetic pool's, :data:`~stddial_book.bridges.lm_pool.ANSWER_PROMPT`, for just the number).
    ``eval_file`` is a local ``.jsonl`` of held-out questions (GSM8K's schema) measured before and after
    training (None: none); ``eval_samples`` the completions per held-out question, and per training question
    when the pool is measured; ``measure_pool`` also measures every training question before and after
    training (which stayed silent). ``dtype`` is ``"float32"`` to train and sample in float32 on any device;
    None for the device's own (:func:`precision_for`: bf16 on recent GPUs). SmolLM2's runs use float32
    everywhere: on an H200 its bf16 run's first GRPO update was NaN, and float32 costs a model this small
    nothing. ``verifier`` is how the reward checks an answer (:data:`~stddial_book.bridges.lm_rewards.VERIFIERS`):
    ``math-verify`` (a boxed or last expression, as mathematics: GSM8K's run) or ``last-number`` (the last
    number written; math-verify would also accept a restated ``23 + 45``).

    The defaults are the GPU run's (:func:`colab_t4_config`).
    """

    model_id: str = DEFAULT_MODEL_ID
    dataset_id: str = DEFAULT_DATASET_ID
    dataset_config: str | None = "main"
    split: str = "train"
    num_prompts: int | None = 2000
    group_size: int = 8
    prompts_per_step: int = 8
    micro_batch_size: int = 4
    max_new_tokens: int = 256
    max_steps: int = 110
    learning_rate: float = 1e-5
    lora_r: int = 16
    lora_alpha: int = 32
    format_weight: float = 0.0
    activation_checkpointing: bool = True
    temperature: float = 1.0
    seed: int = 0
    system_prompt: str = SYSTEM_PROMPT
    eval_file: str | None = None
    eval_samples: int = 16
    measure_pool: bool = False
    dtype: str | None = None
    verifier: str = "math-verify"

    def __post_init__(self) -> None:
        for name in (
            "group_size",
            "prompts_per_step",
            "micro_batch_size",
            "max_new_tokens",
            "max_steps",
            "eval_samples",
        ):
            check_int(getattr(self, name), name, minimum=2 if name == "group_size" else 1)
        if (self.prompts_per_step * self.group_size) % self.micro_batch_size:
            raise ValueError(
                f"micro_batch_size={self.micro_batch_size} must divide the {self.prompts_per_step * self.group_size} "
                "completions of a step (prompts_per_step · group_size)."
            )
        if self.verifier not in ("math-verify", "last-number"):
            raise ValueError(f"verifier must be 'math-verify' or 'last-number'; got {self.verifier!r}.")
        if self.dtype not in (None, "float32"):
            raise ValueError(f"dtype must be None (the device's) or 'float32'; got {self.dtype!r}.")
        if not isinstance(self.system_prompt, str):
            raise ValueError(f"system_prompt must be text; got {self.system_prompt!r}.")
        for name in ("learning_rate", "temperature"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (math.isfinite(value) and value > 0)
            ):
                raise ValueError(f"{name} must be a finite number > 0; got {value!r}.")
        if not (math.isfinite(self.format_weight) and self.format_weight >= 0):
            raise ValueError(f"format_weight must be a finite number >= 0; got {self.format_weight!r}.")

    def replace(self, **changes: Any) -> LMRunConfig:
        """A copy with ``changes`` (checked again)."""
        return dataclasses.replace(self, **changes)


def colab_t4_config(**changes: Any) -> LMRunConfig:
    """The GPU run: Qwen2.5-0.5B-Instruct on GSM8K's train split, sized for about half an hour a recipe on a
    free Colab T4 (:func:`time_estimate`); ``changes`` override any field."""
    return LMRunConfig().replace(**changes)


def tiny_config(model_dir: str, data_file: str, **changes: Any) -> LMRunConfig:
    """The CPU run of the book's build and tests: the same code on a tiny local model and dataset, two steps.

    ``model_dir`` is the tiny model's directory (:func:`~stddial_book.bridges.lm_data.build_tiny_model`),
    ``data_file`` a local ``.jsonl`` of GSM8K's schema (:func:`~stddial_book.bridges.lm_data.write_tiny_gsm8k`);
    ``changes`` override any field."""
    tiny = LMRunConfig(
        model_id=str(model_dir),
        dataset_id=str(data_file),
        dataset_config=None,
        num_prompts=None,
        group_size=4,
        prompts_per_step=4,
        micro_batch_size=16,
        max_new_tokens=12,
        max_steps=2,
        learning_rate=1e-3,
        lora_r=4,
        lora_alpha=8,
        activation_checkpointing=False,
    )
    return tiny.replace(**changes)


def smollm2_config(model_dir: str, data_file: str, **changes: Any) -> LMRunConfig:
    """SmolLM2-135M-Instruct (Q4_1, dequantized; :func:`~stddial_book.bridges.smollm2.smollm2_model_dir`) on the
    graded arithmetic pool (:mod:`~stddial_book.bridges.lm_pool`): answer with just the number, completions
    capped at 24 tokens, LoRA r 16 / alpha 32 on every linear layer, 8 questions × G = 8 a step, the sizes a
    CPU pilot found to learn within minutes; ``changes`` override any field (the learning rate comes from
    the recorded pilot). ``model_dir`` is ``"smollm2"`` or a local model directory; ``data_file`` a local
    ``.jsonl`` of the pool (:func:`~stddial_book.bridges.lm_pool.write_pool`) or any file of GSM8K's schema."""
    from stddial_book.bridges.lm_pool import ANSWER_PROMPT

    small = LMRunConfig(
        model_id=str(model_dir),
        dataset_id=str(data_file),
        dataset_config=None,
        num_prompts=None,
        group_size=8,
        prompts_per_step=8,
        micro_batch_size=16,
        max_new_tokens=24,
        max_steps=40,
        learning_rate=3e-4,
        lora_r=16,
        lora_alpha=32,
        activation_checkpointing=False,
        system_prompt=ANSWER_PROMPT,
        dtype="float32",
        verifier="last-number",
    )
    return small.replace(**changes)


def precision_for(device_type: str, capability: tuple[int, int] | None = None) -> dict[str, Any]:
    """The dtype a run uses on a device: bf16 on CUDA GPUs of compute capability 8.0 or newer (Ampere on), fp16
    on older CUDA GPUs (a T4 is 7.5), fp32 elsewhere (CPU, Apple's MPS). The model's weights are loaded in that
    dtype, the LoRA adapters stay fp32 and the Trainer's mixed precision is switched on to match.

    ``device_type`` is a ``torch`` device type (``"cuda"``, ``"cpu"``, ``"mps"``); ``capability`` the CUDA
    GPU's compute capability ``(major, minor)``, required for ``"cuda"`` and ignored otherwise. Returns
    ``{"device", "dtype", "bf16", "fp16"}`` with ``dtype`` a ``torch`` dtype name; ``bf16`` and ``fp16`` are
    ``GRPOConfig``'s mixed-precision settings.
    """
    if device_type != "cuda":
        return {"device": device_type, "dtype": "float32", "bf16": False, "fp16": False}
    if capability is None or len(capability) != 2:
        raise ValueError(f"a CUDA device needs its compute capability (major, minor); got {capability!r}.")
    if tuple(capability) >= (8, 0):
        return {"device": "cuda", "dtype": "bfloat16", "bf16": True, "fp16": False}
    return {"device": "cuda", "dtype": "float16", "bf16": False, "fp16": True}


def run_precision(precision: dict[str, Any], dtype: str | None) -> dict[str, Any]:
    """``precision`` (:func:`precision_for`) with its dtype replaced by ``dtype`` when one is given (float32:
    no mixed precision)."""
    if dtype is None:
        return precision
    return {"device": precision["device"], "dtype": dtype, "bf16": False, "fp16": False}


def detect_precision() -> dict[str, Any]:
    """:func:`precision_for` this machine's first accelerator (CUDA, then MPS, else the CPU)."""
    import torch

    if torch.cuda.is_available():
        return precision_for("cuda", torch.cuda.get_device_capability(0))
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return precision_for("mps")
    return precision_for("cpu")


def memory_estimate_gib(
    config: LMRunConfig, model_config: Any, num_params: int, dtype_bytes: int, prompt_tokens: int = 160
) -> dict[str, float]:
    """An estimate (GiB) of the accelerator memory the run needs at its peak, by part.

    ``weights``: the parameters in the run's dtype. ``lora``: the adapters in fp32 with their gradients and
    AdamW's two moments (16 bytes each). ``logits``: one micro-batch's completion logits over the vocabulary,
    counted three times (the logits, their float32 log-softmax and its gradient). ``activations``: one hidden
    state per layer and token of a micro-batch (with activation checkpointing; ×12 without).
    ``kv_cache``: the keys and values of the whole generation batch at full length. A rough sum: allocator
    slack and the CUDA context (about a GiB) come on top.

    ``config`` is the :class:`LMRunConfig` (its sizes, ``lora_r`` and ``activation_checkpointing``);
    ``model_config`` the model's ``transformers`` config (layers, widths, heads, vocabulary); ``num_params``
    the model's parameter count; ``dtype_bytes`` the bytes of one value in the run's dtype (2 for bf16 or
    fp16, 4 for float32); ``prompt_tokens`` the assumed prompt length in tokens (default 160).
    """
    layers = model_config.num_hidden_layers
    hidden = model_config.hidden_size
    heads = model_config.num_attention_heads
    kv_heads = getattr(model_config, "num_key_value_heads", heads) or heads
    head_dim = getattr(model_config, "head_dim", None) or hidden // heads
    seq = prompt_tokens + config.max_new_tokens
    micro = config.micro_batch_size
    # every linear layer: r·(inputs + outputs) each; attention's four counted as hidden→hidden (an upper bound)
    lora_params = config.lora_r * layers * (8 * hidden + 3 * (hidden + model_config.intermediate_size))
    activations = layers * micro * seq * hidden * dtype_bytes * (1 if config.activation_checkpointing else 12)
    kv_cache = config.prompts_per_step * config.group_size * seq * layers * 2 * kv_heads * head_dim * dtype_bytes
    gib = 2.0**30
    parts = {
        "weights": num_params * dtype_bytes / gib,
        "lora": lora_params * 16 / gib,
        "logits": micro * (config.max_new_tokens + 1) * model_config.vocab_size * (dtype_bytes + 8) / gib,
        "activations": activations / gib,
        "kv_cache": kv_cache / gib,
    }
    parts["total"] = sum(parts.values())
    return parts


def time_estimate(
    config: LMRunConfig, num_params: int, prompt_tokens: int = 160, device: dict[str, float] | None = None
) -> dict[str, float]:
    """An estimate of one run's wall time on a device described as :data:`T4` is (the default).

    Per optimizer step: generation, L_max decode steps of ``decode_step_s`` each (every batch runs until its
    longest completion; the cap bounds it); training, 6·N FLOPs per token (forward, the backward to the
    activations, and the forward again under activation checkpointing; LoRA leaves the frozen weights
    without gradients) over the step's P·G·(prompt + L_max) tokens at ``achieved_fraction`` of the peak.
    Returns seconds per step, the parts, and minutes for the run. An estimate from a formula, not a
    measurement.

    ``config`` is the :class:`LMRunConfig` (its sizes and ``max_steps``; without activation checkpointing
    4·N FLOPs per token); ``num_params`` N, the model's parameter count; ``prompt_tokens`` the assumed prompt
    length in tokens (default 160); ``device`` a dict with the keys of :data:`T4` (None: :data:`T4`).
    """
    device = dict(T4 if device is None else device)
    tokens = config.prompts_per_step * config.group_size * (prompt_tokens + config.max_new_tokens)
    generate_s = config.max_new_tokens * device["decode_step_s"]
    passes = 6 if config.activation_checkpointing else 4
    train_s = passes * num_params * tokens / (device["peak_fp16_flops"] * device["achieved_fraction"])
    step_s = generate_s + train_s
    return {
        "tokens_per_step": float(tokens),
        "generate_s": generate_s,
        "train_s": train_s,
        "step_s": step_s,
        "minutes": step_s * config.max_steps / 60.0,
    }


def process_layout() -> dict[str, int]:
    """This process's place in a launch: ``world_size`` (processes), ``rank`` (0 is the main process) and
    ``local_rank`` (its GPU on its machine), from the variables ``torchrun`` and ``accelerate launch`` set
    (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``); 1, 0, 0 for a plain ``python`` run."""

    def read(name: str, default: int) -> int:
        text = os.environ.get(name, "").strip()
        return int(text) if text.isdigit() else default

    return {"world_size": max(read("WORLD_SIZE", 1), 1), "rank": read("RANK", 0), "local_rank": read("LOCAL_RANK", 0)}


def start_processes(cpu: bool) -> bool:
    """Join the launch's process group (gloo with ``cpu``, else NCCL on this process's GPU) when the run was
    launched with several processes and no group exists yet; True when this call started it (its caller ends
    it with ``torch.distributed.destroy_process_group``). TRL's Trainer later adopts the same group."""
    import torch
    import torch.distributed as dist

    if process_layout()["world_size"] < 2:
        return False
    if cpu:
        accept_numbered_cpu_locations()
    if dist.is_initialized():
        return False
    if not cpu:
        torch.cuda.set_device(process_layout()["local_rank"])
    dist.init_process_group(backend="gloo" if cpu else "nccl")
    return True


def end_processes(finished: bool) -> None:
    """Leave the process group :func:`start_processes` joined. With ``finished`` (every process completed the
    run, so every one reaches this call), the processes first wait for each other (a barrier, whose own work
    holds no tensor); while they wait, the group's worker threads release the last collective's tensors.
    Without it, a process could leave while a worker thread of the gloo group still held them: the worker then
    released them during the interpreter's shutdown, and the process ended on "terminate called without an active
    exception" (SIGABRT) after writing a whole run (3 of 58 two-process CPU runs of the tests' tiny model; the
    crash is described in pytorch/pytorch PR 179291). After a failure the group is only destroyed: the other
    processes may never reach a barrier."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    if finished and dist.get_world_size() > 1:
        dist.barrier()
    dist.destroy_process_group()


_CPU_INDEXED = re.compile(r"cpu:\d+")
_cpu_locations_accepted = False


def accept_numbered_cpu_locations() -> None:
    """Let ``torch.load`` take ``map_location="cpu:0"`` (any ``cpu:N``) as the CPU. Under several CPU
    processes, accelerate gives each process the device ``cpu:0``, and transformers before 4.57 loads a
    checkpoint's optimizer state with ``map_location=args.device`` when it resumes; torch knows only the
    location ``cpu``, so the resume ended in "don't know how to restore data location ... (tagged with
    cpu:0)". Registered once per process through torch's public ``register_package``; nothing else changes
    (a numbered CPU location is the one CPU)."""
    global _cpu_locations_accepted
    if _cpu_locations_accepted:
        return
    import torch

    def tag(_storage: Any) -> None:
        return None  # saving is untouched: storages keep torch's own tags

    def restore(storage: Any, location: str) -> Any:
        return storage.cpu() if _CPU_INDEXED.fullmatch(location) else None

    torch.serialization.register_package(100, tag, restore)
    _cpu_locations_accepted = True


def _several() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def on_main(work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``work(*args, **kwargs)`` on the main process only, the others waiting; every process returns its
    result, or raises the exception it raised (the same type and message: a refusal ends every process with
    the same line). On a single process, just the call. The result must pickle (it is broadcast).
    ``work`` is any callable; ``args`` and ``kwargs`` are its positional and keyword arguments."""
    if not _several():
        return work(*args, **kwargs)
    import torch.distributed as dist

    box: list[Any] = [None]
    if dist.get_rank() == 0:
        try:
            box[0] = ("ok", work(*args, **kwargs))
        except Exception as err:
            box[0] = ("error", _portable(err))
            dist.broadcast_object_list(box, src=0)
            raise
    dist.broadcast_object_list(box, src=0)
    outcome, value = box[0]
    if outcome == "error":
        raise value
    return value


def _portable(err: Exception) -> Exception:
    """``err`` if it survives pickling as it is, else a RuntimeError of the same message."""
    import pickle

    try:
        copy = pickle.loads(pickle.dumps(err))
    except Exception:
        return RuntimeError(str(err))
    return copy if type(copy) is type(err) and str(copy) == str(err) else RuntimeError(str(err))


def gather_from_processes(value: Any) -> list[Any]:
    """Every process's ``value`` (picklable), in rank order, on every process; ``[value]`` on a single one."""
    if not _several():
        return [value]
    import torch.distributed as dist

    found: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(found, value)
    return found
