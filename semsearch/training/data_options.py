"""`DataOptions`: where one dataset's training pairs come from and how they become columns.

Why a module of its own: a run's config (`config.py`) and a plan of several datasets
(`plan.py`, which the config holds) both describe data this way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from semsearch.options import DEV_TASKS, FORMATIONS, DevTask, Formation, check_choice


@dataclass
class DataOptions:
    """Where training pairs come from and how they become the objective's columns.

    Args:
        train: the training data, `PATH` (Parquet/CSV/TSV/JSONL) or `READER:PATH` with a
            reader for the shared files (`stsb:`, `sick:`); see `semsearch.training.data`.
        dev: data measured during training to keep the best checkpoint (None: keep the last).
        test: data measured once with the best model at the end, for the model card.
        columns: objective column -> file column, e.g. {"sentence1": "question"}.
        form: derive the objective's columns from scored pairs or positive pairs
            (`positives`, `triplets`, `binary`); `none` uses the columns as they are.
        positive_at: with `form`, a pair whose `score` is at least this is a positive.
        score_max: divide the `score` column by this (5 for 0-5 gold scores in a plain file).
        dev_task: how to measure `dev`: `sts`, `pairs`, `ir`, or `auto` (from its columns).
    """

    train: str
    dev: str | None = None
    test: str | None = None
    columns: dict[str, str] = field(default_factory=dict)
    form: Formation = "none"
    positive_at: float = 0.8
    score_max: float | None = None
    dev_task: DevTask = "auto"

    def __post_init__(self) -> None:
        check_choice("form", self.form, FORMATIONS)
        check_choice("dev task", self.dev_task, DEV_TASKS)
