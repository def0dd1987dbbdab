"""`online-contrastive`: the contrastive loss on the batch's hard pairs only."""

from __future__ import annotations

import torch

from semsearch.losses.contrastive import ContrastiveLoss
from semsearch.losses.distances import pair_distance


class OnlineContrastiveLoss(ContrastiveLoss):
    """Contrastive loss restricted to the pairs the model currently gets wrong: matches
    farther apart than the closest non-match, and non-matches closer than the farthest
    match. Easy pairs carry no gradient, so training spends itself on the hard ones.

    Inputs: columns `sentence1`, `sentence2`; labels `label`, 1 for a match and 0 otherwise.

    Args:
        encoder: the bi-encoder being trained.
        distance: `cosine` (1 - cosine similarity, in [0, 2]) or `euclidean`.
        margin: hard non-matches farther apart than this cost nothing.
    """

    def compute(self, embeddings: list[torch.Tensor], labels: torch.Tensor | None) -> torch.Tensor:
        """Contrastive cost of the hard pairs, averaged over the batch (0 when none is hard)."""
        u, v = embeddings
        labels = self.labels_like(labels, u)
        distances = pair_distance(u, v, self.distance).float()
        matches, non_matches = distances[labels == 1], distances[labels == 0]
        # With only one kind of pair in the batch, compare against its own mean instead.
        farthest_match = matches.max() if len(matches) else non_matches.mean()
        closest_non_match = non_matches.min() if len(non_matches) else matches.mean()
        hard_matches = matches[matches > closest_non_match]
        hard_non_matches = non_matches[non_matches < farthest_match]
        costs = torch.cat([hard_matches.pow(2), torch.relu(self.margin - hard_non_matches).pow(2)])
        # Divided by the batch size, not the hard-pair count: easy pairs count as zero cost,
        # so the value does not jump when a step moves pairs out of the hard set.
        return costs.sum() / len(labels)
