"""Packed encoding against the padded path: the same vectors for BERT and MPNet in every
pooling mode, texts whole and in order, and a clear refusal of models it does not support."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer, DistilBertConfig, DistilBertModel, MPNetConfig, MPNetModel

from semsearch.errors import SemsearchError
from semsearch.models import BiEncoder
from semsearch.models.packing import block_mask, plan_rows

# Mixed lengths: one word, sentences, and texts long enough to be cut at the max length.
TEXTS = [
    "guitar",
    "A man is playing a guitar on a small stage tonight.",
    "The cat sleeps.",
    " ".join(["a long description of a package that keeps going"] * 30),
    "Fast JSON decoding for Python programs.",
    "x",
    " ".join(["compress folders into archives"] * 12),
    "Stock markets fell sharply on Monday, and shares dropped at the start of the week.",
] * 3


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def tiny_mpnet_dir(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    """A 2-layer MPNet with random weights (relative position buckets, positions after the
    padding index) and the tiny BERT's tokenizer."""
    folder = tmp_path_factory.mktemp("tiny-mpnet")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = MPNetConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
    )
    torch.manual_seed(0)
    MPNetModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("family", ["bert", "mpnet"])
@pytest.mark.parametrize("pooling", ["mean", "max", "cls", "attention"])
def test_packed_vectors_are_the_padded_ones(
    family, pooling, tiny_model_dir, tiny_mpnet_dir
) -> None:
    folder = tiny_model_dir if family == "bert" else tiny_mpnet_dir
    encoder = BiEncoder.load(str(folder), pooling=pooling, max_length=64, device="cpu")
    if encoder.pooling.scorer is not None:  # a trained-looking scorer, not the zero start
        torch.nn.init.normal_(encoder.pooling.scorer.weight, std=0.5)
    padded = encoder.encode(TEXTS, batch_size=5)
    packed = encoder.encode(TEXTS, batch_size=5, packing=True)
    cosines = _cosines(padded, packed)
    assert cosines.mean() >= 0.999 and cosines.min() >= 0.995
    np.testing.assert_allclose(packed, padded, atol=1e-5)  # fp32: the same up to rounding
    assert encoder.truncation.cut > 0  # the long texts were cut, and still match


def test_packed_batches_of_one_row_each_still_match(tiny_encoder) -> None:
    padded = tiny_encoder.encode(TEXTS)
    packed = tiny_encoder.encode(TEXTS, packing=True, max_batch_tokens=1)  # one row per batch
    np.testing.assert_allclose(packed, padded, atol=1e-5)


def test_packing_is_refused_for_models_it_does_not_support(tmp_path, tiny_model_dir) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = DistilBertConfig(
        vocab_size=tokenizer.vocab_size, dim=32, n_layers=1, n_heads=2, hidden_dim=64
    )
    DistilBertModel(config).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    encoder = BiEncoder.load(str(tmp_path), device="cpu")
    with pytest.raises(SemsearchError, match="packing supports BERT and MPNet.*without packing"):
        encoder.encode(["a text"], packing=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 64), max_size=80), st.integers(64, 160))
def test_a_plan_keeps_every_text_whole_once_and_rows_within_width(lengths, width) -> None:
    lengths = np.array(lengths, dtype=np.int64)
    rows = plan_rows(lengths, width)
    placed = sorted(member for row in rows for member in row)
    assert placed == list(range(len(lengths)))
    assert all(sum(int(lengths[m]) for m in row) <= width for row in rows)
    # Nearly full: no two rows could have been merged.
    used = sorted(sum(int(lengths[m]) for m in row) for row in rows)
    assert len(used) < 2 or used[0] + used[1] > width or len(rows) <= 2


def test_the_mask_keeps_each_text_to_itself_and_padding_to_itself() -> None:
    segments = torch.tensor([[0, 0, 1, -1]])
    allowed = block_mask(segments, "sdpa", torch.float32)[0, 0]
    expected = torch.tensor(
        [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=torch.bool
    )
    assert torch.equal(allowed, expected)
    additive = block_mask(segments, "eager", torch.float32)[0, 0]
    assert torch.equal(additive == 0, expected)


def test_copies_to_a_gpu_are_page_locked_and_do_not_block(monkeypatch) -> None:
    """Checked on CPU tensors: what is pinned, and how it is copied, when the device is CUDA."""
    from semsearch.models import packing

    pinned, copies = [], []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: pinned.append(self.shape) or self)
    monkeypatch.setattr(
        torch.Tensor,
        "to",
        lambda self, device, non_blocking=False: copies.append((str(device), non_blocking)) or self,
    )
    on_gpu = packing.to_device(np.arange(5), torch.device("cuda"))
    assert on_gpu.tolist() == list(range(5))
    assert pinned == [(5,)] and copies == [("cuda", True)]
    pinned.clear()
    batches = list(
        packing.packed_batches(
            ["a b", "c"], lambda t: [[1, 2]] * len(t), 0, 8, 64, 0, pin_memory=True
        )
    )
    assert len(pinned) == 3 * len(batches)  # input ids, positions and segments of each batch
    pinned.clear()
    copies.clear()
    assert packing.to_device(np.arange(3), torch.device("cpu")).tolist() == [0, 1, 2]
    list(packing.packed_batches(["a"], lambda t: [[1]] * len(t), 0, 8, 64, 0))
    assert pinned == [] and copies == [("cpu", False)]  # the CPU path pins nothing


