"""Queries through the checked OpenVINO export: torch's vectors without torch, and only from
an entry that was checked and is intact."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
import pytest
from models.odd_texts import ODD_TEXTS

from semsearch.models.bi_encoder import BiEncoder
from semsearch.models.exported_query_encoder import (
    ExportedQueryEncoder,
    export_path,
    query_files,
)
from semsearch.models.openvino_runtime import (
    MIN_COSINE,
    MIN_MEAN_COSINE,
    cosine_agreement,
    export_for_queries,
)
from semsearch.models.query_loader import open_for_queries, open_for_rows

ov = pytest.importorskip("openvino", reason="openvino is not installed (the cpu-runtime extra)")

LOGGER = "semsearch.models.exported_query_encoder"


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openvino_tiny_model) -> Path:
    """A fresh cache per test, and conversions that return the tiny model converted once."""
    monkeypatch.setenv("SEMSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(ov, "convert_model", lambda *args, **kwargs: openvino_tiny_model)
    return tmp_path / "cache"


def _entry_files(encoder: BiEncoder) -> list[Path]:
    xml = export_path(encoder.spec, ov.get_version())
    return [*query_files(xml), xml, xml.with_suffix(".bin")]


def _messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno >= level]


def test_the_exported_encoder_gives_torchs_vectors(tiny_encoder) -> None:
    assert export_for_queries(tiny_encoder)
    exported = ExportedQueryEncoder.open(tiny_encoder.spec, threads=1)
    assert exported is not None and exported.spec == tiny_encoder.spec
    expected = tiny_encoder.encode(ODD_TEXTS, precision="fp32")
    for got in (
        exported.encode(ODD_TEXTS),
        exported.encode(ODD_TEXTS, batch_size=2),
        np.concatenate([exported.encode([text]) for text in ODD_TEXTS]),
    ):
        mean, least = cosine_agreement(got, expected)
        assert mean >= MIN_MEAN_COSINE and least >= MIN_COSINE, (mean, least)
        np.testing.assert_allclose(got, expected, atol=1e-5)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_an_fp32_index_keeps_its_neighbours(tiny_encoder, sentences, precision) -> None:
    """The precision-mismatch rule: an index built by torch fp32, queried through the export
    (fp32 for a query, bf16 for a server), finds the same top 10 (recall@10 >= 0.99)."""
    corpus = tiny_encoder.encode(sentences * 4 + ODD_TEXTS, precision="fp32")
    queries = [*ODD_TEXTS, *sentences]
    assert export_for_queries(tiny_encoder)
    BiEncoder.load(tiny_encoder.name, device="cpu", runtime="openvino").encode(
        ["check"], precision=precision
    )  # checks (and records) bf16 also on a CPU without native bf16
    exported = ExportedQueryEncoder.open(tiny_encoder.spec, threads=1, precision=precision)
    top = {}
    for name, vectors in (
        ("torch", tiny_encoder.encode(queries, precision="fp32")),
        ("exported", exported.encode(queries)),
    ):
        top[name] = np.argsort(-(vectors @ corpus.T), axis=1, kind="stable")[:, :10]
    found = sum(len(set(a) & set(b)) for a, b in zip(top["torch"], top["exported"]))
    assert found / top["torch"].size >= 0.99


def test_no_entry_or_no_openvino_is_the_torch_path(tiny_encoder, caplog, monkeypatch) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert ExportedQueryEncoder.open(tiny_encoder.spec) is None
    assert len(_messages(caplog, logging.INFO)) == 1
    assert export_for_queries(tiny_encoder)
    monkeypatch.setitem(sys.modules, "openvino", None)  # as if it were not installed
    assert ExportedQueryEncoder.open(tiny_encoder.spec) is None


def test_only_a_checked_precision_is_used(tiny_encoder) -> None:
    """`--runtime openvino` on a build checks its default precision only (bf16 where the CPU
    has it natively): that one is recorded for a server, not fp32 for a query."""
    runtime = BiEncoder.load(tiny_encoder.name, device="cpu", runtime="openvino").runtime
    checked = runtime.removeprefix("openvino-")
    other = {"bf16": "fp32", "fp32": "bf16"}[checked]
    assert ExportedQueryEncoder.open(tiny_encoder.spec, precision=other) is None
    exported = ExportedQueryEncoder.open(tiny_encoder.spec, threads=1, precision=checked)
    assert exported is not None and exported.runtime == runtime
    mean, least = cosine_agreement(exported.encode(ODD_TEXTS), tiny_encoder.encode(ODD_TEXTS))
    assert mean >= MIN_MEAN_COSINE and least >= MIN_COSINE, (mean, least)


@pytest.mark.parametrize("damaged", [0, 1, 2, 3])
def test_a_tampered_entry_is_never_loaded(tiny_encoder, caplog, damaged) -> None:
    assert export_for_queries(tiny_encoder)
    target = _entry_files(tiny_encoder)[damaged]
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert ExportedQueryEncoder.open(tiny_encoder.spec) is None
    assert len(_messages(caplog, logging.WARNING)) == 1
    assert "not using the OpenVINO export" in _messages(caplog, logging.WARNING)[0]
    # The torch path checks and records the entry again; then it is trusted.
    again = open_for_queries(tiny_encoder.spec, "cpu", "auto")
    assert isinstance(again, ExportedQueryEncoder)
    np.testing.assert_allclose(again.encode(ODD_TEXTS), tiny_encoder.encode(ODD_TEXTS), atol=1e-5)


def test_the_first_query_exports_and_the_next_one_needs_no_torch_model(tiny_encoder) -> None:
    first = open_for_queries(tiny_encoder.spec, "cpu", "auto")
    assert isinstance(first, ExportedQueryEncoder)
    assert all(path.is_file() for path in _entry_files(tiny_encoder))
    assert isinstance(open_for_queries(tiny_encoder.spec, "cpu", "auto"), ExportedQueryEncoder)
    assert not isinstance(open_for_queries(tiny_encoder.spec, "cpu", "torch"), ExportedQueryEncoder)


def test_another_models_weights_are_not_exported_for_the_index(tiny_encoder) -> None:
    from dataclasses import replace

    spec = replace(tiny_encoder.spec, fingerprint="0" * 64)
    encoder = open_for_queries(spec, "cpu", "auto")
    assert isinstance(encoder, BiEncoder)  # the Searcher refuses it, in one line
    assert not export_path(spec, ov.get_version()).is_file()


def test_a_tampered_compiled_copy_is_compiled_again(tiny_encoder, caplog) -> None:
    assert export_for_queries(tiny_encoder)
    assert ExportedQueryEncoder.open(tiny_encoder.spec, threads=1) is not None
    compiled = export_path(tiny_encoder.spec, ov.get_version()).with_suffix(".compiled")
    blobs = [p for p in compiled.iterdir() if not p.name.endswith(".record.json")]
    assert blobs and all(p.with_name(p.name + ".record.json").is_file() for p in blobs)
    data = bytearray(blobs[0].read_bytes())
    data[len(data) // 2] ^= 0x01
    blobs[0].write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        exported = ExportedQueryEncoder.open(tiny_encoder.spec, threads=1)
    assert exported is not None
    assert ["compiling it again" in m for m in _messages(caplog, logging.WARNING)] == [True]
    np.testing.assert_allclose(
        exported.encode(ODD_TEXTS), tiny_encoder.encode(ODD_TEXTS), atol=1e-5
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert ExportedQueryEncoder.open(tiny_encoder.spec, threads=1) is not None
    assert _messages(caplog, logging.WARNING) == []  # compiled afresh, and recorded


def test_a_rebuilt_export_leaves_compiled_copies_the_next_open_loads(tiny_encoder, caplog) -> None:
    """Issue 37: after the export was written again, its compiled copy's record was stale, so
    the next process warned and compiled it again (seconds)."""
    from semsearch.checksums import cache_file_problem

    assert export_for_queries(tiny_encoder)
    assert ExportedQueryEncoder.open(tiny_encoder.spec) is not None  # compiled and recorded
    xml = export_path(tiny_encoder.spec, ov.get_version())
    weights = xml.with_suffix(".bin")
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01
    weights.write_bytes(bytes(data))
    # The torch path exports the encoder again, checks it, and opens the new export.
    assert isinstance(open_for_queries(tiny_encoder.spec, "cpu", "auto"), ExportedQueryEncoder)
    compiled = xml.with_suffix(".compiled")
    blobs = [p for p in compiled.iterdir() if not p.name.endswith(".record.json")]
    assert blobs and [cache_file_problem(blob) for blob in blobs] == [None] * len(blobs)
    written = {blob.name: blob.stat().st_mtime_ns for blob in blobs}
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        exported = ExportedQueryEncoder.open(tiny_encoder.spec)
    assert exported is not None and _messages(caplog, logging.WARNING) == []
    again = {p.name: p.stat().st_mtime_ns for p in compiled.iterdir() if p.name in written}
    assert again == written  # loaded as it was, not compiled again
    np.testing.assert_allclose(
        exported.encode(ODD_TEXTS), tiny_encoder.encode(ODD_TEXTS), atol=1e-5
    )


def test_rows_to_add_are_encoded_on_the_checked_export_where_there_is_one(tiny_encoder) -> None:
    assert export_for_queries(tiny_encoder)
    encoder = open_for_rows(tiny_encoder.spec, "cpu", "auto")
    assert isinstance(encoder, ExportedQueryEncoder)
    # bf16 where the CPU runs it natively, as a build on it encodes
    mean, least = cosine_agreement(encoder.encode(ODD_TEXTS), tiny_encoder.encode(ODD_TEXTS))
    assert mean >= MIN_MEAN_COSINE and least >= MIN_COSINE, (mean, least)
    assert isinstance(open_for_rows(tiny_encoder.spec, "cpu", "torch"), BiEncoder)


def test_a_throughput_compile_runs_batches_at_once_with_the_same_vectors(tiny_encoder) -> None:
    assert export_for_queries(tiny_encoder)
    latency = ExportedQueryEncoder.open(tiny_encoder.spec)
    throughput = ExportedQueryEncoder.open(tiny_encoder.spec, throughput=True)
    assert latency is not None and throughput is not None
    assert latency._streams() == 1  # a query's compile: one batch on every core
    texts = ODD_TEXTS * 4
    heard: list[int] = []
    got = throughput.encode(texts, batch_size=3, progress=heard.append)
    assert sum(heard) == len(texts)
    np.testing.assert_allclose(got, latency.encode(texts, batch_size=3), atol=1e-6)
    np.testing.assert_allclose(got, tiny_encoder.encode(texts, precision="fp32"), atol=1e-5)
