"""The command line: ``python -m stddial_book sft|train|record|record-ablation|eval|diagnose|measure|record-lm``
(chapter 9 shows the training commands; ``record-ablation`` records chapter 13's dial-only ablation,
:mod:`stddial_book.experiments.ablation.study`).

``sft``, ``train``, ``record`` and ``eval`` read their sizes from a profile (``quick`` and
``reference`` on a CPU, ``full`` on a GPU) and write everything into one output directory, so a run
can be plotted with :func:`stddial_book.rl.runlog.load_run` and resumed with ``--resume``.
``diagnose FILE`` reads a reader's solve-rate table and prints what the closed forms say about it
(silent fraction by G, DAPO's draws, G*, where the gradient sits, each allocation rule's plan).
``measure`` samples a model on every prompt of a file and writes the per-prompt counts ``diagnose`` reads;
``record-lm`` records chapter 15's runs: GRPO, Dr. GRPO and DAPO on a pretrained language model with
TRL and LoRA, over given seeds, each run's log and provenance (naming the device) into one directory
(:mod:`stddial_book.bridges.lm_cli`, :mod:`stddial_book.bridges.lm_record`); the GPU preset refuses without
CUDA unless ``--allow-cpu`` is given.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from stddial_book import __version__
from stddial_book.bridges.lm_cli import add_measure, add_record_lm, count_type, main_measure, main_record_lm
from stddial_book.core.checks import MAX_SEED
from stddial_book.core.outdir import expand_path
from stddial_book.theory.recipes import RECIPES

__all__ = ["main", "build_parser"]

# The quick profile's times, measured with `time` on one core (OMP_NUM_THREADS=1): `train --recipe dapo
# --profile quick` took 3 min 35 s, of which the SFT warm start 192 s and the DAPO run 18 s.
EXAMPLES = """\
examples:
  python -m stddial_book train --recipe dapo --profile quick
        warm-start a tiny model with SFT, then train it with DAPO; about 3.5 minutes on one CPU core
  python -m stddial_book sft --profile quick --out runs/sft
        only the warm start; later runs can share it with --init runs/sft
  python -m stddial_book train --recipe grpo --init runs/sft --seed 1 --out runs/grpo-1
  python -m stddial_book train --recipe grpo --init runs/sft --seed 1 --out runs/grpo-1 --resume
        continue an interrupted run from its last checkpoint (same result as never stopping)
  python -m stddial_book record --profile reference
        the book's recorded reference runs: every recipe over five seeds, logs into runs/recorded-reference
  python -m stddial_book eval --checkpoint runs/grpo-1
        held-out accuracy per difficulty bucket, greedy and sampled, as JSON
  python -m stddial_book diagnose my_solve_counts.csv --budget 65536 --out runs/diagnosis
        your own prompts' solve counts: silent groups by G, DAPO's refill, G*, allocation plans
  python -m stddial_book measure --model smollm2 --prompts pool.jsonl --samples 16 --out runs/pool
        SmolLM2-135M-Instruct's pass rate on each prompt (runs/pool/pool.csv, for diagnose)
  python -m stddial_book record-lm --preset smollm2 --dataset pool.jsonl --seeds 0 1 2 --allow-cpu
        every recipe on SmolLM2-135M-Instruct with TRL and LoRA (about a minute a step on one CPU core)
  python -m stddial_book record-lm --seeds 0 1
        the GPU run: every recipe on Qwen2.5-0.5B-Instruct and GSM8K with TRL
