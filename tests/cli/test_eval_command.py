"""`semsearch eval sts|pairs|ir|heatmap` on a model folder or an index's model."""

from __future__ import annotations

import json

import pytest
from cli.support import error_line, runner
from training.tiny_data import write_pairs_parquet, write_stsb

from semsearch.cli.app import app


def test_sts_prints_a_table_and_writes_json(tmp_path, tiny_model_dir) -> None:
    stsb = write_stsb(tmp_path / "sts.tsv.gz")
    out = tmp_path / "sts.json"
    result = runner.invoke(
        app, ["eval", "sts", f"stsb:{stsb}", "--model", str(tiny_model_dir), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "spearman" in result.stdout and "manhattan" in result.stdout
    figures = json.loads(out.read_text())
    assert figures["task"] == "sts" and figures["rows"] == 16
    assert set(figures["metrics"]) >= {"spearman_cosine", "pearson_dot", "spearman_euclidean"}


def test_sts_says_what_loads_and_shows_the_texts_encoded(tmp_path, tiny_model_dir) -> None:
    """`eval sts` printed nothing for the minutes it loaded a model and encoded."""
    stsb = write_stsb(tmp_path / "sts.tsv.gz")
    result = runner.invoke(
        app, ["eval", "sts", f"stsb:{stsb}", "--model", str(tiny_model_dir), "--device", "cpu"]
    )
    assert result.exit_code == 0, result.output
    lines = result.stderr.replace("\r", "\n").splitlines()
    assert lines[0] == f"loading model {tiny_model_dir} on cpu"
    assert any(line.startswith("encoding: 100%") for line in lines), result.stderr


def test_sts_json_prints_one_parseable_line(tmp_path, tiny_model_dir) -> None:
    stsb = write_stsb(tmp_path / "sts.tsv.gz")
    out = tmp_path / "sts.json"
    result = runner.invoke(
        app,
        [
            "eval",
            "sts",
            f"stsb:{stsb}",
            "--model",
            str(tiny_model_dir),
            "--json",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1  # no table, no "written to" line
    printed = json.loads(lines[0])
    assert printed["metrics"] == json.loads(out.read_text())["metrics"]
    assert -1 <= printed["metrics"]["spearman_cosine"] <= 1


def test_pairs_with_mapped_columns(tmp_path, tiny_model_dir) -> None:
    pairs = write_pairs_parquet(tmp_path / "pairs.parquet")
    mapping = [
        "--column",
        "sentence1=question",
        "--column",
        "sentence2=answer",
        "--column",
        "label=is_dup",
    ]
    out = tmp_path / "pairs.json"
    result = runner.invoke(
        app,
        [
            "eval",
            "pairs",
            str(pairs),
            "--test",
            str(pairs),
            *mapping,
            "--model",
            str(tiny_model_dir),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads(out.read_text())["metrics"]
    assert 0 <= metrics["cosine_accuracy"] <= 1 and "cosine_ap" in metrics
    assert "accuracy" in result.stdout


def test_ir_exact_and_through_the_index_agree_on_a_flat_index(
    tmp_path, tiny_model_dir, beir
) -> None:
    index_dir = str(tmp_path / "idx")
    built = runner.invoke(
        app,
        [
            "build",
            str(beir / "corpus.jsonl"),
            "--name",
            "docs",
            "--id-column",
            "_id",
            "--model",
            str(tiny_model_dir),
            "--out-dir",
            index_dir,
            "--device",
            "cpu",
        ],
    )
    assert built.exit_code == 0, built.output
    exact, searched = tmp_path / "exact.json", tmp_path / "searched.json"
    first = runner.invoke(
        app,
        ["eval", "ir", str(beir), "--index", "docs", "--index-dir", index_dir, "--out", str(exact)],
    )
    second = runner.invoke(
        app,
        [
            "eval",
            "ir",
            str(beir),
            "--index",
            "docs",
            "--index-dir",
            index_dir,
            "--search-index",
            "--out",
            str(searched),
        ],
    )
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    exact_metrics, index_metrics = (json.loads(p.read_text())["metrics"] for p in (exact, searched))
    assert exact_metrics["ndcg@10"] == pytest.approx(index_metrics["ndcg@10"], abs=1e-6)
    assert exact_metrics["queries"] == 6 and "ndcg@10" in first.stdout
    exact_modes, index_modes = (json.loads(p.read_text())["modes"] for p in (exact, searched))
    assert list(exact_modes) == ["dense", "lexical", "hybrid adaptive 0.5"] == list(index_modes)
    for mode in exact_modes:  # BM25 and fusion are the same code either way
        assert exact_modes[mode]["ndcg@10"] == pytest.approx(index_modes[mode]["ndcg@10"], abs=1e-6)
    assert "lexical" in first.stdout and "hybrid" in second.stdout
    assert "hybrid score: dense and BM25" in " ".join(first.stdout.split())  # what it means
    assert json.loads(searched.read_text())["ranking"].startswith("the index (Flat")


def test_heatmap_writes_a_png_and_the_matrix(tmp_path, tiny_model_dir, sentences) -> None:
    lines = tmp_path / "s.txt"
    lines.write_text("\n".join(sentences[:4]))
    png, out = tmp_path / "h.png", tmp_path / "h.json"
    result = runner.invoke(
        app,
        [
            "eval",
            "heatmap",
            str(lines),
            "--png",
            str(png),
            "--out",
            str(out),
            "--model",
            str(tiny_model_dir),
        ],
    )
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:4] == b"\x89PNG"
    matrix = json.loads(out.read_text())["matrix"]
    assert len(matrix) == 4 and matrix[0][0] == pytest.approx(1.0, abs=1e-5)


def test_errors_are_one_line(tmp_path, tiny_model_dir, beir) -> None:
    pairs = write_pairs_parquet(tmp_path / "pairs.parquet")
    missing = runner.invoke(app, ["eval", "sts", str(pairs), "--model", str(tiny_model_dir)])
    assert "cannot be measured as sts: it lacks sentence1, sentence2, score" in error_line(missing)
    stsb = write_stsb(tmp_path / "sts.tsv.gz")
    both = runner.invoke(app, ["eval", "sts", f"stsb:{stsb}", "--model", "x", "--index", "y"])
    assert "either --model or --index, not both" in error_line(both)
    no_folder = runner.invoke(
        app, ["eval", "ir", str(tmp_path / "nothing"), "--model", str(tiny_model_dir)]
    )
    assert "is not a BEIR folder" in error_line(no_folder)
    no_index = runner.invoke(
        app, ["eval", "ir", str(beir), "--search-index", "--model", str(tiny_model_dir)]
    )
    assert "--search-index needs --index" in error_line(no_index)
