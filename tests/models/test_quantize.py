"""`--quantize int8`: the OpenVINO int8 encoder whatever the runtime asked for, recorded in
the index and used for its queries, close to fp32 on the default model, refused in one line
where it cannot run (an unknown mode, packed batches)."""

from __future__ import annotations

import numpy as np
import pytest

from semsearch.errors import SemsearchError
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.models import BiEncoder
from semsearch.search.searcher import Searcher

ov = pytest.importorskip("openvino", reason="openvino is not installed (the cpu-runtime extra)")
pytest.importorskip("nncf", reason="nncf is not installed (the cpu-runtime extra)")


@pytest.fixture()
def converted_once(monkeypatch: pytest.MonkeyPatch, openvino_tiny_model) -> None:
    """The export returns a copy of the tiny model converted once per session (fast)."""
    monkeypatch.setattr(ov, "convert_model", lambda *a, **k: openvino_tiny_model.clone())


def _int8(folder, **options) -> BiEncoder:
    return BiEncoder.load(str(folder), device="cpu", quantization="int8", **options)


@pytest.mark.parametrize("runtime", ["auto", "openvino", "torch"])
def test_int8_runs_on_openvino_and_loads_the_same_twice(
    tiny_model_dir, converted_once, sentences, runtime
) -> None:
    first = _int8(tiny_model_dir, runtime=runtime)
    assert first.runtime == "openvino-int8" and first.quantization == "int8"
    second = _int8(tiny_model_dir, runtime=runtime)
    np.testing.assert_array_equal(first.encode(sentences), second.encode(sentences))


def test_unknown_quantisation_and_packing_are_refused(
    tiny_model_dir, converted_once, sentences
) -> None:
    with pytest.raises(SemsearchError, match="unknown quantisation 'int4'"):
        BiEncoder.load(str(tiny_model_dir), device="cpu", quantization="int4")
    with pytest.raises(SemsearchError, match="only on its OpenVINO model: encode without packing"):
        _int8(tiny_model_dir).encode(sentences, packing=True)


def test_an_int8_index_is_queried_by_an_int8_encoder(
    tmp_path, tiny_model_dir, corpus_file, converted_once
) -> None:
    options = BuildOptions(
        corpus=corpus_file,
        name="q",
        out_dir=tmp_path,
        model=str(tiny_model_dir),
        device="cpu",
        quantization="int8",
        show_progress=False,
    )
    folder = build_index(options)
    assert folder.manifest().model.quantization == "int8"
    searcher = Searcher(folder, device="cpu")
    assert searcher.encoder.quantization == "int8"
    assert searcher.search(["a cat"], k=1)[0][0].rank == 1
    with pytest.raises(SemsearchError, match="built by the int8 encoder, this one is fp32"):
        Searcher(folder, encoder=BiEncoder.load(str(tiny_model_dir), device="cpu"))
    with pytest.raises(SemsearchError, match="cannot be saved"):
        searcher.encoder.save(tmp_path / "saved")


@pytest.mark.slow
def test_int8_vectors_stay_close_to_fp32_on_the_default_model(default_encoder, sentences) -> None:
    """The bar the runtime checks itself against, on the real model, and the same nearest
    other sentence for each sentence (benchmarks/int8_recall.py measures recall@10)."""
    int8 = BiEncoder.load("default", device="cpu", quantization="int8")
    exact, approximate = default_encoder.encode(sentences), int8.encode(sentences)
    cosines = (exact * approximate).sum(axis=1)
    assert cosines.mean() >= 0.99 and cosines.min() >= 0.95, cosines
    nearest = [
        np.argsort(-(m @ m.T - 2 * np.eye(len(m))), axis=1)[:, 0] for m in (exact, approximate)
    ]
    assert np.mean(nearest[0] == nearest[1]) == 1.0
