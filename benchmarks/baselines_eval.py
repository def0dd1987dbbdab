"""How `baselines.py` judges a row: STS-B test and SICK trial Spearman, pair classification
on STS-B binarised at score >= 4 (thresholds from dev), CPU encoding speed and size."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from common import stsb_file

from semsearch.evaluation.datasets import read_sick, read_stsb
from semsearch.evaluation.pairs import LabelledPairs, PairClassificationEvaluator
from semsearch.evaluation.sts import STSEvaluator

POSITIVE_AT = 0.8  # STS-B's 4 of 5


class InputEmbeddingMean:
    """The default model's input token embeddings averaged over a text's word pieces
    (special tokens left out): the transformer with none of its layers."""

    def __init__(self) -> None:
        from semsearch.models import BiEncoder

        model = BiEncoder.load("default", device="cpu")
        self.tokenizer = model.tokenizer
        self.table = model.transformer.get_input_embeddings().weight.detach().clone()
        self.name = "default input embeddings"

    def encode(self, texts: Sequence[str], batch_size: int = 64, **_: object) -> np.ndarray:
        ids = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        zero = torch.zeros(self.table.shape[1])
        return torch.stack([self.table[row].mean(dim=0) if row else zero for row in ids]).numpy()

    def size_bytes(self) -> int:
        return self.table.numel() * self.table.element_size()


def input_embedding_encoder() -> InputEmbeddingMean:
    return InputEmbeddingMean()


class CachedEncoder:
    """Encodes every text of the evaluation once (timed, after a warm-up batch), then
    answers the evaluators from that table."""

    def __init__(self, encoder, texts: list[str]) -> None:
        unique = list(dict.fromkeys(texts))
        encoder.encode(unique[:64], batch_size=64)  # warm-up
        started = time.perf_counter()
        vectors = encoder.encode(unique, batch_size=64)
        self.texts_per_second = round(len(unique) / (time.perf_counter() - started), 1)
        self.rows = {text: vectors[number] for number, text in enumerate(unique)}

    def encode(self, texts: Sequence[str], batch_size: int = 64, **_: object) -> np.ndarray:
        return np.stack([self.rows[text] for text in texts])


def evaluate_row(encoder, similarity: str, data_dir: Path, head_folder: Path | None) -> dict:
    """The row's figures; the pair classification is the head's when it has one."""
    stsb_test = read_stsb(stsb_file(data_dir, "test"))
    stsb_dev = read_stsb(stsb_file(data_dir, "dev"))
    sick_trial = read_sick(data_dir / "sick" / "sick_trial.tsv.gz")
    texts = [
        *stsb_test["sentence1"],
        *stsb_test["sentence2"],
        *stsb_dev["sentence1"],
        *stsb_dev["sentence2"],
        *sick_trial["sentence1"],
        *sick_trial["sentence2"],
    ]
    cached = CachedEncoder(encoder, texts)  # each text encoded once, and timed
    sts = STSEvaluator.from_columns(stsb_test)(cached)
    sick = STSEvaluator.from_columns(sick_trial)(cached)
    dev, test = binarised(stsb_dev), binarised(stsb_test)
    pairs = PairClassificationEvaluator(dev, test)(cached)
    figures = {
        "similarity": similarity,
        "stsb_test_spearman": sts[f"spearman_{similarity}"],
        "stsb_test_spearman_cosine": sts["spearman_cosine"],
        "sick_trial_spearman": sick[f"spearman_{similarity}"],
        "pair_accuracy": pairs[f"{similarity}_accuracy"],
        "pair_f1": pairs[f"{similarity}_f1"],
        "pair_ap": pairs[f"{similarity}_ap"],
        "pair_from": similarity,
        "similarity_pair_accuracy": pairs[f"{similarity}_accuracy"],
        "similarity_pair_f1": pairs[f"{similarity}_f1"],
    }
    if head_folder is not None:
        from semsearch.evaluation.classification import evaluate_head
        from semsearch.training.heads import load_head

        head = evaluate_head(load_head(head_folder, encoder), dev, test)
        figures.update(
            head,
            pair_accuracy=head["head_accuracy"],
            pair_f1=head["head_f1"],
            pair_ap=head["head_ap"],
            pair_from="head",
        )
    figures["encode_texts_per_s"] = cached.texts_per_second
    figures["size_mb"] = round(size_bytes(encoder) / 1e6, 1)
    return figures


def binarised(data: dict) -> LabelledPairs:
    labels = [int(score >= POSITIVE_AT) for score in data["score"]]
    return LabelledPairs(data["sentence1"], data["sentence2"], labels)


def size_bytes(encoder) -> int:
    """fp32 parameters (word vectors included), the same measure for every row."""
    if hasattr(encoder, "size_bytes"):
        return encoder.size_bytes()
    return sum(p.numel() * p.element_size() for p in encoder.parameters())
