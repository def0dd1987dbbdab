"""`semsearch tune NAME`: re-tune a built index's search parameter and record it in its manifest."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from semsearch.index.factory import prepare_vectors
from semsearch.index.store import IndexFolder
from semsearch.index.tune import (
    DEFAULT_TUNING_QUERIES,
    TuningResult,
    exact_search,
    stored_vectors,
    tune_index,
)
from semsearch.models.bi_encoder import BiEncoder


def retune_folder(
    folder: IndexFolder,
    target: float,
    queries: list[str] | None = None,
    k: int = 10,
    sample: int = DEFAULT_TUNING_QUERIES,
    encoder: BiEncoder | None = None,
) -> TuningResult:
    """Tune on the index's own vectors (or on `queries`) and rewrite the manifest's parameter."""
    manifest = folder.manifest()
    index = folder.read_index(manifest)
    metric = manifest.index.metric
    if queries:
        encoder = encoder or BiEncoder.load(manifest.model.name)
        query_vectors, query_rows = prepare_vectors(encoder.encode(queries), metric), None
    else:
        rng = np.random.default_rng(1)
        query_rows = np.sort(
            rng.choice(index.ntotal, size=min(sample, index.ntotal), replace=False)
        )
        query_vectors = None
    chunks = stored_vectors(index)  # also checks the index keeps its vectors
    if query_vectors is None:
        query_vectors = np.stack([index.reconstruct(int(row)) for row in query_rows])
    extra = 0 if query_rows is None else 1
    scores, exact = exact_search(query_vectors, chunks, k + extra, metric)
    result = tune_index(index, query_vectors, exact, target, k, query_rows, exact_scores=scores)
    params = {**manifest.index.search_params, result.parameter: result.value}
    replace(
        manifest, index=replace(manifest.index, search_params=params), tuning=result.to_dict()
    ).write(folder.path)
    return result
