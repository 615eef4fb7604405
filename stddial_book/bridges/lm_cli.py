"""The language-model commands of ``python -m stddial_book``: ``measure`` and ``record-lm`` (chapters 7, 15, 16).

``measure`` samples a model's completions of every prompt of a file and writes the per-prompt counts that
``diagnose`` reads (:mod:`stddial_book.bridges.lm_measure`). ``record-lm`` records the recipes on a pretrained
model with TRL (:mod:`stddial_book.bridges.lm_record`): the GPU run (Qwen2.5-0.5B-Instruct on GSM8K) by
default, or ``--preset smollm2``, SmolLM2-135M-Instruct on the graded arithmetic pool, which a CPU runs.
Every check comes before anything is written; a refusal is one line and exit status 2.

``record-lm`` runs as it is under ``torchrun --nproc_per_node N`` or ``accelerate launch --num_processes N``:
every process trains the run together, the main one alone checks and writes, and a refusal ends every
process with the same line and status 2 (:mod:`stddial_book.bridges.lm_record`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

__all__ = ["LM_SIZES", "count_type", "add_measure", "add_record_lm", "main_measure", "main_record_lm", "run_record_lm"]

#: ``record-lm``'s size options: (flag, LMRunConfig field, what it is).
LM_SIZES = (
    ("--num-prompts", "num_prompts", "questions drawn from the dataset"),
    ("--group-size", "group_size", "G, completions per question"),
    ("--prompts-per-step", "prompts_per_step", "P, questions per optimizer step"),
    ("--micro-batch-size", "micro_batch_size", "completions per forward/backward pass (lower it on out-of-memory)"),
    ("--max-new-tokens", "max_new_tokens", "L_max, the generation cap"),
    ("--max-steps", "max_steps", "optimizer steps per run"),
    ("--eval-samples", "eval_samples", "completions per question when measuring held-out or pool accuracy"),
)

#: ``record-lm``'s other settings: (flag, LMRunConfig field, type, what it is).
LM_SETTINGS = (
    ("--learning-rate", "learning_rate", float, "AdamW's constant learning rate of the LoRA adapters"),
    ("--temperature", "temperature", float, "the sampling temperature"),
    ("--system-prompt", "system_prompt", str, "the system message before every question"),
    ("--eval", "eval_file", str, "a .jsonl of held-out questions measured before and after each run"),
    ("--verifier", "verifier", str, "how the reward checks an answer: math-verify or last-number"),
)

PRESETS = ("gpu", "smollm2")


def count_type(low: int, high: int, what: str = "a whole number"):
    """An argparse type (every command's): a whole number from ``low`` to ``high``; argparse prints the message.

    ``low`` and ``high`` are the inclusive bounds; ``what`` names the value in the messages (default
    ``"a whole number"``, e.g. ``"a seed"``) and, without its leading ``"a "``, names the parser function.
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {what}; give a whole number from {low} to {high}."
            ) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range; give {what} from {low} to {high}.")
        return value

    parse.__name__ = what.removeprefix("a ").replace(" ", "_")
    return parse


