"""An adapter trained on frozen, pre-encoded vectors, for users who only have vectors.

When the texts (or the model, or the compute to fine-tune it) are out of reach but their
sentence vectors and some labelled pairs are not, a small MLP on top of the vectors can
still bend the space: `x -> x + W2 relu(W1 x)`, L2-normalised. W2 starts at zero, so the
untrained adapter is the identity and training starts from the vectors as they are. It
learns with the same objectives as the bi-encoder (`contrastive`, `online-contrastive`
or `bce`), through their `compute(embeddings, labels)`; apply it to the stored vectors and
to query vectors alike with `adapter.transform(vectors)`.

Saved as `adapter.safetensors` and `adapter.json` (plus `head/` for bce).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_model, save_model
from torch import nn

from semsearch.errors import SemsearchError
from semsearch.losses import SiameseLoss, build_loss
from semsearch.training.heads import save_head
from semsearch.training.schedule import make_optimizer
from semsearch.training.vectors import VectorPairs

ADAPTER_WEIGHTS = "adapter.safetensors"
ADAPTER_CONFIG = "adapter.json"
ADAPTER_OBJECTIVES = ("contrastive", "online-contrastive", "bce")


class VectorAdapter(nn.Module):
    """A residual MLP over sentence vectors; the identity until trained.

    It has the `dimension` and `device` an objective asks of its encoder, so
    `build_loss("bce", adapter)` sizes its head to the adapter's output.
    """

    def __init__(self, dimension: int, hidden: int | None = None, normalize: bool = True) -> None:
        super().__init__()
        self.hidden = hidden or dimension
        self.normalize = normalize
        self.mlp = nn.Sequential(
            nn.Linear(dimension, self.hidden), nn.ReLU(), nn.Linear(self.hidden, dimension)
        )
        nn.init.zeros_(self.mlp[2].weight)
        nn.init.zeros_(self.mlp[2].bias)

    @property
    def dimension(self) -> int:
        return self.mlp[0].in_features

    @property
    def device(self) -> torch.device:
        return self.mlp[0].weight.device

    def forward(self, vectors: torch.Tensor) -> torch.Tensor:
        adapted = vectors + self.mlp(vectors)
        return nn.functional.normalize(adapted, dim=1) if self.normalize else adapted

    @torch.inference_mode()
    def transform(self, vectors: np.ndarray, batch_size: int = 4096) -> np.ndarray:
        """Adapted copies of `vectors` (float32 [rows, dimension])."""
        output = np.empty_like(vectors, dtype=np.float32)
        for start in range(0, len(vectors), batch_size):
            block = torch.from_numpy(
                np.asarray(vectors[start : start + batch_size], dtype=np.float32)
            )
            output[start : start + batch_size] = self(block.to(self.device)).cpu().numpy()
        return output

    def save(self, folder: str | Path, extra: dict[str, Any] | None = None) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_model(self, str(folder / ADAPTER_WEIGHTS))
        config = {
            "dimension": self.dimension,
            "hidden": self.hidden,
            "normalize": self.normalize,
            **(extra or {}),
        }
        (folder / ADAPTER_CONFIG).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, folder: str | Path) -> VectorAdapter:
        folder = Path(folder)
        try:
            config = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise SemsearchError(f"{folder} holds no readable {ADAPTER_CONFIG}: {exc}") from exc
        adapter = cls(config["dimension"], config["hidden"], config["normalize"])
        load_model(adapter, str(folder / ADAPTER_WEIGHTS))
        return adapter.eval()


@dataclass
class AdapterConfig:
    """How to train an adapter; the defaults suit a few thousand pairs."""

    objective: str = "contrastive"
    objective_options: dict[str, Any] = field(default_factory=dict)
    hidden: int | None = None
    epochs: int = 20
    batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 0.01
    seed: int = 0

    def __post_init__(self) -> None:
        self.objective = self.objective.replace("_", "-")
        if self.objective not in ADAPTER_OBJECTIVES:
            raise SemsearchError(
                f"the adapter trains with {', '.join(ADAPTER_OBJECTIVES)}, not {self.objective!r}"
            )
        if self.epochs < 1 or self.batch_size < 1:
            raise SemsearchError("epochs and batch size must be at least 1")


@dataclass(frozen=True)
class AdapterResult:
    output_dir: Path
    pairs: int
    loss_before: float
    loss_after: float
    epoch_losses: list[float]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "output_dir": str(self.output_dir)}


def train_adapter(
    vectors: np.ndarray, pairs: VectorPairs, config: AdapterConfig, output_dir: str | Path
) -> AdapterResult:
    """Train an adapter on `pairs` of rows of `vectors`, save it in `output_dir`."""
    started = time.monotonic()
    torch.manual_seed(config.seed)
    table = torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32))
    adapter = VectorAdapter(table.shape[1], config.hidden)
    loss = build_loss(config.objective, adapter, **config.objective_options)  # type: ignore[arg-type]
    optimizer = make_optimizer(loss, config.learning_rate, config.weight_decay)
    everything = np.arange(len(pairs))
    loss_before = _pairs_loss(loss, adapter, table, pairs, everything)
    rng = np.random.default_rng(config.seed)
    epoch_losses = []
    for _ in range(config.epochs):
        order = rng.permutation(len(pairs))
        values = []
        for start in range(0, len(order), config.batch_size):
            value = _pairs_loss(
                loss, adapter, table, pairs, order[start : start + config.batch_size], train=True
            )
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            values.append(value)
        epoch_losses.append(float(np.mean(values)))
    loss_after = _pairs_loss(loss, adapter, table, pairs, everything)
    output_dir = Path(output_dir)
    result = AdapterResult(
        output_dir,
        len(pairs),
        loss_before,
        loss_after,
        epoch_losses,
        round(time.monotonic() - started, 2),
    )
    adapter.save(
        output_dir,
        {
            "objective": config.objective,
            "training": asdict(config),
            "result": {k: v for k, v in result.to_dict().items() if k != "output_dir"},
        },
    )
    save_head(loss, config.objective, config.objective_options, output_dir)
    return result


def _pairs_loss(
    loss: SiameseLoss,
    adapter: VectorAdapter,
    table: torch.Tensor,
    pairs: VectorPairs,
    rows: np.ndarray,
    train: bool = False,
) -> float:
    """The objective on `rows` of the pairs; with `train`, its gradient is left in place."""
    loss.train(train)
    with torch.set_grad_enabled(train):
        first = adapter(table[torch.from_numpy(pairs.first[rows])])
        second = adapter(table[torch.from_numpy(pairs.second[rows])])
        value = loss.compute([first, second], torch.from_numpy(pairs.labels[rows]))
        if train:
            value.backward()
    return float(value.detach())
