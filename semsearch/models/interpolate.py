"""Weight-space interpolation between a model and a fine-tuned copy of it (WiSE-FT).

Why: fine-tuning on one task moves the weights away from what made the model good at
others; on STS-B, a bi-encoder gains similarity and loses retrieval. Mixing the two sets
of weights, base + w * (tuned - base), keeps much of the gain and gives back less of the
loss (Wortsman et al., 2022, "Robust fine-tuning of zero-shot models"): one knob, chosen on
dev data, instead of another training run. The result is an ordinary model folder.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import torch
from torch import nn

from semsearch.errors import SemsearchError
from semsearch.models.bi_encoder import BiEncoder

log = logging.getLogger(__name__)

RECORD_FILE = "interpolation.json"


def interpolate_models(base: str, tuned: str, weight: float, output: Path) -> BiEncoder:
    """Write `base + weight * (tuned - base)` as a model folder at `output` (the tuned model's
    tokenizer, pooling and settings); refuses models of different shapes."""
    if not 0.0 <= weight <= 1.0:
        raise SemsearchError(
            f"--weight must lie between 0 (the base) and 1 (the tuned model), not {weight}"
        )
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise SemsearchError(
            f"{output} already exists and is not an empty folder: choose another -o"
        )
    base_encoder = BiEncoder.load(base, device="cpu", runtime="torch")  # weights to mix
    mixed = BiEncoder.load(tuned, device="cpu", runtime="torch")
    _mix(base_encoder.transformer, mixed.transformer, weight, base, tuned)
    _mix(base_encoder.pooling, mixed.pooling, weight, base, tuned)  # attention pooling's scorer
    staged = output.with_name(f".{output.name}.partial-{os.getpid()}")
    shutil.rmtree(staged, ignore_errors=True)
    try:
        mixed.save(staged)
        record = {"base": base, "tuned": tuned, "weight": weight}
        (staged / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        if output.exists():
            output.rmdir()  # empty, checked above
        output.parent.mkdir(parents=True, exist_ok=True)
        staged.rename(output)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    log.info("wrote %s: %s + %.3f * (%s - %s)", output, base, weight, tuned, base)
    return mixed


def _mix(base: nn.Module, tuned: nn.Module, weight: float, base_name: str, tuned_name: str) -> None:
    """Move every floating-point tensor of `tuned` to base + weight * (tuned - base), in place."""
    base_state, tuned_state = base.state_dict(), tuned.state_dict()
    different = sorted(
        name
        for name in base_state.keys() | tuned_state.keys()
        if name not in base_state
        or name not in tuned_state
        or base_state[name].shape != tuned_state[name].shape
    )
    if different:
        raise SemsearchError(
            f"models {base_name!r} and {tuned_name!r} differ in shape ({len(different)} tensors, "
            f"e.g. {different[0]}): interpolate a model with a fine-tuned copy of itself"
        )
    with torch.no_grad():
        for name, tensor in tuned_state.items():
            if tensor.is_floating_point():
                tensor.copy_(torch.lerp(base_state[name].to(tensor.dtype), tensor, weight))
