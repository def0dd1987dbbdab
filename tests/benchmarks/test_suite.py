"""The benchmark registry (benchmarks/suite.py) against the scripts in benchmarks/."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # the scripts import each other by bare name

import suite  # noqa: E402


def test_every_script_is_registered_and_every_cpu_script_has_a_smoke_run() -> None:
    scripts = {
        path.stem
        for path in BENCHMARKS.glob("*.py")
        if '__name__ == "__main__"' in path.read_text(encoding="utf-8")
    }
    registered = {Path(benchmark.path).stem for benchmark in suite.BENCHMARKS}
    assert scripts - set(suite.TOOLS) == registered
    for benchmark in suite.BENCHMARKS:
        name = benchmark.name
        assert (BENCHMARKS.parent / benchmark.path).is_file(), name
        assert (benchmark.smoke is None) == bool(benchmark.no_smoke), name
        assert benchmark.smoke is None or isinstance(benchmark.smoke, str), name  # one command line


def test_no_script_writes_figures_outside_the_results_lines() -> None:
    for path in BENCHMARKS.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "write_json" not in text, path.name
        assert "argsort(-" not in text, path.name  # exact search is the library's


def test_every_benchmark_has_lines_or_needs_a_gpu() -> None:
    results = BENCHMARKS / "results"
    missing = [
        benchmark.name
        for benchmark in suite.BENCHMARKS
        if not benchmark.gpu_only and not (results / f"{benchmark.name}.jsonl").is_file()
    ]
    assert missing == []


def test_every_benchmark_with_lines_shows_a_figure_from_them() -> None:
    """A figure's key that the lines no longer hold shows here, not as a silent '-'."""
    results = BENCHMARKS / "results"
    sections = suite.latest_figures(results).split("\n\n### ")
    assert len(sections) == len(suite.BENCHMARKS)
    for benchmark, section in zip(suite.BENCHMARKS, sections):
        assert section.lstrip("# ").startswith(f"`{benchmark.name}`")
        has_lines = (results / f"{benchmark.name}.jsonl").is_file()
        assert ("No JSON line yet" not in section) == has_lines, benchmark.name
        if has_lines:
            assert "\n1. " in section, benchmark.name