def add_record_lm(sub: Any, seed: Any) -> None:
    """``record-lm``: every recipe over the given seeds on a pretrained LM, recorded.

    Adds the subcommand and its options to ``sub``, the object ``ArgumentParser.add_subparsers`` returned;
    ``seed`` is the argparse type that parses each ``--seeds`` value (the package's own checks the range).
    """
    p = sub.add_parser(
        "record-lm",
        help="every recipe on a pretrained LM with TRL and LoRA, recorded with provenance (GPU, or --preset smollm2)",
        description="Train GRPO, Dr. GRPO and DAPO (TRL's settings) on a pretrained language model with LoRA and "
        "math-verify rewards, once per recipe and seed, from a clean commit; resume an interrupted run from its "
        "last checkpoint; write each run's metrics.jsonl.gz (the dial's diagnostics and TRL's log per step), "
        "eval.json.gz (held-out and pool accuracy before and after, with --eval / --measure-pool) and "
        "provenance.json (the device, dtype, memory estimate, versions, input hashes) to --out. The gpu preset "
        "(Qwen2.5-0.5B-Instruct on GSM8K) needs a CUDA GPU; --preset smollm2 (SmolLM2-135M-Instruct, Q4_1 "
        "dequantized, on the arithmetic pool) runs on a CPU too, with --allow-cpu: about a minute a step on one core.",
    )
    p.add_argument("--preset", choices=PRESETS, default="gpu", help="the run's model and sizes (default: gpu)")
    p.add_argument(
        "--recipes", nargs="+", default=["grpo", "dr_grpo", "dapo"], metavar="NAME", help="default: all three"
    )
    p.add_argument("--seeds", nargs="+", type=seed, default=[0], metavar="S", help="seeds, one run each (default: 0)")
    p.add_argument(
        "--model", default=None, help="a hub id, a local model directory, or smollm2 (default: the preset's)"
    )
    p.add_argument(
        "--dataset", default=None, help="a hub id or a local .jsonl of GSM8K's schema (default: the preset's)"
    )
    p.add_argument("--dataset-config", default=None, metavar="NAME", help="the hub dataset's config")
    p.add_argument("--split", default=None, help="the hub dataset's split")
    for flag, field, what in LM_SIZES:
        p.add_argument(
            flag,
            dest=field,
            type=count_type(1, 10**7),
            default=None,
            metavar="N",
            help=f"{what} (default: the preset's)",
        )
    for flag, field, kind, what in LM_SETTINGS:
        p.add_argument(flag, dest=field, type=kind, default=None, help=f"{what} (default: the preset's)")
    p.add_argument(
        "--lora-r", type=count_type(1, 4096), default=None, metavar="R", help="LoRA's rank (default: the preset's)"
    )
    p.add_argument("--measure-pool", action="store_true", help="measure every training question before and after")
    p.add_argument(
        "--save-every",
        type=count_type(1, 10**7),
        default=10,
        metavar="N",
        help="checkpoint every N steps (default: 10)",
    )
    p.add_argument("--work", type=Path, default=None, help="runs and checkpoints (default: runs/record-lm)")
    p.add_argument(
        "--out", type=Path, default=None, help="where the logs go (default: a new folder runs/record-lm-out)"
    )
    p.add_argument("--allow-dirty", action="store_true", help="record from a checkout with uncommitted changes")
    p.add_argument("--allow-cpu", action="store_true", help="run without CUDA (the provenance then says cpu)")
    p.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=True, help="print a line every few steps"
    )


def lm_config(args: Any) -> Any:
    """The :class:`~stddial_book.bridges.lm_setup.LMRunConfig` the options ask for: the preset's, then each option
    given (checked when built)."""
    from stddial_book.bridges.lm_setup import colab_t4_config, smollm2_config

    if args.preset == "smollm2":
        if args.dataset is None:
            raise ValueError(
                "--preset smollm2 needs --dataset FILE: a .jsonl of the arithmetic pool (stddial_book.bridges.lm_pool."
                "write_pool) or any file of GSM8K's schema."
            )
        config = smollm2_config(args.model or "smollm2", args.dataset)
    else:
        config = colab_t4_config()
    changes = {}
    for name in ("model", "dataset", "dataset_config", "split"):
        value = getattr(args, name)
        if value is not None:
            changes[{"model": "model_id", "dataset": "dataset_id"}.get(name, name)] = value
    for _, field, _ in LM_SIZES:
        if getattr(args, field) is not None:
            changes[field] = getattr(args, field)
    for _, field, _, _ in LM_SETTINGS:
        if getattr(args, field) is not None:
            changes[field] = getattr(args, field)
    if args.lora_r is not None:
        changes.update(lora_r=args.lora_r, lora_alpha=2 * args.lora_r)
    if args.measure_pool:
        changes["measure_pool"] = True
    return config.replace(**changes)


def run_record_lm(args: Any, command: str) -> list[Path]:
    """The ``record-lm`` subcommand: every check first (:func:`~stddial_book.bridges.lm_record.check_record_lm`),
    then the runs; prints each recorded folder. Under several processes the main process checks and the others
    take its plan (or its refusal), and only the main one prints.

    ``args`` is the parsed ``argparse.Namespace`` of ``record-lm``; ``command`` the command line as typed,
    recorded in each run's provenance. Returns the folders written.
    """
    from stddial_book.bridges.lm_record import check_record_lm, record_lm_runs
    from stddial_book.bridges.lm_setup import on_main, process_layout

    config = lm_config(args)
    plan = on_main(
        check_record_lm,
        args.recipes,
        args.seeds,
        config,
        args.work or Path("runs") / "record-lm",
        args.out or Path("runs") / "record-lm-out",
        allow_cpu=args.allow_cpu,
        allow_dirty=args.allow_dirty,
        save_every=args.save_every,
    )
    written = record_lm_runs(plan, command=command, print_every=5 if args.progress else 0)
    if process_layout()["rank"] == 0:
        for path in written:
            print(f"recorded {path}")
    return written


def _command(argv: list[str] | None) -> str:
    return "python -m stddial_book " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))


