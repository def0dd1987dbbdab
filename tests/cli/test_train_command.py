"""`semsearch train` and `semsearch train-adapter` from the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli.support import error_line, runner
from training.tiny_data import write_pairs_parquet, write_stsb

from semsearch.cli.app import app


@pytest.fixture()
def stsb(tmp_path):
    return write_stsb(tmp_path / "sts.tsv.gz")


def test_train_writes_a_model_folder_and_reports_json(tmp_path, tiny_model_dir, stsb) -> None:
    output = tmp_path / "model"
    result = runner.invoke(
        app,
        [
            "train",
            f"stsb:{stsb}",
            "--objective",
            "cosent",
            "-o",
            str(output),
            "--model",
            str(tiny_model_dir),
            "--dev",
            f"stsb:{stsb}",
            "--test",
            f"stsb:{stsb}",
            "--max-steps",
            "3",
            "--batch-size",
            "4",
            "--device",
            "cpu",
            "--option",
            "scale=10",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["steps"] == 3 and report["dev_primary"] == "spearman_cosine"
    assert "spearman_cosine" in report["test_metrics"]
    saved = json.loads((output / "training.json").read_text())
    assert saved["objective_options"] == {"scale": 10}
    assert (output / "modules.json").is_file() and (output / "training.png").is_file()


def test_train_prints_a_summary_table(tmp_path, tiny_model_dir, stsb) -> None:
    result = runner.invoke(
        app,
        [
            "train",
            f"stsb:{stsb}",
            "--objective",
            "triplet",
            "--form",
            "triplets",
            "-o",
            str(tmp_path / "m"),
            "--model",
            str(tiny_model_dir),
            "--max-steps",
            "1",
            "--device",
            "cpu",
            "--no-normalize",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "training finished" in result.stdout and "steps" in result.stdout
    assert not (tmp_path / "m" / "2_Normalize").exists()  # the saved model keeps the choice


def test_missing_column_is_one_line_naming_it_and_the_columns_present(
    tmp_path, tiny_model_dir
) -> None:
    pairs = write_pairs_parquet(tmp_path / "pairs.parquet")
    result = runner.invoke(
        app,
        [
            "train",
            str(pairs),
            "--objective",
            "cosine",
            "-o",
            str(tmp_path / "m"),
            "--model",
            str(tiny_model_dir),
            "--column",
            "sentence1=question",
        ],
    )
    line = error_line(result)
    assert (
        "needs the column(s) sentence2, score" in line
        and "question, answer, similarity, is_dup" in line
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--objective", "cosin"], "unknown objective 'cosin'"),
        (["--objective", "cosine", "--column", "sentence1"], "--column expects NAME=VALUE"),
        (["--objective", "cosine", "--precision", "fp8"], "unknown precision 'fp8'"),
        (
            ["--objective", "cosine", "--dev", "stsb:/no/such/dev.tsv.gz"],
            "no such file: /no/such/dev.tsv.gz",
        ),
    ],
)
def test_bad_options_are_one_line(tmp_path, stsb, arguments, message) -> None:
    result = runner.invoke(app, ["train", f"stsb:{stsb}", "-o", str(tmp_path / "m"), *arguments])
    assert message in error_line(result)


def test_a_missing_data_file_is_one_line(tmp_path) -> None:
    result = runner.invoke(
        app, ["train", str(tmp_path / "none.csv"), "--objective", "mnr", "-o", str(tmp_path / "m")]
    )
    assert "does not exist" in error_line(result)


def test_train_adapter_on_a_npy_file(tmp_path) -> None:
    rng = np.random.default_rng(0)
    np.save(tmp_path / "v.npy", rng.normal(size=(20, 8)).astype(np.float32))
    rows = rng.integers(0, 20, size=(60, 2))
    lines = "".join(f"{a},{b},{int(a % 2 == b % 2)}\n" for a, b in rows)
    (tmp_path / "pairs.csv").write_text("row1,row2,label\n" + lines)
    result = runner.invoke(
        app,
        [
            "train-adapter",
            str(tmp_path / "pairs.csv"),
            "--vectors",
            str(tmp_path / "v.npy"),
            "-o",
            str(tmp_path / "adapter"),
            "--epochs",
            "5",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["pairs"] == 60 and report["loss_after"] < report["loss_before"]
    again = runner.invoke(
        app,
        [
            "train-adapter",
            str(tmp_path / "pairs.csv"),
            "--vectors",
            str(tmp_path / "v.npy"),
            "-o",
            str(tmp_path / "adapter"),
        ],
    )
    assert "pass --overwrite" in error_line(again)


def test_interpolate_writes_a_model_and_refuses_a_bad_weight(tmp_path, cli, tiny_model_dir) -> None:
    output = tmp_path / "mixed"
    result = cli(
        "interpolate",
        str(tiny_model_dir),
        str(tiny_model_dir),
        "-o",
        str(output),
        "--weight",
        "0.5",
    )
    assert result.exit_code == 0, result.output
    assert (output / "modules.json").exists()
    refused = cli(
        "interpolate",
        str(tiny_model_dir),
        str(tiny_model_dir),
        "-o",
        str(tmp_path / "x"),
        "--weight",
        "-1",
    )
    assert "between 0" in error_line(refused) and not (tmp_path / "x").exists()
