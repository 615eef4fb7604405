"""Checkpoints of an RL run: saved, fingerprinted, resumed only into the run that wrote them (chapter 10)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from stddial_book.core.outdir import (
    atomic_write,
    file_digest,
    forget_files,
    make_own_dir,
    manifest_entries,
    own_path,
    record_files,
    replace_own,
    set_aside,
    verify_manifest,
)
from stddial_book.rl.pool_state import PoolState
from stddial_book.rl.runlog import read_records

__all__ = ["checkpoint_dir"]


CHECKPOINT = "checkpoint"


INIT = "init"


#: The arrays of a :class:`~stddial_book.rl.pool_state.PoolState` a checkpoint stores.
_POOL_ARRAYS = (
    "visits",
    "samples",
    "successes",
    "silent_streak",
    "last_outcome",
    "window_successes",
    "window_samples",
    "weighted_successes",
    "weighted_failures",
)


class TrainState:
    """The counters and random states a checkpoint must carry for an exact resume, and, under an
    allocation rule, the pool history the rule reads (``pool_state``; ``None`` otherwise)."""

    def __init__(self, seed: int, device) -> None:
        self.step = 0
        self.samples_generated = 0
        self.samples_kept = 0
        self.updates = 0
        self.rng = np.random.default_rng(seed)
        self.gen = torch.Generator(device=device).manual_seed(seed)
        self.pool_state: PoolState | None = None

    def to_json(self) -> dict[str, Any]:
        out = {
            "step": self.step,
            "samples_generated": self.samples_generated,
            "samples_kept": self.samples_kept,
            "updates": self.updates,
            "numpy_rng": self.rng.bit_generator.state,
        }
        if self.pool_state is not None:  # JSON floats round-trip exactly
            out["pool_state"] = {name: getattr(self.pool_state, name).tolist() for name in _POOL_ARRAYS}
        return out

    def _load_pool_state(self, saved: dict[str, Any]) -> None:
        """Restore the pool history's arrays (same pool size, whole or float numbers as written)."""
        pool = self.pool_state
        arrays = saved.get("pool_state")
        if not isinstance(arrays, dict):
            raise ValueError("pool_state is missing: the run's allocation rule needs its pool history")
        if "window_samples" not in arrays:  # a checkpoint from before the window: start it empty
            arrays = {
                **arrays,
                "window_successes": [0.0] * pool.num_prompts,
                "window_samples": [0.0] * pool.num_prompts,
            }
        for name in _POOL_ARRAYS:
            current = getattr(pool, name)
            value = np.asarray(arrays.get(name), dtype=current.dtype)
            if value.shape != current.shape:
                raise ValueError(f"pool_state.{name} has shape {value.shape}, not {current.shape}")
            setattr(pool, name, value)

    def load(self, saved: dict[str, Any], gen_state: torch.Tensor) -> None:
        """Restore from a checkpoint's ``state.json``; a ``ValueError`` when it is not one (edited,
        truncated or from another program): counters must be whole numbers >= 0 with
        ``samples_kept <= samples_generated``."""
        if not isinstance(saved, dict):
            raise ValueError("state.json is not a JSON object")
        counters = {}
        for name in ("step", "samples_generated", "samples_kept", "updates"):
            value = saved.get(name)
            if type(value) is not int or value < 0:
                raise ValueError(f"{name} is {value!r}, not a whole number >= 0")
            counters[name] = value
        if counters["samples_kept"] > counters["samples_generated"]:
            raise ValueError("samples_kept exceeds samples_generated")
        rng = saved.get("numpy_rng")
        if not isinstance(rng, dict) or rng.get("bit_generator") != type(self.rng.bit_generator).__name__:
            raise ValueError("numpy_rng is not the state of the run's random generator")
        if self.pool_state is not None:
            self._load_pool_state(saved)
        self.rng.bit_generator.state = rng
        self.gen.set_state(gen_state)
        for name, value in counters.items():
            setattr(self, name, value)


#: The two slots a run's checkpoints alternate between: the newer complete one is resumed from, and
#: the other is overwritten (file by file, each by an atomic rename) by the next checkpoint.
SLOTS = (CHECKPOINT, CHECKPOINT + ".alt")

_CHECKPOINT_FILES = ("model.safetensors", "optimizer.pt", "rng.pt", "state.json")