"""


#: The most samples per prompt ``eval`` draws: far beyond what an accuracy needs, and small enough that
#: the held-out set's samples fit in memory.
MAX_EVAL_SAMPLES = 4096


def _seed(text: str) -> int:
    """An argparse type: a seed, 0 to :data:`stddial_book.core.checks.MAX_SEED`."""
    return _count(0, MAX_SEED, "a seed")(text)


_count = count_type


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad argument reported on one line (``error: ...``, exit code 2)."""

    def error(self, message: str):
        self.exit(
            2, f"error: {self.prog.removeprefix('python -m stddial_book ')}: {message} (see {self.prog} --help)\n"
        )


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m stddial_book``: one subcommand each for sft, train, record and eval (chapter 9)."""
    parser = _Parser(
        prog="python -m stddial_book",
        description="Train the book's tiny model on the addition task with GRPO, Dr. GRPO or DAPO "
        "(three settings of one dial: the group's reward std).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"stddial-book {__version__}",
        help="print the package's version and exit",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="{sft,train,record,record-ablation,eval,diagnose,measure,record-lm}"
    )
    _add_sft(sub)
    _add_train(sub)
    _add_record(sub)
    _add_record_ablation(sub)
    _add_eval(sub)
    _add_diagnose(sub)
    add_measure(sub)
    add_record_lm(sub, _seed)
    return parser


def _add_common(p: argparse.ArgumentParser) -> None:
    """The options every subcommand takes: ``--profile`` and ``--progress``."""
    p.add_argument(
        "--profile",
        default=None,
        metavar="NAME",
        help="quick (CPU: the SFT warm start about 3 minutes on one core, then about 20 seconds a run), "
        "reference (CPU, a few minutes a run: the recorded runs) or full (GPU; not run by the authors); default: "
        "$STDDIAL_PROFILE, else full if a CUDA GPU is visible, else quick",
    )
    p.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=True, help="show a progress bar (default: on)"
    )


def _add_sft(sub) -> None:
    """``sft``: the supervised warm start."""
    p = sub.add_parser(
        "sft",
        help="supervised warm start until a held-out pass rate is reached",
        description="Supervised warm start: train on correct answers until the measured "
        "held-out pass rate reaches the profile's target.",
    )
    _add_common(p)
    p.add_argument("--seed", type=_seed, default=0, help="seed of the model's initialisation and batches")
    p.add_argument("--out", type=Path, default=None, help="output directory (default: runs/sft-PROFILE-seedS)")


def _add_train(sub) -> None:
    """``train``: RL with one recipe, from a warm start (``--init``) or after its own SFT."""
    p = sub.add_parser(
        "train",
        help="RL with one recipe (runs SFT first unless --init is given)",
        description="RL from a warm-started model with one recipe; writes metrics.jsonl, "
        "provenance.json and checkpoints into --out.",
    )
    _add_common(p)
    p.add_argument("--recipe", required=True, metavar="NAME", help="grpo, dr_grpo or dapo")
    p.add_argument("--seed", type=_seed, default=0, help="seed of prompt order, sampling and minibatches")
    p.add_argument(
        "--init",
        type=Path,
        default=None,
        help="an SFT directory written by the sft command (default: run SFT into OUT/sft)",
    )
    p.add_argument("--out", type=Path, default=None, help="output directory (default: runs/RECIPE-PROFILE-seedS)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument(
        "--sample-budget",
        type=_count(1, 10**9),
        default=None,
        metavar="N",
        help="stop after N generated samples (default: the profile's)",
    )
    p.add_argument(
        "--micro-batch-size",
        type=_count(1, 10**6),
        default=None,
        metavar="N",
        help="samples per forward/backward pass (lower it if the GPU runs out of memory)",
    )


def _add_record(sub) -> None:
    """``record``: the recorded reference runs, every recipe over the profile's seeds."""
    p = sub.add_parser(
        "record",
        help="the recorded reference runs: one SFT, every recipe over several seeds",
        description="Run (or resume) every recipe over the profile's seeds from one SFT model "
        "and copy each run's metrics.jsonl and provenance.json to --out.",
    )
    _add_common(p)
    p.add_argument("--recipes", nargs="+", default=list(RECIPES), metavar="NAME")
    p.add_argument(
        "--allocations",
        nargs="+",
        default=["uniform"],
        metavar="RULE",
        help="allocation rules (Part V), each run for every recipe and seed (default: uniform, the plain loop)",
    )
    p.add_argument(
        "--seeds", nargs="+", type=_seed, default=None, metavar="S", help="RL seeds (default: the profile's)"
    )
    p.add_argument(
        "--work", type=Path, default=None, help="where the runs and checkpoints live (default: runs/record-PROFILE)"
    )
    p.add_argument("--out", type=Path, default=None, help="a new folder for the logs (default: runs/recorded-PROFILE)")
    p.add_argument(
        "--allow-dirty",
        action="store_true",
        help="record from a checkout with uncommitted changes (refused otherwise; the provenance says so)",
    )


def _shard(text: str) -> tuple[int, int]:
    """An argparse type: ``i/n``, this process's share of the runs (every n-th from the i-th)."""
    parts = text.split("/")
    if len(parts) != 2 or not all(p.isdigit() for p in parts) or not int(parts[0]) < int(parts[1]):
        raise argparse.ArgumentTypeError(f"{text!r} is not a shard; give i/n with 0 <= i < n, e.g. 0/2 and 1/2.")
    return int(parts[0]), int(parts[1])


