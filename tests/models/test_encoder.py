"""Every text encoder semsearch makes is an `Encoder`: the members its callers use exist and
give what the protocol says, whatever runs the model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from semsearch.models.bi_encoder import BiEncoder
from semsearch.models.encoder import Encoder

TEXTS = ["a violin concert tonight", "how to repot a fern"]


def check(encoder: object) -> None:
    assert isinstance(encoder, Encoder)
    vectors = encoder.encode(TEXTS)
    assert vectors.shape == (2, encoder.dimension) and vectors.dtype == np.float32
    assert np.allclose(encoder.encode_query(TEXTS), vectors)  # the tiny model names no prompt
    assert encoder.spec.name == encoder.name and encoder.spec.dimension == encoder.dimension
    assert isinstance(encoder.runtime, str) and encoder.runtime
    ids = encoder.tokenize(TEXTS)
    assert len(ids) == 2 and all(isinstance(token, int) for token in ids[0])


def test_the_torch_bi_encoder_is_an_encoder(tiny_encoder: BiEncoder) -> None:
    check(tiny_encoder)
    assert tiny_encoder.runtime == "torch"


def test_the_exported_query_encoder_is_an_encoder(
    tiny_encoder: BiEncoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openvino_tiny_model
) -> None:
    ov = pytest.importorskip("openvino", reason="openvino is not installed (cpu-runtime extra)")
    from semsearch.models.exported_query_encoder import ExportedQueryEncoder
    from semsearch.models.openvino_runtime import export_for_queries

    monkeypatch.setenv("SEMSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(ov, "convert_model", lambda *args, **kwargs: openvino_tiny_model)
    assert export_for_queries(tiny_encoder)
    exported = ExportedQueryEncoder.open(tiny_encoder.spec, threads=1)
    check(exported)
    assert exported.runtime.startswith("openvino")


def test_what_is_not_an_encoder_is_told_apart() -> None:
    assert not isinstance(object(), Encoder)
