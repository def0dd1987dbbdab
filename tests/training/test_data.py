"""Reading training data: readers, column mapping, labels, and the errors a user can fix."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from semsearch.errors import SemsearchError
from semsearch.training.data import DataOptions, prepare_training_data, read_source, split_source


def test_reader_prefixes_and_plain_paths(stsb_file, sick_file) -> None:
    assert split_source(f"stsb:{stsb_file}") == ("stsb", stsb_file)
    assert split_source("C:/data/x.csv")[0] is None  # an unknown prefix is part of the path
    stsb = read_source(f"stsb:{stsb_file}")
    assert stsb.names == ["sentence1", "sentence2", "score"] and stsb.columns["score"][
        0
    ] == pytest.approx(0.92)
    sick = read_source(f"sick:{sick_file}")
    assert sick.label_names == ["CONTRADICTION", "ENTAILMENT", "NEUTRAL"]
    assert len(sick) == len(stsb) == 16


def test_columns_are_mapped_onto_the_objective_names(pairs_file) -> None:
    options = DataOptions(
        str(pairs_file),
        columns={"sentence1": "question", "sentence2": "answer", "score": "similarity"},
        score_max=5,
    )
    data = prepare_training_data("cosine", options, seed=0)
    assert data.columns["sentence1"][0] == "A man is playing a guitar."
    assert data.columns["score"][0] == pytest.approx(0.92)


def test_a_missing_column_names_what_is_needed_and_what_is_there(pairs_file) -> None:
    with pytest.raises(SemsearchError) as error:
        prepare_training_data("triplet", DataOptions(str(pairs_file)), seed=0)
    message = str(error.value)
    assert (
        "anchor, positive, negative" in message
        and "question, answer, similarity, is_dup" in message
    )
    assert "--column" in message and "\n" not in message


def test_a_mapping_to_a_column_that_does_not_exist(pairs_file) -> None:
    with pytest.raises(SemsearchError, match="column 'query' .*--column sentence1=query.*question"):
        read_source(str(pairs_file), {"sentence1": "query"})


def test_missing_files_are_one_clear_error(tmp_path) -> None:
    with pytest.raises(SemsearchError, match="does not exist"):
        read_source(str(tmp_path / "nope.parquet"))
    with pytest.raises(SemsearchError, match="no such file"):
        read_source(f"stsb:{tmp_path / 'nope.tsv.gz'}")


def test_cosine_refuses_scores_outside_zero_one(pairs_file) -> None:
    options = DataOptions(
        str(pairs_file),
        columns={"sentence1": "question", "sentence2": "answer", "score": "similarity"},
    )
    with pytest.raises(SemsearchError, match="--score-max"):
        prepare_training_data("cosine", options, seed=0)
    assert len(prepare_training_data("cosent", options, seed=0)) == 16  # only the order matters


def test_text_labels_become_class_ids_and_text_numbers_floats(tmp_path) -> None:
    path = tmp_path / "nli.csv"
    path.write_text("sentence1,sentence2,label\na,b,yes\nc,d,no\ne,f,maybe\n")
    data = prepare_training_data("softmax", DataOptions(str(path)), seed=0)
    assert data.label_names == ["maybe", "no", "yes"] and data.columns["label"] == [2, 1, 0]
    binary = tmp_path / "binary.csv"
    binary.write_text("sentence1,sentence2,label\na,b,1\nc,d,0\n")
    assert prepare_training_data("bce", DataOptions(str(binary)), seed=0).columns["label"] == [
        1.0,
        0.0,
    ]


def test_non_binary_labels_for_a_binary_objective(tmp_path) -> None:
    path = tmp_path / "three.csv"
    path.write_text("sentence1,sentence2,label\na,b,0\nc,d,2\n")
    with pytest.raises(SemsearchError, match="0/1 labels"):
        prepare_training_data("contrastive", DataOptions(str(path)), seed=0)


def test_rows_with_an_empty_text_are_dropped_and_counted(tmp_path) -> None:
    path = tmp_path / "pairs.parquet"
    pq.write_table(
        pa.table({"anchor": ["a", "", "c", None], "positive": ["x", "y", " ", "w"]}), path
    )
    data = prepare_training_data("mnr", DataOptions(str(path)), seed=0)
    assert data.columns == {"anchor": ["a"], "positive": ["x"]} and data.rows_dropped == 3
