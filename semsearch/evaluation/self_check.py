"""`eval self`: a document index checked against its own text, without a labelled query.

A sentence of at least eight words that occurs in exactly one indexed document is a query
whose one right answer is known: that document. Sampled one per document (a random one,
from past the model's first window where the document has any there, so that the check
tests the chunks a truncating index would not have), the sentences are searched as any
query is (each document once, by its best chunk), and recall@10 and MRR@10 by document say
whether the model and the chunking fit the corpus. A sentence is a passage of the index's
own text, so the figures are an upper bound of what people's shorter, vaguer queries get;
their use is comparing models and chunk sizes on the same corpus.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

from semsearch.errors import SemsearchError
from semsearch.search.searcher import Searcher
from semsearch.store.manifest import CHUNK_NUMBER_COLUMN
from semsearch.store.metadata_parts import MetadataParts

MIN_WORDS = 8
K = 10
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
BATCH = 64


@dataclass(frozen=True)
class SelfQuery:
    """A sentence, the one document it occurs in, and whether it lies past the first window."""

    text: str
    document: object
    past_window: bool


def sentences(text: str) -> list[str]:
    """The sentences of `text` with at least MIN_WORDS words, whitespace made single."""
    found = (" ".join(piece.split()) for piece in SENTENCE_END.split(text))
    return [sentence for sentence in found if len(sentence.split()) >= MIN_WORDS]


def check_self_checkable(searcher: Searcher) -> None:
    """Refuse, in one line, an index whose rows are not chunks of documents with texts."""
    manifest = searcher.manifest
    name = manifest.name
    if manifest.text_column is None or not manifest.has_model:
        raise SemsearchError(
            f"index {name!r} holds your own vectors without texts or a model: eval self "
            "queries an index with sentences of its own documents, so it needs both; measure "
            "it with labelled queries instead (semsearch eval ir --index)"
        )
    if manifest.chunks is None:
        raise SemsearchError(
            f"index {name!r} is not chunked: each of its rows is one text, so a sentence of it "
            "would only find the row it was taken from; eval self checks a document index "
            "(built with --chunking on or auto over long texts); for this one use "
            "semsearch eval ir with labelled queries"
        )


def self_queries(searcher: Searcher, sample: int, seed: int = 0) -> tuple[list[SelfQuery], dict]:
    """Up to `sample` queries, one per document of those that have a sentence of their own,
    and the facts behind them (documents, unique sentences, the first window in chunks)."""
    check_self_checkable(searcher)
    manifest = searcher.manifest
    chunks = manifest.chunks
    columns = [manifest.text_column, chunks.document_column, CHUNK_NUMBER_COLUMN]
    snapshot = searcher.snapshot
    # The chunk number is internal (hits never carry it): read it from the parts directly.
    stored = MetadataParts(
        [each.segment for each in snapshot.segments], set(), snapshot.check_unreplaced
    )
    rows = stored.rows(np.flatnonzero(snapshot.live), columns)
    # The model's window in chunk starts: chunk n starts near token n x (tokens - overlap).
    step = max(1, chunks.tokens - chunks.overlap)
    first_window_chunks = math.ceil(manifest.model.max_length / step)
    by_document: dict[object, dict[str, bool]] = defaultdict(dict)
    for row in rows:
        text, document = row[manifest.text_column], row[chunks.document_column]
        past = row[CHUNK_NUMBER_COLUMN] >= first_window_chunks
        seen = by_document[document]
        for sentence in sentences(text or ""):
            seen[sentence] = seen.get(sentence, False) or past
    occurrences = Counter(s for seen in by_document.values() for s in seen)
    rng = random.Random(seed)
    candidates = []
    for document, seen in by_document.items():
        own = [(s, past) for s, past in seen.items() if occurrences[s] == 1]
        later = [(s, past) for s, past in own if past]
        if own:
            text, past = rng.choice(later or own)
            candidates.append(SelfQuery(text, document, past))
    rng.shuffle(candidates)
    facts = {
        "documents": len(by_document),
        "documents_with_own_sentence": len(candidates),
        "first_window_chunks": first_window_chunks,
    }
    return candidates[:sample], facts


def self_check(searcher: Searcher, sample: int = 500, seed: int = 0) -> tuple[dict, dict]:
    """(metrics, facts): recall@10 and MRR@10 by document of the sampled sentences, and how
    many were asked, past the first window or not."""
    if sample < 1:
        raise SemsearchError(f"--sample must be at least 1, not {sample}")
    queries, facts = self_queries(searcher, sample, seed)
    if not queries:
        raise SemsearchError(
            f"index {searcher.manifest.name!r} has no sentence of {MIN_WORDS}+ words that "
            "occurs in one document only: nothing to ask it (are its texts sentences?)"
        )
    found = reciprocal = 0.0
    for start in range(0, len(queries), BATCH):
        batch = queries[start : start + BATCH]
        results = searcher.search([query.text for query in batch], k=K)
        for query, hits in zip(batch, results):
            ranks = [hit.rank for hit in hits if hit.id == query.document]
            if ranks:
                found += 1
                reciprocal += 1 / ranks[0]
    metrics = {
        "recall@10": round(found / len(queries), 4),
        "mrr@10": round(reciprocal / len(queries), 4),
        "queries": len(queries),
    }
    facts["past_first_window"] = sum(query.past_window for query in queries)
    return metrics, facts
