"""The OpenVINO runtime gives torch's vectors within the faithfulness bar, reuses its checked
cache, and leaves the encoder on torch (in one log line) wherever it cannot be trusted."""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from models.odd_texts import ODD_TEXTS

from semsearch.errors import SemsearchError
from semsearch.models import openvino_runtime
from semsearch.models.bi_encoder import BiEncoder, resolve_runtime
from semsearch.models.exported_query_encoder import export_path
from semsearch.models.openvino_runtime import MIN_COSINE, MIN_MEAN_COSINE, cosine_agreement

ov = pytest.importorskip("openvino", reason="openvino is not installed (the cpu-runtime extra)")

TEXTS = ODD_TEXTS
LOGGER = "semsearch.models.openvino_runtime"


@pytest.fixture(autouse=True)
def exports(monkeypatch: pytest.MonkeyPatch, openvino_tiny_model) -> list[int]:
    """Counts the conversions (each is an export, not a cache hit); each returns the model
    converted once, to keep the tests fast."""
    calls: list[int] = []

    def counting(*args, **kwargs):
        calls.append(1)
        return openvino_tiny_model

    monkeypatch.setattr(ov, "convert_model", counting)
    return calls


def _load(folder: Path) -> BiEncoder:
    return BiEncoder.load(str(folder), device="cpu", runtime="openvino")


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING
    ]


def _assert_faithful(got: np.ndarray, expected: np.ndarray) -> None:
    mean, least = cosine_agreement(got, expected)
    assert mean >= MIN_MEAN_COSINE and least >= MIN_COSINE, (mean, least)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "auto"])
def test_vectors_are_within_the_bar_of_torchs(tiny_model_dir, tiny_encoder, precision) -> None:
    encoder = _load(tiny_model_dir)
    assert encoder.runtime.startswith("openvino-")
    expected = tiny_encoder.encode(TEXTS)
    got = encoder.encode(TEXTS, precision=precision)
    _assert_faithful(got, expected)
    if precision == "fp32":
        np.testing.assert_allclose(got, expected, atol=1e-5)
    # A text's vector is the same alone and in a padded batch.
    _assert_faithful(np.concatenate([encoder.encode([t], precision=precision) for t in TEXTS]), got)


def test_the_cache_is_reused_and_recorded(tiny_model_dir, exports) -> None:
    first = _load(tiny_model_dir)  # exports unless an earlier test did
    exports.clear()
    second = _load(tiny_model_dir)
    assert exports == [] and second.runtime == first.runtime
    path = export_path(second.spec, ov.get_version())
    for file in (path, path.with_suffix(".bin")):
        assert file.is_file() and file.with_name(file.name + ".record.json").is_file()


@pytest.mark.parametrize("damage", ["bin", "xml", "record"])
def test_a_tampered_cache_entry_is_rebuilt(
    tiny_model_dir, tmp_path, monkeypatch, exports, caplog, damage
) -> None:
    original = export_path(_load(tiny_model_dir).spec, ov.get_version())
    expected = _load(tiny_model_dir).encode(TEXTS)
    monkeypatch.setenv("SEMSEARCH_CACHE_DIR", str(tmp_path))
    copy = export_path(
        BiEncoder.load(str(tiny_model_dir), device="cpu", runtime="torch").spec, ov.get_version()
    )
    copy.parent.mkdir(parents=True)
    for file in original.parent.glob(original.stem + ".*"):
        if not file.is_file():
            continue  # the compiled copies' folder (exported_query_encoder)
        shutil.copy(file, copy.parent / file.name)
    target = {
        "bin": copy.with_suffix(".bin"),
        "xml": copy,
        "record": copy.with_name(copy.name + ".record.json"),
    }[damage]
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    exports.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        encoder = _load(tiny_model_dir)
    assert exports == [1], "the damaged entry is exported again"
    assert len(_warnings(caplog)) == 1 and "exporting it again" in _warnings(caplog)[0]
    assert encoder.runtime.startswith("openvino-")
    np.testing.assert_allclose(encoder.encode(TEXTS), expected, atol=1e-6)
    exports.clear()
    _load(tiny_model_dir)
    assert exports == [], "the rebuilt entry passes its check"


def _assert_on_torch(encoder: BiEncoder, reference: BiEncoder, caplog, words: str) -> None:
    assert encoder.runtime == "torch"
    messages = _warnings(caplog)
    assert len(messages) == 1 and words in messages[0], messages
    np.testing.assert_array_equal(encoder.encode(TEXTS), reference.encode(TEXTS))


def test_an_export_failure_falls_back_to_torch(
    tiny_model_dir, tiny_encoder, tmp_path, monkeypatch, caplog
) -> None:
    monkeypatch.setenv("SEMSEARCH_CACHE_DIR", str(tmp_path))

    def broken(*args, **kwargs):
        raise RuntimeError("unsupported operation aten::something\nmore detail")

    monkeypatch.setattr(ov, "convert_model", broken)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        encoder = _load(tiny_model_dir)
    _assert_on_torch(encoder, tiny_encoder, caplog, "could not export")
    assert not (tmp_path / "openvino").exists() or not any((tmp_path / "openvino").iterdir())


def test_a_model_that_disagrees_falls_back_to_torch(
    tiny_model_dir, tiny_encoder, monkeypatch, caplog
) -> None:
    infer = openvino_runtime._infer

    def wrong(request, input_ids, attention_mask):
        vectors = infer(request, input_ids, attention_mask)
        return vectors[::-1].copy()  # plausible vectors, for the wrong texts

    monkeypatch.setattr(openvino_runtime, "_infer", wrong)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        encoder = _load(tiny_model_dir)
    _assert_on_torch(encoder, tiny_encoder, caplog, "disagrees with torch")


