"""Counting the texts an encoder cuts at its maximum length, so a build can say so once.

Why: a text longer than the model's `max_length` tokens is embedded from its beginning only,
silently. The fast tokeniser keeps what it cut (`Encoding.overflowing`), so counting costs
nothing; a build reports the count in one warning line and in its manifest's `operation`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class TruncationCount:
    """Texts tokenised and, of those, texts cut at `max_length`."""

    texts: int = 0
    cut: int = 0

    def add(self, encoded: Any) -> None:
        """Count a fast tokeniser's `BatchEncoding` (its `encodings` keep the overflow)."""
        self.count(encoded.encodings or [])

    def count(self, encodings: list[Any]) -> None:
        """Count `tokenizers` encodings (a cut one keeps what it cut in `overflowing`)."""
        self.texts += len(encodings)
        self.cut += sum(1 for encoding in encodings if encoding.overflowing)


@contextlib.contextmanager
def truncation_report(encoder: Any) -> Iterator[TruncationCount]:
    """Count the texts `encoder` tokenises inside the block, and cuts; filled in on leaving it,
    with one warning line when any text was cut. An encoder without a count gives zeros."""
    counter = getattr(encoder, "truncation", None)
    before = (counter.texts, counter.cut) if counter else (0, 0)
    report = TruncationCount()
    yield report
    if counter:
        report.texts, report.cut = counter.texts - before[0], counter.cut - before[1]
    if report.cut:
        log.warning(
            "%d of %d texts were longer than max_length %d tokens and were cut",
            report.cut,
            report.texts,
            getattr(encoder, "max_length", 0),
        )
