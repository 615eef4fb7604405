"""The runs of chapters 9-13, as functions: SFT into a directory, RL into a directory, and cached.

:func:`sft_to_dir` and :func:`train_to_dir` are what the command line runs
(``python -m stddial_book sft|train``). :func:`warm_start` and :func:`rl_run` wrap them with a
cache so that the chapters can share one SFT checkpoint and chapter 13 can reuse the runs of
chapters 10-12: a run is stored under a key that hashes its full configuration, the package's
source code and the torch version, so a cached run is exactly the run the code would produce
now (a changed line of the package gives a new key). An interrupted cached run is resumed from
its last checkpoint. The cache lives in ``$STDDIAL_CACHE`` (default ``~/.cache/stddial_book``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from stddial_book.core.resources import sha256  # the SFT model a run started from goes into its provenance

__all__ = [
    "ENV_CACHE",
    "RUN_FILES",
    "cache_dir",
    "code_fingerprint",
    "remove_stale_run",
    "sft_to_dir",
    "train_to_dir",
    "warm_start",
    "rl_run",
    "load_model_from",
    "same_warm_start",
    "cached_arrays",
    "cache_lock",
    "recipe_logs",
]

ENV_CACHE = "STDDIAL_CACHE"


def cache_dir() -> Path:
    """Where cached runs live: ``$STDDIAL_CACHE``, else ``~/.cache/stddial_book``."""
    from stddial_book.core.outdir import expand_path

    root = os.environ.get(ENV_CACHE, "").strip()
    return expand_path(root) if root else Path.home() / ".cache" / "stddial_book"


#: The modules a training run starts from; :func:`run_modules` adds every package module they import.
_RUN_ENTRY_POINTS = ("rl.trainer", "rl.sft", "experiments.testbed.runs", "experiments.testbed.record", "rl.profiles")

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def _module_file(name: str) -> Path:
    """The source file of the package module ``name`` (dotted, relative to the package)."""
    return _PACKAGE_ROOT.joinpath(*name.split(".")).with_suffix(".py")


def _imported_modules(source: str) -> list[str]:
    """The package modules a source imports (``from stddial_book.a.b import x`` and
    ``from stddial_book.a import b``), anywhere in it, as dotted names relative to the package."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("stddial_book."):
            module = node.module.removeprefix("stddial_book.")
            found.append(module)
            found.extend(f"{module}.{alias.name}" for alias in node.names)
    return [name for name in found if _module_file(name).is_file()]


def run_modules(entry_points: tuple[str, ...] = _RUN_ENTRY_POINTS) -> list[str]:
    """The package's modules whose code can change a training run: the entry points and, read from
    their source, every package module they import, at load time or inside a function, transitively.
    Figures, widgets, the book's build tooling and the TRL bridge are not among them (unless a run
    imports them), so editing those does not invalidate cached runs."""
    found: set[str] = set()
    todo = list(entry_points)
    while todo:
        name = todo.pop()
        if name in found or not _module_file(name).is_file():
            continue
        found.add(name)
        todo.extend(_imported_modules(_module_file(name).read_text()))
    return sorted(found)


def _code_of(source: str) -> str:
    """A module's code without its comments, docstrings and layout: the dump of its syntax tree
    with every docstring removed, so rewording documentation does not invalidate cached runs."""
    import ast

    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def code_fingerprint(entry_points: tuple[str, ...] = _RUN_ENTRY_POINTS) -> str:
    """A hash of the code of the modules a run executes (:func:`run_modules`) and the torch version
    (part of each cache key): a changed statement in any of them gives a new key; a changed comment,
    docstring or line break does not. Parsing the modules takes about a second, so the hash is
    kept for as long as no source file of the package changes (size or modification time).
    ``entry_points`` other than a training run's (:func:`cached_arrays`) leave torch's version out."""
    stamp = tuple(
        (str(path), path.stat().st_mtime_ns, path.stat().st_size) for path in sorted(_PACKAGE_ROOT.rglob("*.py"))
    )
    return _fingerprint_of(stamp, tuple(entry_points))


@functools.lru_cache(maxsize=8)
def _fingerprint_of(stamp: tuple, entry_points: tuple[str, ...]) -> str:
    """:func:`code_fingerprint` for the package's sources as ``stamp`` lists them."""
    digest = hashlib.sha256()
    if entry_points == _RUN_ENTRY_POINTS:
        import torch

        digest.update(torch.__version__.encode())
    for name in run_modules(entry_points):
        path = _module_file(name)
        digest.update(name.encode())
        digest.update(_code_of(path.read_text()).encode())
    return digest.hexdigest()[:16]


