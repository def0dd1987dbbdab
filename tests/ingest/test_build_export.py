"""A build on the model's checked OpenVINO export: the vectors, spec and counts of the build
that loaded torch, without loading the torch encoder (`query_loader.open_model_export`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.models import openvino_runtime, query_loader
from semsearch.models.bi_encoder import BiEncoder
from semsearch.models.exported_query_encoder import ExportedQueryEncoder
from semsearch.training.vectors import index_vectors

ov = pytest.importorskip("openvino", reason="openvino is not installed (the cpu-runtime extra)")

LONG = " ".join(["parquet"] * 400)  # past the tiny model's 128-token window


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openvino_tiny_model) -> Path:
    """A fresh cache per test, conversions that return the tiny model converted once, and
    fp32 as the runtime's precision (the tiny model's random weights fail bf16's check)."""
    monkeypatch.setenv("SEMSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(ov, "convert_model", lambda *args, **kwargs: openvino_tiny_model)
    for module in (openvino_runtime, query_loader):
        monkeypatch.setattr(module, "native_bf16", lambda ov: False)
    return tmp_path / "cache"


@pytest.fixture
def corpus(tmp_path: Path, sentences: list[str]) -> Path:
    texts = [*sentences, LONG] * 3  # more rows than a batch: several batches at once
    path = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"text": texts}), path)
    return path


def _build(corpus: Path, out: Path, model: Path, name: str, **changes):
    options = BuildOptions(
        corpus=corpus,
        name=name,
        model=str(model),
        device="cpu",
        out_dir=out,
        batch_size=4,
        lexical=None,
        chunking="off",  # the long text keeps its first window: counted as cut
        show_progress=False,
        **changes,
    )
    return build_index(options)


def _refuse_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the torch encoder was loaded")

    monkeypatch.setattr(BiEncoder, "load", classmethod(refuse))


@pytest.mark.default_runtime
def test_the_second_build_encodes_on_the_checked_export_with_the_same_vectors(
    corpus, tmp_path, tiny_model_dir, monkeypatch
) -> None:
    first = _build(corpus, tmp_path / "out", tiny_model_dir, "first")  # torch: exports, checks
    runtime = first.manifest().operation["runtime"]
    assert runtime == "openvino-fp32"
    _refuse_torch(monkeypatch)
    second = _build(corpus, tmp_path / "out", tiny_model_dir, "second")
    before, after = first.manifest(), second.manifest()
    assert after.model == before.model  # the spec found from the folder's files alone
    assert after.operation["runtime"] == runtime
    assert after.operation["truncated"] == before.operation["truncated"] == 3
    np.testing.assert_allclose(index_vectors(second), index_vectors(first), atol=1e-6)


@pytest.mark.default_runtime
def test_a_first_build_and_a_torch_build_load_the_torch_encoder(
    corpus, tmp_path, tiny_model_dir, monkeypatch
) -> None:
    opened = []
    real_open = ExportedQueryEncoder.open.__func__

    def recording_open(cls, *args, **kwargs):
        found = real_open(cls, *args, **kwargs)
        opened.append(found)
        return found

    monkeypatch.setattr(ExportedQueryEncoder, "open", classmethod(recording_open))
    _build(corpus, tmp_path / "out", tiny_model_dir, "first")
    assert opened == [None]  # nothing checked yet: the torch encoder ran, and exported
    folder = _build(corpus, tmp_path / "out", tiny_model_dir, "torch", runtime="torch")
    assert len(opened) == 1 and folder.manifest().operation["runtime"] == "torch"
