"""Searching an index: encode the query once, find its neighbours, attach their metadata.

A query runs in one of three modes: `dense` (the vectors, the default), `lexical` (the BM25
part beside them, no encoding) or `hybrid` (both, fused: `semsearch.search.hybrid`).
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from semsearch import phases
from semsearch.ann.metrics import higher_is_better
from semsearch.ann.vector_index import prepare_vectors
from semsearch.errors import SemsearchError
from semsearch.models.encoder import Encoder
from semsearch.models.prompts import with_prompt
from semsearch.options import GROUPS, Group, SearchMode, check_choice
from semsearch.phases import phase
from semsearch.search.explain import explanation
from semsearch.search.grouping import best_chunk_per_document
from semsearch.search.hybrid import Fusion, check_mode, fuse
from semsearch.search.limits import bound_search, bound_texts
from semsearch.search.open_segments import SegmentCache
from semsearch.search.snapshot import IndexSnapshot, open_snapshot
from semsearch.store.folders import DEFAULT_INDEX_DIR, IndexFolder, find_index
from semsearch.store.manifest import CHUNK_END_COLUMN, CHUNK_ID_COLUMN, CHUNK_START_COLUMN, Manifest
from semsearch.store.segment import ID_COLUMN, internal_columns

log = logging.getLogger(__name__)

DISTANCE_METRICS = ("l2", "manhattan")


class SearchResults(list):
    """Each query's hits (a list of lists, as before), with what the call's bounds changed:
    `notes` (one line each: a value clamped, a query cut; see `semsearch.search.limits`) and
    the `k` and `params` the search ran with. A server passes the notes on as they are.
    `explain`: the plan and where the time went, where asked (`semsearch.search.explain`)."""

    def __init__(
        self, hits: list[list[Hit]], notes: list[str], k: int, params: dict[str, int]
    ) -> None:
        super().__init__(hits)
        self.notes = notes
        self.k = k
        self.params = params
        self.explain: dict | None = None


@dataclass(frozen=True)
class Hit:
    """One result: its rank, score, id, text and the rest of its row. `text` is None for an
    index of your own vectors that has no text column."""

    query: str
    rank: int
    score: float
    id: object
    text: str | None
    metadata: dict
    # On a chunked index: `id` is the document's, `text` the passage that matched (its
    # best chunk), and `start`/`end` its character offsets in the document's text.
    start: int | None = None
    end: int | None = None

    def to_dict(self, score_name: str = "score") -> dict:
        """The hit as one flat record; a corpus column named like one of the hit's own fields
        (a `text` column beside the one embedded) comes as `column:<name>`, not over it. A
        hit without a text (your own vectors, no text column) has no `text` field; a chunked
        index's hit has `chunk`, `start` and `end` instead."""
        record = {"query": self.query, "rank": self.rank, score_name: self.score, "id": self.id}
        if self.start is not None:
            record.update(chunk=self.text, start=self.start, end=self.end)
        elif self.text is not None:
            record["text"] = self.text
        for name, value in self.metadata.items():
            record[f"column:{name}" if name in record else name] = value
        return record


