"""Benchmarks a user can run with `semsearch bench`, each a library function first."""

from __future__ import annotations

from semsearch.bench.pairs import PairsBenchOptions, PairsBenchResult, run_pairs_bench
from semsearch.bench.report import pairs_markdown, write_pairs_result
from semsearch.bench.sentences import SentenceSet, load_sentences

__all__ = [
    "PairsBenchOptions",
    "PairsBenchResult",
    "SentenceSet",
    "load_sentences",
    "pairs_markdown",
    "run_pairs_bench",
    "write_pairs_result",
]
