"""Measure a model's pass rate on each prompt of a pool: the first step of chapter 16's procedure.

:func:`sample_completions` samples ``n`` completions of every prompt with ``model.generate`` (a KV cache,
pure temperature sampling: ``top_k=0``, ``top_p=1``, stated explicitly because a model's
``generation_config`` can silently truncate the distribution), batching prompts with left padding.
:func:`measure_rows` verifies each completion as the training reward does
(:func:`~stddial_book.bridges.lm_rewards.is_correct`, the reply's last number against the gold one) and
returns one row per prompt: ``prompt_id``, ``correct`` (k) and ``samples`` (n), the table that ``diagnose``
reads (:mod:`stddial_book.corpora.reader_pool`).

``python -m stddial_book measure`` (:func:`measure_to_folder`) writes that table into a folder it creates,
chunk by chunk, so an interrupted measurement resumes where it stopped (each chunk's random state is
derived from the seed and the chunk's index, so a resumed measurement draws what an uninterrupted one
would).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from stddial_book.bridges.smollm2 import file_sha256
from stddial_book.core.outdir import replace_own
from stddial_book.core.transformers_compat import dtype_argument
from stddial_book.corpora.measured_pool import pool_table_text

__all__ = [
    "chat_prompts",
    "sample_completions",
    "measure_rows",
    "read_prompt_rows",
    "check_measure",
    "measure_to_folder",
]

POOL, SETTINGS = "pool.csv", "measure.json"
MAX_SAMPLES = 4096


def read_prompt_rows(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a prompts file of GSM8K's schema (``question``, ``answer`` ending in ``#### N``), each with a
    ``prompt_id`` (the file's own, else the row's index); a ValueError naming the file and the fix otherwise.
    ``path`` is the ``.jsonl`` (or ``.json``) file; each row returned holds ``prompt_id``, ``question`` and
    ``gold`` (the number after ``####``)."""
    from stddial_book.bridges.lm_data import gsm8k_gold, read_gsm8k_file

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--prompts {path}: no such file (or not a regular file); pass a .jsonl of GSM8K's schema.")
    rows = read_gsm8k_file(path)
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if path.suffix == ".json":
        raw = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for i, (row, full) in enumerate(zip(rows, raw)):
        try:
            gold = gsm8k_gold(row["answer"])
        except ValueError:
            raise ValueError(
                f"--prompts {path}: row {i + 1}'s answer does not end in '#### N' (GSM8K's schema); fix that row."
            ) from None
        out.append({"prompt_id": str(full.get("prompt_id", i)), "question": row["question"], "gold": gold})
    ids = [r["prompt_id"] for r in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"--prompts {path}: prompt_id repeats; give every row its own prompt_id.")
    return out