class Searcher:
    """An opened index generation and the model that built it, ready for any number of queries
    from many threads; it answers from the generation it opened until `refresh()`."""

    def __init__(
        self,
        folder: IndexFolder,
        encoder: Encoder | None = None,
        device: str = "auto",
        compile: bool = False,
        at: int | None = None,
        model_check: bool = True,
        lexical_only: bool = False,
        vectors_only: bool = False,
        query_prompt: str | None = None,
    ) -> None:
        """Open `folder` at generation `at` (default: the current one). `compile`: the CPU
        encoder compiled for warm-query latency (the first query takes 15-30 s longer).
        `model_check=False` skips comparing the encoder's weights with the index's.
        `lexical_only` and `vectors_only` load no model: only `mode="lexical"`, or only
        `search_vectors`, then search. `query_prompt` replaces the index's ("" for none)."""
        self.folder = folder
        self._query_prompt = query_prompt
        self.pinned_generation = at
        self._cache = SegmentCache()
        self.snapshot = open_snapshot(folder, at, self._cache)
        manifest = self.snapshot.manifest
        self.encoder: Encoder | None = None
        self._check_fingerprint = model_check
        if lexical_only:
            self.snapshot.check_lexical()
            return
        if vectors_only or (encoder is None and not manifest.has_model):
            return  # your own vectors, no model named: queried by vector only
        if not model_check and manifest.model.fingerprint:
            log.warning("--no-model-check: the model's weights are not compared with the index's")
        if model_check and not manifest.model.fingerprint:
            raise SemsearchError(
                f"index {manifest.name!r} records no model fingerprint, so the model that "
                "queries it cannot be checked: pass --no-model-check (model_check=False) if you "
                "know it is the model that built it, or rebuild the index with --overwrite"
            )
        if encoder is None:
            from semsearch.models.bi_encoder import BiEncoder

            encoder = BiEncoder.for_index(manifest.model, device, "torch")
        self.encoder = encoder
        check_same_model(manifest, self.encoder, check_fingerprint=model_check)
        if compile:
            self.encoder.compile_for_queries()

    @classmethod
    def open(
        cls,
        name: str | None = None,
        index_dir: Path = DEFAULT_INDEX_DIR,
        device: str = "auto",
        model_check: bool = True,
    ) -> Searcher:
        return cls(find_index(name, index_dir), device=device, model_check=model_check)

    @property
    def manifest(self) -> Manifest:
        return self.snapshot.manifest

    @property
    def query_prompt(self) -> str:
        """The prompt put before each query: the one given, else the index's."""
        if self._query_prompt is not None:
            return self._query_prompt
        return self.manifest.model.query_prompt

    @property
    def metadata(self) -> pa.Table:
        """Every row's metadata, read whole from disk at each call (for tests and scripts)."""
        return self.snapshot.hit_metadata.table()

    @property
    def metadata_columns(self) -> list[str]:
        """The metadata's column names, internal ones included; reads no row."""
        return self.snapshot.hit_metadata.column_names

    @property
    def user_columns(self) -> list[str]:
        """The metadata's columns the user knows (to filter on, to show): the internal ones
        (`store.segment.internal_columns`) left out."""
        internal = internal_columns(self.snapshot.manifest)
        return [name for name in self.metadata_columns if name not in internal]

    @property
    def generation(self) -> int:
        return self.snapshot.manifest.generation

    def refresh(self) -> bool:
        """Move to the index's current generation if it changed (searches running meanwhile
        finish on theirs); True when it did."""
        if self.pinned_generation is not None:
            return False
        current = self.folder.manifest()
        if (current.index_id, current.generation) == (self.manifest.index_id, self.generation):
            return False
        snapshot = open_snapshot(self.folder, None, self._cache)
        if self.encoder is not None:
            check_same_model(
                snapshot.manifest, self.encoder, check_fingerprint=self._check_fingerprint
            )
        self.snapshot = snapshot
        self._cache.keep_only(snapshot.manifest)
        return True

    @property
    def score_name(self) -> str:
        """`distance` (lower is closer) for L2/Manhattan indexes, `score` otherwise."""
        return self.score_name_for("dense")

    def score_name_for(self, mode: SearchMode) -> str:
        """What a hit's score is called in `mode`: lexical and fused scores are `score`s."""
        dense_distance = self.manifest.index.metric in DISTANCE_METRICS
        return "distance" if mode == "dense" and dense_distance else "score"

    def search(
        self,
        queries: list[str],
        k: int = 10,
        where: str | None = None,
        mode: SearchMode = "dense",
        fusion: Fusion | None = None,
        group: Group = "documents",
        explain: bool = False,
        **search_params: int | None,
    ) -> SearchResults:
        """The `k` best live rows for each query (satisfying the SQL predicate `where`) in
        `mode`, hybrid fused as `fusion` says; `search_params` override nprobe/efSearch for
        this call. Values are bounded as `semsearch.search.limits` says (the result's `notes`
        say what changed). A chunked index gives the `k` best documents, each by its best
        chunk (`group="chunks"`: the `k` best chunks). `explain`: the result's `explain`
        says how the search ran and where its time went."""
        check_mode(mode)
        if k < 1:
            raise SemsearchError(f"-k must be at least 1, not {k}")
        queries, text_notes = bound_texts(queries)
        if mode != "dense":
            self.snapshot.check_lexical()  # before the encoding's cost
        if mode != "lexical" and self.encoder is None:
            if not self.manifest.has_model:
                from semsearch.io.own_vectors import no_model_message

                raise SemsearchError(no_model_message(self.manifest.name))
            raise SemsearchError(f"this searcher loaded no model: --mode {mode} needs one")
        with _timing(explain):
            vectors = None
            if mode != "lexical":
                with phase("encode"):
                    vectors = self.encoder.encode(with_prompt(queries, self.query_prompt))
            results = self._search(
                queries, vectors, k, where, mode, fusion, search_params, group, explain
            )
        results.notes[:0] = text_notes
        return results

    def search_vectors(
        self,
        vectors: np.ndarray | list | None,
        k: int = 10,
        where: str | None = None,
        *,
        queries: list[str] | None = None,
        mode: SearchMode = "dense",
        fusion: Fusion | None = None,
        group: Group = "documents",
        explain: bool = False,
        **search_params: int | None,
    ) -> SearchResults:
        """`search` for query vectors (one a row, or one 1-D vector): an index of your own
        vectors, or queries a server already encoded in one batch for many requests.
        `queries` label the hits (default `vector N`) and are what lexical and hybrid modes
        search for (`vectors` may then be None); bounding them is the caller's
        (`limits.bound_texts`)."""
        check_mode(mode)
        if vectors is not None:
            # Where it runs: own_vectors reads corpora, and its imports (pyarrow.compute, the
            # corpus readers) are a tenth of a cold query that never needs them.
            from semsearch.io.own_vectors import query_vectors

            vectors = query_vectors(vectors, self.manifest.model.dimension)
        if queries is None:
            if mode != "dense":
                raise SemsearchError(f"--mode {mode} searches texts: give the queries' texts too")
            if vectors is None:
                raise SemsearchError("give the query vectors to search for")
            queries = [f"vector {row}" for row in range(len(vectors))]
        elif vectors is not None and len(queries) != len(vectors):
            raise SemsearchError(f"{len(queries)} query texts for {len(vectors)} vectors")
        with _timing(explain):
            return self._search(
                queries, vectors, k, where, mode, fusion, search_params, group, explain
            )

    def _search(
        self,
        queries: list[str],
        vectors: np.ndarray | None,
        k: int,
        where: str | None,
        mode: SearchMode,
        fusion: Fusion | None,
        search_params: dict[str, int | None],
        group: Group = "documents",
        explain: bool = False,
    ) -> SearchResults:
        check_choice("group", group, GROUPS)
        snapshot = self.snapshot  # one generation for the whole call
        given = {name: int(value) for name, value in search_params.items() if value is not None}
        bounded = bound_search(k, given, snapshot.live_rows, snapshot.segments, len(queries))
        k, search_params = bounded.k, bounded.params

        def rank(depth: int) -> tuple[np.ndarray, np.ndarray]:
            """Each query's `depth` best rows in `mode`: (scores, row numbers), best first."""
            phases.count("depths_ranked", 1)  # more than one: grouping by document went deeper
            if mode == "lexical":
                with phase("lexical"):
                    return snapshot.lexical_search(queries, depth, where)
            if mode == "dense":
                with phase("vector search"):
                    return self._dense(snapshot, vectors, depth, where, search_params)
            hybrid = fusion or Fusion()
            wide = min(max(depth, hybrid.depth), max(snapshot.live_rows, 1))
            phases.note(fusion={"method": hybrid.method, "candidates_per_side": wide})
            with phase("lexical"):
                lexical = snapshot.lexical_search(queries, wide, where)
            with phase("vector search"):
                dense = self._dense(snapshot, vectors, wide, where, search_params)
            higher = higher_is_better(snapshot.manifest.index.metric)
            with phase("fusion"):
                return fuse(dense, lexical, depth, hybrid, higher)

        chunks = snapshot.manifest.chunks
        if chunks is not None and group == "documents":
            column = [chunks.document_column]

            def documents(rows: np.ndarray) -> list:
                with phase("metadata"):
                    return [row[column[0]] for row in snapshot.hit_metadata.rows(rows, column)]

            scores, rows = best_chunk_per_document(rank, documents, k, snapshot.live_rows)
        else:
            scores, rows = rank(k)
        with phase("metadata"):
            hits = [
                self._hits(snapshot, query, row_scores, row_numbers)
                for query, row_scores, row_numbers in zip(queries, scores, rows)
            ]
        results = SearchResults(hits, list(bounded.notes), k, search_params)
        if explain:
            results.explain = explanation(snapshot, mode, k, len(queries), phases.current())
        return results

    @staticmethod
    def _dense(
        snapshot: IndexSnapshot,
        vectors: np.ndarray | None,
        k: int,
        where: str | None,
        params: dict[str, int],
    ) -> tuple[np.ndarray, np.ndarray]:
        if vectors is None:
            raise SemsearchError("dense and hybrid searches need the queries' vectors")
        vectors = prepare_vectors(vectors, snapshot.manifest.index.metric)
        scores, rows = snapshot.search(vectors, k, params, where)
        if snapshot.manifest.index.metric == "l2":
            scores = np.sqrt(np.maximum(scores, 0))  # FAISS returns squared L2 distances
        return scores, rows

    def _hits(
        self, snapshot: IndexSnapshot, query: str, scores: np.ndarray, rows: np.ndarray
    ) -> list[Hit]:
        found = rows >= 0  # fewer than k rows were reached, or match the filter
        manifest = snapshot.manifest
        records = snapshot.hit_metadata.rows(rows[found])
        hits = []
        for rank, (score, record) in enumerate(zip(scores[found].tolist(), records), start=1):
            text = record.pop(manifest.text_column) if manifest.text_column else None
            if manifest.chunks is not None:  # the document's id, and where the passage lies
                record.pop(CHUNK_ID_COLUMN, None)
                row_id = record.pop(manifest.chunks.document_column)
                start, end = record.pop(CHUNK_START_COLUMN), record.pop(CHUNK_END_COLUMN)
                hits.append(Hit(query, rank, score, row_id, text, record, start, end))
                continue
            id_column = manifest.id_column or ID_COLUMN
            # The text column may be the id column too: then each row's text is its id.
            row_id = text if id_column == manifest.text_column else record.pop(id_column)
            hits.append(Hit(query, rank, score, row_id, text, record))
        return hits


