"""Benchmark: SmolLM2's loading time, and ``measure``'s sampling against a bare ``model.generate`` (issue 34).

* **Loading**: ``AutoModelForCausalLM.from_pretrained`` of the converted folder
  (``stddial_book.bridges.smollm2.smollm2_model_dir``, float32 safetensors), the median of ``--repeats``
  loads (the one-time GGUF conversion is timed once, separately).
* **Sampling**: the same prompts (chapter 15's held-out questions), the same number of completions, the
  same batch and cap, pure temperature-1 sampling; ``measure``'s path
  (:func:`~stddial_book.bridges.lm_measure.sample_completions`: chat template, left padding, decoding)
  against ``model.generate`` on the already tokenized batch, alternating, on one thread. Tokens counted
  are the generated ones up to each completion's end (EOS or the cap), the same for both sides.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_measure.py [--prompts 8] [--samples 8] [--repeats 3]

Writes ``bench/results/measure.json`` (refused if it exists unless ``--replace``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "bench" / "results" / "measure.json"


def _generated_tokens(ids: torch.Tensor, eos: int) -> int:
    """Tokens generated up to and including each row's first EOS (the rest is padding)."""
    total = 0
    for row in ids.tolist():
        total += row.index(eos) + 1 if eos in row else len(row)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--replace", action="store_true")
    args = parser.parse_args(argv)
    if RESULT.exists() and not args.replace:
        print(f"error: {RESULT.relative_to(ROOT)} exists; pass --replace to write a new result.", file=sys.stderr)
        return 2
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from stddial_book.bridges.lm_measure import chat_prompts, read_prompt_rows, sample_completions
    from stddial_book.bridges.lm_pool import ANSWER_PROMPT
    from stddial_book.bridges.smollm2 import smollm2_model_dir

    torch.set_num_threads(1)
    start = time.perf_counter()
    folder = smollm2_model_dir()
    first = time.perf_counter() - start
    loads = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(folder).eval()
        loads.append(time.perf_counter() - start)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    rows = read_prompt_rows(ROOT / "data" / "smollm2" / "pool_heldout.jsonl")[: args.prompts]
    texts = chat_prompts(tokenizer, [r["question"] for r in rows], ANSWER_PROMPT)
    batch = args.prompts * args.samples
    tokenizer.padding_side = "left"
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    eos = tokenizer.eos_token_id
    ours, bare = [], []
    for repeat in range(args.repeats):
        # the same seed and the same single batch: both sides draw the very same completions (checked), so
        # they generate the same tokens and the ratio of tokens per second is the ratio of wall times
        start = time.perf_counter()
        done = sample_completions(
            model, tokenizer, texts, args.samples, max_new_tokens=24, batch_size=batch, seed=repeat
        )
        ours_s = time.perf_counter() - start
        torch.manual_seed(repeat)
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**enc, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=24,
                                 num_return_sequences=args.samples, pad_token_id=eos)  # fmt: skip
        bare_s = time.perf_counter() - start
        new = out[:, enc["input_ids"].shape[1] :]
        same = tokenizer.batch_decode(new, skip_special_tokens=True) == [t for group in done for t in group]
        if not same:
            print(
                "error: the two sides drew different completions; the comparison is not like for like.", file=sys.stderr
            )
            return 1
        tokens = _generated_tokens(new, eos)
        ours.append(tokens / ours_s)
        bare.append(tokens / bare_s)
    result = {
        "what": "SmolLM2-135M-Instruct (Q4_1, dequantized, float32) on one CPU thread",
        "conversion_or_first_call_s": first,
        "load_s_median": statistics.median(loads),
        "batch_completions": batch,
        "measure_tokens_per_s": statistics.median(ours),
        "generate_tokens_per_s": statistics.median(bare),
        "ratio_measure_to_generate": statistics.median(ours) / statistics.median(bare),
        "repeats": args.repeats,
        "torch": torch.__version__,
    }
    RESULT.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