def chat_prompts(tokenizer: Any, questions: Sequence[str], system_prompt: str | None) -> list[str]:
    """Each question as the model's chat prompt text (system prompt first when given), ready to generate.

    ``tokenizer`` is the model's Hugging Face tokenizer, whose chat template is applied with the generation
    prompt added; ``questions`` the user messages; ``system_prompt`` the system message (``None`` or empty:
    none)."""
    texts = []
    for question in questions:
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        messages.append({"role": "user", "content": question})
        texts.append(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    return texts


def sample_completions(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    samples: int,
    *,
    max_new_tokens: int = 24,
    temperature: float = 1.0,
    batch_size: int = 64,
    seed: int = 0,
) -> list[list[str]]:
    """``samples`` completions (text, special tokens removed) of each prompt text, sampled at ``temperature``
    with nothing truncated (``top_k=0``, ``top_p=1``), ``batch_size`` completions a forward pass at most.

    ``model`` and ``tokenizer`` are a Hugging Face causal LM and its tokenizer (prompts are left-padded for
    the pass); ``prompts`` are prompt texts as :func:`chat_prompts` writes them; each completion is at most
    ``max_new_tokens`` tokens (default 24); ``temperature`` defaults to 1. ``seed`` seeds torch's global
    generator for the sampling (it is reseeded with its previous initial seed afterwards)."""
    import torch

    if samples < 1 or batch_size < 1:
        raise ValueError("samples and batch_size must be >= 1.")
    device = next(model.parameters()).device
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    per_batch = max(1, batch_size // samples)
    generator_seed = torch.initial_seed()
    torch.manual_seed(seed)
    results: list[list[str]] = []
    try:
        for start in range(0, len(prompts), per_batch):
            chunk = list(prompts[start : start + per_batch])
            enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            with torch.no_grad():
                out = model.generate(
                    **enc,
                    do_sample=True,
                    temperature=temperature,
                    top_k=0,
                    top_p=1.0,
                    max_new_tokens=max_new_tokens,
                    num_return_sequences=samples,
                    pad_token_id=pad,
                )
            texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            results.extend(texts[i * samples : (i + 1) * samples] for i in range(len(chunk)))
    finally:
        tokenizer.padding_side = side
        torch.manual_seed(generator_seed)
    return results


def measure_rows(
    model: Any,
    tokenizer: Any,
    rows: Sequence[dict[str, Any]],
    samples: int,
    *,
    system_prompt: str | None,
    verifier: str = "last-number",
    keep: int = 0,
    max_new_tokens: int = 24,
    temperature: float = 1.0,
    batch_size: int = 64,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """One row per prompt row (``prompt_id``, ``question``, ``gold``): ``prompt_id``, ``correct`` (how many of
    the ``samples`` completions ``verifier`` accepts), ``samples``, and ``correct_by`` (the count under every
    verifier of :data:`~stddial_book.bridges.lm_rewards.VERIFIERS`, on the same completions); with ``keep``,
    also the first ``keep`` completions' text under ``examples``.

    ``rows`` are prompt rows as :func:`read_prompt_rows` returns them; ``verifier`` defaults to
    ``"last-number"``; ``keep`` to 0 (no examples). ``model``, ``tokenizer``, ``system_prompt`` (the system
    message, ``None`` for none), ``max_new_tokens``, ``temperature``, ``batch_size`` and ``seed`` are
    passed to :func:`chat_prompts` and :func:`sample_completions`, which say what they are."""
    from stddial_book.bridges.lm_rewards import VERIFIERS, is_correct

    if verifier not in VERIFIERS:
        raise ValueError(f"verifier must be one of {VERIFIERS}; got {verifier!r}.")
    texts = chat_prompts(tokenizer, [r["question"] for r in rows], system_prompt)
    sampling = {"max_new_tokens": max_new_tokens, "temperature": temperature, "batch_size": batch_size}
    completions = sample_completions(model, tokenizer, texts, samples, seed=seed, **sampling)
    out = []
    for row, done in zip(rows, completions):
        by = {v: sum(is_correct(c, row["gold"], v) for c in done) for v in VERIFIERS}
        record = {"prompt_id": row["prompt_id"], "correct": by[verifier], "samples": samples, "correct_by": by}
        if keep:
            record["examples"] = list(done[:keep])
        out.append(record)
    return out


def _settings_hash(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def check_measure(model: str, prompts: str | os.PathLike, samples: int, out: str | os.PathLike) -> dict[str, Any]:
    """Everything ``measure`` needs, checked before anything is written: the model folder (or ``smollm2``), the
    prompts file and its schema, ``samples`` from 2 to 4096, and ``out`` (a new folder, or the tool's own to
    resume). Returns the checked values; a ValueError (one line, the fix) otherwise.

    ``model`` is a local model folder written by ``save_pretrained`` (one with a ``config.json``) or
    ``"smollm2"`` (its GGUF file must be installed); ``prompts`` the prompts file (see
    :func:`read_prompt_rows`). The dict returned holds the prompt ``rows`` and the expanded ``out``."""
    from stddial_book.core.outdir import check_claimable

    if isinstance(samples, bool) or not isinstance(samples, int) or not 2 <= samples <= MAX_SAMPLES:
        raise ValueError(
            f"--samples must be a whole number from 2 to {MAX_SAMPLES} (a pass rate needs at least two samples); got {samples!r}."
        )
    rows = read_prompt_rows(prompts)
    if model != "smollm2":
        folder = Path(model).expanduser()
        if not (folder / "config.json").is_file():
            raise ValueError(
                f"--model {model}: not a model folder (no config.json); pass one written by save_pretrained, or smollm2."
            )
    else:
        from stddial_book.bridges.smollm2 import smollm2_gguf

        try:
            smollm2_gguf(check_hash=False)
        except FileNotFoundError as err:
            raise ValueError(str(err)) from None
    return {"rows": rows, "out": check_claimable(out, "--out")}


def measure_to_folder(
    model: str,
    prompts: str | os.PathLike,
    samples: int,
    out: str | os.PathLike,
    *,
    system_prompt: str | None = None,
    verifier: str = "last-number",
    max_new_tokens: int = 24,
    temperature: float = 1.0,
    batch_size: int = 64,
    seed: int = 0,
    chunk: int = 16,
    progress: Callable[[str], None] | None = print,
) -> Path:
    """``measure``: write ``out/pool.csv`` (``prompt_id, correct, samples``, each verifier's count beside) and
    ``out/measure.json`` (settings, wall time, two completions a prompt); resumable. Returns the table.

    ``model``, ``prompts``, ``samples`` (completions per prompt, 2 to 4096) and ``out`` (a new folder, or
    this command's own to resume one of the same settings) are checked first by :func:`check_measure`.
    The model runs on the first CUDA GPU if there is one (in bfloat16; SmolLM2 in float32), else on the
    CPU in float32. ``system_prompt`` is the system message (``None``, the default: "Answer with just the
    number."); ``verifier`` the check of column ``correct`` (default ``"last-number"``); ``max_new_tokens``,
    ``temperature`` and ``batch_size`` are as in :func:`sample_completions`. Prompts are measured and saved
    ``chunk`` at a time (default 16), each chunk's draws seeded from ``seed`` and the chunk's index, so a
    resumed measurement draws what an uninterrupted one would. ``progress`` is called with a line of text
    after each chunk (default ``print``; ``None`` prints nothing)."""
    from stddial_book.bridges.lm_pool import ANSWER_PROMPT
    from stddial_book.core.outdir import claim_dir

    checked = check_measure(model, prompts, samples, out)
    rows = checked["rows"]
    system_prompt = ANSWER_PROMPT if system_prompt is None else system_prompt
    settings = {
        "model": "smollm2" if model == "smollm2" else Path(model).name,
        "prompts_sha256": file_sha256(prompts),
        "samples": samples,
        "system_prompt": system_prompt,
        "verifier": verifier,
        "max_new_tokens": max_new_tokens,
        "temperature": temperature,
        "seed": seed,
        "chunk": chunk,
    }
    key = _settings_hash(settings)
    out = claim_dir(checked["out"], "measure", flag="--out")
    record = out / SETTINGS
    done, wall = _resumed(record, key, out)
    net, tokenizer = _load(model)
    start = time.perf_counter()
    sampling = {"max_new_tokens": max_new_tokens, "temperature": temperature, "batch_size": batch_size}
    for index in range(len(done) // chunk, -(-len(rows) // chunk)):
        part = rows[index * chunk : (index + 1) * chunk]
        seeded = seed * 1_000_003 + index  # each chunk's own draws: a resumed measurement repeats none
        done = done[: index * chunk] + measure_rows(
            net,
            tokenizer,
            part,
            samples,
            system_prompt=system_prompt,
            verifier=verifier,
            keep=2,
            seed=seeded,
            **sampling,
        )
        _save(record, key, settings, done, wall + time.perf_counter() - start, net)
        if progress is not None:
            progress(f"measure: {len(done)} of {len(rows)} prompts ({samples} samples each)")
    return _write_table(out / POOL, done)


def _save(record: Path, key: str, settings: dict[str, Any], rows: list[dict[str, Any]], wall: float, net: Any) -> None:
    """The measurement so far, with its settings, wall time and provenance, into ``measure.json``."""
    state = {"key": key, "settings": settings, "rows": rows, "wall_s": wall, "provenance": _provenance(net)}
    replace_own(record.parent, record.name, json.dumps(state, indent=1) + "\n")


def _provenance(net: Any) -> dict[str, Any]:
    """The commit (and whether the checkout was clean), the device and the versions a measurement ran with."""
    from stddial_book.rl.runlog import environment, git_state

    commit, dirty = git_state()
    return {"git_commit": commit, "dirty": dirty, **environment(str(next(net.parameters()).device))}


def _resumed(record: Path, key: str, out: Path) -> tuple[list[dict[str, Any]], float]:
    """The rows and wall time a measurement of the same settings left in its own folder (none when new)."""
    if not record.is_file():
        return [], 0.0
    previous = json.loads(record.read_text(encoding="utf-8"))
    if previous.get("key") != key:
        raise ValueError(f"--out {out} holds a measurement of other settings; choose a new --out.")
    return previous.get("rows", []), float(previous.get("wall_s", 0.0))


def _write_table(path: Path, rows: list[dict[str, Any]]) -> Path:
    """``rows`` as the CSV table ``diagnose`` reads (:mod:`stddial_book.corpora.measured_pool`), with each
    verifier's count beside the chosen one's (``correct_math_verify``, ``correct_last_number``)."""
    from stddial_book.bridges.lm_rewards import VERIFIERS

    replace_own(path.parent, path.name, pool_table_text(rows, VERIFIERS))
    return path


def _load(model: str) -> tuple[Any, Any]:
    """The model (``smollm2`` or a folder) in evaluation mode, and its tokenizer: on the first CUDA GPU if there is
    one, in bfloat16 (SmolLM2 in float32, as its runs train it), else on the CPU in float32."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if model == "smollm2":
        from stddial_book.bridges.smollm2 import smollm2_model_dir

        folder = smollm2_model_dir()
    else:
        folder = Path(model).expanduser()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    # SmolLM2 as its recorded runs train it (float32 everywhere); another model in bf16 on a GPU
    dtype = torch.bfloat16 if device == "cuda" and model != "smollm2" else torch.float32
    net = AutoModelForCausalLM.from_pretrained(folder, **dtype_argument(dtype)).to(device).eval()
    return net, AutoTokenizer.from_pretrained(folder)
