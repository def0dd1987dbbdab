"""The generated goals table of RESULTS.md against a fixture of JSON lines."""

from __future__ import annotations

import argparse
import json
import sys
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # the scripts import each other by bare name

import results_table  # noqa: E402
import suite  # noqa: E402
from results_table import BEGIN, END, Figure, Goal, answers, markdown, rewrite_region  # noqa: E402

SPEED = Goal("texts/s", ("texts_per_s",), ">=", 100.0, {("device",): "NVIDIA H*"})
LATENCY = Goal("p99 ms", ("levels", "32", "p99_ms"), "<=", 150.0)
SECOND = Goal("second filter recall", ("filters", "1", "recall"), ">=", 0.95)


def _write(folder: Path, name: str, lines: list[dict]) -> None:
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (folder / f"{name}.jsonl").write_text(text + "not json\n", encoding="utf-8")


@pytest.fixture
def results(tmp_path: Path) -> Path:
    machine = {"cpu": "AMD EPYC", "cores": 2, "ram_gib": 23.5, "gpu": "NVIDIA H100"}
    _write(
        tmp_path,
        "encode",
        [
            {
                "date": "2026-11-20T10:00:00+00:00",
                "device": "NVIDIA H100 80GB",
                "texts_per_s": 90,
                "machine": machine,
                "command": "python benchmarks/encode.py --a",
            },
            {
                "date": "2026-11-21T10:00:00+00:00",
                "device": "NVIDIA H100 80GB",
                "texts_per_s": 120,
                "machine": machine,
                "command": "python benchmarks/encode.py --b | x",
            },
            {
                "date": "2026-11-22T10:00:00+00:00",
                "device": "cpu: AMD EPYC (2 cores)",
                "texts_per_s": 5,
                "command": "python benchmarks/encode.py --smoke",
            },
        ],
    )
    _write(
        tmp_path,
        "serve",
        [
            {"date_utc": "2026-11-19T09:00:00", "levels": {"32": {"p99_ms": 120}}},
            {
                "environment": {
                    "date_utc": "2026-11-23T09:00:00",
                    "cpu": "EPYC",
                    "cpu_count": 2,
                    "ram_gib": 23.5,
                    "gpu": None,
                },
                "levels": {"32": {"p99_ms": 180}},
            },
            {"date": "2026-11-24T09:00:00", "levels": {"8": {"p99_ms": 40}}},
        ],
    )
    return tmp_path


def test_the_latest_matching_line_answers_each_goal(results: Path) -> None:
    speed, latency, missing = answers(
        [("encode", SPEED), ("serve", LATENCY), ("serve", SECOND)], results
    )
    # the CPU smoke line is later but is not an H100 line; the second H100 line wins
    assert (speed.value, speed.verdict) == (120.0, "met")
    assert speed.line["command"] == "python benchmarks/encode.py --b | x"
    # a later line without the figure does not hide the latest one that has it
    assert (latency.value, latency.verdict) == (180.0, "not met")
    assert (missing.value, missing.verdict) == (None, "not measured")


def test_the_table_shows_figure_status_date_machine_and_command(results: Path) -> None:
    rows = answers([("encode", SPEED), ("serve", LATENCY), ("absent", SPEED)], results)
    lines = markdown(rows).splitlines()
    assert lines[0] == "| benchmark | goal | latest | status | date | machine | command |"
    assert lines[2] == (
        "| `encode` | texts/s >= 100 | 120 | met | 2026-11-21 10:00 | AMD EPYC, "
        "2 cores, 23.5 GiB, NVIDIA H100 | `python benchmarks/encode.py --b \\| x` |"
    )
    assert lines[3] == (
        "| `serve` | p99 ms <= 150 | 180 | not met | 2026-11-23 09:00 | EPYC, "
        "2 cores, 23.5 GiB |  |"
    )
    assert lines[4] == "| `absent` | texts/s >= 100 | - | not measured |  |  |  |"


