"""Dense, lexical and hybrid retrieval measured side by side, and the convex weight tuned.

Each side is a `Ranking` (scores and rows [queries, depth], rows numbering the documents),
so the same fusion code that answers `query --mode hybrid` (`semsearch.search.hybrid.fuse`) is the
one measured here. The rankings come from exact search over a BEIR folder (`exact_modes`)
or from an index (`index_modes`).

The convex combination's weight is data-dependent, so it is tuned, never guessed:
`tune_alpha` picks the alpha of the best nDCG@10 on dev queries, and `cross_validated_convex`
reports it honestly, each query ranked with the alpha tuned on the other fold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from semsearch.errors import SemsearchError
from semsearch.evaluation.base import TextEncoder
from semsearch.evaluation.beir import RetrievalData
from semsearch.evaluation.ir import DEPTH, dense_search, ir_metrics
from semsearch.search.hybrid import Fusion, Ranking, fuse
from semsearch.store.lexical import LexicalPart, LexicalSegment, build_bm25, lexical_search
from semsearch.store.manifest import LexicalSpec

ALPHA_GRID = tuple(np.round(np.linspace(0, 1, 21), 2))
TUNED_METRIC = "ndcg@10"


@dataclass(frozen=True)
class SideRankings:
    """The judged queries' dense and lexical rankings over `documents` (ids)."""

    queries: list[str]
    documents: list[str]
    dense: Ranking
    lexical: Ranking
    dense_higher_is_better: bool = True

    def hybrid(self, fusion: Fusion, depth: int = DEPTH) -> Ranking:
        return fuse(self.dense, self.lexical, depth, fusion, self.dense_higher_is_better)

    def rankings(self, fusion: Fusion, depth: int = DEPTH) -> dict[str, dict[str, list[str]]]:
        """Document-id rankings by mode, named as reports name them: `dense`, `lexical`,
        `hybrid adaptive 0.5`."""
        return {
            "dense": self.ids(self.dense),
            "lexical": self.ids(self.lexical),
            f"hybrid {_describe(fusion)}": self.ids(self.hybrid(fusion, depth)),
        }

    def ids(self, ranking: Ranking, lines: Sequence[int] | None = None) -> dict[str, list[str]]:
        """Document-id rankings of the queries at `lines` (default: all), for `ir_metrics`."""
        lines = range(len(self.queries)) if lines is None else lines
        return {
            self.queries[line]: [self.documents[row] for row in ranking[1][line] if row >= 0]
            for line in lines
        }


def exact_modes(
    encoder: TextEncoder,
    data: RetrievalData,
    spec: LexicalSpec | None = None,
    batch_size: int = 64,
    depth: int = DEPTH,
) -> SideRankings:
    """Exact cosine search and BM25 (`spec`, default settings) over a BEIR folder's corpus."""
    judged, scores, rows = dense_search(encoder, data, depth, batch_size)
    texts = [data.queries[query] for query in judged]
    spec = spec or LexicalSpec()
    part = LexicalPart.of(build_bm25(list(data.corpus.values()), spec))
    allowed = np.ones(part.documents, dtype=bool)
    lexical = lexical_search([LexicalSegment(part, 0)], spec, texts, depth, allowed)
    return SideRankings(judged, list(data.corpus), (scores, rows), lexical)


def index_modes(searcher, data: RetrievalData, depth: int = DEPTH) -> SideRankings:
    """Both sides as an index answers them (built from corpus.jsonl with --id-column _id)."""
    judged = [query for query in data.qrels if query in data.queries]
    texts = [data.queries[query] for query in judged]
    documents = list(data.corpus)
    position = {document: row for row, document in enumerate(documents)}
    sides = []
    for mode in ("dense", "lexical"):
        results = searcher.search(texts, k=depth, mode=mode)
        scores = np.full((len(texts), depth), np.nan, np.float32)
        rows = np.full((len(texts), depth), -1, np.int64)
        for line, hits in enumerate(results):
            for rank, hit in enumerate(hits):
                scores[line, rank], rows[line, rank] = hit.score, position.get(str(hit.id), -1)
        sides.append((scores, rows))
    higher = searcher.score_name == "score"
    return SideRankings(judged, documents, sides[0], sides[1], higher)


