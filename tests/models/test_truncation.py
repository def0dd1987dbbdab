"""Texts cut at the model's maximum length are counted, and a build reports them once."""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.parquet as pq

from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.models import BiEncoder
from semsearch.models.truncation import truncation_report

LONG, SHORT = "alpha beta " * 20, "alpha beta"  # 42 and 4 tokens with [CLS] and [SEP]


def test_the_encoder_counts_the_texts_it_cuts(tiny_model_dir) -> None:
    encoder = BiEncoder.load(str(tiny_model_dir), max_length=16, device="cpu")
    exactly = "alpha beta " * 7  # 14 words + [CLS] [SEP]: fits, is not cut
    with truncation_report(encoder) as report:
        encoder.encode([LONG, SHORT, exactly, LONG], batch_size=2)
    assert (report.texts, report.cut) == (4, 2)


def test_a_build_logs_one_line_and_records_the_count(tiny_model_dir, tmp_path, caplog) -> None:
    corpus = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"text": [LONG, SHORT] * 5}), corpus)
    encoder = BiEncoder.load(str(tiny_model_dir), max_length=16, device="cpu")
    options = BuildOptions(
        corpus=corpus,
        name="cut",
        out_dir=tmp_path,
        model=str(tiny_model_dir),
        device="cpu",
        show_progress=False,
        part_rows=4,
    )
    with caplog.at_level(logging.WARNING):
        folder = build_index(options, encoder=encoder)
    lines = [r.getMessage() for r in caplog.records if "were cut" in r.getMessage()]
    assert lines == ["5 of 10 texts were longer than max_length 16 tokens and were cut"]
    assert folder.manifest().operation["truncated"] == 5


def test_nothing_is_logged_when_every_text_fits(tiny_encoder, sentences, caplog) -> None:
    with caplog.at_level(logging.WARNING), truncation_report(tiny_encoder) as report:
        tiny_encoder.encode(sentences)
    assert report.cut == 0 and report.texts == len(sentences)
    assert not caplog.records
