"""Recording the dial-only ablation (:mod:`stddial_book.experiments.ablation.study`): pilot, then every run.

``python -m stddial_book.experiments.ablation.record record --out ablation --work work-ablation``
runs, in a work directory, the warm start (or takes ``--init``), the pilot that sets SGD's rates
(:func:`stddial_book.experiments.ablation.study.matched_sgd_lrs` with the fractions
:func:`~stddial_book.experiments.ablation.study.choose_fractions` picks), then every arm × cell × seed, seed by
seed, resuming whatever an interruption left; each finished run's compressed log and provenance go
to ``--out`` exactly as ``record`` writes them (:func:`stddial_book.experiments.testbed.record.publish_run`),
with ``pilot.json`` beside them. ``--shard i/n`` splits the runs over n processes (one a core).
``study`` prints :func:`~stddial_book.experiments.ablation.study.ablation_study` of a recorded directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stddial_book.experiments.ablation.study import (
    ARMS,
    CELLS,
    DESIGN_SEEDS,
    PILOT_SGD_LR,
    TUNING_SEED,
    Cell,
    ablation_study,
    cell_settings,
    choose_fractions,
    matched_sgd_lrs,
    pilot_cells,
    pilot_changes,
    pool_accuracy,
    run_label,
    tuning_changes,
    tuning_runs,
)
from stddial_book.experiments.testbed.logs import logged_update_norm
from stddial_book.theory.recipes import Recipe

__all__ = ["record_ablation"]


def _settle(profile, recipe: Recipe, seed: int, init: Path, run: Path, changes: dict, progress: bool, command: str):
    """Run (or resume, or keep if finished) one run in the work directory ``run``, as ``record`` does."""
    from stddial_book.core.outdir import replace_own
    from stddial_book.experiments.testbed.runs import remove_stale_run, train_to_dir
    from stddial_book.rl.checkpoints import checkpoint_dir

    if (run / "done").exists():
        return
    resume = checkpoint_dir(run) is not None
    if not resume:
        remove_stale_run(run)  # only the run's own files, in a directory the tool marked
    train_to_dir(profile, recipe, seed, init, run, resume=resume, progress=progress, command=command, **changes)
    replace_own(run, "done", "finished\n")


def _pilot(profile, init: Path, work: Path, out: Path, cells, sizes: dict, allow_dirty: bool, command: str):
    """The step-size pilot, every run published to ``out/pilot-<label>``: the norm runs of
    :func:`~stddial_book.experiments.ablation.study.pilot_cells` (seed 0), then the SGD grid of
    :func:`~stddial_book.experiments.ablation.study.tuning_runs`. Returns (and writes to ``out/pilot.json``)
    the norms, the grid's pool accuracies, the chosen fractions and the SGD rates of the design."""
    from stddial_book.core.outdir import atomic_write, own_path
    from stddial_book.rl.runlog import load_run

    norms = {}
    for arm, cell in pilot_cells(cells):
        label = run_label(arm, cell, 0)
        run = _settled(profile, arm, 0, init, work, out, label, pilot_changes(cell, **sizes), allow_dirty, command)
        norms[label] = logged_update_norm(load_run(run)[1])
    accuracy = {}
    for label, arm, cell, fraction in tuning_runs(cells):
        lr = matched_sgd_lrs(norms, {cell.key: fraction})[f"{arm}-{cell.key}"]
        changes = tuning_changes(cell, lr, **sizes)
        run = _settled(profile, arm, TUNING_SEED, init, work, out, label, changes, allow_dirty, command)
        accuracy[label] = pool_accuracy(load_run(run)[1])
    fractions = choose_fractions(accuracy, cells)
    result: dict[str, Any] = {
        "update_norm": norms,
        "pilot_sgd_lr": PILOT_SGD_LR,
        "tuning_pool_accuracy": accuracy,
        "sgd_fraction": fractions,
        "sgd_lr": matched_sgd_lrs(norms, fractions),
    }
    if not (out / "pilot.json").is_file():  # the recorded folder's files are written once
        atomic_write(own_path(out, "pilot.json"), (json.dumps(result, indent=2) + "\n").encode())
    return result


def _settled(profile, arm, seed, init, work, out, label, changes, allow_dirty, command) -> Path:
    """A pilot run made (:func:`_settle`) in ``work/pilot-<label>`` and published to ``out``; its work directory."""
    from stddial_book.experiments.testbed.record import publish_run

    run = work / f"pilot-{label}"
    _settle(profile, ARMS[arm], seed, init, run, changes, False, command)
    publish_run(run, out / f"pilot-{label}", allow_dirty)
    return run


