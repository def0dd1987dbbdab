"""Choosing how to measure dev (and test) data during training, from the columns it has.

- `sts`: `sentence1`, `sentence2`, `score` -> Spearman of the cosine (STS-B, SICK);
- `pairs`: `sentence1`, `sentence2` and a 0/1 `label` -> average precision of the cosine;
- `ir`: `anchor`, `positive` -> nDCG@10 of finding each anchor's positive among all of them.
"""

from __future__ import annotations

from semsearch.errors import SemsearchError
from semsearch.evaluation import (
    Evaluator,
    InformationRetrievalEvaluator,
    LabelledPairs,
    PairClassificationEvaluator,
    RetrievalData,
    STSEvaluator,
)
from semsearch.training.data import TrainingData, number_column

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