def cached_arrays(kind: str, payload: dict[str, Any], compute, entry_points: tuple[str, ...]) -> dict[str, Any]:
    """``compute()`` (a dict of numpy arrays), made once per ``payload`` and code and kept in the
    run cache (:func:`cache_dir`) as ``<kind>-<key>.npz``: several chapters that ask for the same
    study read it instead of computing it again. The key hashes the payload (arrays by their bytes)
    and the code of ``entry_points`` and every package module they import
    (:func:`code_fingerprint`), so a changed statement there computes afresh. Processes sharing the
    cache wait for one another (:func:`cache_lock`); the file is written whole, then renamed. ``kind`` is the
    file name's prefix (a study's name); ``compute`` a function of no arguments."""
    import numpy as np

    text = json.dumps({k: _payload_value(v) for k, v in payload.items()}, sort_keys=True, default=str)
    key = hashlib.sha256((code_fingerprint(entry_points) + text).encode()).hexdigest()[:16]
    path = cache_dir() / f"{kind}-{key}.npz"
    with cache_lock(path):
        if not path.exists():
            arrays = compute()
            partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
            with open(partial, "wb") as handle:
                np.savez(handle, **{name: np.asarray(value) for name, value in arrays.items()})
            os.replace(partial, path)
        with np.load(path, allow_pickle=False) as stored:
            return {name: stored[name] for name in stored.files}


def _payload_value(value: Any) -> Any:
    """A payload entry as JSON text: an array by its dtype, shape and sha256, a dataclass by its fields."""
    import dataclasses

    import numpy as np

    if isinstance(value, np.ndarray):
        return [str(value.dtype), list(value.shape), hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__, dataclasses.asdict(value)]
    return value


def _key(kind: str, payload: dict[str, Any]) -> str:
    text = json.dumps(payload, sort_keys=True, default=str)
    return f"{kind}-" + hashlib.sha256((code_fingerprint() + text).encode()).hexdigest()[:16]


def load_model_from(profile, directory: str | os.PathLike, device: str | None = None):
    """The profile's model with the weights of an SFT directory or a run's last checkpoint.

    ``profile`` is the :class:`~stddial_book.rl.profiles.Profile` the weights were trained with; ``directory``
    an SFT directory (``model.safetensors``) or a run directory (its checkpoint's); ``device`` where the model
    goes (default None: the profile's device)."""
    import torch
    from safetensors.torch import load_model

    from stddial_book.rl.checkpoints import checkpoint_dir
    from stddial_book.rl.model import model_for_profile

    directory = Path(directory)
    if not directory.is_dir():
        raise ValueError(
            f"{directory} is not a directory; pass a run directory (written by train) "
            "or an SFT directory (written by sft)."
        )
    device = device or profile.device
    checkpoint = checkpoint_dir(directory)
    for candidate in ((checkpoint / "model.safetensors") if checkpoint else None, directory / "model.safetensors"):
        if candidate is not None and candidate.is_file():
            break
    else:
        raise ValueError(
            f"{directory} holds no model: expected checkpoint/model.safetensors (a train run) "
            "or model.safetensors (an sft run)."
        )
    model = model_for_profile(profile).to(device)
    try:
        load_model(model, str(candidate), device=str(device))
    except torch.cuda.OutOfMemoryError:
        raise
    except RuntimeError as err:
        if "loading state_dict" in str(err):  # missing, unexpected or differently shaped weights
            raise ValueError(
                f"the model in {candidate} does not match profile {profile.name!r}; "
                "pass the profile it was trained with (--profile)."
            ) from None
        raise ValueError(f"{candidate} cannot be read ({err}); the file is damaged: rerun what wrote it.") from None
    except Exception as err:  # safetensors' header and I/O errors, whose types differ between versions
        raise ValueError(
            f"{candidate} cannot be read ({type(err).__name__}: {err}); the file is damaged: rerun what wrote it."
        ) from None
    return model


#: What a run directory may hold (an SFT or an RL run, finished or not): what :func:`remove_stale_run`
#: removes from a directory the tool marked, to start the run afresh.
RUN_FILES = frozenset(
    {
        "metrics.jsonl",
        "metrics.jsonl.gz",
        "provenance.json",
        "sft.json",
        "model.safetensors",
        "done",
        "init",
        "sft",
        "checkpoint",
        "checkpoint.tmp",
        "checkpoint.old",
    }
)


def remove_stale_run(directory: str | os.PathLike) -> None:
    """Set an unfinished run's files in ``directory`` aside so that it can start afresh: they are
    moved into ``.stddial-set-aside/<time>/`` (:func:`stddial_book.core.outdir.set_aside`), never deleted.

    Only a directory the tool made (its marker made there) is touched, and in it only the run's own
    entries (:data:`RUN_FILES`); the directory itself, the marker and any other file stay. A path
    :func:`stddial_book.core.outdir.refusal` names (``''``, ``.``, the home directory, ...) and a
    directory without the marker are refused with a ``ValueError``.
    """
    from stddial_book.core.outdir import checked_path, set_aside

    path = checked_path(directory, flag=None)
    if not path.exists():
        return
    if not path.is_dir():
        raise ValueError(f"{path} is a file, not a run directory; choose another output directory.")
    set_aside(path, sorted(RUN_FILES))


