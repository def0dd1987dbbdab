"""Paraphrase mining: the most similar pairs of texts inside one collection.

Each text's k nearest neighbours are found through FAISS (exact for small collections);
every pair is kept once (i < j) with its score, sorted best first, and cut by a threshold
and a count. Identical texts can be mined like any others, reported apart as groups (one
row per distinct text, never every pair of a group), or left out. A chunked index is mined
as documents (`semsearch.mining.documents`), or with `passages=True` passage by passage.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np

from semsearch import phases
from semsearch.ann.devices import CPU, faiss_device
from semsearch.ann.faiss_gpu import GPU_MAX_K
from semsearch.errors import SemsearchError
from semsearch.mining.collection import (
    Collection,
    CorpusSource,
    EncodedCollection,
    IndexedCollection,
)
from semsearch.mining.documents import DocumentCollection
from semsearch.mining.neighbours import search_in_chunks, search_structure
from semsearch.mining.pairs import DuplicateGroups, MiningResult, MiningStats, PairAccumulator
from semsearch.phases import phase, timed
from semsearch.store.folders import DEFAULT_INDEX_DIR

if TYPE_CHECKING:  # torch only where a corpus file is encoded: an index's vectors need none
    from semsearch.models.bi_encoder import BiEncoder

ExactDuplicates = Literal["keep", "separate", "drop"]
EXACT_DUPLICATE_MODES: tuple[str, ...] = get_args(ExactDuplicates)
# Query vectors searched at once: bounds the [chunk, k] result arrays, not the collection.
QUERY_CHUNK = 8192


@dataclass(frozen=True)
class MiningOptions:
    """How many neighbours to look at per text, which pairs to keep, and what to do with copies.

    `threshold` keeps pairs scoring at least that much; `top` keeps the best `top` pairs;
    `exact_duplicates` is `keep` (identical texts pair up like any others), `separate`
    (they are reported as groups instead of pairs) or `drop` (they are left out). On a
    chunked index, documents are paired (identical texts: identical documents) unless
    `passages` is set: then passages are, each pair of documents once by its best two.
    """

    top_k: int = 10
    threshold: float | None = None
    top: int | None = None
    exact_duplicates: ExactDuplicates = "keep"
    nprobe: int | None = None
    query_chunk: int = QUERY_CHUNK
    show_progress: bool = False
    device: str = "auto"  # where FAISS searches: auto (a GPU when FAISS has one), cpu, cuda[:N]
    passages: bool = False  # a chunked index: pair its passages, not its documents

    def check(self, metric: str) -> None:
        """Refuse options that cannot work, naming the option, before any work is done."""
        faiss_device(self.device)  # `cuda` without GPU FAISS is refused here, not after encoding
        if self.exact_duplicates not in EXACT_DUPLICATE_MODES:
            raise SemsearchError(
                f"unknown --exact-duplicates {self.exact_duplicates!r}: choose "
                f"{', '.join(EXACT_DUPLICATE_MODES)}"
            )
        for name, value in (
            ("--top-k", self.top_k),
            ("--top", self.top),
            ("--nprobe", self.nprobe),
            ("--query-chunk", self.query_chunk),
        ):
            if value is not None and value < 1:
                raise SemsearchError(f"{name} must be at least 1, not {value}")
        if self.threshold is None:
            return
        if math.isnan(self.threshold) or (metric == "cosine" and abs(self.threshold) > 1):
            raise SemsearchError(
                f"--threshold {self.threshold} is outside [-1, 1], the range of cosine similarity"
            )


def mine_paraphrases(
    collection: Collection,
    options: MiningOptions | None = None,
    search_pairs: SearchPairs | None = None,
) -> MiningResult:
    """The most similar pairs of `collection`, best first; see the module docstring.

    `search_pairs` finds every row's neighbours and feeds them to the accumulator (default:
    in this process; `semsearch.distributed.mine` on a Ray cluster).
    """
    options = options or MiningOptions()
    search_pairs = search_pairs or search_pairs_locally
    options.check(collection.metric)
    with phases.timing() as timer:
        chunked = collection.documents is not None  # its passages pooled into documents
        with phase("documents") if chunked else nullcontext():
            collection = mined_unit(collection, options)
        unit = _unit(collection)
        if len(collection) < 2:
            raise SemsearchError(
                f"{collection.name} has {len(collection)} usable "
                f"{unit if len(collection) != 1 else unit[:-1]}: mining needs at least two"
            )
        with phase("duplicates"):  # the exact-duplicate groups, and the rows to search
            groups = collection.groups
            keep_copies = options.exact_duplicates == "keep"
            rows = np.arange(len(collection), dtype=np.int64) if keep_copies else groups.first_rows
        pairs = PairAccumulator(rows, len(collection), options.threshold, collection.documents)
        structure = "none: fewer than two distinct texts"
        if len(rows) >= 2:
            structure = search_pairs(collection, options, pairs)
        with phase("pairs"):
            rows_a, rows_b, scores, found = pairs.finish(options.top)
            duplicates = None
            if options.exact_duplicates == "separate":
                duplicates = DuplicateGroups.of(collection, groups)
        report = timer.report()
    stats = MiningStats(
        rows=len(collection),
        rows_skipped=collection.rows_skipped,
        searched_rows=len(rows),
        exact_duplicate_rows=groups.duplicate_rows,
        top_k=min(options.top_k, len(rows) - 1),
        structure=structure,
        phases=report.to_dict(),
        unit=unit,
        **_document_counts(collection),
    )
    return MiningResult(rows_a, rows_b, scores, collection, found, stats, duplicates)


def mined_unit(collection: Collection, options: MiningOptions) -> Collection:
    """What is paired: a chunked index's documents (its passages with `options.passages`),
    or the collection's texts."""
    chunked = collection.documents is not None
    if options.passages and not chunked:
        raise SemsearchError(
            f"--passages pairs the passages of a chunked index; {collection.name} holds one "
            "text a row: leave --passages out"
        )
    if chunked and not options.passages and isinstance(collection, IndexedCollection):
        return DocumentCollection(collection)
    return collection


