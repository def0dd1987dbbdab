"""Models: the bi-encoder that turns texts into vectors, and the pooling it uses."""

from __future__ import annotations

from semsearch.models.bi_encoder import BiEncoder, EncoderSpec
from semsearch.models.pooling import Pooling, PoolingMode

__all__ = ["BiEncoder", "EncoderSpec", "Pooling", "PoolingMode"]
