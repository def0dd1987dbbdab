"""int8 dynamic quantisation: close vectors, recorded in the index, refused where it can't run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semsearch.errors import SemsearchError
from semsearch.index.build import BuildOptions, build_index
from semsearch.models import BiEncoder
from semsearch.models.quantize import quantize_dynamic_int8
from semsearch.search import Searcher


def test_int8_vectors_stay_close_to_fp32_on_the_default_model(default_encoder, sentences) -> None:
    quantised = BiEncoder.load("default", device="cpu", quantization="int8")
    exact, approximate = default_encoder.encode(sentences), quantised.encode(sentences)
    cosines = (exact * approximate).sum(axis=1)
    assert cosines.min() > 0.95  # per-tensor weight scales gave 0.83-0.89 on real text
    # The neighbours a user sees barely change: each sentence's nearest other sentence.
    nearest = [
        np.argsort(-(m @ m.T - 2 * np.eye(len(m))), axis=1)[:, 0] for m in (exact, approximate)
    ]
    assert np.mean(nearest[0] == nearest[1]) >= 0.8
    assert not any(isinstance(m, torch.nn.Linear) for m in quantised.transformer.modules())


def test_unknown_quantisation_and_gpu_are_refused(tiny_model_dir) -> None:
    with pytest.raises(SemsearchError, match="unknown quantisation 'int4'"):
        BiEncoder.load(str(tiny_model_dir), device="cpu", quantization="int4")
    with pytest.raises(SemsearchError, match="CPU only"):
        quantize_dynamic_int8(torch.nn.Linear(2, 2), torch.device("cuda"))


def test_an_int8_index_is_queried_by_an_int8_encoder(tmp_path, tiny_model_dir, corpus_file) -> None:
    options = BuildOptions(corpus=corpus_file, name="q", out_dir=tmp_path, model=str(tiny_model_dir),
                           device="cpu", quantization="int8", show_progress=False)  # fmt: skip
    folder = build_index(options)
    assert folder.manifest().model.quantization == "int8"
    searcher = Searcher(folder, device="cpu")
    assert searcher.encoder.quantization == "int8"
    assert searcher.search(["a cat"], k=1)[0][0].rank == 1
    with pytest.raises(SemsearchError, match="built by the int8 encoder, this one is fp32"):
        Searcher(folder, encoder=BiEncoder.load(str(tiny_model_dir), device="cpu"))
    with pytest.raises(SemsearchError, match="cannot be saved"):
        searcher.encoder.save(tmp_path / "saved")
