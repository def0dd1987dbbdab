"""Compiling the encoder for queries: same vectors, inference only."""

from __future__ import annotations

import numpy as np
import pytest

from semsearch.errors import SemsearchError
from semsearch.models import BiEncoder


@pytest.mark.slow  # torch.compile: about half a minute
def test_a_compiled_encoder_gives_the_same_vectors(tiny_model_dir, sentences, tmp_path) -> None:
    eager = BiEncoder.load(str(tiny_model_dir), device="cpu")
    expected_one, expected_all = eager.encode(sentences[:1]), eager.encode(sentences)
    compiled = BiEncoder.load(str(tiny_model_dir), device="cpu").compile_for_queries()
    assert compiled.compile_for_queries() is compiled  # compiling twice is a no-op
    np.testing.assert_allclose(compiled.encode(sentences[:1]), expected_one, atol=1e-5)
    np.testing.assert_allclose(compiled.encode(sentences), expected_all, atol=1e-5)
    assert compiled.dimension == eager.dimension
    with pytest.raises(SemsearchError, match="compiled encoder cannot be saved"):
        compiled.save(tmp_path / "saved")


def test_only_the_fp32_cpu_encoder_compiles(tiny_model_dir) -> None:
    pytest.importorskip("nncf", reason="int8 runs on OpenVINO and NNCF (the cpu-runtime extra)")
    quantised = BiEncoder.load(str(tiny_model_dir), device="cpu", quantization="int8")
    with pytest.raises(SemsearchError, match="fp32 encoder on CPU"):
        quantised.compile_for_queries()
