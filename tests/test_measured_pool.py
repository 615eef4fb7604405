"""The measured pool's table (stddial_book.corpora.measured_pool): what `measure` writes is what the readers read,
column names by hand, and a table without per-verifier columns (the first SmolLM2 recording's) still reads."""

from __future__ import annotations

from stddial_book.corpora.measured_pool import pool_table_text, read_pool_table, verifier_column
from stddial_book.corpora.reader_pool import load_reader_pool


def test_a_verifiers_column_is_its_name_with_underscores() -> None:
    assert verifier_column("math-verify") == "correct_math_verify"
    assert verifier_column("last-number") == "correct_last_number"


def test_the_table_reads_back_what_was_written(tmp_path) -> None:
    rows = [
        {"prompt_id": "1d+1d-000", "correct": 1, "samples": 64, "correct_by": {"last-number": 1, "math-verify": 12}},
        {"prompt_id": "a, b", "correct": 20, "samples": 64, "correct_by": {"last-number": 20, "math-verify": 30}},
    ]
    text = pool_table_text(rows, ["last-number", "math-verify"])
    assert text.splitlines()[:2] == [
        "prompt_id,correct,samples,correct_last_number,correct_math_verify",
        "1d+1d-000,1,64,1,12",
    ]
    assert text.splitlines()[2] == '"a, b",20,64,20,30'  # an id holding a comma is quoted
    (tmp_path / "pool.csv").write_text(text)
    assert read_pool_table(tmp_path / "pool.csv") == rows


def test_a_table_without_verifier_columns_reads_without_correct_by(tmp_path) -> None:
    (tmp_path / "pool.csv").write_text(pool_table_text([{"prompt_id": "a", "correct": 3, "samples": 64}]))
    assert read_pool_table(tmp_path / "pool.csv") == [{"prompt_id": "a", "correct": 3, "samples": 64}]


def test_diagnose_reads_the_table_with_its_verifier_columns(tmp_path) -> None:
    """diagnose's reader takes k from ``correct`` and n from ``samples`` and ignores the verifier columns."""
    rows = [{"prompt_id": f"q{i}", "correct": k, "samples": 16, "correct_by": {"last-number": k, "math-verify": 16}}
            for i, k in enumerate([0, 3, 16])]  # fmt: skip
    (tmp_path / "pool.csv").write_text(pool_table_text(rows, ["last-number", "math-verify"]))
    pool = load_reader_pool(tmp_path / "pool.csv")
    assert list(pool.num_correct) == [0, 3, 16] and list(pool.num_samples) == [16, 16, 16]
    assert pool.prompt_ids == ["q0", "q1", "q2"]


def test_a_table_missing_a_column_or_a_count_is_refused_in_one_line(tmp_path) -> None:
    import pytest

    (tmp_path / "a.csv").write_text("prompt_id,correct\nq,1\n")
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['samples'\]"):
        read_pool_table(tmp_path / "a.csv")
    (tmp_path / "b.csv").write_text("prompt_id,correct,samples\nq,one,16\n")
    with pytest.raises(ValueError, match="line 2: a count is not a whole number"):
        read_pool_table(tmp_path / "b.csv")
