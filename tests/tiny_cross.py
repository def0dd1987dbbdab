"""A tiny cross-encoder folder from the tiny random BERT, for the cross-encoder, re-ranking
and bench tests (its head is untrained: scores differ from pair to pair, which is enough)."""

from __future__ import annotations

from pathlib import Path

import torch

from semsearch.models.cross_encoder import CrossEncoder


def make_tiny_cross_encoder(
    tiny_model_dir: Path, folder: Path, num_labels: int = 1, seed: int = 0
) -> Path:
    torch.manual_seed(seed)
    model = CrossEncoder.from_encoder(str(tiny_model_dir), num_labels, device="cpu")
    model.save(folder)
    return folder
