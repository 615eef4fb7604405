"""Recorded reference runs: one SFT warm start, then every recipe over several seeds (chapters 9-13).

``python -m stddial_book record --profile reference`` runs them one after another in a work
directory (default ``runs/record-<profile>``), resuming any run an interruption left behind, and
writes each finished run's log, compressed (``metrics.jsonl.gz``), and ``provenance.json`` (never
its checkpoints) to ``data/runs/<profile>/<recipe>-seed<k>/``, plus the warm start's to
``data/runs/<profile>/sft/``. A recorded run must be reproducible: ``record`` refuses a checkout
with uncommitted changes to tracked files unless ``allow_dirty`` is set, which the provenance then
says. Each provenance names the commit, the SFT model's sha256, the versions, the device and the
wall time summed over resumed segments; the book plots these logs beside its live runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["record_runs", "check_record", "run_name", "RECORDED_FILES"]

#: What goes from a finished run into data/runs: the compressed log and its provenance, nothing heavy.
RECORDED_FILES = ("metrics.jsonl.gz", "provenance.json")


def run_name(recipe, allocation: str, seed: int) -> str:
    """A recorded run's directory name: ``grpo-seed0``, or ``grpo-knapsack-seed0`` under a rule."""
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
    checkout. Returns (commit, dirty)."""
    from stddial_book.core.outdir import check_claimable
    from stddial_book.experiments.allocation_lm import lm_allocation_changes
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
    for flag, path in (("--work", work), ("--out", out)):
        check_claimable(path, flag)
    commit, dirty = git_state()
    refuse_dirty(commit, dirty, allow_dirty)
    return commit, dirty


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
    with the settings of :func:`stddial_book.experiments.allocation_lm.lm_allocation_changes`)."""
    from stddial_book.core.outdir import claim_dir
    from stddial_book.experiments.allocation_lm import lm_allocation_changes
    from stddial_book.experiments.testbed import remove_stale_run, sft_to_dir, train_to_dir
    from stddial_book.rl.checkpoints import checkpoint_dir

    check_record(profile, recipes, seeds, work, out, allow_dirty, allocations)
    work, out = claim_dir(work, "record-work", flag="--work"), claim_dir(out, "recorded")
    sft_dir = work / f"sft-seed{sft_seed}"
    if not (sft_dir / "model.safetensors").exists():
        sft_to_dir(profile, sft_seed, sft_dir, progress=progress, command=command)
    _publish(sft_dir, claim_dir(out / "sft", "recorded"), allow_dirty, ("sft.json",))
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
                    (run / "done").write_text("finished\n")
                written.append(_publish(run, claim_dir(out / name, "recorded"), allow_dirty))
    return written


def _publish(src: Path, dst: Path, allow_dirty: bool, extra: Sequence[str] = ()) -> Path:
    """Write a finished run's compressed log and provenance (and ``extra`` files) into the marked
    directory ``dst``; a provenance from a dirty tree is refused unless ``allow_dirty``."""
    from stddial_book.core.resources import sha256
    from stddial_book.rl.runlog import read_json, write_gzip

    provenance = read_json(src / "provenance.json")
    if provenance.get("dirty") and not allow_dirty:
        raise ValueError(
            f"{src} was run from a checkout with uncommitted changes; rerun it from a commit (delete "
            "the work directory's run) or pass --allow-dirty."
        )
    if provenance.get("dirty"):
        provenance["dirty_allowed"] = True
    if (src / "model.safetensors").is_file():  # the warm start: the model every recorded run began from
        provenance["model_sha256"] = sha256(src / "model.safetensors")
    write_gzip(src / "metrics.jsonl", dst / "metrics.jsonl.gz")
    (dst / "provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
    for name in extra:
        if (src / name).exists():
            (dst / name).write_bytes((src / name).read_bytes())
    return dst
