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
        assert (benchmark.smoke_options is None) == bool(benchmark.no_smoke), name
        assert benchmark.smoke is None or isinstance(benchmark.smoke, str), name  # one command line
        assert not (benchmark.measure and benchmark.smoke), name  # a descriptor's are params


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


def test_every_descriptor_names_a_measure_and_its_smoke_changes_only_its_parameters() -> None:
    import runner

    descriptors = [benchmark for benchmark in suite.BENCHMARKS if benchmark.measure]
    assert {d.name for d in descriptors} >= {"encode_throughput", "build_pypi", "index_tradeoff"}
    for descriptor in descriptors:
        assert callable(runner.function(descriptor.measure)), descriptor.name
        smoke = suite.parse_settings(descriptor.smoke_params.split())
        assert set(smoke) <= set(descriptor.defaults), descriptor.name
        assert "threads" in descriptor.defaults, descriptor.name  # the runner sets them


def test_settings_read_as_literals_else_as_text() -> None:
    settings = suite.parse_settings(["rows=3", "types=flat,hnsw16", 'variant=["b=32"]', "x=None"])
    assert settings == {"rows": 3, "types": "flat,hnsw16", "variant": ["b=32"], "x": None}


def test_the_cache_makes_vectors_once(tmp_path: Path) -> None:
    import numpy as np
    import runner

    cache, calls = runner.Cache(tmp_path, tmp_path), []

    def make() -> np.ndarray:
        calls.append(1)
        return np.ones((3, 2), dtype=np.float64)

    first, second = cache.vectors("key", make), cache.vectors("key", make)
    assert len(calls) == 1 and first.dtype == np.float32
    assert np.array_equal(first, second)
