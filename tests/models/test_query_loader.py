"""Where no checked export serves a query, the full torch encoder does: the index's vectors,
and nothing cached for `--runtime torch` (the TorchScript trace cache is gone)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from models.odd_texts import ODD_TEXTS

from semsearch.models.bi_encoder import BiEncoder
from semsearch.models.query_loader import open_for_queries

TEXTS = ODD_TEXTS


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SEMSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_runtime_torch_is_the_full_encoder_and_caches_nothing(cache, tiny_encoder) -> None:
    for _ in range(2):  # the second query is not served from anything the first one wrote
        encoder = open_for_queries(tiny_encoder.spec, "cpu", "torch")
        assert isinstance(encoder, BiEncoder) and encoder.runtime == "torch"
        np.testing.assert_allclose(encoder.encode(TEXTS), tiny_encoder.encode(TEXTS), atol=1e-6)
    assert not cache.exists()


def test_without_openvino_auto_is_the_full_torch_encoder(cache, tiny_encoder, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)  # as if it were not installed
    encoder = open_for_queries(tiny_encoder.spec, "cpu", "auto")
    assert isinstance(encoder, BiEncoder) and encoder.runtime == "torch"
    np.testing.assert_allclose(encoder.encode(TEXTS), tiny_encoder.encode(TEXTS), atol=1e-6)
    assert not cache.exists()
