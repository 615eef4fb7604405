"""Recorded language-model runs (chapter 15): ``python -m stddial_book record-lm``.

The chapter-15 run (:func:`~stddial_book.bridges.lm_run.run_lm`'s code: TRL's ``GRPOTrainer``, LoRA,
``math-verify`` rewards, the dial's callback) once per recipe and seed, recorded as the package's other runs
are (:mod:`stddial_book.experiments.testbed.record`): each run lives in a work directory (default
``runs/record-lm``) with TRL's checkpoints, and its log, compressed (``metrics.jsonl.gz``: the dial's
diagnostics under ``dial/`` and TRL's own log, one record per optimizer step), and ``provenance.json`` go to
``--out`` (default ``data/runs/lm``), one folder per ``<recipe>-seed<k>``.

The provenance names the command, the run id, the commit and whether the tree was clean (a checkout with
uncommitted changes is refused unless ``allow_dirty``), the GPU (``torch.cuda.get_device_name``, compute
capability, memory), the dtype chosen, the memory estimate made before training, the versions of torch,
transformers, TRL, peft and math-verify, the seed and the wall time summed over resumed segments.

It is a GPU command: without CUDA it refuses, unless ``allow_cpu`` is set for a smoke run on a tiny local
model (the provenance then says ``cpu``). Everything is checked before any work. An interrupted run
resumes from its last checkpoint (TRL restores the adapters, the optimizer and the random states); a run
without one restarts cleanly inside its own directory. Nothing outside ``work`` and ``out`` is written,
and nothing the tool did not write is deleted.

Launched with several processes (``torchrun --nproc_per_node N -m stddial_book record-lm ...`` or
``accelerate launch --num_processes N -m stddial_book record-lm ...``) every process trains the same run
(TRL's data parallelism; a step is still P·G completions, split over the processes). The main process
(rank 0) alone checks everything, claims the folders, writes the logs, checkpoints, evaluation and
provenance (which names the world size); the others wait for it and write nothing of the tool's (the
Trainer's checkpoint holds each process's random state, ``rng_state_<rank>.pth``, written by that process).
A refusal on the main process ends every process with the same line (:func:`~stddial_book.bridges.lm_setup.on_main`).
The held-out and pool measurements are split over the processes (question i on process i mod N) and
gathered. The dial's statistics are already those of the gathered batch (:class:`~stddial_book.bridges.dial_diagnostics.DialDiagnostics`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from stddial_book.bridges.lm_data import read_gsm8k_file
from stddial_book.bridges.lm_setup import (
    DEFAULT_MODEL_ID,
    LMRunConfig,
    detect_precision,
    gather_from_processes,
    on_main,
    precision_for,
    process_layout,
    run_precision,
)
from stddial_book.core.hub import hub_unavailable_reason
from stddial_book.core.outdir import check_claimable, claim_dir, expand_path, read_marker, remove_owned, replace_own
from stddial_book.theory.recipes import as_recipe, get_recipe, recipe_key

__all__ = [
    "LM_PACKAGES",
    "LMRecordPlan",
    "lm_run_name",
    "gpu_description",
    "check_record_lm",
    "record_lm_runs",
]

#: The versions every recorded language-model run names in its provenance.
LM_PACKAGES = ("torch", "transformers", "trl", "peft", "math-verify", "accelerate", "datasets", "stddial-book")

METRICS, PROVENANCE, DONE, EVAL = "metrics.jsonl", "provenance.json", "done", "eval.json"
_CHECKPOINT = re.compile(r"checkpoint-(\d+)")
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")

_NO_CUDA = (
    "this machine has no CUDA GPU (torch.cuda.is_available() is False) and the recorded run is the GPU run: "
    "run it on a machine with an NVIDIA GPU (in Colab: Runtime > Change runtime type > GPU), or pass "
    "--allow-cpu for a smoke run on a tiny local model (its provenance then says device cpu)."
)
_CPU_ASKED = (
    "accelerate launch --cpu asks for the CPU (ACCELERATE_USE_CPU is set) and the recorded run is the GPU run: "
    "launch without --cpu, or pass --allow-cpu for a smoke run on a tiny local model."
)


@dataclass(frozen=True)
class LMRecordPlan:
    """Everything :func:`record_lm_runs` does, checked (:func:`check_record_lm` builds it).

    ``recipes`` are the recipe keys and ``seeds`` the seeds, each once, in the order given: one run each
    pair. ``config`` is the run's :class:`~stddial_book.bridges.lm_setup.LMRunConfig` (local model and
    dataset paths made absolute). ``work`` is the directory of the runs and TRL's checkpoints, ``out`` the
    directory the compressed logs and provenance go to. ``precision`` is the device and dtype
    (:func:`~stddial_book.bridges.lm_setup.precision_for`'s ``{"device", "dtype", "bf16", "fp16"}``), ``gpu``
    the first GPU (:func:`gpu_description`; ``None`` on the CPU). ``commit`` and ``dirty`` are the checkout's
    commit and whether it had uncommitted changes (``None``: cannot tell); ``allow_dirty`` whether such a
    checkout is accepted. ``save_every`` is TRL's ``save_steps``: a checkpoint every that many optimizer
    steps. ``world_size`` is the number of data-parallel processes (default 1).
    """

    recipes: tuple[str, ...]
    seeds: tuple[int, ...]
    config: LMRunConfig
    work: Path
    out: Path
    precision: dict[str, Any]
    gpu: dict[str, Any] | None
    commit: str
    dirty: bool | None
    allow_dirty: bool
    save_every: int
    world_size: int = 1

    def names(self) -> list[tuple[str, int, str]]:
        """(recipe, seed, run name) of every run, in the order they run."""
        return [(r, s, lm_run_name(r, s)) for r in self.recipes for s in self.seeds]

    def run_settings(self, recipe: str, seed: int) -> dict[str, Any]:
        """What a run's provenance records as its configuration (a resumed run must match it)."""
        config = dataclasses.asdict(self.config.replace(seed=seed))
        return {"recipe": recipe, "run": config, "dtype": self.precision["dtype"]}


def lm_run_name(recipe: Any, seed: int) -> str:
    """A recorded language-model run's folder name: ``grpo-seed0``, from ``recipe`` (a preset name or a
    ``Recipe``, written by its key) and the whole number ``seed``."""
    return f"{recipe_key(recipe)}-seed{seed}"


def gpu_description() -> dict[str, Any] | None:
    """The first CUDA GPU: name, compute capability, memory (GiB), count and CUDA version; None without one, or
    when ``accelerate launch --cpu`` asked for the CPU (``ACCELERATE_USE_CPU``, which the Trainer obeys)."""
    import torch

    forced_cpu = os.environ.get("ACCELERATE_USE_CPU", "").strip().lower() in ("1", "true", "yes", "on")
    if forced_cpu or not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    return {
        "name": torch.cuda.get_device_name(0),
        "capability": list(torch.cuda.get_device_capability(0)),
        "memory_gib": props.total_memory / 2.0**30,
        "count": torch.cuda.device_count(),
        "cuda": torch.version.cuda,
    }


def _names(recipes: Sequence[Any], seeds: Sequence[int]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Recipe keys and seeds, each once, in the order given; a ValueError for an empty or wrong list."""
    from stddial_book.core.checks import MAX_SEED

    if isinstance(recipes, str) or not recipes:
        raise ValueError("recipes must be a non-empty list of recipe names, e.g. --recipes grpo dapo.")
    if isinstance(seeds, (str, int)) or not seeds:
        raise ValueError("seeds must be a non-empty list of whole numbers, e.g. --seeds 0 1 2.")
    for recipe in recipes:
        get_recipe(recipe)  # a preset name, or a ValueError naming the three
    keys = tuple(dict.fromkeys(recipe_key(r) for r in recipes))
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise ValueError(f"seed {seed!r} is not a whole number from 0 to {MAX_SEED}.")
    return keys, tuple(dict.fromkeys(seeds))


def _local(name: str) -> Path | None:
    """``name`` as an existing local path (``~`` and ``$VARS`` expanded), or None."""
    path = expand_path(name)
    return path if path.exists() else None


def _as_given_or_local(name: str) -> str:
    """A model or dataset id as the loaders take it: an existing local path made absolute, else as given
    (``smollm2`` names the book's CPU model, :func:`~stddial_book.bridges.smollm2.smollm2_model_dir`)."""
    local = None if name == "smollm2" else _local(name)
    return name if local is None else str(local)


def _model_refusal(model_id: str) -> str | None:
    """Why ``model_id`` cannot be loaded (one line), or None: ``smollm2`` with its wheel installed, a directory
    written by ``save_pretrained``, a model in the local cache, or a hub id while the hub can be reached."""
    if model_id == "smollm2":
        from stddial_book.bridges.smollm2 import smollm2_gguf

        try:
            smollm2_gguf(check_hash=True)
        except (FileNotFoundError, ValueError) as err:
            return f"--model smollm2: {err}"
        return None
    local = _local(model_id)
    if local is not None:
        if not (local / "config.json").is_file():
            return f"--model {model_id}: not a model directory (it has no config.json); pass one written by save_pretrained or a hub id such as {DEFAULT_MODEL_ID}."
        return None
    if not _HUB_ID.fullmatch(model_id):
        return f"--model {model_id}: no such directory, and not a hub id (owner/name such as {DEFAULT_MODEL_ID})."
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(model_id, "config.json"), str):
        return None
    reason = hub_unavailable_reason()
    if reason is not None:
        return f"--model {model_id}: not in the local cache and {reason}; run where the hub is reachable or pass a local model directory."
    return None


def _dataset_refusal(dataset_id: str) -> str | None:
    """Why ``dataset_id`` cannot be read (one line), or None: a local file of GSM8K's schema, or a hub id
    while the hub can be reached."""
    local = _local(dataset_id)
    if local is not None:
        try:
            read_gsm8k_file(local)
        except (ValueError, OSError) as err:
            return f"--dataset: {' '.join(str(err).split())}"
        return None
    if dataset_id.endswith((".json", ".jsonl")) or not _HUB_ID.fullmatch(dataset_id):
        return f"--dataset {dataset_id}: no such file, and not a hub id (owner/name such as openai/gsm8k)."
    reason = hub_unavailable_reason()
    if reason is not None:
        return f"--dataset {dataset_id}: {reason}; run where the hub is reachable or pass a local .jsonl file of GSM8K's schema."
    return None


def _check_extras() -> None:
    """TRL, peft and math-verify importable; else the ImportError that names the install."""
    from stddial_book.bridges.lm_run import import_lm_extras
    from stddial_book.bridges.trl_keywords import import_trl as _import_trl

    _import_trl("record-lm")
    import_lm_extras()


def _device(allow_cpu: bool) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(precision, GPU) of the run: the first CUDA GPU's; the CPU's only with ``allow_cpu``."""
    gpu = gpu_description()
    if gpu is not None:
        return detect_precision(), gpu
    if not allow_cpu:
        import torch

        if torch.cuda.is_available():  # a GPU, set aside by accelerate launch --cpu
            raise ValueError(_CPU_ASKED)
        raise ValueError(_NO_CUDA)
    return precision_for("cpu"), None


def _check_existing(plan: LMRecordPlan) -> None:
    """Each run folder already in ``work`` must be the tool's and hold a run of the same settings."""
    from stddial_book.rl.runlog import read_json

    for recipe, seed, name in plan.names():
        run = check_claimable(plan.work / name, "--work")
        if not (run / PROVENANCE).is_file():
            continue
        provenance = read_json(run / PROVENANCE)
        if provenance.get("config") != plan.run_settings(recipe, seed):
            raise ValueError(
                f"--work {run} holds a run of other settings (model, sizes, seed or dtype); rerun with the "
                "settings it was started with, or choose another --work."
            )
        if provenance.get("dirty") and not plan.allow_dirty:
            raise ValueError(
                f"--work {run} was started from a checkout with uncommitted changes; pass --allow-dirty or "
                "choose another --work."
            )


def check_record_lm(
    recipes: Sequence[Any],
    seeds: Sequence[int],
    config: LMRunConfig,
    work: str | os.PathLike,
    out: str | os.PathLike,
    *,
    allow_cpu: bool = False,
    allow_dirty: bool = False,
    save_every: int = 10,
) -> LMRecordPlan:
    """Everything ``record-lm`` needs, checked before any work: the names and sizes, both directories, the
    device (CUDA, or the CPU with ``allow_cpu``), TRL, peft and math-verify, the model and the dataset,
    runs already in ``work`` and a clean checkout. Returns the plan; a ValueError (one line, naming the
    fix) or an ImportError otherwise; nothing is written.

    ``recipes`` are recipe names (a non-empty list) and ``seeds`` whole numbers (a non-empty list); repeats
    are dropped. ``config`` is the :class:`~stddial_book.bridges.lm_setup.LMRunConfig` every run uses (its
    seed replaced by each run's). ``work`` (runs and checkpoints) and ``out`` (the recorded logs) must be
    separate directories, neither inside the other, each new or the tool's own. ``allow_cpu`` (default
    False) accepts a machine without CUDA for a smoke run; ``allow_dirty`` (default False) a checkout with
    uncommitted changes; ``save_every`` is the checkpoint interval in optimizer steps (TRL's ``save_steps``,
    default 10)."""
    from stddial_book.rl.runlog import git_state, refuse_dirty

    recipes, seeds = _names(recipes, seeds)
    if not isinstance(config, LMRunConfig):
        raise TypeError(f"config must be an LMRunConfig (colab_t4_config()); got {type(config).__name__}.")
    for flag, name in (("--model", config.model_id), ("--dataset", config.dataset_id)):
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{flag} must name a local path or a hub id; got {name!r}.")
    if isinstance(save_every, bool) or not isinstance(save_every, int) or save_every < 1:
        raise ValueError(f"save_every must be a whole number of steps >= 1; got {save_every!r}.")
    work, out = check_claimable(work, "--work"), check_claimable(out, "--out")
    if work == out or work in out.parents or out in work.parents:
        raise ValueError(f"--work {work} and --out {out} must be separate directories, neither inside the other.")
    precision, gpu = _device(allow_cpu)
    precision = run_precision(precision, config.dtype)
    _check_extras()
    for refusal in (_model_refusal(config.model_id), _dataset_refusal(config.dataset_id)):
        if refusal is not None:
            raise ValueError(refusal)
    if config.eval_file is not None:
        from stddial_book.bridges.lm_measure import read_prompt_rows

        read_prompt_rows(config.eval_file)  # a ValueError naming the file and the fix
        config = config.replace(eval_file=_as_given_or_local(config.eval_file))
    if config.model_id == "smollm2":  # converted once into the run cache now, so that no run waits for it
        from stddial_book.bridges.smollm2 import smollm2_model_dir

        smollm2_model_dir()
    config = config.replace(
        model_id=_as_given_or_local(config.model_id), dataset_id=_as_given_or_local(config.dataset_id)
    )
    world_size = process_layout()["world_size"]
    _check_split(recipes, config, precision, world_size)
    commit, dirty = git_state()
    plan = LMRecordPlan(
        recipes, seeds, config, work, out, precision, gpu, commit, dirty, allow_dirty, save_every, world_size
    )
    _check_existing(plan)
    refuse_dirty(commit, dirty, allow_dirty)
    return plan


def _check_split(recipes: Sequence[str], config: LMRunConfig, precision: dict[str, Any], world_size: int) -> None:
    """Each recipe's TRL settings over ``world_size`` processes: a ValueError (one line) when a micro-batch does
    not split over them."""
    from stddial_book.bridges.lm_run import lm_grpo_settings

    for recipe in recipes:
        try:
            lm_grpo_settings(recipe, config, precision, world_size)
        except ValueError as err:
            raise ValueError(f"--micro-batch-size with {world_size} processes: {' '.join(str(err).split())}") from None


def _versions() -> dict[str, str | None]:
    found = {}
    for name in LM_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _last_checkpoint(directory: Path) -> tuple[Path, int] | None:
    """The newest complete TRL checkpoint under ``directory`` (one with its trainer state) and its step."""
    found = []
    if directory.is_dir():
        for path in directory.iterdir():
            match = _CHECKPOINT.fullmatch(path.name)
            if match and (path / "trainer_state.json").is_file():
                found.append((int(match.group(1)), path))
    if not found:
        return None
    step, path = max(found)
    return path, step


def _keep_steps_up_to(path: Path, step: int) -> None:
    """Drop the log's records after ``step`` (the steps a resumed run trains again) and a cut-off last line."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("step", step + 1) <= step:
            kept.append(line + "\n")
    path.write_text("".join(kept), encoding="utf-8")


def _log_writer(log: Any, dial: Any) -> Any:
    """A ``TrainerCallback`` writing each step's dial record and TRL log into ``log`` (a ``RunLog``), the
    Trainer's closing summary into the provenance and the wall time at every checkpoint."""
    from transformers import TrainerCallback

    class LogWriter(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
            logs = dict(logs or {})
            if "train_runtime" in logs:  # the summary Trainer logs once, at the end
                log.provenance.setdefault("trl_summary", []).append(logs)
                return
            step = int(state.global_step)
            record = next((r for r in reversed(dial.records) if r.get("step") == step), {})
            log.log(step, {**{f"dial/{k}": v for k, v in record.items() if k != "step"}, **logs})

        def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            log.finish()  # the wall time up to this checkpoint counts if the run is interrupted later

    return LogWriter()


def _input_hashes(config: LMRunConfig) -> dict[str, str]:
    """sha256 of the run's local inputs: the training and held-out files, and the model (SmolLM2's GGUF file,
    or a local folder's weights)."""
    from stddial_book.bridges.smollm2 import SMOLLM2_SHA256, file_sha256

    found = {}
    for key, name in (("dataset", config.dataset_id), ("eval_file", config.eval_file)):
        if name is not None and Path(name).is_file():
            found[key] = file_sha256(name)
    if config.model_id == "smollm2":
        found["model_gguf"] = SMOLLM2_SHA256
    elif Path(config.model_id).is_dir():
        for weights in sorted(Path(config.model_id).glob("*.safetensors")):
            found[f"model/{weights.name}"] = file_sha256(weights)
    return found


def _describe(log: Any, plan: LMRecordPlan, recipe: str, info: dict[str, Any], from_step: int) -> None:
    """The provenance's GPU, dtype, memory estimate, versions and TRL settings (the first segment's; each
    resumed segment adds where it ran)."""
    from stddial_book.bridges.trl_differences import trl_gaps
    from stddial_book.rl.runlog import environment

    provenance = log.provenance
    provenance.setdefault("recipe", recipe)
    provenance.setdefault("gpu", plan.gpu)
    provenance.setdefault("precision", plan.precision)
    provenance.setdefault("memory_estimate_gib", info["memory_gib"])
    provenance.setdefault("num_params", info["num_params"])
    provenance.setdefault("inputs_sha256", _input_hashes(plan.config))
    provenance.setdefault("trl_settings", info["settings"])
    gaps = trl_gaps(as_recipe(recipe), group_size=plan.config.group_size, num_minibatches=1)
    provenance.setdefault("trl_gaps", [dataclasses.asdict(g) for g in gaps])
    provenance.setdefault("world_size", plan.world_size)  # the first segment's; each segment names its own
    provenance["packages"] = {**provenance.get("packages", {}), **_versions()}
    device = environment(plan.precision["device"])["device"]
    segment = {"from_step": from_step, "device": device, "gpu": plan.gpu, "world_size": plan.world_size}
    provenance.setdefault("segments", []).append(segment)
    log.finish()


def _open_run(plan: LMRecordPlan, name: str) -> tuple[Path, bool, tuple[Path, int] | None]:
    """(The main process's work) claim ``work/name`` and say whether its run is done and its last checkpoint;
    a run without one starts over inside the tool's own folder, a resumed log drops the steps trained again."""
    run = claim_dir(plan.work / name, "lm-run", flag="--work")
    if (run / DONE).is_file():
        return run, True, None
    checkpoint = _last_checkpoint(run / "trl")
    if checkpoint is None:
        remove_owned(run, ["trl", METRICS, PROVENANCE])
    else:
        _keep_steps_up_to(run / METRICS, checkpoint[1])
    return run, False, checkpoint


def _finish_run(log: Any, run: Path) -> None:
    log.finish()
    (run / DONE).write_text("finished\n", encoding="utf-8")


def _train_run(plan: LMRecordPlan, recipe: str, seed: int, name: str, command: str, print_every: int) -> Path:
    """Train one run in ``work/name`` (resumed from its last checkpoint, or from the start) unless done. Under
    several processes every one trains; the main process alone touches the folder (:func:`on_main`)."""
    from stddial_book.bridges.lm_run import build_trainer
    from stddial_book.bridges.trl_check import quiet_transformers as _quiet
    from stddial_book.bridges.trl_check import random_states_kept as _random_states_kept
    from stddial_book.rl.runlog import RunLog

    run, done, checkpoint = on_main(_open_run, plan, name)
    if done:
        return run
    config = plan.config.replace(seed=seed)
    main = process_layout()["rank"] == 0
    log = None
    if main:
        resume, run_id = checkpoint is not None, read_marker(run)["run_id"]
        settings = plan.run_settings(recipe, seed)
        log = RunLog(run, command, seed, "lm", settings, resume, plan.precision["device"], run_id)
    saving = {"save_strategy": "steps", "save_steps": plan.save_every, "save_total_limit": 1}
    with _random_states_kept():
        trainer, dial, info = build_trainer(recipe, config, run, plan.precision, print_every, saving)
        on_main(_describe, log, plan, recipe, info, 0 if checkpoint is None else checkpoint[1])
        if main:
            trainer.add_callback(_log_writer(log, dial))
        if checkpoint is None:
            _evaluate_into(run, "before", trainer, config)
        if checkpoint is not None and checkpoint[1] >= config.max_steps:
            _restore_trained(trainer, *checkpoint)  # stopped in its last evaluation: trained already
        else:
            with _quiet():
                trainer.train(resume_from_checkpoint=None if checkpoint is None else str(checkpoint[0]))
        _evaluate_into(run, "after", trainer, config)
    on_main(_finish_run, log, run)
    return run


def _restore_trained(trainer: Any, checkpoint: Path, step: int) -> None:
    """The trainer as it was after its last step, read from that step's checkpoint: the LoRA adapters and the step
    count. A run stopped after training (in its last evaluation) resumes here rather than through
    ``trainer.train``, which at ``max_steps`` would train one step more (transformers looks at the step count
    only after a step)."""
    import peft

    device = next(trainer.model.parameters()).device
    loaded = peft.set_peft_model_state_dict(trainer.model, peft.load_peft_weights(str(checkpoint), device=str(device)))
    if getattr(loaded, "unexpected_keys", None):
        raise RuntimeError(
            f"{checkpoint} holds adapters this run's model does not have ({loaded.unexpected_keys[0]}, ...): "
            "it is another run's checkpoint; give the run its own --work."
        )
    trainer.state.global_step = step


def _evaluate_into(run: Path, when: str, trainer: Any, config: LMRunConfig) -> None:
    """Measure the held-out questions (``config.eval_file``) and, with ``config.measure_pool``, every training
    question, ``config.eval_samples`` completions each, with the trainer's model as it is now (question i on
    process i mod N, gathered); store the per-question counts under ``when`` in the run's ``eval.json``
    (:func:`~stddial_book.core.outdir.replace_own`, on the main process)."""
    if config.eval_file is None and not config.measure_pool:
        return
    import torch

    from stddial_book.bridges.lm_measure import read_prompt_rows

    sets = {}
    if config.eval_file is not None:
        sets["heldout"] = read_prompt_rows(config.eval_file)
    if config.measure_pool:
        sets["pool"] = read_prompt_rows(config.dataset_id)[: config.num_prompts]
    layout = process_layout()
    share = {name: rows[layout["rank"] :: layout["world_size"]] for name, rows in sets.items()}
    parts = gather_from_processes(_measure_share(trainer, config, when, share, layout["rank"]))
    result = {name: _interleaved([part[name] for part in parts]) for name in sets}
    result["wall_s"] = max(part["wall_s"] for part in parts)
    result["step"] = int(trainer.state.global_step)
    on_main(_store_eval, run, when, result)
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _measure_share(trainer: Any, config: LMRunConfig, when: str, share: dict[str, list], rank: int) -> dict:
    """This process's share of the measurements, and its wall time."""
    import time

    from stddial_book.bridges.lm_measure import measure_rows

    model, tokenizer = trainer.model, trainer.processing_class
    batch = 512 if next(model.parameters()).is_cuda else 64
    start, was_training = time.perf_counter(), model.training
    model.eval()
    found: dict[str, Any] = {}
    for name, rows in share.items():
        found[name] = (
            measure_rows(
                model,
                tokenizer,
                rows,
                config.eval_samples,
                system_prompt=config.system_prompt,
                verifier=config.verifier,
                keep=2 if name == "heldout" else 0,
                max_new_tokens=config.max_new_tokens,
                temperature=config.temperature,
                batch_size=batch,
                seed=config.seed * 7919 + (0 if when == "before" else 1) + 104729 * rank,
            )
            if rows
            else []
        )
    model.train(was_training)
    found["wall_s"] = time.perf_counter() - start
    return found


def _interleaved(parts: list[list[Any]]) -> list[Any]:
    """Rows dealt round-robin over processes (row i to process i mod N), put back in their order."""
    total = sum(len(p) for p in parts)
    return [parts[i % len(parts)][i // len(parts)] for i in range(total)]


def _store_eval(run: Path, when: str, result: dict[str, Any]) -> None:
    """(The main process's work) ``result`` under ``when`` in the run's ``eval.json``."""
    path = run / EVAL
    found = json.loads(path.read_text(encoding="utf-8")) if path.is_file() and not path.is_symlink() else {}
    found[when] = result
    replace_own(run, EVAL, json.dumps(found) + "\n")  # never through a link; recorded in the run's manifest


def _publish(run: Path, dst: Path, allow_dirty: bool) -> Path:
    """Write a finished run's compressed log and provenance into the tool's folder ``dst``."""
    from stddial_book.rl.runlog import read_json, write_gzip

    provenance = read_json(run / PROVENANCE)
    if provenance.get("dirty") and not allow_dirty:
        raise ValueError(f"{run} was run from a checkout with uncommitted changes; rerun it from a commit.")
    if provenance.get("dirty"):
        provenance["dirty_allowed"] = True
    dst = claim_dir(dst, "recorded", flag="--out")
    write_gzip(run / METRICS, dst / "metrics.jsonl.gz")
    if (run / EVAL).is_file():
        write_gzip(run / EVAL, dst / "eval.json.gz")
    (dst / PROVENANCE).write_text(json.dumps(provenance, indent=2, default=str) + "\n", encoding="utf-8")
    return dst


def record_lm_runs(plan: LMRecordPlan, *, command: str = "", print_every: int = 5) -> list[Path]:
    """Run (or resume, or skip when done) every recipe × seed of ``plan`` and write each run's
    ``metrics.jsonl.gz`` and ``provenance.json`` to ``plan.out/<recipe>-seed<k>``. Returns those folders. Under
    several processes every process calls it with the main process's plan; only the main one writes.

    ``command`` is the command line recorded in each run's provenance (default empty); ``print_every``
    prints a progress line every that many optimizer steps on the main process (default 5; 0 prints
    nothing, not even the line naming each run)."""
    if not isinstance(plan, LMRecordPlan):
        raise TypeError(f"plan must be the LMRecordPlan check_record_lm returns; got {type(plan).__name__}.")
    out = on_main(_claim_both, plan)
    main = process_layout()["rank"] == 0
    written = []
    for recipe, seed, name in plan.names():
        if print_every and main:
            print(f"{name}: training {plan.config.model_id} on {plan.config.dataset_id}", flush=True)
        run = _train_run(plan, recipe, seed, name, command, print_every)
        written.append(on_main(_publish, run, out / name, plan.allow_dirty))
    return written


def _claim_both(plan: LMRecordPlan) -> Path:
    claim_dir(plan.work, "lm-record-work", flag="--work")
    return claim_dir(plan.out, "recorded", flag="--out")
