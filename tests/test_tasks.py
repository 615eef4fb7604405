"""The addition task: prompts, reversed answers, carries, deterministic disjoint splits, verifier."""

from __future__ import annotations

import numpy as np
import pytest

from stddial_book.rl.tasks import (
    EOS,
    _carry_histogram,
    count_carries,
    make_problem,
    make_split,
    reward,
    rewards,
    sample_problems,
)


def test_prompt_and_answer_format() -> None:
    p = make_problem(57, 68, 2)
    assert p.prompt == "57+68=" and p.answer == "521" and p.carries == 2
    q = make_problem(3, 4, 2)
    assert q.prompt == "03+04=" and q.answer == "7" and q.carries == 0


@pytest.mark.parametrize(
    "a, b, carries", [(0, 0, 0), (5, 5, 1), (99, 1, 2), (999, 999, 3), (450, 550, 2), (123, 456, 0)]
)
def test_count_carries(a: int, b: int, carries: int) -> None:
    assert count_carries(a, b) == carries


def test_carry_histogram_matches_direct_count() -> None:
    direct = np.bincount([count_carries(a, b) for a in range(100) for b in range(100)], minlength=3)
    np.testing.assert_array_equal(_carry_histogram(2), direct)
    assert _carry_histogram(1).tolist() == [55, 45]


def test_sampling_is_deterministic_distinct_and_respects_carries() -> None:
    first = sample_problems(50, 2, carries=1, seed=3)
    assert first == sample_problems(50, 2, carries=1, seed=3)
    assert first != sample_problems(50, 2, carries=1, seed=4)
    assert len({(p.a, p.b) for p in first}) == 50
    assert all(p.carries == 1 and p.digits == 2 for p in first)


def test_split_has_no_overlap_and_exhausts_small_spaces() -> None:
    train, heldout = make_split(2, num_train=400, num_heldout=100, seed=0)
    assert len(train) == 400 and len(heldout) == 100
    assert not {(p.a, p.b) for p in train} & {(p.a, p.b) for p in heldout}
    # every one-digit problem with one carry, split in two without overlap
    train, heldout = make_split(1, num_train=40, num_heldout=5, carries=1, seed=1)
    assert len({(p.a, p.b) for p in train + heldout}) == 45
    with pytest.raises(ValueError, match="distinct problems"):
        make_split(1, num_train=41, num_heldout=5, carries=1)


def test_verifier_exact_answer_then_eos_only() -> None:
    p = make_problem(57, 68, 2)
    assert reward("521" + EOS, p) == 1.0
    for wrong in ("521", "125" + EOS, "52" + EOS, "521" + EOS + "1", "5210" + EOS, ""):
        assert reward(wrong, p) == 0.0
    np.testing.assert_array_equal(rewards(["521" + EOS, "x"], [p, p]), [1.0, 0.0])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: make_problem(100, 1, 2), "operands"),
        (lambda: sample_problems(3, 0), "digits"),
        (lambda: sample_problems(3, 2, carries=3), "carries"),
        (lambda: rewards(["1"], []), "repeat each problem"),
    ],
)
def test_bad_input(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()
