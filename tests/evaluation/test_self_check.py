"""`eval self`: a document index asked sentences of its own documents."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli.support import CliRunner

from semsearch.cli.app import app
from semsearch.errors import SemsearchError
from semsearch.evaluate import ModelOptions, evaluate_self
from semsearch.evaluation.self_check import self_queries, sentences
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.search.searcher import Searcher
from semsearch.store.folders import find_index

SHARED = "Every document of this little corpus carries this same long sentence somewhere."
TOPICS = ["violins", "gardens", "engines", "oceans", "printers", "mountains"]


def _document(topic: str) -> str:
    own = [
        f"Paragraph {n} tells the reader one more particular thing about {topic} and {n}."
        for n in range(12)
    ]
    return " ".join([own[0], SHARED, *own[1:], "Too short here."])


def _build(tmp_path: Path, tiny_model_dir: Path, **options) -> Path:
    corpus = tmp_path / "docs.parquet"
    pq.write_table(
        pa.table({"name": TOPICS, "text": [_document(topic) for topic in TOPICS]}), corpus
    )
    out = tmp_path / "indexes"
    build_index(
        BuildOptions(
            corpus=corpus,
            id_column="name",
            model=str(tiny_model_dir),
            out_dir=out,
            show_progress=False,
            runtime="torch",
            device="cpu",
            target_recall=None,
            **{"name": "docs", "chunking": "on", "chunk_tokens": 32, "chunk_overlap": 4, **options},
        )
    )
    return out


def test_sentences_keep_those_of_eight_words_or_more() -> None:
    text = "Short one. This sentence has exactly eight words in it! And  this\nspans lines too, friend."
    assert (
        sentences(text)
        == [
            "This sentence has exactly eight words in it!",
            "And this spans lines too, friend.",
        ][:1]
    )


def test_queries_are_sentences_of_one_document_only(tmp_path, tiny_model_dir) -> None:
    out = _build(tmp_path, tiny_model_dir)
    searcher = Searcher(find_index("docs", out), vectors_only=True)
    queries, facts = self_queries(searcher, sample=100)
    assert facts["documents"] == facts["documents_with_own_sentence"] == len(TOPICS)
    assert len(queries) == len(TOPICS)  # one per document
    assert {query.document for query in queries} == set(TOPICS)
    for query in queries:
        assert query.text != SHARED  # in every document: no single right answer
        assert query.text in _document(query.document)
        assert query.document in query.text or "particular thing" in query.text
    assert all(query.past_window for query in queries)  # the documents run past the window
    assert len(self_queries(searcher, sample=2)[0]) == 2


def test_eval_self_reports_recall_and_mrr_with_its_sample(tmp_path, tiny_model_dir) -> None:
    out = _build(tmp_path, tiny_model_dir)
    result = evaluate_self(ModelOptions(index="docs", index_dir=out, device="cpu"), sample=50)
    assert result.metrics["queries"] == len(TOPICS)
    assert 0 <= result.metrics["mrr@10"] <= result.metrics["recall@10"] <= 1
    # Six documents and k = 10: every document comes back, so each one is found.
    assert result.metrics["recall@10"] == 1.0
    runner = CliRunner()
    shown = runner.invoke(app, ["eval", "self", "docs", "--index-dir", str(out), "--json"])
    assert shown.exit_code == 0, shown.output
    line = json.loads(shown.stdout.strip().splitlines()[-1])
    assert line["task"] == "self" and line["metrics"]["queries"] == len(TOPICS)
    assert line["past_first_window"] == len(TOPICS)


def test_an_index_of_sentences_or_of_own_vectors_is_one_line(tmp_path, tiny_model_dir) -> None:
    out = _build(tmp_path, tiny_model_dir, chunking="off", name="plain")
    with pytest.raises(SemsearchError, match="index 'plain' is not chunked"):
        evaluate_self(ModelOptions(index="plain", index_dir=out, device="cpu"))
    vectors = tmp_path / "vectors.parquet"
    base = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    pq.write_table(pa.table({"emb": pa.array(list(base), pa.list_(pa.float32()))}), vectors)
    build_index(
        BuildOptions(
            corpus=vectors, name="mine", vector_column="emb", model=None, out_dir=out,
            text_column=None, show_progress=False,
        )
    )  # fmt: skip
    shown = CliRunner().invoke(app, ["eval", "self", "mine", "--index-dir", str(out)])
    assert shown.exit_code != 0
    assert "holds your own vectors without texts or a model" in shown.output
    assert "Traceback" not in shown.output
