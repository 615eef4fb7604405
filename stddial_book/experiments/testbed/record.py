"""Recorded reference runs: one SFT warm start, then every recipe over several seeds (chapters 9-13).

``python -m stddial_book record --profile reference`` runs them one after another in a work
directory (default ``runs/record-<profile>``), resuming any run an interruption left behind, and
writes each finished run's log, compressed (``metrics.jsonl.gz``), and ``provenance.json`` (never
its checkpoints) to a new folder (default ``runs/recorded-<profile>``), one ``<recipe>-seed<k>/``
per run plus the warm start's ``sft/``; ``tools/compact_runs.py`` stores it under ``data/runs/<profile>/``
from there. A folder the repository tracks is never written into, and a recorded run is written once. A recorded run must be reproducible: ``record`` refuses a checkout
with uncommitted changes to tracked files unless ``allow_dirty`` is set, which the provenance then
says. Each provenance names the commit, the SFT model's sha256, the versions, the device and the
wall time summed over resumed segments; the book plots these logs beside its live runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "record_runs",
    "check_record",
    "check_directories",
    "publish_run",
    "run_name",
    "RECORDED_FILES",
    "WORK_KIND",
    "RECORDED_KIND",
]

#: What goes from a finished run into data/runs: the compressed log and its provenance, nothing heavy.
RECORDED_FILES = ("metrics.jsonl.gz", "provenance.json")


def run_name(recipe, allocation: str, seed: int) -> str:
    """A recorded run's directory name: ``grpo-seed0``, or ``grpo-knapsack-seed0`` under a rule.

    ``recipe`` is a recipe name (written as its preset key), ``allocation`` the allocation rule's name
    (``"uniform"`` adds nothing) and ``seed`` the run's seed."""
    from stddial_book.theory.recipes import recipe_key

    rule = "" if allocation == "uniform" else f"-{allocation}"
    return f"{recipe_key(recipe)}{rule}-seed{seed}"


def check_record(
    profile,
    recipes: Sequence[str],
    seeds: Sequence[int],
    work: str | os.PathLike,
    out: str | os.PathLike,
    allow_dirty: bool = False,
    allocations: Sequence[str] = ("uniform",),
) -> tuple[str, bool | None]:
    """Everything ``record`` needs, checked before any work: recipes, seeds, allocation rules,
    configurations, both directories (:func:`stddial_book.core.outdir.refusal`) and a clean
    checkout. Returns (commit, dirty). The arguments are :func:`record_runs`': ``profile`` the run
    profile (:class:`~stddial_book.rl.profiles.Profile`), ``recipes`` and ``allocations`` non-empty lists of
    recipe and rule names, ``seeds`` a non-empty list of seeds, ``work`` and ``out`` the work directory and
    the recorded folder, ``allow_dirty`` whether a checkout with uncommitted changes may record."""
    from stddial_book.experiments.allocation.testbed_runs import lm_allocation_changes
    from stddial_book.rl.runlog import git_state, refuse_dirty
    from stddial_book.theory.recipes import get_recipe

    if isinstance(recipes, str) or not recipes:
        raise ValueError("recipes must be a non-empty list of recipe names, e.g. --recipes grpo dapo.")
    if isinstance(seeds, (str, int)) or not seeds:
        raise ValueError("seeds must be a non-empty list of whole numbers, e.g. --seeds 0 1 2.")
    if isinstance(allocations, str) or not allocations:
        raise ValueError("allocations must be a non-empty list of rule names, e.g. --allocations uniform knapsack.")
    if "knapsack_oracle" in allocations:
        raise ValueError(
            "allocation 'knapsack_oracle' needs each prompt's true pass rate at every step, which a trained "
            "model does not have; record 'knapsack' (the estimated rates) instead."
        )
    for recipe in recipes:
        for seed in seeds:
            base = profile.train_config(get_recipe(recipe), seed)
            for rule in allocations:
                profile.train_config(
                    get_recipe(recipe), seed, **lm_allocation_changes(rule, base.prompts_per_step, base.group_size)
                )
    check_directories(work, out)
    commit, dirty = git_state()
    refuse_dirty(commit, dirty, allow_dirty)
    return commit, dirty


def check_directories(work: str | os.PathLike, out: str | os.PathLike) -> tuple:
    """Both directories of a recording, checked before anything is written: each one the policy
    accepts for its kind (:func:`stddial_book.core.outdir.check_claimable`: ``--work`` the
    recording's own work directory, ``--out`` its own recorded folder; never a repository's tracked
    files), and neither the other nor inside it. Returns both, expanded. ``work`` is the recording's work
    directory, ``out`` the folder its recorded runs go to."""
    from stddial_book.core.outdir import check_claimable

    work = check_claimable(work, "--work", WORK_KIND)
    out = check_claimable(out, "--out", RECORDED_KIND)
    one, other = work.resolve(), out.resolve()
    if one == other or one in other.parents or other in one.parents:
        raise ValueError(
            f"--work {work} and --out {out} overlap; nothing was changed: give the recorded runs their "
            "own folder, e.g. --work runs/record-work --out runs/recorded."
        )
    return work, out


