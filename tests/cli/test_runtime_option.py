"""`--runtime` on build, add and query: `auto` (the default) runs OpenVINO on a CPU, or torch
with one log line where it cannot; what ran is recorded in the operation, the answers are
torch's, and a bad name is refused in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli.support import error_line

ov = pytest.importorskip("openvino", reason="openvino is not installed (the cpu-runtime extra)")


@pytest.fixture(autouse=True)
def converted_once(monkeypatch: pytest.MonkeyPatch, openvino_tiny_model) -> None:
    monkeypatch.setattr(ov, "convert_model", lambda *args, **kwargs: openvino_tiny_model)


def _info(cli, name: str = "docs") -> dict:
    return json.loads(cli("info", name, "--index-dir", cli.index_dir, "--json").stdout)


def _ids(cli, text: str, runtime: str, name: str = "docs") -> list[str]:
    result = cli(
        "query",
        text,
        "--index",
        name,
        "--index-dir",
        cli.index_dir,
        "-k",
        "5",
        "--json",
        "--device",
        "cpu",
        "--runtime",
        runtime,
    )
    assert result.exit_code == 0, result.output
    return [json.loads(line)["id"] for line in result.stdout.splitlines()]


def test_build_add_and_query_on_openvino(cli, corpus_file, sentences, tmp_path) -> None:
    built = cli(
        "build",
        str(corpus_file),
        "--name",
        "docs",
        "--id-column",
        "doc_id",
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
        "--device",
        "cpu",
        "--runtime",
        "openvino",
    )
    assert built.exit_code == 0, built.output
    assert "encoder on openvino-" in built.stdout
    assert _info(cli)["operation"]["runtime"].startswith("openvino-")
    assert _ids(cli, sentences[2], "openvino") == _ids(cli, sentences[2], "torch")
    pq.write_table(
        pa.table({"doc_id": ["n1"], "text": ["a new row about guitars"], "topic": ["music"]}),
        tmp_path / "new.parquet",
    )
    added = cli(
        "add",
        str(tmp_path / "new.parquet"),
        "--index",
        "docs",
        "--index-dir",
        cli.index_dir,
        "--device",
        "cpu",
        "--runtime",
        "openvino",
    )
    assert added.exit_code == 0, added.output
    assert _info(cli)["operation"]["runtime"].startswith("openvino-")


def test_a_torch_build_records_torch(cli, corpus_file) -> None:
    built = cli(
        "build",
        str(corpus_file),
        "--name",
        "docs",
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
        "--device",
        "cpu",
        "--runtime",
        "torch",
    )
    assert built.exit_code == 0 and _info(cli)["operation"]["runtime"] == "torch"


def _build(cli, corpus_file: Path, name: str, *runtime: str):
    built = cli(
        "build",
        str(corpus_file),
        "--name",
        name,
        "--id-column",
        "doc_id",
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
        "--device",
        "cpu",
        "--index-type",
        "flat",
        *runtime,
    )
    assert built.exit_code == 0, built.output
    return built


def _vectors(cli, name: str) -> np.ndarray:
    return np.load(Path(cli.index_dir) / name / "segments" / "s000000" / "part-00000.npy")


@pytest.mark.default_runtime
def test_the_default_build_and_add_run_openvino_and_find_what_torch_finds(
    cli, corpus_file, sentences, tmp_path
) -> None:
    built = _build(cli, corpus_file, "docs")  # no --runtime: auto
    assert "encoder on openvino-" in built.stdout
    assert _info(cli)["operation"]["runtime"].startswith("openvino-")
    _build(cli, corpus_file, "docs-torch", "--runtime", "torch")
    assert _info(cli, "docs-torch")["operation"]["runtime"] == "torch"
    for text in sentences[:4]:
        assert _ids(cli, text, "auto") == _ids(cli, text, "torch", "docs-torch")
    got, expected = _vectors(cli, "docs"), _vectors(cli, "docs-torch")
    assert np.min(np.sum(got * expected, axis=1)) >= 0.999  # unit vectors: their cosine
    pq.write_table(
        pa.table({"doc_id": ["n1"], "text": ["a new row about guitars"], "topic": ["music"]}),
        tmp_path / "new.parquet",
    )
    added = cli(
        "add",
        str(tmp_path / "new.parquet"),
        "--index",
        "docs",
        "--index-dir",
        cli.index_dir,
        "--device",
        "cpu",
    )
    assert added.exit_code == 0, added.output
    assert _info(cli)["operation"]["runtime"].startswith("openvino-")


@pytest.mark.default_runtime
def test_without_openvino_the_default_build_runs_torch_after_one_line(
    cli, corpus_file, monkeypatch
) -> None:
    _build(cli, corpus_file, "docs-torch", "--runtime", "torch")
    monkeypatch.setitem(sys.modules, "openvino", None)  # `import openvino` raises ImportError
    built = _build(cli, corpus_file, "docs")
    assert built.stderr.count("openvino is not installed") == 1, built.stderr
    assert "encoder on torch" in built.stdout
    assert _info(cli)["operation"]["runtime"] == "torch"
    np.testing.assert_array_equal(_vectors(cli, "docs"), _vectors(cli, "docs-torch"))


def test_an_unknown_runtime_is_one_line(cli, corpus_file) -> None:
    result = cli(
        "build",
        str(corpus_file),
        "--model",
        cli.model,
        "--out-dir",
        cli.index_dir,
        "--device",
        "cpu",
        "--runtime",
        "onnx",
    )
    assert "unknown runtime 'onnx'" in error_line(result)
