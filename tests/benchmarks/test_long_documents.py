"""The long-document benchmark: its fixed windows, the queries made from man pages, and a
whole run on generated pages with a tiny model."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # the scripts import each other by bare name

import long_documents  # noqa: E402
import prepare_long_documents as prepare  # noqa: E402

PAGE = """.TH FROB 2 2023-02-05 "Linux man-pages 6.03"
.SH NAME
frob, frobat \\- twiddle the bits of an open descriptor
.SH SYNOPSIS
.B int frob(int fd);
.SH DESCRIPTION
The frob() system call twiddles every bit of the descriptor given to it by the caller.
.PP
When the descriptor refers to a pipe, frobat() flushes the pending bytes before any bits are twiddled at all.
.SH ERRORS
.TP
.B EBADF
The descriptor is not valid for this particular kind of operation today.
"""


@pytest.fixture(scope="module")
def tokenizer():
    return long_documents.load_tokenizer("default")


def test_windows_cover_every_token_with_the_overlap_asked(tokenizer) -> None:
    texts = [" ".join(f"word{n}" for n in range(300)), "short text", ""]
    chunks = long_documents.chunk_windows(tokenizer, texts, window=50, overlap=10)
    ids = long_documents.tokenize_all(tokenizer, texts)
    first = [c[1:-1] for c, owner in zip(chunks.token_ids, chunks.owners) if owner == 0]
    assert all(len(c) == 50 for c in first[:-1]) and len(first[-1]) <= 50
    assert [c[-10:] for c in first[:-1]] == [c[:10] for c in first[1:]]  # the overlap
    assert first[0] + [t for c in first[1:] for t in c[10:]] == ids[0]  # nothing lost
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    assert all(c[0] == cls and c[-1] == sep for c in chunks.token_ids)
    assert chunks.owners.tolist().count(1) == 1 and chunks.owners.tolist().count(2) == 1
    start, end = chunks.spans[len(first) - 1]
    assert texts[0][start:end].endswith("word299")  # the last window ends with the text
    assert texts[1][slice(*chunks.spans[len(first)])] == "short text"


def test_an_overlap_as_long_as_the_window_is_refused(tokenizer) -> None:
    with pytest.raises(SystemExit, match="overlap"):
        long_documents.chunk_windows(tokenizer, ["a text"], window=8, overlap=8)


def test_quality_is_split_by_where_the_answer_lies() -> None:
    queries = [
        {"query": "q1", "gold_id": "a", "where": "first_window"},
        {"query": "q2", "gold_id": "b", "where": "past_window"},
        {"query": "q3", "gold_id": "c", "where": "past_window"},
    ]
    rankings = [["a", "x"], ["x", "b"], ["x", "y"]]
    quality = long_documents.by_kind(rankings, queries)
    assert quality["first_window"] == {"recall_at_10": 1.0, "ndcg_at_10": 1.0, "queries": 1}
    assert quality["past_window"]["recall_at_10"] == 0.5
    assert quality["past_window"]["ndcg_at_10"] == pytest.approx(0.5 / np.log2(3), abs=1e-4)


@pytest.mark.skipif(shutil.which("man") is None, reason="needs man and groff")
def test_a_rendered_page_gives_prose_sentences_and_keyword_queries(tmp_path: Path) -> None:
    source = tmp_path / "frob.2.gz"
    source.write_bytes(gzip.compress(PAGE.encode()))
    text = prepare.render_page(source)
    document = prepare.Document("man2/frob.2", "frob(2)", text)
    assert prepare.page_names(document) == ["frobat", "frob"]
    sentences = prepare.prose_sentences(text)
    assert [s.section for s in sentences] == ["DESCRIPTION", "DESCRIPTION"]  # not ERRORS
    assert all(" ".join(text[s.start : s.end].split()) == s.text for s in sentences)
    query = prepare.keyword_query(sentences[1].text, prepare.page_names(document))
    assert query == "descriptor refers pipe flushes pending bytes bits twiddled"


def test_queries_come_from_sentences_no_other_page_has_on_the_right_side_of_the_window() -> None:
    shared = "This sentence about kernel buffers appears in both pages of the corpus today."
    first = "The widget driver allocates its ring buffers lazily on the first interrupt seen."
    past = "Later the widget driver releases every ring buffer when the device goes quiet."
    body = f"DESCRIPTION\n       {first}\n\n       {shared}\n\n       {past}\n"
    other = f"DESCRIPTION\n       {shared}\n"
    documents = [prepare.Document("a", "a(1)", body), prepare.Document("b", "b(1)", other)]
    limit = body.index(shared)  # the first window ends after the first sentence
    queries = prepare.make_queries(documents, [limit, len(other)], per_kind=5, seed=0)
    assert [(q["where"], q["sentence"]) for q in queries] == [
        ("first_window", first),
        ("past_window", past),
    ]
    assert all(q["gold_id"] == "a" for q in queries)


@pytest.mark.slow  # a build, three query runs and a hybrid index through the CLI: ~17 s
def test_the_script_runs_on_generated_pages_and_records_its_line_beside_its_output(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/long_documents.py",
            "--synthetic",
            "6",
            "--model",
            str(tiny_model_dir),
            "--chunk-tokens",
            "64",
            "--chunk-overlap",
            "8",
            "--out-dir",
            str(out),
        ],
        cwd=BENCHMARKS.parent,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = [json.loads(text) for text in (out / "results" / "long_documents.jsonl").open()]
    assert set(line["variants"]) == {
        "truncation",
        "best_chunk",
        "mean_chunks",
        "best_chunk_hybrid",
    }
    assert line["queries"] == {"first_window": 6, "past_window": 6}
    assert line["chunks"] > line["documents"] == 6
    assert line["tokens_per_s_ratio"] > 0 and set(line["first_window_gap"]) == {
        "recall_at_10",
        "ndcg_at_10",
    }
