"""Small training files in the shared layouts (STS-B, SICK) and as a plain Parquet table.

Used by the training tests and the `train` / `eval` command tests; never the real data.
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

# (sentence1, sentence2, 0-5 score, entailment label): related pairs score high.
PAIRS = [
    (
        "A man is playing a guitar.",
        "A person plays an acoustic guitar on stage.",
        4.6,
        "ENTAILMENT",
    ),
    ("The cat sleeps on the sofa.", "A kitten is napping on the couch.", 4.2, "ENTAILMENT"),
    (
        "Stock markets fell sharply on Monday.",
        "Shares dropped steeply at the start of the week.",
        4.4,
        "ENTAILMENT",
    ),
    (
        "How do I compress a folder on Linux?",
        "Create a tar.gz archive of a directory.",
        3.6,
        "NEUTRAL",
    ),
    (
        "The recipe needs two eggs and some flour.",
        "Bake the cake for forty minutes.",
        2.0,
        "NEUTRAL",
    ),
    (
        "A library for parsing JSON quickly.",
        "Fast JSON decoding for Python programs.",
        4.0,
        "ENTAILMENT",
    ),
    ("A man is playing a guitar.", "Stock markets fell sharply on Monday.", 0.0, "NEUTRAL"),
    ("The cat sleeps on the sofa.", "The cat is wide awake and running.", 1.2, "CONTRADICTION"),
    ("A woman is slicing an onion.", "Someone is cutting an onion.", 4.8, "ENTAILMENT"),
    ("A dog runs in the park.", "No dog is running anywhere.", 1.0, "CONTRADICTION"),
    ("Two children play football.", "Kids are playing soccer outside.", 4.1, "ENTAILMENT"),
    ("A plane is taking off.", "An airplane leaves the runway.", 4.9, "ENTAILMENT"),
    ("The sun is shining.", "It is a cloudy and rainy day.", 0.8, "CONTRADICTION"),
    ("A boy reads a book.", "A bicycle leans against a wall.", 0.2, "NEUTRAL"),
    ("Prices rose last year.", "Inflation increased during the past year.", 3.8, "NEUTRAL"),
    ("A girl sings a song.", "A girl is singing.", 4.7, "ENTAILMENT"),
]


def write_stsb(path: Path, rows: int | None = None) -> Path:
    """STS-B's layout: sentence1, sentence2, score (0-5 as text), split; gzipped TSV."""
    pairs = PAIRS[:rows] if rows else PAIRS
    with gzip.open(path, "wt", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t")
        writer.writerow(["sentence1", "sentence2", "score", "split"])
        for first, second, score, _ in pairs:
            writer.writerow([first, second, f"{score:.3f}", "train"])
    return path


def write_sick(path: Path) -> Path:
    """SICK's layout, with 1-5 relatedness and the three entailment labels."""
    with gzip.open(path, "wt", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t")
        writer.writerow(
            ["pair_id", "sentence1", "sentence2", "relatedness_score", "entailment_label", "split"]
        )
        for number, (first, second, score, label) in enumerate(PAIRS):
            writer.writerow([number, first, second, f"{1 + score * 0.8:.1f}", label, "TRAIN"])
    return path


def write_pairs_parquet(path: Path) -> Path:
    """A plain table with its own column names: question, answer, similarity (0-5), is_dup."""
    table = pa.table(
        {
            "question": [pair[0] for pair in PAIRS],
            "answer": [pair[1] for pair in PAIRS],
            "similarity": [pair[2] for pair in PAIRS],
            "is_dup": [int(pair[2] >= 4) for pair in PAIRS],
        }
    )
    pq.write_table(table, path)
    return path
