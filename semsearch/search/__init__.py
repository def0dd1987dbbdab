"""Searching an index: the searcher, one generation opened for search, filters, limits, and
hybrid (dense + BM25) ranking.

Names are imported on first use, so that `semsearch.search.limits` stays light.
"""

from __future__ import annotations

from semsearch.lazy_exports import lazy_getattr

_NAMES = {
    "Hit": "semsearch.search.searcher",
    "Searcher": "semsearch.search.searcher",
}
__all__ = list(_NAMES)
__getattr__ = lazy_getattr(__name__, _NAMES)
