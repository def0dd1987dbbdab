"""Readers for the shared STS-B and SICK files, as the named columns losses and evaluators use.

The files are gzipped (or plain) TSV with a header and RFC-4180 quoting: a field holding a
double quote is quoted, so they are read with the csv module, never split on tabs.
"""

from __future__ import annotations

import csv
import gzip
from collections.abc import Iterator
from pathlib import Path

from semsearch.errors import SemsearchError

# SICK's entailment labels as class ids, in the order NLI data sets commonly use.
SICK_LABELS = ("CONTRADICTION", "ENTAILMENT", "NEUTRAL")
Columns = dict[str, list]


def read_stsb(path: str | Path) -> Columns:
    """STS-B pairs: `sentence1`, `sentence2` and `score`, the 0-5 gold divided by 5."""
    data: Columns = {"sentence1": [], "sentence2": [], "score": []}
    for number, row in _rows(Path(path), ("sentence1", "sentence2", "score")):
        data["sentence1"].append(row["sentence1"])
        data["sentence2"].append(row["sentence2"])
        data["score"].append(_number(row["score"], path, number) / 5)
    return data


def read_sick(path: str | Path) -> Columns:
    """SICK pairs: `sentence1`, `sentence2`, `label` (an index into `SICK_LABELS`) and
    `score`, the 1-5 relatedness mapped onto [0, 1] as (relatedness - 1) / 4."""
    data: Columns = {"sentence1": [], "sentence2": [], "label": [], "score": []}
    needed = ("sentence1", "sentence2", "relatedness_score", "entailment_label")
    for number, row in _rows(Path(path), needed):
        label = row["entailment_label"].strip().upper()
        if label not in SICK_LABELS:
            raise SemsearchError(f"{path} line {number}: unknown entailment label {label!r}")
        data["sentence1"].append(row["sentence1"])
        data["sentence2"].append(row["sentence2"])
        data["label"].append(SICK_LABELS.index(label))
        data["score"].append((_number(row["relatedness_score"], path, number) - 1) / 4)
    return data


def _rows(path: Path, needed: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) pairs, after checking the header has the needed columns."""
    if not path.is_file():
        raise SemsearchError(f"no such file: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t")
        missing = [column for column in needed if column not in (reader.fieldnames or [])]
        if missing:
            raise SemsearchError(f"{path} has no column(s) {', '.join(missing)}")
        for row in reader:
            yield reader.line_num, row


def _number(text: str | None, path: str | Path, line: int) -> float:
    try:
        return float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise SemsearchError(f"{path} line {line}: {text!r} is not a number") from None
