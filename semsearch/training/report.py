"""What a run leaves to read: `train_log.jsonl`, `training.png`, and the result `train` returns.

Records carry an `event`: `train` (mean loss and learning rate over the last steps),
`eval` (dev metrics, the primary one, whether it is the best so far), `resume` and `test`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semsearch.training.checkpoint import LOG_FILE

PLOT_FILE = "training.png"


@dataclass(frozen=True)
class TrainingResult:
    """What `train` reports; the same figures are in `training.json` and the model card."""

    output_dir: Path
    steps: int
    seconds: float
    resumed_from: int | None
    dev_primary: str | None
    dev_best: float | None
    dev_best_step: int | None  # 0: no step beat the starting point, which is what was kept
    test_metrics: dict[str, float] | None
    dev_before: float | None = None  # the starting point's dev figure
    dev_best_trained: float | None = None  # the best dev figure of a fine-tuned step

    @property
    def kept_starting_point(self) -> bool:
        """True when fine-tuning did not beat the starting point on dev (so it was kept)."""
        return self.dev_best_step == 0

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "output_dir": str(self.output_dir)}

    def dev_record(self) -> dict[str, Any] | None:
        """What `training.json` says of dev (None without dev data)."""
        if self.dev_primary is None:
            return None
        return {
            "primary": self.dev_primary,
            "best": self.dev_best,
            "best_step": self.dev_best_step,
            "before": self.dev_before,
            "best_trained": self.dev_best_trained,
            "kept_starting_point": self.kept_starting_point,
        }


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

    def dev_figures(self) -> tuple[float | None, float | None]:
        """The starting point's dev figure and the best of the fine-tuned steps."""
        evaluations = [r for r in self.records() if r.get("event") == "eval"]
        before = next((r["value"] for r in evaluations if r.get("baseline")), None)
        trained = [r["value"] for r in evaluations if not r.get("baseline")]
        return before, max(trained, default=None)

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
