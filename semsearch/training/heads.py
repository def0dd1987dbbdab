"""The trained classifier heads of `softmax` and `bce`, kept beside the model.

Search needs only the bi-encoder, but the head is what a pair classifier built on the
model would use, so it is saved in `<model>/head/`: `head.safetensors` (the head's
weights) and `config.json` (the objective, its options, the pair features it reads and
the class names). It lives in a subfolder so that it is no part of the encoder's weights
fingerprint. `load_head` rebuilds the objective around an encoder with the trained head.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from safetensors.torch import load_model, save_model
from torch import nn

from semsearch.errors import SemsearchError
from semsearch.losses import SiameseLoss, build_loss
from semsearch.models import BiEncoder

HEAD_DIR = "head"
HEAD_WEIGHTS = "head.safetensors"
HEAD_CONFIG = "config.json"
# The submodule that holds each objective's head.
HEAD_ATTRIBUTES = {"softmax": "classifier", "bce": "head", "l1-sigmoid": "head"}


def trained_head(loss: SiameseLoss, objective: str) -> nn.Module | None:
    attribute = HEAD_ATTRIBUTES.get(objective)
    return getattr(loss, attribute) if attribute else None


def save_head(
    loss: SiameseLoss,
    objective: str,
    options: dict[str, Any],
    folder: Path,
    label_names: list[str] | None = None,
) -> Path | None:
    """Write the head of `loss` into `folder/head/`; None for objectives without one."""
    head = trained_head(loss, objective)
    if head is None:
        return None
    target = folder / HEAD_DIR
    target.mkdir(parents=True, exist_ok=True)
    save_model(head, str(target / HEAD_WEIGHTS))
    config = {
        "objective": objective,
        "options": options,
        "parts": list(getattr(loss, "parts", ())),
        "label_names": label_names,
        "input": "the pair features of the two sentence vectors, concatenated in `parts` order",
        "output": "class logits" if objective == "softmax" else "one logit (match if > 0)",
    }
    (target / HEAD_CONFIG).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return target


def load_head(folder: str | Path, encoder: BiEncoder | None = None) -> SiameseLoss:
    """The objective saved with the model in `folder`, its head trained, around `encoder`
    (by default the model in `folder` itself)."""
    folder = Path(folder)
    config_file = folder / HEAD_DIR / HEAD_CONFIG
    if not config_file.is_file():
        raise SemsearchError(f"{folder} holds no trained head ({HEAD_DIR}/{HEAD_CONFIG})")
    config = json.loads(config_file.read_text(encoding="utf-8"))
    encoder = encoder or BiEncoder.load(str(folder), device="cpu", runtime="torch")
    loss = build_loss(config["objective"], encoder, **config["options"])
    head = trained_head(loss, config["objective"])
    load_model(head, str(folder / HEAD_DIR / HEAD_WEIGHTS), device=str(encoder.device))
    return loss