def _saved_step(slot: Path) -> int:
    """The step a slot's ``state.json`` names (-1 when it cannot be read)."""
    try:
        step = json.loads((slot / "state.json").read_text()).get("step")
    except (OSError, ValueError, AttributeError):
        return -1
    return step if type(step) is int else -1


def checkpoint_dir(directory: str | os.PathLike) -> Path | None:
    """The last complete checkpoint of a run directory, or ``None`` when it has none.

    ``directory`` is the run directory (a path) that :func:`train` wrote.

    :func:`train` writes each checkpoint into the slot (:data:`SLOTS`) not holding the last one,
    then records its four files (``state.json`` last) in the run's manifest
    (:mod:`stddial_book.core.outdir`); a checkpoint is complete once all four are listed, so a crash
    while one is written leaves the one before as the last complete checkpoint. In a directory
    without the tool's manifest (a copied run, read to evaluate it), a slot holding ``state.json``
    counts.
    """
    if not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"directory must be a run directory path (str or Path); got {type(directory).__name__}.")
    directory = Path(directory)
    listed = manifest_entries(directory) if directory.is_dir() else {}
    found = []
    for name in (*SLOTS, CHECKPOINT + ".old"):
        slot = directory / name
        if listed:
            complete = all(f"{name}/{f}" in listed for f in _CHECKPOINT_FILES)
        else:
            complete = (slot / "state.json").is_file() and not slot.is_symlink()
        if complete:
            found.append((_saved_step(slot), -len(found), slot))
    return max(found)[2] if found else None