def _reference_varlen(query, key, value, cu_q, cu_k, max_q, max_k, scale=None):
    """What torch's CUDA-only varlen kernel computes, on CPU: each span attends to itself."""
    assert cu_q.dtype == torch.int32 and cu_q[0] == 0 and cu_q[-1] == len(query)
    assert int((cu_q[1:] - cu_q[:-1]).max()) == max_q
    output = torch.empty_like(query)
    for low, high in zip(cu_q[:-1].tolist(), cu_q[1:].tolist()):
        span = [states[low:high].transpose(0, 1) for states in (query, key, value)]
        output[low:high] = torch.nn.functional.scaled_dot_product_attention(
            *span, scale=scale
        ).transpose(0, 1)
    return output


def test_the_varlen_path_needs_no_mask_and_gives_the_padded_vectors(
    tiny_model_dir, monkeypatch
) -> None:
    """The CUDA path (no mask, cu_seqlens) run on CPU with a reference kernel in place of
    torch's: the layout, the bounds and the transformers plumbing are what is checked."""
    from semsearch.models import packing

    calls = []
    monkeypatch.setattr(packing, "VARLEN_DEVICES", ("cpu",))
    monkeypatch.setattr(packing, "VARLEN_DTYPES", (torch.float32,))
    monkeypatch.setattr(
        packing,
        "varlen_kernel",
        lambda: lambda *a, **k: calls.append(1) or _reference_varlen(*a, **k),
    )
    monkeypatch.setattr(packing, "block_mask", lambda *a: pytest.fail("a dense mask was built"))
    encoder = BiEncoder.load(str(tiny_model_dir), max_length=64, device="cpu")
    padded = encoder.encode(TEXTS, batch_size=5)
    packed = encoder.encode(TEXTS, batch_size=5, packing=True)
    assert calls  # every layer of every packed batch took the varlen kernel
    np.testing.assert_allclose(packed, padded, atol=1e-5)
    # The same model still answers padded batches (queries) through SDPA, unchanged.
    calls.clear()
    np.testing.assert_allclose(encoder.encode(TEXTS, batch_size=5), padded, atol=1e-6)
    assert calls == []


def test_sequence_bounds_cover_every_text_and_each_row_end() -> None:
    from semsearch.models.packing import pack, plan_rows, sequence_bounds

    token_ids = [[1] * n for n in (5, 3, 2, 7, 1)]
    lengths = np.array([len(ids) for ids in token_ids])
    plan = plan_rows(lengths, 8)
    batch = pack(token_ids, np.arange(5), plan, 8, 0, 0)
    bounds, longest = sequence_bounds(batch, 8)
    spans = np.diff(bounds)
    assert bounds[0] == 0 and bounds[-1] == 8 * batch.size and longest == 7
    assert sorted(spans[spans > 0].tolist()) == sorted(
        lengths.tolist() + [8 - used for used in (sum(lengths[row]) for row in plan) if used < 8]
    )


def test_a_failing_varlen_kernel_hands_over_to_the_mask_once(
    tiny_model_dir, monkeypatch, caplog
) -> None:
    from semsearch.models import packing

    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("no kernel image is available for execution on the device")

    monkeypatch.setattr(packing, "VARLEN_DEVICES", ("cpu",))
    monkeypatch.setattr(packing, "VARLEN_DTYPES", (torch.float32,))
    monkeypatch.setattr(packing, "varlen_kernel", lambda: broken)
    encoder = BiEncoder.load(str(tiny_model_dir), max_length=64, device="cpu")
    padded = encoder.encode(TEXTS, batch_size=5)
    with caplog.at_level("WARNING", logger="semsearch.models.packing"):
        packed = encoder.encode(TEXTS, batch_size=5, packing=True)
    np.testing.assert_allclose(packed, padded, atol=1e-5)
    assert len(calls) == 1  # tried once, then the mask for every batch
    assert [r.message for r in caplog.records if "varlen" in r.message] == [
        "varlen attention failed on cpu (no kernel image is available for execution on the "
        "device): packing with a dense mask instead"
    ]
