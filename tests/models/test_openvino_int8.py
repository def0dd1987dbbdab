"""The int8 encoder on OpenVINO stays within its bar of torch fp32, gives a text the same
vector alone or in a batch, rebuilds a tampered cache entry, and where it cannot run refuses
in one line (there is no other int8 to fall back on)."""

from __future__ import annotations

import logging
import shutil
import sys

import numpy as np
import pytest
from models.odd_texts import ODD_TEXTS

from semsearch.errors import SemsearchError
from semsearch.models import openvino_int8
from semsearch.models.bi_encoder import BiEncoder
from semsearch.models.exported_query_encoder import export_path
from semsearch.models.openvino_int8 import (
    BUILTIN_CALIBRATION,
    MIN_COSINE,
    MIN_MEAN_COSINE,
    calibration_sample,
    quantized_path,
)
from semsearch.models.openvino_runtime import cosine_agreement

ov = pytest.importorskip("openvino", reason="openvino is not installed (the cpu-runtime extra)")
pytest.importorskip("nncf", reason="nncf is not installed (the cpu-runtime extra)")

TEXTS = ODD_TEXTS
LOGGER = "semsearch.models.openvino_int8"


@pytest.fixture(autouse=True)
def quantisations(monkeypatch: pytest.MonkeyPatch, openvino_tiny_model) -> list[int]:
    """Counts NNCF runs (each one a cache miss); the export returns a copy of the model
    converted once, to keep the tests fast."""
    monkeypatch.setattr(ov, "convert_model", lambda *a, **k: openvino_tiny_model.clone())
    calls: list[int] = []
    quantize = openvino_int8._quantize

    def counting(*args, **kwargs):
        calls.append(1)
        return quantize(*args, **kwargs)

    monkeypatch.setattr(openvino_int8, "_quantize", counting)
    return calls


def _load(folder, **kwargs) -> BiEncoder:
    return BiEncoder.load(
        str(folder), device="cpu", quantization="int8", runtime="openvino", **kwargs
    )


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("semsearch") and r.levelno >= logging.WARNING
    ]


def test_int8_vectors_are_within_the_bar_and_batch_independent(tiny_model_dir, tiny_encoder):
    encoder = _load(tiny_model_dir)
    assert encoder.runtime == "openvino-int8" and encoder.spec.quantization == "int8"
    got = encoder.encode(TEXTS)
    mean, least = cosine_agreement(got, tiny_encoder.encode(TEXTS))
    assert mean >= MIN_MEAN_COSINE and least >= MIN_COSINE, (mean, least)
    assert not np.allclose(got, tiny_encoder.encode(TEXTS), atol=1e-5), "int8, not fp32"
    alone = np.concatenate([encoder.encode([text]) for text in TEXTS])
    assert cosine_agreement(alone, got)[1] >= 0.9998
    np.testing.assert_array_equal(encoder.encode(TEXTS, precision="fp32"), got)


def test_the_cache_is_keyed_by_calibration_and_reused(tiny_model_dir, quantisations) -> None:
    _load(tiny_model_dir)
    quantisations.clear()
    encoder = _load(tiny_model_dir)
    assert quantisations == [], "the same calibration is taken from the cache"
    path = quantized_path(encoder, ov.get_version(), calibration_sample(None))
    for file in (path, path.with_suffix(".bin")):
        assert file.with_name(file.name + ".record.json").is_file()
    other = _load(tiny_model_dir, calibration=["a corpus text", "another one, longer"])
    assert quantisations == [1] and other.runtime == "openvino-int8"
    assert calibration_sample(["  ", *["t"] * 500]) == ["t"] * openvino_int8.MAX_CALIBRATION_TEXTS
    assert calibration_sample([" "]) == list(BUILTIN_CALIBRATION)


def _entries(encoder: BiEncoder) -> tuple:
    """The cache's fp32 export of `encoder` and its int8 IR on the built-in calibration."""
    version = ov.get_version()
    return export_path(encoder.spec, version), quantized_path(
        encoder, version, calibration_sample(None)
    )


@pytest.mark.parametrize("damage", ["bin", "xml"])
def test_a_tampered_entry_is_quantised_again(
    tiny_model_dir, tmp_path, monkeypatch, quantisations, caplog, damage
) -> None:
    encoder = _load(tiny_model_dir)  # quantised once a session, in the session's cache
    expected = encoder.encode(TEXTS)
    originals = _entries(encoder)
    monkeypatch.setenv("SEMSEARCH_CACHE_DIR", str(tmp_path))
    for original, copy in zip(originals, _entries(encoder)):  # both in a cache of its own
        copy.parent.mkdir(parents=True)
        for file in original.parent.glob(original.stem + ".*"):
            if file.is_file():  # not the compiled copies' folder (exported_query_encoder)
                shutil.copy(file, copy.parent / file.name)
    path = _entries(encoder)[1]
    target = path if damage == "xml" else path.with_suffix(".bin")
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    quantisations.clear()
    with caplog.at_level(logging.WARNING):
        encoder = _load(tiny_model_dir)
    assert quantisations == [1], "the damaged entry is quantised again, not loaded"
    assert len(_warnings(caplog)) == 1 and "quantising again" in _warnings(caplog)[0]
    np.testing.assert_allclose(encoder.encode(TEXTS), expected, atol=1e-6)


def test_without_nncf_one_line(tiny_model_dir, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "nncf", None)  # `import nncf` raises ImportError
    with pytest.raises(SemsearchError, match="nncf is missing: install the cpu-runtime extra"):
        _load(tiny_model_dir)


def test_a_model_that_disagrees_is_refused(tiny_model_dir, monkeypatch, caplog) -> None:
    infer = openvino_int8.OpenVinoEncoder.__module__  # the shared `_infer` lives there
    module = sys.modules[infer]
    real = module._infer
    monkeypatch.setattr(module, "_infer", lambda r, i, m: real(r, i, m)[::-1].copy())
    with caplog.at_level(logging.WARNING), pytest.raises(SemsearchError, match="did not pass"):
        _load(tiny_model_dir)
    assert any("disagrees with torch" in m and "int8 cannot run" in m for m in _warnings(caplog))
