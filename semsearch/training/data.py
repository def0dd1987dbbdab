"""Training data: a file read into named columns, then shaped into what an objective reads.

A source is `PATH` (any corpus file semsearch reads: Parquet, CSV, TSV, JSON lines, each
optionally gzipped) or `READER:PATH`, where a reader knows a shared file's layout:

- `stsb:` STS-B -> `sentence1`, `sentence2`, `score` (the 0-5 gold divided by 5);
- `sick:` SICK -> `sentence1`, `sentence2`, `label` (3 entailment classes), `score`.

`columns` maps an objective's column onto a file's column ({"sentence1": "question"});
the file's own columns stay available, so one column may feed two roles.

Dev (and test) data is measured as the task its columns fit: `sts` (`sentence1`, `sentence2`,
`score`: Spearman of the cosine), `pairs` (a 0/1 `label`: average precision of the cosine) or
`ir` (`anchor`, `positive`: nDCG@10 of finding each anchor's positive among all of them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from semsearch.errors import SemsearchError
from semsearch.evaluation import (
    Evaluator,
    InformationRetrievalEvaluator,
    LabelledPairs,
    PairClassificationEvaluator,
    RetrievalData,
    STSEvaluator,
)
from semsearch.evaluation.datasets import SICK_LABELS, Columns, read_sick, read_stsb
from semsearch.io.corpus import open_corpus
from semsearch.losses import loss_class, require_columns
from semsearch.options import DEV_TASKS, FORMATIONS, DevTask, Formation, check_choice
from semsearch.training.formation import form_examples


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


READERS: dict[str, Callable[[Path], Columns]] = {"stsb": read_stsb, "sick": read_sick}
MAPPING_HINT = "map one with --column NAME=FILE_COLUMN"


@dataclass
class TrainingData:
    """Named columns of equal length, and where they came from (for the model card)."""

    columns: Columns
    source: str
    rows_read: int
    rows_dropped: int = 0
    label_names: list[str] | None = None  # class names, when labels were text
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()), []))

    @property
    def names(self) -> list[str]:
        return list(self.columns)

    def summary(self) -> dict:
        return {
            "source": self.source,
            "rows_read": self.rows_read,
            "rows_used": len(self),
            "rows_dropped": self.rows_dropped,
            "columns": self.names,
            "label_names": self.label_names,
            "notes": self.notes,
        }


def read_source(source: str, columns: Mapping[str, str] | None = None) -> TrainingData:
    """Read `PATH` or `READER:PATH` into columns, then apply the column mapping."""
    reader, path = split_source(source)
    data = READERS[reader](path) if reader else read_table(path)
    data = map_columns(data, columns or {}, source)
    label_names = list(SICK_LABELS) if reader == "sick" else None
    return TrainingData(
        columns=data, source=source, rows_read=_length(data), label_names=label_names
    )


def split_source(source: str) -> tuple[str | None, Path]:
    """`stsb:data/x.tsv.gz` -> ("stsb", path); a plain path -> (None, path)."""
    prefix, colon, rest = source.partition(":")
    if colon and prefix in READERS:
        return prefix, Path(rest).expanduser()
    return None, Path(source).expanduser()


def read_table(path: Path) -> Columns:
    """Every column of a corpus file as Python lists (CSV/TSV fields stay text)."""
    corpus = open_corpus(path)
    batches = list(corpus.batches())
    if not batches:
        return {name: [] for name in corpus.columns}
    return pa.Table.from_batches(batches).to_pydict()


def map_columns(data: Columns, columns: Mapping[str, str], source: str) -> Columns:
    """Add each `role: file column` of the mapping as a column named `role`."""
    mapped = dict(data)
    for role, column in columns.items():
        if column not in data:
            raise SemsearchError(
                f"column {column!r} (for --column {role}={column}) is not in {source}; "
                f"its columns are: {', '.join(data) or 'none'}"
            )
        mapped[role] = data[column]
    return mapped


def prepare_training_data(objective: str, options: DataOptions, seed: int) -> TrainingData:
    """Read `options.train` and shape it for `objective`: scale, form examples, check the
    columns, drop rows with an empty text, and turn labels into numbers."""
    data = read_source(options.train, options.columns)
    scale_scores(data, options.score_max)
    if options.form != "none":
        data.columns = form_examples(data.columns, options.form, options.positive_at, seed)
        data.notes.append(
            f"{options.form} formed from it (positive: score >= {options.positive_at})"
        )
    try:
        text_columns = require_columns(objective, data.names)
    except SemsearchError as exc:
        raise SemsearchError(f"{data.source}: {exc}; {MAPPING_HINT}") from None
    _drop_empty_texts(data, text_columns)
    if len(data) == 0:
        raise SemsearchError(f"{data.source} has no usable rows for objective {objective!r}")
    label = loss_class(objective).label_column
    if label is not None:
        data.columns[label], names = _numeric_labels(data, objective, label)
        data.label_names = names or data.label_names if objective == "softmax" else None
    return data


def read_eval_data(source: str, options: DataOptions) -> TrainingData:
    """Dev or test data: read and mapped like the training data, but not formed."""
    data = read_source(source, options.columns)
    scale_scores(data, options.score_max)
    return data


def scale_scores(data: TrainingData, score_max: float | None) -> None:
    if score_max is None or "score" not in data.columns:
        return
    if score_max <= 0:
        raise SemsearchError(f"--score-max must be positive, not {score_max}")
    values = _floats(data.columns["score"], "score", data.source)
    data.columns["score"] = [value / score_max for value in values]


def number_column(
    data: TrainingData, column: str, label_names: list[str] | None = None
) -> np.ndarray:
    """`column` as float64 numbers (class names in `label_names` become their ids)."""
    values = data.columns[column]
    if label_names and values and isinstance(values[0], str):
        index = {name: number for number, name in enumerate(label_names)}
        if any(value not in index for value in values):
            raise SemsearchError(f"{data.source}: a label is not one of {', '.join(label_names)}")
        values = [index[value] for value in values]
    try:
        return np.asarray([float(value) for value in values], dtype=np.float64)
    except (TypeError, ValueError):
        raise SemsearchError(
            f"{data.source}: column {column!r} holds a value that is not a number"
        ) from None


def _drop_empty_texts(data: TrainingData, text_columns: tuple[str, ...]) -> None:
    keep = [
        row
        for row in range(len(data))
        if all(_is_text(data.columns[name][row]) for name in text_columns)
    ]
    if len(keep) < len(data):
        data.rows_dropped = len(data) - len(keep)
        data.columns = {
            name: [values[row] for row in keep] for name, values in data.columns.items()
        }


def _numeric_labels(
    data: TrainingData, objective: str, column: str
) -> tuple[list, list[str] | None]:
    values = data.columns[column]
    if objective == "softmax":
        return _class_ids(values)
    numbers = _floats(values, column, data.source)
    if column == "label" and not set(numbers) <= {0.0, 1.0}:
        raise SemsearchError(
            f"objective {objective!r} needs 0/1 labels in column 'label', but {data.source} "
            f"has {sorted(set(numbers))[:5]}: map a binary column, or use --form binary"
        )
    if objective == "cosine" and numbers and not 0 <= min(numbers) <= max(numbers) <= 1:
        raise SemsearchError(
            f"objective 'cosine' fits cosines to scores in [0, 1], but the scores of "
            f"{data.source} span {min(numbers):g} to {max(numbers):g}: divide them with "
            "--score-max (5 for 0-5 gold scores)"
        )
    return numbers, None


def _class_ids(values: list) -> tuple[list[int], list[str] | None]:
    """Integers stay class ids; text labels become ids in sorted order, names kept."""
    try:
        return [int(str(value)) for value in values], None
    except ValueError:
        names = sorted({str(value) for value in values})
        index = {name: number for number, name in enumerate(names)}
        return [index[str(value)] for value in values], names


def _floats(values: list, column: str, source: str) -> list[float]:
    numbers = []
    for row, value in enumerate(values):
        try:
            numbers.append(float(value))
        except (TypeError, ValueError):
            raise SemsearchError(
                f"{source} row {row}: {value!r} in column {column!r} is not a number"
            ) from None
    return numbers


def _is_text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _length(columns: Columns) -> int:
    return len(next(iter(columns.values()), []))


NEEDS = {
    "sts": ("sentence1", "sentence2", "score"),
    "pairs": ("sentence1", "sentence2", "label"),
    "ir": ("anchor", "positive"),
}


def choose_task(data: TrainingData, task: str = "auto") -> str:
    """The task `data` can be measured with: the one asked for, or the first that fits."""
    if task != "auto":
        missing = [name for name in NEEDS[task] if name not in data.columns]
        if missing:
            raise SemsearchError(
                f"{data.source} cannot be measured as {task}: it lacks {', '.join(missing)} "
                f"(its columns are: {', '.join(data.names)})"
            )
        return task
    for candidate, needed in NEEDS.items():
        if all(name in data.columns for name in needed):
            return candidate
    wanted = "; ".join(f"{name}: {', '.join(needed)}" for name, needed in NEEDS.items())
    raise SemsearchError(
        f"{data.source} has none of the column sets an evaluation needs ({wanted}); "
        f"its columns are: {', '.join(data.names)}"
    )


def make_evaluator(data: TrainingData, task: str = "auto", name: str = "dev") -> Evaluator:
    """An evaluator over `data` for `task` (see the module's list)."""
    task = choose_task(data, task)
    columns = data.columns
    if task == "sts":
        return STSEvaluator(
            columns["sentence1"], columns["sentence2"], number_column(data, "score"), name=name
        )
    if task == "pairs":
        labels = [int(float(value)) for value in columns["label"]]
        if not set(labels) <= {0, 1}:
            raise SemsearchError(f"{data.source}: pair evaluation needs 0/1 labels in 'label'")
        pairs = LabelledPairs(columns["sentence1"], columns["sentence2"], labels)
        return PairClassificationEvaluator(pairs, name=name)
    return InformationRetrievalEvaluator(
        retrieval_data(columns["anchor"], columns["positive"]), name=name
    )


def retrieval_data(anchors: list[str], positives: list[str]) -> RetrievalData:
    """Each anchor a query whose one relevant document is its positive; equal positives
    are one document."""
    documents = list(dict.fromkeys(positives))
    document_id = {text: f"d{number}" for number, text in enumerate(documents)}
    queries = {f"q{number}": anchor for number, anchor in enumerate(anchors)}
    qrels = {f"q{number}": {document_id[positive]: 1} for number, positive in enumerate(positives)}
    corpus = {document_id[text]: text for text in documents}
    return RetrievalData(corpus=corpus, queries=queries, qrels=qrels)
