"""Models: the bi-encoder that turns texts into vectors, and the pooling it uses.

Names are imported on first use, so that `semsearch.models.spec` (read with every index
manifest) does not pull in torch.
"""

from __future__ import annotations

import importlib

_NAMES = {
    "BiEncoder": "semsearch.models.bi_encoder",
    "EncoderSpec": "semsearch.models.spec",
    "Pooling": "semsearch.models.pooling",
    "PoolingMode": "semsearch.models.pooling",
}
__all__ = list(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module 'semsearch.models' has no attribute {name!r}")
    return getattr(importlib.import_module(_NAMES[name]), name)
