"""int8 dynamic quantisation of a transformer's linear layers, for CPU inference.

Why: one short query on CPU is bound by reading the weights (about 90 MB for MiniLM-L6 in
fp32), not by arithmetic; int8 weights are a quarter of that. It changes the vectors a
little (its STS-B cost is measured in benchmarks/RESULTS.md), so it is off unless asked,
and an index records it so that queries use the same encoder.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from semsearch.errors import SemsearchError

QUANTIZATION_MODES = ("int8",)


def check_quantization(mode: str | None) -> None:
    if mode is not None and mode not in QUANTIZATION_MODES:
        raise SemsearchError(
            f"unknown quantisation {mode!r}: choose {', '.join(QUANTIZATION_MODES)} or leave it out"
        )


def quantize_dynamic_int8(module: nn.Module, device: torch.device) -> nn.Module:
    """`module` with every nn.Linear replaced by an int8 dynamically quantised one (CPU only).

    Weights get one scale per output channel rather than one per matrix: on the default
    model that lifts the mean cosine to the fp32 vectors from 0.945 to 0.980 (Debian long
    descriptions) for about 5 % of the speed (benchmarks/RESULTS.md).
    """
    if device.type != "cpu":
        raise SemsearchError(
            "int8 quantisation runs on CPU only: pass --device cpu, or drop --quantize on a GPU"
        )
    with warnings.catch_warnings():
        # torch.ao's eager quantisation is marked deprecated in favour of torchao, but it is
        # what ships with torch and still runs on fbgemm; torchao would be a new dependency.
        warnings.simplefilter("ignore")
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        return quantize_dynamic(module, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8)
