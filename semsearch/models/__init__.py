"""Models: the bi-encoder that turns texts into vectors, and the pooling it uses.

Names are imported on first use, so that `semsearch.models.spec` (read with every index
manifest) does not pull in torch.
"""

from __future__ import annotations

from semsearch.lazy_exports import lazy_getattr

_NAMES = {
    "BiEncoder": "semsearch.models.bi_encoder",
    "EncoderSpec": "semsearch.models.spec",
    "Pooling": "semsearch.models.pooling",
    "PoolingMode": "semsearch.models.pooling",
}
__all__ = list(_NAMES)
__getattr__ = lazy_getattr(__name__, _NAMES)
