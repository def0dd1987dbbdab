"""Fixtures shared by the command-line tests: a command runner on the tiny model and a
small BEIR folder."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from cli.support import runner
from click.testing import Result
from training.tiny_data import PAIRS

from semsearch.cli.app import app


@pytest.fixture()
def cli(tmp_path: Path, tiny_model_dir: Path) -> Callable[..., Result]:
    """Run `semsearch ARGS` with the tiny model (`cli.model`) and a temporary index folder
    (`cli.index_dir`); exceptions propagate, so a traceback fails the test."""

    def run(*args: str) -> Result:
        return runner.invoke(app, [*args], catch_exceptions=False)

    run.index_dir = str(tmp_path / "idx")
    run.model = str(tiny_model_dir)
    return run


@pytest.fixture()
def beir(tmp_path: Path) -> Path:
    """A BEIR folder: each pair's first sentence a query, its second the relevant document."""
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    documents = [{"_id": f"doc{i}", "title": "", "text": pair[1]} for i, pair in enumerate(PAIRS)]
    queries = [{"_id": f"q{i}", "text": pair[0]} for i, pair in enumerate(PAIRS[:6])]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in documents))
    with gzip.open(folder / "queries.jsonl.gz", "wt") as handle:
        handle.write("".join(json.dumps(q) + "\n" for q in queries))
    qrels = "".join(f"q{i}\tdoc{i}\t1\n" for i in range(6))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return folder