def sft_to_dir(profile, seed: int, out: str | os.PathLike, progress: bool = False, command: str = "") -> Path:
    """SFT the profile's model into ``out``: ``model.safetensors``, ``sft.json`` and a run log.

    ``profile`` is the run profile (:class:`~stddial_book.rl.profiles.Profile`); ``seed`` seeds the model's
    initialisation and the SFT; ``progress`` shows a progress bar; ``command`` is the command line written
    into the provenance."""
    from safetensors.torch import save_model

    from stddial_book.core.outdir import checked_path, claim_dir, owns, read_marker, replace_own
    from stddial_book.rl.batches import make_problems
    from stddial_book.rl.model import model_for_profile
    from stddial_book.rl.runlog import RunLog
    from stddial_book.rl.sft import sft

    task, config = profile.task_config(), profile.sft_config(seed)
    out = checked_path(out)
    if owns(out, "sft") and (out / "model.safetensors").exists():
        raise ValueError(f"{out} already holds an SFT model; use it with --init {out} or pick another --out.")
    out = claim_dir(out, "sft")
    remove_stale_run(out)  # a half-finished SFT of this tool is cheap to redo; nothing else is touched
    train_problems, heldout = make_problems(task)
    model = model_for_profile(profile, seed=seed).to(profile.device)
    log = RunLog(
        out,
        command=command,
        seed=seed,
        profile=profile.name,
        config={"task": vars(task), "sft": vars(config), "model": profile.model},
        device=profile.device,
        run_id=read_marker(out)["run_id"],
    )
    result = sft(
        model,
        train_problems,
        heldout,
        config,
        max_new_tokens=profile.train["max_new_tokens"],
        log=log,
        progress=progress,
    )
    summary = {
        "steps": result.steps,
        "pass_rate": result.pass_rate,
        "stop_estimate": result.stop_estimate,
        "reached": result.reached,
        "target_pass_rate": config.target_pass_rate,
        "pass_rate_samples": config.final_eval_samples * len(heldout),
        "wall_time_s": result.wall_time_s,
    }
    replace_own(out, "sft.json", json.dumps(summary, indent=2) + "\n")
    log.finish()
    replace_own(out, "model.safetensors", lambda path: save_model(model, str(path)))  # last: it means "done"
    if not result.reached:
        print(
            f"warning: SFT stopped at max_steps={config.max_steps} with held-out pass rate "
            f"{result.stop_estimate:.2f} < target {config.target_pass_rate}; RL will see mostly silent groups.",
            file=sys.stderr,
        )
    return out


def train_to_dir(
    profile,
    recipe,
    seed: int,
    init: str | os.PathLike,
    out: str | os.PathLike,
    *,
    resume: bool = False,
    progress: bool = False,
    command: str = "",
    **changes,
):
    """RL with ``recipe`` from the SFT model in ``init``, writing the run to ``out``.

    ``profile`` is the run profile (:class:`~stddial_book.rl.profiles.Profile`); ``seed`` the RL run's seed;
    ``resume`` continues from the checkpoint in ``out``; ``progress`` shows a progress bar; ``command`` is the
    command line written into the provenance; ``changes`` are :class:`~stddial_book.rl.configs.TrainConfig`
    fields that replace the profile's settings."""
    from stddial_book.rl.trainer import train

    config = profile.train_config(recipe, seed, **changes)
    train_problems, heldout = profile.rl_problems()
    model = load_model_from(profile, init)
    return train(
        model,
        train_problems,
        heldout,
        config,
        out,
        resume=resume,
        progress=progress,
        command=command,
        profile=profile.name,
        extra_provenance={
            "init": Path(init).name,
            "init_sha256": sha256(Path(init) / "model.safetensors"),
            "task": vars(profile.task_config()),
            "model": profile.model,
            **({"pool_block": dict(profile.pool_block)} if profile.pool_block else {}),
        },
    )


def _require_profile(profile) -> None:
    from stddial_book.rl.profiles import Profile

    if not isinstance(profile, Profile):
        raise TypeError(
            f"profile must be a Profile, e.g. profiles.active_profile() or profiles.PROFILES['quick']; "
            f"got {type(profile).__name__}."
        )


