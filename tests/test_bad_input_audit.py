"""Bad input to the public API refused with a one-line message that names the argument and the fix.

Each test here failed before its fix: a silently wrong answer (rows dropped, a rounded solve rate, a
difference called significant on one seed, a large negative R² for a wrong group size), a hang, or a
raw exception (a traceback, FileNotFoundError, KeyError, zlib.error) a reader cannot act on. The last
section is the audit of every public function of the modules listed in ``AUDITED``: wrong types,
wrong sizes, empty arrays, NaN, infinities, huge values, negative sizes and mismatched inputs.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from stddial_book import costs, identity, trl_bridge
from stddial_book.profiles import PROFILES

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
    reward = trl_bridge.trl_reward_funcs("grpo", max_new_tokens=8)[0]
    ids = [[1, 2], [3], [4]]
    # zip dropped the third completion: two rewards came back for three completions
    refused(lambda: reward(completion_ids=ids, answer=["1", "2"]), r"3 completions but 2 values of 'answer'")
    refused(lambda: reward(completion_ids=ids, answer=["1", "2", "3"], prompts=["a"]), r"'prompts'.*one entry per")
    refused(lambda: reward(completion_ids=ids, answer=["1", "2", "3"], digits=[2, 2]), r"'digits'")
    refused(lambda: reward(completion_ids=ids, answer=[1, 2, 3]), r"answer column must hold strings", TypeError)
    refused(lambda: reward(completion_ids=ids, answer="123"), r"answer must be a list", TypeError)
    # what TRL passes besides the columns is not per row
    assert reward(completion_ids=ids, answer=["1", "2", "3"], prompts=["a"] * 3, trainer_state=object(),
                  log_extra=print, log_metric=print) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("value, kind", [("1e-5", TypeError), (None, TypeError), (math.nan, ValueError),
                                         (-1e-5, ValueError), (0.0, ValueError), (math.inf, ValueError),
                                         (True, TypeError)])
def test_trl_config_mapping_refuses_a_bad_learning_rate(value, kind) -> None:
    from stddial_book.train import TrainConfig

    config = TrainConfig("grpo")
    object.__setattr__(config, "lr", value)  # a config that skipped its own checks: the mapping passed it on
    refused(lambda: trl_bridge.trl_settings_for(config), r"learning_rate.*learning_rate=1e-5", kind)
    # an override goes the same way (TRL would store the string "1e-5" and fail deep in the optimizer)
    refused(lambda: trl_bridge.grpo_config(TrainConfig("grpo"), "out", learning_rate=value), r"learning_rate", kind)


@pytest.mark.parametrize("field, value", [("max_grad_norm", math.nan), ("max_grad_norm", -1.0), ("seed", -1),
                                          ("seed", 1.5), ("max_steps", 0), ("temperature", "1"), ("beta", -0.1),
                                          ("epsilon", 1.5), ("top_p", 0.0), ("num_generations", 1),
                                          ("per_device_train_batch_size", 0), ("bf16", "no")])
def test_trl_config_mapping_checks_every_numeric_setting(field, value) -> None:
    from stddial_book.train import TrainConfig

    refused(lambda: trl_bridge.grpo_config(TrainConfig("grpo"), "out", **{field: value}), field, (TypeError, ValueError))
    if field in ("max_grad_norm", "seed", "temperature"):  # fields of a TrainConfig that skipped its checks
        config = TrainConfig("grpo")
        object.__setattr__(config, field, value)
        refused(lambda: trl_bridge.trl_settings_for(config), field, (TypeError, ValueError))


def test_trl_config_mapping_keeps_valid_settings() -> None:
    from stddial_book.train import TrainConfig

    settings = trl_bridge.trl_settings_for(TrainConfig("dapo"))
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
    refused(lambda: costs.estimate_seconds(work, 5, {"generate_s": -1.0, "train_s": 1.0}, 1e9), r"overheads\['generate_s'\]")
    refused(lambda: costs.estimate_seconds(work, 5, {"train_s": 1.0}, 1e9), r"overheads lacks 'generate_s'")
    refused(lambda: costs.estimate_seconds(work, 5, [0.5, 7.0], 1e9), r"overheads must be", TypeError)
    refused(lambda: costs.estimate_seconds(work, 5, {"generate_s": math.nan, "train_s": 1.0}, 1e9), r"generate_s")
    refused(lambda: costs.RunWork(-1, 0, 0, 0), r"RunWork.generate_passes must be at least 0")
    refused(lambda: costs.RunWork(1.5, 0, 0, 0), r"RunWork.generate_passes must be a whole number")
    refused(lambda: work.flops(-3), r"num_params")
    refused(lambda: costs.run_work("quick", "grpo"), r"profile must be a stddial_book.profiles.Profile", TypeError)
    refused(lambda: costs.run_work(quick, "ppo"), r"recipe")
    refused(lambda: costs.run_work(dataclasses.replace(quick, train=dict(quick.train, group_size=1)), "grpo"),
            r"group_size")
    refused(lambda: costs.run_work(dataclasses.replace(quick, train=dict(quick.train, sample_budget=-8)), "grpo"),
            r"sample_budget")
    refused(lambda: costs.run_work(dataclasses.replace(quick, train={"group_size": 8}), "grpo"), r"profile.train.*lacks")
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