def _fail(err: BaseException, what: str) -> int:
    if isinstance(err, OSError) and not isinstance(err, FileExistsError):
        where = f": {err.filename}" if getattr(err, "filename", None) else ""
        print(f"error: {what}: {err.strerror or err}{where}; check the path and its permissions.", file=sys.stderr)
    else:
        print(f"error: {what}: {' '.join(str(err).split())}", file=sys.stderr)
    return 2


def main_record_lm(args: Any, argv: list[str] | None) -> int:
    """``record-lm``: status 0, 2 for a refusal (one line; under several processes on every process), 3 for a
    GPU out of memory, 130 when interrupted.

    ``args`` is the parsed ``argparse.Namespace`` of ``record-lm``; ``argv`` the argument list the parser was
    given (``None``: ``sys.argv[1:]``), quoted back into the command line the provenance records.
    """
    import torch

    from stddial_book.bridges.lm_record import gpu_description
    from stddial_book.bridges.lm_setup import end_processes, start_processes

    started = finished = False
    try:
        started = start_processes(cpu=gpu_description() is None)
        run_record_lm(args, _command(argv))
        finished = True
    except torch.cuda.OutOfMemoryError:
        print(
            "error: the GPU ran out of memory; rerun the same command with a smaller --micro-batch-size (or "
            "--max-new-tokens): finished runs are kept and an interrupted one resumes from its last checkpoint.",
            file=sys.stderr,
        )
        return 3
    except (ValueError, TypeError, ImportError, OSError) as err:  # checks, missing extras, paths: one line
        return _fail(err, "record-lm")
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume from the last checkpoint.", file=sys.stderr)
        return 130
    finally:
        if started:
            end_processes(finished)
    return 0


def add_measure(sub: Any) -> None:
    """``measure``: a model's pass rate on every prompt of a file, the table ``diagnose`` reads.

    Adds the subcommand and its options to ``sub``, the object ``ArgumentParser.add_subparsers`` returned.
    """
    p = sub.add_parser(
        "measure",
        help="sample a model N times on every prompt of a file and write prompt_id, correct, samples (for diagnose)",
        description="Sample --samples completions of every question of --prompts (GSM8K's schema: question, answer "
        "ending in '#### N', optionally prompt_id) with the model, verify each as the training reward does (the "
        "reply's last number), and write OUT/pool.csv (prompt_id, correct, samples), the table that "
        "`python -m stddial_book diagnose OUT/pool.csv` reads, and OUT/measure.json (settings, wall time). "
        "Resumable: rerun the same command. On one CPU core SmolLM2-135M generates about 90 tokens/s, so 200 "
        "prompts × 16 samples × 24 tokens take about 15 minutes.",
    )
    p.add_argument("--model", required=True, help="a local model folder (save_pretrained), or smollm2")
    p.add_argument("--prompts", required=True, type=Path, help="a .jsonl file of GSM8K's schema")
    p.add_argument("--samples", required=True, type=count_type(2, 4096), metavar="N", help="completions per prompt")
    p.add_argument("--out", required=True, type=Path, help="a new folder (or this command's own, to resume)")
    p.add_argument("--system-prompt", default=None, help="the system message (default: 'Answer with just the number.')")
    p.add_argument("--max-new-tokens", type=count_type(1, 4096), default=24, metavar="N", help="default: 24")
    p.add_argument("--temperature", type=float, default=1.0, help="default: 1.0 (top_k 0, top_p 1)")
    p.add_argument("--batch-size", type=count_type(1, 1 << 16), default=64, metavar="N", help="completions a pass")
    p.add_argument("--seed", type=count_type(0, 2**31 - 1), default=0, metavar="S", help="default: 0")
    p.add_argument(
        "--verifier",
        choices=("last-number", "math-verify"),
        default="last-number",
        help="the answer check of column correct (default: last-number; both are written beside it)",
    )


def main_measure(args: Any) -> int:
    """``measure``: runs :func:`~stddial_book.bridges.lm_measure.measure_to_folder` with the options in ``args``
    (the parsed ``argparse.Namespace`` of ``measure``) and prints the table's path; status 0, 2 for a refusal
    (one line), 130 when interrupted."""
    from stddial_book.bridges.lm_measure import measure_to_folder

    try:
        if not (args.temperature > 0 and args.temperature < float("inf")):
            raise ValueError(f"--temperature must be a finite number > 0; got {args.temperature}.")
        table = measure_to_folder(
            args.model,
            args.prompts,
            args.samples,
            args.out,
            system_prompt=args.system_prompt,
            verifier=args.verifier,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            batch_size=args.batch_size,
            seed=args.seed,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except (ValueError, TypeError, ImportError, OSError) as err:
        return _fail(err, "measure")
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume.", file=sys.stderr)
        return 130
    print(f"measured {table}; next: python -m stddial_book diagnose {table}")
    return 0