def config_fingerprint(config_dict: dict[str, Any], run_id: str) -> str:
    """What a checkpoint must belong to: this run directory (its marker's id) and this configuration."""
    text = json.dumps({"run_id": run_id, "train": config_dict}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _weights_io(model) -> tuple[Any, Any, Any]:
    """How ``model``'s weights are written and read, and its device: a policy's own ``save_weights`` and
    ``load_weights`` (a LoRA policy stores its adapters only), else safetensors of the whole module."""
    from safetensors.torch import load_model, save_model

    if callable(getattr(model, "save_weights", None)):
        return model.save_weights, model.load_weights, next(model.model.parameters()).device
    return (
        lambda path: save_model(model, str(path)),
        lambda path, device: load_model(model, str(path), device=str(device)),
        next(model.parameters()).device,
    )


def save_checkpoint(directory: Path, model, optimizer, state: TrainState, fingerprint: str = "") -> None:
    """Write model, optimizer and random states into the slot not holding the last checkpoint (see
    :func:`checkpoint_dir`), each file by an atomic rename, and record them in the run's manifest.
    ``model`` is a torch module or a :class:`~stddial_book.rl.policy.Policy` (its trainable weights).

    ``directory`` is the tool's run directory (:mod:`stddial_book.core.outdir`): nothing is deleted.
    The slot's previous files are the run's own (the manifest says so) and are replaced; anything
    else found in the slot (a crash's half-written checkpoint, a file put there) is set aside."""
    save_weights = _weights_io(model)[0]
    last = checkpoint_dir(directory)
    name = SLOTS[1] if last is not None and last.name == SLOTS[0] else SLOTS[0]
    slot = directory / name
    listed = manifest_entries(directory)
    if slot.is_symlink() or (slot.exists() and not slot.is_dir()):
        set_aside(directory, [name])
    elif slot.exists():
        try:
            verify_manifest(directory, [f"{name}/{f}" for f in _CHECKPOINT_FILES])
            ours = all(f"{name}/{f}" in listed for f in _CHECKPOINT_FILES) and all(
                p.name in _CHECKPOINT_FILES and p.is_file() and not p.is_symlink() for p in slot.iterdir()
            )
        except ValueError:
            ours = False
        if not ours:
            set_aside(directory, [name])
    forget_files(directory, name)  # from here until recorded again, the slot is not a checkpoint
    make_own_dir(directory, name)
    writers = {
        "model.safetensors": save_weights,
        "optimizer.pt": lambda p: torch.save(optimizer.state_dict(), p),
        "rng.pt": lambda p: torch.save({"generator": state.gen.get_state(), "torch": torch.get_rng_state()}, p),
        "state.json": (json.dumps({**state.to_json(), "fingerprint": fingerprint}) + "\n").encode(),
    }
    for file, write in writers.items():
        atomic_write(own_path(directory, f"{name}/{file}"), write)
    metrics = ["metrics.jsonl"] if (directory / "metrics.jsonl").is_file() else []
    record_files(directory, [f"{name}/{f}" for f in _CHECKPOINT_FILES], append=metrics)


def _damaged(path: Path, err: Exception) -> ValueError:
    """A ``ValueError`` naming a checkpoint file that cannot be read, and what to do about it."""
    reason = (str(err).strip().splitlines() or [""])[0][:160]
    return ValueError(
        f"{path} cannot be read ({type(err).__name__}: {reason}); the checkpoint is damaged and nothing "
        "was changed: restore the file from a copy, or start a new run in a new --out directory."
    )


def _mismatch(path: Path) -> ValueError:
    """A ``ValueError`` for a readable checkpoint that belongs to another model or run: not damaged."""
    return ValueError(
        f"{path} does not fit this run (another model size, profile or configuration wrote "
        "it); nothing was deleted: resume with the profile and settings the run was started "
        "with, or start a new run in a new --out directory."
    )


def load_checkpoint(path: Path, model, optimizer, state: TrainState, fingerprint: str | None = None) -> None:
    """Restore model, optimizer, counters and random states from the checkpoint directory ``path``.

    With ``fingerprint`` (see :func:`config_fingerprint`), a checkpoint written for another run
    directory or configuration is refused before anything is restored."""
    _, load_weights, device = _weights_io(model)
    parts: dict[str, Any] = {}
    verify_manifest(path.parent)  # every file the run wrote (state and checkpoint included) as it wrote it
    try:
        saved = json.loads((path / "state.json").read_text())
    except Exception as err:
        raise _damaged(path / "state.json", err) from None
    if fingerprint is not None and isinstance(saved, dict) and saved.get("fingerprint") != fingerprint:
        raise _mismatch(path)
    for name in ("model.safetensors", "optimizer.pt", "rng.pt"):
        try:
            if name == "model.safetensors":
                load_weights(path / name, device)
            else:  # random states are CPU tensors whatever the device; the optimizer's follow the model
                parts[name] = torch.load(
                    path / name, weights_only=True, map_location=device if name == "optimizer.pt" else "cpu"
                )
        except torch.cuda.OutOfMemoryError:
            raise
        except RuntimeError as err:
            if "loading state_dict" in str(err) or "size mismatch" in str(err):  # shapes of another model
                raise _mismatch(path) from None
            raise _damaged(path / name, err) from None
        except Exception as err:  # safetensors, pickle, zip and OS errors alike
            raise _damaged(path / name, err) from None
    try:
        optimizer.load_state_dict(parts["optimizer.pt"])
    except (ValueError, KeyError, TypeError) as err:
        raise (
            _mismatch(path) if "size" in str(err) or "group" in str(err) else _damaged(path / "optimizer.pt", err)
        ) from None
    try:
        state.load(saved, parts["rng.pt"]["generator"])
        torch.set_rng_state(parts["rng.pt"]["torch"])
    except (ValueError, KeyError, TypeError, RuntimeError) as err:
        raise _damaged(path / "state.json", err) from None


def check_log_matches(directory: Path, checkpoint: Path, state: TrainState) -> None:
    """A checkpoint is written right after its step is logged: its counters must be that record's."""
    if state.step == 0:
        return
    record = next((r for r in read_records(directory / "metrics.jsonl") if r["step"] == state.step), None)
    if (
        record is None
        or record.get("samples/generated") != state.samples_generated
        or record.get("updates") != state.updates
    ):
        raise ValueError(
            f"{checkpoint / 'state.json'} does not match {directory / 'metrics.jsonl'} at step "
            f"{state.step} (an edited or foreign file); nothing was changed: restore the run's own "
            "files or start a new run in a new --out directory."
        )


def truncate_metrics(directory: Path, last_step: int) -> None:
    """Drop records logged after the checkpoint (they will be logged again, identically) and a
    partial last line a crash may have left: the log is replaced by an atomic rename, never cut in place."""
    path = directory / "metrics.jsonl"
    if not path.exists():
        return
    lines = [json.dumps(r, allow_nan=False) for r in read_records(path) if r["step"] <= last_step]
    text = "".join(ln + "\n" for ln in lines)
    if file_digest(path) != {"size": len(text.encode()), "sha256": hashlib.sha256(text.encode()).hexdigest()}:
        replace_own(directory, "metrics.jsonl", text)
    record_files(directory, [], append=["metrics.jsonl"])
