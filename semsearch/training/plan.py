"""A training plan: several datasets in one run, each with its own objective, and the dev
(and test) sets whose metrics, combined, pick the best checkpoint.

A plan is a small YAML or JSON file (`semsearch train --plan plan.yaml -o OUTPUT`):

    mixing: round-robin          # or proportional (see semsearch.training.schedule)
    datasets:
      - name: stsb
        source: stsb:stsb_train.tsv.gz
        objective: cosent
      - name: debian
        source: debian_train.parquet
        objective: mnr
        columns: {anchor: short_description, positive: long_description}
        options: {scale: 20}     # keyword arguments of the objective
        weight: 1.0              # multiplies this dataset's loss
    dev:                         # the mean of their primary metrics, weighted, is `combined`
      - {name: stsb-dev, source: "stsb:stsb_dev.tsv.gz", task: sts}
      - name: debian-dev
        source: debian_dev.parquet
        columns: {anchor: short_description, positive: long_description}
        task: ir
    test: [...]                  # as dev; measured once with the kept model

A dataset takes the keys of a one-dataset run: `source`, `objective`, `columns`, `form`,
`positive_at`, `score_max`, `options`; an evaluation set takes `source`, `task`,
`columns`, `score_max`, `weight`. Relative paths are read from the plan file's folder.
Every mistake (an unknown key or objective, a missing source) is one `SemsearchError`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args

from semsearch.errors import SemsearchError, one_line
from semsearch.losses import loss_class
from semsearch.options import DEV_TASKS, FORMATIONS, OBJECTIVES, check_choice
from semsearch.training.data import DataOptions

Mixing = Literal["round-robin", "proportional"]
MIXINGS: tuple[str, ...] = get_args(Mixing)


@dataclass
class DatasetSpec:
    """One training dataset of a plan and the objective it trains with."""

    name: str
    source: str
    objective: str
    columns: dict[str, str] = field(default_factory=dict)
    form: str = "none"
    positive_at: float = 0.8
    score_max: float | None = None
    options: dict[str, Any] = field(default_factory=dict)
    weight: float = 1.0

    def __post_init__(self) -> None:
        where = f"dataset {self.name!r}"
        try:
            loss_class(self.objective)
        except SemsearchError:
            raise SemsearchError(
                f"{where}: unknown objective {self.objective!r}: choose one "
                f"of {', '.join(OBJECTIVES)}"
            ) from None
        self.objective = self.objective.replace("_", "-")
        check_choice("form", self.form, FORMATIONS, where)
        _check_weight(where, self.weight)

    def data_options(self) -> DataOptions:
        """The dataset as a one-dataset run's `DataOptions` (no dev or test)."""
        return DataOptions(
            train=self.source,
            columns=dict(self.columns),
            form=self.form,  # type: ignore[arg-type]
            positive_at=self.positive_at,
            score_max=self.score_max,
        )


@dataclass
class EvaluationSpec:
    """A dev or test set of a plan, measured as `task` (auto: from its columns)."""

    name: str
    source: str
    task: str = "auto"
    columns: dict[str, str] = field(default_factory=dict)
    score_max: float | None = None
    weight: float = 1.0

    def __post_init__(self) -> None:
        check_choice("task", self.task, DEV_TASKS, f"evaluation set {self.name!r}")
        _check_weight(f"evaluation set {self.name!r}", self.weight)

    def data_options(self) -> DataOptions:
        return DataOptions(train=self.source, columns=dict(self.columns), score_max=self.score_max)


