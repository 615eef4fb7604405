"""The "This edition" page's description of the recorded runs (stddial_book.experiments.edition)."""

from __future__ import annotations

import json

from stddial_book.experiments.edition import recorded_rows

PLATFORM = "Linux-6.1-x86_64-with-glibc2.36"


def _run(base, name: str, device: str, wall: float, **extra) -> None:
    directory = base / "reference" / name
    directory.mkdir(parents=True)
    (directory / "metrics.jsonl").write_text(json.dumps({"step": 0}) + "\n")
    provenance = {
        "git_commit": "abcdef0123",
        "started_at": "2026-11-22T02:00:00+00:00",
        "device": device,
        "platform": PLATFORM,
        "wall_time_s": wall,
        "config": {"train": {"recipe": {"name": name.split("-seed")[0].upper()}}},
        **extra,
    }
    (directory / "provenance.json").write_text(json.dumps(provenance))


def test_device_and_time_per_recipe(tmp_path) -> None:
    # dapo: one run resumed after an interruption logged only its last part; the median passes it over
    for seed, wall in enumerate([6.0, 84.0, 90.0]):
        _run(
            tmp_path,
            f"dapo-seed{seed}",
            "cpu (x86_64, 2 cores)",
            wall,
            **({"resumed_at": ["2026-11-22T03:00:00+00:00"]} if seed == 0 else {}),
        )
    # grpo: two runs from before the provenance named the core count (bare processor), one after
    _run(tmp_path, "grpo-seed0", "x86_64", 120.0)
    _run(tmp_path, "grpo-seed1", "x86_64", 180.0)
    _run(tmp_path, "grpo-seed2", "cpu (x86_64, 2 cores)", 600.0)
    # gpu: a GPU's name is kept as it is
    _run(tmp_path, "gpu-seed0", "NVIDIA H100 80GB HBM3", 60.0)
    rows = {row[0]: row for row in recorded_rows("reference", root=tmp_path)}
    assert rows["DAPO"][1:3] == ["3", "cpu (x86_64, 2 cores)"] and rows["DAPO"][5] == "1.4"
    assert rows["GRPO"][2] == "cpu (x86_64, 2 cores; not recorded for 2 of 3 runs)" and rows["GRPO"][5] == "3.0"
    assert rows["GPU"][2] == "NVIDIA H100 80GB HBM3" and rows["GPU"][5] == "1.0"


def test_bare_processor_only_is_cores_not_recorded(tmp_path) -> None:
    _run(tmp_path, "grpo-seed0", "x86_64", 60.0)
    _run(tmp_path, "grpo-seed1", "x86_64", 60.0)
    [row] = recorded_rows("reference", root=tmp_path)
    assert row[2] == "cpu (x86_64, cores not recorded)"
