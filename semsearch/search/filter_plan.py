"""How a `--where` filter is searched: exactly over the rows it keeps, or approximately with
its search parameters widened, FAISS skipping the rows it drops or them taken out afterwards.

Why: each is the cheapest at some share of the rows (measured on 840,708 PyPI summaries,
one FAISS thread, held-out queries: `benchmarks/filtered_family.py` through semsearch,
a probe on FAISS alone, `results/filtered_faiss_probe.jsonl`; docs/search.md). Exact
search costs about what an IVF list scan costs a row, so it wins while the filter keeps no
more rows than the unfiltered search scores, and its recall is 1. Otherwise the filter's
nearest kept rows lie farther out than the unfiltered query's nearest rows, so the
parameters widen by sqrt(`FILTER_WIDENING_BASE` / share) (a 10 % filter: x2, recall 0.957
against 0.960 unfiltered; 3/share, the rule before, widened it 30x). From `POST_FILTER_SHARE`
up, FAISS's id check on every scanned code costs more than it saves (IVF4096,SQfp16 at
nprobe 116, a 50 % filter: 1.99x the unfiltered p50 with it, 1.13x without), so the search
runs unfiltered, `POST_FILTER_DEPTH` x k / share deep, and the kept rows are taken; a query
left short of k is searched again with the check. A `disk` index keeps the rule measured on
its 20M rows: parameters x3/share and oversample by the square root of that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from semsearch.ann.factory import OVERSAMPLE
from semsearch.search.limits import MAX_EF_SEARCH, MAX_OVERSAMPLE

# Exact search over a filter's rows is chosen while they are no more than EXACT_COST_RATIO x
# the rows the unfiltered approximate search scores (an IVF index: its probed share of rows;
# a graph: about HNSW_ROWS_PER_EF rows per efSearch step, HNSW32's 64 level-0 links each a
# random read), and no more than EXACT_FILTER_ROWS or EXACT_FILTER_SHARE of the live rows
# (the kept vectors are gathered into memory, once per filter). At 841k rows, FAISS alone:
# 16,800 rows (2 %) exact in 0.70 ms, 84,000 (10 %) 4.6 ms, against 1.05 ms unfiltered (IVF).
EXACT_COST_RATIO = 1.5
HNSW_ROWS_PER_EF = 128
EXACT_FILTER_SHARE = 0.01
EXACT_FILTER_ROWS = 50_000
# Parameters x sqrt(FILTER_WIDENING_BASE / share), at least 1 (`filtered_search` at 841k,
# a 5 % filter on IVF: 0.2 gave recall 0.946 against 0.960 unfiltered; 0.4 gives 0.959).
FILTER_WIDENING_BASE = 0.4
# A filter keeping at least POST_FILTER_SHARE of the rows: the unfiltered search for
# POST_FILTER_DEPTH x k / share results, the kept ones taken (from 10 % this left HNSW32 at
# recall 0.926 against 0.941 unfiltered at 10 %: its nearest 200 rows held too few of the
# filter's nearest 10).
POST_FILTER_SHARE = 0.2
POST_FILTER_DEPTH = 2.0
# ... and a `disk` index: x RESCORING_WIDENING / share, oversample x its square root (20M
# rows, a filter keeping 1 in 20, oversample 4 -> 8/16/32: recall@10 0.872 -> 0.919/0.944/0.954).
RESCORING_WIDENING = 3.0
MAX_PARAMETER_SCALE = 64

EXACT = "exact over the rows it keeps"


class PlannedSegment(Protocol):
    """What the planner needs of an opened segment's index."""

    @property
    def size(self) -> int: ...

    def parameter_ceiling(self) -> int | None: ...


@dataclass(frozen=True)
class FilterPlan:
    """How to search a filter: `exact`; else an approximate search with `params` for `depth`
    results, FAISS skipping the dropped rows, or (`then_kept`) them taken out afterwards, a
    query left short searched again with FAISS skipping them."""

    strategy: str
    exact: bool = False
    params: dict[str, int] = field(default_factory=dict)
    depth: int = 0
    then_kept: bool = False


def plan_filter(
    matches: int,
    live_rows: int,
    k: int,
    params: dict[str, int],
    indexes: list[PlannedSegment],
    rescoring: bool,
) -> FilterPlan:
    """The cheapest way to search a filter keeping `matches` of `live_rows` (see the module
    docstring), given the unfiltered search's `params` over the segments' `indexes`."""
    share = matches / live_rows
    scored = _rows_scored(params, indexes)
    bound = max(EXACT_FILTER_ROWS, EXACT_FILTER_SHARE * live_rows)
    if matches <= bound and matches <= EXACT_COST_RATIO * scored:
        return FilterPlan(EXACT, exact=True)
    if rescoring:
        scale = min(max(1.0, RESCORING_WIDENING / share), MAX_PARAMETER_SCALE)
        widened = widen(params, scale, indexes, oversample_scale=math.sqrt(scale))
        return FilterPlan(f"approximate, parameters widened x{scale:.3g}", params=widened, depth=k)
    scale = min(max(1.0, math.sqrt(FILTER_WIDENING_BASE / share)), MAX_PARAMETER_SCALE)
    widened = widen(params, scale, indexes)
    strategy = f"approximate, parameters widened x{scale:.3g}" if scale > 1 else "approximate"
    if share < POST_FILTER_SHARE:
        return FilterPlan(strategy, params=widened, depth=k)
    depth = min(math.ceil(POST_FILTER_DEPTH * k / share), live_rows)
    strategy += f", over every row for the nearest {depth}, then the kept ones"
    return FilterPlan(strategy, params=widened, depth=depth, then_kept=True)


def widen(
    params: dict[str, int],
    scale: float,
    indexes: list[PlannedSegment],
    oversample_scale: float = 1.0,
) -> dict[str, int]:
    """Search parameters `scale` times deeper (nprobe up to the most lists of any segment),
    a rescoring index's oversample `oversample_scale` times, within their bounds."""
    widened = dict(params)
    if params.get(OVERSAMPLE):
        widened[OVERSAMPLE] = min(math.ceil(params[OVERSAMPLE] * oversample_scale), MAX_OVERSAMPLE)
    if "nprobe" in params:
        ceilings = [index.parameter_ceiling() or 0 for index in indexes]
        widened["nprobe"] = min(math.ceil(params["nprobe"] * scale), max(ceilings, default=1) or 1)
    if "efSearch" in params:
        widened["efSearch"] = min(math.ceil(params["efSearch"] * scale), MAX_EF_SEARCH)
    return widened


def _rows_scored(params: dict[str, int], indexes: list[PlannedSegment]) -> float:
    """About how many rows the unfiltered approximate search scores."""
    scored = 0.0
    for index in indexes:
        lists = index.parameter_ceiling()
        if "nprobe" in params and lists:
            scored += index.size * min(params["nprobe"], lists) / lists
        elif "efSearch" in params:
            scored += min(index.size, params["efSearch"] * HNSW_ROWS_PER_EF)
        else:
            scored += index.size
    return scored