def _add_record_ablation(sub) -> None:
    """``record-ablation``: chapter 13's dial-only ablation (:mod:`stddial_book.experiments.ablation.study`)."""
    p = sub.add_parser(
        "record-ablation",
        help="chapter 13's dial-only ablation: every arm x cell x seed, logs and provenance into --out",
        description="Record (or resume) the dial-only ablation's runs, seed by seed, from one warm start.",
    )
    _add_common(p)
    p.set_defaults(profile="reference")  # the design's run sizes are the reference testbed's
    p.add_argument("--seeds", nargs="+", type=_seed, default=None, metavar="S", help="default: the design's")
    p.add_argument("--work", type=Path, default=Path("runs") / "record-ablation", help="runs and checkpoints")
    p.add_argument("--out", type=Path, default=Path("runs") / "recorded-ablation", help="a new folder for the logs")
    p.add_argument("--init", type=Path, default=None, help="an SFT directory to start from (default: made in --work)")
    p.add_argument("--shard", type=_shard, default=(0, 1), help="i/n: this process's share, e.g. 0/2 and 1/2")
    p.add_argument("--allow-dirty", action="store_true", help="record from uncommitted changes (the provenance says)")


def _add_eval(sub) -> None:
    """``eval``: held-out accuracy of a checkpoint per difficulty bucket, greedy and sampled."""
    p = sub.add_parser(
        "eval",
        help="held-out accuracy of a checkpoint, per difficulty bucket",
        description="Greedy and sampled held-out accuracy, per difficulty bucket, as JSON.",
    )
    _add_common(p)
    p.add_argument(
        "--checkpoint", type=Path, required=True, help="a run directory (uses its last checkpoint) or an SFT directory"
    )
    p.add_argument(
        "--samples",
        type=_count(1, MAX_EVAL_SAMPLES),
        default=8,
        help=f"samples per prompt for the sampled accuracy (1 to {MAX_EVAL_SAMPLES})",
    )
    p.add_argument("--seed", type=_seed, default=0, help="seed of the evaluation samples")


def _add_diagnose(sub) -> None:
    """``diagnose``: a reader's own solve-rate table, through the book's closed forms."""
    p = sub.add_parser(
        "diagnose",
        help="your prompts' solve rates: silent groups by G, DAPO's refill, G*, allocation plans, what to prune",
        description="Read per-prompt solve counts (or pass rates), or per-completion rows (a prompt column and a "
        "0/1 reward: TRL's completions/*.parquet log, an evaluation harness's samples), grouped per prompt, from "
        "a CSV, Parquet or JSONL file, a folder of Parquet files or a Hugging Face dataset id, and print the "
        "silent fraction by G (closed form and subsampled), DAPO's draws per kept group, the group-size law's "
        "G*, the gradient mass by tenth of p, each allocation rule's plan for a budget of generated samples, "
        "and a recommendation: what to prune, the G to use, the silent fraction left.",
    )
    p.add_argument(
        "file",
        metavar="FILE",
        help="a .csv, .parquet or .jsonl file, a folder of .parquet files (TRL's OUTPUT_DIR/completions) or a dataset id",
    )
    p.add_argument(
        "--rows",
        default="auto",
        choices=("auto", "prompts", "completions"),
        help="what one row is; completions are grouped per prompt (default: auto, from the columns)",
    )
    p.add_argument(
        "--prompt", metavar="COL", help="column naming each prompt (default: prompt_id, id, uid, prompt, ...)"
    )
    p.add_argument(
        "--reward",
        metavar="COL",
        help="per completion: the 0/1 reward column (default: correct, reward, ..., or a TRL log's one 0/1 reward)",
    )
    p.add_argument("--correct", default="correct", metavar="COL", help="column of successes k (default: correct)")
    p.add_argument(
        "--samples",
        default="samples",
        metavar="COL|N",
        help="column of samples n per prompt, or one number for every prompt (default: the column samples)",
    )
    p.add_argument("--pass-rate", default=None, metavar="COL", help="a column of pass rates p instead of counts")
    p.add_argument("--config", default=None, metavar="NAME", help="the dataset config, for a hub dataset id")
    p.add_argument(
        "--budget",
        type=_count(1, 10**12),
        default=None,
        metavar="N",
        help="generated samples (completions) the plans share (default: 8 per prompt)",
    )
    p.add_argument(
        "--epsilon", type=float, default=0.05, metavar="EPS", help="tolerance of the group-size law (default: 0.05)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--out", type=Path, default=None, help="a new directory for the figure and the report")
    p.add_argument(
        "--kept-ids",
        default=None,
        metavar="FILE",
        help="a new file for the ids of the prompts the recommendation keeps (0 < p < 1), one JSON value a line",
    )


