"""What a run leaves to read: `train_log.jsonl` (one JSON record per line) and `training.png`.

Records carry an `event`: `train` (mean loss and learning rate over the last steps),
`eval` (dev metrics, the primary one, whether it is the best so far), `resume` and `test`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from semsearch.training.checkpoint import LOG_FILE

PLOT_FILE = "training.png"


class TrainingLog:
    """An append-only JSON-lines file, flushed per record so a crash loses nothing logged."""

    def __init__(self, output_dir: Path) -> None:
        self.path = output_dir / LOG_FILE

    def write(self, event: str, **values: Any) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"event": event, **values}, default=float) + "\n")

    def records(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def keep_until(self, step: int) -> None:
        """Forget what was logged after `step` (the steps a resumed run will redo)."""
        kept = [record for record in self.records() if record.get("step", 0) <= step]
        text = "".join(json.dumps(record) + "\n" for record in kept)
        self.path.write_text(text, encoding="utf-8")


def plot_training(records: list[dict[str, Any]], path: Path, title: str = "") -> None:
    """Training loss against step and, on a second axis, the dev metric."""
    from matplotlib.figure import Figure  # a bare Figure draws with Agg, no display needed

    losses = [(r["step"], r["loss"]) for r in records if r["event"] == "train"]
    evals = [(r["step"], r["value"]) for r in records if r["event"] == "eval"]
    figure = Figure(figsize=(7, 4), layout="constrained")
    axes = figure.add_subplot()
    if losses:
        axes.plot(*zip(*losses), color="tab:blue", label="training loss")
    axes.set_xlabel("step")
    axes.set_ylabel("training loss", color="tab:blue")
    if evals:
        metric = next(r["primary"] for r in records if r["event"] == "eval")
        dev_axes = axes.twinx()
        dev_axes.plot(*zip(*evals), color="tab:orange", marker="o", label=f"dev {metric}")
        dev_axes.set_ylabel(f"dev {metric}", color="tab:orange")
    if title:
        axes.set_title(title)
    figure.savefig(path, dpi=110)
