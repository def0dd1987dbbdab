"""STS-B and SICK readers: real CSV quoting, scaled scores, label ids, clear errors."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from semsearch.errors import SemsearchError
from semsearch.evaluation import SICK_LABELS, read_sick, read_stsb


def _write_tsv(path: Path, rows: list[list[str]]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8", newline="") as handle:
        csv.writer(handle, delimiter="\t", lineterminator="\n").writerows(rows)
    return path


def test_stsb_scores_are_scaled_and_quoted_fields_kept_whole(tmp_path) -> None:
    path = _write_tsv(
        tmp_path / "stsb.tsv.gz",
        [
            ["sentence1", "sentence2", "score", "split"],
            ["A plane is taking off.", "An air plane is taking off.", "5.000", "train"],
            ['He said "hi"\tand left.', "He left.", "1.500", "train"],
        ],
    )
    raw = gzip.decompress(path.read_bytes()).decode("utf-8")
    assert '"He said ""hi""\tand left."' in raw  # the file really uses RFC-4180 quoting
    data = read_stsb(path)
    assert data["sentence1"][1] == 'He said "hi"\tand left.'
    assert data["sentence2"] == ["An air plane is taking off.", "He left."]
    assert data["score"] == pytest.approx([1.0, 0.3])


def test_sick_gives_label_ids_and_relatedness_in_unit_range(tmp_path) -> None:
    header = ["pair_id", "sentence1", "sentence2", "relatedness_score", "entailment_label", "split"]
    path = _write_tsv(
        tmp_path / "sick.tsv.gz",
        [
            header,
            ["1", "A boy runs.", "A kid runs.", "5", "ENTAILMENT", "train"],
            ["2", "A boy runs.", "Nobody runs.", "1", "CONTRADICTION", "train"],
            ["3", "A boy runs.", "A dog sits.", "3", "NEUTRAL", "train"],
        ],
    )
    data = read_sick(path)
    assert [SICK_LABELS[label] for label in data["label"]] == [
        "ENTAILMENT",
        "CONTRADICTION",
        "NEUTRAL",
    ]
    assert data["score"] == pytest.approx([1.0, 0.0, 0.5])


def test_problems_name_the_file_and_line(tmp_path) -> None:
    with pytest.raises(SemsearchError, match="no such file"):
        read_stsb(tmp_path / "absent.tsv.gz")
    no_score = _write_tsv(tmp_path / "a.tsv.gz", [["sentence1", "sentence2"], ["a", "b"]])
    with pytest.raises(SemsearchError, match="has no column\\(s\\) score"):
        read_stsb(no_score)
    bad = _write_tsv(tmp_path / "b.tsv.gz", [["sentence1", "sentence2", "score"], ["a", "b", "x"]])
    with pytest.raises(SemsearchError, match="line 2: 'x' is not a number"):
        read_stsb(bad)
    header = ["sentence1", "sentence2", "relatedness_score", "entailment_label"]
    odd = _write_tsv(tmp_path / "c.tsv.gz", [header, ["a", "b", "3", "MAYBE"]])
    with pytest.raises(SemsearchError, match="unknown entailment label 'MAYBE'"):
        read_sick(odd)
