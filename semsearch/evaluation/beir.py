"""Reading a BEIR-format retrieval folder: corpus, queries and relevance judgements.

Layout: `corpus.jsonl`, `queries.jsonl` and `qrels/<split>.tsv`, each optionally gzipped.
"""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from semsearch.errors import SemsearchError


@dataclass(frozen=True)
class RetrievalData:
    """Documents and queries by id, and qrels: {query id: {document id: relevance grade}}."""

    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def read_beir(folder: str | Path, split: str = "test") -> RetrievalData:
    """Read a BEIR folder; a document's text is its title and body joined by a space."""
    folder = Path(folder)
    corpus = {
        str(row["_id"]): f"{row.get('title') or ''} {row.get('text') or ''}".strip()
        for row in _jsonl(_find(folder, "corpus.jsonl"))
    }
    queries = {str(row["_id"]): row["text"] for row in _jsonl(_find(folder, "queries.jsonl"))}
    qrels = _read_qrels(_find(folder, f"qrels/{split}.tsv"))
    unknown = {query for query in qrels if query not in queries}
    if unknown:
        raise SemsearchError(
            f"qrels of {folder} judge {len(unknown)} queries missing from queries.jsonl"
        )
    return RetrievalData(corpus=corpus, queries=queries, qrels=qrels)


def _find(folder: Path, name: str) -> Path:
    for path in (folder / name, folder / f"{name}.gz"):
        if path.is_file():
            return path
    raise SemsearchError(f"{folder} is not a BEIR folder: it has no {name} (or {name}.gz)")


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _jsonl(path: Path) -> Iterator[dict]:
    with _open(path) as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise SemsearchError(f"{path} line {number} is not JSON: {exc}") from exc


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with _open(path) as handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t"), start=1):
            if number == 1 and row[:1] == ["query-id"]:
                continue  # the header
            try:
                query, document, grade = row[0], row[1], int(row[2])
            except (IndexError, ValueError) as exc:
                raise SemsearchError(
                    f"{path} line {number}: expected query-id, corpus-id, score"
                ) from exc
            qrels.setdefault(query, {})[document] = grade
    return qrels
