"""The transformer compiled by torch.compile with frozen weights, for warm one-query latency.

Why: one short query on CPU spends most of its time streaming the weights through small
matrix products, plus Python's cost per layer. Inductor with frozen weights prepacks them
for oneDNN and removes the Python: measured 11.6 -> 9.3 ms per query on one core and
9.9 -> 6.8 ms on two (docs/results-history.md), same vectors to ~1e-6. It costs 15-30 s of
compilation on the first query and turns the weights into constants, so it is for serving
an index, never for training; it does not speed up large batches (measured slower).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedModel


class FrozenCompiled(nn.Module):
    """`transformer` behind torch.compile, every call compiled with `freezing` on."""

    def __init__(self, transformer: PreTrainedModel) -> None:
        super().__init__()
        self.compiled = torch.compile(transformer, dynamic=True)
        self.config = transformer.config

    def forward(self, **inputs: torch.Tensor):
        # The inductor option is read when a graph is compiled, which happens on the first
        # call and again for any new input shape: so every call runs under it.
        from torch._inductor import config as inductor

        with inductor.patch(freezing=True):
            return self.compiled(**inputs)
