"""Loading a model folder: what transformers prints on the way is only what a user needs."""

from __future__ import annotations

import logging

from semsearch.models.bi_encoder import BiEncoder


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_the_unused_loss_type_notice_is_not_printed(tiny_model_dir) -> None:
    encoder = BiEncoder.load(str(tiny_model_dir), device="cpu")
    logger = logging.getLogger("transformers.modeling_utils")
    collected = _Collect()
    logger.addHandler(collected)
    try:
        logging.Logger.warning_once.cache_clear()  # transformers says it once per process
        _ = encoder.transformer.loss_function  # what tracing the query encoder reads
        logger.warning("another notice")
    finally:
        logger.removeHandler(collected)
    assert collected.messages == ["another notice"]
