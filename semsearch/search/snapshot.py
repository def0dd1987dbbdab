"""One generation of an index, opened for search: its segments, metadata and live rows.

Rows are numbered globally, segment after segment; a search returns those row numbers.
Each segment is searched with per-call parameters and an id filter (deleted rows and
`--where`) and the results merged; a filter that keeps few rows is answered exactly over
them, as an approximate structure would reach too few. Opening checks the files
(`file_checks.check_opened_files`) and sees one whole generation even while
`build --overwrite` replaces the folder (`open_snapshot`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from functools import cached_property

import numpy as np
import pyarrow as pa

from semsearch.ann.base import IdFilter
from semsearch.ann.factory import IndexSpec, is_rescoring
from semsearch.ann.metrics import higher_is_better
from semsearch.ann.vector_index import VectorIndex
from semsearch.errors import SemsearchError
from semsearch.phases import count, note, phase
from semsearch.search.filter_plan import FilterPlan, plan_filter
from semsearch.search.open_segments import OpenSegment, SegmentCache
from semsearch.search.where import WhereEvaluator
from semsearch.store.file_checks import check_opened_files, check_vector_files
from semsearch.store.folders import IndexFolder
from semsearch.store.lexical import LexicalSegment, lexical_search
from semsearch.store.manifest import CHUNK_NUMBER_COLUMN, LexicalSpec, Manifest
from semsearch.store.metadata_parts import MetadataParts
from semsearch.store.segment import ID_COLUMN, TEXT_HASH_COLUMN, Segment, internal_columns

log = logging.getLogger(__name__)

WHERE_CACHE_SIZE = 64
# ... and no more masks than fit this many bytes (one byte a row each: 3 masks at 20M rows).
WHERE_CACHE_BYTES = 64 << 20
# An open that finds its folder replaced meanwhile starts again, for this long at most.
OPEN_RETRY_SECONDS = 10.0
# A folder missing on every try for this long is missing, not between two builds.
MISSING_GRACE_SECONDS = 0.5


class IndexSnapshot:
    """A generation opened for search; see the module docstring. Safe to share between threads."""

    def __init__(
        self, folder: IndexFolder, manifest: Manifest, cache: SegmentCache | None = None
    ) -> None:
        self.folder = folder
        self.manifest = manifest
        cache = cache or SegmentCache()
        self._identity = folder.identity()  # `open_snapshot` checks it is the files' folder
        check_opened_files(folder, manifest, cache.checked)
        opened = [
            cache.open(folder, manifest, position) for position in range(len(manifest.segments))
        ]
        # One live mask for the generation; each segment's is a view of it (1 byte a row).
        self.live = np.concatenate(
            [np.zeros(0, bool), *(segment.live_mask() for segment, _ in opened)]
        )
        starts = np.cumsum([0, *(segment.record.rows for segment, _ in opened)]).tolist()
        self.segments = [
            OpenSegment(segment, index, self.live[start : start + segment.record.rows], start)
            for (segment, index), start in zip(opened, starts)
        ]
        self._cache = cache
        self._where = WhereEvaluator(
            [files for segment, _ in opened for files in segment.metadata_files()],
            len(self.live),
            internal_columns(self.manifest),
        )
        self._where_cache: dict[str, tuple[np.ndarray, int]] = {}
        self._kept_cache: dict[str, VectorIndex] = {}
        self._filter_cache: dict[str, list[tuple[bool, IdFilter | None]]] = {}
        self._cache_lock = threading.Lock()
        self._vectors_checked: set[str] = set()
        self.hit_metadata  # noqa: B018 - reads each segment's schema: a damaged footer fails now

    @cached_property
    def hit_metadata(self) -> MetadataParts:
        """The metadata a hit carries, by row number, read from the hits' parts only: every
        column but the internal text hash and chunk number, and but the internal id where the
        index has an id column of its own (a chunk's own id, on a chunked index)."""
        skipped = {TEXT_HASH_COLUMN, ID_COLUMN} if self.manifest.key_column else {TEXT_HASH_COLUMN}
        if self.manifest.chunks is not None:  # a chunk's number is the index's own
            skipped.add(CHUNK_NUMBER_COLUMN)
        segments = [open_segment.segment for open_segment in self.segments]
        return MetadataParts(segments, skipped, self.check_unreplaced)

    def check_unreplaced(self) -> None:
        """Refuse to go on reading files by name once `build --overwrite` replaced the folder
        (they would be another index's): the searcher must reopen it (`Searcher.refresh`)."""
        if self.folder.identity() != self._identity:
            raise SemsearchError(
                f"index {self.folder.name!r} was replaced (build --overwrite) after this searcher "
                "opened it: reopen it (the server does on its next refresh)"
            )

    @property
    def live_rows(self) -> int:
        return self.manifest.rows

    def where_mask(self, expression: str) -> np.ndarray:
        """Live rows that satisfy `expression` (cached per expression)."""
        return self.where_rows(expression)[0]

    def where_rows(self, expression: str) -> tuple[np.ndarray, int]:
        """Live rows that satisfy `expression` and how many they are, cached per expression
        (counting them costs 0.4 ms a query at 841k rows: as much as a selective search)."""
        with self._cache_lock:
            cached = self._where_cache.get(expression)
        if cached is not None:
            return cached
        self.check_unreplaced()
        mask = self._where.mask(expression)
        self.check_unreplaced()  # the parts DuckDB read were this generation's
        mask &= self.live
        limit = max(1, min(WHERE_CACHE_SIZE, WHERE_CACHE_BYTES // max(len(mask), 1)))
        with self._cache_lock:
            while len(self._where_cache) >= limit:
                self._where_cache.pop(next(iter(self._where_cache)))
            self._where_cache[expression] = mask, int(np.count_nonzero(mask))
            return self._where_cache[expression]

    def search(
        self,
        queries: np.ndarray,
        k: int,
        params: dict[str, int] | None = None,
        where: str | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Scores and global rows of the `k` nearest live rows (satisfying `where`), -1 padded;
        `queries` from `prepare_vectors`, L2 scores squared."""
        params = {**self.manifest.index.search_params, **(params or {})}
        allowed, matches = None, self.live_rows
        if where is not None:
            with phase("filter"):
                allowed, matches = self.where_rows(where)
        wanted = min(k, matches)
        if wanted == 0:
            _explain_filter(where, matches, self.live_rows, "none: no row matches")
            return _empty(len(queries), k)
        if allowed is not None:
            plan = plan_filter(
                matches,
                self.live_rows,
                k,
                params,
                [open_segment.index for open_segment in self.segments],
                is_rescoring(self.manifest.index),
            )
            _explain_filter(where, matches, self.live_rows, plan.strategy)
            if plan.exact:
                count("candidates", matches * len(queries))
                return self._kept_index(where, allowed).search(queries, k)
            params = plan.params
        note(params=params)
        if allowed is not None and plan.then_kept:
            scores, rows = self._searched_then_kept(queries, k, wanted, plan, allowed, where)
        else:
            scores, rows = self._approximate(queries, k, params, allowed, where)
        short = np.sum(rows >= 0, axis=1) < wanted
        if short.any():  # a structure reached too few allowed rows: answer those exactly
            count("queries_answered_exactly", int(short.sum()))
            queries = np.ascontiguousarray(queries[short])
            scores[short], rows[short] = self.exact_search(queries, k, allowed)
        return scores, rows

    def _searched_then_kept(
        self,
        queries: np.ndarray,
        k: int,
        wanted: int,
        plan: FilterPlan,
        allowed: np.ndarray,
        where: str,
    ) -> tuple[np.ndarray, np.ndarray]:
        """A broad filter's search: the unfiltered search `plan.depth` deep, the kept rows
        taken; a query with fewer than `wanted` of them is searched again with FAISS skipping
        the rest."""
        scores, rows = self._approximate(queries, plan.depth, plan.params, None)
        scores, rows = _kept_only(scores, rows, allowed, k)
        short = np.sum(rows >= 0, axis=1) < wanted
        if short.any():
            count("queries_searched_again", int(short.sum()))
            queries = np.ascontiguousarray(queries[short])
            scores[short], rows[short] = self._approximate(queries, k, plan.params, allowed, where)
        return scores, rows

    def check_lexical(self) -> LexicalSpec:
        """The lexical part's settings; a one-line error saying how to add one if there is none."""
        if self.manifest.lexical is None:
            name = self.manifest.name
            raise SemsearchError(
                f"index {name!r} has no lexical (BM25) part, which --mode lexical and hybrid "
                f"search: add one with 'semsearch reindex {name} --lexical' (from the stored "
                "texts, no model needed), or query with --mode dense"
            )
        return self.manifest.lexical

    def lexical_search(
        self, queries: list[str], k: int, where: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """BM25 scores and global rows of each query's `k` best live rows (satisfying `where`)
        that share a term with it, -1 padded; see `semsearch.store.lexical`."""
        spec = self.check_lexical()
        allowed = self.live
        if where is not None:
            with phase("filter"):
                allowed, matches = self.where_rows(where)
            _explain_filter(where, matches, self.live_rows, "BM25 over the rows it keeps")
        segments = [
            LexicalSegment(
                self._cache.lexical(self.folder, self.manifest, position), open_segment.offset
            )
            for position, open_segment in enumerate(self.segments)
        ]
        return lexical_search(segments, spec, queries, k, allowed)

    def exact_search(
        self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The exact top-k over the `allowed` rows (default: every live row), from stored vectors."""
        from semsearch.ann.exact import exact_knn  # torch only where it runs

        allowed = self.live if allowed is None else allowed
        return exact_knn(queries, self.allowed_parts(allowed), k, self.manifest.index.metric)

    def _kept_index(self, where: str, allowed: np.ndarray) -> VectorIndex:
        """An exact index over the rows a selective filter keeps (ids: global rows), built once:
        gathering their vectors from the memory-mapped parts costs more than searching them."""
        with self._cache_lock:
            cached = self._kept_cache.get(where)
        if cached is not None:
            return cached
        spec = IndexSpec("flat", "Flat", self.manifest.index.metric)
        kept = VectorIndex.create(spec, self.manifest.model.dimension)
        with phase("filter"):  # the kept rows' vectors gathered, once per filter
            for rows, vectors in self.allowed_parts(allowed):
                kept.add(vectors, rows)
        with self._cache_lock:
            if len(self._kept_cache) >= WHERE_CACHE_SIZE // 16:
                self._kept_cache.pop(next(iter(self._kept_cache)))
            self._kept_cache[where] = kept
        return kept

    def _approximate(
        self,
        queries: np.ndarray,
        k: int,
        params: dict[str, int],
        allowed: np.ndarray | None,
        where: str | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        all_scores, all_rows = [], []
        filters = self._segment_filters(where, allowed) if allowed is not None else None
        for position, open_segment in enumerate(self.segments):
            if filters is not None:
                searched, id_filter = filters[position]
                if not searched:
                    continue
            elif not open_segment.any_live:
                continue
            else:
                id_filter = open_segment.id_filter()
            segment_k = min(k, open_segment.index.size)
            count("segments_searched", 1)
            count("candidates", segment_k * len(queries))
            scores, ids = open_segment.index.search(queries, segment_k, params, id_filter)
            positions = open_segment.segment.positions_of(ids.ravel()).reshape(ids.shape)
            rows = np.where((ids >= 0) & (positions >= 0), positions + open_segment.offset, -1)
            all_scores.append(scores)
            all_rows.append(rows)
        if not all_scores:
            return _empty(len(queries), k)
        higher = higher_is_better(self.manifest.index.metric)
        return _merge(np.hstack(all_scores), np.hstack(all_rows), k, higher)

    def _segment_filters(
        self, where: str | None, allowed: np.ndarray
    ) -> list[tuple[bool, IdFilter | None]]:
        """Per segment: whether any of its rows is allowed, and the FAISS id filter of those,
        built once per filter (building one costs about half an unfiltered search at 200k rows)."""
        with self._cache_lock:
            cached = self._filter_cache.get(where) if where is not None else None
        if cached is not None:
            return cached
        filters = []
        for open_segment in self.segments:
            start = open_segment.offset
            segment_allowed = allowed[start : start + len(open_segment.live)]
            searched = bool(segment_allowed.any())
            filters.append(
                (searched, open_segment.id_filter(segment_allowed) if searched else None)
            )
        if where is not None:
            with self._cache_lock:
                while len(self._filter_cache) >= WHERE_CACHE_SIZE:
                    self._filter_cache.pop(next(iter(self._filter_cache)))
                self._filter_cache[where] = filters
        return filters

    def allowed_parts(
        self, allowed: np.ndarray, rows_per_part: int = 65_536
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(global rows, float32 vectors) of the `allowed` rows, `rows_per_part` at a time."""
        for open_segment in self.segments:
            start = open_segment.offset
            segment_allowed = allowed[start : start + len(open_segment.live)]
            positions = np.flatnonzero(segment_allowed)
            segment = self._checked_vectors(open_segment) if len(positions) else None
            for chunk in range(0, len(positions), rows_per_part):
                chosen = positions[chunk : chunk + rows_per_part]
                yield chosen + start, segment.vectors_at(chosen)

    def _checked_vectors(self, open_segment: OpenSegment) -> Segment:
        """The segment, its stored vector files hashed on first use by this snapshot (an open
        checks only their size: `file_checks.check_vector_files`)."""
        name = open_segment.segment.name
        if name not in self._vectors_checked:
            check_vector_files(
                self.folder, self.manifest, open_segment.segment.record, self._cache.checked
            )
            self._vectors_checked.add(name)
        return open_segment.segment


def open_snapshot(
    folder: IndexFolder, at: int | None = None, cache: SegmentCache | None = None
) -> IndexSnapshot:
    """Generation `at` (default: the current one) opened for search, whole.

    An open that read the old manifest and the new files of a `build --overwrite` would call
    a healthy index damaged, so the folder's identity is taken before and after: when it
    changed, the open starts again; only a failure on an unchanged folder is the index's own.
    """
    cache = cache or SegmentCache()
    started = time.monotonic()
    deadline = started + OPEN_RETRY_SECONDS
    attempt = 0
    while attempt == 0 or time.monotonic() < deadline:
        attempt += 1
        before = folder.identity()
        try:
            snapshot = IndexSnapshot(folder, folder.manifest(at), cache)
        except (SemsearchError, OSError, pa.ArrowException):
            if folder.identity() == before and (
                before is not None or time.monotonic() > started + MISSING_GRACE_SECONDS
            ):  # an unchanged folder's own failure, or a folder that stays missing
                raise
        else:
            if before is not None and folder.identity() == before:
                return snapshot
        log.info("index %r was replaced while it was being opened: opening it again", folder.name)
        cache.clear()
        time.sleep(min(0.01 * attempt, 0.2))
    raise SemsearchError(
        f"index {folder.name!r} was replaced {attempt} times while it was being opened, for "
        f"{OPEN_RETRY_SECONDS:.0f} s (is 'semsearch build --overwrite' running in a loop?): try "
        "again once it has finished"
    )


def _merge(
    scores: np.ndarray, rows: np.ndarray, k: int, higher_is_better: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The best `k` of each line of several segments' results; missing results sort last."""
    keyed = np.where(rows >= 0, scores, -np.inf if higher_is_better else np.inf)
    order = np.argsort(-keyed if higher_is_better else keyed, axis=1, kind="stable")[:, :k]
    merged_scores = np.take_along_axis(keyed, order, axis=1)
    merged_rows = np.take_along_axis(rows, order, axis=1)
    if merged_rows.shape[1] < k:
        padding = k - merged_rows.shape[1]
        merged_rows = np.pad(merged_rows, ((0, 0), (0, padding)), constant_values=-1)
        merged_scores = np.pad(merged_scores, ((0, 0), (0, padding)), constant_values=np.nan)
    merged_scores = np.where(merged_rows >= 0, merged_scores, np.nan).astype(np.float32)
    return merged_scores, merged_rows


def _kept_only(
    scores: np.ndarray, rows: np.ndarray, allowed: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each line's first `k` results whose rows `allowed` keeps (results are best first),
    -1 padded."""
    kept = (rows >= 0) & allowed[np.maximum(rows, 0)]
    order = np.argsort(~kept, axis=1, kind="stable")[:, :k]  # kept first, in their order
    rows = np.where(np.take_along_axis(kept, order, axis=1), np.take_along_axis(rows, order, 1), -1)
    scores = np.where(rows >= 0, np.take_along_axis(scores, order, axis=1), np.nan)
    return scores.astype(np.float32), rows


def _empty(queries: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full((queries, k), np.nan, np.float32), np.full((queries, k), -1, np.int64)


def _explain_filter(where: str | None, matches: int, rows: int, strategy: str) -> None:
    """What a query's filter kept and how it was searched, for `query --explain`."""
    if where is not None:
        share = round(matches / rows, 6) if rows else 0.0
        note(
            filter={"where": where, "matches": matches, "selectivity": share, "strategy": strategy}
        )
