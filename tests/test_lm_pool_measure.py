"""The arithmetic pool, the pilot's rule and `measure` (stddial_book.bridges.lm_pool, experiments.smollm2.study, bridges.lm_measure)."""

from __future__ import annotations

import json

import pytest

from stddial_book.bridges.lm_pool import TIERS, arithmetic_pool
from stddial_book.cli import main
from stddial_book.core.resources import data_path
from stddial_book.experiments.smollm2.study import choose_learning_rate


def test_the_committed_pool_is_what_the_generator_draws():
    train, held = arithmetic_pool()
    for name, rows in (("pool_train.jsonl", train), ("pool_heldout.jsonl", held)):
        committed = [json.loads(line) for line in data_path("smollm2", name).read_text().splitlines()]
        assert committed == rows
    assert len(train) == 32 * len(TIERS) and len(held) == 16 * len(TIERS)
    assert not {r["question"] for r in train} & {r["question"] for r in held}
    for row in train + held:  # the gold number is the arithmetic's
        question = row["question"]
        if question.startswith("What is"):
            a, op, b = question.removeprefix("What is ").rstrip("?").split()
            value = int(a) + int(b) if op == "+" else int(a) * int(b)
        else:
            words = question.split()
            value = int(words[2]) + int(words[6])
        assert row["answer"].endswith(f"#### {value}")


def test_the_pilot_rule():
    flat = [0.2] * 10
    # the highest ending wins
    assert choose_learning_rate({1e-4: [0.1] * 10, 3e-4: [0.5] * 10, 1e-3: flat}) == 3e-4
    # within the tie of the best, the smallest rate
    assert choose_learning_rate({1e-4: [0.49] * 10, 3e-4: [0.5] * 10}) == 1e-4
    assert choose_learning_rate({1e-4: [0.47] * 10, 3e-4: [0.5] * 10}) == 3e-4
    # only the last ten steps count: an early peak that collapses loses
    assert choose_learning_rate({1e-3: [0.9] * 20 + [0.1] * 10, 3e-4: [0.0] * 20 + [0.3] * 10}) == 3e-4
    with pytest.raises(ValueError, match="fewer than 10"):
        choose_learning_rate({1e-4: [0.5] * 9})
    with pytest.raises(ValueError, match="no pilot"):
        choose_learning_rate({})


class _Tokens:
    """A stand-in tokenizer: one id per character, a chat template that keeps the question."""

    pad_token_id = 0
    eos_token_id = 0
    padding_side = "right"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return "|".join(m["content"] for m in messages) + ">"

    def __call__(self, texts, return_tensors="pt", padding=True, add_special_tokens=False):
        import torch

        width = max(len(t) for t in texts)
        ids = [[0] * (width - len(t)) + [ord(c) for c in t] for t in texts]  # left padding
        return _Batch({"input_ids": torch.tensor(ids), "attention_mask": (torch.tensor(ids) > 0).long()})

    def batch_decode(self, rows, skip_special_tokens=True):
        return ["".join(chr(int(i)) for i in row if int(i) > 0) for row in rows]


class _Batch(dict):
    def to(self, device):
        return self


class _Answers:
    """A stand-in model that answers a question 'What is a + b?' right on even samples, wrong on odd ones."""

    def __init__(self):
        import torch

        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.calls = []

    def parameters(self):
        return iter([self.weight])

    def generate(self, input_ids, attention_mask, num_return_sequences, max_new_tokens, **kw):
        import torch

        assert kw["top_k"] == 0 and kw["top_p"] == 1.0 and kw["do_sample"]
        self.calls.append(input_ids.shape[0] * num_return_sequences)
        rows = []
        for row in input_ids:
            text = "".join(chr(int(i)) for i in row if int(i) > 0)
            a, _, b = text.split("What is ")[1].split("?")[0].split()
            for j in range(num_return_sequences):
                reply = f"It is {int(a) + int(b) + (j % 2)}."
                rows.append(list(row.tolist()) + [ord(c) for c in reply])
        width = max(len(r) for r in rows)
        return torch.tensor([r + [0] * (width - len(r)) for r in rows])


def test_measure_rows_counts_what_the_verifier_accepts():
    pytest.importorskip("math_verify")
    from stddial_book.bridges.lm_measure import measure_rows

    rows = [{"prompt_id": f"q{i}", "question": f"What is {i} + {2 * i}?", "gold": str(3 * i)} for i in range(5)]
    model = _Answers()
    out = measure_rows(model, _Tokens(), rows, 6, system_prompt="Answer.", batch_size=12, keep=1)
    both = {"math-verify": 3, "last-number": 3}
    assert out == [
        {"prompt_id": f"q{i}", "correct": 3, "samples": 6, "correct_by": both, "examples": [f"It is {3 * i}."]}
        for i in range(5)
    ]
    assert model.calls == [12, 12, 6]  # two prompts (12 completions) a pass, then the last one