def warm_start(profile, seed: int = 0, progress: bool = False) -> Path:
    """The cached SFT directory of ``profile`` (made on first use).

    ``seed`` seeds the SFT (default 0; part of the cache key); ``progress`` shows a progress bar while it
    is made."""
    _require_profile(profile)
    # no profile name in the key: profiles with the same model, task and SFT share a warm start
    key = _key(
        "sft",
        {
            "model": profile.model,
            "task": profile.task,
            "sft": profile.sft,
            "seed": seed,
            "max_new_tokens": profile.train["max_new_tokens"],
            "device": profile.device,
        },
    )
    out = cache_dir() / key
    with cache_lock(out):
        if not (out / "model.safetensors").exists():
            sft_to_dir(
                profile, seed, out, progress=progress, command=f"warm_start(profile={profile.name!r}, seed={seed})"
            )
    return out


@contextlib.contextmanager
def cache_lock(entry: Path):
    """Hold an exclusive lock on one cache entry while it is made: processes sharing the cache (the
    test runner's workers, a build beside the tests) wait for a run another one is making and then
    reuse it, instead of making it twice in the same directory. The lock is a small file beside the
    entry (``.<key>.lock``, never removed); without ``fcntl`` (Windows) there is no lock. ``entry`` is the
    cache entry's path (a run directory or a file)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on Linux or macOS
        yield
        return
    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(entry.parent / f".{entry.name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def rl_run(profile, recipe, seed: int = 0, sft_seed: int = 0, progress: bool = False, **changes) -> Path:
    """The cached RL run of ``recipe`` (a preset name or :class:`Recipe`) from the profile's SFT model.

    Returns the run directory (``metrics.jsonl``, ``provenance.json``, ``checkpoint/``). A run
    interrupted earlier resumes from its checkpoint; a finished one is returned as it is.
    ``profile`` is the run profile (:class:`~stddial_book.rl.profiles.Profile`); ``seed`` the RL run's seed and
    ``sft_seed`` the warm start's (:func:`warm_start`), both default 0; ``progress`` shows progress bars;
    ``changes`` are :class:`~stddial_book.rl.configs.TrainConfig` fields that replace the profile's settings
    (part of the cache key).
    """
    from stddial_book.core.outdir import replace_own
    from stddial_book.rl.checkpoints import checkpoint_dir

    _require_profile(profile)
    config = profile.train_config(recipe, seed, **changes)  # checked before the warm start's minutes
    init = warm_start(profile, sft_seed, progress)
    key = _key("rl", {"profile": profile.name, "init": init.name, "train": config.to_dict()})
    out = cache_dir() / key
    done = out / "done"
    with cache_lock(out):
        if not done.exists():
            resume = checkpoint_dir(out) is not None
            if not resume:
                remove_stale_run(out)
            name = config.recipe.name
            train_to_dir(
                profile,
                config.recipe,
                seed,
                init,
                out,
                resume=resume,
                progress=progress,
                command=f"rl_run(profile={profile.name!r}, recipe={name!r}, seed={seed})",
                **changes,
            )
            replace_own(out, "done", "finished\n")
    return out


def recipe_logs(
    profile, key: str, recorded_profile: str = "reference", progress: bool = False
) -> dict[str, list[list[dict[str, Any]]]]:
    """The run logs chapters 10-13 read for one recipe: ``"live"``, every seed of ``profile``
    (trained now, or read from the cache), and ``"recorded"``, every committed run of
    ``recorded_profile`` (:func:`stddial_book.rl.runlog.recorded_runs`). ``key`` is the recipe's preset key
    (``grpo``, ``dr_grpo``, ``dapo``); ``progress`` shows progress bars while live runs train."""
    from stddial_book.rl.runlog import load_run, recorded_runs

    live = [load_run(rl_run(profile, key, seed=seed, progress=progress))[1] for seed in profile.seeds]
    recorded = [load_run(d)[1] for d in recorded_runs(recorded_profile).get(key, [])]
    if not recorded:
        raise ValueError(f"no recorded {key!r} runs of profile {recorded_profile!r} were found in the package data.")
    return {"live": live, "recorded": recorded}


def same_warm_start(profile, recorded_profile: str = "reference", progress: bool = False) -> bool:
    """Whether the committed runs of ``recorded_profile`` started from the very SFT model this
    build's live runs start from: the sha256 of :func:`warm_start`'s model against the one the
    recorded SFT's provenance names (``model_sha256``). The same code and settings give the same
    bytes on a CPU; another commit's SFT code or another machine's arithmetic need not. ``profile`` is
    the live runs' profile (its warm start is made if not cached, ``progress`` showing a progress bar)."""
    from stddial_book.rl.runlog import RECORDED_DIR, run_json

    recorded = run_json(Path(RECORDED_DIR) / recorded_profile / "sft", "provenance.json").get("model_sha256")
    if not recorded:
        raise ValueError(
            f"the recorded {recorded_profile!r} SFT provenance names no model_sha256; record the runs "
            "again with `python -m stddial_book record`."
        )
    return sha256(warm_start(profile, progress=progress) / "model.safetensors") == recorded
