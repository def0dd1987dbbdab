"""The bi-encoder: equal to sentence-transformers on the default model, and well-behaved."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semsearch.errors import SemsearchError
from semsearch.models import BiEncoder

REAL_SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "Debian is a free operating system, developed by thousands of volunteers.",
    "Ünïcödé, emoji 🎉 and CJK 漢字 all go through the tokenizer.",
    "word " * 400,  # longer than the model's 256 tokens: truncated like sentence-transformers
]


def test_default_model_matches_sentence_transformers(default_encoder: BiEncoder) -> None:
    from sentence_transformers import SentenceTransformer

    from semsearch.models.model_folder import resolve_model

    anchor = SentenceTransformer(str(resolve_model("default").path), device="cpu")
    expected = anchor.encode(REAL_SENTENCES, normalize_embeddings=True, batch_size=4)
    actual = default_encoder.encode(REAL_SENTENCES, batch_size=5)
    assert actual.dtype == np.float32
    assert actual.shape == (len(REAL_SENTENCES), 384)
    assert np.abs(actual - expected).max() < 1e-5


def test_default_model_declares_its_configuration(default_encoder: BiEncoder) -> None:
    spec = default_encoder.spec
    assert (spec.pooling, spec.normalize, spec.max_length, spec.dimension) == (
        "mean",
        True,
        256,
        384,
    )
    assert spec.fingerprint.startswith("53aa51172d14")


def test_order_and_values_do_not_depend_on_batching(tiny_encoder: BiEncoder, sentences) -> None:
    one_by_one = np.stack([tiny_encoder.encode([text])[0] for text in sentences])
    batched = tiny_encoder.encode(sentences, batch_size=5)
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)


def test_vectors_are_unit_length_when_normalising(tiny_encoder: BiEncoder, sentences) -> None:
    norms = np.linalg.norm(tiny_encoder.encode(sentences), axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)


@pytest.mark.parametrize("pooling", ["mean", "max", "cls"])
def test_pooling_modes_give_distinct_vectors(tiny_model_dir, sentences, pooling) -> None:
    encoder = BiEncoder.load(str(tiny_model_dir), pooling=pooling, normalize=False, device="cpu")
    mean = BiEncoder.load(str(tiny_model_dir), pooling="mean", normalize=False, device="cpu")
    vectors = encoder.encode(sentences)
    assert vectors.shape == (len(sentences), 32)
    if pooling != "mean":
        assert not np.allclose(vectors, mean.encode(sentences))


def test_truncates_at_max_length(tiny_model_dir) -> None:
    encoder = BiEncoder.load(str(tiny_model_dir), max_length=16, device="cpu")
    assert max(len(ids) for ids in encoder.tokenize(["word " * 100])) == 16
    long_text, prefix = "alpha beta " * 50, "alpha beta " * 7  # 14 words + [CLS] [SEP] = 16
    np.testing.assert_allclose(encoder.encode([long_text]), encoder.encode([prefix]), atol=1e-5)


def test_max_length_never_exceeds_the_model(tiny_model_dir) -> None:
    assert BiEncoder.load(str(tiny_model_dir), max_length=10_000, device="cpu").max_length == 128


def test_forward_is_differentiable(tiny_encoder: BiEncoder, sentences) -> None:
    input_ids, mask = tiny_encoder.features(sentences[:4])
    tiny_encoder.train()
    tiny_encoder(input_ids, mask).sum().backward()
    grads = [p.grad for p in tiny_encoder.parameters() if p.grad is not None]
    assert grads and any(torch.count_nonzero(g) for g in grads)


def test_saved_folder_loads_in_semsearch_and_sentence_transformers(
    tiny_encoder, tmp_path, sentences
) -> None:
    from sentence_transformers import SentenceTransformer

    tiny_encoder.save(tmp_path / "model")
    reloaded = BiEncoder.load(str(tmp_path / "model"), device="cpu")
    np.testing.assert_allclose(
        reloaded.encode(sentences), tiny_encoder.encode(sentences), atol=1e-6
    )
    anchor = SentenceTransformer(str(tmp_path / "model"), device="cpu")
    np.testing.assert_allclose(anchor.encode(sentences), tiny_encoder.encode(sentences), atol=1e-5)


def test_encode_rejects_a_bare_string(tiny_encoder: BiEncoder) -> None:
    with pytest.raises(TypeError):
        tiny_encoder.encode("not a list")


def test_unknown_pooling_and_device_are_user_errors(tiny_model_dir) -> None:
    with pytest.raises(SemsearchError, match="pooling"):
        BiEncoder.load(str(tiny_model_dir), pooling="median")  # type: ignore[arg-type]
    with pytest.raises(SemsearchError, match="device"):
        BiEncoder.load(str(tiny_model_dir), device="tpu")


def test_half_precision_vectors_agree_with_fp32(tiny_encoder: BiEncoder, sentences) -> None:
    full = tiny_encoder.encode(sentences, precision="fp32")
    half = tiny_encoder.encode(sentences, precision="bf16")
    cosines = (full * half).sum(axis=1)
    assert cosines.min() > 0.99
    assert not np.array_equal(full, half)  # it really ran in bf16


def test_half_precision_copy_follows_the_weights(tiny_encoder: BiEncoder, sentences) -> None:
    before = tiny_encoder.encode(sentences, precision="bf16")
    copy_ = tiny_encoder._inference_transformer("bf16")
    assert tiny_encoder._inference_transformer("bf16") is copy_  # reused while weights stand
    with torch.no_grad():
        for parameter in tiny_encoder.transformer.parameters():
            parameter.mul_(0.5)
    assert tiny_encoder._inference_transformer("bf16") is not copy_
    after = tiny_encoder.encode(sentences, precision="bf16")
    np.testing.assert_allclose(after, tiny_encoder.encode(sentences, precision="fp32"), atol=0.05)
    assert not np.allclose(after, before, atol=1e-3)
    # The copy is a cache, not part of the model: never saved, never trained.
    names = [name for name, _ in tiny_encoder.named_parameters()]
    assert all(name.startswith(("transformer.", "pooling.")) for name in names)


def test_cpu_defaults_to_fixed_size_batches(tiny_encoder: BiEncoder) -> None:
    from semsearch.models.batching import batch_settings

    assert batch_settings(torch.device("cpu")) == (64, None)
    assert batch_settings(torch.device("cuda"))[1] is not None


def test_unknown_precision_and_half_int8_are_user_errors(tiny_model_dir, sentences) -> None:
    encoder = BiEncoder.load(str(tiny_model_dir), device="cpu")
    with pytest.raises(SemsearchError, match="unknown precision 'fp8'"):
        encoder.encode(sentences, precision="fp8")  # type: ignore[arg-type]
    pytest.importorskip("nncf", reason="int8 runs on OpenVINO and NNCF (the cpu-runtime extra)")
    quantised = BiEncoder.load(str(tiny_model_dir), device="cpu", quantization="int8")
    with pytest.raises(SemsearchError, match="int8 encoder runs in fp32"):
        quantised.encode(sentences, precision="bf16")


def test_progress_hears_of_every_batch_and_tokenised_texts_encode_alike(tiny_encoder) -> None:
    from semsearch.models.encoder import TokenizedTexts

    texts = [f"sentence {i} " + "word " * (i % 9) for i in range(100)]
    moves: list[int] = []
    vectors = tiny_encoder.encode(texts, batch_size=16, progress=moves.append)
    assert sum(moves) == 100 and len(moves) > 1 and max(moves) <= 16
    ahead = TokenizedTexts(texts, tiny_encoder.tokenize(texts))
    np.testing.assert_allclose(tiny_encoder.encode(ahead, batch_size=16), vectors, atol=1e-6)
    packed = tiny_encoder.encode(ahead, batch_size=16, packing=True)
    np.testing.assert_allclose(packed, vectors, atol=1e-4)
