"""`semsearch bench pairs` end to end on the tiny models and a small file, and its errors."""

from __future__ import annotations

import json

import pytest
from cli.support import error_line, runner
from tiny_cross import make_tiny_cross_encoder

from semsearch.cli.app import app

QUICK = ["--min-pairs", "20", "--min-seconds", "0", "--batch-size", "8", "--device", "cpu"]


@pytest.fixture()
def sentences_file(tmp_path, sentences):
    path = tmp_path / "sentences.txt"
    path.write_text("\n".join(sentences) + "\n")
    return path


@pytest.fixture()
def models(tiny_model_dir, tmp_path):
    cross = make_tiny_cross_encoder(tiny_model_dir, tmp_path / "cross")
    return ["--model", str(tiny_model_dir), "--cross-encoder", str(cross)]


def test_bench_pairs_prints_the_table_and_writes_json_and_markdown(
    sentences_file, models, tmp_path
) -> None:
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "bench",
            "pairs",
            "--n",
            "12",
            "--file",
            str(sentences_file),
            "--also",
            "5",
            *models,
            *QUICK,
            "--out-dir",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    printed = " ".join(result.stdout.split())  # the terminal wraps long lines
    assert "Quoted, not measured here" in printed and "found by the bi-encoder" in printed
    figures = json.loads((out / "bench_pairs.json").read_text())
    assert [size["n"] for size in figures["sizes"]] == [12, 5]
    assert [size["all_pairs"] for size in figures["sizes"]] == [66, 10]
    size = figures["sizes"][0]
    rate = size["cross_encoder"]["pairs_scored"] / size["cross_encoder"]["seconds"]
    assert size["cross_encoder"]["all_pairs_seconds"] == pytest.approx(66 / rate)
    assert size["speedup"] == pytest.approx(66 / rate / size["bi_encoder"]["seconds"])
    assert figures["quoted_sbert_paper"]["n"] == 10_000
    assert "| 5 |" in (out / "bench_pairs.md").read_text()


def test_without_out_dir_it_writes_no_file_and_prints_whole_rows(
    sentences_file, models, tmp_path, monkeypatch
) -> None:
    """It wrote bench_pairs.json and .md into the current folder unasked, and its table,
    folded at 80 columns into a pipe, broke words such as 'extrapolated' across lines."""
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.iterdir())
    result = runner.invoke(
        app, ["bench", "pairs", "--n", "6", "--file", str(sentences_file), *models, *QUICK]
    )
    assert result.exit_code == 0, result.output
    assert sorted(tmp_path.iterdir()) == before and "wrote" not in result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 2
    assert "cross-encoder" in rows[0] and "(extrapolated)" in rows[0] and "(measured)" in rows[1]


def test_json_output_for_scripts(sentences_file, models, tmp_path) -> None:
    result = runner.invoke(
        app,
        [
            "bench",
            "pairs",
            "--n",
            "6",
            "--file",
            str(sentences_file),
            *models,
            *QUICK,
            "--out-dir",
            str(tmp_path),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    [record] = [json.loads(line) for line in result.stdout.splitlines()]
    assert [size["n"] for size in record["sizes"]] == [6]  # a file has no default extra sizes


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--n", "1"], "--n must be at least 2"),
        (["--n", "13"], "more than the 12 distinct lines"),
        (["--n", "6", "--also", "5,100"], "more than the 12 distinct lines"),
        (["--n", "6", "--also", "many"], "--also expects sizes"),
        (["--n", "6", "--min-pairs", "0"], "--min-pairs must be at least 1"),
    ],
)
def test_bad_input_is_one_line(sentences_file, tmp_path, arguments, message) -> None:
    result = runner.invoke(
        app,
        ["bench", "pairs", "--file", str(sentences_file), *arguments, "--out-dir", str(tmp_path)],
    )
    assert message in error_line(result)


def test_a_bi_encoder_given_as_the_cross_encoder_says_so(
    sentences_file, tiny_model_dir, tmp_path
) -> None:
    result = runner.invoke(
        app,
        [
            "bench",
            "pairs",
            "--n",
            "6",
            "--file",
            str(sentences_file),
            "--cross-encoder",
            str(tiny_model_dir),
            "--out-dir",
            str(tmp_path),
        ],
    )
    assert "is a bi-encoder" in error_line(result)


def test_missing_shared_data_names_the_option(tmp_path) -> None:
    result = runner.invoke(app, ["bench", "pairs", "--n", "10", "--data-dir", str(tmp_path)])
    assert "--data-dir" in error_line(result)


@pytest.fixture()
def shared_data(tmp_path):
    """The shared data's layout, small: STS-B splits and a PyPI table."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from training.tiny_data import write_stsb

    (tmp_path / "data" / "stsb").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        write_stsb(tmp_path / "data" / "stsb" / f"stsb_{split}.tsv.gz")
    (tmp_path / "data" / "pypi").mkdir()
    summaries = [f"A package that does thing number {i}" for i in range(60)]
    pq.write_table(
        pa.table({"summary": summaries}), tmp_path / "data" / "pypi" / "pypi_summaries.parquet"
    )
    return tmp_path / "data"


def test_n_alone_runs_only_that_size_with_progress_bars(shared_data, models, tmp_path) -> None:
    result = runner.invoke(
        app,
        [
            "bench",
            "pairs",
            "--n",
            "8",
            "--data-dir",
            str(shared_data),
            *models,
            *QUICK,
            "--out-dir",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    figures = json.loads((tmp_path / "bench_pairs.json").read_text())
    assert [size["n"] for size in figures["sizes"]] == [8]  # not 8, then 1,000 and 100,000
    assert "sizes to measure: 8" in result.output
    assert "cross-encoder sample" in result.output and "encoding" in result.output


@pytest.mark.parametrize(
    ("n", "also", "file", "sizes"),
    [
        (None, None, None, [10_000, 1_000, 100_000]),
        (500, None, None, [500]),
        (500, "20,30", None, [500, 20, 30]),
        (None, "", None, [10_000]),
        (None, None, "f.txt", [10_000]),
    ],
)
def test_the_sizes_run_are_the_sizes_asked_for(n, also, file, sizes) -> None:
    from pathlib import Path

    from semsearch.cli.bench_command import _sizes

    assert _sizes(n, also, Path(file) if file else None) == sizes