def index_rankings(
    searcher, queries: dict[str, str], qrels: dict[str, dict[str, int]]
) -> dict[str, list[str]]:
    """Document ids the index returns for each judged query, best first."""
    if searcher.manifest.source.id_column is None:
        raise SemsearchError(
            f"index {searcher.folder.name!r} has no id column: build it from "
            "corpus.jsonl with --id-column _id to rank BEIR queries with it"
        )
    judged = [query for query in qrels if query in queries]
    results = searcher.search([queries[query] for query in judged], k=DEPTH)
    return {query: [str(hit.id) for hit in hits] for query, hits in zip(judged, results)}


def mode_metrics(
    sides: SideRankings, qrels: Mapping[str, Mapping[str, int]], fusion: Fusion
) -> dict[str, dict[str, float]]:
    """IR metrics of dense, lexical and hybrid (as `fusion` says) over the same queries."""
    return {mode: ir_metrics(ids, qrels) for mode, ids in sides.rankings(fusion).items()}


def tune_alpha(
    sides: SideRankings,
    qrels: Mapping[str, Mapping[str, int]],
    lines: Sequence[int],
    grid: Sequence[float] = ALPHA_GRID,
    fusion: Fusion | None = None,
) -> tuple[float, dict[float, float]]:
    """The convex weight with the best nDCG@10 on the queries at `lines` (ties: the larger
    alpha, the dense side's), and the figure at each alpha tried."""
    base = fusion or Fusion("convex")
    figures = {}
    for alpha in grid:
        ranking = sides.hybrid(replace(base, method="convex", alpha=float(alpha)))
        judged = {sides.queries[line]: qrels[sides.queries[line]] for line in lines}
        figures[float(alpha)] = ir_metrics(sides.ids(ranking, lines), judged)[TUNED_METRIC]
    best = max(figures, key=lambda alpha: (round(figures[alpha], 10), alpha))
    return best, figures


def cross_validated_convex(
    sides: SideRankings,
    qrels: Mapping[str, Mapping[str, int]],
    folds: int = 2,
    seed: int = 0,
    fusion: Fusion | None = None,
) -> tuple[dict[str, float], list[float]]:
    """Convex fusion with alpha tuned on a dev split: the queries are cut into `folds`, each
    fold ranked with the alpha tuned on the others; the metrics over all queries and the
    alpha of each fold."""
    order = np.random.default_rng(seed).permutation(_useful_lines(sides, qrels))
    parts = [sorted(order[number::folds].tolist()) for number in range(folds)]
    base = fusion or Fusion("convex")
    rankings: dict[str, list[str]] = {}
    alphas = []
    for number, held_out in enumerate(parts):
        dev = [line for other, part in enumerate(parts) if other != number for line in part]
        alpha, _ = tune_alpha(sides, qrels, dev, fusion=base)
        alphas.append(alpha)
        ranking = sides.hybrid(replace(base, method="convex", alpha=alpha))
        rankings.update(sides.ids(ranking, held_out))
    return ir_metrics(rankings, qrels), alphas


def tuned_convex(
    sides: SideRankings, qrels: Mapping[str, Mapping[str, int]], fusion: Fusion | None
) -> tuple[dict, dict]:
    """Convex fusion's figures with alpha tuned on a dev split, and the alphas tuned."""
    base = Fusion("convex", depth=(fusion or Fusion()).depth)
    metrics, folds = cross_validated_convex(sides, qrels, fusion=base)
    alpha, figures = tune_alpha(sides, qrels, _useful_lines(sides, qrels), fusion=base)
    return (
        {"hybrid convex tuned": metrics},
        {"all_queries": alpha, "folds": folds, "ndcg@10_by_alpha": figures},
    )


def _useful_lines(sides: SideRankings, qrels: Mapping[str, Mapping[str, int]]) -> list[int]:
    """The lines of the queries with at least one relevant document: those tuning can use."""
    return [
        line
        for line, query in enumerate(sides.queries)
        if any(grade > 0 for grade in qrels.get(query, {}).values())
    ]


def _describe(fusion: Fusion) -> str:
    return (
        f"rrf k={fusion.rrf_k}" if fusion.method == "rrf" else f"{fusion.method} {fusion.alpha:g}"
    )