def run_diagnose(args) -> dict:
    """The ``diagnose`` subcommand: checks --out first, reads the file, prints the report, writes --out last."""
    from stddial_book.core.outdir import check_claimable
    from stddial_book.experiments.diagnose.advice import check_new_file, kept_ids, write_kept_ids
    from stddial_book.experiments.diagnose.report import diagnose, diagnosis_text, load_pool

    if args.out is not None:
        check_claimable(args.out, "--out", "diagnose")
    if args.kept_ids is not None:
        check_new_file(args.kept_ids)
    pool = load_pool(
        args.file,
        args.correct,
        args.samples,
        args.pass_rate,
        args.config,
        rows=args.rows,
        prompt=args.prompt,
        reward=args.reward,
    )
    if args.kept_ids is not None:
        kept_ids(pool)  # refuses a pool without ids before anything is written
    report = diagnose(pool, budget=args.budget, epsilon=args.epsilon)
    for warning in report["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    text = diagnosis_text(report)
    written = []
    if args.out is not None:
        from stddial_book.presentation.diagnose_figure import write_diagnosis

        written += [str(path) for path in write_diagnosis(report, args.out, text)]
    if args.kept_ids is not None:
        written.append(str(write_kept_ids(pool, args.kept_ids)))
    report["written"] = written
    print(json.dumps(report, indent=2, allow_nan=False) if args.json else text, end="\n" if args.json else "")
    if report["written"] and not args.json:
        print(f"wrote {', '.join(report['written'])}")
    return report


def run_train(args, profile, command: str) -> Path:
    from stddial_book.experiments.testbed.runs import sft_to_dir, train_to_dir
    from stddial_book.theory.recipes import get_recipe, recipe_key

    recipe = get_recipe(args.recipe)
    out = args.out or Path("runs") / f"{recipe_key(args.recipe)}-{profile.name}-seed{args.seed}"
    changes = {}
    if args.sample_budget is not None:
        changes["sample_budget"] = args.sample_budget
    if args.micro_batch_size is not None:
        changes["micro_batch_size"] = args.micro_batch_size
    # everything that can be checked is checked before any work starts (SFT takes minutes)
    profile.train_config(recipe, args.seed, **changes)
    init = None if args.init is None else expand_path(args.init)
    if init is not None and not (init / "model.safetensors").is_file():
        raise ValueError(
            f"--init {init} holds no SFT model (model.safetensors); pass a directory written by "
            "the sft command, or leave --init out to run SFT first."
        )
    out = _check_out(out, args.resume)
    if init is None:
        init = out / "sft"
        if not (init / "model.safetensors").exists():
            if args.resume:
                raise ValueError(f"cannot resume: {init} holds no SFT model; start the run without --resume.")
            sft_to_dir(profile, 0, init, args.progress, command)
    result = train_to_dir(
        profile, recipe, args.seed, init, out, resume=args.resume, progress=args.progress, command=command, **changes
    )
    final = result.final_eval
    print(
        json.dumps(
            {
                "out": str(out),
                "steps": result.steps,
                "samples_generated": result.samples_generated,
                "samples_kept": result.samples_kept,
                "updates": result.updates,
                "accuracy_greedy": final.greedy if final else None,
                "accuracy_sampled": final.sampled if final else None,
            },
            indent=2,
        )
    )
    return out


def _check_out(out: Path, resume: bool) -> Path:
    """The run directory, checked before anything is computed (and, for a new run, created and
    marked as the tool's: :func:`stddial_book.core.outdir.claim_dir`)."""
    from stddial_book.core.outdir import check_claimable, claim_dir, owns, require_owned
    from stddial_book.rl.checkpoints import checkpoint_dir

    if not resume:
        out = check_claimable(out)
        if owns(out) and (out / "metrics.jsonl").exists():
            raise ValueError(f"{out} already holds a run; pass --resume to continue it or choose another --out.")
        return claim_dir(out, "train")
    out = require_owned(out)
    if checkpoint_dir(out) is None:
        raise ValueError(f"cannot resume: {out} holds no checkpoint; run without --resume first.")
    return out


def run_eval(args, profile) -> dict:
    import torch

    from stddial_book.experiments.testbed.runs import load_model_from
    from stddial_book.rl.batches import make_problems
    from stddial_book.rl.evaluate import evaluate

    model = load_model_from(profile, expand_path(args.checkpoint))
    _, heldout = make_problems(profile.task_config())
    gen = torch.Generator(device=profile.device).manual_seed(args.seed)
    result = evaluate(model, heldout, profile.train["max_new_tokens"], args.samples, gen)
    report = {"checkpoint": str(args.checkpoint), **result.metrics(prefix="")}
    print(json.dumps(report, indent=2))
    return report


def _oom_advice(profile, args) -> str:
    lines = [f"the GPU ran out of memory in profile {profile.name!r}. Try, in this order:"]
    minibatch = profile.train_config(getattr(args, "recipe", "grpo") or "grpo").minibatch_samples
    micro = getattr(args, "micro_batch_size", None) or minibatch
    lines.append(f"  --micro-batch-size {max(1, micro // 2)}   (same result, less memory per pass)")
    if profile.name != "quick":
        lines.append("  --profile quick              (the small model; runs on any GPU or a CPU)")
    lines.append("  and close other programs using the GPU (nvidia-smi lists them).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m stddial_book``: parse ``argv`` (the arguments after the program's name; ``None``, the
    default, reads ``sys.argv[1:]``), run the subcommand and return its exit status: 0 when done, 2 for a
    bad argument or a refusal (one line), 3 when the GPU ran out of memory, 130 when interrupted."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help (0) or a bad argument (2, reported on one line by _Parser)
        return done.code if isinstance(done.code, int) else 2
    if args.command == "diagnose":  # needs neither torch nor a profile
        return _main_diagnose(args)
    if args.command == "record-lm":  # chapter 15's run: its own sizes, no profile
        return main_record_lm(args, argv)
    if args.command == "measure":  # a model's pass rates on a prompt file (chapter 16's first step)
        return main_measure(args)
    import torch

    from stddial_book.rl.profiles import active_profile

    command = "python -m stddial_book " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    try:
        profile = active_profile(args.profile)
        if args.command == "sft":
            from stddial_book.experiments.testbed.runs import sft_to_dir

            sft_to_dir(
                profile,
                args.seed,
                args.out or Path("runs") / f"sft-{profile.name}-seed{args.seed}",
                args.progress,
                command,
            )
        elif args.command == "train":
            run_train(args, profile, command)
        elif args.command in ("record", "record-ablation"):
            for path in _record(args, profile, command):
                print(f"recorded {path}")
        else:
            run_eval(args, profile)
    except torch.cuda.OutOfMemoryError:
        print("error: " + _oom_advice(profile, args), file=sys.stderr)
        return 3
    except (ValueError, TypeError) as err:  # the package's own checks: the message names the fix
        print(f"error: {_one_line(err)}", file=sys.stderr)
        return 2
    except OSError as err:  # a path that is missing, not writable, or a file where a directory should be
        where = f": {err.filename}" if getattr(err, "filename", None) else ""
        print(f"error: {err.strerror or err}{where}; check the path and its permissions.", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; a train run continues from its last checkpoint with --resume.", file=sys.stderr)
        return 130
    return 0


def _record(args, profile, command: str) -> list:
    """``record`` (the reference runs, under allocation rules too) or ``record-ablation`` (chapter 13)."""
    if args.command == "record-ablation":
        from stddial_book.experiments.ablation.record import record_ablation
        from stddial_book.experiments.ablation.study import DESIGN_SEEDS

        seeds = args.seeds or list(range(DESIGN_SEEDS))
        return record_ablation(
            profile, seeds, args.work, args.out, init=args.init, shard=args.shard,
            allow_dirty=args.allow_dirty, progress=args.progress, command=command,
        )  # fmt: skip
    from stddial_book.experiments.testbed.record import record_runs

    return record_runs(
        profile,
        args.recipes,
        args.seeds or list(profile.seeds),
        args.work or Path("runs") / f"record-{profile.name}",
        args.out or Path("runs") / f"recorded-{profile.name}",  # a new folder: committed runs are never re-opened
        progress=args.progress,
        command=command,
        allow_dirty=args.allow_dirty,
        allocations=args.allocations,
    )


def _main_diagnose(args) -> int:
    try:
        run_diagnose(args)
    except BrokenPipeError:  # the reader piped the report into head: what was read is all they wanted
        sys.stderr.close()
        return 0
    except (ValueError, TypeError) as err:  # the reader's data or options: the message names the fix
        print(f"error: {_one_line(err)}", file=sys.stderr)
        return 2
    except OSError as err:
        where = f": {err.filename}" if getattr(err, "filename", None) else ""
        print(f"error: {err.strerror or err}{where}; check the path and its permissions.", file=sys.stderr)
        return 2
    return 0


def _one_line(err: Exception) -> str:
    from stddial_book.core.checks import printable

    return " ".join(printable(err).split())  # no escape code from a file name or header