def _unit(collection: Collection) -> str:
    if isinstance(collection, DocumentCollection):
        return "documents"
    return "passages" if collection.documents is not None else "texts"


def _document_counts(collection: Collection) -> dict[str, int]:
    if isinstance(collection, DocumentCollection):
        return {"documents": len(collection), "passages": len(collection.passages)}
    if collection.documents is not None:
        return {"documents": int(collection.documents.max()) + 1, "passages": len(collection)}
    return {}


# (collection, options, the accumulator of the searched rows `pairs.rows`) -> the structure
# used. It reads the vectors where it searches: the local one here, in this process; it times
# its steps as phases (`semsearch.phases`).
SearchPairs = Callable[[Collection, "MiningOptions", PairAccumulator], str]


def search_pairs_locally(
    collection: Collection, options: MiningOptions, pairs: PairAccumulator
) -> str:
    """Feed every row's neighbours to `pairs`; the vectors (phases `encode` or `read
    vectors`), the structure (`index`), the search and the bookkeeping (`pairs`) timed apart."""
    vectors = collection.vectors(pairs.rows, options.show_progress)
    with phase("index"):
        device = faiss_device(options.device)
        if device.is_gpu and options.top_k + 1 > GPU_MAX_K:
            device = CPU  # more neighbours than GPU FAISS selects (torch's top-k has no such limit)
        index, structure = search_structure(
            vectors, collection.metric, collection.trained_index(), options.nprobe, device
        )
    chunks = search_in_chunks(
        index, vectors, options.top_k, options.query_chunk, options.show_progress
    )
    for chunk in timed(chunks, "search"):
        with phase("pairs"):
            pairs.add(chunk)
    return structure


def mine_corpus(
    source: CorpusSource, options: MiningOptions | None = None, encoder: BiEncoder | None = None
) -> MiningResult:
    """Read, encode and mine a corpus file (`encoder` defaults to `source.model`)."""
    with phases.timing():
        with phase("read"):
            collection = EncodedCollection(source, encoder)
        return mine_paraphrases(collection, options)


def mine_index(
    name: str | None, index_dir: Path = DEFAULT_INDEX_DIR, options: MiningOptions | None = None
) -> MiningResult:
    """Mine an index folder's rows with the vectors already in it (no model is loaded)."""
    with phases.timing():
        with phase("read"):
            collection = IndexedCollection(name, index_dir)
        return mine_paraphrases(collection, options)
