"""The sentences a benchmark runs on: n distinct ones from the shared data or a user's file.

From the shared data folder, n sentences are a seeded sample of STS-B's distinct sentences
(train, dev and test: 15,487) when n fits, and of the distinct PyPI summaries otherwise
(n = 100,000). A user's file is a text file with one sentence per line; its first n
distinct lines are taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from semsearch.errors import SemsearchError
from semsearch.evaluation.datasets import read_stsb
from semsearch.io.inputs import read_lines
from semsearch.options import DEFAULT_DATA_DIR

STSB_FILES = tuple(f"stsb/stsb_{split}.tsv.gz" for split in ("train", "dev", "test"))
PYPI_FILE = "pypi/pypi_summaries.parquet"


@dataclass(frozen=True)
class SentenceSet:
    """Distinct texts and a few words on where they come from."""

    texts: list[str]
    source: str

    def __len__(self) -> int:
        return len(self.texts)


def load_sentences(
    n: int, data_dir: Path = DEFAULT_DATA_DIR, file: Path | None = None, seed: int = 0
) -> SentenceSet:
    """`n` distinct sentences from `file`, or from the shared data in `data_dir`."""
    if n < 2:
        raise SemsearchError(f"--n must be at least 2 (a pair needs two sentences), not {n}")
    if file is not None:
        texts = list(dict.fromkeys(read_lines(file)))
        _check_enough(n, len(texts), f"distinct lines in {file}")
        return SentenceSet(texts[:n], f"first {n} distinct lines of {file.name}")
    texts = stsb_sentences(data_dir)
    if n <= len(texts):
        return SentenceSet(_sample(texts, n, seed), f"STS-B sentences (sample of {len(texts)})")
    summaries = pypi_summaries(data_dir)
    _check_enough(n, len(summaries), f"distinct PyPI summaries in {data_dir / PYPI_FILE}")
    return SentenceSet(_sample(summaries, n, seed), f"PyPI summaries (sample of {len(summaries)})")


def stsb_sentences(data_dir: Path) -> list[str]:
    """Every distinct sentence of STS-B's three splits, in file order."""
    texts: list[str] = []
    for name in STSB_FILES:
        columns = read_stsb(_shared_file(data_dir, name))
        texts += columns["sentence1"] + columns["sentence2"]
    return list(dict.fromkeys(text for text in texts if text.strip()))


def pypi_summaries(data_dir: Path) -> list[str]:
    """Every distinct, non-blank PyPI summary, in file order."""
    column = pq.read_table(_shared_file(data_dir, PYPI_FILE), columns=["summary"]).column(0)
    distinct = pc.unique(column.combine_chunks()).to_pylist()
    return [text for text in distinct if text and text.strip()]


def _shared_file(data_dir: Path, name: str) -> Path:
    path = data_dir / name
    if not path.is_file():
        raise SemsearchError(
            f"{path} does not exist: point --data-dir at the shared data folder, or pass --file"
        )
    return path


def _check_enough(n: int, available: int, what: str) -> None:
    if n > available:
        raise SemsearchError(f"--n {n} is more than the {available} {what}: choose a smaller n")


def _sample(texts: list[str], n: int, seed: int) -> list[str]:
    rows = np.sort(np.random.default_rng(seed).choice(len(texts), size=n, replace=False))
    return [texts[row] for row in rows]
