"""Upper bounds on what one search call may cost, and what happens beyond each.

Why: every per-call parameter used to reach FAISS as given: `efSearch` 10**9 on a 20-row
HNSW index took 32 s and 8 GB. A value is clamped (with a note in the result) where the
bound is what the index could use anyway, and refused in one line (`SemsearchError`, a 4xx
from a server) where obeying would drop part of the request or no value is meant (below 1):

- `k`: clamped to the live rows and to `MAX_K`, with a note either way.
- `efSearch` (HNSW): clamped to max(k, min(rows of the largest segment, MAX_EF_SEARCH));
  `nprobe` (IVF) to the number of lists; `oversample` (`disk`) to `MAX_OVERSAMPLE`.
- A parameter no segment takes (`nprobe` on HNSW): dropped with a note, so a client that
  sends one `nprobe` to every index gets answers, not errors.
- More than `MAX_QUERIES_PER_CALL` queries or `MAX_RESULTS_PER_CALL` result slots: refused
  (`queries_per_call` says how many fit).
- Each query is cut to `MAX_QUERY_CHARS` characters, with a note: the encoder reads at most
  512 tokens of at most 100 characters each, so a megabyte text no longer costs its whole
  tokenisation. Text that is not Unicode (a lone surrogate) is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from semsearch.errors import SemsearchError

if TYPE_CHECKING:
    from semsearch.search.open_segments import OpenSegment

MAX_K = 10_000
MAX_EF_SEARCH = 8192
MAX_OVERSAMPLE = 256
MAX_QUERIES_PER_CALL = 100_000
MAX_RESULTS_PER_CALL = 2_000_000
MAX_QUERY_CHARS = 20_000


@dataclass(frozen=True)
class Bounded:
    """The values a call runs with, after its bounds, and a note for each value changed."""

    k: int
    params: dict[str, int]
    notes: list[str] = field(default_factory=list)


def bound_texts(queries: Sequence[str]) -> tuple[list[str], list[str]]:
    """The queries as they will be searched (each cut to MAX_QUERY_CHARS) and a note per cut;
    refuses a call of no query, an empty one, too many, or text that is not Unicode."""
    if isinstance(queries, str):
        raise SemsearchError("search takes a list of queries: wrap a single text in a list")
    if not queries or any(not isinstance(q, str) or not q.strip() for q in queries):
        raise SemsearchError("a query is empty: give some text to search for")
    if len(queries) > MAX_QUERIES_PER_CALL:
        raise SemsearchError(
            f"{len(queries):,} queries in one call; the limit is {MAX_QUERIES_PER_CALL:,}: "
            "search them in several calls"
        )
    texts, notes = [], []
    for number, query in enumerate(queries, start=1):
        _check_unicode(number, query)
        if len(query) > MAX_QUERY_CHARS:
            notes.append(
                f"query {number} cut to its first {MAX_QUERY_CHARS:,} of {len(query):,} "
                "characters (the model reads only its first few hundred tokens)"
            )
            query = query[:MAX_QUERY_CHARS]
        texts.append(query)
    return texts, notes


def _check_unicode(number: int, query: str) -> None:
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as exc:
        character = query[exc.start]
        raise SemsearchError(
            f"query {number} is not valid text: it holds a lone surrogate (U+{ord(character):04X}) "
            f"at character {exc.start}, which is what bytes that are not UTF-8 become: "
            "pass UTF-8 text"
        ) from None


def queries_per_call(k: int) -> int:
    """How many queries one call may carry at `k` results each (at least one)."""
    return max(1, min(MAX_QUERIES_PER_CALL, MAX_RESULTS_PER_CALL // max(1, min(k, MAX_K))))


def bound_search(
    k: int,
    params: dict[str, int],
    live_rows: int,
    segments: Sequence[OpenSegment],
    queries: int = 1,
) -> Bounded:
    """`k` and `params` (nprobe, efSearch) bounded by what an index of `live_rows` rows in
    `segments` can use; see the module docstring for which are clamped and which refused."""
    if k < 1:
        raise SemsearchError(f"-k must be at least 1, not {k}")
    notes = []
    usable_k = min(k, max(live_rows, 1), MAX_K)
    if k > MAX_K and usable_k == MAX_K:
        notes.append(f"k {k:,} clamped to {MAX_K:,} (the most one call returns)")
    elif k > usable_k and live_rows:  # an empty index: no note, the empty result says it
        notes.append(f"k {k:,} clamped to {usable_k:,} (the index holds {live_rows:,} rows)")
    if queries * usable_k > MAX_RESULTS_PER_CALL:
        raise SemsearchError(
            f"{queries:,} queries x k {usable_k:,} is more than {MAX_RESULTS_PER_CALL:,} results "
            f"in one call: send at most {queries_per_call(usable_k):,} queries per call"
        )
    bounded = dict(params)
    for name in _unused(bounded, segments):
        notes.append(f"{name} {bounded.pop(name):,} ignored: {_UNUSED_REASON}")
    ceilings = {
        "efSearch": _ef_ceiling(usable_k, segments),
        "nprobe": _nprobe_ceiling(segments),
        "oversample": (MAX_OVERSAMPLE, "the most candidates re-scored per result"),
    }
    for name, (ceiling, reason) in ceilings.items():
        value = bounded.get(name)
        if value is None or ceiling is None or value < 1 or value <= ceiling:
            continue  # below 1 is refused where the parameter is applied (VectorIndex)
        bounded[name] = ceiling
        notes.append(f"{name} {value:,} clamped to {ceiling:,} ({reason})")
    return Bounded(usable_k, bounded, notes)


_UNUSED_REASON = (
    "this index has no use for it (nprobe is for IVF indexes, efSearch for HNSW, oversample "
    "for disk; a flat index searches every row)"
)


def _unused(params: dict[str, int], segments: Sequence[OpenSegment]) -> list[str]:
    """The parameters given (1 or more: below 1 is refused) that no segment's index takes."""
    taken = set().union(*(segment.index.search_parameters() for segment in segments))
    return [name for name, value in params.items() if value >= 1 and segments and name not in taken]


def _ef_ceiling(k: int, segments: Sequence[OpenSegment]) -> tuple[int, str]:
    largest = max((segment.index.size for segment in segments), default=0)
    if k >= min(largest, MAX_EF_SEARCH):
        return k, "k: HNSW needs no longer candidate list"
    if largest <= MAX_EF_SEARCH:
        return (
            largest,
            f"HNSW's candidate list holds at most the largest segment's {largest:,} rows",
        )
    return MAX_EF_SEARCH, "the longest candidate list one search may use"


def _nprobe_ceiling(segments: Sequence[OpenSegment]) -> tuple[int | None, str]:
    lists = [ceiling for s in segments if (ceiling := s.index.parameter_ceiling()) is not None]
    return (max(lists) if lists else None), "the index's number of IVF lists: it visits them all"
