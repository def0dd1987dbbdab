"""semsearch: a Sentence-BERT-style bi-encoder, FAISS indexes beside Parquet metadata."""

from __future__ import annotations

__version__ = "0.1.0"
