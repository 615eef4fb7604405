"""Benchmark: the book's KV-cache sampler against ``model.generate`` on the same model and batch.

Both draw G completions for each of a batch of prompts, the RL rollout's shape, at pure
temperature 1 (top_k=0, top_p=1) from the testbed's tiny model with the same length cap:
``sample(..., num_samples=G)`` against ``model.generate(..., num_return_sequences=G)``. Runs
alternate (ours, generate, ours, ...) so machine load affects both alike. Reported: generated
tokens per second for each (tokens up to and including EOS), and the ratio (goal: ours >= 1.5x).

    python bench/bench_sampler.py [--prompts 32] [--group-size 8] [--max-new-tokens 8] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch
import transformers

from stddial_book.rl.model import CharCodec, tiny_model
from stddial_book.rl.rollout import sample
from stddial_book.rl.tasks import sample_problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "sampler.json"))
    args = parser.parse_args()

    torch.set_num_threads(1)
    codec = CharCodec()
    model = tiny_model().eval()
    problems = sample_problems(args.prompts, 2, seed=0)
    G = args.group_size
    ids = torch.tensor([codec.encode(p.prompt) for p in problems])
    mask = torch.ones_like(ids)

    def ours(seed: int) -> int:
        out = sample(
            model,
            ids,
            args.max_new_tokens,
            codec.eos_id,
            codec.pad_id,
            generator=torch.Generator().manual_seed(seed),
            num_samples=G,
        )
        return int(out.mask.sum())

    def generate(seed: int) -> int:
        torch.manual_seed(seed)
        with torch.no_grad():
            seqs = model.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                max_new_tokens=args.max_new_tokens,
                num_return_sequences=G,
                eos_token_id=codec.eos_id,
                pad_token_id=codec.pad_id,
            )
        completion = seqs[:, ids.shape[1] :]
        is_eos = completion == codec.eos_id
        after_eos = (is_eos.cumsum(dim=1) - is_eos.long()) > 0
        return int((~after_eos).sum())  # tokens up to and including each row's first EOS

    ours(0), generate(0)  # warm-up
    rates = {"ours": [], "generate": []}
    for r in range(args.repeats):
        for name, fn in (("ours", ours), ("generate", generate)):
            start = time.perf_counter()
            tokens = fn(r + 1)
            rates[name].append(tokens / (time.perf_counter() - start))
    med = {name: statistics.median(v) for name, v in rates.items()}
    result = {
        "benchmark": "sampler tokens/s vs model.generate",
        "prompts": args.prompts,
        "group_size": G,
        "max_new_tokens": args.max_new_tokens,
        "repeats": args.repeats,
        "tokens_per_s_median": med,
        "ratio_ours_over_generate": med["ours"] / med["generate"],
        "tokens_per_s_all": rates,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "machine": platform.machine(),
        "threads": torch.get_num_threads(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("tokens_per_s_median", "ratio_ours_over_generate")}, indent=2))


if __name__ == "__main__":
    main()