#: The kinds of the directories a recording claims: its work directory and its recorded folders.
WORK_KIND, RECORDED_KIND = "record-work", "recorded"


def record_runs(
    profile,
    recipes: Sequence[str],
    seeds: Sequence[int],
    work: str | os.PathLike,
    out: str | os.PathLike,
    sft_seed: int = 0,
    progress: bool = False,
    command: str = "",
    allow_dirty: bool = False,
    allocations: Sequence[str] = ("uniform",),
) -> list[Path]:
    """Run (or resume) every recipe × allocation rule × seed from one SFT model and write the logs
    to ``out`` (rule ``"uniform"``, the default, is the plain loop of chapters 10-12; the others run
    with the settings of :func:`stddial_book.experiments.allocation.testbed_runs.lm_allocation_changes`).

    ``profile`` is the run profile (:class:`~stddial_book.rl.profiles.Profile`); ``recipes``, ``allocations``
    and ``seeds`` list the recipe names, rule names and seeds to run; ``work`` is the work directory (runs,
    checkpoints, the warm start) and ``out`` the recorded folder the logs go to; ``sft_seed`` seeds the one
    warm start (default 0); ``progress`` shows progress bars; ``command`` is the command line written into
    each provenance; ``allow_dirty`` lets a checkout with uncommitted changes record (the provenance says so).
    Returns the recorded run folders."""
    from stddial_book.core.outdir import claim_dir, replace_own
    from stddial_book.experiments.allocation.testbed_runs import lm_allocation_changes
    from stddial_book.experiments.testbed.runs import remove_stale_run, sft_to_dir, train_to_dir
    from stddial_book.rl.checkpoints import checkpoint_dir

    check_record(profile, recipes, seeds, work, out, allow_dirty, allocations)
    work, out = claim_dir(work, WORK_KIND, flag="--work"), claim_dir(out, RECORDED_KIND)
    sft_dir = work / f"sft-seed{sft_seed}"
    if not (sft_dir / "model.safetensors").exists():
        sft_to_dir(profile, sft_seed, sft_dir, progress=progress, command=command)
    publish_run(sft_dir, out / "sft", allow_dirty, ("sft.json",))
    written = []
    for recipe in recipes:
        for rule in allocations:
            for seed in seeds:
                name = run_name(recipe, rule, seed)
                run = work / name
                if not (run / "done").exists():
                    resume = checkpoint_dir(run) is not None
                    if not resume:
                        remove_stale_run(run)
                    base = profile.train_config(recipe, seed)
                    changes = lm_allocation_changes(rule, base.prompts_per_step, base.group_size)
                    train_to_dir(
                        profile,
                        recipe,
                        seed,
                        sft_dir,
                        run,
                        resume=resume,
                        progress=progress,
                        command=command,
                        **changes,
                    )
                    replace_own(run, "done", "finished\n")
                written.append(publish_run(run, out / name, allow_dirty))
    return written


def publish_run(src: Path, dst: str | os.PathLike, allow_dirty: bool, extra: Sequence[str] = ()) -> Path:
    """Write a finished run's compressed log and provenance (and ``extra`` files) into ``dst``, a new
    recorded folder (:func:`stddial_book.core.outdir.claim_dir`); a provenance from a dirty tree is
    refused unless ``allow_dirty``.

    A recorded folder is written once and never re-opened: one that already holds its provenance
    (written last) is returned as it is. Each file is written by an atomic rename, never through a link.
    ``src`` is the finished run's directory (with ``metrics.jsonl`` and ``provenance.json``)."""
    from stddial_book.core.outdir import atomic_write, claim_dir, own_path
    from stddial_book.core.resources import sha256
    from stddial_book.rl.runlog import read_json, write_gzip

    provenance = read_json(src / "provenance.json")
    if provenance.get("dirty") and not allow_dirty:
        raise ValueError(
            f"{src} was run from a checkout with uncommitted changes; nothing was recorded: record from a "
            "commit into a new --work directory, or pass --allow-dirty."
        )
    dst = claim_dir(dst, RECORDED_KIND)
    if (dst / "provenance.json").is_file() and not (dst / "provenance.json").is_symlink():
        return dst  # recorded earlier: never re-opened for writing
    if provenance.get("dirty"):
        provenance["dirty_allowed"] = True
    if (src / "model.safetensors").is_file():  # the warm start: the model every recorded run began from
        provenance["model_sha256"] = sha256(src / "model.safetensors")
    atomic_write(own_path(dst, "metrics.jsonl.gz"), lambda path: write_gzip(src / "metrics.jsonl", path))
    for name in extra:
        if (src / name).exists():
            atomic_write(own_path(dst, name), (src / name).read_bytes())
    atomic_write(own_path(dst, "provenance.json"), (json.dumps(provenance, indent=2) + "\n").encode())
    return dst


_publish = publish_run  # the name earlier versions used