def _timing(explain: bool):
    """The phase timer of an explained search (the one open already, else a new one)."""
    return phases.timing() if explain else nullcontext()


def check_same_model(manifest: Manifest, encoder: Encoder, check_fingerprint: bool = True) -> None:
    """Refuse an encoder whose vectors would not be comparable with the index's: its weights
    (where recorded and `check_fingerprint`) and always its vector size."""
    built_with = manifest.model.fingerprint
    if check_fingerprint and built_with and encoder.fingerprint != built_with:
        raise SemsearchError(
            f"index {manifest.name!r} was built with model weights {built_with[:12]}…, but the "
            f"loaded model {encoder.name!r} has {encoder.fingerprint[:12] or 'none'}…: query with the "
            "model that built it, or rebuild the index with --overwrite"
        )
    if check_fingerprint and encoder.quantization != manifest.model.quantization:
        built, given = manifest.model.quantization or "fp32", encoder.quantization or "fp32"
        raise SemsearchError(
            f"index {manifest.name!r} was built by the {built} encoder, this one is {given}: "
            "query with the same quantisation, or rebuild the index"
        )
    if encoder.dimension != manifest.model.dimension:
        raise SemsearchError(
            f"index {manifest.name!r} holds {manifest.model.dimension}-d vectors, the model makes "
            f"{encoder.dimension}-d ones: rebuild the index with --overwrite"
        )