def _checked(seeds, shard, cells, work, out, allow_dirty: bool, init=None) -> None:
    """Everything checked before any work: seeds, shard, cells, both directories (apart, each the
    policy accepts), ``init`` (an SFT directory holding its model), a clean checkout."""
    from stddial_book.core.outdir import checked_path
    from stddial_book.experiments.testbed.record import check_directories
    from stddial_book.rl.runlog import git_state, refuse_dirty

    index, count = shard
    if isinstance(seeds, (str, int)) or not seeds or not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise ValueError(f"seeds must be a non-empty list of whole numbers >= 0, e.g. [0, 1, 2]; got {seeds!r}.")
    if not 0 <= index < count:
        raise ValueError(f"shard (i, n) must have 0 <= i < n; got {shard!r}.")
    if not cells or not all(isinstance(c, Cell) for c in cells):
        raise ValueError("cells must be a non-empty list of ablation.Cell.")
    check_directories(work, out)
    if init is not None:
        init = checked_path(init, "--init")
        if not (init / "model.safetensors").is_file():
            raise ValueError(
                f"--init {init} holds no SFT model (model.safetensors); nothing was changed: pass a directory "
                "the sft command wrote, or leave --init out to make the warm start in --work."
            )
    refuse_dirty(*git_state(), allow_dirty)


def record_ablation(
    profile,
    seeds: Sequence[int],
    work: str | os.PathLike,
    out: str | os.PathLike,
    *,
    init: str | os.PathLike | None = None,
    cells: Sequence[Cell] = CELLS,
    shard: tuple[int, int] = (0, 1),
    allow_dirty: bool = False,
    progress: bool = False,
    command: str = "",
    **sizes,
) -> list[Path]:
    """Record every arm × cell × seed into ``out`` as ``record`` records (compressed log and
    provenance, never checkpoints), resuming whatever an interruption left in ``work``.

    The warm start is ``init`` (an SFT directory) or made in ``work/sft-seed0``; then the pilot, then
    the runs seed by seed, so that a partial recording holds whole seeds of every arm and cell.
    ``shard``, a pair (i, n), takes every n-th run from the i-th (default (0, 1): all of them): n
    processes share the work, the warm start and the pilot made once under a lock while the others
    wait. ``sizes`` (``step_samples``,
    ``run_samples`` and TrainConfig fields) shrink the design for tests. A dirty checkout is refused
    unless ``allow_dirty`` (the provenance then says so); both directories go through
    :func:`stddial_book.core.outdir.claim_dir`, and nothing is ever deleted.

    ``profile`` is the :class:`~stddial_book.rl.profiles.Profile` whose model and training settings
    every run uses; ``seeds`` are the design seeds to record (whole numbers ≥ 0); ``work`` and
    ``out`` are the work and recorded directories; ``cells`` the factor cells to record (default:
    all eight); ``progress`` shows a progress bar per run; ``command`` is the command line written
    into each run's provenance (default empty). Returns the recorded run directories in ``out``."""
    from stddial_book.core.outdir import claim_dir, expand_path
    from stddial_book.experiments.testbed.record import RECORDED_KIND, WORK_KIND, publish_run
    from stddial_book.experiments.testbed.runs import cache_lock, sft_to_dir

    _checked(seeds, shard, cells, work, out, allow_dirty, init)
    work, out = claim_dir(work, WORK_KIND, flag="--work"), claim_dir(out, RECORDED_KIND)
    sft_dir = expand_path(init) if init is not None else work / "sft-seed0"
    with cache_lock(work / "sft-seed0"):
        if not (sft_dir / "model.safetensors").exists():
            sft_to_dir(profile, 0, sft_dir, progress=progress, command=command)
        publish_run(sft_dir, out / "sft", allow_dirty, ("sft.json",))
        lrs = _pilot(profile, sft_dir, work, out, cells, sizes, allow_dirty, command)["sgd_lr"]
    written = []
    plan = [(seed, cell, arm) for seed in seeds for cell in cells for arm in ARMS]
    for seed, cell, arm in plan[shard[0] :: shard[1]]:
        label = run_label(arm, cell, seed)
        lr = lrs[f"{arm}-{cell.key}"] if cell.optimizer == "sgd" else None
        _settle(profile, ARMS[arm], seed, sft_dir, work / label, cell_settings(cell, lr, **sizes), progress, command)
        written.append(publish_run(work / label, out / label, allow_dirty))
    return written


def main(argv: Sequence[str] | None = None) -> None:
    """``record`` (the seeds given, one shard) or ``study`` (print the study of ``--out`` as JSON)."""
    import argparse
    import shlex
    import sys

    from stddial_book.rl.profiles import PROFILES

    parser = argparse.ArgumentParser(prog="python -m stddial_book.experiments.ablation.record")
    parser.add_argument("action", choices=("record", "study"))
    parser.add_argument("--profile", default="reference", choices=sorted(PROFILES))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(DESIGN_SEEDS)))
    parser.add_argument("--work", default="work-ablation")
    parser.add_argument("--out", default="ablation")
    parser.add_argument("--init", default=None, help="an SFT directory to start from (default: made in --work)")
    parser.add_argument("--shard", default="0/1", help="i/n: every n-th run from the i-th")
    parser.add_argument("--allow-dirty", action="store_true")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if args.action == "study":
        print(json.dumps(ablation_study(args.out), indent=1))
        return
    index, count = (int(x) for x in args.shard.split("/"))
    words = list(sys.argv[1:] if argv is None else argv)
    record_ablation(
        PROFILES[args.profile],
        args.seeds,
        args.work,
        args.out,
        init=args.init,
        shard=(index, count),
        allow_dirty=args.allow_dirty,
        progress=not args.no_progress,
        command="python -m stddial_book.experiments.ablation.record " + shlex.join(words),
    )


if __name__ == "__main__":  # pragma: no cover
    main()
