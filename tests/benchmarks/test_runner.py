"""The benchmark runner (benchmarks/runner.py): descriptors run, inputs cached, one line each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]


def _runner(*arguments: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "benchmarks/runner.py", *arguments]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True)


def test_an_unknown_parameter_or_a_script_is_refused_in_one_line(tmp_path: Path) -> None:
    done = _runner("run", "index_tradeoff", "--set", "typo=1", "--out-dir", str(tmp_path))
    assert done.returncode != 0 and "has no parameter 'typo'" in done.stderr
    done = _runner("run", "startup", "--out-dir", str(tmp_path))
    assert done.returncode != 0 and "python benchmarks/startup.py" in done.stderr


@pytest.mark.slow
def test_a_later_descriptor_reads_the_index_an_earlier_one_built(tmp_path: Path) -> None:
    """build_pypi builds `pypi-first300-flat` into the cache; index_tradeoff finds it there
    (no second build) and keeps its vectors as .npy; each appends one line with its command."""
    data = tmp_path / "data" / "pypi"
    data.mkdir(parents=True)
    names = [f"package-{n}" for n in range(300)]
    topics = ["json", "images", "http", "dates", "archives", "numbers"]
    summaries = [f"a library for {topics[n % 6]} and more, number {n}" for n in range(300)]
    table = pa.table({"name": names, "month": ["2026-11"] * 300, "summary": summaries})
    pq.write_table(table, data / "pypi_summaries.parquet")
    common = ["--data-dir", str(tmp_path / "data"), "--cache-dir", str(tmp_path / "cache")]
    common += ["--out-dir", str(tmp_path / "out")]
    settings = ["--set", "limit=300", "index=flat", "query_source=pypi", "queries=5"]
    built = _runner("run", "build_pypi", "--smoke", *common, *settings, "recall_queries=5")
    assert built.returncode == 0, built.stderr[-2000:]
    tradeoff = ["--set", "index=pypi-first300-flat", "types=flat", "queries=20"]
    measured = _runner("run", "index_tradeoff", "--smoke", *common, *tradeoff)
    assert measured.returncode == 0, measured.stderr[-2000:]
    assert "cache: building" not in measured.stdout
    assert list((tmp_path / "cache" / "vectors").glob("pypi-first300-flat-*.npy"))
    results = tmp_path / "out" / "results"
    (build_line,) = (json.loads(t) for t in (results / "build_pypi.jsonl").read_text().splitlines())
    assert build_line["build"]["rows"] == 300 and build_line["args"]["limit"] == 300
    assert build_line["command"].startswith("python benchmarks/runner.py run build_pypi")
    (line,) = (json.loads(t) for t in (results / "index_tradeoff.jsonl").read_text().splitlines())
    assert line["database_rows"] == 280 and line["results"][0]["label"] == "flat"
    assert line["benchmark"] == "index_tradeoff" and "environment" in line