def test_the_region_is_inserted_then_replaced_and_the_rest_kept(tmp_path: Path) -> None:
    page = tmp_path / "RESULTS.md"
    page.write_text("# Benchmark results\n\nProse stays.\n", encoding="utf-8")
    assert rewrite_region(page, "| first |")
    assert page.read_text() == f"# Benchmark results\n\n{BEGIN}\n| first |\n{END}\n\nProse stays.\n"
    assert rewrite_region(page, "| second |\n| row |")
    assert page.read_text() == (
        f"# Benchmark results\n\n{BEGIN}\n| second |\n| row |\n{END}\n\nProse stays.\n"
    )
    assert not rewrite_region(page, "| second |\n| row |")
    assert [p.name for p in tmp_path.iterdir()] == ["RESULTS.md"]  # no temporary left


def test_a_figure_is_the_latest_value_even_a_yes_or_no_from_its_own_file(results: Path) -> None:
    _write(results, "crash", [{"all_opened": False, "kills": 3}, {"all_opened": True}])
    _write(results, "crash_memory", [{"peak_mib": 12.5, "rows": 2}])
    wanted = [
        Figure("opened", ("all_opened",)),
        Figure("kills", ("kills",)),
        Figure("peak", ("peak_mib",), {("rows",): 2}, "crash_memory"),
        Figure("absent", ("nothing",)),
    ]
    opened, kills, peak, absent = answers([("crash", figure) for figure in wanted], results)
    assert (opened.shown, kills.shown, peak.shown, absent.shown) == ("yes", "3", "12.5", "-")
    assert opened.verdict == "" and absent.verdict == "not measured"
    # a goal is never met by a yes or no
    goal = Goal("opened", ("all_opened",), "==", 1)
    assert answers([("crash", goal)], results)[0].value is None


def test_a_figures_section_numbers_the_lines_its_figures_come_from(results: Path) -> None:
    rows = answers(
        [
            ("encode", Figure("texts/s", ("texts_per_s",), {("device",): "NVIDIA*"})),
            ("encode", Figure("any texts/s", ("texts_per_s",))),
            ("encode", Figure("never", ("nothing",))),
        ],
        results,
    )
    section = results_table.figures_section("encode", "Measures speed.", rows, "none")
    assert section.splitlines() == [
        "### `encode`",
        "",
        "Measures speed.",
        "",
        "| figure | latest | line |",
        "|---|---|---|",
        "| texts/s | 120 | 1 |",
        "| any texts/s | 5 | 2 |",
        "| never | - | - |",
        "",
        "1. 2026-11-21 10:00, AMD EPYC, 2 cores, 23.5 GiB, NVIDIA H100: "
        "`python benchmarks/encode.py --b | x`",
        "2. 2026-11-22 10:00, cpu: AMD EPYC (2 cores): `python benchmarks/encode.py --smoke`",
    ]
    empty = results_table.figures_section("absent", "Measures.", rows[2:], "No line yet.")
    assert empty.splitlines()[-1] == "No line yet."


def test_both_regions_are_written_and_the_prose_between_kept(tmp_path: Path) -> None:
    page = tmp_path / "RESULTS.md"
    figures = (results_table.FIGURES_BEGIN, results_table.FIGURES_END)
    page.write_text(f"# R\n\n{BEGIN}\nold\n{END}\n\nProse.\n\n{figures[0]}\nold\n{figures[1]}\n")
    assert rewrite_region(page, "goals") and rewrite_region(page, "latest", figures)
    assert page.read_text() == (
        f"# R\n\n{BEGIN}\ngoals\n{END}\n\nProse.\n\n{figures[0]}\nlatest\n{figures[1]}\n"
    )


def test_the_registry_names_real_scripts_and_valid_goals() -> None:
    names = [benchmark.name for benchmark in suite.BENCHMARKS]
    assert len(names) == len(set(names))
    for benchmark in suite.BENCHMARKS:
        assert benchmark.smoke_options is not None or benchmark.no_smoke, benchmark.name
        if benchmark.smoke_options is not None:
            assert (BENCHMARKS.parent / benchmark.path).is_file(), benchmark.name
        for goal in benchmark.goals:
            assert goal.comparison in results_table.COMPARISONS
    assert "startup" in suite.list_benchmarks()


