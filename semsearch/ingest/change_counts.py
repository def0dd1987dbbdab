"""What `add` and `delete` report: counts in documents, the input's rows, whatever the chunking.

Why apart from the writers: a chunked index stores a document as many rows (its chunks), so
each change is counted twice, in the user's documents and in the index's chunks, and the
next generation records its live documents (`Manifest.documents`) so that `list` and `info`
never read metadata to say how many there are.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from semsearch.ingest.rows import LiveRows


@dataclass(frozen=True)
class ChangeResult:
    """What a change did, in documents (the input's rows, whatever the chunking), and the
    generation it wrote (None when nothing changed). On a chunked index, `chunks` gives the
    rows of the index it added, replaced, kept and deleted (None elsewhere: they are the
    documents)."""

    generation: int | None
    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    deleted: int = 0
    not_found: int = 0
    skipped_empty: int = 0
    chunks: dict[str, int] | None = None
    # Where an add's time went (`semsearch.phases`), as recorded: not what the change did, so
    # two results that did the same are equal whatever their timings.
    phases: dict | None = field(default=None, compare=False)

    def to_dict(self) -> dict:
        """The counts; `chunks` only where the index is chunked, `phases` where timed."""
        data = asdict(self)
        for key in ("chunks", "phases"):
            if data[key] is None:
                del data[key]
        return data


@dataclass(frozen=True)
class DocumentCounts:
    """An add's counts in documents, and what the next generation records of them."""

    counts: dict[str, int]  # added, replaced, unchanged
    chunked: bool
    after: dict  # {"documents": N} on a chunked index; {} (its rows) on another

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def chunks(self, **counts: int) -> dict[str, int] | None:
        """The same change in chunks where the index is chunked (None: they are the rows)."""
        return counts if self.chunked else None


def documents_changed(
    live: LiveRows, table: pa.Table, existing: np.ndarray, unchanged: np.ndarray, stale
) -> DocumentCounts:
    """An add's rows (`table`, each matched to the live row it replaces, `existing`, or -1)
    counted in documents; `stale` are the live chunks a changed document no longer has."""
    if live.manifest.chunks is None:
        counts = {
            "added": int((existing < 0).sum()),
            "replaced": int(((existing >= 0) & ~unchanged).sum()),
            "unchanged": int(unchanged.sum()),
        }
        return DocumentCounts(counts, False, {})
    counts, documents = _chunked_changes(live, table, existing, unchanged, stale)
    return DocumentCounts(counts, True, {"documents": documents})


def _chunked_changes(
    live: LiveRows, rows: pa.Table, existing: np.ndarray, unchanged: np.ndarray, stale: np.ndarray
) -> tuple[dict[str, int], int]:
    """An add's chunk rows counted as the user counts them, in documents: added (an id the
    index has no live chunk of), replaced (a chunk changed, or one is left over) and
    unchanged; and the index's live documents after it."""
    documents = rows.column(live.manifest.chunks.document_column).combine_chunks()
    before = pc.unique(live.documents())
    known = pc.is_in(documents, value_set=before.cast(documents.type)).to_numpy(
        zero_copy_only=False
    )
    changed = set(documents.filter(pa.array(~unchanged)).to_pylist())
    changed |= set(live.documents(stale).to_pylist())
    kept = set(documents.filter(pa.array(known)).to_pylist())
    added = len(set(documents.filter(pa.array(~known)).to_pylist()))
    replaced = len(kept & changed)
    counts = {"added": added, "replaced": replaced, "unchanged": len(kept) - replaced}
    return counts, len(before) + added
