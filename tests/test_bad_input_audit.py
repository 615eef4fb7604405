"""Bad input to the public API refused with a one-line message that names the argument and the fix.

Each test here failed before its fix: a silently wrong answer (rows dropped, a rounded solve rate, a
difference called significant on one seed, a large negative R² for a wrong group size), a hang, or a
raw exception (a traceback, FileNotFoundError, KeyError, zlib.error) a reader cannot act on. The last
section is the audit of every public function of the modules listed in ``AUDITED``: wrong types,
wrong sizes, empty arrays, NaN, infinities, huge values, negative sizes and mismatched inputs.
"""

from __future__ import annotations

import dataclasses
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stddial_book.bridges import trl_rewards, trl_settings
from stddial_book.rl import costs
from stddial_book.rl.profiles import PROFILES
from stddial_book.theory import group_size as size_law
from stddial_book.theory import identity, silent

REPO = Path(__file__).resolve().parents[1]


def one_line(err: BaseException) -> str:
    """The message of ``err``, after checking it is a single non-empty line."""
    text = str(err)
    assert text.strip() and "\n" not in text, f"not a one-line message: {text!r}"
    return text


def refused(call, match: str, kind: type[Exception] | tuple[type[Exception], ...] = ValueError) -> str:
    """``call()`` raises ``kind`` with a one-line message containing ``match`` (a regular expression)."""
    with pytest.raises(kind, match=match) as info:
        call()
    return one_line(info.value)


# --------------------------------------------------------------------------- 1. the TRL bridge


def test_trl_reward_function_refuses_rows_of_different_lengths() -> None:
    reward = trl_rewards.trl_reward_funcs("grpo", max_new_tokens=8)[0]
    ids = [[1, 2], [3], [4]]
    # zip dropped the third completion: two rewards came back for three completions
    refused(lambda: reward(completion_ids=ids, answer=["1", "2"]), r"3 completions but 2 values of 'answer'")
    refused(lambda: reward(completion_ids=ids, answer=["1", "2", "3"], prompts=["a"]), r"'prompts'.*one entry per")
    refused(lambda: reward(completion_ids=ids, answer=["1", "2", "3"], digits=[2, 2]), r"'digits'")
    refused(lambda: reward(completion_ids=ids, answer=[1, 2, 3]), r"answer column must hold strings", TypeError)
    refused(lambda: reward(completion_ids=ids, answer="123"), r"answer must be a list", TypeError)
    # what TRL passes besides the columns is not per row
    assert reward(
        completion_ids=ids,
        answer=["1", "2", "3"],
        prompts=["a"] * 3,
        trainer_state=object(),
        log_extra=print,
        log_metric=print,
    ) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "value, kind",
    [
        ("1e-5", TypeError),
        (None, TypeError),
        (math.nan, ValueError),
        (-1e-5, ValueError),
        (0.0, ValueError),
        (math.inf, ValueError),
        (True, TypeError),
    ],
)
def test_trl_config_mapping_refuses_a_bad_learning_rate(value, kind) -> None:
    from stddial_book.rl.configs import TrainConfig

    config = TrainConfig("grpo")
    object.__setattr__(config, "lr", value)  # a config that skipped its own checks: the mapping passed it on
    refused(lambda: trl_settings.trl_settings_for(config), r"learning_rate.*learning_rate=1e-5", kind)
    # an override goes the same way (TRL would store the string "1e-5" and fail deep in the optimizer)
    refused(lambda: trl_settings.grpo_config(TrainConfig("grpo"), "out", learning_rate=value), r"learning_rate", kind)


@pytest.mark.parametrize(
    "field, value",
    [
        ("max_grad_norm", math.nan),
        ("max_grad_norm", -1.0),
        ("seed", -1),
        ("seed", 1.5),
        ("max_steps", 0),
        ("temperature", "1"),
        ("beta", -0.1),
        ("epsilon", 1.5),
        ("top_p", 0.0),
        ("num_generations", 1),
        ("per_device_train_batch_size", 0),
        ("bf16", "no"),
    ],
)
def test_trl_config_mapping_checks_every_numeric_setting(field, value) -> None:
    from stddial_book.rl.configs import TrainConfig

    refused(
        lambda: trl_settings.grpo_config(TrainConfig("grpo"), "out", **{field: value}), field, (TypeError, ValueError)
    )
    if field in ("max_grad_norm", "seed", "temperature"):  # fields of a TrainConfig that skipped its checks
        config = TrainConfig("grpo")
        object.__setattr__(config, field, value)
        refused(lambda: trl_settings.trl_settings_for(config), field, (TypeError, ValueError))


def test_trl_config_mapping_keeps_valid_settings() -> None:
    from stddial_book.rl.configs import TrainConfig

    settings = trl_settings.trl_settings_for(TrainConfig("dapo"))
    assert settings["learning_rate"] == 1e-4 and settings["min_p"] is None and settings["max_steps"] > 0


# --------------------------------------------------------------------------- 2. run-time estimates


OVERHEADS = {"generate_s": 0.5, "train_s": 7.0}


@pytest.mark.parametrize("throughput", [-1e9, 0.0, math.nan, math.inf, -math.inf])
def test_estimate_refuses_a_throughput_that_is_not_positive_and_finite(throughput) -> None:
    work = costs.RunWork(generate_passes=10, generate_tokens=1000, train_passes=4, train_tokens=400)
    # -1e9 gave a negative time (max(overhead, negative) = overhead, silently), nan a nan and 0 a ZeroDivisionError
    refused(lambda: costs.estimate_seconds(work, 5, OVERHEADS, throughput), r"throughput")


def test_cost_functions_check_every_input() -> None:
    work = costs.RunWork(10, 1000, 4, 400)
    quick = PROFILES["quick"]
    refused(lambda: costs.estimate_seconds("work", 5, OVERHEADS, 1e9), r"work must be a RunWork", TypeError)
    refused(lambda: costs.estimate_seconds(work, 0, OVERHEADS, 1e9), r"num_params must be at least 1")
    refused(lambda: costs.estimate_seconds(work, 5.5, OVERHEADS, 1e9), r"num_params")
    refused(
        lambda: costs.estimate_seconds(work, 5, {"generate_s": -1.0, "train_s": 1.0}, 1e9), r"overheads\['generate_s'\]"
    )
    refused(lambda: costs.estimate_seconds(work, 5, {"train_s": 1.0}, 1e9), r"overheads lacks 'generate_s'")
    refused(lambda: costs.estimate_seconds(work, 5, [0.5, 7.0], 1e9), r"overheads must be", TypeError)
    refused(lambda: costs.estimate_seconds(work, 5, {"generate_s": math.nan, "train_s": 1.0}, 1e9), r"generate_s")
    refused(lambda: costs.RunWork(-1, 0, 0, 0), r"RunWork.generate_passes must be at least 0")
    refused(lambda: costs.RunWork(1.5, 0, 0, 0), r"RunWork.generate_passes must be a whole number")
    refused(lambda: work.flops(-3), r"num_params")
    refused(lambda: costs.run_work("quick", "grpo"), r"profile must be a stddial_book.rl.profiles.Profile", TypeError)
    refused(lambda: costs.run_work(quick, "ppo"), r"recipe")
    refused(
        lambda: costs.run_work(dataclasses.replace(quick, train=dict(quick.train, group_size=1)), "grpo"), r"group_size"
    )
    refused(
        lambda: costs.run_work(dataclasses.replace(quick, train=dict(quick.train, sample_budget=-8)), "grpo"),
        r"sample_budget",
    )
    refused(
        lambda: costs.run_work(dataclasses.replace(quick, train={"group_size": 8}), "grpo"), r"profile.train.*lacks"
    )
    refused(lambda: costs.sft_work(dataclasses.replace(quick, sft=dict(quick.sft, max_steps=0))), r"max_steps")
    refused(lambda: costs.measure_overheads(quick, repeats=0), r"repeats must be at least 1")
    refused(lambda: costs.measure_overheads(quick, repeats=10**30), r"repeats")  # was a loop of 10**30 passes
    refused(lambda: costs.measure_cpu_throughput(quick, rows=10**30), r"rows")
    refused(lambda: costs.measure_cpu_throughput(quick, rows=-1), r"rows must be at least 1")
    refused(lambda: costs.check_on_cpu(quick, "grpo", [], OVERHEADS, 1e9), r"measured_run_seconds is empty")
    refused(lambda: costs.check_on_cpu(quick, "grpo", [10.0, -1.0], OVERHEADS, 1e9), r"measured_run_seconds")
    refused(lambda: costs.check_on_cpu(quick, "grpo", [10.0, math.nan], OVERHEADS, 1e9), r"measured_run_seconds")
    refused(lambda: costs.check_on_cpu(quick, "grpo", [10.0], OVERHEADS, -1.0), r"throughput")
    refused(lambda: costs.full_profile_estimates({"generate_s": 1.0}), r"train_s")
    # valid input: unchanged
    assert costs.estimate_seconds(work, 5, OVERHEADS, 1000.0) == pytest.approx(10 * 1.0 + 4 * 7.0)


