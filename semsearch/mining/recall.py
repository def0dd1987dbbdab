"""How much of each text's exact neighbourhood the mined pairs hold: mining's recall.

Why here: the pairs are cut (top-k per text, a threshold, a structure such as IVF that may
miss neighbours), and the one honest check is against exact search over the same vectors.
"""

from __future__ import annotations

import numpy as np

from semsearch.ann.exact import ExactSearch
from semsearch.mining.pairs import MiningResult

SCORE_TOLERANCE = 1e-5


def mined_recall(result: MiningResult, sample: int, k: int, seed: int = 0) -> dict:
    """Share of a text's exact top-k neighbours that the mined pairs hold, over `sample`
    texts drawn at random.

    Tie-proof: a mined partner counts when it scores at least the exact k-th score, so a
    neighbour swapped for another of equal score (near-identical texts) is no loss.
    """
    collection = result.collection
    searched = np.arange(len(collection))
    if result.stats.searched_rows != len(collection):
        searched = collection.groups.first_rows
    vectors = collection.vectors(searched)
    sample = min(sample, len(searched))
    positions = np.sort(np.random.default_rng(seed).choice(len(searched), sample, replace=False))
    # each text finds itself (or a copy when copies crowd it out), which is dropped
    scores, found = ExactSearch(vectors, "dot").search(vectors[positions], k + 1)
    own = found == positions[:, None]
    own[~own.any(axis=1), -1] = True
    kth = scores[~own].reshape(sample, -1)[:, k - 1]
    del vectors
    rows = searched[positions]
    sides = np.concatenate([result.rows_a, result.rows_b])
    pair_scores = np.concatenate([result.scores, result.scores])
    inside = np.isin(sides, rows)
    which = np.searchsorted(rows, sides[inside])
    good = pair_scores[inside] >= kth[which] - SCORE_TOLERANCE
    held = np.minimum(np.bincount(which[good], minlength=sample), k)
    return {"sampled_texts": sample, "k": k, "recall": round(float(held.mean() / k), 4)}