def test_without_openvino_the_encoder_runs_torch(
    tiny_model_dir, tiny_encoder, monkeypatch, caplog
) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)  # `import openvino` raises ImportError
    with caplog.at_level(logging.INFO, logger=LOGGER):
        encoder = _load(tiny_model_dir)
    _assert_on_torch(encoder, tiny_encoder, caplog, "not installed")


def test_changed_weights_move_the_encoder_back_to_torch(tiny_model_dir, caplog) -> None:
    encoder = _load(tiny_model_dir)
    with torch.no_grad():
        encoder.transformer.pooler.dense.weight.mul_(1.0)  # same values, a new version
        encoder.transformer.embeddings.word_embeddings.weight[:, 0] += 1.0
    reference = BiEncoder.load(str(tiny_model_dir), device="cpu", runtime="torch")
    reference.load_state_dict(encoder.state_dict())
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        got = encoder.encode(TEXTS)
        encoder.encode(TEXTS)
    assert len(_warnings(caplog)) == 1 and "weights changed" in _warnings(caplog)[0]
    np.testing.assert_array_equal(got, reference.encode(TEXTS))


def test_packed_batches_run_on_torch(tiny_model_dir, tiny_encoder) -> None:
    encoder = _load(tiny_model_dir)
    np.testing.assert_allclose(
        encoder.encode(TEXTS, packing=True), tiny_encoder.encode(TEXTS, packing=True), atol=1e-6
    )


def test_an_unknown_runtime_is_refused(tiny_model_dir) -> None:
    with pytest.raises(SemsearchError, match="unknown runtime"):
        BiEncoder.load(str(tiny_model_dir), device="cpu", runtime="onnx")  # type: ignore[arg-type]


def test_auto_is_openvino_on_a_cpu_and_torch_on_a_gpu() -> None:
    assert resolve_runtime("auto", torch.device("cpu")) == "openvino"
    assert resolve_runtime("auto", torch.device("cuda", 0)) == "torch"
    assert resolve_runtime("torch", torch.device("cpu")) == "torch"


@pytest.mark.default_runtime
def test_the_default_load_and_build_run_openvino(tiny_model_dir, tiny_encoder, tmp_path) -> None:
    from semsearch.ingest.build import build_index
    from semsearch.ingest.build_options import BuildOptions

    encoder = BiEncoder.load(str(tiny_model_dir), device="cpu")  # runtime="auto"
    assert encoder.runtime.startswith("openvino-")
    _assert_faithful(encoder.encode(TEXTS), tiny_encoder.encode(TEXTS))
    options = BuildOptions(
        corpus=_corpus(tmp_path),
        model=str(tiny_model_dir),
        device="cpu",
        out_dir=tmp_path / "idx",
        show_progress=False,
        lexical=None,
    )
    assert build_index(options).manifest().operation["runtime"] == encoder.runtime


@pytest.mark.default_runtime
def test_int8_by_default_runs_on_openvino_int8(tiny_model_dir, exports) -> None:
    """`--quantize int8` has one path: the NNCF-quantised export, with `auto` too."""
    pytest.importorskip("nncf", reason="nncf is not installed (the cpu-runtime extra)")
    encoder = BiEncoder.load(str(tiny_model_dir), device="cpu", quantization="int8")
    assert encoder.runtime == "openvino-int8" and encoder.quantization == "int8"


def _corpus(folder: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": list(TEXTS)}), folder / "corpus.parquet")
    return folder / "corpus.parquet"


def test_an_index_built_on_one_runtime_answers_on_the_other(tiny_model_dir, tmp_path) -> None:
    """recall@10 >= 0.99 between the runtimes, both ways: the index records no runtime."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from semsearch.ingest.build import build_index
    from semsearch.ingest.build_options import BuildOptions
    from semsearch.search.searcher import Searcher

    words = [
        "cat",
        "dog",
        "guitar",
        "python",
        "linux",
        "bank",
        "stock",
        "river",
        "music",
        "file",
        "data",
        "fast",
        "slow",
        "red",
    ]
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, size=int(rng.integers(2, 12)))) for _ in range(300)]
    pq.write_table(pa.table({"text": texts}), tmp_path / "c.parquet")
    torch_encoder = BiEncoder.load(str(tiny_model_dir), device="cpu")
    on_openvino = _load(tiny_model_dir)
    queries = texts[:40]
    found = {}
    for name, builder in (("torch", torch_encoder), ("openvino", on_openvino)):
        options = BuildOptions(
            corpus=tmp_path / "c.parquet",
            name=name,
            model=str(tiny_model_dir),
            index="flat",
            out_dir=tmp_path / "idx",
            show_progress=False,
            lexical=None,
            target_recall=None,
        )
        folder = build_index(options, encoder=builder)
        assert folder.manifest().operation["runtime"] == builder.runtime
        for querier in (torch_encoder, on_openvino):
            hits = Searcher(folder, encoder=querier).search(queries, k=10)
            found[name, querier.runtime] = [{h.id for h in row} for row in hits]
    reference = found["torch", "torch"]
    for key, rows in found.items():
        recall = np.mean([len(a & b) / 10 for a, b in zip(rows, reference)])
        assert recall >= 0.99, (key, recall)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_default_model_is_faithful_on_openvino(
    default_encoder, monkeypatch, openvino_tiny_model, precision
) -> None:
    """The real model, really converted (seconds), in both precisions."""
    monkeypatch.undo()  # the real convert_model, not the tiny model's
    encoder = BiEncoder.load("default", device="cpu", runtime="openvino")
    texts = TEXTS + [f"package {i}: a library for {w}" for i, w in enumerate(TEXTS[1:4])]
    _assert_faithful(encoder.encode(texts, precision=precision), default_encoder.encode(texts))
