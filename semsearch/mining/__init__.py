"""Paraphrase mining: the most similar pairs of texts inside one collection.

The data flow shows in the modules: `collection` (a corpus file encoded, or an index's own
vectors) -> `neighbours` (each text's top-k through FAISS, in chunks) -> `pairs` (kept
once, best first, cut) -> `miner`, which ties them together and is what users call. A
chunked index is mined as `documents` (each one vector, pooled from its passages).
"""

from __future__ import annotations

from semsearch.mining.collection import (
    Collection,
    CorpusSource,
    EncodedCollection,
    IndexedCollection,
)
from semsearch.mining.documents import DocumentCollection
from semsearch.mining.miner import (
    EXACT_DUPLICATE_MODES,
    ExactDuplicates,
    MiningOptions,
    mine_corpus,
    mine_index,
    mine_paraphrases,
)
from semsearch.mining.pairs import PAIR_COLUMNS, DuplicateGroups, MiningResult, MiningStats

__all__ = [
    "EXACT_DUPLICATE_MODES",
    "PAIR_COLUMNS",
    "Collection",
    "CorpusSource",
    "DocumentCollection",
    "DuplicateGroups",
    "EncodedCollection",
    "ExactDuplicates",
    "IndexedCollection",
    "MiningOptions",
    "MiningResult",
    "MiningStats",
    "mine_corpus",
    "mine_index",
    "mine_paraphrases",
]
