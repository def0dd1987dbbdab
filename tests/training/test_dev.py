"""Which evaluator measures dev data, chosen from its columns."""

from __future__ import annotations

import pytest

from semsearch.errors import SemsearchError
from semsearch.evaluation import (
    InformationRetrievalEvaluator,
    PairClassificationEvaluator,
    STSEvaluator,
)
from semsearch.training.data import TrainingData, choose_task, make_evaluator, retrieval_data


def _data(**columns) -> TrainingData:
    return TrainingData(
        columns=columns, source="dev.csv", rows_read=len(next(iter(columns.values())))
    )


def test_the_task_follows_the_columns() -> None:
    scored = _data(sentence1=["a", "b"], sentence2=["c", "d"], score=[0.1, 0.9], label=[0, 1])
    assert isinstance(make_evaluator(scored), STSEvaluator)
    assert isinstance(make_evaluator(scored, "pairs"), PairClassificationEvaluator)
    assert isinstance(
        make_evaluator(_data(anchor=["q"], positive=["p"])), InformationRetrievalEvaluator
    )


def test_data_that_fits_no_task_lists_what_each_needs() -> None:
    with pytest.raises(
        SemsearchError, match="sts: sentence1, sentence2, score.*its columns are: text"
    ):
        choose_task(_data(text=["a"]))
    with pytest.raises(SemsearchError, match="cannot be measured as ir: it lacks anchor, positive"):
        choose_task(_data(sentence1=["a"], sentence2=["b"], score=[1.0]), "ir")


def test_retrieval_data_from_positive_pairs() -> None:
    data = retrieval_data(["q0", "q1", "q2"], ["p", "p", "r"])
    assert data.corpus == {"d0": "p", "d1": "r"}
    assert data.qrels == {"q0": {"d0": 1}, "q1": {"d0": 1}, "q2": {"d1": 1}}
