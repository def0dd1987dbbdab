"""The cross-encoder on the command line: `train --cross-encoder`, `query --rerank`,
`eval ir --rerank`, and one clear line when a folder of the other kind is given."""

from __future__ import annotations

import json

import pytest
from cli.support import error_line, runner
from tiny_cross import make_tiny_cross_encoder
from training.tiny_data import write_stsb

from semsearch.cli.app import app


@pytest.fixture()
def cross_dir(tiny_model_dir, tmp_path):
    return make_tiny_cross_encoder(tiny_model_dir, tmp_path / "cross")


@pytest.fixture()
def index(tmp_path, tiny_model_dir, corpus_file):
    index_dir = str(tmp_path / "idx")
    built = runner.invoke(
        app,
        [
            "build",
            str(corpus_file),
            "--name",
            "docs",
            "--id-column",
            "doc_id",
            "--model",
            str(tiny_model_dir),
            "--out-dir",
            index_dir,
            "--device",
            "cpu",
        ],
    )
    assert built.exit_code == 0, built.output
    return ["--index", "docs", "--index-dir", index_dir]


def test_train_cross_encoder_writes_a_cross_encoder_folder(tmp_path, tiny_model_dir) -> None:
    stsb = write_stsb(tmp_path / "sts.tsv.gz")
    output = tmp_path / "cross-run"
    result = runner.invoke(
        app,
        [
            "train",
            f"stsb:{stsb}",
            "--cross-encoder",
            "-o",
            str(output),
            "--model",
            str(tiny_model_dir),
            "--dev",
            f"stsb:{stsb}",
            "--test",
            f"stsb:{stsb}",
            "--max-steps",
            "2",
            "--batch-size",
            "4",
            "--device",
            "cpu",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    [record] = [json.loads(line) for line in result.stdout.splitlines()]
    assert record["dev_primary"] == "spearman" and set(record["test_metrics"]) == {
        "spearman",
        "pearson",
    }
    assert (output / "cross_encoder.json").is_file()
    assert json.loads((output / "training.json").read_text())["config"]["objective"] == "bce"


def test_train_without_objective_needs_cross_encoder(tmp_path) -> None:
    result = runner.invoke(app, ["train", "x.csv", "-o", str(tmp_path / "m")])
    assert "--objective is required" in error_line(result)


def test_query_rerank_reorders_by_the_cross_encoder(index, cross_dir, sentences) -> None:
    plain = runner.invoke(app, ["query", sentences[0], *index, "-k", "12", "--json"])
    reranked = runner.invoke(
        app,
        [
            "query",
            sentences[0],
            *index,
            "-k",
            "3",
            "--rerank",
            str(cross_dir),
            "--rerank-top",
            "12",
            "--json",
        ],
    )
    assert plain.exit_code == 0 and reranked.exit_code == 0, plain.output + reranked.output
    records = [json.loads(line) for line in reranked.stdout.splitlines()]
    scores = [record["rerank_score"] for record in records]
    assert [record["rank"] for record in records] == [1, 2, 3]
    assert scores == sorted(scores, reverse=True)
    retrieved = {json.loads(line)["id"]: json.loads(line) for line in plain.stdout.splitlines()}
    for record in records:
        assert record["retrieval_rank"] == retrieved[record["id"]]["rank"]
        assert record["topic"] == retrieved[record["id"]]["topic"]


def test_query_rerank_notes_speak_of_k_not_of_the_candidates(index, cross_dir, sentences) -> None:
    """The index holds 12 rows: --rerank-top's 100 candidates are all of them, which -k 3
    needs no note for; -k 50 asks for more rows than there are, and the note says -k."""

    def notes(*options: str) -> list[str]:
        result = runner.invoke(
            app, ["query", sentences[0], *index, "--rerank", str(cross_dir), *options]
        )
        assert result.exit_code == 0, result.output
        return [line for line in result.stderr.splitlines() if line.startswith("note:")]

    assert notes("-k", "3") == []
    assert notes("-k", "50", "--rerank-top", "20") == [
        "note: k 50 clamped to 12 (the index holds 12 rows)"
    ]


def test_eval_ir_rerank_reports_before_and_after(tmp_path, tiny_model_dir, cross_dir, beir) -> None:
    plain, reranked = tmp_path / "plain.json", tmp_path / "reranked.json"
    first = runner.invoke(
        app, ["eval", "ir", str(beir), "--model", str(tiny_model_dir), "--out", str(plain)]
    )
    second = runner.invoke(
        app,
        [
            "eval",
            "ir",
            str(beir),
            "--model",
            str(tiny_model_dir),
            "--rerank",
            str(cross_dir),
            "--rerank-top",
            "5",
            "--out",
            str(reranked),
        ],
    )
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    before, after = (json.loads(path.read_text()) for path in (plain, reranked))
    assert after["before_rerank"]["ndcg@10"] == pytest.approx(before["metrics"]["ndcg@10"])
    assert after["rerank_top"] == 5 and after["metrics"]["queries"] == 6
    # Re-ranking the first five leaves recall@10 and recall@100 unchanged.
    assert after["metrics"]["recall@10"] == pytest.approx(before["metrics"]["recall@10"])
    assert "before re-ranking" in second.stdout


def test_a_cross_encoder_where_a_bi_encoder_is_expected_is_one_line(
    tmp_path, cross_dir, corpus_file, index, beir
) -> None:
    build = runner.invoke(
        app,
        [
            "build",
            str(corpus_file),
            "--name",
            "x",
            "--model",
            str(cross_dir),
            "--out-dir",
            str(tmp_path / "other"),
        ],
    )
    assert "is a cross-encoder" in error_line(build)
    evaluation = runner.invoke(app, ["eval", "ir", str(beir), "--model", str(cross_dir)])
    assert "is a cross-encoder" in error_line(evaluation)


def test_a_bi_encoder_where_a_cross_encoder_is_expected_is_one_line(
    index, tiny_model_dir, cross_dir, beir
) -> None:
    query = runner.invoke(app, ["query", "cats", *index, "--rerank", str(tiny_model_dir)])
    assert "is a bi-encoder" in error_line(query)
    evaluation = runner.invoke(
        app, ["eval", "ir", str(beir), "--model", str(tiny_model_dir), "--rerank", "default"]
    )
    assert "is a bi-encoder" in error_line(evaluation)
    top = runner.invoke(
        app, ["query", "cats", *index, "--rerank", str(cross_dir), "--rerank-top", "0"]
    )
    assert "--rerank-top must be at least 1" in error_line(top)