def test_a_smoke_command_runs_the_script_into_the_scratch_folder(tmp_path: Path) -> None:
    command = suite.smoke_command(suite.find("serve_load"), tmp_path)
    assert command[1] == "benchmarks/serve_load.py"
    assert f"{tmp_path}/indexes" in command
    assert command[-2:] == ["--out-dir", str(tmp_path / "serve_load")]
    assert not any("{scratch}" in part for part in command)
    command = suite.smoke_command(suite.find("index_tradeoff"), tmp_path)
    assert command[1:5] == ["benchmarks/runner.py", "run", "index_tradeoff", "--smoke"]
    assert command[-4:] == [
        "--cache-dir",
        str(tmp_path),
        "--out-dir",
        str(tmp_path / "index_tradeoff"),
    ]


def _expected(line_files: Path, benchmark: str, goal: Goal) -> float | None:
    """The goal's figure by brute force: the last line of the file whose filters hold and
    whose key path leads to a number (an oracle written apart from `results_table`)."""
    path, found = line_files / f"{benchmark}.jsonl", None
    for text in path.read_text().splitlines() if path.exists() else []:
        line = json.loads(text)
        if all(_same(_walk(line, key), want) for key, want in goal.where.items()):
            value = _walk(line, goal.key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                found = float(value)
    return found


def _same(value: object, want: object) -> bool:
    if isinstance(want, str) and isinstance(value, str):
        return fnmatchcase(value, want)
    return value == want


def _walk(line: object, key: tuple[str, ...]) -> object:
    for step in key:
        line = line.get(step) if isinstance(line, dict) else None
    return line


def test_the_suite_table_agrees_with_the_lines_common_record_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import common

    labels = {"cuda": "NVIDIA H100 80GB HBM3", "cpu": "cpu: EPYC (2 cores)"}
    monkeypatch.setattr(common, "device_label", lambda device="cpu": labels[device])
    monkeypatch.setattr(common, "git_commit", lambda: "abc123")
    args = argparse.Namespace(results_dir=tmp_path, out_dir=tmp_path)
    help_s, list_s = "semsearch --help", "semsearch list"
    common.record(args, "startup", {"commands": {help_s: {"wall_s": 0.7}, list_s: {"wall_s": 0.3}}})
    common.record(args, "startup", {"commands": {help_s: {"wall_s": 0.4}}})  # later, --help only
    pypi = {"corpus": "pypi_summaries", "mean_cos": 0.9995, "min_cos": 0.99}
    common.record(args, "encode_throughput", {**pypi, "texts_per_s": 120_000}, device="cuda")
    common.record(args, "encode_throughput", {**pypi, "texts_per_s": 900})  # a CPU smoke line
    debian = {"corpus": "debian_long", "texts_per_s": 30_000}
    common.record(args, "encode_throughput", debian, device="cuda")

    table = suite.goals_table(tmp_path).splitlines()[2:]
    goals = [(benchmark.name, goal) for benchmark in suite.BENCHMARKS for goal in benchmark.goals]
    assert len(table) == len(goals)  # one row per goal of the registry, in its order
    for row, (benchmark, goal) in zip(table, goals):
        cells = [cell.strip() for cell in row.strip("|").split(" | ")]
        assert cells[:2] == [f"`{benchmark}`", f"{goal.what} {goal.text}"]
        expected = _expected(tmp_path, benchmark, goal)
        if expected is None:
            assert cells[2:4] == ["-", "not measured"], row
        else:
            assert cells[2] == f"{expected:g}", row
            assert cells[3] == ("met" if goal.met(expected) else "not met"), row
            assert cells[5].startswith(common.machine()["cpu"]), row
            assert cells[6] == f"`{common.command_line()}`", row
    by_goal = {cells[1]: cells for cells in (r.strip("|").split(" | ") for r in table)}
    assert by_goal["`semsearch --help` s <= 0.5"][2:4] == ["0.4", "met"]
    assert by_goal["`semsearch list` s <= 0.5"][2:4] == ["0.3", "met"]  # from the earlier line
    assert by_goal["PyPI texts/s (one H100) >= 100000"][2:4] == ["120000", "met"]  # not the CPU's
    assert by_goal["Debian texts/s (one H100) >= 40000"][2:4] == ["30000", "not met"]
    assert by_goal["PyPI min cosine to st fp32 >= 0.995"][2:4] == ["0.99", "not met"]