@dataclass
class TrainingPlan:
    """The datasets of a run, how their batches mix, and the dev and test sets."""

    datasets: list[DatasetSpec]
    mixing: str = "round-robin"
    dev: list[EvaluationSpec] = field(default_factory=list)
    test: list[EvaluationSpec] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.datasets:
            raise SemsearchError("a training plan needs at least one dataset under 'datasets'")
        check_choice("mixing", self.mixing, MIXINGS, "the plan")
        for role, specs in (("datasets", self.datasets), ("dev", self.dev), ("test", self.test)):
            names = [spec.name for spec in specs]
            repeated = sorted({name for name in names if names.count(name) > 1})
            if repeated:
                raise SemsearchError(f"{role} names must differ: {', '.join(repeated)} repeats")

    @property
    def objective(self) -> str:
        """How the run's objective is named in logs and cards: `cosent+mnr`."""
        return "+".join(dict.fromkeys(spec.objective for spec in self.datasets))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any], base: Path | None = None) -> TrainingPlan:
        """A plan from its file's form; relative paths are taken from `base`."""
        if not isinstance(values, dict):
            raise SemsearchError(
                "a training plan is a mapping with 'datasets' (and 'dev', 'test', 'mixing')"
            )
        _check_keys("the plan", values, {item.name for item in fields(cls)})
        return cls(
            datasets=_specs(values.get("datasets"), "datasets", DatasetSpec, base),
            mixing=values.get("mixing", "round-robin"),
            dev=_specs(values.get("dev"), "dev", EvaluationSpec, base),
            test=_specs(values.get("test"), "test", EvaluationSpec, base),
        )


def read_plan(path: str | Path) -> TrainingPlan:
    """Read a plan file (`.yaml`, `.yml` or `.json`); see the module's docstring."""
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SemsearchError(
            f"cannot read the training plan {path}: {exc.strerror or exc}"
        ) from None
    try:
        if path.suffix.lower() == ".json":
            values = json.loads(text)
        else:
            import yaml

            values = yaml.safe_load(text)
    except ValueError as exc:  # json.JSONDecodeError and yaml.YAMLError's parse errors
        raise SemsearchError(
            f"{path} is not valid {path.suffix.lstrip('.') or 'YAML'}: {one_line(exc)}"
        ) from None
    except Exception as exc:  # noqa: BLE001 - yaml.YAMLError without importing yaml up front
        raise SemsearchError(f"{path} is not valid YAML: {one_line(exc)}") from None
    try:
        return TrainingPlan.from_dict(values, base=path.parent)
    except SemsearchError as exc:
        raise SemsearchError(f"{path}: {exc}") from None


def resolve_source(source: str, base: Path | None) -> str:
    """`source` with a relative path made relative to `base`; a reader prefix is kept."""
    if base is None:
        return source
    prefix, colon, rest = source.partition(":")
    reader = prefix if colon and prefix in ("stsb", "sick") else None
    path = Path(rest if reader else source).expanduser()
    if not path.is_absolute():
        path = base / path
    return f"{reader}:{path}" if reader else str(path)


def _specs(values: Any, role: str, spec_class: type, base: Path | None) -> list:
    if values is None:
        return []
    if not isinstance(values, list):
        raise SemsearchError(f"'{role}' must be a list of mappings")
    specs = []
    for number, value in enumerate(values, start=1):
        if not isinstance(value, dict):
            raise SemsearchError(f"{role} entry {number} must be a mapping with a 'source'")
        name = str(value.get("name") or f"{role.rstrip('s')}{number}")
        where = f"{role} entry {name!r}"
        _check_keys(where, value, {item.name for item in fields(spec_class)})
        required = ("source", "objective") if spec_class is DatasetSpec else ("source",)
        missing = [key for key in required if not value.get(key)]
        if missing:
            raise SemsearchError(f"{where} lacks {' and '.join(repr(key) for key in missing)}")
        for key in ("columns", "options"):
            if key in value and not isinstance(value[key], dict):
                raise SemsearchError(f"{where}: '{key}' must be a mapping")
        options = {**value, "name": name, "source": resolve_source(str(value["source"]), base)}
        specs.append(spec_class(**options))
    return specs


def _check_keys(where: str, values: dict, known: set[str]) -> None:
    unknown = sorted(set(values) - known)
    if unknown:
        raise SemsearchError(
            f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )


def _check_weight(where: str, weight: float) -> None:
    if not isinstance(weight, (int, float)) or weight <= 0:
        raise SemsearchError(f"{where}: weight must be a positive number, not {weight!r}")
