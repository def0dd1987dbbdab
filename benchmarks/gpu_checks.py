"""Correctness of the CUDA encoding path, checked on a GPU (CI has none).

Each check prints its figure and PASS or FAIL; the exit code counts the failures. `--device
cpu` exercises the script's paths before a GPU is lent (its figures then say nothing of CUDA).

    python3 benchmarks/gpu_checks.py --model /tmp/model --data-dir .gpu/data
"""

from __future__ import annotations

import sys

import numpy as np
import torch
from common import base_parser, corpus_texts, environment, record, reference_model_path

from semsearch.evaluation.similarity import row_cosines
from semsearch.models import BiEncoder


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model folder (default: the bundled one)")
    parser.add_argument("--texts", type=int, default=5_000)
    parser.add_argument(
        "--device",
        choices=["cuda", "cpu"],
        default="cuda",
        help="the device checked against the CPU (cpu: a smoke run)",
    )
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA GPU is visible: run this on a GPU machine, or pass --device cpu")
    model = str(args.model or reference_model_path())
    texts = corpus_texts(args.data_dir, "pypi", args.texts)
    cpu = BiEncoder.load(model, device="cpu", runtime="torch")
    gpu = BiEncoder.load(model, device=args.device, runtime="torch")
    reference = cpu.encode(texts, batch_size=64)
    checks: dict[str, tuple[float, bool]] = {}

    fp32 = gpu.encode(texts, batch_size=64, precision="fp32")
    gap = float(np.abs(fp32 - reference).max())
    checks[f"{args.device} fp32 vs cpu fp32: max |diff|"] = (gap, gap < 1e-3)
    for label, vectors in {
        f"{args.device} default (auto precision, device batches)": gpu.encode(texts),
        f"{args.device} bf16, batch 7": gpu.encode(texts, batch_size=7, precision="bf16"),
        f"{args.device} bf16, 4096 rows / 2048 tokens": gpu.encode(
            texts, batch_size=4096, max_batch_tokens=2048, precision="bf16"
        ),
    }.items():
        agreement = row_cosines(vectors, reference)
        checks[f"{label} vs cpu fp32: mean cosine"] = (
            float(agreement.mean()),
            agreement.mean() >= 0.999,
        )
        checks[f"{label} vs cpu fp32: min cosine"] = (
            float(agreement.min()),
            agreement.min() >= 0.995,
        )

    # One optimiser step under autocast, as training does: the bf16 copy must follow it.
    before = gpu.encode(texts[:512], precision="bf16")
    optimizer = torch.optim.AdamW(gpu.parameters(), lr=1e-3)
    gpu.train()
    with torch.autocast(args.device, dtype=torch.bfloat16):
        first = gpu(*gpu.features(texts[:32]))
        second = gpu(*gpu.features(texts[32:64]))
        loss = ((first * second).sum(dim=1) - 1.0).pow(2).mean()
    loss.backward()
    optimizer.step()
    gpu.eval()
    after = gpu.encode(texts[:512], precision="bf16")
    after_fp32 = gpu.encode(texts[:512], precision="fp32")
    moved = float(1 - row_cosines(after, before).mean())
    checks["bf16 vectors moved after a training step: 1 - mean cosine"] = (moved, moved > 1e-4)
    follow = row_cosines(after, after_fp32)
    checks["bf16 vs fp32 after the step: min cosine"] = (float(follow.min()), follow.min() >= 0.995)

    failures = 0
    for name, (value, ok) in checks.items():
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {value:.6g}")
    payload = {
        "benchmark": "gpu_checks",
        "environment": environment(),
        "texts": len(texts),
        "checks": {
            name: {"value": value, "pass": bool(ok)} for name, (value, ok) in checks.items()
        },
    }
    record(args, "gpu_checks", payload, args.device)
    sys.exit(failures)


if __name__ == "__main__":
    main()