# --------------------------------------------------------------------------- 3. the Big-Math loader


def write_big_math(path: Path, rates, kind=None) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = len(rates)
    pq.write_table(
        pa.table(
            {
                "prompt": [f"p{i}" for i in range(n)],
                "source": ["s"] * n,
                "llama8b_solve_rate": pa.array(rates, type=kind),
            }
        ),
        path,
    )
    return path


def test_big_math_refuses_solve_rates_off_the_grid_of_64(tmp_path: Path) -> None:
    from stddial_book.corpora.solve_tables import load_big_math

    # 0.3 · 64 = 19.2 was rounded to k = 19 without a word
    path = write_big_math(tmp_path / "bm.parquet", [0.5, None, 0.3, 0.7])
    message = refused(lambda: load_big_math(path), r"llama8b_solve_rate must be a multiple of 1/64")
    assert "row 2 holds 0.3" in message and "2 row(s)" in message and str(path) in message
    # the grid itself is read exactly, nulls are counted as missing
    table = load_big_math(write_big_math(tmp_path / "ok.parquet", [k / 64 for k in range(65)] + [None]))
    assert table.num_correct.tolist() == list(range(65)) and table.num_missing == 1


def test_big_math_refuses_columns_that_are_not_rates(tmp_path: Path) -> None:
    import pyarrow as pa

    from stddial_book.corpora.solve_tables import load_big_math

    # a boolean column was read as rates 0 and 1 (k = 0 or 64)
    path = write_big_math(tmp_path / "bool.parquet", [True, False, True], pa.bool_())
    refused(lambda: load_big_math(path), r"'llama8b_solve_rate' holds booleans, not solve rates")
    path = write_big_math(tmp_path / "text.parquet", ["0.5", "0.25"], pa.string())
    refused(lambda: load_big_math(path), r"'llama8b_solve_rate' is of type string, not numeric")
    path = write_big_math(tmp_path / "null.parquet", [None, None], pa.float64())
    refused(lambda: load_big_math(path), r"holds no solve rate")
    path = write_big_math(tmp_path / "counts.parquet", [0, 32, 64], pa.int64())  # counts k, not rates
    refused(lambda: load_big_math(path), r"row 1 holds 32.0\. If the column holds counts k, divide them by 64")
    bad = tmp_path / "broken.parquet"
    bad.write_bytes(b"PAR1 not really")
    refused(lambda: load_big_math(bad), r"broken.parquet could not be read as a parquet file")
    refused(lambda: load_big_math(tmp_path / "missing.parquet"), r"missing.parquet does not exist")
    refused(lambda: load_big_math(3), r"source must be a path", TypeError)
    refused(lambda: load_big_math(bad, config=1), r"config must be", TypeError)


# --------------------------------------------------------------------------- 7. the table builder's command line


@pytest.mark.parametrize("shared", ["no-such-folder", "a-file.txt", "empty-folder"])
def test_build_tables_command_says_what_is_wrong_in_one_line(tmp_path: Path, shared: str, capsys) -> None:
    from stddial_book.corpora.solve_tables import _main

    (tmp_path / "a-file.txt").write_text("x")
    (tmp_path / "empty-folder").mkdir()
    with pytest.raises(SystemExit) as info:  # was a traceback and exit status 1
        _main(["build-tables", "--shared", str(tmp_path / shared), "--out", str(tmp_path / "out")])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and shared in err[0]
    # the same through the module's command line
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "stddial_book.corpora.solve_tables",
            "build-tables",
            "--shared",
            str(tmp_path / shared),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert run.returncode == 2 and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and shared in lines[0], run.stderr
    assert "deepscaler_*_train.parquet" in lines[0]


# --------------------------------------------------------------------------- 8. loaders: a one-line error naming the file


def test_figure_reader_names_a_missing_truncated_or_foreign_file(tmp_path: Path) -> None:
    from stddial_book.core.resources import data_path
    from stddial_book.corpora import bigmath_figure as bf

    real = data_path(*bf.FIGURE_FILE).read_bytes()
    truncated = tmp_path / "truncated.pdf"
    truncated.write_bytes(real[:200])  # the header, no page yet
    cut_stream = tmp_path / "cut.pdf"
    start = real.index(b"stream", real.index(b"/FlateDecode")) + 7
    cut_stream.write_bytes(real[: start + 200])
    damaged = tmp_path / "damaged.pdf"
    damaged.write_bytes(real[:start] + bytes(200) + real[start + 200 :])
    text = tmp_path / "notes.pdf"
    text.write_text("just some text")
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    for path, why in (
        (tmp_path / "missing.pdf", "does not exist"),
        (truncated, "could not be read as the paper's"),
        (cut_stream, "truncated"),
        (damaged, "does not inflate"),
        (text, "not a PDF"),
        (empty, "not a PDF"),
        (tmp_path, "cannot be read"),
    ):
        message = refused(lambda: bf.read_figure(path), why)
        assert str(path) in message and "fig_realdata.pdf" in message
    refused(lambda: bf.read_figure(None), r"path must be", TypeError)
    message = refused(lambda: bf.build_big_math_table(tmp_path / "missing.pdf", tmp_path), r"does not exist")
    assert "missing.pdf" in message
    refused(lambda: bf.counts_from_figure({"bars": []}), r"figure must be", TypeError)


def committed_big_math() -> str:
    from stddial_book.core.resources import data_path

    return data_path("solve_rates", "big_math_k_histogram.csv").read_text()