def test_measure_refusals_write_nothing(tmp_path, capsys):
    good = tmp_path / "prompts.jsonl"
    good.write_text(json.dumps({"question": "What is 1 + 1?", "answer": "2\n#### 2"}) + "\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "no schema"}) + "\n")
    nogold = tmp_path / "nogold.jsonl"
    nogold.write_text(json.dumps({"question": "What?", "answer": "two"}) + "\n")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("a reader's notes")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    cases = [
        (["--samples", "1"], "--samples"),
        (["--prompts", str(bad)], "question and an answer"),
        (["--prompts", str(nogold)], "#### N"),
        (["--prompts", str(tmp_path / "missing.jsonl")], "no such file"),
        (["--model", str(tmp_path)], "config.json"),
        (["--out", str(theirs)], str(theirs)),
    ]
    for change, expected in cases:
        args = {"--model": str(model), "--prompts": str(good), "--samples": "4", "--out": str(tmp_path / "new")}
        args.update(dict(zip(change[::2], change[1::2])))
        code = main(["measure", *[x for kv in args.items() for x in kv]])
        err = capsys.readouterr().err.strip()
        assert code == 2, change
        assert len(err.splitlines()) == 1 and expected in err, (change, err)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    assert (theirs / "notes.txt").read_text() == "a reader's notes"


def test_the_two_verifiers_part_on_a_restated_sum():
    """math-verify compares expressions, so a reply that restates the sum scores; the last written number
    must be the answer's value for last-number."""
    pytest.importorskip("math_verify")
    from stddial_book.bridges.lm_rewards import CorrectnessReward, is_correct, last_number

    assert is_correct("23 + 45", "68", "math-verify") and not is_correct("23 + 45", "68", "last-number")
    assert is_correct("The sum is 1,031.", "1031", "last-number")
    assert not is_correct("68, or maybe 70", "68", "last-number")
    assert last_number("no digits here") is None and last_number("-3.5 degrees") == -3.5
    strict = CorrectnessReward(verifier="last-number")
    assert strict(["23 + 45", "68"], answer=["68", "68"]) == [0.0, 1.0]
    with pytest.raises(ValueError, match="verifier"):
        CorrectnessReward(verifier="regex")


def test_an_interrupted_measurement_resumes_to_the_same_table(tmp_path):
    """`measure` saves each chunk of prompts as it goes; stopped after the first chunk and run again, it measures
    only the rest and writes the table an uninterrupted run writes (each chunk's draws are seeded by its index);
    run once more when finished, it changes nothing."""
    pytest.importorskip("transformers")
    pytest.importorskip("math_verify")  # measure counts under both verifiers; the lm extra brings it
    from stddial_book.bridges import lm_measure
    from stddial_book.bridges.lm_data import build_tiny_model, write_tiny_gsm8k

    data = write_tiny_gsm8k(tmp_path / "tiny.jsonl", num_rows=6)
    model = str(build_tiny_model(tmp_path / "model", data))
    settings = {"max_new_tokens": 4, "batch_size": 8, "chunk": 4, "progress": None}
    whole = lm_measure.measure_to_folder(model, data, 2, tmp_path / "whole", **settings).read_text()

    real, calls = lm_measure.measure_rows, []

    def stops_at_the_second_chunk(*args, **kwargs):
        calls.append(len(args[2]))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    lm_measure.measure_rows = stops_at_the_second_chunk
    try:
        with pytest.raises(KeyboardInterrupt):
            lm_measure.measure_to_folder(model, data, 2, tmp_path / "part", **settings)
        assert not (tmp_path / "part" / "pool.csv").exists()
        table = lm_measure.measure_to_folder(model, data, 2, tmp_path / "part", **settings)
    finally:
        lm_measure.measure_rows = real
    assert calls == [4, 2, 2]  # the second chunk (2 prompts) once more, the first not again
    assert table.read_text() == whole
    again = lm_measure.measure_to_folder(model, data, 2, tmp_path / "part", **settings)
    assert again.read_text() == whole
    with pytest.raises(ValueError, match="other settings"):
        lm_measure.measure_to_folder(model, data, 4, tmp_path / "part", **settings)
