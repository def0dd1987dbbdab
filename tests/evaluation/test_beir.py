"""BEIR folders: plain or gzipped JSONL and qrels, with clear errors."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from semsearch.errors import SemsearchError
from semsearch.evaluation import read_beir


def _write(path: Path, text: str, compress: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        with gzip.open(f"{path}.gz", "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")


def _beir_folder(folder: Path, compress: bool) -> Path:
    corpus = [
        {"_id": "d1", "title": "Cats", "text": 'Small "house" felines.', "metadata": {}},
        {"_id": "d2", "title": "", "text": "Dogs bark."},
    ]
    queries = [{"_id": "q1", "text": "what is a cat"}, {"_id": "q2", "text": "unjudged"}]
    _write(folder / "corpus.jsonl", "".join(json.dumps(row) + "\n" for row in corpus), compress)
    _write(folder / "queries.jsonl", "".join(json.dumps(row) + "\n" for row in queries), compress)
    qrels = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\n"
    _write(folder / "qrels" / "test.tsv", qrels, compress)
    return folder


@pytest.mark.parametrize("compress", [False, True])
def test_reads_corpus_queries_and_graded_qrels(tmp_path, compress) -> None:
    data = read_beir(_beir_folder(tmp_path, compress))
    assert data.corpus == {"d1": 'Cats Small "house" felines.', "d2": "Dogs bark."}
    assert data.queries == {"q1": "what is a cat", "q2": "unjudged"}
    assert data.qrels == {"q1": {"d1": 2, "d2": 0}}


def test_missing_files_and_bad_lines_are_user_errors(tmp_path) -> None:
    with pytest.raises(SemsearchError, match="has no corpus.jsonl"):
        read_beir(tmp_path)
    folder = _beir_folder(tmp_path, compress=False)
    with pytest.raises(SemsearchError, match="has no qrels/dev.tsv"):
        read_beir(folder, split="dev")
    (folder / "qrels" / "test.tsv").write_text("q1\td1\tvery\n", encoding="utf-8")
    with pytest.raises(SemsearchError, match="line 1: expected query-id"):
        read_beir(folder)
