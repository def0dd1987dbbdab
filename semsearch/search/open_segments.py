"""The segments a search opens: each one's FAISS index (or exact stand-in) and live rows, kept
across generations so that reopening after a change reads only what is new.

Every file is checked as it is opened (`semsearch.store.file_checks`): the stored vectors
are hashed before the first read from them, a lexical part's files on its first use.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from semsearch.ann.vector_index import ExactStandIn, IdFilter, VectorIndex
from semsearch.store.file_checks import check_file, check_vector_files
from semsearch.store.file_names import LEXICAL_FILES, SEGMENTS_DIR
from semsearch.store.folders import IndexFolder
from semsearch.store.lexical import LexicalPart
from semsearch.store.manifest import Manifest
from semsearch.store.rescoring import is_rescoring, rescoring_index
from semsearch.store.segment import Segment


@dataclass
class OpenSegment:
    """A segment of this generation: its files, FAISS index, live rows and first global row."""

    segment: Segment
    index: VectorIndex
    live: np.ndarray
    offset: int
    live_filter: IdFilter | None = field(default=None, init=False)
    live_filter_built: bool = field(default=False, init=False)
    any_live: bool = field(init=False)  # scanning `live` costs ~30 us a query on 841k rows

    def __post_init__(self) -> None:
        self.any_live = bool(self.live.any())

    def id_filter(self, allowed: np.ndarray | None = None) -> IdFilter | None:
        """The ids of this segment's `allowed` rows (default: its live rows), None for all."""
        if allowed is None:
            if not self.live_filter_built:  # the common case: built once per generation
                self.live_filter, self.live_filter_built = self.id_filter(self.live), True
            return self.live_filter
        if allowed.all():
            return None
        lookup = self.segment.id_lookup
        return IdFilter.of(lookup.at(np.flatnonzero(allowed)), lookup.last + 1)


class SegmentCache:
    """Opened segments kept across generations, so reopening after a change reads only what is
    new; `checked` holds the files already hashed (see `file_checks.check_opened_files`)."""

    def __init__(self) -> None:
        self._opened: dict[tuple, tuple[Segment, VectorIndex] | LexicalPart] = {}
        self._lock = threading.Lock()
        self.checked: set[tuple] = set()

    def clear(self) -> None:
        with self._lock:
            self._opened.clear()
            self.checked.clear()

    def open(
        self, folder: IndexFolder, manifest: Manifest, position: int
    ) -> tuple[Segment, VectorIndex]:
        record = manifest.segments[position]
        key = (manifest.index_id, record.name, record.index_file)  # an overwrite reuses names
        with self._lock:
            if key not in self._opened:
                segment = Segment(folder.segment_dir(record.name), record)
                rescoring = is_rescoring(manifest.index)  # its lists stay in the file, mapped
                # A small added segment of an IVF index is searched exactly (ExactStandIn),
                # from its stored vectors: those are checked first.
                index = ExactStandIn.replacing(
                    segment.read_index(manifest.index.metric, mapped=rescoring),
                    self._checked_parts(folder, manifest, segment),
                )
                index = rescoring_index(  # each vector file hashed before a rescored read
                    index,
                    manifest.index,
                    segment,
                    lambda part: check_vector_files(folder, manifest, record, self.checked, [part]),
                )
                self._opened[key] = (segment, index)
            cached_segment, index = self._opened[key]
            cached_segment.id_lookup  # noqa: B018 - read once, shared by every generation's copy
        # The deleted rows differ between generations: the record must be this generation's.
        return cached_segment.in_generation(record), index

    def _checked_parts(
        self, folder: IndexFolder, manifest: Manifest, segment: Segment
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The segment's (ids, vectors), its vector files hashed before the first is read."""
        check_vector_files(folder, manifest, segment.record, self.checked)
        yield from segment.iter_parts()

    def lexical(self, folder: IndexFolder, manifest: Manifest, position: int) -> LexicalPart:
        """A segment's lexical part, read (and its files checked) on first use: a dense query
        never pays for it."""
        record = manifest.segments[position]
        key = (manifest.index_id, record.name, record.lexical_dir)
        with self._lock:
            if key not in self._opened:
                base = f"{SEGMENTS_DIR}/{record.name}/{record.lexical_dir}"
                for name in LEXICAL_FILES:
                    check_file(folder, manifest, f"{base}/{name}")
                self._opened[key] = LexicalPart.read(folder.path / base, record.rows)
            return self._opened[key]

    def keep_only(self, manifest: Manifest) -> None:
        wanted = {
            (manifest.index_id, record.name, file)
            for record in manifest.segments
            for file in (record.index_file, record.lexical_dir)
        }
        with self._lock:
            for key in [key for key in self._opened if key not in wanted]:
                del self._opened[key]