@pytest.mark.parametrize(
    "edit, why",
    [
        (lambda t: None, r"is missing"),
        (lambda t: "", r"must start with the header k,count"),
        (lambda t: "k,count\n", r"holds no rows"),
        (lambda t: t.replace("k,count", "k,n"), r"header k,count"),
        (lambda t: t.replace("\n1,14611", "\n1,x"), r"line 3: count must be a whole number"),
        (lambda t: t.replace("\n1,14611", "\n1,nan"), r"count must be a whole number"),
        (lambda t: t.replace("\n1,14611", "\n1,-5"), r"count must be >= 0"),
        (lambda t: t.replace("\n1,14611", "\n1,14611,3"), r"expected 2 values"),
        (lambda t: t.replace("\n1,14611", ""), r"k = 0..64 once each"),
    ],
)
def test_big_math_table_loader_names_the_file_and_line(tmp_path: Path, edit, why) -> None:
    from stddial_book.corpora.bigmath_figure import load_big_math_histogram

    text = edit(committed_big_math())
    if text is not None:
        (tmp_path / "big_math_k_histogram.csv").write_text(text)
    message = refused(lambda: load_big_math_histogram(tmp_path), why)
    assert "big_math_k_histogram.csv" in message and "rebuild it" in message


@pytest.mark.parametrize(
    "edit, why",
    [
        (lambda t: None, r"is missing"),
        (lambda t: "table,k,count\n", r"holds no rows"),  # was an empty dict of tables, silently
        (lambda t: t.replace("table,k,count", "table,count"), r"header table,k,count"),
        (lambda t: t + "deepscaler_x_train,129,4\n", r"k in 0..128"),  # was an IndexError
        (lambda t: t + "deepscaler_x_train,-1,4\n", r"k must be >= 0"),  # was the last entry, silently
        (lambda t: t + "deepscaler_x_train,3,nan\n", r"count must be a whole number"),
        (lambda t: t + "deepscaler_x_train,3\n", r"expected 3 values"),  # was a ValueError about unpacking
        (lambda t: t + "deepscaler_x_train,3,1\ndeepscaler_x_train,3,2\n", r"once per table"),
    ],
)
def test_committed_deepscaler_tables_loader_names_the_file(tmp_path: Path, edit, why) -> None:
    from stddial_book.core.resources import data_path
    from stddial_book.corpora.solve_tables import load_committed_histograms

    text = edit(data_path("solve_rates", "deepscaler_k_histograms.csv").read_text())
    if text is not None:
        (tmp_path / "deepscaler_k_histograms.csv").write_text(text)
    message = refused(lambda: load_committed_histograms(tmp_path), why)
    assert "deepscaler_k_histograms.csv" in message


def write_deepscaler(path: Path, texts, difficulties) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table(
            {
                "prompt": [[{"content": t, "role": "user"}] for t in texts],
                "extra_info": [{"difficulty": d, "index": i, "split": "train"} for i, d in enumerate(difficulties)],
            }
        ),
        path,
    )
    return path


