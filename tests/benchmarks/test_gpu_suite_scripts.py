"""The GPU suite's scripts on paths the CPU smoke does not take (found on a lent H200)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # the scripts import each other by bare name

import mine_pypi  # noqa: E402


def test_mining_a_whole_file_writes_its_pairs_into_an_out_dir_that_did_not_exist(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--limit 0` reads the file itself, so nothing had made the out-dir before the pairs
    were written into it: the GPU run crashed after mining all 841,708 summaries. The script
    runs in this process, on torch as the library's tests do (a fresh interpreter spent 5-8 s
    importing what this one has and exporting the model to OpenVINO)."""
    data = tmp_path / "data" / "pypi"
    data.mkdir(parents=True)
    summaries = [
        f"a library for {topic} number {n % 7}"
        for n, topic in enumerate(["json", "images", "http", "dates", "archives"] * 8)
    ]
    pq.write_table(pa.table({"summary": summaries}), data / "pypi_summaries.parquet")
    out = tmp_path / "fresh" / "out"
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "mine_pypi.py",
            "--device",
            "cpu",
            "--limit",
            "0",
            "--model",
            str(tiny_model_dir),
            "--data-dir",
            str(tmp_path / "data"),
            "--out-dir",
            str(out),
            "--recall-sample",
            "10",
            "--show",
            "3",
        ],
    )
    mine_pypi.main()
    assert pq.read_table(out / "mine_pypi_pairs_all.parquet").num_rows > 0
    (line,) = (out / "results" / "mine_pypi.jsonl").read_text().splitlines()
    assert json.loads(line)["rows"] == len(summaries)
