"""bm25s's primitives as semsearch uses them: the tokenizer, the IDF formulas, the module.

Why a module of its own: reading an index's lexical part (`lexical.py`) and writing it part
by part (`lexical_build.py`) must cut and score terms identically, so both take them from here.
"""

from __future__ import annotations

import logging
import math

from semsearch.errors import SemsearchError
from semsearch.store.manifest import LexicalSpec

log = logging.getLogger(__name__)

TOKEN_PATTERN = r"(?u)\b\w\w+\b"  # bm25s' and scikit-learn's default


def tokenizer_for(spec: LexicalSpec):
    """A fresh bm25s tokenizer for `spec`: it numbers terms in order of first appearance."""
    from bm25s.tokenization import Tokenizer

    return Tokenizer(
        splitter=TOKEN_PATTERN, stopwords=spec.stopwords or None, stemmer=stemmer_for(spec)
    )


def term_idf(method: str, frequency: int, documents: int) -> float:
    """The IDF bm25s gives a term in `frequency` of `documents` documents."""
    if frequency <= 0:
        return 0.0
    if method == "atire":
        return math.log(documents / frequency)
    inner = (documents - frequency + 0.5) / (frequency + 0.5)
    if method == "robertson":
        return math.log(max(inner, 1.0))
    return math.log(1 + inner)  # lucene


def bm25s_module():
    """The bm25s module, with its logger (which it sets to DEBUG) quiet unless asked."""
    import bm25s

    if (
        logging.getLogger("bm25s").level < logging.WARNING
        and log.getEffectiveLevel() > logging.DEBUG
    ):
        logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


def stemmer_for(spec: LexicalSpec):
    if not spec.stemmer:
        return None
    import Stemmer

    try:
        return Stemmer.Stemmer(spec.stemmer)
    except KeyError:
        raise SemsearchError(
            f"no stemmer for {spec.stemmer!r}: use one of {', '.join(Stemmer.algorithms())}"
        ) from None
