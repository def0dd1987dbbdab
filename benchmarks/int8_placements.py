"""Which linear layers can be int8 while the vectors still agree with fp32?

Why: the encode goal allows speed only with vectors within mean cosine 0.999 (min 0.995) of
sentence-transformers' fp32 output. This quantises different sets of the default model's
linear layers (per-tensor or per-channel weight scales) and reports, against the fp32
vectors, the cosine on Debian long descriptions and PyPI summaries and the Debian time.

    python benchmarks/int8_placements.py --threads 1
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import torch
from common import (
    add_threads_option,
    base_parser,
    corpus_texts,
    environment,
    markdown_table,
    record,
    set_threads,
)
from torch import nn

from semsearch.evaluation.similarity import row_cosines
from semsearch.models import BiEncoder

# Layer-name fragments; "output.dense" matches the attention output and the FFN's second layer.
EVERY, FFN_IN, OUTPUTS, QKV = ("dense", "query", "key", "value"), ("intermediate.dense",), (
    "output.dense",), ("query", "key", "value")  # fmt: skip
PLACEMENTS = {  # name: (layer-name fragments, per-channel weight scales)
    "every linear layer, per-tensor": (EVERY, False),
    "every linear layer, per-channel": (EVERY, True),
    "the FFN's first layer, per-channel": (FFN_IN, True),
    "both FFN layers and the attention output, per-channel": (FFN_IN + OUTPUTS, True),
    "Q, K, V and the FFN's first layer, per-channel": (FFN_IN + QKV, True),
}


def quantised(names: tuple[str, ...], per_channel: bool) -> BiEncoder:
    from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig

    encoder = BiEncoder.load("default", device="cpu")
    qconfig = per_channel_dynamic_qconfig if per_channel else default_dynamic_qconfig
    layers = {name: qconfig for name, module in encoder.transformer.named_modules()
              if isinstance(module, nn.Linear) and any(part in name for part in names)}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.ao.quantization import quantize_dynamic

        encoder.transformer = quantize_dynamic(encoder.transformer, layers, dtype=torch.qint8)
    return encoder


def cosines(a: np.ndarray, b: np.ndarray) -> str:
    """`mean / min` of the row-wise cosines of two sets of unit vectors."""
    values = row_cosines(a, b)
    return f"{values.mean():.4f} / {values.min():.4f}"


def timed(encoder: BiEncoder, texts: list[str]) -> tuple[float, np.ndarray]:
    encoder.encode(texts[:20], batch_size=32)
    started = time.perf_counter()
    vectors = encoder.encode(texts, batch_size=32)
    return round(time.perf_counter() - started, 2), vectors


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--debian-rows", type=int, default=300)
    parser.add_argument("--pypi-rows", type=int, default=1000)
    add_threads_option(parser)
    args = parser.parse_args()
    set_threads(args.threads)
    debian = corpus_texts(args.data_dir, "debian", args.debian_rows)
    pypi = corpus_texts(args.data_dir, "pypi", args.pypi_rows)
    base = BiEncoder.load("default", device="cpu")
    base_seconds, debian_ref = timed(base, debian)
    pypi_ref = base.encode(pypi, batch_size=32)
    rows = [["none (fp32)", "1.0 / 1.0", "1.0 / 1.0", base_seconds]]
    for name, (parts, per_channel) in PLACEMENTS.items():
        encoder = quantised(parts, per_channel)
        seconds, vectors = timed(encoder, debian)
        pypi_cosines = cosines(encoder.encode(pypi, batch_size=32), pypi_ref)
        rows.append([name, cosines(vectors, debian_ref), pypi_cosines, seconds])
        print(rows[-1], flush=True)
    print(markdown_table(["what is int8", "Debian cosine mean / min", "PyPI cosine mean / min",
                          f"Debian seconds ({len(debian)} texts)"], rows))  # fmt: skip
    payload = {"benchmark": "int8_placements", "environment": environment(), "rows": rows,
               "debian_rows": len(debian), "pypi_rows": len(pypi)}  # fmt: skip
    record(args, "int8_placements", payload)


if __name__ == "__main__":
    main()
