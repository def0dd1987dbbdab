"""The traced query encoder gives the full encoder's vectors, and is used only when it may be."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from models.odd_texts import ODD_TEXTS

from semsearch.models.bi_encoder import BiEncoder
from semsearch.models.model_folder import resolve_model
from semsearch.models.query_encoder import (
    QueryEncoder,
    TraceKey,
    encoder_for_queries,
    save_trace,
)

TEXTS = ODD_TEXTS


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SEMSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SEMSEARCH_NO_TRACE", raising=False)
    return tmp_path / "cache"


def _key(encoder: BiEncoder) -> TraceKey:
    return TraceKey(resolve_model(encoder.name), encoder.spec)


def test_traced_vectors_equal_the_full_encoders(cache, tiny_encoder) -> None:
    assert save_trace(tiny_encoder, _key(tiny_encoder))
    traced = QueryEncoder.open(_key(tiny_encoder))
    assert traced is not None and traced.spec == tiny_encoder.spec
    expected = tiny_encoder.encode(TEXTS)
    # Alone, in one batch and in batches of two: a text's vector does not depend on its batch.
    for got in (traced.encode(TEXTS), traced.encode(TEXTS, batch_size=2),
                np.concatenate([traced.encode([text]) for text in TEXTS])):  # fmt: skip
        np.testing.assert_allclose(got, expected, atol=1e-5)


@pytest.mark.slow
def test_traced_default_model_equals_the_full_one(cache, default_encoder) -> None:
    assert save_trace(default_encoder, _key(default_encoder))
    traced = QueryEncoder.open(_key(default_encoder))
    np.testing.assert_allclose(traced.encode(TEXTS), default_encoder.encode(TEXTS), atol=1e-5)


def test_first_load_traces_and_the_next_uses_the_trace(cache, tiny_encoder) -> None:
    first = encoder_for_queries(tiny_encoder.spec, "cpu")
    second = encoder_for_queries(tiny_encoder.spec, "cpu")
    assert isinstance(first, BiEncoder) and isinstance(second, QueryEncoder)
    np.testing.assert_allclose(second.encode(TEXTS[:3]), first.encode(TEXTS[:3]), atol=1e-5)


def test_changed_weights_are_traced_again(cache, tiny_encoder) -> None:
    encoder_for_queries(tiny_encoder.spec, "cpu")
    weights = next(Path(tiny_encoder.name).glob("*.safetensors"))
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    try:
        assert isinstance(encoder_for_queries(tiny_encoder.spec, "cpu"), BiEncoder)
    finally:
        os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_other_settings_get_their_own_trace(cache, tiny_encoder) -> None:
    encoder_for_queries(tiny_encoder.spec, "cpu")
    max_pooled = BiEncoder.load(tiny_encoder.name, pooling="max", device="cpu")
    assert isinstance(encoder_for_queries(max_pooled.spec, "cpu"), BiEncoder)


def test_damaged_cache_falls_back_to_the_full_encoder(cache, tiny_encoder) -> None:
    encoder_for_queries(tiny_encoder.spec, "cpu")
    key = _key(tiny_encoder)
    key.module_path.write_bytes(b"not a torchscript archive")
    encoder = encoder_for_queries(tiny_encoder.spec, "cpu")
    assert isinstance(encoder, BiEncoder)  # and it traced a good copy again
    assert isinstance(encoder_for_queries(tiny_encoder.spec, "cpu"), QueryEncoder)


def test_switched_off(cache, tiny_encoder, monkeypatch) -> None:
    monkeypatch.setenv("SEMSEARCH_NO_TRACE", "1")
    encoder_for_queries(tiny_encoder.spec, "cpu")
    assert isinstance(encoder_for_queries(tiny_encoder.spec, "cpu"), BiEncoder)
    assert not cache.exists()


def test_a_foreign_trace_in_the_cache_is_never_loaded(cache, tiny_encoder, caplog) -> None:
    """Another module of the same signature (a max-pooled trace of the same model), copied
    over an entry with its record, is detected by hash and traced again: vectors unchanged."""
    expected = tiny_encoder.encode(TEXTS[:3])
    assert save_trace(tiny_encoder, _key(tiny_encoder))
    max_pooled = BiEncoder.load(tiny_encoder.name, pooling="max", device="cpu")
    assert save_trace(max_pooled, _key(max_pooled))
    entry, foreign = _key(tiny_encoder).module_path, _key(max_pooled).module_path
    for suffix in ("", ".record.json"):
        if Path(f"{foreign}{suffix}").is_file():
            shutil.copyfile(f"{foreign}{suffix}", f"{entry}{suffix}")
    with caplog.at_level("WARNING"):
        encoder = encoder_for_queries(tiny_encoder.spec, "cpu")
    np.testing.assert_allclose(encoder.encode(TEXTS[:3]), expected, atol=1e-5)
    assert isinstance(encoder, BiEncoder)  # the full encoder, tracing a good copy again
    assert [r.message.count("\n") for r in caplog.records if "traced encoder" in r.message] == [0]
    again = encoder_for_queries(tiny_encoder.spec, "cpu")  # traced afresh, and trusted
    assert isinstance(again, QueryEncoder)
    np.testing.assert_allclose(again.encode(TEXTS[:3]), expected, atol=1e-5)


def test_a_trace_swapped_without_its_record_is_never_loaded(cache, tiny_encoder) -> None:
    expected = tiny_encoder.encode(TEXTS[:3])
    assert save_trace(tiny_encoder, _key(tiny_encoder))
    max_pooled = BiEncoder.load(tiny_encoder.name, pooling="max", device="cpu")
    assert save_trace(max_pooled, _key(max_pooled))
    shutil.copyfile(_key(max_pooled).module_path, _key(tiny_encoder).module_path)
    assert QueryEncoder.open(_key(tiny_encoder)) is None
    encoder = encoder_for_queries(tiny_encoder.spec, "cpu")
    np.testing.assert_allclose(encoder.encode(TEXTS[:3]), expected, atol=1e-5)
