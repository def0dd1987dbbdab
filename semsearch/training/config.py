"""`TrainingConfig`: every option of a training run, in one place that is logged and compared.

The options come in groups that travel together: `DataOptions` (where the examples come
from), `OptimizationOptions` (what shapes the learning) and `RunOptions` (how the run is
carried out and watched). The whole config is written into the checkpoint and the model
card; a run resumes only with the same options, except those in `FREE_ON_RESUME`, which
do not change what the model learns: where it is written, the test data, and `RunOptions`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from semsearch.errors import SemsearchError
from semsearch.losses import loss_class
from semsearch.models.model_folder import DEFAULT_MODEL
from semsearch.options import PRECISIONS, Precision, check_choice
from semsearch.training.data import DataOptions
from semsearch.training.plan import TrainingPlan

RANGE_ERROR = "eval_every must be >= 0, warmup_fraction within [0, 1] and learning_rate > 0"


@dataclass
class OptimizationOptions:
    """How the weights are updated: the steps, the optimiser and the arithmetic.

    Defaults follow SBERT: AdamW at lr 2e-5 with weight decay 0.01, linear warm-up over 10%
    of the steps then linear decay, batches of 16, gradients clipped at norm 1.

    Args:
        epochs: passes over the training data (ignored when `max_steps` is set).
        batch_size: examples per step.
        learning_rate: the peak learning rate, reached at the end of the warm-up.
        warmup_fraction: share of the steps with a linear warm-up.
        weight_decay: AdamW's weight decay.
        max_grad_norm: gradients are clipped to this norm.
        seed: seeds the shuffling, sampling and initialisation.
        max_steps: train exactly this many steps (the schedule spans them); for quick runs.
        precision: `auto` is bf16 autocast on CUDA and fp32 on the CPU.
    """

    epochs: int = 1
    batch_size: int = 16
    learning_rate: float = 2e-5
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    seed: int = 0
    max_steps: int | None = None
    precision: Precision = "auto"

    def __post_init__(self) -> None:
        check_choice("precision", self.precision, PRECISIONS)
        _check_at_least_one(self, ("epochs", "batch_size"))
        if self.max_steps is not None and self.max_steps < 1:
            raise SemsearchError(f"max steps must be at least 1, not {self.max_steps}")
        if not 0 <= self.warmup_fraction <= 1 or self.learning_rate <= 0:
            raise SemsearchError(RANGE_ERROR)


@dataclass
class RunOptions:
    """How a run is carried out and watched; none of it changes what the model learns, so
    a resumed run may change any of them.

    Args:
        eval_every: also measure dev every N steps (0: only at each epoch's end).
        log_every: write the mean loss to the log every N steps.
        checkpoint_every: save the resumable state every N steps (and at each evaluation).
        device: `auto`, `cpu`, `cuda`...
        show_progress: draw a progress bar.
    """

    eval_every: int = 0
    log_every: int = 10
    checkpoint_every: int = 200
    device: str = "auto"
    show_progress: bool = True

    def __post_init__(self) -> None:
        _check_at_least_one(self, ("log_every", "checkpoint_every"))
        if self.eval_every < 0:
            raise SemsearchError(RANGE_ERROR)


GROUPS = {"optimization": OptimizationOptions, "run": RunOptions}
FREE_ON_RESUME = frozenset({"output_dir", "test", *(item.name for item in fields(RunOptions))})


@dataclass
class TrainingConfig:
    """A training run: the objective, the data, the model, the optimisation and the run.

    One dataset is `objective` and `data`; several, each with its own objective, are a
    `plan` (then `data` is None and `objective` names the plan's objectives, `cosent+mnr`).

    Args:
        objective: a name from `semsearch.losses.OBJECTIVES`.
        data: see `DataOptions`.
        output_dir: the model folder to write (best model at its root, `checkpoint/` inside).
        model: the starting model: `default`, a model folder or a hub name.
        objective_options: keyword arguments of the objective's class (margin, scale...).
        pooling: replace the model's pooling (e.g. `attention`); None keeps it.
        normalize: L2-normalise sentence vectors or not; None keeps the model's choice. A
            classifier head (`softmax`) sees unit vectors as tiny features; SBERT trained it
            on unnormalised ones.
        optimization: see `OptimizationOptions`.
        run: see `RunOptions`.
        plan: several datasets and dev sets instead of `data`; see `semsearch.training.plan`.
    """

    objective: str | None
    data: DataOptions | None
    output_dir: Path
    model: str = DEFAULT_MODEL
    objective_options: dict[str, Any] = field(default_factory=dict)
    pooling: str | None = None
    normalize: bool | None = None
    optimization: OptimizationOptions = field(default_factory=OptimizationOptions)
    run: RunOptions = field(default_factory=RunOptions)
    plan: TrainingPlan | None = None

    def __post_init__(self) -> None:
        self.output_dir = Path(self.output_dir)
        if (self.data is None) == (self.plan is None):
            raise SemsearchError("a training run reads either one dataset or a plan of several")
        if self.plan is not None:
            if self.objective_options:
                raise SemsearchError("a plan gives each dataset's objective options ('options')")
            self.objective = self.plan.objective
            return
        if self.objective is None:
            raise SemsearchError("a one-dataset run needs an objective")
        loss_class(self.objective)  # an unknown objective fails here, with the list
        self.objective = self.objective.replace("_", "-")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready and flat (the groups' fields at the top, `data` nested), the form that
        checkpoints and `training.json` have always held; paths become strings."""
        values = asdict(self)
        values["output_dir"] = str(self.output_dir)
        if self.plan is None:
            del values["plan"]  # a one-dataset run's record stays as it always was
        for group in GROUPS:
            values.update(values.pop(group))
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainingConfig:
        """Read `to_dict`'s form back; keys no field knows are ignored."""
        known = {item.name for item in fields(cls)}
        options = {key: value for key, value in values.items() if key in known}
        if options.get("plan") is not None:
            options["plan"] = TrainingPlan.from_dict(options["plan"])
        if options.get("data") is not None:
            options["data"] = DataOptions(**options["data"])
        for group, group_class in GROUPS.items():
            names = {item.name for item in fields(group_class)}
            options[group] = group_class(**{k: v for k, v in values.items() if k in names})
        return cls(**options)

    def resume_differences(self, saved: dict[str, Any]) -> list[str]:
        """The options that differ from a checkpoint's and would change what is learnt."""
        # Both through JSON, so that a tuple and the list it was saved as compare equal.
        current, saved = (json.loads(json.dumps(values)) for values in (self.to_dict(), saved))
        changed = []
        for key in sorted(set(current) | set(saved)):
            before, after = saved.get(key), current.get(key)
            if key in FREE_ON_RESUME:
                continue
            if key == "plan":  # its test sets, like `data.test`, may change
                before, after = (dict(values or {}, test=None) for values in (before, after))
            if key == "data":
                before, after = before or {}, after or {}
                changed += [
                    f"data.{name}"
                    for name in sorted(set(before) | set(after))
                    if name not in FREE_ON_RESUME and before.get(name) != after.get(name)
                ]
            elif before != after:
                changed.append(key)
        return changed


def _check_at_least_one(options: object, names: tuple[str, ...]) -> None:
    for name in names:
        if getattr(options, name) < 1:
            raise SemsearchError(f"{name} must be at least 1, not {getattr(options, name)}")