def test_deepscaler_loader_refuses_missing_empty_and_nan(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from stddial_book.corpora.solve_tables import union_of_deepscaler

    good = write_deepscaler(tmp_path / "deepscaler_a_train.parquet", ["x", "y"], [0.0, 50.0])
    assert union_of_deepscaler([good])[0].num_correct.tolist() == [128, 64]
    # NaN difficulty passed the integer check (NaN compares False) and became a garbage k
    nan = write_deepscaler(tmp_path / "nan.parquet", ["x", "y"], [0.0, math.nan])
    refused(lambda: union_of_deepscaler([nan]), r"nan.parquet.*row 1 has difficulty nan")
    null = write_deepscaler(tmp_path / "null.parquet", ["x", "y"], [0.0, None])
    refused(lambda: union_of_deepscaler([null]), r"null.parquet.*row 1 has difficulty None")
    empty = tmp_path / "empty.parquet"
    pq.write_table(
        pa.table(
            {
                "prompt": pa.array([], pa.list_(pa.struct([("content", pa.string())]))),
                "extra_info": pa.array([], pa.struct([("difficulty", pa.float64())])),
            }
        ),
        empty,
    )
    refused(lambda: union_of_deepscaler([empty]), r"empty.parquet holds no rows")
    refused(lambda: union_of_deepscaler([tmp_path / "missing.parquet"]), r"missing.parquet does not exist")
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    refused(lambda: union_of_deepscaler([broken]), r"broken.parquet could not be read as a parquet file")
    refused(lambda: union_of_deepscaler([]), r"paths is empty")
    refused(lambda: union_of_deepscaler([None]), r"path must be a path", TypeError)


def test_resources_and_other_loaders_name_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stddial_book.core import resources
    from stddial_book.corpora import dapo_fig3b as dapo_curve
    from stddial_book.corpora import pools

    refused(lambda: resources.sha256(tmp_path / "missing.bin"), r"missing.bin does not exist")
    refused(lambda: resources.sha256(tmp_path), r"cannot be read")
    refused(lambda: resources.require_sha256(tmp_path / "missing.bin", "0" * 64, "a file"), r"missing.bin")
    refused(lambda: resources.data_path("solve_rates", 3), r"strings", TypeError)
    refused(lambda: resources.data_path(".."), r"inside the book's data folder")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    refused(lambda: resources.write_table(blocker, "t", ["k"], [[1]], {}), r"a-file.*is a file")
    refused(lambda: resources.write_table(blocker / "sub", "t", ["k"], [[1]], {}), r"is a file")
    refused(lambda: resources.write_table(tmp_path, "../t", ["k"], [[1]], {}), r"plain file name")
    # the DAPO points: a missing file, text where a number belongs, NaN (which passed every check), one column
    good = dapo_curve.load_dapo_fig3b()
    assert good[0].size == 60
    lines = (REPO / "data" / "dapo" / "dapo_fig3b_allcorrect.csv").read_text().splitlines()
    for change, why in (
        (None, "is missing"),
        ((3, "223,x"), "line 4: expected a step and a fraction"),
        ((3, "223,nan"), "line 4: the step and fraction must be finite"),
        ((3, "223"), "line 4: expected a step"),
        ((3, "-5,0.1"), "steps must increase"),
    ):
        path = tmp_path / "points.csv"
        if change is None:
            path.unlink(missing_ok=True)
        else:
            edited = list(lines)
            edited[change[0]] = change[1]
            path.write_text("\n".join(edited) + "\n")
        message = refused(lambda: dapo_curve.load_dapo_fig3b(path), why)
        assert "points.csv" in message
    # the DeepScaleR provenance (JSON)
    monkeypatch.setattr(pools, "data_path", lambda *parts: tmp_path / parts[-1])
    refused(lambda: pools.deepscaler_provenance(), r"provenance.json is missing")
    (tmp_path / "deepscaler_k_histograms.provenance.json").write_text("{not json")
    refused(lambda: pools.deepscaler_provenance(), r"is not a readable JSON file")
    (tmp_path / "deepscaler_k_histograms.provenance.json").write_text("[1, 2]")
    refused(lambda: pools.deepscaler_provenance(), r"lacks the 'source' and 'union'")


# --------------------------------------------------------------------------- 6. the minimal group size, by bisection


def brute_force_minimal_group_size(eps: float, p: float, limit: int = 4096) -> int:
    """The first G = 2, 3, ... with gradient_fidelity ≥ 1 − ε, scanned in blocks (what minimal_group_size did)."""
    for start in range(2, limit + 1, 64):
        sizes = np.arange(start, min(start + 64, limit + 1))
        hit = np.nonzero(np.asarray(size_law.gradient_fidelity(np.full(sizes.shape, p), sizes)) >= 1.0 - eps)[0]
        if hit.size:
            return int(sizes[hit[0]])
    raise AssertionError(f"the scan to {limit} is too short for eps={eps}, p={p}")


@pytest.mark.parametrize("eps", [0.3, 0.1, 0.05, 0.02, 0.01])
def test_minimal_group_size_equals_the_scan(eps: float) -> None:
    for p in (0.02, 0.05, 0.1, 0.17, 0.3, 0.5, 0.62, 0.9, 0.95, 0.98, 1e-3, 0.999):
        if size_law.group_size_law(eps, p) > 600:
            continue
        assert size_law.minimal_group_size(eps, p) == brute_force_minimal_group_size(eps, p), (eps, p)


def test_minimal_group_size_is_fast_and_bounded_for_extreme_inputs() -> None:
    start = time.perf_counter()
    # p = ε = 1e-6 needs G ≈ 1.25e11: the scan of every G would never end; the old code refused any
    # max_group_size above 1e7 and took about 10 s to refuse at 1e7
    found = size_law.minimal_group_size(1e-6, 1e-6, max_group_size=10**12)
    assert time.perf_counter() - start < 1.0
    law = float(size_law.group_size_law(1e-6, 1e-6))
    assert law <= found <= 1.001 * law
    assert size_law.gradient_fidelity(1e-6, found) >= 1 - 1e-6 > size_law.gradient_fidelity(1e-6, found - 1)
    start = time.perf_counter()
    refused(lambda: size_law.minimal_group_size(1e-6, 1e-6, max_group_size=10**7), r"no G ≤ 10000000 reaches")
    refused(
        lambda: size_law.minimal_group_size(1e-6, 1e-9, max_group_size=10**12), r"raise max_group_size \(up to 1e\+12"
    )
    refused(
        lambda: size_law.minimal_group_size(0.05, 0.5, max_group_size=10**13),
        r"max_group_size=10000000000000 is above",
    )
    assert time.perf_counter() - start < 1.0
    # answers between the old scan's reach and the bound, quickly and minimal
    for eps, p in ((1e-3, 0.01), (1e-4, 0.5), (1e-5, 0.3), (1e-8, 0.5)):
        start = time.perf_counter()
        found = size_law.minimal_group_size(eps, p, max_group_size=10**12)
        assert time.perf_counter() - start < 1.0, (eps, p)
        assert size_law.gradient_fidelity(p, found) >= 1 - eps > size_law.gradient_fidelity(p, found - 1), (eps, p)


def test_large_group_sums_are_accurate() -> None:
    """Above G = 4096 E[σ̂] sums Loader's probabilities over ±15 SD (the log-gamma sum lost ~1e-10 at 1e5)."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    for G, p in ((5000, 0.3), (9000, 0.01), (12000, 0.5)):
        P = mpmath.mpf(p)
        pmf, total = (1 - P) ** G, mpmath.mpf(0)
        for k in range(G):  # exact terms by recurrence: pmf(k + 1) = pmf(k) (G − k)/(k + 1) p/(1 − p)
            pmf = pmf * (G - k) / (k + 1) * P / (1 - P)
            total += pmf * mpmath.sqrt(mpmath.mpf(k + 1) / G * (1 - mpmath.mpf(k + 1) / G))
        assert float(silent.expected_group_std(p, G)) == pytest.approx(float(total), rel=1e-14)
    # G up to 1e12 agrees with the expansion 1 − 1/(8Gp(1 − p)), whose next term is O(1/G²)
    for G in (10**8, 10**10, 10**12):
        assert float(size_law.gradient_fidelity(0.3, G)) == pytest.approx(
            float(size_law.attenuated_fidelity(0.3, G)), abs=1e-15
        )
    refused(lambda: silent.expected_group_std(0.5, 10**12 + 1), r"above 1e\+12")


# --------------------------------------------------------------------------- 4. a group size the run log contradicts


@pytest.fixture(scope="module")
def recorded_grpo_run() -> list[dict]:
    from stddial_book.rl.runlog import load_run, recorded_runs

    return load_run(recorded_runs("reference")["grpo"][0])[1]


@pytest.mark.parametrize("G", [4, 7, 9, 16])
def test_a_group_size_the_log_contradicts_is_named(recorded_grpo_run, G: int) -> None:
    from stddial_book.experiments.testbed import logs, predictions, refill

    # G = 16 gave a silent-fraction R² of −9.4 (−221 at G = 4), an extreme-mass share of 0, and
    # mass_by_band, dapo_cost, run_summary computed with the wrong G without a word
    for call in (
        lambda: predictions.silent_check(recorded_grpo_run, G),
        lambda: logs.extreme_mass_share(recorded_grpo_run, G),
        lambda: predictions.mass_by_band(recorded_grpo_run, "grpo", G),
        lambda: logs.mass_by_sigma(recorded_grpo_run, G),
        lambda: refill.dapo_cost(recorded_grpo_run, G),
        lambda: predictions.pool_study({"grpo": [recorded_grpo_run]}, G),
    ):
        message = refused(call, rf"group_size={G} does not match the run")
        assert "group_size" in message and ("per group" in message or "outside" in message or "σ" in message)
    message = refused(lambda: predictions.silent_check(recorded_grpo_run, 16), r"8 per group")
    assert "(here 8)" in message
    check = predictions.silent_check(recorded_grpo_run, 8)  # the run's own G: as before
    assert 0 < float(check["r2"]) <= 1


# --------------------------------------------------------------------------- 5. one seed decides nothing


def test_one_seed_per_recipe_is_not_testable() -> None:
    from stddial_book.experiments import statistics

    # one seed each: the standard error was 0, z infinite, and the difference "significant"
    screen = statistics.comparison_screen({"m": {"a": [1.0], "b": [2.0]}, "n": {"a": [0.3], "b": [0.3]}})
    assert screen["passed"] == [] and screen["summary"]["passed"] == 0 and screen["summary"]["not_testable"] == 2
    assert screen["rows"][0][1] == "-1.000 (not testable with one seed)"
    mixed = statistics.comparison_screen({"m": {"a": [1.0], "b": [2.0, 2.1, 1.9]}})  # one side of one seed
    assert mixed["passed"] == [] and "not testable with one seed" in mixed["rows"][0][1]
    refused(lambda: statistics.welch([1.0], [5.0]), r"not testable with one seed.*got 1 and 1")
    refused(lambda: statistics.welch([1.0, 2.0], [5.0]), r"got 2 and 1")
    # two seeds or more: tested as before
    tested = statistics.comparison_screen({"m": {"a": [1.0, 1.01, 0.99], "b": [2.0, 2.01, 1.99]}})
    assert tested["passed"] == ["m, a − b"] and tested["summary"]["not_testable"] == 0
    study = {"grpo": {"final": [np.array([0.1, 0.5])]}, "dapo": {"final": [np.array([0.9, 0.5])]}}
    hard = statistics.hard_quartile_screen(study, "grpo")
    assert hard["passed"] == [] and hard["summary"]["not_testable"] == 1
    refused(lambda: statistics.seed_projection({"m": {"a": [1.0], "b": [2.0]}}, seeds=6), r"at least two seeds")


# --------------------------------------------------------------------------- 9. the audit: every public function, bad input

# Cases the audit found answered silently, hanging, or failing with an exception a reader cannot act
# on (AttributeError, KeyError, IndexError, OverflowError, csv.Error), each now a one-line refusal.


def _controlled_study():
    from stddial_book.experiments.controlled import study as bernoulli

    hist = np.array([5, 3, 2, 4, 6, 4, 2, 3, 5])
    config = bernoulli.ControlledRun(num_prompts=40, group_size=4, steps=5)
    return bernoulli.controlled_run_study(np.arange(9) / 8, hist, seeds=2, config=config), config


def _audit_cases():
    from stddial_book.core import resources
    from stddial_book.corpora import bigmath_figure, histograms, pools, solve_tables
    from stddial_book.corpora import dapo_fig3b as dapo_curve
    from stddial_book.experiments import statistics
    from stddial_book.experiments.controlled import study as bernoulli
    from stddial_book.experiments.reproduction import results as reproduction
    from stddial_book.experiments.testbed import logs, predictions, refill
    from stddial_book.experiments.testbed import numbers as testbed_numbers
    from stddial_book.presentation import paper_figures
    from stddial_book.rl import sampling
    from stddial_book.theory import derivation
    from stddial_book.theory.recipes import DAPO, GRPO

    hist = histograms.KHistogram(8, np.array([5, 3, 2, 4, 6, 4, 2, 3, 5]))
    p0 = np.array([0.1, 0.3, 0.5, 0.8])
    small = bernoulli.ControlledRun(num_prompts=40, group_size=4, steps=5)
    result = bernoulli.controlled_run(np.linspace(0.05, 0.95, 40), GRPO, small)
    steps, logged = dapo_curve.load_dapo_fig3b()
    row = reproduction.Row("s", "q", 1.0, 1.0, 2)
    return [
        # hangs (each ran past the audit's time limit of 10-30 s; most would run for hours)
        ("hang", lambda: bernoulli.monte_carlo_gradient(p0, 4, GRPO, 10**30), r"samples, above 1e\+09"),
        ("hang", lambda: bernoulli.monte_carlo_z(p0, 4, GRPO, 10**30), r"lower num_groups"),
        (
            "hang",
            lambda: bernoulli.controlled_run_study(hist.solve_rates, hist.counts, seeds=10**30, config=small),
            r"at most 1000",
        ),
        (
            "hang",
            lambda: bernoulli.matched_gap(hist.solve_rates, hist.counts, seeds=10**30, config=small),
            r"at most 1000",
        ),
        ("hang", lambda: bernoulli.ControlledRun(num_prompts=10**30), r"num_prompts × \(steps \+ 1\)"),
        ("hang", lambda: bernoulli.ControlledRun(steps=10**30), r"num_prompts × \(steps \+ 1\)"),
        ("hang", lambda: bernoulli.ControlledRun(redraw_tries=10**30), r"redraw_tries=.* at most 1000"),
        (
            "hang",
            lambda: dapo_curve.fit_consistency(hist.solve_rates, hist.counts, steps, logged, bootstrap=10**30),
            r"bootstrap=.* at most 10000",
        ),
        ("hang", lambda: reproduction.identity_max_error(max_group_size=10**30), r"at most 512"),
        ("hang", lambda: reproduction.rloo_max_error(max_group_size=10**30), r"at most 10000"),
        ("hang", lambda: paper_figures.objective_figure(num_groups=10**30), r"at most 100000"),
        ("hang", lambda: costs.measure_overheads(PROFILES["quick"], repeats=10**30), r"repeats"),
        # silently wrong or meaningless answers
        ("wrong", lambda: reproduction.identity_max_error(max_group_size=1), r"max_group_size must be at least 2"),
        ("wrong", lambda: reproduction.rloo_max_error(max_group_size=0), r"at least 2"),  # was 0.0: nothing checked
        ("wrong", lambda: reproduction.identity_max_error(seed=None), r"seed must be a whole number"),  # unseeded
        ("wrong", lambda: bernoulli.monte_carlo_gradient(p0, 4, GRPO, 50, seed=None), r"seed"),
        ("wrong", lambda: bernoulli.extreme_share(result, step=-1), r"step must index one of the run's 5 steps"),
        ("wrong", lambda: bernoulli.decile_share(result, step=-2), r"0\.\.4"),
        ("wrong", lambda: bernoulli.hardest_quartile(np.array([-0.5, 0.5, 0.2, 0.1])), r"\[0, 1\]"),
        (
            "wrong",
            lambda: statistics.hard_quartile_screen(
                {"grpo": {"final": [np.array([0.1])] * 2}, "dapo": {"final": [np.array([0.1])] * 2}}, level=1.5
            ),
            r"level is a family-wise error rate",
        ),  # every p < 1.5: every comparison "passed"
        ("wrong", lambda: logs.gradient_scale([], [], 2.5), r"max_new_tokens must be a whole number"),
        ("wrong", lambda: pools.budget_bands(hist, group_sizes=[]), r"non-empty list"),  # was {} silently
        ("wrong", lambda: solve_tables.big_math_histogram(use_hub="no"), r"use_hub must be True or False"),
        ("wrong", lambda: identity.update_weight(0.25, DAPO, group_size="x"), r"group_size"),  # junk was ignored
        ("wrong", lambda: identity.update_weight(0.25, DAPO, group_size=-1), r"group_size"),
        ("wrong", lambda: sampling.SamplingCost(rounds=math.nan), r"SamplingCost.rounds"),
        ("wrong", lambda: sampling.SamplingCost(groups_generated=1, groups_kept=3), r"cannot keep more"),
        ("wrong", lambda: reproduction.Row("s", "q", math.nan, 1.0, 2), r"Row.paper must be a finite number"),
        ("wrong", lambda: reproduction.Row(None, "q", 1.0, 1.0, 2), r"Row.section must be a string"),
        ("wrong", lambda: reproduction.rows_table([]), r"non-empty list of Row"),
        ("wrong", lambda: derivation.reward_moments(math.nan, 0), r"reward_correct must be finite"),
        ("wrong", lambda: derivation.reward_moments(1, 1), r"must exceed reward_wrong"),  # σ = 0: A = zoo
        ("wrong", lambda: derivation.advantages(True, std_eps=-1), r"std_eps .* >= 0"),
        ("wrong", lambda: derivation.advantages(True, reward_correct=1j), r"reward_correct"),
        ("wrong", lambda: derivation.latex_lines(None), r"expr must be a SymPy expression"),  # drew 'None'
        ("wrong", lambda: resources.write_table(REPO / "nowhere", "t", "k", [[1]], {}), r"header must be"),
        ("wrong", lambda: paper_figures.silent_probability_figure(group_sizes=[]), r"non-empty list of group sizes"),
        (
            "wrong",
            lambda: paper_figures.budget_by_decile_figure({"GRPO": np.full(10, 0.1)}, np.full(10, 0.1), None),
            r"title must be a string",
        ),
        (
            "wrong",
            lambda: paper_figures.controlled_quartile_figure(_controlled_study()[0], 6000),
            r"num_prompts=6000 is not the study's \(40\)",
        ),  # DAPO's groups per prompt were misread
        ("wrong", lambda: paper_figures.pool_silent_figure({}), r"non-empty pool_study result"),
        ("wrong", lambda: predictions.pool_study({}, 8), r"non-empty dict"),
        # raw exceptions (the old error in the comment)
        ("raw", lambda: bigmath_figure.check_against_paper([math.inf] * 65), r"NaN or infinite"),  # OverflowError
        ("raw", lambda: bigmath_figure.check_against_paper([10**30] * 65), r"65 whole numbers"),  # OverflowError
        (
            "raw",
            lambda: bigmath_figure.counts_from_figure(bigmath_figure.FigureData(np.zeros(64), {})),
            r"decile_shares must map",
        ),  # AttributeError
        ("raw", lambda: bigmath_figure.FigureData(0.0, {}), r"bar_counts must hold the 64 bar heights"),  # IndexError
        ("raw", lambda: reproduction.rows_table(["row"]), r"rows must hold Row objects"),  # AttributeError
        ("raw", lambda: reproduction.rows_table([row, 3]), r"found int"),
        ("raw", lambda: derivation.reward_moments(np.array([1.0, 2.0]), 0), r"reward_correct must be a SymPy"),
        ("raw", lambda: derivation.latex_lines(np.array([])), r"expr must be"),  # IndexError
        (
            "raw",
            lambda: resources.write_table(REPO / "nowhere", "t", ["k"], [1, 2], {}),
            r"row 0 of the table",
        ),  # csv.Error
        ("raw", lambda: logs.identity_during_training("run"), r"runs must be a list of run logs", TypeError),
        ("raw", lambda: predictions.pool_study([[{}]], 8), r"non-empty dict"),  # AttributeError: items
        ("raw", lambda: testbed_numbers.pass_rate_by_carries(None, []), r"evaluation must be an EvalResult", TypeError),
        ("raw", lambda: testbed_numbers.heldout_start([1, 2], []), r"evaluation must be an EvalResult", TypeError),
        ("raw", lambda: testbed_numbers.profile_table([1, 2], {}), r"profiles must be a non-empty dict", TypeError),
        ("raw", lambda: testbed_numbers.resource_table(np.array([1.0])), r"resources must be a non-empty dict"),
        (
            "raw",
            lambda: testbed_numbers.run_resources({}, {}),
            r"run_provenance lacks config.train.sample_budget",
        ),  # KeyError
        ("raw", lambda: refill.max_rounds_study([], {}), r"train lacks group_size"),  # KeyError
        ("raw", lambda: statistics.hard_quartile_screen({"grpo": {}}, reference=np.array([1])), r"study must hold"),
        ("raw", lambda: trl_settings.trl_gaps("dapo", group_size=10**30), None),  # OverflowError: now answered
        ("raw", lambda: paper_figures.big_math_histogram_figure(np.zeros(65)), r"hist must be a KHistogram", TypeError),
        ("raw", lambda: paper_figures.dapo_allcorrect_figure({}), r"fit must be what", TypeError),
        ("raw", lambda: paper_figures.controlled_silent_figure({}), r"controlled_run_study returns"),  # KeyError
        ("raw", lambda: paper_figures.pool_bands_figure({"grpo": {}}), r"pool_study returns"),  # KeyError
        (
            "raw",
            lambda: paper_figures.silent_by_group_size_figure({"a": np.ones(3)}, np.array([1, 2, 4]), markers={"m": 3}),
            r"markers\['m'\] must be a pair",
        ),
        (
            "raw",
            lambda: paper_figures.budget_by_decile_figure({"GRPO": np.full(10, 0.1)}, 10**30, "t"),
            r"prompt_share must be 1-D with 10 entries",
        ),  # OverflowError
        ("raw", lambda: identity.group_std([1.0, 0.0], correction=np.ones((2, 2))), r"correction must be 0"),
        ("raw", lambda: histograms.silent_fraction(hist, 4, model=np.array(["a", "b"])), r"model must be"),
        ("raw", lambda: sampling.SamplingCost(hit_cap="no"), r"hit_cap must be True or False", TypeError),
    ]


def test_audit_cases_are_refused_quickly_in_one_line() -> None:
    failures = []
    for kind, call, match, *exc in _audit_cases():
        start = time.perf_counter()
        try:
            call()
        except (ValueError, TypeError) as err:
            text = str(err)
            if (
                "\n" in text
                or not text.strip()
                or (match is not None and not re.search(match, text))
                or (exc and not isinstance(err, exc[0]))
            ):
                failures.append(f"{kind}: {type(err).__name__}: {text[:160]} (expected {match!r})")
        else:
            if match is not None:
                failures.append(f"{kind}: answered instead of refusing (expected {match!r})")
        finally:
            import matplotlib.pyplot as plt

            plt.close("all")
        if time.perf_counter() - start > 5.0:
            failures.append(f"{kind}: took {time.perf_counter() - start:.1f} s (expected {match!r})")
    assert not failures, "\n".join(failures)


# The sweep itself: each public function with a valid call, then each argument in turn replaced by
# each bad value. The outcome must be a ValueError or TypeError with a one-line message (a 2-D array
# in the message of the shared helpers in _arrays and recipes.as_recipe still spans lines: see the
# report) or an answer whose numbers are finite (documented infinities excepted), within 10 s.

BAD_VALUES = {
    "None": None,
    "text": "x",
    "numeric text": "8",
    "True": True,
    "empty list": [],
    "list": [1, 2],
    "empty array": np.array([]),
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "-1": -1,
    "0": 0,
    "huge": 10**30,
    "2.5": 2.5,
    "object": object(),
    "dict": {},
    "complex": 1j,
    "2-D array": np.array([[1.0, 2.0], [3.0, 4.0]]),
    "array with nan": np.array([0.5, math.nan]),
    "negative array": np.array([-0.5, 0.5]),
}
#: Answers documented to hold infinities or NaN: tries_needed and dapo_oversampling are inf where every
#: group is silent (p = 0 or 1, G = 1).
NON_FINITE_OK = {"tries_needed", "dapo_oversampling"}


def _numbers(x):
    if isinstance(x, (bool, np.bool_, str)) or x is None:
        return []
    if isinstance(x, (int, float, np.integer, np.floating)):
        return [float(x)]
    if isinstance(x, np.ndarray):
        return x.astype(float).ravel().tolist() if x.dtype.kind in "iuf" else []
    if isinstance(x, dict):
        return [v for val in x.values() for v in _numbers(val)]
    if isinstance(x, (list, tuple)):
        return [v for val in x for v in _numbers(val)]
    if dataclasses.is_dataclass(x):
        return [v for f in dataclasses.fields(x) for v in _numbers(getattr(x, f.name))]
    return []


def _sweep_calls():
    """name -> (function, args, kwargs, slots to leave out)."""
    from stddial_book.core import resources
    from stddial_book.corpora import bigmath_figure, histograms, pools, solve_tables
    from stddial_book.corpora import dapo_fig3b as dapo_curve
    from stddial_book.experiments import statistics
    from stddial_book.experiments.controlled import study as bernoulli
    from stddial_book.experiments.reproduction import results as reproduction
    from stddial_book.experiments.testbed import logs, predictions, refill
    from stddial_book.presentation import paper_figures
    from stddial_book.rl import sampling
    from stddial_book.rl.configs import TrainConfig
    from stddial_book.rl.runlog import load_run, recorded_runs
    from stddial_book.theory import derivation
    from stddial_book.theory.recipes import DAPO, GRPO

    hist = histograms.KHistogram(8, np.array([5, 3, 2, 4, 6, 4, 2, 3, 5]))
    budget = histograms.gradient_budget(hist, GRPO)
    p0 = np.array([0.1, 0.3, 0.5, 0.8])
    small = bernoulli.ControlledRun(num_prompts=40, group_size=4, steps=5)
    result = bernoulli.controlled_run(np.linspace(0.05, 0.95, 40), GRPO, small)
    steps, logged = dapo_curve.load_dapo_fig3b()
    fit = dapo_curve.fit_consistency(hist.solve_rates, hist.counts, steps, logged, bootstrap=3)
    figure = bigmath_figure.read_figure(resources.data_path(*bigmath_figure.FIGURE_FILE))
    runs = recorded_runs("reference")
    records = [r for r in load_run(runs["grpo"][0])[1] if r["step"] <= 20]
    dapo_prov, dapo_records = load_run(runs["dapo"][0])
    dapo_records = [r for r in dapo_records if r["step"] <= 6]
    work = costs.RunWork(10, 1000, 4, 400)
    overheads = {"generate_s": 1e-3, "train_s": 2e-3}
    reward = trl_rewards.trl_reward_funcs("grpo", max_new_tokens=8)[0]
    return {
        "pass_rate": (identity.pass_rate, ([1.0, 0.0, 1.0, 1.0],), {}, ()),
        "group_std": (identity.group_std, ([1.0, 0.0, 1.0, 1.0],), {"correction": 0}, ()),
        "std_from_pass_rate": (identity.std_from_pass_rate, (0.25,), {"group_size": 8, "correction": 1}, ()),
        "update_weight": (identity.update_weight, (0.25, DAPO), {"group_size": 8, "nonsilent_fraction": 0.5}, ()),
        "silent_probability": (silent.silent_probability, (0.3, 8), {}, ()),
        "expected_group_std": (silent.expected_group_std, (0.3, 8), {"correction": 0}, ()),
        "tries_needed": (silent.tries_needed, (0.3, 0.05), {}, ()),
        "refill_weight": (silent.refill_weight, (0.3, 8, DAPO), {"redraw_tries": 4}, ()),
        "gradient_fidelity": (size_law.gradient_fidelity, (0.3, 8), {}, ()),
        "minimal_group_size": (size_law.minimal_group_size, (0.05, 0.3), {"max_group_size": 1000}, ()),
        "hypergeometric_pmf": (silent.hypergeometric_pmf, ([3, 5], 16, 4), {}, ()),
        "nonsilent_groups": (sampling.nonsilent_groups, ([1, 0, 1, 1], 2), {}, ()),
        "overlong_penalty": (sampling.overlong_penalty, ([3, 8], 8, 2), {}, ()),
        "SamplingCost": (sampling.SamplingCost, (), {"rounds": 1, "groups_generated": 2, "groups_kept": 1}, ()),
        "DynamicSampler": (sampling.DynamicSampler, (4, 2), {"max_rounds": 3}, ()),
        "KHistogram": (histograms.KHistogram, (8, np.array([5, 3, 2, 4, 6, 4, 2, 3, 5])), {}, ()),
        "silent_fraction": (histograms.silent_fraction, (hist, [2, 4, 8]), {"model": "hypergeometric"}, ()),
        "dapo_oversampling": (histograms.dapo_oversampling, (hist, [2, 4, 8]), {}, ()),
        "expected_update_mass": (histograms.expected_update_mass, (hist, 8, DAPO), {}, ()),
        "band_shares": (histograms.band_shares, (hist, budget), {}, ()),
        "decile_shares": (histograms.decile_shares, (hist, budget), {}, ()),
        "load_committed_histograms": (solve_tables.load_committed_histograms, (solve_tables.DEFAULT_DATA_DIR,), {}, ()),
        "big_math_histogram": (solve_tables.big_math_histogram, (), {"use_hub": False}, ()),
        "pool_numbers": (pools.pool_numbers, (hist,), {"group_size": 4}, ()),
        "budget_bands": (pools.budget_bands, (hist,), {"group_sizes": (None, 4)}, ()),
        "sha256": (resources.sha256, (resources.data_path("dapo", "dapo_fig3b_allcorrect.csv"),), {}, ()),
        "write_table": (resources.write_table, ("out", "t", ["a"], [[1]], {"x": 1}), {}, ()),
        "sharpened_moment": (
            dapo_curve.sharpened_moment,
            (hist.solve_rates, hist.counts / hist.counts.sum(), np.array([1.0, 2.0]), 32.0),
            {},
            (),
        ),
        "fit_consistency": (
            dapo_curve.fit_consistency,
            (hist.solve_rates, hist.counts, steps, logged),
            {"bootstrap": 2, "seed": 0},
            (),
        ),
        "consistency_numbers": (dapo_curve.consistency_numbers, (fit,), {"percentiles": (10, 90)}, ()),
        "reward_moments": (derivation.reward_moments, (1, 0), {"correction": 0}, ()),
        "advantages": (derivation.advantages, (True,), {"reward_correct": 1, "reward_wrong": 0, "std_eps": 0}, ()),
        "latex_lines": (derivation.latex_lines, (derivation.attenuation_claim().rhs,), {"width": 56}, ()),
        "identity_max_error": (reproduction.identity_max_error, (), {"max_group_size": 8, "dims": 3, "seed": 0}, ()),
        "rloo_max_error": (reproduction.rloo_max_error, (), {"max_group_size": 8, "seed": 0}, ()),
        "Row": (reproduction.Row, ("s", "q", 1.0, 1.0, 2), {}, ()),
        "rows_table": (reproduction.rows_table, ([reproduction.Row("s", "q", 1.0, 1.0, 2)],), {}, ()),
        "monte_carlo_gradient": (bernoulli.monte_carlo_gradient, (p0, 4, GRPO, 50), {"seed": 0}, ()),
        "ControlledRun": (
            bernoulli.ControlledRun,
            (),
            {"num_prompts": 40, "group_size": 4, "steps": 5, "redraw_tries": 2},
            (),
        ),
        "controlled_run": (bernoulli.controlled_run, (np.linspace(0.05, 0.95, 40), GRPO), {"config": small}, ()),
        "extreme_share": (bernoulli.extreme_share, (result,), {"step": 0}, ()),
        "hardest_quartile": (bernoulli.hardest_quartile, (p0,), {}, ()),
        "value_at_budget": (bernoulli.value_at_budget, (result, bernoulli.quartile_curve(result), 10.0), {}, ()),
        "controlled_run_study": (
            bernoulli.controlled_run_study,
            (hist.solve_rates, hist.counts),
            {"seeds": 2, "config": small},
            (),
        ),
        "check_against_paper": (
            bigmath_figure.check_against_paper,
            (bigmath_figure.load_big_math_histogram().counts,),
            {},
            (),
        ),
        "counts_from_figure": (bigmath_figure.counts_from_figure, (figure,), {}, ()),
        "read_figure": (bigmath_figure.read_figure, (resources.data_path(*bigmath_figure.FIGURE_FILE),), {}, ()),
        "RunWork": (costs.RunWork, (10, 1000, 4, 400), {}, ()),
        "estimate_seconds": (costs.estimate_seconds, (work, 1000, overheads, 1e9), {}, ()),
        "check_on_cpu": (costs.check_on_cpu, (PROFILES["quick"], "grpo", [10.0], overheads, 1e9), {}, ()),
        "trl_settings": (
            trl_settings.trl_settings,
            ("grpo",),
            {"group_size": 8, "max_new_tokens": 8, "prompts_per_step": 4, "temperature": 1.0},
            (),
        ),
        "trl_settings_for": (trl_settings.trl_settings_for, (TrainConfig("grpo"),), {"num_processes": 1}, ()),
        "trl_gaps": (trl_settings.trl_gaps, ("dapo",), {"group_size": 8, "num_minibatches": 2, "use_vllm": False}, ()),
        "reward_settings": (trl_settings.reward_settings, ("dapo",), {"max_new_tokens": 8}, ()),
        "reward_function": (
            lambda ids, answer: reward(completion_ids=ids, answer=answer),
            ([[1, 2], [3]], ["1", "2"]),
            {},
            (),
        ),
        "extreme_mass_share": (logs.extreme_mass_share, (records, 8), {}, ()),
        "silent_check": (predictions.silent_check, (records, 8), {}, ()),
        "mass_by_band": (predictions.mass_by_band, (records, "grpo", 8), {"num_bands": 4}, ()),
        "pool_study": (predictions.pool_study, ({"grpo": [records]}, 8), {"num_bands": 4}, ()),
        "dapo_cost": (refill.dapo_cost, (dapo_records, 8), {}, ()),
        "replay_refill": (refill.replay_refill, (dapo_records, 8, 32, 8), {}, ()),
        "max_rounds_study": (
            refill.max_rounds_study,
            (dapo_records, dapo_prov["config"]["train"]),
            {"max_rounds": 1},
            (),
        ),
        "comparison_screen": (
            statistics.comparison_screen,
            ({"m": {"a": [1.0, 2.0], "b": [2.0, 3.0]}},),
            {"level": 0.05},
            (),
        ),
        "welch": (statistics.welch, ([1.0, 2.0], [2.0, 3.5]), {}, ()),
        "seed_projection": (statistics.seed_projection, ({"m": {"a": [1.0, 2.0], "b": [2.0, 3.5]}}, 6), {}, ()),
        "gradient_scale": (logs.gradient_scale, (records, records, 8), {}, ()),
        "silent_probability_figure": (paper_figures.silent_probability_figure, (), {"group_sizes": (2, 8)}, ()),
        "fidelity_figure": (paper_figures.fidelity_figure, (), {"max_group_size": 16}, ()),
        "budget_by_decile_figure": (
            paper_figures.budget_by_decile_figure,
            ({"GRPO": np.full(10, 0.1)}, np.full(10, 0.1), "t"),
            {},
            (),
        ),
        "silent_by_group_size_figure": (
            paper_figures.silent_by_group_size_figure,
            ({"a": histograms.silent_fraction(hist, [2, 4])}, np.array([2, 4])),
            {},
            (),
        ),
    }


@pytest.fixture(scope="module")
def sweep_calls(tmp_path_factory):
    import os

    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("sweep"))  # relative output folders (write_table's "x") land here
    try:
        yield _sweep_calls()
    finally:
        os.chdir(here)


SWEPT = [
    "pass_rate",
    "group_std",
    "std_from_pass_rate",
    "update_weight",
    "silent_probability",
    "expected_group_std",
    "tries_needed",
    "refill_weight",
    "gradient_fidelity",
    "minimal_group_size",
    "hypergeometric_pmf",
    "nonsilent_groups",
    "overlong_penalty",
    "SamplingCost",
    "DynamicSampler",
    "KHistogram",
    "silent_fraction",
    "dapo_oversampling",
    "expected_update_mass",
    "band_shares",
    "decile_shares",
    "load_committed_histograms",
    "big_math_histogram",
    "pool_numbers",
    "budget_bands",
    "sha256",
    "write_table",
    "sharpened_moment",
    "fit_consistency",
    "consistency_numbers",
    "reward_moments",
    "advantages",
    "latex_lines",
    "identity_max_error",
    "rloo_max_error",
    "Row",
    "rows_table",
    "monte_carlo_gradient",
    "ControlledRun",
    "controlled_run",
    "extreme_share",
    "hardest_quartile",
    "value_at_budget",
    "controlled_run_study",
    "check_against_paper",
    "counts_from_figure",
    "read_figure",
    "RunWork",
    "estimate_seconds",
    "check_on_cpu",
    "trl_settings",
    "trl_settings_for",
    "trl_gaps",
    "reward_settings",
    "reward_function",
    "extreme_mass_share",
    "silent_check",
    "mass_by_band",
    "pool_study",
    "dapo_cost",
    "replay_refill",
    "max_rounds_study",
    "comparison_screen",
    "welch",
    "seed_projection",
    "gradient_scale",
    "silent_probability_figure",
    "fidelity_figure",
    "budget_by_decile_figure",
    "silent_by_group_size_figure",
]


@pytest.mark.parametrize("name", SWEPT)
def test_bad_values_are_refused_or_answered_finitely(sweep_calls, name: str) -> None:
    import signal

    import matplotlib.pyplot as plt

    fn, args, kwargs, skip = sweep_calls[name]

    def hang(*_):
        raise TimeoutError(f"{name} ran past 10 s")

    def outcome(a, kw, label):
        previous = signal.signal(signal.SIGALRM, hang)
        signal.setitimer(signal.ITIMER_REAL, 10.0)
        try:
            return fn(*a, **kw), None
        except (ValueError, TypeError) as err:
            return None, err
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            plt.close("all")

    answer, err = outcome(args, kwargs, "valid")
    assert err is None, f"{name}: the valid call fails: {err}"
    slots = [(i, None) for i in range(len(args))] + [(None, k) for k in kwargs]
    problems = []
    for i, key in slots:
        if (key or f"arg{i}") in skip:
            continue
        for bad_name, bad in BAD_VALUES.items():
            a, kw = list(args), dict(kwargs)
            if key is None:
                a[i] = bad
            else:
                kw[key] = bad
            where = f"{key or f'argument {i}'} = {bad_name}"
            answer, err = outcome(a, kw, where)
            if err is not None:
                text = str(err)
                if not text.strip() or ("\n" in text and bad_name != "2-D array"):
                    problems.append(f"{where}: message {text!r:.120}")
            elif name not in NON_FINITE_OK and not all(math.isfinite(v) for v in _numbers(answer)):
                problems.append(f"{where}: non-finite answer {answer!r:.120}")
    assert not problems, f"{name}:\n" + "\n".join(problems)


@settings(max_examples=25, deadline=None)
@given(eps=st.floats(0.01, 0.5), p=st.floats(0.02, 0.98))
def test_bisection_equals_the_scan_anywhere(eps: float, p: float) -> None:
    if size_law.group_size_law(eps, p) > 300:
        return
    assert size_law.minimal_group_size(eps, p) == brute_force_minimal_group_size(eps, p)


@settings(max_examples=40, deadline=None)
@given(size=st.integers(2, 4096), p=st.floats(1e-6, 1 - 1e-6))
def test_banded_sum_equals_the_full_sum(size: int, p: float) -> None:
    """The sum over ±15 SD (used above G = 4096) against the full binomial sum."""
    full = float(silent.expected_group_std(p, size))
    assert silent._banded_group_std(size, p) == pytest.approx(full, rel=1e-11, abs=1e-300)
