"""int8 quantisation: close to fp32, independent of the batch, recorded in the index, refused
where it can't run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semsearch.errors import SemsearchError
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.models import BiEncoder
from semsearch.models.quantize import Int8Linear, quantize_int8
from semsearch.search.searcher import Searcher

LONG_TEXTS = [
    "GNU Make is a utility which controls the generation of executables and other target "
    "files of a program from the program's source files, rebuilding only what changed. " * 3,
    "This package contains the header files and static libraries needed to compile "
    "programs that use the library; install it only if you build software yourself.",
]


@pytest.fixture(scope="module")
def int8_default() -> BiEncoder:
    return BiEncoder.load("default", device="cpu", quantization="int8")


def test_int8_vectors_stay_close_to_fp32_on_the_default_model(
    default_encoder, int8_default, sentences
) -> None:
    exact, approximate = default_encoder.encode(sentences), int8_default.encode(sentences)
    cosines = (exact * approximate).sum(axis=1)
    assert cosines.min() > 0.995  # torch's per-batch activation scale gave 0.92-0.98
    # The neighbours a user sees do not change: each sentence's nearest other sentence.
    nearest = [
        np.argsort(-(m @ m.T - 2 * np.eye(len(m))), axis=1)[:, 0] for m in (exact, approximate)
    ]
    assert np.mean(nearest[0] == nearest[1]) == 1.0
    assert not any(isinstance(m, torch.nn.Linear) for m in int8_default.transformer.modules())
    assert any(isinstance(m, Int8Linear) for m in int8_default.transformer.modules())


def test_a_texts_vector_does_not_depend_on_its_batch(int8_default, sentences) -> None:
    alone = np.concatenate([int8_default.encode([text]) for text in sentences])
    mixed = sentences[::-1] + LONG_TEXTS  # other neighbours, and padding to the long texts
    for batch_size in (2, 5, len(mixed)):
        batched = int8_default.encode(mixed, batch_size=batch_size)[: len(sentences)][::-1]
        cosines = (alone * batched).sum(axis=1)
        # Not bit-equal: fp32 attention sums over the padded length in another order, and a
        # last-bit change can flip a rounding. torch's per-batch scale gave 0.92-0.97 here.
        assert cosines.min() >= 0.9998 and cosines.mean() >= 0.9999


def test_loading_twice_gives_the_same_encoder(tiny_model_dir, sentences) -> None:
    first, second = (
        BiEncoder.load(str(tiny_model_dir), device="cpu", quantization="int8").encode(sentences)
        for _ in range(2)
    )
    np.testing.assert_array_equal(first, second)  # calibration is fixed, not sampled


def test_unknown_quantisation_and_gpu_are_refused(tiny_model_dir) -> None:
    with pytest.raises(SemsearchError, match="unknown quantisation 'int4'"):
        BiEncoder.load(str(tiny_model_dir), device="cpu", quantization="int4")
    with pytest.raises(SemsearchError, match="CPU only"):
        quantize_int8(torch.nn.Linear(2, 2), lambda: None, torch.device("cuda"))


def test_an_int8_index_is_queried_by_an_int8_encoder(tmp_path, tiny_model_dir, corpus_file) -> None:
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
