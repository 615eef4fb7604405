"""The MATH-500 loader (chapter 16): a small file of the same schema written here, every refusal in one line
naming the file, and the real file from the shared data folder when it is there (skipped, with the reason,
on a clone without ../shared)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stddial_book.corpora.histograms import silent_fraction
from stddial_book.corpora.math500 import Math500DataError, load_math500, math500_available, math500_path
from stddial_book.experiments.diagnose.report import diagnose

SMALL = {
    "dataset": "a test file of the schema",
    "seeds": [0, 1, 2],
    "m_per_session": 4,
    "counts": [[0, 0, 0], [4, 4, 4], [1, 3, 2], [0, 1, 0]],
    "ns": [[4, 4, 4]] * 4,
    "uids": ["test/algebra/1.json", "test/geometry/2.json", "test/algebra/3.json", "odd-id"],
    "single_sample_acc": 0.5,
}


def _write(tmp_path: Path, data: object, name: str = "rhow_counts.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_all_runs_are_summed_into_k_of_n(tmp_path: Path) -> None:
    counts = load_math500(_write(tmp_path, SMALL))
    assert counts.num_rollouts == 12  # 3 runs of 4
    assert counts.num_correct.tolist() == [0, 12, 6, 1]
    assert counts.labels["uid"].tolist() == SMALL["uids"]
    assert counts.labels["subject"].tolist() == ["algebra", "geometry", "algebra", ""]
    assert counts.name == "MATH-500 (3 runs of 4)"
    # the histogram the closed forms read: one prompt at each of k = 0, 1, 6, 12
    hist = counts.histogram()
    assert hist.counts.nonzero()[0].tolist() == [0, 1, 6, 12]
    # at G = 2: silent with probability 1, 1, p² + (1 − p)² at p = 1/2 (so 1/2), and (1/12)² + (11/12)²
    expected = (1 + 1 + 0.5 + (1 / 12) ** 2 + (11 / 12) ** 2) / 4
    assert silent_fraction(hist, 2)[0] == pytest.approx(expected)


def test_chosen_runs_only(tmp_path: Path) -> None:
    path = _write(tmp_path, SMALL)
    one = load_math500(path, runs=(2,))
    assert one.num_rollouts == 4 and one.num_correct.tolist() == [0, 4, 2, 0]
    assert one.name == "MATH-500 (1 run of 4)"
    two = load_math500(path, runs=[0, 1])
    assert two.num_rollouts == 8 and two.num_correct.tolist() == [0, 8, 4, 1]
    for bad in ((), (3,), (0, 0), "0", (True,)):
        with pytest.raises(ValueError, match="runs"):
            load_math500(path, runs=bad)


def test_runs_of_different_sizes_are_refused(tmp_path: Path) -> None:
    data = {**SMALL, "ns": [[4, 4, 4], [4, 4, 4], [4, 4, 4], [4, 4, 5]]}
    path = _write(tmp_path, data)
    with pytest.raises(ValueError, match="different numbers of samples"):
        load_math500(path)
    assert load_math500(path, runs=(0, 1)).num_rollouts == 8  # the first two runs agree


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ([1, 2, 3], "one JSON object"),
        ({k: v for k, v in SMALL.items() if k != "counts"}, "no 'counts' field"),
        ({**SMALL, "counts": [[0, 0, 0], [4, 4], [1, 3, 2], [0, 1, 0]]}, "same number of runs"),
        ({**SMALL, "counts": [[0, 0, 0], [4, 4, 4], [1, 3, 2.5], [0, 1, 0]]}, "whole numbers"),
        ({**SMALL, "counts": [[0, 0, 0], [4, 4, 5], [1, 3, 2], [0, 1, 0]]}, "counts <= ns"),
        ({**SMALL, "ns": [[4, 4]] * 4}, "shape"),
        ({**SMALL, "uids": SMALL["uids"][:3]}, "uids"),
        ({**SMALL, "counts": []}, "non-empty"),
    ],
)
def test_a_malformed_file_is_refused_in_one_line_naming_it(tmp_path: Path, data: object, says: str) -> None:
    path = _write(tmp_path, data)
    with pytest.raises(Math500DataError, match=says) as err:
        load_math500(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message and "SOURCE.md" in message


def test_a_missing_or_broken_file_is_refused_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "rhow_counts.json"
    assert not math500_available(missing)
    with pytest.raises(Math500DataError, match="is missing") as err:
        load_math500(missing)
    assert "\n" not in str(err.value) and str(missing) in str(err.value)
    broken = tmp_path / "broken.json"
    broken.write_text('{"counts": [[1, 2]\n', encoding="utf-8")
    with pytest.raises(Math500DataError, match="not valid JSON") as err:
        load_math500(broken)
    assert "\n" not in str(err.value)
    assert issubclass(Math500DataError, ValueError)


def test_the_default_path_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "data" / "math500-best-of-n"
    target.mkdir(parents=True)
    _write(target, SMALL)
    monkeypatch.setenv("STDDIAL_SHARED_DATA", str(tmp_path))
    assert math500_path() == target / "rhow_counts.json"
    assert math500_available()
    assert load_math500().num_correct.tolist() == [0, 12, 6, 1]
    monkeypatch.delenv("STDDIAL_SHARED_DATA")
    # without the variable: the shared folder beside the checkout, where tests/conftest.py looks too
    # (a wheel install, as .ci/lowest tests, has no checkout: the folder is then beside site-packages'
    # grandparent, which the reader sets with the variable instead)
    import stddial_book

    checkout = Path(__file__).resolve().parents[1]
    package_root = Path(stddial_book.__file__).resolve().parents[1]
    expected = package_root.parent / "shared" / "data" / "math500-best-of-n" / "rhow_counts.json"
    assert math500_path() == expected
    if package_root == checkout:
        assert math500_path() == checkout.parent / "shared" / "data" / "math500-best-of-n" / "rhow_counts.json"


@pytest.mark.needs_shared
def test_the_real_file(shared_data) -> None:
    path = shared_data("math500-best-of-n") / "rhow_counts.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    counts = load_math500(path)
    assert counts.num_correct.size == 500 and counts.num_rollouts == 5 * 256
    assert counts.num_correct.tolist() == np.array(raw["counts"]).sum(axis=1).tolist()
    # five replicates of the same problems: each run's mean solve rate is the pooled one within sampling noise
    # (about 0.001 for 128,000 samples), far inside 0.01
    pooled = counts.num_correct.sum() / (500 * 1280)
    for run in range(5):
        assert load_math500(path, runs=(run,)).num_correct.mean() / 256 == pytest.approx(pooled, abs=0.01)
    assert len(set(counts.labels["uid"])) == 500 and "algebra" in set(counts.labels["subject"])
    # one run of 256 finds more problems never solved than five runs do (a problem unsolved in 1,280 samples
    # is unsolved in each of its runs)
    one = load_math500(path, runs=(0,))
    assert one.num_rollouts == 256
    never_one, never_all = np.mean(one.num_correct == 0), np.mean(counts.num_correct == 0)
    assert never_one >= never_all > 0
    report = diagnose(counts, seed=0)
    assert report["pool"]["prompts"] == 500 and report["group_size_law"]["G_star"] > 0
