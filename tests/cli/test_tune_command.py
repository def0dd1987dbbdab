"""`semsearch tune` from the command line."""

from __future__ import annotations

import json

from cli.support import runner

from semsearch.cli.app import app


def test_tune_reports_and_stores_the_chosen_value(tmp_path, tiny_model_dir) -> None:
    corpus = tmp_path / "c.csv"
    corpus.write_text("text\n" + "".join(f"line {i} on theme {i % 19}\n" for i in range(1200)))
    index_dir = str(tmp_path / "idx")
    built = runner.invoke(
        app,
        [
            "build",
            str(corpus),
            "--index-type",
            "ivf",
            "--model",
            str(tiny_model_dir),
            "--out-dir",
            index_dir,
        ],
    )
    assert built.exit_code == 0, built.output
    result = runner.invoke(
        app,
        [
            "tune",
            "c",
            "--target-recall",
            "0.9",
            "--sample",
            "200",
            "--index-dir",
            index_dir,
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    info = json.loads(runner.invoke(app, ["info", "c", "--index-dir", index_dir, "--json"]).stdout)
    assert info["index"]["search_params"]["nprobe"] == report["value"]
    assert report["recall"] >= 0.9 or not report["met"]


def test_tuning_a_flat_index_says_there_is_nothing_to_tune(tmp_path, tiny_model_dir) -> None:
    corpus = tmp_path / "c.csv"
    corpus.write_text("text\nalpha\nbeta\ngamma\n")
    index_dir = str(tmp_path / "idx")
    runner.invoke(
        app, ["build", str(corpus), "--model", str(tiny_model_dir), "--out-dir", index_dir]
    )
    result = runner.invoke(app, ["tune", "c", "--index-dir", index_dir])
    assert result.exit_code == 0 and "nothing to tune" in result.stdout, result.output
    generations = json.loads(
        runner.invoke(app, ["info", "c", "--index-dir", index_dir, "--json"]).stdout
    )
    assert len(generations["generations"]) == 1  # nothing was written


def test_tuning_a_tiny_ivf_index_measures_recall_over_the_rows_there_are(
    tmp_path, tiny_model_dir
) -> None:
    corpus = tmp_path / "c.csv"
    corpus.write_text("text\nalpha\nbeta\ngamma\ndelta\n")
    index_dir = str(tmp_path / "idx")
    built = runner.invoke(
        app,
        [
            "build",
            str(corpus),
            "--index-type",
            "ivf",
            "--model",
            str(tiny_model_dir),
            "--out-dir",
            index_dir,
        ],
    )
    assert built.exit_code == 0, built.output
    result = runner.invoke(app, ["tune", "c", "--index-dir", index_dir, "--json"])
    report = json.loads(result.stdout)
    # 4 rows: 3 neighbours besides each sampled row, all found with the one list.
    assert report["met"] and report["k"] == 3 and report["recall"] == 1.0


def test_k_and_sample_below_one_are_refused(tmp_path) -> None:
    for option in ("-k", "--sample"):
        result = runner.invoke(app, ["tune", "--index-dir", str(tmp_path), option, "0"])
        assert result.exit_code == 2 and "must be at least 1" in result.stderr


def test_a_missed_target_warns_and_strict_makes_it_an_error(cli, tmp_path) -> None:
    corpus = tmp_path / "c.csv"
    corpus.write_text("text\n" + "".join(f"record {i} in family {i % 31}\n" for i in range(300)))
    built = cli(
        "build",
        str(corpus),
        "--index-type",
        "IVF4,PQ2x4",
        "--target-recall",
        "0",
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
    )
    assert built.exit_code == 0, built.output
    strict = cli(
        "reindex",
        "c",
        "--index-type",
        "IVF2,PQ2x4",
        "--target-recall",
        "1",
        "--strict",
        "--index-dir",
        cli.index_dir,
    )
    assert strict.exit_code != 0 and "recall target missed" in strict.output, strict.output
    assert "Traceback" not in strict.output
    info = json.loads(cli("info", "c", "--index-dir", cli.index_dir, "--json").stdout)
    assert len(info["generations"]) == 1  # nothing written
    warned = cli(
        "reindex",
        "c",
        "--index-type",
        "IVF2,PQ2x4",
        "--target-recall",
        "1",
        "--index-dir",
        cli.index_dir,
    )
    assert warned.exit_code == 0, warned.output
    warning = next(line for line in warned.output.splitlines() if "recall target missed" in line)
    assert "recall@" in warning and "--index-type" in warning
    tuned = cli("tune", "c", "--target-recall", "1", "--strict", "--index-dir", cli.index_dir)
    assert tuned.exit_code != 0 and "recall target missed" in tuned.output
